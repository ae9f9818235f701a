"""Tile softmax and layer norm over rows of any width, in chunks through a loop (ox.tile).

`tile_softmax` and `tile_layernorm` hold a whole row in one tile: fastest while the row
fits the block's registers, but a 32768-column f32 row is 128 elements a thread on 8
warps, and ptxas spills. These kernels walk the row in BN-column chunks instead, so a
thread holds BN / (32 * num_warps) elements whatever the width: one block per row, a
loop for the statistics, a loop for the output (Triton's layer-norm tutorial does the
same, Liger's kernels too past 32K columns).
"""

from __future__ import annotations

import math

import numpy as np

import oxide as ox
from oxide import Const, DisjointSlice, Slice, TypeVar, f32, tile
from oxide.testing import RunResult, check_arch, describe_device, seconds_per_launch

EPS = 1e-5
LOG2E = math.log2(math.e)
T = TypeVar("T")  # f32, or a 16-bit float (bf16, f16): the math is in f32 either way
CHUNK = 4096  # columns a block holds at once on the GPU: 16 f32 a thread on 8 warps


@tile.kernel(num_warps=8)
def softmax_chunks(x: Slice[T, 2], out: DisjointSlice[T, 2], BN: Const[int]):
    """Online softmax: one pass keeps the row's running maximum `m` and the sum `s` of
    2^((x - m) log2 e) seen so far (each chunk rescales the sum by the maximum's change),
    a second writes the result. Columns past the row's end load as -inf and add 0."""
    row = tile.bid(0)
    chunks = tile.num_tiles(x, 1, BN)
    m = f32(-math.inf)
    s = f32(0.0)
    for c in range(chunks):
        t = tile.load(x, (row, c), (1, BN), padding=-math.inf).astype(f32)
        m_new = tile.maximum(m, tile.max(t))  # finite from the first chunk on
        s = s * tile.exp2((m - m_new) * LOG2E) + tile.sum(tile.exp2((t - m_new) * LOG2E))
        m = m_new
    inv = 1.0 / s
    for c in range(chunks):
        t = tile.load(x, (row, c), (1, BN), padding=-math.inf).astype(f32)
        tile.store(out, (row, c), (tile.exp2((t - m) * LOG2E) * inv).astype(T))


@tile.kernel(num_warps=8)
def layernorm_chunks(x: Slice[T, 2], w: Slice[T], b: Slice[T], out: DisjointSlice[T, 2],
                     eps: f32, BN: Const[int]):
    """Two passes for the statistics (the mean, then the squared deviations from it:
    no cancellation, unlike E[x^2] - E[x]^2), a third for the output. Each pass sums
    per column of the chunk and reduces once at the end."""
    row = tile.bid(0)
    n = x.shape[1]
    chunks = tile.num_tiles(x, 1, BN)
    total = tile.zeros((1, BN), f32)
    for c in range(chunks):
        total = total + tile.load(x, (row, c), (1, BN)).astype(f32)
    mean = tile.sum(total) / n
    squares = tile.zeros((1, BN), f32)
    for c in range(chunks):
        t = tile.load(x, (row, c), (1, BN)).astype(f32)
        d = tile.where(c * BN + tile.arange(BN)[None, :] < n, t - mean, 0.0)
        squares = squares + d * d
    rstd = tile.rsqrt(tile.sum(squares) / n + eps)
    for c in range(chunks):
        t = tile.load(x, (row, c), (1, BN)).astype(f32)
        y = ((t - mean) * rstd * tile.load(w, (c,), (BN,)).astype(f32)
             + tile.load(b, (c,), (BN,)).astype(f32))
        tile.store(out, (row, c), y.astype(T))


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """Softmax and layer norm of `size` rows of 8 * `size` + 3 columns (wider than any
    whole-row tile that fits registers on the GPU), against NumPy; the time is the
    softmax's."""
    with ox.device(device) as dev:
        rows = size or (64 if dev.is_cpu else 4096)
        cols = 8 * rows + 3
        chunk = 256 if dev.is_cpu else CHUNK
        rng = np.random.default_rng(31)
        x = rng.standard_normal((rows, cols), dtype=np.float32) * 3 + 1
        w = rng.standard_normal(cols, dtype=np.float32)
        bias = rng.standard_normal(cols, dtype=np.float32)
        soft, norm = np.zeros_like(x), np.zeros_like(x)
        d_x, d_w, d_b, d_soft, d_norm = [ox.to_device(a) for a in (x, w, bias, soft, norm)]
        eps = np.float32(EPS)
        seconds = seconds_per_launch(lambda: ox.launch(softmax_chunks, rows, d_x, d_soft,
                                                       chunk), dev)
        ox.launch(layernorm_chunks, rows, d_x, d_w, d_b, d_norm, eps, chunk)
        x64 = x.astype(np.float64)
        e = np.exp(x64 - x64.max(axis=1, keepdims=True))
        want_soft = e / e.sum(axis=1, keepdims=True)
        mean = x64.mean(axis=1, keepdims=True)
        var = ((x64 - mean) ** 2).mean(axis=1, keepdims=True)
        want_norm = (x64 - mean) / np.sqrt(var + EPS) * w + bias
        passed = bool(np.allclose(d_soft.to_numpy(), want_soft, rtol=1e-4, atol=1e-9)
                      and np.allclose(d_norm.to_numpy(), want_norm, rtol=1e-4, atol=1e-4))
        return RunResult("tile_wide_rows", passed, describe_device(dev),
                         f"{rows:,} x {cols:,} f32 in chunks of {chunk:,}", seconds,
                         work=2 * 4 * rows * cols, unit="GB/s",
                         detail=check_arch(softmax_chunks, arch, x, soft, chunk))


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
