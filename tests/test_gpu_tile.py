"""ox.tile on the GPU: the tile examples at their GPU sizes, and the CPU suite's tile
kernels against NumPy (ragged edges, reductions along each axis, broadcasting)."""

from __future__ import annotations

import numpy as np
import pytest

import oxide as ox
from oxide import examples, tile

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", ["tile_vecadd", "tile_softmax", "tile_layernorm", "tile_matmul", "tile_attention",
                                  "tile_transpose"])
def test_tile_example_on_gpu(name):
    result = examples.load(name).main(device=0)
    assert result.passed, str(result)


@pytest.mark.parametrize("name,size", [("tile_vecadd", 1), ("tile_vecadd", 1000),
                                       ("tile_softmax", 3), ("tile_softmax", 1000),
                                       ("tile_layernorm", 5), ("tile_layernorm", 2049),
                                       ("tile_transpose", 33)])
def test_tile_example_ragged_sizes_on_gpu(name, size):
    result = examples.load(name).main(device=0, size=size)
    assert result.passed, str(result)


def test_tile_reductions_on_gpu():
    from test_tile_ops import reduce2d

    rng = np.random.default_rng(3)
    for kind, f in enumerate((np.sum, np.max, np.min)):
        for M, N, BM, BN in [(5, 100, 4, 128), (64, 33, 16, 64), (3, 1000, 1, 1024),
                             (40, 8, 64, 8)]:
            x = rng.standard_normal((M, N), dtype=np.float32)
            grid = tile.cdiv(M, BM)
            rows = ox.to_device(np.zeros((M, 1), np.float32))
            cols = ox.to_device(np.zeros((grid, N), np.float32))
            reduce2d[grid](ox.to_device(x), rows, cols, kind, BM, BN)
            got_rows, got_cols = rows.to_numpy(), cols.to_numpy()
            np.testing.assert_allclose(got_rows[:, 0], f(x, axis=1), rtol=1e-5, atol=1e-5)
            for g in range(grid):
                np.testing.assert_allclose(got_cols[g], f(x[g * BM:(g + 1) * BM], axis=0),
                                           rtol=1e-5, atol=1e-5)


def test_tile_outer_broadcast_on_gpu():
    from test_tile_ops import outer

    rng = np.random.default_rng(4)
    M, N = 300, 500
    a = rng.standard_normal(M, dtype=np.float32)
    b = rng.standard_normal(N, dtype=np.float32)
    o = ox.to_device(np.zeros((M, N), np.float32))
    outer[(tile.cdiv(M, 32), tile.cdiv(N, 32))](ox.to_device(a), ox.to_device(b), o, 32, 32)
    np.testing.assert_allclose(o.to_numpy(), a[:, None] * b[None, :] + b - a[:, None],
                               rtol=1e-6, atol=1e-6)


def test_tile_scans_argmax_loops_branches_on_gpu():
    """The CPU suite's kernels whose lowering uses shuffles and barriers in new ways."""
    from test_tile_ops import argreduce, branches, row_stats, scan_1d, scans

    rng = np.random.default_rng(5)
    x = rng.integers(-5, 5, (30, 64)).astype(np.int32)
    rows, cols = ox.to_device(np.zeros_like(x)), ox.to_device(np.zeros_like(x))
    scans[2](ox.to_device(x), rows, cols, 16, 64)
    np.testing.assert_array_equal(rows.to_numpy(), np.cumsum(x, 1))
    np.testing.assert_array_equal(cols.to_numpy()[:16], np.cumsum(x[:16], 0))
    for B in (32, 2048, 8192):
        v = rng.standard_normal(B, dtype=np.float32)
        o = ox.to_device(np.zeros(B, np.float32))
        scan_1d[1](ox.to_device(v), o, B)
        np.testing.assert_allclose(o.to_numpy(), np.cumsum(v, dtype=np.float64), rtol=1e-4,
                                   atol=1e-4)
    f = rng.integers(-4, 5, (64, 33)).astype(np.float32)
    r = ox.to_device(np.zeros((64, 1), np.int32))
    c = ox.to_device(np.zeros((4, 33), np.int32))
    w = ox.to_device(np.zeros(4, np.int32))
    argreduce[4](ox.to_device(f), r, c, w, 0, 16, 64)
    np.testing.assert_array_equal(r.to_numpy()[:, 0], np.argmax(f, 1))
    m = rng.standard_normal((37, 1000), dtype=np.float32)
    y = ox.to_device(np.zeros((37, 2), np.float32))
    row_stats[tile.cdiv(37, 8)](ox.to_device(m), y, 8, 128)
    got = y.to_numpy()
    np.testing.assert_allclose(got[:, 0], m.sum(1), rtol=1e-4, atol=1e-3)
    np.testing.assert_array_equal(got[:, 1], m.max(1))
    b = rng.standard_normal((12, 30), dtype=np.float32)
    yb = ox.to_device(np.zeros_like(b))
    branches[6](ox.to_device(b), yb, np.float32(1.5), 32)
    want = np.zeros_like(b)
    for k in range(6):
        t = b[2 * k:2 * k + 2]
        if t.max() > 1.5:
            want[2 * k:2 * k + 2] = t - t.sum(1, keepdims=True) + 1
        elif k % 2 == 0:
            want[2 * k:2 * k + 2] = t + 2
        else:
            want[2 * k:2 * k + 2] = 3
    np.testing.assert_allclose(yb.to_numpy(), want, rtol=1e-5, atol=1e-5)


def test_relaunch_with_rows_that_do_not_take_vectors_on_gpu():
    """A launch's binder knows the arrays' rows took 16-byte vectors (the specialization
    it launched): a view one element in (misaligned rows) must not reuse it, and the
    aligned arrays after it must get theirs back; every launch copies exactly."""
    torch = pytest.importorskip("torch")
    from test_tile_vector_access import copy2d

    backing = torch.randn(33 * 64 + 1, device="cuda")
    aligned = backing[:33 * 64].view(33, 64)
    misaligned = backing[1:].view(33, 64)
    grid = (tile.cdiv(33, 8), tile.cdiv(64, 32))
    for x in (aligned, misaligned, aligned, misaligned):
        out = torch.zeros_like(x)
        copy2d[grid](x, out, 8, 32)
        torch.cuda.synchronize()
        assert torch.equal(out, x)
