"""Ping-pong: the two consumer warp groups take turns at the tensor cores, so that one's
softmax (any work between two products) runs while the other's products do.

Why. In a loop whose body is product -> work on its result -> product (attention's
`q @ k.T`, the row softmax, `p @ v`), both consumer warp groups of a kernel with a
producer (tile/producer.py) wait for the same TMA fill, so they issue their first product
together, then both do the softmax while the tensor cores idle, then both issue the
second product. FlashAttention-3 (paper section 3.1) staggers them with two named
barriers, a *turn* that one warp group holds while it issues: warp group g waits for the
turn (`barrier.sync 2 + g, 256`) before its second product, keeps it through the next
iteration's first product, and passes it on (`barrier.arrive 3 - g, 256`) as soon as that
product is issued. One warp group's softmax then overlaps the other's products.

Where it applies (`plan_pingpong`): on sm_90 with a producer warp group and two consumer
warp groups (8 warps), `OXIDE_TILE_PINGPONG=1` (off by default until measured faster on
the H200), to each product loop (tile/product_loops.py: an innermost loop whose body
runs a *head* product, work on its result, and a *tail* product of that work, as
attention's `q @ k.T` -> softmax -> `p @ v`) that the overlap (tile/overlap.py) did not
take. A loop in whose blocks the lowering emits a barrier of the
consumers (a staged operand, a layout conversion through shared memory) cannot take turns:
a warp group holding the turn would wait there for the other, which waits for the turn.
`ToSIMT` counts those barriers and raises `PingPongRefused`, and the kernel is lowered
again without turns (tile/frontend.py).

The protocol, per consumer warp group g (own barrier 2 + g, the other's 3 - g):
- once per block, before its first loop with turns: warp group 1 arrives on barrier 2
  (warp group 0 has the first turn);
- before the loop (`enter`): wait for the turn;
- in each iteration: the head, `wgmma.commit`, pass the turn (arrive on the other's
  barrier), ...work..., wait for the turn, the tail (issued and waited for);
- after the loop (`leave`): pass the turn.
`OXIDE_TILE_PINGPONG=issue` holds a turn over one product's issue alone, as FlashAttention-3
does: each product (head and tail) waits for the turn after its operands arrived (so no
turn is held while waiting for TMA), issues, commits and passes the turn, then waits for
its result; `enter` only opens (warp group 1's arrive) and `leave` does nothing. The
products issue strictly alternating, head 0, head 1, tail 0, tail 1, ..., so one warp
group's softmax runs while the other's product does, and neither holds the turn through
a wait for a product (which `=1` does from the tail's issue to the next head's).
Every wait of a warp group on its barrier pairs with the other's arrive of the same rank:
warp group 0's k-th wait on barrier 2 with warp group 1's k-th arrive there (the first is
the once-per-block arrive), and between two arrives of one warp group on a barrier it
waits once on its own, which needs the other's arrive, which follows the other's wait of
the same rank. So no barrier ever holds two arrivals of one warp group, no wait lacks its
arrive (both warp groups run the same loops the same number of times: tile control flow
is block-uniform), and the block ends with warp group 1's last pass pending on barrier 2,
which the block's exit discards. The turns order issue only; they move no data, so the
results are those without them. On the CPU (OXIDE_TILE_CPU_HOPPER=1) the two barriers are
mbarriers in shared memory with the same arrivals, so a protocol that deadlocks on the
GPU deadlocks there too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue

from oxide import types as T
from oxide.codegen.switches import pingpong_enabled, pingpong_issue_only
from oxide.ir import ops
from oxide.ir.tile_ops import make
from oxide.ir.types import ir_type
from oxide.tile import named_barriers
from oxide.tile.builder import TileBuilder
from oxide.tile.lower import TileEmitter
from oxide.tile.named_barriers import FIRST_TURN
from oxide.tile.operand_rings import zero_slot
from oxide.tile.product_loops import product_loops
from oxide.tile.tma_rings import only_if

CONSUMERS = 256  # two warp groups


class PingPongRefused(Exception):
    """A loop given turns has a barrier of the consumers in it (see the module docstring):
    the kernel is to be lowered again without turns."""


@dataclass
class Turns:
    """The loops given turns: their tile ops (a barrier in the lowering of one refuses
    them; the lowering moves ops into new blocks, so blocks would not tell), and the
    lowering's state."""

    ops: set[Operation] = field(default_factory=set)
    entered: SSAValue | None = None  # a slot: 0 until this thread's first `enter`, then 1
    # this thread's warp group (0 or 1), its own barrier and the other's (entry values)
    group: SSAValue | None = None
    barriers: tuple[SSAValue, SSAValue] | None = None


