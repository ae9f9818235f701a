"""Liger-Kernel's cross entropy (src/liger_kernel/ops/cross_entropy.py,
`liger_cross_entropy_kernel`) in oxide.tile, with a NumPy model.

One program per row of logits X (BT, V). An online softmax walks the vocabulary in
BLOCK_SIZE chunks (running max m and sum d), then a second pass writes the gradient
(softmax(x) - eps) / n_non_ignore over X in place, and the loss per row
lse - x_y (with label smoothing: (1 - ls) * (lse - x_y) + ls * lse - eps * sum(x);
plus the z loss lse_square_scale * lse^2). Rows whose target is `ignore_index` get a
zero gradient and a zero loss. The target's own gradient gets -(1 - ls) / n_non_ignore.

`cross_entropy_faithful` is Liger's shape: an early `return` for an ignored row, and the
target logit read as one element, `tl.load(X_ptr + y)`, before and after the tile passes
over the same row. `cross_entropy_no_return` drops only the early return (an `if`/`else`
instead), to show the second limit. `cross_entropy` is the workaround from the docs:
`if`/`else`, and the target column picked out of each chunk with `tile.where` (x_y as a
masked sum in the first pass, the -(1 - ls)/N added in the second), so X only sees
(1, BN) tiles. `cross_entropy_raw` is the other way out the SafetyError leaves: X a
RawSlice, Liger's element reads and writes at (row, y) kept, under `with ox.unsafe():`
(docs: a block's accesses keep program order, "Liger's in-place cross entropy needs no
tl.debug_barrier()").
"""

from __future__ import annotations

import math

import numpy as np

import oxide as ox
from oxide import Const, DisjointSlice, RawSlice, Slice, TypeVar, f32, i32, i64, tile

T = TypeVar("T")


@tile.kernel(num_warps=8)
def cross_entropy_faithful(x: DisjointSlice[T, 2], y: Slice[i64], loss: DisjointSlice[f32],
                           z_loss: DisjointSlice[f32], n_non_ignore: i32, ignore_index: i64,
                           LABEL_SMOOTHING: Const[float], LSE_SQUARE_SCALE: Const[float],
                           RETURN_Z_LOSS: Const[bool], BN: Const[int]):
    row = tile.bid(0).astype(i64)
    target = tile.load(y, (row,), ())
    n = x.shape[1]
    chunks = tile.num_tiles(x, 1, BN)
    if target == ignore_index:
        for c in range(chunks):
            tile.store(x, (row, c), tile.zeros((1, BN), T))
        return
    m = f32(-math.inf)
    d = f32(0.0)
    ori_x_y = tile.load(x, (row, target), ()).astype(f32)
    scaled_x_sum = f32(0.0)
    eps = LABEL_SMOOTHING / n
    for c in range(chunks):
        cols = c * BN + tile.arange(BN)[None, :]
        xb = tile.load(x, (row, c), (1, BN), padding=-math.inf).astype(f32)
        if LABEL_SMOOTHING > 0:
            scaled_x_sum = scaled_x_sum + tile.sum(tile.where(cols < n, -eps * xb, 0.0))
        m_new = tile.maximum(m, tile.max(xb))
        d = d * tile.exp(m - m_new) + tile.sum(tile.exp(xb - m_new))
        m = m_new
    lse = m + tile.log(d)
    for c in range(chunks):
        xb = tile.load(x, (row, c), (1, BN), padding=-math.inf).astype(f32)
        g = tile.exp(xb - m) / d - eps
        if LSE_SQUARE_SCALE > 0:
            g = g + 2 * LSE_SQUARE_SCALE * lse * g
        tile.store(x, (row, c), (g / n_non_ignore).astype(T))
    ls_loss = lse - ori_x_y
    if LABEL_SMOOTHING > 0:
        ls_loss = ls_loss * (1 - LABEL_SMOOTHING) + (scaled_x_sum + LABEL_SMOOTHING * lse)
    z = LSE_SQUARE_SCALE * lse * lse
    tile.store(loss, (row,), ls_loss + z)
    if RETURN_Z_LOSS:
        tile.store(z_loss, (row,), z)
    x_y = tile.load(x, (row, target), ()).astype(f32)
    tile.store(x, (row, target), x_y - (1 - LABEL_SMOOTHING) / n_non_ignore)


