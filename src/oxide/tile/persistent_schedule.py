"""The persistent schedule: a tile kernel written one block per output tile, compiled to
walk its logical grid with the blocks the GPU holds at once.

Why: where a kernel's products run on a producer warp group (tile/producer.py), a block
occupies a whole SM (the operand rings fill its shared memory), and each block's start
(the first fills in flight, nothing to multiply) and end (the epilogue, the tensor cores
idle) cost it time. A block that goes on to its next tile overlaps them: its producer
fills the next tile's buffers while the consumers store the last one (tile/tma_rings.py).
Measured on the H200 (2026-12-04, docs/performance.md, "The persistent schedule"): the
canonical bf16 K loop as users write it, 649 -> 680 TFLOPS at 8192^3 and 432 -> 519 with
K = 512, level at 4096^3.

What the compiler does: `lower_tile_kernel` (tile/frontend.py `_walk_the_grid`) tries it
for a kernel of 8 warps (two consumer warp groups: with one it was measured slower) where
a first look, the passes up to `plan_producer`, planned a producer warp group. The body
is then lowered inside one loop over virtual block indices, by rounds of `blocks`
(`block`, then `2 * blocks - 1 - block`, ...: every other round backwards,
`_serpentine`) up to the logical grid's size, which the launch passes as three hidden i32
parameters (codegen/persistent_grid.py; the launch runs at most as many blocks as fit at
once). In the body, `tile.bid(a)` is coordinate a of the logical block that step `v`
runs, in grouped order (`_grouped_order`: eight x-rows take turns on each y, so the
blocks running together share operand panels in L2) and `tile.num_blocks(a)` the
logical grid's extent. Each iteration starts from the values the body had on entry:
nothing is carried from one logical block to the next but the operand rings' counters
(tile/tma_rings.py counts fills across a kernel's loops). Where the lowering fails or
`persistable` does not hold, the kernel is lowered as written.

What it guarantees: every logical block runs once, with the same `tile.bid` and
`tile.num_blocks` it would see as a hardware block, so the kernel means the same; the
safety rules, checked on the logical grid at launch (runtime/witness_rules.py), hold as
they did. Refused (the kernel keeps one block per logical block): a kernel that walks
its tiles itself (`tile.tiles`, a grid-stride loop), or that reads a block register this
schedule would not rename.
"""

from __future__ import annotations

import ast
from typing import Any

from xdsl.dialects.builtin import FunctionType
from xdsl.ir import SSAValue

from oxide import types as T
from oxide.codegen.persistent_grid import GRID_PARAMS
from oxide.ir import ops
from oxide.ir.types import ir_type
from oxide.tile.values import Tile, Witness

_BLOCK_REGISTERS = {f"{n}ctaid.{a}" for n in ("", "n") for a in "xyz"}


class PersistentScheduleMixin:
    """The virtual block loop and the block indices inside it (mixed into TileLowering)."""

    b: Any
    t: Any
    env: dict[str, Any]
    # set by `lower_persistent`: the logical grid's hidden parameters and, in the loop,
    # the logical block's indices
    grid_params: tuple[SSAValue, ...] | None = None
    virtual_block: tuple[SSAValue, SSAValue, SSAValue] | None = None
    # the block registers the loop reads itself (`persistable` allows only those)
    own_registers: tuple[ops.RegisterOp, ...] = ()

    def lower_persistent(self, body: list[ast.stmt]) -> None:
        """`body` (returns folded away) inside the loop over virtual block indices."""
        b = self.b
        block = b.func.body.blocks[0]
        self.grid_params = tuple(block.insert_arg(ir_type(T.i32), len(block.args))
                                 for _ in range(GRID_PARAMS))
        b.func.properties["function_type"] = FunctionType.from_lists(
            [a.type for a in block.args], [])
        gx, gy, gz = (b.cast(p, T.i64) for p in self.grid_params)
        total = b.value(ops.BinaryOp("mul", b.value(ops.BinaryOp("mul", gx, gy)), gz))
        # read in the entry block, which a producer warp group's copy of the body shares
        first = ops.RegisterOp("ctaid.x", ir_type(T.i32))
        step = ops.RegisterOp("nctaid.x", ir_type(T.i32))
        self.own_registers = (first, step)
        # the walk goes by rounds of `step` virtual blocks, one per hardware block; in
        # odd rounds hardware block c runs the round's (step - 1 - c)-th (`_serpentine`)
        round_start, odd = b.alloc(ops.SlotOp(ir_type(T.i64))), b.alloc(ops.SlotOp(ir_type(T.i64)))
        zero = b.constant(0, T.i64)
        b.emit(ops.SlotWriteOp(round_start, zero))
        b.emit(ops.SlotWriteOp(odd, zero))
        first_v = b.cast(b.alloc(first), T.i64)
        step_v = b.cast(b.alloc(step), T.i64)
        header, inside, done = b.new_block(), b.new_block(), b.new_block()
        b.br(header)
        b.set_block(header)
        r, parity = b.value(ops.SlotReadOp(round_start)), b.value(ops.SlotReadOp(odd))
        v = _serpentine(b, r, parity, first_v, step_v)
        # a virtual block past the grid ends the walk: only the last round has any
        go = b.value(ops.CompareOp("lt", v, total))
        b.uniform.add(go)  # the same trip count in every thread of the block
        b.cond_br(go, inside, done)
        b.set_block(inside)
        outside = dict(self.env)
        self.virtual_block = _grouped_order(b, v, self.grid_params)
        for stmt in body:
            self.lower_stmt(stmt)  # type: ignore[attr-defined]
        self.virtual_block = None
        self.env = outside
        # rounds start below the grid's size (< 2**32), so the next one's does not wrap
        b.emit(ops.SlotWriteOp(round_start, b.value(ops.BinaryOp("add", r, step_v))))
        b.emit(ops.SlotWriteOp(odd, b.value(ops.BinaryOp("xor", parity, b.constant(1, T.i64)))))
        b.br(header)
        b.set_block(done)

    def block_index(self, axis: int) -> Tile:
        """`tile.bid(axis)`: the block register, or inside the virtual block loop
        coordinate `axis` of the logical block this step runs (`_grouped_order`)."""
        b = self.b
        if self.virtual_block is None:
            reg = b.value(ops.RegisterOp(f"ctaid.{'xyz'[axis]}", ir_type(T.i32)))
        else:
            reg = self.virtual_block[axis]
        return self.witness(self.scalar_tile(reg, T.i32), Witness(axis))  # type: ignore[attr-defined]

    def grid_extent(self, axis: int) -> SSAValue:
        """`tile.num_blocks(axis)`: the grid's extent, the logical one where the kernel
        walks its grid."""
        if self.grid_params is not None:
            return self.grid_params[axis]
        return self.b.value(ops.RegisterOp(f"nctaid.{'xyz'[axis]}", ir_type(T.i32)))


