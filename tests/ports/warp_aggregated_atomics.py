"""cuda-samples' warpAggregatedAtomicsCG: stream compaction with one atomic per warp.

Written from the sample's `filter_arr`: every thread whose element is positive needs a
slot in `dst`; instead of one `atomicAdd` per thread, the threads of a warp that take the
branch together elect a leader (the lowest lane of the group), the leader adds the
group's size to the counter once, shuffles the old value to the group, and each thread
takes `old + (the group's lanes below it)`. The result is checked as a multiset against
NumPy's `src[src > 0]` (the order of the slots depends on scheduling) and the count
exactly.

Two ports:

- `filter_arr`: the sample's shape. Its `cg::coalesced_threads()` is
  `ox.warp.activemask()` (the group's lanes), `thread_rank()` is
  `popc(active & lanemask_lt)`. Uses `ox.warp.activemask` and the lane masks (issue 15
  item 9).
- `filter_arr_ballot`: with the older warp primitives only: the loop runs on a
  warp-uniform index (from `ox.warp_id()`) so that every lane reaches a full-mask
  `ox.warp.ballot(keep)`, whose result is the group.

Friction met while porting:

- `active & ((1 << lane) - 1)`, the usual "lanes below me" mask, mixes `u32` (the mask)
  with `i32` (`lane`, so `1 << lane` is `i32`). It was "mixing u32 and i32: signed and
  unsigned integers of one width have no common type"; now `&`, `|`, `^` of one width take
  the unsigned type, as in CUDA (issue 15 item 13), and `natural_lane_mask` runs.
- `u32(1) << lane` is refused the same way: the shift amount must share the value's
  signedness, although the result of a shift always has the left operand's type (C, and
  docs/language.md reads the amount as unsigned anyway). The hint's `i64(x)` would
  widen the mask. Working form: `u32(1) << u32(lane)`, or `ox.warp.lanemask_lt()`.
- The pre-CG form, `__ballot_sync(0xffffffff, 1)` under `if src[i] > 0`, is rightly a
  SafetyError (its hint describes the fix well).
"""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import AtomicSlice, RawSlice, Slice, i32, u32


@ox.func
def atomic_agg_inc(counter):
    """`atomicAggInc`: one atomic add per coalesced group; returns this thread's slot."""
    active = ox.warp.activemask()
    leader = ox.ffs(active) - 1
    res = 0
    if ox.lane_id() == leader:
        res = ox.atomic.add(counter, 0, ox.popc(active))
    res = ox.warp.shuffle(res, leader, active)
    return res + ox.popc(active & ox.warp.lanemask_lt())


@ox.kernel
def filter_arr(dst: RawSlice[i32], nres: AtomicSlice[i32], src: Slice[i32]):
    """Copies the positive elements of `src` to `dst[0:nres[0]]`, in some order."""
    n = len(src)
    i = ox.thread_idx.x + ox.block_idx.x * ox.block_dim.x
    while i < n:
        if src[i] > 0:
            with ox.unsafe():
                dst[atomic_agg_inc(nres)] = src[i]
        i += ox.grid_dim.x * ox.block_dim.x


@ox.kernel
def filter_arr_ballot(dst: RawSlice[i32], nres: AtomicSlice[i32], src: Slice[i32]):
    """The same with a full-warp ballot: the loop index is warp-uniform, so all lanes
    vote each round (launch with a block size that is a multiple of 32)."""
    n = len(src)
    lane = ox.lane_id()
    warps_per_block = ox.block_dim.x // 32
    base = (ox.block_idx.x * warps_per_block + ox.warp_id()) * 32
    stride = ox.grid_dim.x * warps_per_block * 32
    while base < n:
        i = base + lane
        keep = False
        if i < n:
            keep = src[i] > 0
        group = ox.warp.ballot(keep)
        res = 0
        if lane == 0 and group != 0:
            res = ox.atomic.add(nres, 0, ox.popc(group))
        res = ox.warp.shuffle(res, 0)
        if keep:
            with ox.unsafe():
                dst[res + ox.popc(group & ((u32(1) << u32(lane)) - 1))] = src[i]
        base += stride


def natural_lane_mask() -> ox.Kernel:
    """`active & ((1 << lane) - 1)` as CUDA writes it."""

    @ox.kernel
    def lanes_below(out: RawSlice[i32]):
        active = ox.warp.activemask()
        lane = ox.lane_id()
        with ox.unsafe():
            out[ox.thread_idx.x] = ox.popc(active & ((1 << lane) - 1))

    return lanes_below


def natural_unsigned_shift() -> ox.Kernel:
    """`(u32(1) << lane) - 1` with an `i32` lane."""

    @ox.kernel
    def lanes_below_u(out: RawSlice[i32]):
        active = ox.warp.activemask()
        lane = ox.lane_id()
        with ox.unsafe():
            out[ox.thread_idx.x] = ox.popc(active & ((u32(1) << lane) - 1))

    return lanes_below_u


def run(kernel: ox.Kernel, src: np.ndarray, blocks: int, block: int) -> np.ndarray:
    """The compacted elements `kernel` writes (in the order it wrote them)."""
    dst = np.zeros_like(src)
    nres = np.zeros(1, np.int32)
    kernel[blocks, block](dst, nres, src)
    return dst[:int(nres[0])]
