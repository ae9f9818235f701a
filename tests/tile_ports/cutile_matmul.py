"""cuTile samples: batch matmul (rank-3 tiles, a (Batch, M/tm, N/tn) grid, each block a
(1, tm, tk) x (1, tk, tn) step reshaped to 2-d for `ct.mma`), and a persistent matmul
(`range(ct.bid(0), tiles, ct.num_blocks(0))` with a 2-d swizzle; `tile.tiles` here)."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import Const, DisjointSlice, RawSlice, Slice, TypeVar, f32, tile

T = TypeVar("T")


@tile.kernel(num_warps=4)
def batch_matmul_kernel(a: Slice[T, 3], b: Slice[T, 3], c: DisjointSlice[T, 3],
                        tm: Const[int], tn: Const[int], tk: Const[int]):
    pid_batch = tile.bid(0)
    bidx = tile.bid(1)
    bidy = tile.bid(2)
    acc = tile.full((tm, tn), 0.0, f32)
    for k in range(tile.cdiv(a.shape[2], tk)):
        at = tile.load(a, (pid_batch, bidx, k), (1, tm, tk), padding=0).reshape((tm, tk))
        bt = tile.load(b, (pid_batch, k, bidy), (1, tk, tn), padding=0).reshape((tk, tn))
        acc = tile.mma(at, bt, acc)
    tile.store(c, (pid_batch, bidx, bidy), acc.astype(T).reshape((1, tm, tn)))


@tile.kernel(num_warps=4)
def batch_matmul_rank3(a: Slice[T, 3], b: Slice[T, 3], c: DisjointSlice[T, 3],
                       tb: Const[int], tm: Const[int], tn: Const[int], tk: Const[int]):
    """The same with rank-3 products: tb batches per block, `(tb, tm, tk) @ (tb, tk, tn)`."""
    pb, bx, by = tile.bid(0), tile.bid(1), tile.bid(2)
    acc = tile.zeros((tb, tm, tn), f32)
    for k in range(tile.cdiv(a.shape[2], tk)):
        acc = tile.mma(tile.load(a, (pb, bx, k), (tb, tm, tk)),
                       tile.load(b, (pb, k, by), (tb, tk, tn)), acc)
    tile.store(c, (pb, bx, by), acc.astype(T))


@tile.func
def swizzle_2d(t, num_m, num_n, group):
    """cuTile's swizzle_2d on a linear tile id, written out (as the sample does)."""
    num_in_group = group * num_n
    group_id = t // num_in_group
    first_m = group_id * group
    group_size_m = min(num_m - first_m, group)
    return first_m + (t % group_size_m), (t % num_in_group) // group_size_m


@tile.kernel(num_warps=4)
def persistent_matmul_raw(a: Slice[T, 2], b: Slice[T, 2], c: RawSlice[T, 2],
                          tm: Const[int], tn: Const[int], tk: Const[int],
                          GROUP: Const[int]):
    """The sample's swizzle as written: computed indices, so a RawSlice under unsafe."""
    num_m = tile.cdiv(a.shape[0], tm)
    num_n = tile.cdiv(b.shape[1], tn)
    for t in tile.tiles(num_m * num_n):
        bx, by = swizzle_2d(t, num_m, num_n, GROUP)
        acc = tile.zeros((tm, tn), f32)
        for k in range(tile.cdiv(a.shape[1], tk)):
            acc = tile.mma(tile.load(a, (bx, k), (tm, tk)), tile.load(b, (k, by), (tk, tn)),
                           acc)
        with ox.unsafe():
            tile.store(c, (bx, by), acc.astype(T))


@tile.kernel(num_warps=4)
def persistent_matmul(a: Slice[T, 2], b: Slice[T, 2], c: DisjointSlice[T, 2],
                      tm: Const[int], tn: Const[int], tk: Const[int], GROUP: Const[int]):
    """The safe form: `tile.tiles` and `tile.grouped` (a witness pair)."""
    num_m = tile.num_tiles(a, 0, tm)
    num_n = tile.num_tiles(b, 1, tn)
    for t in tile.tiles(num_m * num_n):
        bx, by = tile.grouped(t, num_m, num_n, GROUP)
        acc = tile.zeros((tm, tn), f32)
        for k in range(tile.num_tiles(a, 1, tk)):
            acc += tile.load(a, (bx, k), (tm, tk)) @ tile.load(b, (k, by), (tk, tn))
        tile.store(c, (bx, by), acc.astype(T))


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float32) @ b.astype(np.float32)
