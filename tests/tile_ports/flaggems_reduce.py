"""FlagGems' two-stage reductions: argmax over a flat tensor (stage 1: each block's max
and its global index; stage 2: one block takes the argmax of the block maxima and reads
that block's index, a data-dependent 0-d load) and sum (stage 1 in f32 per block, stage 2
one block, a 0-d store); and argmax along dim 1 (chunks of N, a running max and index
updated with `tl.where`)."""

from __future__ import annotations

import math

from oxide import Const, DisjointSlice, Slice, TypeVar, f32, i64, tile

T = TypeVar("T")


@tile.kernel(num_warps=4)
def argmax_kernel_1(inp: Slice[T], mid_value: DisjointSlice[f32], mid_index: DisjointSlice[i64],
                    BLOCK: Const[int]):
    pid = tile.bid(0)
    vals = tile.load(inp, (pid,), (BLOCK,), padding=-math.inf).astype(f32)
    max_val = tile.max(vals, 0)
    max_index = tile.argmax(vals, 0).astype(i64) + pid * BLOCK
    tile.store(mid_value, (pid,), max_val)
    tile.store(mid_index, (pid,), max_index)


@tile.kernel(num_warps=4)
def argmax_kernel_2(mid_value: Slice[f32], mid_index: Slice[i64], out: DisjointSlice[i64, 1],
                    BLOCK_MID: Const[int]):
    mid_val = tile.load(mid_value, (0,), (BLOCK_MID,), padding=-math.inf)
    index_val = tile.argmax(mid_val, 0)
    out_val = tile.load(mid_index, (index_val,), ())
    tile.store(out, (0,), out_val)


@tile.kernel(num_warps=4)
def sum_kernel_1(inp: Slice[T], mid: DisjointSlice[f32], BLOCK: Const[int]):
    pid = tile.bid(0)
    vals = tile.load(inp, (pid,), (BLOCK,), padding=0).astype(f32)
    tile.store(mid, (pid,), tile.sum(vals))


@tile.kernel(num_warps=4)
def sum_kernel_2_1d(mid: Slice[f32], out: DisjointSlice[T], BLOCK_MID: Const[int]):
    vals = tile.load(mid, (0,), (BLOCK_MID,), padding=0)
    tile.store(out, (0,), tile.sum(vals).astype(T))


def make_argmax_kernel_2_0d():
    """Stage 2 into a 0-d output, as FlagGems' `out = torch.empty([])` (the annotation is
    checked when the kernel is declared, so the declaration is in a function)."""

    @tile.kernel(num_warps=4)
    def argmax_kernel_2_0d(mid_value: Slice[f32], mid_index: Slice[i64],
                           out: DisjointSlice[i64, 0], BLOCK_MID: Const[int]):
        mid_val = tile.load(mid_value, (0,), (BLOCK_MID,), padding=-math.inf)
        index_val = tile.argmax(mid_val, 0)
        tile.store(out, (), tile.load(mid_index, (index_val,), ()))

    return argmax_kernel_2_0d


def make_sum_kernel_2_0d():
    """FlagGems' sum stage 2 into a 0-d output."""

    @tile.kernel(num_warps=4)
    def sum_kernel_2(mid: Slice[f32], out: DisjointSlice[T, 0], BLOCK_MID: Const[int]):
        vals = tile.load(mid, (0,), (BLOCK_MID,), padding=0)
        tile.store(out, (), tile.sum(vals).astype(T))

    return sum_kernel_2


@tile.kernel(num_warps=4)
def argmax_dim1_kernel(inp: Slice[T, 2], out_index: DisjointSlice[i64], BLOCK_M: Const[int],
                       BLOCK_N: Const[int]):
    pid_m = tile.bid(0)
    max_values = tile.full((BLOCK_M,), -math.inf, f32)
    argmax_values = tile.full((BLOCK_M,), 0, i64)
    for start in range(tile.cdiv(inp.shape[1], BLOCK_N)):
        vals = tile.load(inp, (pid_m, start), (BLOCK_M, BLOCK_N), padding=-math.inf).astype(f32)
        local_max = tile.max(vals, 1)
        local_argmax = tile.argmax(vals, 1)
        update = local_max > max_values
        max_values = tile.where(update, local_max, max_values)
        argmax_values = tile.where(update, start * BLOCK_N + local_argmax.astype(i64),
                                   argmax_values)
    tile.store(out_index, (pid_m,), argmax_values)
