"""The overlap within a warp group: one step's softmax runs while the tensor cores do the
previous step's second product.

Why. In a product loop (tile/product_loops.py: attention's `s = q @ k.T`, the row
softmax of `s`, `acc = p @ v + acc * alpha`), each warp group waits for `q @ k.T`,
computes the softmax while its tensor cores idle, then waits for `p @ v`. wgmma groups
complete in the order they were committed, so leaving `p @ v` running while the next
step's `q @ k.T` is waited for needs the next head issued *before* the tail it overlaps:
FlashAttention-3 (paper section 3.2) rotates the loop. Step j issues its head, then the
tail of step j - 1, waits for the head only (`wgmma.wait_group 1`), computes its softmax
while that tail runs, and waits for the tail where it first needs the sum (`acc * alpha`).
The last step's tail is issued after the loop.

Where it applies (`plan_overlap`): `OXIDE_TILE_OVERLAP=1` (off by default until measured
faster on the H200), a kernel with a producer warp group (tile/producer.py), each product
loop whose tail
- accumulates into a loop variable (`acc = tile.mma(p, v, acc * alpha)`): its result is
  only written to that variable, and its accumulator is computed in the loop's block from
  the block's only read of it, in the result's layout, that read used only after the head;
- takes A from registers (the A-fragment layout: `p` as the softmax left it) and B from a
  ring a TMA fills, as the head takes both operands from rings (no staging, so no barrier
  between the products).

What it does: the tail becomes a `schedule` op (`defer_tail`) that keeps its A values and
B's buffer token in slots of its own and marks the tail pending; the head
(`overlap` = the loop's number) issues, commits, then issues the pending tail from those
slots onto the variable's values (`wgmma.fence` first; its instructions predicated on the
mark, not branched around: accumulators meeting at a branch's join make ptxas inject a
warp-group arrive, note C7519), commits (an empty group where none was pending, so one
wait count serves both) and waits for all but one group;
the variable's read waits for every group (`overlap_settle`) and gives back the pending
tail's B fill; `open_tail` before the loop clears the mark, `drain_tail` at its exit
issues and waits for a pending tail (predicated the same way). ptxas still sees a
divergent path in the consumers' code unless their role comes from a warp-uniform index
(OXIDE_TILE_UNIFORM_ROLE, tile/producer.py). B's buffer stays the consumers' until then: a fill
is given back once the product that read it completed (tile/tma_rings.py counts fills,
not steps), and the producer runs at most the ring's depth ahead.

What it guarantees: each product is computed from the same operands as before, in the
same order of operations, so the results are the same bits; on the CPU
(OXIDE_TILE_CPU_HOPPER=1) the products run when issued and the waits order nothing, so
the rotated loop computes what the loop as written does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue

from oxide import types as T
from oxide.codegen.switches import overlap_enabled
from oxide.ir import ops
from oxide.ir.tile_ops import kind_of, make
from oxide.ir.types import ir_type
from oxide.tile.builder import TileBuilder
from oxide.tile.layout import Layout, mma_operand_a
from oxide.tile.layouts import layout_of
from oxide.tile.lower import TileEmitter
from oxide.tile.mma_choice import swapped
from oxide.tile.operand_rings import ring_of, zero_slot
from oxide.tile.product_loops import ProductLoop, derived, product_loops
from oxide.tile.tma_rings import consume, only_if, wait_tma
from oxide.tile.values import Slots
from oxide.tile.wgmma_lower import lower_wgmma


@dataclass
class RotatedLoop:
    """One rotated loop: its accumulator variable, what its tail reads (kept in slots
    between steps), and those slots (made at the first lowering that needs them)."""

    acc: SSAValue  # the loop variable the tail accumulates into
    a: tuple[T.DType, Layout]  # the tail's A (registers)
    b: tuple[T.DType, Layout]  # the tail's B (a ring's buffer token)
    b_transposed: bool
    a_slots: list[SSAValue] = field(default_factory=list)
    b_slot: SSAValue | None = None
    pending: SSAValue | None = None  # an i32 slot: 1 while a tail waits to be issued


def plan_overlap(b: TileBuilder, em: TileEmitter) -> dict[int, RotatedLoop] | None:
    """Rotate the kernel's eligible product loops (see the module docstring). The loops,
    by number; None where none is eligible."""
    if em.consumer_threads is None or not overlap_enabled():
        return None
    rotated: dict[int, RotatedLoop] = {}
    for loop in product_loops(b):
        found = _eligible(b, em, loop)
        if found is None:
            continue
        acc, read = found
        k = len(rotated)
        rotated[k] = _rotate(b, loop, k, acc, read)
    return rotated or None


def _eligible(b: TileBuilder, em: TileEmitter, loop: ProductLoop
              ) -> tuple[SSAValue, Operation] | None:
    """(the accumulator variable, its read in the loop) where `loop` may be rotated."""
    head, tail = loop.head, loop.tail
    if tail.param("a_transposed", False) or swapped(tail) or swapped(head):
        # the rotated tail reads its A from registers or K-major only, and as the
        # product's A (a product computed transposed reads its B's tile there)
        return None
    block = tail.parent_block()
    assert block is not None
    result = tail.results[0]
    uses = list(result.uses)
    if len(uses) != 1 or kind_of(uses[0].operation) != "var_write" or uses[0].index != 1:
        return None
    var = uses[0].operation.operands[0]
    reads = [u.operation for u in var.uses if kind_of(u.operation) == "var_read"
             and u.operation.parent_block() in loop.body]
    writes = [u.operation for u in var.uses if kind_of(u.operation) == "var_write"
              and u.operation.parent_block() in loop.body]
    if len(reads) != 1 or writes != [uses[0].operation] or reads[0].parent_block() is not block:
        return None
    read = reads[0]
    acc = tail.operands[2]
    if not derived(acc, read.results[0], block) or \
            layout_of(acc).key() != layout_of(result).key():
        return None
    position = {op: i for i, op in enumerate(block.ops)}
    if any(position[u.operation] < position[head] for u in read.results[0].uses):
        return None  # read before the head: it would wait for the tail in flight there
    a, v = tail.operands[0], tail.operands[1]
    rows, k = a.type.dims  # type: ignore[attr-defined]
    if a.type.dtype.itemsize != 2 or layout_of(a).key() != \
            mma_operand_a((rows, k), em.num_warps, em.num_warps).key():  # type: ignore[attr-defined]
        return None
    rings = [ring_of(layout_of(x)) for x in (v, *head.operands[:2])]
    if any(r is None for r in rings) or not rings[0].tma:  # type: ignore[union-attr]
        return None
    return var, read


def _rotate(b: TileBuilder, loop: ProductLoop, k: int, var: SSAValue, read: Operation
            ) -> RotatedLoop:
    """Rewrite `loop`'s tile ops as the module docstring says."""
    head, tail = loop.head, loop.tail
    block = tail.parent_block()
    assert block is not None
    a, v, acc = tail.operands
    plan = RotatedLoop(var, (a.type.dtype, layout_of(a)), (v.type.dtype, layout_of(v)),  # type: ignore[attr-defined]
                       bool(tail.param("b_transposed", False)))
    b.insert_tile_op(make("schedule", [a, v], [], step="defer_tail", loop=k), tail)
    tail.results[0].replace_all_uses_with(acc)
    b.tile_ops.remove(tail)
    block.erase_op(tail)
    head.set_param("overlap", k)
    # the variable's read moves to its first use, after the head: it waits for the tail
    first = min((u.operation for u in read.results[0].uses),
                key=lambda op: list(block.ops).index(op))
    block.detach_op(read)
    b.tile_ops.remove(read)
    b.insert_tile_op_at(read, first, first)
    read.set_param("overlap_settle", k)
    start, branch = loop.after.first_op, loop.before.last_op
    assert start is not None and branch is not None  # each holds its terminator at least
    b.insert_tile_op_at(make("schedule", [], [], step="open_tail", loop=k), branch, head)
    b.insert_tile_op_at(make("schedule", [], [], step="drain_tail", loop=k), start, head)
    return plan


