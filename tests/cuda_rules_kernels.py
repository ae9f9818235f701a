"""Kernels written as cuda-samples and numba write them, which CUDA defines and oxide must
accept (issue 27, "Uniformity that knows the hardware", "Early exit"). Shared by
tests/test_cuda_rules.py (CPU, and what stays refused) and tests/test_gpu_cuda_rules.py.
Each has a NumPy model next to it."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import DisjointSlice, RawSlice, Slice, f32, i32, thread


@ox.kernel
def reduce4(x: Slice[f32], out: RawSlice[f32]):
    """cuda-samples `reduce4`: a shared tree down to 64 values, then `if tid < 32:` and
    shuffles. No declared block: the last warp's shuffles are proved for block shapes
    whose x extent is a multiple of 32, and the launch checks that."""
    sdata = ox.shared.dynamic(f32)
    tid = ox.thread_idx.x
    i = ox.block_idx.x * (ox.block_dim.x * 2) + tid
    s = f32(0)
    if i < len(x):
        s = x[i]
    if i + ox.block_dim.x < len(x):
        s += x[i + ox.block_dim.x]
    with ox.unsafe():
        sdata[tid] = s
    ox.sync_threads()
    k = ox.block_dim.x // 2
    while k > 32:
        if tid < k:
            with ox.unsafe():
                s = s + sdata[tid + k]
                sdata[tid] = s
        ox.sync_threads()
        k //= 2
    if tid < 32:
        if ox.block_dim.x >= 64:
            with ox.unsafe():
                s += sdata[tid + 32]
        off = 16
        while off > 0:
            s += ox.warp.shuffle_down(s, off)
            off //= 2
    if tid == 0:
        with ox.unsafe():
            out[ox.block_idx.x] = s


def reduce4_model(x: np.ndarray, blocks: int, block: int) -> np.ndarray:
    return np.array([x[b * 2 * block:(b + 1) * 2 * block].sum(dtype=np.float64)
                     for b in range(blocks)])


@ox.kernel
def shfl_scan(data: RawSlice[i32], width: i32, sums: RawSlice[i32]):
    """cuda-samples `shfl_scan_test`: a warp scan by `shuffle_up` in a loop bounded by the
    parameter `width` (32 in the sample's launch), the warp totals through shared memory,
    and the loop counter `i` reused under `if warp_id == 0:` with an explicit mask, as the
    sample writes it."""
    part = ox.shared.dynamic(i32)
    tid = ox.thread_idx.x
    gid = ox.block_idx.x * ox.block_dim.x + tid
    lane = gid % 32
    warp_id = tid // 32
    with ox.unsafe():
        value = data[gid]
    i = 1
    while i <= width:
        n = ox.warp.shuffle_up(value, i)
        if lane >= i:
            value += n
        i *= 2
    if tid % 32 == 31:
        with ox.unsafe():
            part[warp_id] = value
    ox.sync_threads()
    warps = ox.block_dim.x // 32
    if warp_id == 0 and lane < warps:
        with ox.unsafe():
            warp_sum = part[lane]
        mask = ox.u32((1 << warps) - 1)
        i = 1
        while i <= warps:
            n = ox.warp.shuffle_up(warp_sum, i, mask)
            if lane >= i:
                warp_sum += n
            i *= 2
        with ox.unsafe():
            part[lane] = warp_sum
    ox.sync_threads()
    if warp_id > 0:
        with ox.unsafe():
            value += part[warp_id - 1]
    with ox.unsafe():
        data[gid] = value
        if tid == ox.block_dim.x - 1:
            sums[ox.block_idx.x] = value


def shfl_scan_model(data: np.ndarray, block: int) -> np.ndarray:
    return np.concatenate([np.cumsum(row) for row in data.reshape(-1, block)]).astype(np.int32)


@ox.kernel(block=128)
def early_return_stencil(x: Slice[f32], out: DisjointSlice[f32]):
    """numba-style: threads past the end return, then a barrier, then each thread reads
    its own cell and its left neighbour's (which a thread before it wrote: lower threads
    of the block return only if this one does)."""
    sh = ox.shared.array(f32, 128)
    i = thread.index_1d()
    t = thread.in_block()
    if i >= len(out):
        return
    sh[t] = x[i]
    ox.sync_threads()
    v = sh[t]
    if t > 0:
        v += sh[t - 1]
    out[i] = v


def early_return_stencil_model(x: np.ndarray) -> np.ndarray:
    out = x.copy()
    for i in range(len(x)):
        if i % 128:
            out[i] += x[i - 1]
    return out


@ox.kernel
def early_return_then_barrier(x: Slice[f32], n: i32, out: DisjointSlice[f32]):
    """`if i >= n: return` then `ox.sync_threads()`, no declared block."""
    i = thread.index_1d()
    if i >= n:
        return
    ox.sync_threads()
    if i in out:
        out[i] = x[i] * 2.0
