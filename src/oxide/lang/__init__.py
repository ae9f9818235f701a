"""The device-side API: the names kernels call (`thread`, `ox.math`, `ox.warp`...)."""

from __future__ import annotations

from typing import Any

from oxide.lang.grid import grid
from oxide.lang.hopper import (
    asm,
    cluster,
    elect_sync,
    fence_mbarrier_init,
    fence_proxy_async,
    ldmatrix,
    mbarrier,
    mma_sync,
    named_barrier_sync,
    setmaxnreg,
    stmatrix,
    tma,
    wgmma,
    wgmma_commit,
    wgmma_desc,
    wgmma_fence,
    wgmma_wait,
)
from oxide.lang.intrinsic import Intrinsic, Namespace, RegisterGroup

thread = Namespace("thread", {
    "index_1d": "A ThreadIndex unique to this thread: block_idx.x * block_dim.x + thread_idx.x.",
    "index_2d": "A 2-D ThreadIndex: `.row` from the y dimension, `.col` from the x dimension.",
    "in_block": "This thread's place in its block, for a kernel that declares its block shape "
                "(`@ox.kernel(block=...)`): `thread_idx.x` for a 1-D block; for a 2-D block a "
                "(row, col) pair with `.row` (`thread_idx.y`) and `.col` (`thread_idx.x`) that "
                "indexes a 2-D shared array.",
}, doc="Witnesses: `thread.index_1d()` / `index_2d()` give a ThreadIndex unique to the thread "
       "over the whole launch, the only index a DisjointSlice is written at "
       "(`if i in out: out[i] = ...`); `thread.in_block()` is the thread's place in its "
       "block, for shared arrays.")

thread_idx = RegisterGroup("thread_idx", "This thread's index in its block (`.x`, `.y`, `.z`).")
block_idx = RegisterGroup("block_idx", "This block's index in the grid.")
block_dim = RegisterGroup("block_dim", "The block's size in threads.")
grid_dim = RegisterGroup("grid_dim", "The grid's size in blocks.")

lane_id = Intrinsic("lane_id", "This thread's lane in its warp (0-31).")
warp_id = Intrinsic("warp_id", "This thread's warp in its block (thread_idx linearized // 32).")
sync_threads = Intrinsic("sync_threads", "Barrier for every thread of the block.")
sync_warp = Intrinsic("sync_warp", "sync_warp(mask=FULL): barrier for the lanes of the warp "
                      "in mask (__syncwarp).")
sync_threads_count = Intrinsic("sync_threads_count", "sync_threads_count(pred): a block "
                               "barrier that returns how many threads' pred holds, as i32.")
sync_threads_and = Intrinsic("sync_threads_and", "sync_threads_and(pred): a block barrier "
                             "that returns whether pred holds on every thread.")
sync_threads_or = Intrinsic("sync_threads_or", "sync_threads_or(pred): a block barrier "
                            "that returns whether pred holds on any thread.")
threadfence = Intrinsic("threadfence", "Memory fence at device scope.")
threadfence_block = Intrinsic("threadfence_block", "Memory fence at block scope.")
threadfence_system = Intrinsic("threadfence_system", "Memory fence at system scope.")

MATH_FUNCTIONS = (
    "sqrt rsqrt cbrt exp exp2 exp10 expm1 log log2 log10 log1p sin cos tan asin acos atan "
    "sinh cosh tanh asinh acosh atanh atan2 pow erf erfc lgamma tgamma floor ceil trunc "
    "round fabs fma fmod hypot copysign fmin fmax isnan isinf isfinite "
    "degrees radians remainder nextafter modf frexp ldexp gamma"
).split()

math = Namespace("math", {name: f"`{name}` on floats (libdevice on the GPU)."
                          for name in MATH_FUNCTIONS},
                 doc="Float math in kernels: libm on the CPU, libdevice on the GPU; an f32 "
                     "argument gives an f32 result. Python's own `math` module maps onto it.")

# Integer intrinsics (CUDA's __popc, __clz, __ffs, __brev, __byte_perm, __mulhi/__umulhi).
popc = Intrinsic("popc", "popc(x): the number of set bits of an integer, as i32 (__popc/__popcll).")
clz = Intrinsic("clz", "clz(x): leading zero bits of a 32- or 64-bit integer, as i32 (__clz).")
ffs = Intrinsic("ffs", "ffs(x): 1 + the index of the lowest set bit, 0 for 0, as i32 (__ffs).")
brev = Intrinsic("brev", "brev(x): the bits of a 32- or 64-bit integer reversed (__brev).")
byte_perm = Intrinsic("byte_perm", "byte_perm(x, y, s): four bytes picked from y:x by the "
                      "selector s, as u32 (__byte_perm, PTX prmt).")