# -- the lowering ---------------------------------------------------------------------------

def _pending(em: TileEmitter, plan: RotatedLoop) -> SSAValue:
    if plan.pending is None:
        plan.pending = zero_slot(em)
    return plan.pending


def _is_pending(em: TileEmitter, plan: RotatedLoop) -> SSAValue:
    b = em.b
    return b.value(ops.CompareOp("ne", b.value(ops.SlotReadOp(_pending(em, plan))),
                                 em.const(0, T.i32)))


def _operand_slots(em: TileEmitter, plan: RotatedLoop) -> tuple[list[SSAValue], SSAValue]:
    """The slots of the pending tail's A values and B token (made at first use: the
    head, which issues the tail, is lowered before the op that fills them)."""
    if plan.b_slot is None:
        dt, layout = plan.a
        plan.a_slots = [em.b.alloc(ops.SlotOp(ir_type(dt))) for _ in range(layout.slots)]
        plan.b_slot = em.b.alloc(ops.SlotOp(ir_type(T.i32)))
    return plan.a_slots, plan.b_slot


def issue_pending_tail(em: TileEmitter, plan: RotatedLoop, acc_slots: list[SSAValue]
                       ) -> None:
    """After the head's commit (and at the loop's exit): the pending tail issued on the
    variable's values and its result (still being written) written back, where one is
    pending: its B fill waited for under a branch,
    its instructions predicated (no branch: the accumulators would meet at its join,
    where ptxas injects a warp-group arrive, C7519), then a commit (of an empty group
    where none was pending)."""
    b = em.b
    (adt, alayout), (bdt, blayout) = plan.a, plan.b
    a_slots, b_slot = _operand_slots(em, plan)
    a = Slots(adt, alayout, tuple(b.value(ops.SlotReadOp(s)) for s in a_slots))
    v = Slots(bdt, blayout, (b.value(ops.SlotReadOp(b_slot)),))
    acc_dt, acc_layout = T.f32, layout_of(plan.acc)
    acc = Slots(acc_dt, acc_layout, tuple(b.value(ops.SlotReadOp(s)) for s in acc_slots))
    pending = b.value(ops.SlotReadOp(_pending(em, plan)))
    only_if(em, b.value(ops.CompareOp("ne", pending, em.const(0, T.i32))),
            lambda: wait_tma(em, [v]))
    out = lower_wgmma(em, a, v, acc, plan.b_transposed, issue_only=True, guard=pending)
    for slot, value in zip(acc_slots, out.values, strict=True):
        b.emit(ops.SlotWriteOp(slot, value))
    b.emit(ops.HopperOp("wgmma.commit", [], []))



