"""Liger-Kernel's RMSNorm (src/liger_kernel/ops/rms_norm.py) in oxide.tile, with a NumPy model.

Forward: one program per row, the whole row in one tile (Liger's BLOCK_SIZE =
next_power_of_2(n_cols)); y = x * rstd * (offset + w), rstd = 1 / sqrt(mean(x^2) + eps),
rstd saved per row in f32. Liger's casting modes: "llama" (x in f32, x * rstd rounded to
x's dtype before the weight multiplies it) and "gemma" (everything in f32, rounded once).

Backward: Liger gives each of `sm_count` programs a contiguous run of `rows_per_program`
rows (`row_start = pid * rows_per_program`), writes dx per row and keeps the program's
dw partial sum in f32 registers, stored as one row of a (programs, n_cols) array that the
host sums. `rms_norm_backward_contiguous` is that form: a row index computed from
`tile.bid(0)` is not a TileIndex witness, so its dx store is refused (SafetyError).
`rms_norm_backward` is the workaround from the docs: the persistent loop
`for row in tile.tiles(n_rows)` (rows interleaved across programs instead of in runs);
`rms_norm_backward_raw` is the other one the SafetyError's help names: Liger's contiguous
runs with dx a RawSlice stored under `with ox.unsafe():`.
"""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import Const, DisjointSlice, RawSlice, Slice, TypeVar, f32, tile

T = TypeVar("T")
LLAMA = 0  # Liger's _CASTING_MODE_LLAMA
GEMMA = 1  # Liger's _CASTING_MODE_GEMMA


@tile.kernel(num_warps=4)
def rms_norm_forward(x: Slice[T, 2], w: Slice[T], y: DisjointSlice[T, 2],
                     rstd: DisjointSlice[f32], eps: f32, offset: f32,
                     CASTING: Const[int], BN: Const[int]):
    row = tile.bid(0)
    n = x.shape[1]
    xr = tile.load(x, (row, 0), (1, BN)).astype(f32)
    wr = tile.load(w, (0,), (BN,))[None, :]
    r = tile.rsqrt(tile.sum(xr * xr) / n + eps)
    tile.store(rstd, (row,), r)
    if CASTING == LLAMA:
        yr = (xr * r).astype(T) * (offset + wr)  # T * f32: f32, as in Triton
    else:
        yr = xr * r * (offset + wr.astype(f32))
    tile.store(y, (row, 0), yr.astype(T))


@tile.kernel(num_warps=4)
def rms_norm_backward_contiguous(dy: Slice[T, 2], x: Slice[T, 2], w: Slice[T],
                                 rstd: Slice[f32], dx: DisjointSlice[T, 2],
                                 dw_part: DisjointSlice[f32, 2], offset: f32,
                                 rows_per_program: Const[int], BN: Const[int]):
    """Liger's loop over `range(row_start, row_end)` with row_start = pid * rows."""
    pid = tile.bid(0)
    n = x.shape[1]
    n_rows = x.shape[0]
    wr = tile.load(w, (0,), (BN,))[None, :].astype(f32) + offset
    dw_acc = tile.zeros((1, BN), f32)
    row_start = pid * rows_per_program
    row_end = tile.minimum(row_start + rows_per_program, n_rows)
    for row in range(row_start, row_end):
        g = tile.load(dy, (row, 0), (1, BN)).astype(f32)
        xr = tile.load(x, (row, 0), (1, BN)).astype(f32)
        r = tile.load(rstd, (row,), ())
        m = g * wr
        dxr = r * m - r * (r * r / n * tile.sum(m * xr)) * xr
        dw_acc = dw_acc + g * (xr * r)
        tile.store(dx, (row, 0), dxr.astype(T))
    tile.store(dw_part, (pid, 0), dw_acc)


