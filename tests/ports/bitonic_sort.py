"""cuda-samples' bitonic sort: one block sorts a power-of-two array in shared memory.

Two ports, written from the two public versions:

- `bitonic_sort`: the classic SDK sample, one thread per element. Stage `k` (2, 4, ...,
  n) and step `j` (k/2, ..., 1): thread `t` compares its element with `t ^ j` and swaps
  them into ascending order when `t & k == 0`, descending otherwise, with a
  `sync_threads()` after every step. The length is the argument's (`len(values)`, a
  power of two up to 1024) and the shared array is the launch's dynamic shared memory.
- `bitonic_sort_shared`: cuda-samples' sortingNetworks `bitonicSortShared`, key/value
  pairs, two elements per thread, each block sorting its own `array_length` segment in
  the direction `dir` (1 ascending, 0 descending), the compare-exchange in an `@ox.func`
  that returns the pair in order.

Both ported as CUDA writes them, with no change beyond `with ox.unsafe():` around the
shared-memory accesses: no friction found here (swaps as tuple assignments, `u32 ^ bool`
for the sub-sequence direction, `while` loops with `k *= 2` around barriers all work).
"""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import Const, DisjointSlice, RawSlice, Slice, i32, thread, u32

LIMIT = 1024  # elements one block sorts at most (sortingNetworks' SHARED_SIZE_LIMIT)


@ox.kernel
def bitonic_sort(values: DisjointSlice[i32]):
    """Sorts `values` (a power-of-two length, one block of that many threads) in place."""
    shared = ox.shared.dynamic(i32)
    n = len(values)
    tid = ox.thread_idx.x
    i = thread.index_1d()
    if i in values:
        with ox.unsafe():
            shared[tid] = values[i]
    ox.sync_threads()
    k = 2
    while k <= n:
        j = k // 2
        while j > 0:
            ixj = tid ^ j
            if ixj > tid:
                with ox.unsafe():
                    if (tid & k) == 0:
                        if shared[tid] > shared[ixj]:
                            shared[tid], shared[ixj] = shared[ixj], shared[tid]
                    else:
                        if shared[tid] < shared[ixj]:
                            shared[tid], shared[ixj] = shared[ixj], shared[tid]
            ox.sync_threads()
            j //= 2
        k *= 2
    if i in values:
        with ox.unsafe():
            values[i] = shared[tid]


@ox.func
def comparator(ka, va, kb, vb, dir):
    """The pair (ka, va), (kb, vb) in the order `dir` asks for (1: ascending)."""
    if (ka > kb) == dir:
        return kb, vb, ka, va
    return ka, va, kb, vb


@ox.kernel
def bitonic_sort_shared(dst_key: RawSlice[u32], dst_val: RawSlice[u32], src_key: Slice[u32],
                        src_val: Slice[u32], array_length: Const[int], dir: u32):
    """Each block sorts its segment of `array_length` pairs by key; `array_length // 2`
    threads per block, each moving two elements."""
    s_key = ox.shared.array(u32, LIMIT)
    s_val = ox.shared.array(u32, LIMIT)
    tid = ox.thread_idx.x
    base = ox.block_idx.x * array_length + tid
    half = array_length // 2
    with ox.unsafe():
        s_key[tid] = src_key[base]
        s_val[tid] = src_val[base]
        s_key[tid + half] = src_key[base + half]
        s_val[tid + half] = src_val[base + half]
    size = 2
    while size < array_length:
        ddd = dir ^ ((tid & (size // 2)) != 0)  # this bitonic sub-sequence's direction
        stride = size // 2
        while stride > 0:
            ox.sync_threads()
            pos = 2 * tid - (tid & (stride - 1))
            with ox.unsafe():
                s_key[pos], s_val[pos], s_key[pos + stride], s_val[pos + stride] = comparator(
                    s_key[pos], s_val[pos], s_key[pos + stride], s_val[pos + stride], ddd)
            stride >>= 1
        size <<= 1
    stride = half  # the last merge runs in the requested direction
    while stride > 0:
        ox.sync_threads()
        pos = 2 * tid - (tid & (stride - 1))
        with ox.unsafe():
            s_key[pos], s_val[pos], s_key[pos + stride], s_val[pos + stride] = comparator(
                s_key[pos], s_val[pos], s_key[pos + stride], s_val[pos + stride], dir)
        stride >>= 1
    ox.sync_threads()
    with ox.unsafe():
        dst_key[base] = s_key[tid]
        dst_val[base] = s_val[tid]
        dst_key[base + half] = s_key[tid + half]
        dst_val[base + half] = s_val[tid + half]


def run(values: np.ndarray) -> np.ndarray:
    """`bitonic_sort` on a copy of `values` (one block)."""
    out = values.astype(np.int32, copy=True)
    n = len(out)
    bitonic_sort[ox.LaunchConfig(grid=1, block=n, shared_mem_bytes=4 * n)](out)
    return out


def run_pairs(keys: np.ndarray, vals: np.ndarray, array_length: int, ascending: bool
              ) -> tuple[np.ndarray, np.ndarray]:
    """`bitonic_sort_shared` over `len(keys) // array_length` segments."""
    dk, dv = np.zeros_like(keys), np.zeros_like(vals)
    blocks = len(keys) // array_length
    bitonic_sort_shared[blocks, array_length // 2](dk, dv, keys, vals, array_length,
                                                   int(ascending))
    return dk, dv
