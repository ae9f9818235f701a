"""A row too wide for the registers: part of it waits out the row's reductions in shared
memory instead of spilling to local memory.

What it assumes: the layout pass ran; a kernel without products (their operands and
accumulators have their own budget, tile/register_budget.py and the wgmma passes).
What it decides, for each reduction (`sum`, `max`, `min`, `argmax`...) in program order:
the tiles made before it, in its block, and used after it are live across it; where
they take more than `live_budget` registers a thread (the cap a block's size sets, less
`RESERVED` for addresses, indices and the reduction itself), the last slots of the largest
are stored to a thread-private array in shared memory before the reduction and read back
after it, as many as bring the rest under the budget and fit `STAGE_BYTES`.
What it guarantees: every value is the one the thread stored (a thread reads only its own
cells, so no barrier is needed and no two threads touch one cell), so the results are
bit-identical with and without staging. It runs for the GPU (and the CPU compiling as
sm_90 does, OXIDE_TILE_CPU_HOPPER=1, which tests it): the CPU has no registers to spare.

Why (issue 31, "rows of any width"): a whole 65536-column f32 row on 32 warps is 64
values a thread, and 1024 threads may have 64 registers each: ptxas spilled 400 bytes a
thread of `tile_softmax` to local memory, which at 2048 threads an SM is more than L1
holds, and the kernel ran at 0.76x Triton (H100, 2026-12-05). Shared memory is the same
SRAM as L1, taken explicitly: 24 slots of 1024 threads are 96 KB, two blocks an SM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.ir import Operation, SSAValue

from oxide import types as T
from oxide.ir import ops
from oxide.ir.tile_ops import TileType, kind_of
from oxide.tile.builder import TileBuilder
from oxide.tile.layouts import layout_of
from oxide.tile.register_budget import free_ops, register_cap, thread_registers
from oxide.tile.values import Slots

RESERVED = 24  # registers a thread needs beside its tiles: addresses, indices, reductions
# shared memory a block may stage: on sm_90 (227 KiB a block, the kernel compiled for
# sm_90a past 48 KiB) two such blocks still fit an SM; elsewhere within 48 KiB of static
# shared memory beside the reductions' cells
STAGE_BYTES_SM90 = 96 * 1024
STAGE_BYTES = 32 * 1024
_REDUCTIONS = frozenset({"reduce", "arg_reduce"})


@dataclass(frozen=True)
class Stage:
    """Slots `slots` of tile value `value` wait out the reduction in shared memory."""

    value: SSAValue
    slots: tuple[int, ...]


@dataclass
class StagingPlan:
    """The stages at each reduction (by the op), and the thread-private cells each dtype
    needs at most (one array a dtype, reused: every thread reads back its cells before
    it stores the next stage's, in its own program order)."""

    at: dict[Operation, list[Stage]]
    cells: dict[T.DType, int]
    # whether the tiles live across some reduction take more than the budget, staged or
    # not (tile/register_order.py then orders the lowered code)
    over_budget: bool = False
    has_products: bool = False  # a `tile.mma`: nothing staged, nothing reordered


def live_budget(num_warps: int, occupancy: int | None) -> int:
    """The registers a thread's live tiles may take: what the block's size (and an
    `occupancy`) leaves a thread, less RESERVED."""
    return register_cap(num_warps, occupancy or 1) - RESERVED


def plan_staging(b: TileBuilder, num_warps: int, occupancy: int | None,
                 stage_bytes: int) -> StagingPlan:
    """The stages of `b`'s kernel (see the module docstring), in at most `stage_bytes` of
    shared memory; none in a kernel with a product."""
    plan = StagingPlan({}, {})
    if any(kind_of(op) == "mma" for op in b.tile_ops):
        plan.has_products = True
        return plan
    budget = live_budget(num_warps, occupancy)
    limit = stage_bytes // (32 * num_warps)  # bytes a thread may stage
    order = {id(op): i for i, op in enumerate(b.tile_ops)}
    free = free_ops(b.tile_ops)
    for i, op in enumerate(b.tile_ops):
        if kind_of(op) not in _REDUCTIONS:
            continue
        across = _live_across(b, order, free, i, op)
        excess = sum(regs for regs, _ in across) - budget
        plan.over_budget |= excess > 0
        stages: list[Stage] = []
        room = limit
        for regs, r in sorted(across, key=lambda x: -x[0]):
            if excess <= 0 or room <= 0:
                break
            item = r.type.dtype.itemsize
            count = min(excess, regs, room // item)  # 32-bit slots: a register each
            slots = layout_of(r).slots
            stages.append(Stage(r, tuple(range(slots - count, slots))))
            plan.cells[r.type.dtype] = max(plan.cells.get(r.type.dtype, 0), count)
            excess -= count
            room -= count * item
        if stages:
            plan.at[op] = stages
    return plan


def _live_across(b: TileBuilder, order: dict[int, int], free: set[int], i: int,
                 op: Operation) -> list[tuple[int, Any]]:
    """(registers, value) of the 32-bit tiles made before op `i` in its block and used
    after it: what a thread holds through the reduction (read back after it, the value
    serves the later uses; the earlier ones are lowered already)."""
    block = op.parent_block()
    found = []
    for made in b.tile_ops[:i]:
        if id(made) in free or made.parent_block() is not block:
            continue
        for r in made.results:
            if (not isinstance(r.type, TileType) or r.type.layout.data is None
                    or not r.type.dims or r.type.dtype.itemsize != 4):
                continue
            if max((order.get(id(u.operation), -1) for u in r.uses), default=-1) > i:
                found.append((thread_registers(r), r))
    return found


class StagingRefused(Exception):
    """The staged rows and the kernel's other shared arrays together take more shared
    memory than the target has: the kernel is to be lowered again without staging (its
    rows then spill, as ptxas places them)."""


class Stager:
    """Emits a plan's stores before its reduction and its reads after it (ToSIMT); its
    arrays are counted against the block's shared memory last (`finish`), so that a kernel
    whose other arrays leave no room gives the staging up rather than fail to compile."""

    def __init__(self, em: Any, plan: StagingPlan, threads: int, limit: int) -> None:
        self.em = em
        self.plan = plan
        self.threads = threads
        self.limit = limit  # the target's shared memory a block
        self.arrays: dict[T.DType, SSAValue] = {}
        self.bytes = 0
        self._tid: SSAValue | None = None
        # each access of a cell: its array and the cell's place among a thread's cells
        # (tile/register_order.py keeps them in order cell by cell)
        self.cells: dict[Operation, tuple[SSAValue, int]] = {}

    def finish(self) -> None:
        """Count the staging arrays, after every other array of the kernel; raises
        StagingRefused where they do not fit beside them."""
        if not self.bytes:
            return
        if self.em.shared_bytes + self.bytes > self.limit:
            raise StagingRefused
        self.em.reserve_shared(self.bytes)

    def _cells(self, count: int) -> list[SSAValue]:
        """This thread's cells of slots 0 .. count - 1: `slot * threads + tid`, so the
        threads of a warp take consecutive words (no bank conflicts)."""
        if self._tid is None:  # in the entry block: it dominates every stage
            lane, warp = self.em._thread()
            self._tid = self.em._entry(ops.BinaryOp("add", self.em._entry(ops.BinaryOp(
                "mul", warp, self.em.const(32, T.i32))), lane))
        tid = self.em.b.cast(self._tid, T.i64)
        return [self.em.b.value(ops.BinaryOp("add", tid, self.em.const(slot * self.threads,
                                                                         T.i64)))
                for slot in range(count)]

    def _array(self, dt: T.DType) -> SSAValue:
        if dt not in self.arrays:
            count = self.plan.cells[dt] * self.threads
            self.arrays[dt] = self.em.shared(dt, count, reserve=False)
            self.bytes += count * dt.itemsize
        return self.arrays[dt]

    def store(self, op: Operation, slots: dict[SSAValue, Slots]) -> None:
        for stage in self.plan.at.get(op, ()):
            held = slots[stage.value]
            array = self._array(held.dtype)
            for place, (cell, k) in enumerate(zip(self._cells(len(stage.slots)), stage.slots,
                                                  strict=True)):
                store = self.em.b.emit(ops.StoreOp(array, [cell], held.values[k], 0, False,
                                                   True))
                self.cells[store] = (array, place)

    def reload(self, op: Operation, slots: dict[SSAValue, Slots]) -> None:
        for stage in self.plan.at.get(op, ()):
            held = slots[stage.value]
            array = self._array(held.dtype)
            values = list(held.values)
            ty = values[0].type
            for place, (cell, k) in enumerate(zip(self._cells(len(stage.slots)), stage.slots,
                                                  strict=True)):
                values[k] = self.em.b.value(ops.LoadOp(array, [cell], ty, 0, False, True))
                self.cells[values[k].owner] = (array, place)
            slots[stage.value] = Slots(held.dtype, held.layout, tuple(values))