def settle(em: TileEmitter, plan: RotatedLoop, values: list[SSAValue]) -> list[SSAValue]:
    """The variable's read in the loop: wait for every group (the tail in flight), then
    give back the fill of B it read, where one was pending."""
    wait = ops.HopperOp("wgmma.wait", values, [v.type for v in values], imm=(0,))
    em.b.emit(wait)
    ring = ring_of(plan.b[1])
    assert ring is not None
    only_if(em, _is_pending(em, plan), lambda: consume(em, [ring], False))
    return list(wait.results)


def lower_step(em: TileEmitter, plan: RotatedLoop, step: str, operands: list[Slots],
               acc_slots: list[SSAValue]) -> None:
    """A `schedule` op of a rotated loop: `open_tail`, `defer_tail` (its operands the
    tail's A and B) or `drain_tail`."""
    b = em.b
    if step == "open_tail":
        b.emit(ops.SlotWriteOp(_pending(em, plan), em.const(0, T.i32)))
    elif step == "defer_tail":
        a, v = operands
        a_slots, b_slot = _operand_slots(em, plan)
        for slot, value in zip(a_slots, a.values, strict=True):
            b.emit(ops.SlotWriteOp(slot, value))
        b.emit(ops.SlotWriteOp(b_slot, v.values[0]))
        b.emit(ops.SlotWriteOp(_pending(em, plan), em.const(1, T.i32)))
    else:
        assert step == "drain_tail", step
        issue_pending_tail(em, plan, acc_slots)
        values = [b.value(ops.SlotReadOp(s)) for s in acc_slots]
        for slot, value in zip(acc_slots, settle(em, plan, values), strict=True):
            b.emit(ops.SlotWriteOp(slot, value))
        b.emit(ops.SlotWriteOp(_pending(em, plan), em.const(0, T.i32)))
