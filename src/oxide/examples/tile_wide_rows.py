"""Tile softmax and layer norm over rows of any width: the whole row in one tile while it
fits, in chunks through a loop past that, the chunk and the warps autotuned (ox.tile).

`tile_softmax` and `tile_layernorm` hold a whole row in one tile: fastest while the row
fits the block's registers, but a 65536-column f32 row is 256 elements a thread on 8
warps, and ptxas spills. `softmax_rows` and `layernorm_rows` take the row whole when it
fits one BN-column tile, and otherwise walk it in BN-column chunks, so a thread holds
BN / (32 * num_warps) elements whatever the width (Liger's kernels do the same past 32K
columns). `num_stages=2` loads the next chunk while this one is reduced. Which BN, how
many warps and stages is measured, not guessed: `softmax_tuned` and `layernorm_tuned`
are the kernels under `ox.autotune` over ROW_CONFIGS, tuned once per row shape (the
first launch at a new shape compiles and times each config, a few seconds).
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
CHUNK = 16384  # main()'s columns a block holds at once on the GPU: 64 f32 a thread on 8 warps
# (BN, num_warps, num_stages, occupancy) the tuned kernels choose from, each the fastest
# somewhere between 256 and 65536 columns (H200, 2026-12-04, f32 and bf16): the whole row
# in one tile up to 32768 columns, on more warps as it widens; chunks of 8192-16384 past.
ROW_CONFIGS = ((256, 4, 1, None), (1024, 4, 1, None), (4096, 8, 1, 4), (8192, 8, 1, 4),
               (8192, 8, 2, None), (8192, 16, 2, None), (16384, 8, 2, None),
               (32768, 16, 1, None), (32768, 32, 1, None))


@tile.kernel(num_warps=8, num_stages=2)
def softmax_rows(x: Slice[T, 2], out: DisjointSlice[T, 2], BN: Const[int]):
    """A row that fits one tile is read once. A wider one: an online softmax, one pass
    keeping the row's running maximum `m` and the sum `s` of 2^((x - m) log2 e) seen so
    far (each chunk rescales the sum by the maximum's change), a second writing the
    result. Columns past the row's end load as -inf and add 0."""
    row = tile.bid(0)
    chunks = tile.num_tiles(x, 1, BN)
    if chunks == 1:
        t = tile.load(x, (row, 0), (1, BN), padding=-math.inf).astype(f32)
        e = tile.exp2((t - tile.max(t)) * LOG2E)
        tile.store(out, (row, 0), (e * (1.0 / tile.sum(e))).astype(T))
        return
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


@tile.kernel(num_warps=8, num_stages=2)
def layernorm_rows(x: Slice[T, 2], w: Slice[T], b: Slice[T], out: DisjointSlice[T, 2],
                   eps: f32, BN: Const[int]):
    """A row that fits one tile is read once: the mean, then the squared deviations from
    it (no cancellation, unlike E[x^2] - E[x]^2). A wider one is read twice: each column
    of the chunk keeps Welford's running mean and sum of squared deviations over the
    chunks, and the columns are combined once at the end (Chan et al.'s pairwise
    formula); the second pass writes the output."""
    row = tile.bid(0)
    n = x.shape[1]
    chunks = tile.num_tiles(x, 1, BN)
    if chunks == 1:
        t = tile.load(x, (row, 0), (1, BN)).astype(f32)
        mean = tile.sum(t) / n
        d = tile.where(tile.arange(BN)[None, :] < n, t - mean, 0.0)
        rstd = tile.rsqrt(tile.sum(d * d) / n + eps)
        y = (d * rstd * tile.load(w, (0,), (BN,)).astype(f32)
             + tile.load(b, (0,), (BN,)).astype(f32))
        tile.store(out, (row, 0), y.astype(T))
        return
    means = tile.zeros((1, BN), f32)
    squares = tile.zeros((1, BN), f32)  # per column: the sum of squared deviations
    for c in range(chunks):
        t = tile.load(x, (row, c), (1, BN)).astype(f32)
        delta = tile.where(c * BN + tile.arange(BN)[None, :] < n, t - means, 0.0)
        means = means + delta * (1.0 / (c + 1))
        squares = squares + delta * (t - means)
    # a column past the row's end in the last chunk has seen one chunk fewer
    seen = tile.where(tile.arange(BN)[None, :] < n - (chunks - 1) * BN, f32(1.0) * chunks,
                      f32(1.0) * (chunks - 1))
    mean = tile.sum(seen * means) / n
    apart = means - mean
    rstd = tile.rsqrt(tile.sum(squares + seen * apart * apart) / n + eps)
    for c in range(chunks):
        t = tile.load(x, (row, c), (1, BN)).astype(f32)
        y = ((t - mean) * rstd * tile.load(w, (c,), (BN,)).astype(f32)
             + tile.load(b, (c,), (BN,)).astype(f32))
        tile.store(out, (row, c), y.astype(T))


_TUNING = [ox.Config(BN=bn, num_warps=warps, num_stages=stages, occupancy=occupancy)
           for bn, warps, stages, occupancy in ROW_CONFIGS]
softmax_tuned = ox.autotune(configs=_TUNING, key=["x"])(softmax_rows)
layernorm_tuned = ox.autotune(configs=_TUNING, key=["x"])(layernorm_rows)


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
        seconds = seconds_per_launch(lambda: ox.launch(softmax_rows, rows, d_x, d_soft,
                                                       chunk), dev)
        ox.launch(layernorm_rows, rows, d_x, d_w, d_b, d_norm, eps, chunk)
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
                         detail=check_arch(softmax_rows, arch, x, soft, chunk))


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