mulhi = Intrinsic("mulhi", "mulhi(a, b): the high half of the full product of two 32- or "
                  "64-bit integers (__mulhi, __umulhi, __mul64hi, __umul64hi).")

warp = Namespace("warp", {
    "shuffle": "shuffle(value, src_lane, mask=FULL): read `value` from another lane.",
    "shuffle_up": "shuffle_up(value, delta, mask=FULL): read from lane - delta.",
    "shuffle_down": "shuffle_down(value, delta, mask=FULL): read from lane + delta.",
    "shuffle_xor": "shuffle_xor(value, lane_mask, mask=FULL): read from lane ^ lane_mask.",
    "ballot": "ballot(pred, mask=FULL): a u32 with bit i set where lane i's pred holds.",
    "any": "any(pred, mask=FULL): whether pred holds on any lane.",
    "all": "all(pred, mask=FULL): whether pred holds on every lane.",
    "reduce_add": "reduce_add(value, mask=FULL): the sum over the warp, on every lane.",
    "reduce_min": "reduce_min(value, mask=FULL): the minimum over the warp.",
    "reduce_max": "reduce_max(value, mask=FULL): the maximum over the warp.",
    "match_any": "match_any(value, mask=FULL): the lanes holding the same value.",
    "match_all": "match_all(value, mask=FULL): (mask, True) where every member holds the "
                 "same value, else (0, False) (__match_all_sync).",
    "activemask": "activemask(): the lanes of the warp executing this call together, as u32.",
    "lanemask_lt": "lanemask_lt(): a u32 with the bits of the lanes below this one.",
    "lanemask_le": "lanemask_le(): a u32 with the bits of the lanes up to this one.",
    "lanemask_eq": "lanemask_eq(): a u32 with this lane's bit.",
    "lanemask_gt": "lanemask_gt(): a u32 with the bits of the lanes above this one.",
    "lanemask_ge": "lanemask_ge(): a u32 with the bits of this lane and those above.",
}, doc="Warp collectives (CUDA's __shfl_sync, __ballot_sync, __reduce_*_sync...): `mask` "
       "names the lanes taking part; without one, the whole warp must reach the call.")

atomic = Namespace("atomic", {
    name: f"atomic.{name}(arr, index, value): read-modify-write, returns the old value."
    for name in ("add", "sub", "min", "max", "exch", "cas", "and_", "or_", "xor", "inc", "dec")
}, doc="Atomics on an AtomicSlice or a shared array: `ox.atomic.add(arr, i, v)` updates "
       "`arr[i]` and returns the old value.")

shared = Namespace("shared", {
    "array": "shared.array(dtype, shape): a block-shared array of static shape.",
    "dynamic": "shared.dynamic(dtype): the launch's dynamic shared memory as a 1-D array.",
}, doc="Block-shared memory: one array per block, visible to all its threads; accesses go "
       "in `with ox.unsafe():` next to the barriers that order them.")
local = Namespace("local", {"array": "local.array(dtype, shape): a per-thread array."},
                  doc="Per-thread arrays of static shape (registers where indices are "
                      "constants, else local memory); they start zeroed.")

block = Namespace("block", {
    "reduce_add": "reduce_add(v): the block's sum, returned to every thread.",
    "reduce_min": "reduce_min(v): the block's minimum, returned to every thread.",
    "reduce_max": "reduce_max(v): the block's maximum, returned to every thread.",
    "exclusive_scan": "exclusive_scan(v): the sum of v over the threads before this one.",
}, doc="Block collectives: every thread of the block must reach the call (a barrier is "
       "inside); the result is returned to every thread.")


class unsafe:
    """`with ox.unsafe():` marks code whose races and raw accesses the programmer vouches for.

    It is only meaningful inside kernels; on the host it does nothing.
    """

    def __enter__(self) -> unsafe:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


__all__ = [
    "Intrinsic", "thread", "thread_idx", "block_idx", "block_dim", "grid_dim", "lane_id",
    "warp_id", "sync_threads", "sync_warp", "threadfence", "threadfence_block",
    "threadfence_system", "math", "warp", "atomic", "shared", "local", "block", "unsafe",
    "MATH_FUNCTIONS", "popc", "clz", "ffs", "brev", "byte_perm", "mulhi", "sync_threads_count",
    "sync_threads_and", "sync_threads_or", "asm", "mma_sync", "ldmatrix", "stmatrix",
    "mbarrier", "fence_proxy_async", "fence_mbarrier_init", "elect_sync", "setmaxnreg",
    "named_barrier_sync", "cluster", "grid", "wgmma", "wgmma_desc", "wgmma_fence",
    "wgmma_commit", "wgmma_wait", "tma",
]