def _serpentine(b: Any, round_start: SSAValue, odd: SSAValue, first: SSAValue,
                step: SSAValue) -> SSAValue:
    """The virtual block that hardware block `first` runs in the round starting at
    `round_start`: the round's `first`-th, or in odd rounds its (step - 1 - first)-th.

    Why: blocks of a kernel often differ in work along the grid (causal attention's
    query blocks: the k-th of a head reads k + 1 blocks of keys). Walked in plain
    stride order, hardware block c meets the virtual blocks c, c + step, ..., whose
    place in such a period repeats with the step (132 SMs and 32 query blocks a head:
    block c sees only the places congruent to c mod 4: counted in blocks of keys, the
    busiest hardware blocks get 1.09 times the mean's work, and the kernel lasts as long
    as they do). Walking every other round backwards pairs each
    place with its mirror image, so a work profile that grows or shrinks along the grid
    evens out; uniform work is unchanged, and the blocks of one round are the same set
    either way (they share operands in L2 as before)."""
    back = b.value(ops.BinaryOp("sub", b.value(ops.BinaryOp("sub", step, b.constant(1, T.i64))),
                                first))
    even = b.value(ops.CompareOp("eq", odd, b.constant(0, T.i64)))
    return b.value(ops.BinaryOp("add", round_start, b.value(ops.SelectOp(even, first, back))))


def persistable(func: ops.FuncOp, own: tuple[ops.RegisterOp, ...]) -> bool:
    """Whether the body lowered inside the virtual block loop reads no block register but
    the loop's own (a register read elsewhere would see the hardware grid)."""
    return not any(isinstance(op, ops.RegisterOp) and op.reg.data in _BLOCK_REGISTERS
                   and op not in own for op in func.walk())


GROUP = 8  # rows of blocks along x that take turns on each y (Triton's GROUP_M)


def _grouped_order(b: Any, v: SSAValue, grid: tuple[SSAValue, ...] | None
                   ) -> tuple[SSAValue, SSAValue, SSAValue]:
    """The logical block (x, y, z) that walk step `v` runs: z slowest; within it, GROUP
    x-rows at a time take turns on each y, so that blocks running together share their
    operands' panels in L2 (a GEMM's A rows along x, B columns along y). Blocks do not
    depend on each other, and every logical block is walked once whatever the order.
    Unsigned 32-bit arithmetic: every value here is at least 0, the divisors at least 1,
    and the launch refuses a grid of 2**32 blocks or more (codegen/persistent_grid.py).
    A 64-bit division is a call in ptxas's code, and a call makes it run every wgmma of
    the kernel one at a time (its note C7509)."""
    assert grid is not None
    gx, gy = (b.cast(p, T.u32) for p in grid[:2])

    def op(kind: str, x: SSAValue, y: SSAValue) -> SSAValue:
        return b.value(ops.BinaryOp(kind, x, y))
    step = b.cast(v, T.u32)
    plane = op("mul", gx, gy)
    z, r = op("floordiv", step, plane), op("mod", step, plane)
    group = b.constant(GROUP, T.u32)
    per_group = op("mul", group, gy)
    first = op("mul", op("floordiv", r, per_group), group)
    rows = op("min", op("sub", gx, first), group)  # the last group's rows (first < gx)
    within = op("mod", r, per_group)
    x = op("add", first, op("mod", within, rows))
    y = op("floordiv", within, rows)
    return b.cast(x, T.i32), b.cast(y, T.i32), b.cast(z, T.i32)
