"""Triton tutorial 02, fused softmax: a persistent kernel (a few programs stride over the
rows, `tl.range(pid, n_rows, num_programs)`), one whole row per step, -inf padding."""

from __future__ import annotations

import numpy as np

from oxide import Const, DisjointSlice, Slice, TypeVar, f32, tile

T = TypeVar("T")


@tile.kernel(num_warps=4)
def softmax_kernel(x: Slice[T, 2], out: DisjointSlice[T, 2], BLOCK: Const[int]):
    # Triton: for row_idx in tl.range(row_start, n_rows, row_step, num_stages=...)
    for row in tile.tiles(x.shape[0]):
        t = tile.load(x, (row, 0), (1, BLOCK), padding=-float("inf")).astype(f32)
        z = t - tile.max(t, 1, keepdims=True)
        num = tile.exp(z)
        den = tile.sum(num, 1, keepdims=True)
        tile.store(out, (row, 0), (num / den).astype(T))


@tile.kernel(num_warps=4)
def softmax_kernel_range(x: Slice[T, 2], out: DisjointSlice[T, 2], BLOCK: Const[int]):
    """The tutorial's loop written literally: range(program_id, n_rows, num_programs)."""
    for row in range(tile.bid(0), x.shape[0], tile.num_blocks(0)):
        t = tile.load(x, (row, 0), (1, BLOCK), padding=-float("inf")).astype(f32)
        num = tile.exp(t - tile.max(t, 1, keepdims=True))
        tile.store(out, (row, 0), (num / tile.sum(num, 1, keepdims=True)).astype(T))


def reference(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)
