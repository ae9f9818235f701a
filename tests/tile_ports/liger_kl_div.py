"""Liger-Kernel's KL divergence (src/liger_kernel/ops/kl_div.py, `_kldiv_kernel_forward`) in
oxide.tile, with a NumPy model.

One program per row; the row in BLOCK_SIZE chunks. y_pred is in log space; with
`log_target` the target is too:

    loss = y_true * (log(max(y_true, eps)) - y)     or     exp(y_true) * (y_true - y)

Reduction "none" stores the loss per element (a (B, V) output); the others sum it per
row (Liger's (B,) output; the host finishes batchmean / sum / mean). Liger passes one
`loss_ptr` of either rank; an oxide parameter has one rank, so the reduced output is a
(B, 1) array here, its element (row, 0) written as a scalar.
"""

from __future__ import annotations

import numpy as np

from oxide import Const, DisjointSlice, Slice, TypeVar, f32, tile

T = TypeVar("T")
NONE, SUM, MEAN, BATCHMEAN = 0, 1, 2, 3  # Liger's _REDUCTION_MODE_*


@tile.kernel(num_warps=4)
def kldiv_forward(y: Slice[T, 2], gt: Slice[T, 2], loss: DisjointSlice[f32, 2], eps: f32,
                  LOG_TARGET: Const[bool], REDUCTION: Const[int], BN: Const[int]):
    row = tile.bid(0)
    loss_sum = f32(0.0)
    for c in range(tile.num_tiles(y, 1, BN)):
        yb = tile.load(y, (row, c), (1, BN)).astype(f32)
        tb = tile.load(gt, (row, c), (1, BN)).astype(f32)
        if not LOG_TARGET:
            lb = tb * (tile.log(tile.maximum(tb, eps)) - yb)
        else:
            lb = tile.exp(tb) * (tb - yb)
        if REDUCTION == NONE:
            tile.store(loss, (row, c), lb)
        else:
            loss_sum = loss_sum + tile.sum(lb)
    if REDUCTION != NONE:
        tile.store(loss, (row, 0), loss_sum)


def model(y: np.ndarray, gt: np.ndarray, eps: float, log_target: bool) -> np.ndarray:
    """The loss per element, in f64 (columns past the row add nothing: padding 0 gives
    0 * (log(eps) - 0) = 0, or exp(0) * (0 - 0) = 0)."""
    y64, t64 = y.astype(np.float64), gt.astype(np.float64)
    if log_target:
        return np.exp(t64) * (t64 - y64)
    return t64 * (np.log(np.maximum(t64, eps)) - y64)
