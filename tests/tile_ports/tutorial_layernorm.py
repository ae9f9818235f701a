"""Triton tutorial 05, layer norm: the forward (a row in BLOCK-column chunks, the mean and
the variance accumulated in tiles, Mean/Rstd stored per row), the backward's fused dx
kernel (dx per row; dw, db partial sums accumulated into GROUP_M buffer rows under a
spin lock taken with atomic_cas, with a first-writer count) and the dw/db kernel that adds
the buffer rows up."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import AtomicSlice, Const, DisjointSlice, RawSlice, Slice, TypeVar, f32, i32, tile

T = TypeVar("T")


@tile.kernel(num_warps=4)
def layer_norm_fwd(x: Slice[T, 2], y: DisjointSlice[T, 2], w: Slice[T], b: Slice[T],
                   mean_out: DisjointSlice[f32], rstd_out: DisjointSlice[f32], eps: f32,
                   BLOCK: Const[int]):
    row = tile.bid(0)
    n = x.shape[1]
    chunks = tile.cdiv(n, BLOCK)
    _mean = tile.zeros((1, BLOCK), f32)
    for c in range(chunks):
        _mean += tile.load(x, (row, c), (1, BLOCK)).astype(f32)
    mean = tile.sum(_mean) / n
    _var = tile.zeros((1, BLOCK), f32)
    for c in range(chunks):
        cols = c * BLOCK + tile.arange(BLOCK)[None, :]
        xc = tile.where(cols < n, tile.load(x, (row, c), (1, BLOCK)).astype(f32) - mean, 0.0)
        _var += xc * xc
    var = tile.sum(_var) / n
    rstd = 1 / tile.sqrt(var + eps)
    tile.store(mean_out, (row,), mean)
    tile.store(rstd_out, (row,), rstd)
    for c in range(chunks):
        wt = tile.load(w, (c,), (BLOCK,)).astype(f32)[None, :]
        bt = tile.load(b, (c,), (BLOCK,)).astype(f32)[None, :]
        xt = tile.load(x, (row, c), (1, BLOCK)).astype(f32)
        tile.store(y, (row, c), ((xt - mean) * rstd * wt + bt).astype(T))


@tile.kernel(num_warps=4)
def layer_norm_bwd_dx_fused(dx: DisjointSlice[T, 2], dy: Slice[T, 2], dw_buf: RawSlice[f32, 2],
                            db_buf: RawSlice[f32, 2], x: Slice[T, 2], w: Slice[T],
                            mean: Slice[f32], rstd: Slice[f32], locks: AtomicSlice[i32],
                            GROUP_M: Const[int], BLOCK: Const[int]):
    """As the tutorial: `locks` holds GROUP_M locks, then GROUP_M counts; the count is
    read with a plain load under the lock (a SafetyError: see the _atomic variant)."""
    row = tile.bid(0)
    n = x.shape[1]
    cols = tile.arange(BLOCK)[None, :]
    inside = cols < n
    xt = tile.load(x, (row, 0), (1, BLOCK)).astype(f32)
    dyt = tile.load(dy, (row, 0), (1, BLOCK)).astype(f32)
    wt = tile.load(w, (0,), (BLOCK,)).astype(f32)[None, :]
    mu = tile.load(mean, (row,), ())
    rs = tile.load(rstd, (row,), ())
    xhat = tile.where(inside, (xt - mu) * rs, 0.0)
    wdy = tile.where(inside, wt * dyt, 0.0)
    c1 = tile.sum(xhat * wdy) / n
    c2 = tile.sum(wdy) / n
    tile.store(dx, (row, 0), ((wdy - (xhat * c1 + c2)) * rs).astype(T))
    partial_dw = (dyt * xhat).astype(f32)
    partial_db = dyt
    lock_id = row % GROUP_M
    while tile.atomic_cas(locks, (lock_id,), 0, 1) == 1:
        pass
    count = tile.load(locks, (GROUP_M + lock_id,), ())
    if count == 0:
        tile.atomic_xchg(locks, (GROUP_M + lock_id,), 1)
    else:
        with ox.unsafe():
            partial_dw += tile.load(dw_buf, (lock_id, 0), (1, BLOCK))
            partial_db += tile.load(db_buf, (lock_id, 0), (1, BLOCK))
    with ox.unsafe():
        tile.store(dw_buf, (lock_id, 0), partial_dw)
        tile.store(db_buf, (lock_id, 0), partial_db)
    tile.atomic_xchg(locks, (lock_id,), 0)


@tile.kernel(num_warps=4)
def layer_norm_bwd_dx_fused_atomic(dx: DisjointSlice[T, 2], dy: Slice[T, 2],
                                   dw_buf: RawSlice[f32, 2], db_buf: RawSlice[f32, 2],
                                   x: Slice[T, 2], w: Slice[T], mean: Slice[f32],
                                   rstd: Slice[f32], locks: AtomicSlice[i32],
                                   GROUP_M: Const[int], BLOCK: Const[int]):
    """The workaround: the count read (and set) with one atomic_xchg, which returns the
    old value."""
    row = tile.bid(0)
    n = x.shape[1]
    cols = tile.arange(BLOCK)[None, :]
    inside = cols < n
    xt = tile.load(x, (row, 0), (1, BLOCK)).astype(f32)
    dyt = tile.load(dy, (row, 0), (1, BLOCK)).astype(f32)
    wt = tile.load(w, (0,), (BLOCK,)).astype(f32)[None, :]
    mu = tile.load(mean, (row,), ())
    rs = tile.load(rstd, (row,), ())
    xhat = tile.where(inside, (xt - mu) * rs, 0.0)
    wdy = tile.where(inside, wt * dyt, 0.0)
    c1 = tile.sum(xhat * wdy) / n
    c2 = tile.sum(wdy) / n
    tile.store(dx, (row, 0), ((wdy - (xhat * c1 + c2)) * rs).astype(T))
    partial_dw = dyt * xhat
    partial_db = dyt
    lock_id = row % GROUP_M
    while tile.atomic_cas(locks, (lock_id,), 0, 1) == 1:
        pass
    count = tile.atomic_xchg(locks, (GROUP_M + lock_id,), 1)
    if count != 0:
        with ox.unsafe():
            partial_dw += tile.load(dw_buf, (lock_id, 0), (1, BLOCK))
            partial_db += tile.load(db_buf, (lock_id, 0), (1, BLOCK))
    with ox.unsafe():
        tile.store(dw_buf, (lock_id, 0), partial_dw)
        tile.store(db_buf, (lock_id, 0), partial_db)
    tile.atomic_xchg(locks, (lock_id,), 0)


@tile.kernel(num_warps=4)
def layer_norm_bwd_dwdb(dw_buf: Slice[f32, 2], db_buf: Slice[f32, 2], dw: DisjointSlice[T],
                        db: DisjointSlice[T], BM: Const[int], BN: Const[int]):
    """Column sums of the GROUP_M buffer rows, BN columns a block, BM rows a step."""
    j = tile.bid(0)
    acc_w = tile.zeros((BM, BN), f32)
    acc_b = tile.zeros((BM, BN), f32)
    for i in range(tile.cdiv(dw_buf.shape[0], BM)):
        acc_w += tile.load(dw_buf, (i, j), (BM, BN))
        acc_b += tile.load(db_buf, (i, j), (BM, BN))
    tile.store(dw, (j,), tile.sum(acc_w, 0).astype(T))
    tile.store(db, (j,), tile.sum(acc_b, 0).astype(T))


def reference_fwd(x, w, b, eps):
    x64 = x.astype(np.float64)
    mean = x64.mean(1)
    var = ((x64 - mean[:, None]) ** 2).mean(1)
    rstd = 1 / np.sqrt(var + eps)
    y = (x64 - mean[:, None]) * rstd[:, None] * w.astype(np.float64) + b.astype(np.float64)
    return y, mean, rstd


def reference_bwd(x, w, dy, mean, rstd):
    """dx, dw, db in f64 from the saved (f32) mean and rstd."""
    x64, w64, dy64 = (a.astype(np.float64) for a in (x, w, dy))
    xhat = (x64 - mean.astype(np.float64)[:, None]) * rstd.astype(np.float64)[:, None]
    wdy = w64 * dy64
    n = x.shape[1]
    c1 = (xhat * wdy).sum(1, keepdims=True) / n
    c2 = wdy.sum(1, keepdims=True) / n
    dx = (wdy - (xhat * c1 + c2)) * rstd.astype(np.float64)[:, None]
    return dx, (dy64 * xhat).sum(0), dy64.sum(0)
