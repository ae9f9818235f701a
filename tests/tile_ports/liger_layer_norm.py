"""Liger-Kernel's LayerNorm (src/liger_kernel/ops/layer_norm.py) in oxide.tile, with a NumPy
model.

Forward (`_layer_norm_forward_kernel`): one program per row, the whole row in one tile,
f32 statistics; y = (x - mean) * rstd * w + b, mean and rstd saved per row (f32).

Backward (`_layer_norm_backward_kernel`): Liger gives each of `sm_count` programs a run
of rows; per row dx = rstd * (w * dy - (xhat * c1 + c2)) with c1 = mean(xhat * w * dy)
and c2 = mean(w * dy), and the program keeps dw = sum(dy * xhat), db = sum(dy) in f32,
stored as one row of (programs, n_cols) arrays the host sums. Rows are handed out by
`tile.tiles` (the contiguous-run form is the RMSNorm port's SafetyError).
"""

from __future__ import annotations

import numpy as np

from oxide import Const, DisjointSlice, Slice, TypeVar, f32, tile

T = TypeVar("T")


@tile.kernel(num_warps=4)
def layer_norm_forward(x: Slice[T, 2], w: Slice[T], b: Slice[T], y: DisjointSlice[T, 2],
                       mean_out: DisjointSlice[f32], rstd_out: DisjointSlice[f32], eps: f32,
                       BN: Const[int]):
    row = tile.bid(0)
    n = x.shape[1]
    mask = tile.arange(BN)[None, :] < n
    xr = tile.load(x, (row, 0), (1, BN)).astype(f32)
    wr = tile.load(w, (0,), (BN,))[None, :].astype(f32)
    br = tile.load(b, (0,), (BN,))[None, :].astype(f32)
    mean = tile.sum(xr) / n
    xc = tile.where(mask, xr - mean, 0.0)
    var = tile.sum(xc * xc) / n
    rstd = tile.rsqrt(var + eps)
    tile.store(mean_out, (row,), mean)
    tile.store(rstd_out, (row,), rstd)
    tile.store(y, (row, 0), (xc * rstd * wr + br).astype(T))


@tile.kernel(num_warps=4)
def layer_norm_backward(x: Slice[T, 2], w: Slice[T], mean: Slice[f32], rstd: Slice[f32],
                        dy: Slice[T, 2], dx: DisjointSlice[T, 2],
                        dw_part: DisjointSlice[f32, 2], db_part: DisjointSlice[f32, 2],
                        BN: Const[int]):
    n = x.shape[1]
    mask = tile.arange(BN)[None, :] < n
    wr = tile.load(w, (0,), (BN,))[None, :].astype(f32)
    dw_acc = tile.zeros((1, BN), f32)
    db_acc = tile.zeros((1, BN), f32)
    for row in tile.tiles(x.shape[0]):
        xr = tile.load(x, (row, 0), (1, BN)).astype(f32)
        g = tile.load(dy, (row, 0), (1, BN)).astype(f32)
        mu = tile.load(mean, (row,), ())
        r = tile.load(rstd, (row,), ())
        xhat = tile.where(mask, (xr - mu) * r, 0.0)
        wdy = wr * g
        c1 = tile.sum(xhat * wdy) / n
        c2 = tile.sum(wdy) / n
        tile.store(dx, (row, 0), ((wdy - (xhat * c1 + c2)) * r).astype(T))
        dw_acc = dw_acc + g * xhat
        db_acc = db_acc + g
    tile.store(dw_part, (tile.bid(0), 0), dw_acc)
    tile.store(db_part, (tile.bid(0), 0), db_acc)


def block_for(n: int) -> int:
    return 1 << (n - 1).bit_length()


def forward_model(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y in f64, mean, rstd)."""
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1)
    rstd = 1 / np.sqrt(((x64 - mean[:, None]) ** 2).mean(axis=1) + eps)
    y = (x64 - mean[:, None]) * rstd[:, None] * w.astype(np.float64) + b.astype(np.float64)
    return y, mean, rstd


def backward_model(x: np.ndarray, w: np.ndarray, mean: np.ndarray, rstd: np.ndarray,
                   dy: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dx, dw, db) in f64 from the saved f32 mean and rstd."""
    x64, w64, g = (v.astype(np.float64) for v in (x, w, dy))
    mu, r = mean.astype(np.float64)[:, None], rstd.astype(np.float64)[:, None]
    xhat = (x64 - mu) * r
    wdy = w64 * g
    c1 = (xhat * wdy).mean(axis=1, keepdims=True)
    c2 = wdy.mean(axis=1, keepdims=True)
    return (wdy - (xhat * c1 + c2)) * r, (g * xhat).sum(axis=0), g.sum(axis=0)
