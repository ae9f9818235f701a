"""The named barriers of a kernel with a producer warp group: the consumers' barrier (1),
the two of their turns at the tensor cores (2 and 3, tile/pingpong.py), and one per
consumer warp group for what it does alone (4 and 5: an epilogue's TMA store of the
group's own rows, tile/tma_stores.py).

On the GPU each is `barrier.sync id, n` (wait until n threads arrived, counting this one)
or `barrier.arrive id, n` (count this one, do not wait); the producer warp group never
meets them. On the CPU (OXIDE_TILE_CPU_HOPPER=1) each is an mbarrier in shared memory of
n arrivals (codegen/hopper_cpu.py) that the same threads arrive on: a sync arrives,
suspends once, then waits for the phase it arrived in. The CPU's plain block barrier would
not do: its scheduler resumes a thread at a barrier while another waits on an mbarrier
(the producer, which never comes), so a consumer warp group waiting for its turn would
not hold up the other at the barrier before the epilogue's TMA store, which would then
store rows not yet written. The suspension before the wait keeps the lanes of a warp
together: the CPU's warp collectives need them to go on as one, and a lane whose arrive
completed the phase would otherwise go on while the warp's other lanes wait.
"""

from __future__ import annotations

from typing import Any

from xdsl.ir import SSAValue

from oxide import types as T
from oxide.ir import ops
from oxide.ir.types import ir_type
from oxide.tile.tma_rings import init_barriers

CONSUMERS = 1  # the consumer warps' barrier (0 is the whole block's)
FIRST_TURN = 2  # tile/pingpong.py's two: 2 and 3
FIRST_GROUP = 4  # a consumer warp group's own: 4 + its index (at most two groups)
_COUNT = 3  # named barriers 1 to 3 (the consumers' count of threads)
GROUP_THREADS = 128


def warp_group(em: Any) -> SSAValue:
    """This consumer thread's warp group (an i32, computed at the kernel's start)."""
    _, warp = em._thread()
    return em._entry(ops.BinaryOp("shr", warp, em.const(2, T.i32)))


def group_leader(em: Any) -> SSAValue:
    """Whether this is the first thread of its warp group (computed at the kernel's start)."""
    lane, warp = em._thread()
    low = em._entry(ops.BinaryOp("and", warp, em.const(3, T.i32)))
    return em._entry(ops.CompareOp("eq", em._entry(ops.BinaryOp("or", lane, low)),
                                   em.const(0, T.i32)))


def sync_group(em: Any) -> None:
    """Wait on this consumer warp group's own named barrier until its 128 threads
    arrived: the group's threads alone, the other group goes on."""
    b = em.b
    group = em._entry(ops.CastOp(warp_group(em), ir_type(T.u32)))
    if not em.cpu:
        barrier = b.value(ops.BinaryOp("add", group, em.const(FIRST_GROUP, T.u32)))
        b.emit(ops.HopperOp("named_barrier", [barrier, em.const(GROUP_THREADS, T.u32)], []))
        return
    if em.cpu_group_barriers is None:
        em.cpu_group_barriers = init_barriers(em, 2, GROUP_THREADS)
        em.b.at_entry(ops.BarrierOp("block"))
        em.uses_barriers = True
    _cpu_sync(em, em.cpu_group_barriers, b.cast(group, T.i64))


def sync(em: Any, barrier: SSAValue) -> None:
    """Wait on named barrier `barrier` (a u32) until the consumer threads arrived."""
    b = em.b
    if not em.cpu:
        b.emit(ops.HopperOp("named_barrier", [barrier, em.const(em.consumer_threads, T.u32)],
                            []))
        return
    _cpu_sync(em, _cpu_barriers(em), _index(em, barrier))


def _cpu_sync(em: Any, bars: SSAValue, at: SSAValue) -> None:
    """The CPU's named barrier: arrive on mbarrier `at` of `bars`, suspend, wait for the
    phase arrived in."""
    b = em.b
    token = b.value(ops.HopperOp("mbarrier.arrive", [], [ir_type(T.i64)], bars, [at]))
    parity = b.value(ops.BinaryOp("shr", b.cast(token, T.u64), em.const(63, T.u64)))
    b.emit(ops.BarrierOp("block"))  # a suspension: every lane arrives before any looks
    b.emit(ops.HopperOp("mbarrier.wait_parity", [b.cast(parity, T.i32)], [], bars, [at]))


def arrive(em: Any, barrier: SSAValue) -> None:
    """Count this thread toward named barrier `barrier`'s (a u32) phase, without waiting."""
    b = em.b
    if not em.cpu:
        b.emit(ops.HopperOp("named_barrier.arrive",
                            [barrier, em.const(em.consumer_threads, T.u32)], []))
        return
    b.emit(ops.HopperOp("mbarrier.arrive", [], [ir_type(T.i64)], _cpu_barriers(em),
                        [_index(em, barrier)]))


def _cpu_barriers(em: Any) -> SSAValue:
    """The CPU's mbarriers of named barriers 1 to 3, made once (initialized at the
    kernel's start, then a block barrier: no thread arrives before all are)."""
    if em.cpu_named_barriers is None:
        em.cpu_named_barriers = init_barriers(em, _COUNT, em.consumer_threads)
        em.b.at_entry(ops.BarrierOp("block"))
        em.uses_barriers = True
    return em.cpu_named_barriers  # type: ignore[no-any-return]


def _index(em: Any, barrier: SSAValue) -> SSAValue:
    """The CPU mbarrier of named barrier `barrier`: element barrier - 1."""
    b = em.b
    return b.cast(b.value(ops.BinaryOp("sub", barrier, em.const(CONSUMERS, T.u32))), T.i64)