def plan_pingpong(b: TileBuilder, em: TileEmitter) -> Turns | None:
    """Give turns to the kernel's product loops (tile/product_loops.py; see the module
    docstring): their head and tail products are marked (`pingpong` = "head" / "tail"),
    and `schedule` ops stand before each loop (`enter`) and after it (`leave`). None
    where no loop is eligible."""
    if em.consumer_threads != CONSUMERS or not pingpong_enabled():
        return None
    turns = Turns()
    for loop in product_loops(b):
        loop.head.set_param("pingpong", "head")
        loop.tail.set_param("pingpong", "tail")
        first, branch = loop.after.first_op, loop.before.last_op
        assert first is not None and branch is not None  # each holds its terminator at least
        b.insert_tile_op_at(make("schedule", [], [], step="enter"), branch, loop.head)
        b.insert_tile_op_at(make("schedule", [], [], step="leave"), first, loop.head)
        turns.ops |= {op for op in b.tile_ops if op.parent_block() in loop.body}
    return turns if turns.ops else None


# -- the lowering ---------------------------------------------------------------------------

def _group(em: TileEmitter) -> SSAValue:
    """This consumer thread's warp group, 0 or 1 (the producer's threads are 2 up)."""
    turns: Turns = em.turns
    if turns.group is None:
        turns.group = named_barriers.warp_group(em)
    return turns.group


def _barrier_of(em: TileEmitter, mine: bool) -> SSAValue:
    """This warp group's barrier (2 + g), or the other's (3 - g), as a u32."""
    turns: Turns = em.turns
    if turns.barriers is None:
        group = em._entry(ops.CastOp(_group(em), ir_type(T.u32)))
        turns.barriers = (
            em._entry(ops.BinaryOp("add", group, em.const(FIRST_TURN, T.u32))),
            em._entry(ops.BinaryOp("sub", em.const(FIRST_TURN + 1, T.u32), group)))
    return turns.barriers[0 if mine else 1]


def pass_turn(em: TileEmitter) -> None:
    """Arrive on the other warp group's barrier, without waiting."""
    named_barriers.arrive(em, _barrier_of(em, mine=False))


def take_turn(em: TileEmitter) -> None:
    """Wait on this warp group's barrier until the other passed the turn."""
    named_barriers.sync(em, _barrier_of(em, mine=True))


def before_issue(em: TileEmitter, turn: str | None) -> None:
    """Before a product's `wgmma.fence`: the tail waits for the turn (and, with
    `=issue`, the head too)."""
    if turn == "tail" or (turn == "head" and pingpong_issue_only()):
        take_turn(em)


def after_commit(em: TileEmitter, turn: str | None) -> None:
    """After a product's `wgmma.commit`: the head passes the turn (and, with `=issue`,
    the tail too)."""
    if turn == "head" or (turn == "tail" and pingpong_issue_only()):
        pass_turn(em)


def lower_schedule(em: TileEmitter, step: str) -> None:
    """A `schedule` op: `enter` (the block's first also gives warp group 0 the first turn)
    or `leave`."""
    issue_only = pingpong_issue_only()  # each product takes and passes its own turn
    if step == "leave":
        if not issue_only:
            pass_turn(em)
        return
    b = em.b
    turns: Turns = em.turns
    if turns.entered is None:
        turns.entered = zero_slot(em)
    fresh = b.value(ops.CompareOp("eq", b.value(ops.SlotReadOp(turns.entered)),
                                  em.const(0, T.i32)))
    second = em._entry(ops.CompareOp("eq", _group(em), em.const(1, T.i32)))
    opening = b.value(ops.BinaryOp("and", fresh, second))
    only_if(em, opening,
            lambda: named_barriers.arrive(em, em.const(FIRST_TURN, T.u32)))
    b.emit(ops.SlotWriteOp(turns.entered, em.const(1, T.i32)))
    if not issue_only:
        take_turn(em)
