"""Block collectives (`ox.block.*`), written in oxide itself.

They are the safe face of shared memory: the races they would otherwise be
(every thread writing a slot, barriers ordering the reads) are proved once
here, inside `with ox.unsafe():`, and kernels call them without it. The
frontend inlines these @ox.func functions for each call, with the value's
dtype (`dtype`) and the combining function (`combine`) bound at compile time.

The shape is the classic one: a shuffle tree inside each warp, one partial
per warp in shared memory, a second tree in warp 0. Any block size up to
1024 works, including a last warp with fewer than 32 threads: each warp
shuffles only among the lanes it has (`_lanes`), and a lane combines a
neighbour's value only if that neighbour exists. The scratch array has one
slot per warp plus separate result slots, so a collective called in a loop
needs no third barrier: a result slot is rewritten only after the next
call's first barrier, which every reader of the old result has passed.

Every thread of the block must call a collective (they contain
`ox.sync_threads()`), as with `__syncthreads` in CUDA.
"""

from __future__ import annotations

from typing import Any

from oxide.kernel_types import DeviceFunction, func
from oxide.lang import block_dim, shared, sync_threads, thread_idx, unsafe, warp
from oxide.types import u32

_WARP = 32
_MAX_WARPS = 32  # 1024 threads


@func
def _add(a, b):
    return a + b


@func
def _min(a, b):
    return min(a, b)


@func
def _max(a, b):
    return max(a, b)


@func
def _block_threads():
    return block_dim.x * block_dim.y * block_dim.z


@func
def _linear_tid():
    return thread_idx.x + block_dim.x * (thread_idx.y + block_dim.y * thread_idx.z)


@func
def _lanes(n):
    """The shuffle mask of a warp holding `n` threads (1 to 32); `1 << 32` is 0 in oxide."""
    return (u32(1) << u32(n)) - u32(1)


@func
def _warp_reduce(v, combine, lane, n, mask):
    """Combines the values of lanes [0, n) into lane 0 (other lanes hold partial results)."""
    acc = v
    for s in range(5):
        off = 16 >> s
        other = warp.shuffle_down(acc, off, mask)
        if lane + off < n:
            acc = combine(acc, other)
    return acc


@func
def _warp_inclusive_scan(v, lane, mask):
    """Lane i gets the sum over lanes [0, i] (lanes below i always exist)."""
    acc = v
    for s in range(5):
        off = 1 << s
        other = warp.shuffle_up(acc, off, mask)
        if lane >= off:
            acc = acc + other
    return acc


@func
def _block_reduce(v, dtype, combine):
    slots = shared.array(dtype, _MAX_WARPS + 1)  # one partial per warp, then the result
    n = _block_threads()
    tid = _linear_tid()
    lane = tid % _WARP
    w = tid // _WARP
    warps = (n + _WARP - 1) // _WARP
    in_warp = min(_WARP, n - w * _WARP)
    partial = _warp_reduce(v, combine, lane, in_warp, _lanes(in_warp))
    if lane == 0:
        with unsafe():
            slots[w] = partial
    sync_threads()
    if w == 0:
        with unsafe():
            x = slots[min(lane, warps - 1)]
        total = _warp_reduce(x, combine, lane, warps, _lanes(min(_WARP, n)))
        if lane == 0:
            with unsafe():
                slots[_MAX_WARPS] = total
    sync_threads()
    with unsafe():
        result = slots[_MAX_WARPS]
    return result


@func
def _block_exclusive_scan(v, dtype):
    slots = shared.array(dtype, 2 * _MAX_WARPS)  # warp totals, then the warps' offsets
    n = _block_threads()
    tid = _linear_tid()
    lane = tid % _WARP
    w = tid // _WARP
    warps = (n + _WARP - 1) // _WARP
    in_warp = min(_WARP, n - w * _WARP)
    inclusive = _warp_inclusive_scan(v, lane, _lanes(in_warp))
    if lane == in_warp - 1:
        with unsafe():
            slots[w] = inclusive
    sync_threads()
    if w == 0:
        with unsafe():
            total = slots[min(lane, warps - 1)]
        before = _warp_inclusive_scan(total, lane, _lanes(min(_WARP, n))) - total
        if lane < warps:
            with unsafe():
                slots[_MAX_WARPS + lane] = before
    sync_threads()
    with unsafe():
        offset = slots[_MAX_WARPS + w]
    return offset + inclusive - v


def implementation(kind: str) -> tuple[DeviceFunction, tuple[Any, ...]]:
    """The @ox.func behind `ox.block.<kind>` and its compile-time arguments after (v, dtype)."""
    if kind == "exclusive_scan":
        return _block_exclusive_scan, ()
    combine = {"reduce_add": _add, "reduce_min": _min, "reduce_max": _max}[kind]
    return _block_reduce, (combine,)
