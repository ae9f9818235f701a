"""Tile layer norm: one tile block per row, mean and variance by tile reductions (ox.tile)."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import Const, DisjointSlice, Slice, TypeVar, f32, tile
from oxide.testing import RunResult, check_arch, describe_device, seconds_per_launch

EPS = 1e-5
T = TypeVar("T")  # f32, or a 16-bit float (bf16, f16): the math is in f32 either way


@tile.kernel(num_warps="auto")
def tile_layernorm(x: Slice[T, 2], w: Slice[T], b: Slice[T], out: DisjointSlice[T, 2],
                   eps: f32, BN: Const[int]):
    """Columns past the row's end load as 0 and are masked out of the variance. 16-bit
    rows are computed in f32 and rounded once on the way out.

    `num_warps="auto"` sizes the block to the row (tile/auto_warps.py): 8 warps at 8192
    columns, 32 at 32768, with blocks enough for half an SM's threads, which caps a thread
    at 64 registers. At 8192 columns that is what was measured fastest by hand: with 8
    warps and four blocks per SM bf16 ran at 1.01x Triton, with two or three at 0.97x
    (H200, 2026-12-03, benchmarks/layernorm_variants.py); on a fixed 8 warps, 32768
    columns ran at 0.15x-0.19x (the row spilled)."""
    row = tile.bid(0)
    n = x.shape[1]
    t = tile.load(x, (row, 0), (1, BN)).astype(f32)
    mean = tile.sum(t, 1, keepdims=True) / n
    d = tile.where(tile.arange(BN)[None, :] < n, t - mean, 0.0)
    var = tile.sum(d * d, 1, keepdims=True) / n
    y = (d * tile.rsqrt(var + eps) * tile.load(w, (0,), (BN,)).astype(f32)
         + tile.load(b, (0,), (BN,)).astype(f32))
    tile.store(out, (row, 0), y.astype(T))


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """Layer norm of a `size` x (`size` + 5) matrix with weight and bias, against NumPy."""
    with ox.device(device) as dev:
        rows = size or (256 if dev.is_cpu else 8192)
        cols = rows + 5
        block = 1 << (cols - 1).bit_length()
        rng = np.random.default_rng(7)
        x = rng.standard_normal((rows, cols), dtype=np.float32) * 3 + 1
        w = rng.standard_normal(cols, dtype=np.float32)
        bias = rng.standard_normal(cols, dtype=np.float32)
        out = np.zeros_like(x)
        d_x, d_w, d_b, d_out = [ox.to_device(arr) for arr in (x, w, bias, out)]
        eps = np.float32(EPS)
        seconds = seconds_per_launch(lambda: ox.launch(tile_layernorm, rows, d_x, d_w, d_b,
                                                       d_out, eps, block), dev)
        x64 = x.astype(np.float64)
        mean = x64.mean(axis=1, keepdims=True)
        var = ((x64 - mean) ** 2).mean(axis=1, keepdims=True)
        want = (x64 - mean) / np.sqrt(var + EPS) * w + bias
        passed = bool(np.allclose(d_out.to_numpy(), want, rtol=1e-4, atol=1e-4))
        return RunResult("tile_layernorm", passed, describe_device(dev),
                         f"{rows:,} x {cols:,} f32", seconds, work=2 * 4 * rows * cols,
                         unit="GB/s",
                         detail=check_arch(tile_layernorm, arch, x, w, bias, out, eps,
                                           block))


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