@tile.kernel(num_warps=8)
def cross_entropy_no_return(x: DisjointSlice[T, 2], y: Slice[i64], loss: DisjointSlice[f32],
                            z_loss: DisjointSlice[f32], n_non_ignore: i32, ignore_index: i64,
                            LABEL_SMOOTHING: Const[float], LSE_SQUARE_SCALE: Const[float],
                            RETURN_Z_LOSS: Const[bool], BN: Const[int]):
    """Liger's form with `if`/`else` for the ignored row: still the element reads at
    (row, target) beside the (1, BN) tiles."""
    row = tile.bid(0).astype(i64)
    target = tile.load(y, (row,), ())
    chunks = tile.num_tiles(x, 1, BN)
    if target == ignore_index:
        for c in range(chunks):
            tile.store(x, (row, c), tile.zeros((1, BN), T))
    else:
        m = f32(-math.inf)
        d = f32(0.0)
        ori_x_y = tile.load(x, (row, target), ()).astype(f32)
        for c in range(chunks):
            xb = tile.load(x, (row, c), (1, BN), padding=-math.inf).astype(f32)
            m_new = tile.maximum(m, tile.max(xb))
            d = d * tile.exp(m - m_new) + tile.sum(tile.exp(xb - m_new))
            m = m_new
        lse = m + tile.log(d)
        for c in range(chunks):
            xb = tile.load(x, (row, c), (1, BN), padding=-math.inf).astype(f32)
            tile.store(x, (row, c), (tile.exp(xb - m) / d / n_non_ignore).astype(T))
        tile.store(loss, (row,), lse - ori_x_y)
        x_y = tile.load(x, (row, target), ()).astype(f32)
        tile.store(x, (row, target), x_y - 1.0 / n_non_ignore)


@tile.kernel(num_warps=8)
def cross_entropy_raw(x: RawSlice[T, 2], y: Slice[i64], loss: DisjointSlice[f32],
                      z_loss: DisjointSlice[f32], n_non_ignore: i32, ignore_index: i64,
                      LABEL_SMOOTHING: Const[float], LSE_SQUARE_SCALE: Const[float],
                      RETURN_Z_LOSS: Const[bool], BN: Const[int]):
    """Liger's body (if/else for the early return), X a RawSlice."""
    row = tile.bid(0).astype(i64)
    target = tile.load(y, (row,), ())
    n = x.shape[1]
    chunks = tile.num_tiles(x, 1, BN)
    if target == ignore_index:
        for c in range(chunks):
            with ox.unsafe():
                tile.store(x, (row, c), tile.zeros((1, BN), T))
        tile.store(loss, (row,), 0.0)
        if RETURN_Z_LOSS:
            tile.store(z_loss, (row,), 0.0)
    else:
        m = f32(-math.inf)
        d = f32(0.0)
        ori_x_y = tile.load(x, (row, target), ()).astype(f32)
        scaled_x_sum = f32(0.0)
        eps = LABEL_SMOOTHING / n
        for c in range(chunks):
            cols = c * BN + tile.arange(BN)[None, :]
            xb = tile.load(x, (row, c), (1, BN), padding=-math.inf).astype(f32)
            if LABEL_SMOOTHING > 0:
                scaled_x_sum = scaled_x_sum + tile.sum(tile.where(cols < n, -eps * xb, 0.0))
            m_new = tile.maximum(m, tile.max(xb))
            d = d * tile.exp(m - m_new) + tile.sum(tile.exp(xb - m_new))
            m = m_new
        lse = m + tile.log(d)
        for c in range(chunks):
            xb = tile.load(x, (row, c), (1, BN), padding=-math.inf).astype(f32)
            g = tile.exp(xb - m) / d - eps
            if LSE_SQUARE_SCALE > 0:
                g = g + 2 * LSE_SQUARE_SCALE * lse * g
            with ox.unsafe():
                tile.store(x, (row, c), (g / n_non_ignore).astype(T))
        ls_loss = lse - ori_x_y
        if LABEL_SMOOTHING > 0:
            ls_loss = ls_loss * (1 - LABEL_SMOOTHING) + (scaled_x_sum + LABEL_SMOOTHING * lse)
        z = LSE_SQUARE_SCALE * lse * lse
        tile.store(loss, (row,), ls_loss + z)
        if RETURN_Z_LOSS:
            tile.store(z_loss, (row,), z)
        x_y = tile.load(x, (row, target), ()).astype(f32)
        with ox.unsafe():  # a 0-d f32 into a T array: not converted, see the test
            tile.store(x, (row, target),
                       (x_y - (1 - LABEL_SMOOTHING) / n_non_ignore).astype(T))