@tile.kernel(num_warps=4)
def rms_norm_backward_raw(dy: Slice[T, 2], x: Slice[T, 2], w: Slice[T], rstd: Slice[f32],
                          dx: RawSlice[T, 2], dw_part: DisjointSlice[f32, 2], offset: f32,
                          rows_per_program: Const[int], BN: Const[int]):
    """Liger's contiguous runs of rows; dx is a RawSlice (each row belongs to one run)."""
    pid = tile.bid(0)
    n = x.shape[1]
    n_rows = x.shape[0]
    wr = tile.load(w, (0,), (BN,))[None, :].astype(f32) + offset
    dw_acc = tile.zeros((1, BN), f32)
    row_start = pid * rows_per_program
    row_end = tile.minimum(row_start + rows_per_program, n_rows)
    for row in range(row_start, row_end):
        g = tile.load(dy, (row, 0), (1, BN)).astype(f32)
        xr = tile.load(x, (row, 0), (1, BN)).astype(f32)
        r = tile.load(rstd, (row,), ())
        m = g * wr
        dxr = r * m - r * (r * r / n * tile.sum(m * xr)) * xr
        dw_acc = dw_acc + g * (xr * r)
        with ox.unsafe():
            tile.store(dx, (row, 0), dxr.astype(T))
    tile.store(dw_part, (pid, 0), dw_acc)


@tile.kernel(num_warps=4)
def rms_norm_backward(dy: Slice[T, 2], x: Slice[T, 2], w: Slice[T], rstd: Slice[f32],
                      dx: DisjointSlice[T, 2], dw_part: DisjointSlice[f32, 2], offset: f32,
                      BN: Const[int]):
    """The same math, rows handed out by the persistent loop (Liger's "gemma"-style f32
    math: dx = rstd * m - rstd^3 / n * sum(m * x) * x, m = dy * (offset + w))."""
    n = x.shape[1]
    wr = tile.load(w, (0,), (BN,))[None, :].astype(f32) + offset
    dw_acc = tile.zeros((1, BN), f32)
    for row in tile.tiles(x.shape[0]):
        g = tile.load(dy, (row, 0), (1, BN)).astype(f32)
        xr = tile.load(x, (row, 0), (1, BN)).astype(f32)
        r = tile.load(rstd, (row,), ())
        m = g * wr
        dxr = r * m - r * (r * r / n * tile.sum(m * xr)) * xr
        dw_acc = dw_acc + g * (xr * r)
        tile.store(dx, (row, 0), dxr.astype(T))
    tile.store(dw_part, (tile.bid(0), 0), dw_acc)


def block_for(n: int) -> int:
    return 1 << (n - 1).bit_length()


def forward_model(x: np.ndarray, w: np.ndarray, eps: float, offset: float,
                  casting: int) -> tuple[np.ndarray, np.ndarray]:
    """(y, rstd), rounding where the kernel rounds (f32 math, x's dtype at the end)."""
    dt = x.dtype
    x32 = x.astype(np.float32)
    r = (1.0 / np.sqrt((x32.astype(np.float64) ** 2).mean(axis=1) + eps)).astype(np.float32)
    w32 = w.astype(np.float32)
    if casting == LLAMA:
        y = (x32 * r[:, None]).astype(dt).astype(np.float32) * (np.float32(offset) + w32)
    else:
        y = x32 * r[:, None] * (offset + w32)
    return y.astype(dt), r


def backward_model(dy: np.ndarray, x: np.ndarray, w: np.ndarray, rstd: np.ndarray,
                   offset: float) -> tuple[np.ndarray, np.ndarray]:
    """(dx, dw) in f64 from the inputs and the saved f32 rstd."""
    g, x64 = dy.astype(np.float64), x.astype(np.float64)
    r = rstd.astype(np.float64)[:, None]
    m = g * (w.astype(np.float64) + offset)
    n = x.shape[1]
    dx = r * m - r ** 3 / n * (m * x64).sum(axis=1, keepdims=True) * x64
    dw = (g * x64 * r).sum(axis=0)
    return dx, dw
