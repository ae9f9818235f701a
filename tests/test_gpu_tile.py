"""ox.tile on the GPU: the tile examples at their GPU sizes, and the CPU suite's tile
kernels against NumPy (ragged edges, reductions along each axis, broadcasting)."""

from __future__ import annotations

import numpy as np
import pytest

import oxide as ox
from oxide import examples, tile

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", ["tile_vecadd", "tile_softmax", "tile_layernorm",
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