@tile.kernel(num_warps=8)
def cross_entropy(x: DisjointSlice[T, 2], y: Slice[i64], loss: DisjointSlice[f32],
                  z_loss: DisjointSlice[f32], n_non_ignore: i32, ignore_index: i64,
                  LABEL_SMOOTHING: Const[float], LSE_SQUARE_SCALE: Const[float],
                  RETURN_Z_LOSS: Const[bool], BN: Const[int]):
    row = tile.bid(0).astype(i64)
    target = tile.load(y, (row,), ())
    n = x.shape[1]
    chunks = tile.num_tiles(x, 1, BN)
    if target == ignore_index:
        for c in range(chunks):
            tile.store(x, (row, c), tile.zeros((1, BN), T))
        tile.store(loss, (row,), 0.0)
        if RETURN_Z_LOSS:
            tile.store(z_loss, (row,), 0.0)
    else:
        m = f32(-math.inf)
        d = f32(0.0)
        ori_x_y = f32(0.0)
        scaled_x_sum = f32(0.0)
        eps = LABEL_SMOOTHING / n
        for c in range(chunks):
            cols = c * BN + tile.arange(BN, dtype=i64)[None, :]
            xb = tile.load(x, (row, c), (1, BN), padding=-math.inf).astype(f32)
            ori_x_y = ori_x_y + tile.sum(tile.where(cols == target, xb, 0.0))
            if LABEL_SMOOTHING > 0:
                scaled_x_sum = scaled_x_sum + tile.sum(tile.where(cols < n, -eps * xb, 0.0))
            m_new = tile.maximum(m, tile.max(xb))
            d = d * tile.exp(m - m_new) + tile.sum(tile.exp(xb - m_new))
            m = m_new
        lse = m + tile.log(d)
        for c in range(chunks):
            cols = c * BN + tile.arange(BN, dtype=i64)[None, :]
            xb = tile.load(x, (row, c), (1, BN), padding=-math.inf).astype(f32)
            g = tile.exp(xb - m) / d - eps
            if LSE_SQUARE_SCALE > 0:
                g = g + 2 * LSE_SQUARE_SCALE * lse * g
            g = g / n_non_ignore
            g = tile.where(cols == target, g - (1 - LABEL_SMOOTHING) / n_non_ignore, g)
            tile.store(x, (row, c), g.astype(T))
        ls_loss = lse - ori_x_y
        if LABEL_SMOOTHING > 0:
            ls_loss = ls_loss * (1 - LABEL_SMOOTHING) + (scaled_x_sum + LABEL_SMOOTHING * lse)
        z = LSE_SQUARE_SCALE * lse * lse
        tile.store(loss, (row,), ls_loss + z)
        if RETURN_Z_LOSS:
            tile.store(z_loss, (row,), z)


def model(x: np.ndarray, y: np.ndarray, ignore_index: int, label_smoothing: float,
          lse_square_scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(loss per row, z loss per row, gradient) in f64; torch's CrossEntropyLoss with
    label smoothing and mean reduction over the non-ignored rows, plus PaLM's z loss."""
    x64 = x.astype(np.float64)
    rows, v = x64.shape
    keep = y != ignore_index
    n_non_ignore = int(keep.sum())
    mx = x64.max(axis=1, keepdims=True)
    lse = (mx + np.log(np.exp(x64 - mx).sum(axis=1, keepdims=True)))[:, 0]
    soft = np.exp(x64 - lse[:, None])
    safe_y = np.where(keep, y, 0)
    x_y = x64[np.arange(rows), safe_y]
    eps = label_smoothing / v
    loss = (1 - label_smoothing) * (lse - x_y) + label_smoothing * lse - eps * x64.sum(axis=1)
    z = lse_square_scale * lse * lse
    loss = loss + z
    grad = soft - eps
    grad = grad + 2 * lse_square_scale * lse[:, None] * grad
    grad[np.arange(rows), safe_y] -= 1 - label_smoothing
    grad = grad / n_non_ignore
    loss[~keep], z[~keep], grad[~keep] = 0.0, 0.0, 0.0
    return loss, z, grad
