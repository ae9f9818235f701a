"""tile.mma on wgmma (tile/wgmma_lower.py) on an sm_90 GPU, against NumPy: K-major A,
MN-major and transposed (K-major) B, K of 16, 32 and multiples of 64, ragged edges, an
epilogue on the accumulator; and the same kernels with OXIDE_TILE_WGMMA=0 (mma.sync)."""

from __future__ import annotations

import numpy as np
import pytest
import test_tile_mma as tm

import oxide as ox
from oxide import Const, DisjointSlice, Slice, bf16, f32, tile

pytestmark = pytest.mark.gpu

CASES = [  # dtype, warps, M, N, K, BM, BN, BK (BM = 16 * warps: one warp group per 64 rows)
    (bf16, 4, 200, 300, 100, 64, 64, 32),    # ragged everywhere, 64-byte swizzle
    (bf16, 4, 64, 128, 16, 64, 128, 16),     # one k16 step, 32-byte swizzle, two B slabs
    (bf16, 8, 256, 256, 192, 128, 256, 64),  # two warp groups, N = 256, 128-byte swizzle
    (bf16, 4, 130, 70, 300, 64, 64, 128),    # two 128-byte slabs of A per tile
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_wgmma_products_against_numpy(case) -> None:
    dt, *rest = case
    got, want = tm.run_matmul(dt, *rest, run=_gpu)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.sqrt(rest[3]))


def test_the_products_compile_to_wgmma_on_sm_90() -> None:
    mm = tm.make_matmul(bf16, f32, 8)
    sig = (Slice[bf16, 2], Slice[bf16, 2], DisjointSlice[f32, 2], 128, 256, 64)
    ptx = mm.compile(*sig, arch="sm_90").ptx
    assert ptx.count("wgmma.mma_async") == 4 and "mma.sync" not in ptx


@tile.kernel(num_warps=4)
def linear_bias_relu(x: Slice[bf16, 2], w: Slice[bf16, 2], bias: Slice[f32],
                     y: DisjointSlice[bf16, 2], BM: Const[int], BN: Const[int], BK: Const[int]):
    """y = relu(x @ w.T + bias), w as a torch Linear keeps it (N x K)."""
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(x, 1, BK)):
        acc = tile.mma(tile.load(x, (i, k), (BM, BK)),
                       tile.load(w, (j, k), (BN, BK)).permute((1, 0)), acc)
    acc = tile.maximum(acc + tile.load(bias, (j,), (BN,))[None, :], 0.0)
    tile.store(y, (i, j), acc.astype(bf16))


def test_a_transposed_weight_with_an_epilogue() -> None:
    rng = np.random.default_rng(5)
    m, n, k = 333, 190, 256
    x = rng.standard_normal((m, k)).astype(bf16.numpy)
    w = rng.standard_normal((n, k)).astype(bf16.numpy)
    bias = rng.standard_normal(n).astype(np.float32)
    y = np.zeros((m, n), bf16.numpy)
    _gpu(linear_bias_relu, (tile.cdiv(m, 64), tile.cdiv(n, 64)), x, w, bias, y, 64, 64, 64)
    want = np.maximum(x.astype(np.float64) @ w.astype(np.float64).T + bias, 0)
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=1e-2, atol=6e-2)
    ptx = linear_bias_relu.compile(x, w, bias, y, 64, 64, 64, arch="sm_90").ptx
    assert "wgmma.mma_async" in ptx


def _gpu(kernel, grid, *args):
    dev = [ox.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    kernel[grid](*dev)
    for a, d in zip(args, dev, strict=True):
        if isinstance(a, np.ndarray):
            a[...] = d.to_numpy()
