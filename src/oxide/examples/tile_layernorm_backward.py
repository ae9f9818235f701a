"""Tile layer norm backward: dx per row, dw and db by per-block partial sums (ox.tile).

The forward (`tile_layernorm`) computes y = (x - mean) * rstd * w + b per row; training
needs the gradients. Given dy and what the forward saved (mean and rstd per row):

    xhat = (x - mean) * rstd,   g = dy * w
    dx   = rstd * (g - mean(g * xhat) * xhat - mean(g))     (means along the row)
    dw   = sum over rows of dy * xhat,   db = sum over rows of dy

dx is a row's own business. dw and db sum over every row: each of a few blocks walks its
share of the rows (`tile.tiles`: the persistent loop) and keeps its partial sums in
registers, stores them as one row of a (blocks, N) array, and a second kernel adds those
rows up. No atomics, so the result is the same bits on every run (Triton's tutorial
does the same with a lock and atomics instead).
"""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import Const, DisjointSlice, Slice, TypeVar, f32, tile
from oxide.testing import RunResult, check_arch, describe_device, seconds_per_launch

T = TypeVar("T")  # f32, or a 16-bit float: the math is in f32 either way
BLOCKS = 128  # blocks that share the rows, each one row of the partial sums
SUM_ROWS = 32  # partial rows the second kernel adds per step


@tile.kernel(num_warps=8)
def layernorm_dx(x: Slice[T, 2], w: Slice[T], dy: Slice[T, 2], mean: Slice[f32],
                 rstd: Slice[f32], dx: DisjointSlice[T, 2], dw_part: DisjointSlice[f32, 2],
                 db_part: DisjointSlice[f32, 2], BN: Const[int]):
    """One block per share of the rows: dx of each of its rows, and its rows' sums of
    dy * xhat and dy (columns past the row's end load as 0 and add nothing)."""
    n = x.shape[1]
    inside = tile.arange(BN)[None, :] < n
    wt = tile.load(w, (0,), (BN,)).astype(f32)[None, :]
    dw_acc = tile.zeros((1, BN), f32)
    db_acc = tile.zeros((1, BN), f32)
    for row in tile.tiles(x.shape[0]):
        mu = tile.load(mean, (row,), ())
        r = tile.load(rstd, (row,), ())
        xhat = tile.where(inside, (tile.load(x, (row, 0), (1, BN)).astype(f32) - mu) * r, 0.0)
        g = tile.load(dy, (row, 0), (1, BN)).astype(f32)
        gw = g * wt
        c1 = tile.sum(gw * xhat) / n
        c2 = tile.sum(gw) / n
        tile.store(dx, (row, 0), (r * (gw - c1 * xhat - c2)).astype(T))
        dw_acc = dw_acc + g * xhat
        db_acc = db_acc + g
    tile.store(dw_part, (tile.bid(0), 0), dw_acc)
    tile.store(db_part, (tile.bid(0), 0), db_acc)


@tile.kernel(num_warps=4)
def column_sums(part: Slice[f32, 2], out: DisjointSlice[T], BM: Const[int], BN: Const[int]):
    """out[c] = the sum of column c of `part`, BN columns a block, BM rows a step."""
    j = tile.bid(0)
    acc = tile.zeros((1, BN), f32)
    for k in range(tile.num_tiles(part, 0, BM)):
        acc = acc + tile.sum(tile.load(part, (k, j), (BM, BN)), 0, keepdims=True)
    tile.store(out, (j,), acc.reshape((BN,)).astype(T))


def backward(x: object, w: object, dy: object, mean: object, rstd: object, dx: object,
             dw: object, db: object, dw_part: object, db_part: object, n: int) -> None:
    """All three gradients: `dw_part` and `db_part` are (BLOCKS, n) f32 scratch arrays."""
    block = 1 << (n - 1).bit_length()
    ox.launch(layernorm_dx, BLOCKS, x, w, dy, mean, rstd, dx, dw_part, db_part, block)
    grid = tile.cdiv(n, 128)
    ox.launch(column_sums, grid, dw_part, dw, SUM_ROWS, 128)
    ox.launch(column_sums, grid, db_part, db, SUM_ROWS, 128)


def reference(x: np.ndarray, w: np.ndarray, dy: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(mean, rstd) as the forward saves them (f32), and (dx, dw, db) in f64 from them."""
    x64, w64, dy64 = (a.astype(np.float64) for a in (x, w, dy))
    mean = x64.mean(axis=1)
    rstd = 1 / np.sqrt(((x64 - mean[:, None]) ** 2).mean(axis=1) + 1e-5)
    mean32, rstd32 = mean.astype(np.float32), rstd.astype(np.float32)
    xhat = (x64 - mean32[:, None]) * rstd32[:, None]
    g = dy64 * w64
    dx = rstd32[:, None] * (g - (g * xhat).mean(axis=1, keepdims=True) * xhat
                            - g.mean(axis=1, keepdims=True))
    return mean32, rstd32, dx, (dy64 * xhat).sum(axis=0), dy64.sum(axis=0)


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """Gradients of a `size` x (`size` + 3) f32 layer norm against NumPy; the time is
    the three launches'."""
    with ox.device(device) as dev:
        rows = size or (96 if dev.is_cpu else 4096)
        cols = rows + 3
        rng = np.random.default_rng(5)
        x = rng.standard_normal((rows, cols), dtype=np.float32) * 2 + 0.5
        w = rng.standard_normal(cols, dtype=np.float32)
        dy = rng.standard_normal((rows, cols), dtype=np.float32)
        mean, rstd, want_dx, want_dw, want_db = reference(x, w, dy)
        host = [x, w, dy, mean, rstd, np.zeros_like(x), np.zeros_like(w), np.zeros_like(w),
                np.zeros((BLOCKS, cols), np.float32), np.zeros((BLOCKS, cols), np.float32)]
        args = [ox.to_device(a) for a in host]
        seconds = seconds_per_launch(lambda: backward(*args, cols), dev)
        dx, dw, db = (args[k].to_numpy() for k in (5, 6, 7))
        passed = bool(np.allclose(dx, want_dx, rtol=1e-4, atol=1e-4)
                      and np.allclose(dw, want_dw, rtol=1e-4, atol=1e-3)
                      and np.allclose(db, want_db, rtol=1e-4, atol=1e-3))
        return RunResult("tile_layernorm_backward", passed, describe_device(dev),
                         f"{rows:,} x {cols:,} f32", seconds,
                         work=4 * 4 * rows * cols, unit="GB/s",
                         detail=check_arch(layernorm_dx, arch, *host[:6], *host[8:],
                                           1 << (cols - 1).bit_length()))


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
