"""cuda-samples' threadFenceReduction: a sum in one launch, the last block finishing it.

Written from the sample's `reduceSinglePass`: each block sums a grid-strided share of
the input into shared memory, reduces it with a tree of `sync_threads()` steps and
writes its partial sum; then every thread fences (`ox.threadfence()`), thread 0 takes
a ticket from an atomic counter (`ox.atomic.inc`, CUDA's `atomicInc`), and the block
that draws the last ticket sums the partials the same way and resets the counter.
Integers, so the result must equal NumPy's sum exactly.

Friction met while porting:

- The sample broadcasts "am I the last block" through `__shared__ bool amLast`, written
  by thread 0 before a barrier and read by all after it. This compiles as written
  (`natural_shared_flag`): a shared cell read at a uniform index in a phase no write
  shares is the same in every thread (passes/shared_phases.py), and a name reused
  under `if last:` no longer makes the first tree loop's counter thread-dependent
  (variables are followed write by write, passes/slot_reaching.py). Until issue 27 both
  were SafetyErrors.
- `last = ox.sync_threads_or(is_last)` (thread 0 votes) is the other way: one barrier
  that returns the same value in every thread; `reduce_single_pass` uses it.
- `ox.atomic.inc(count, 0, ox.grid_dim.x)` is a KernelTypeError ("`count` holds u32;
  the value is i32"), and `ticket == ox.grid_dim.x - 1` mixes `u32` and `i32`: CUDA's
  `atomicInc` is unsigned while oxide's thread registers are `i32`, so each needs a
  `u32(...)` (the hints say so).
- The partial sums are written at `block_idx.x` by thread 0, which a DisjointSlice does
  not allow; they live in a `RawSlice` written inside `ox.unsafe()`.
"""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import AtomicSlice, RawSlice, Slice, bool_, i32, u32

BLOCK = 128


@ox.kernel
def reduce_single_pass(data: Slice[i32], partial: RawSlice[i32], count: AtomicSlice[u32]):
    """The sum of `data` into `partial[0]` in one launch; `count` must start at 0 and is
    left at 0. `partial` needs one element per block."""
    sdata = ox.shared.array(i32, BLOCK)
    tid = ox.thread_idx.x
    acc = 0
    i = ox.block_idx.x * BLOCK + tid
    stride = ox.grid_dim.x * BLOCK
    while i < len(data):
        acc += data[i]
        i += stride
    with ox.unsafe():
        sdata[tid] = acc
    ox.sync_threads()
    s = BLOCK // 2
    while s > 0:
        if tid < s:
            with ox.unsafe():
                sdata[tid] += sdata[tid + s]
        ox.sync_threads()
        s //= 2
    if tid == 0:
        with ox.unsafe():
            partial[ox.block_idx.x] = sdata[0]
    # every block's partial is visible to all before its ticket is drawn
    ox.threadfence()
    is_last = False
    if tid == 0:
        ticket = ox.atomic.inc(count, 0, u32(ox.grid_dim.x))
        is_last = ticket == u32(ox.grid_dim.x - 1)
    last = ox.sync_threads_or(is_last)  # the sample's __shared__ bool amLast, uniform
    if last:
        acc = 0
        j = tid
        while j < ox.grid_dim.x:
            with ox.unsafe():
                acc += partial[j]
            j += BLOCK
        with ox.unsafe():
            sdata[tid] = acc
        ox.sync_threads()
        s = BLOCK // 2
        while s > 0:
            if tid < s:
                with ox.unsafe():
                    sdata[tid] += sdata[tid + s]
            ox.sync_threads()
            s //= 2
        if tid == 0:
            with ox.unsafe():
                partial[0] = sdata[0]
            ox.atomic.exch(count, 0, u32(0))


def natural_shared_flag(reuse_counter: bool) -> ox.Kernel:
    """The sample's shape: the last-block flag in a one-element shared array. With
    `reuse_counter`, the final tree loop reuses the name `s` as the first one does."""

    @ox.kernel
    def reduce_shared_flag(data: Slice[i32], partial: RawSlice[i32], count: AtomicSlice[u32]):
        sdata = ox.shared.array(i32, BLOCK)
        am_last = ox.shared.array(bool_, 1)
        tid = ox.thread_idx.x
        acc = 0
        i = ox.block_idx.x * BLOCK + tid
        while i < len(data):
            acc += data[i]
            i += ox.grid_dim.x * BLOCK
        with ox.unsafe():
            sdata[tid] = acc
        ox.sync_threads()
        s = BLOCK // 2
        while s > 0:
            if tid < s:
                with ox.unsafe():
                    sdata[tid] += sdata[tid + s]
            ox.sync_threads()
            s //= 2
        if tid == 0:
            with ox.unsafe():
                partial[ox.block_idx.x] = sdata[0]
        ox.threadfence()
        if tid == 0:
            ticket = ox.atomic.inc(count, 0, u32(ox.grid_dim.x))
            with ox.unsafe():
                am_last[0] = ticket == u32(ox.grid_dim.x - 1)
        ox.sync_threads()
        with ox.unsafe():
            last = am_last[0]
        if last:
            with ox.unsafe():
                sdata[tid] = partial[tid] if tid < ox.grid_dim.x else 0
            ox.sync_threads()
            if reuse_counter:
                s = BLOCK // 2
                while s > 0:
                    if tid < s:
                        with ox.unsafe():
                            sdata[tid] += sdata[tid + s]
                    ox.sync_threads()
                    s //= 2
            else:
                t = BLOCK // 2
                while t > 0:
                    if tid < t:
                        with ox.unsafe():
                            sdata[tid] += sdata[tid + t]
                    ox.sync_threads()
                    t //= 2
            if tid == 0:
                with ox.unsafe():
                    partial[0] = sdata[0]
                ox.atomic.exch(count, 0, u32(0))

    return reduce_shared_flag


def natural_signed_ticket() -> ox.Kernel:
    """`atomicInc(&count, gridDim.x)` and the ticket test as CUDA writes them."""

    @ox.kernel
    def ticket_only(partial: RawSlice[i32], count: AtomicSlice[u32]):
        if ox.thread_idx.x == 0:
            ticket = ox.atomic.inc(count, 0, ox.grid_dim.x)
            if ticket == ox.grid_dim.x - 1:
                with ox.unsafe():
                    partial[0] = 1

    return ticket_only


def run(data: np.ndarray, blocks: int) -> tuple[int, int]:
    """The one-launch sum of `data` over `blocks` blocks, and the counter left behind."""
    partial = np.zeros(blocks, np.int32)
    count = np.zeros(1, np.uint32)
    reduce_single_pass[blocks, BLOCK](data, partial, count)
    return int(partial[0]), int(count[0])
