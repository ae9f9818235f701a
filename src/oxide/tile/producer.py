"""Warp specialization: a producer warp group keeps a kernel's TMA rings full while the
kernel's own warps (the consumers) compute.

Without it, thread 0 of the consumers issues each k step's TMA copies after a block
barrier (tile/tma_rings.py `issue_tma`): every warp waits at that barrier once per step,
and thread 0's warp group issues copies between its products. With it:

- the block gets a fourth warp group more than `num_warps` asks for (a launch of
  num_warps * 32 threads runs num_warps * 32 + 128 of them: codegen/warp_roles.py's marker
  tells the launcher); the threads below num_warps * 32 are the consumers and run the
  kernel with the layouts they had;
- `split_roles` copies the kernel's body for the producer and keeps in the copy only
  what its ring loads and its branches need (`_needed`): the same path through the same
  loops, the same copies in the same order as the consumers count them. One thread of the
  producer warp group runs it; the others leave at once;
- the consumers' ring loads copy nothing (`tma_rings.release_tma`): each advances the
  ring's counters; a buffer goes back to the producer (`mbarrier.arrive` on `empty[b]`,
  lane 0 of each warp) as soon as the product that read its fill is done
  (`tma_rings.consume`, `release_all`), so the producer runs into a persistent loop's
  next tile during the epilogue; the producer's ring loads (`tma_rings.produce_tma`)
  wait for the release of the buffer's previous fill, arm `full[b]` and copy. No block barrier per k step; the consumers' other
  barriers are a named barrier of their threads, which the producer never reaches;
- with 8 consumer warps, `setmaxnreg` leaves the producer 40 registers a thread and
  gives the consumers 232.

Where it applies (`plan_producer`): on sm_90 with TMA rings (`Target.wgmma`, `.tma`),
where every product operand ring of the kernel is filled by TMA, the kernel has 4 or 8
warps and asks no `occupancy`, and everything the producer's copy needs is computed
from scalars alone: kernel parameters, block indices, array extents, constants, 0-d tile
arithmetic and loop counters. A load, a product, a reduction or anything another thread
writes there keeps the kernel as it was. `OXIDE_TILE_PRODUCER=0` turns it off (to
compare the two).

What it assumes: the layout pass, the rings (tile/operand_rings.py) and the ordering
pass ran; `plan_producer` ran before the ordering pass (a product on TMA rings then
passes no block barrier: `ordering.syncs_block`). What it guarantees: the producer takes
the path the consumers take (its branches are the consumers' branches, computed from the
same values), so it fills exactly the buffers they wait for, in order; a fill never
lands on a buffer a consumer warp may still read (the release comes after its reads);
no mbarrier runs two phases ahead of a wait for it (fills are released in the order
they were made, `tma_rings.release_one`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from xdsl.ir import Block, Operation, SSAValue

from oxide import types as T
from oxide.codegen.switches import producer_enabled, uniform_role_enabled
from oxide.ir import ops
from oxide.ir.tile_ops import TileType, TileVarType, kind_of
from oxide.ir.types import ir_type
from oxide.tile.builder import TileBuilder
from oxide.tile.layout import WARP_SIZE
from oxide.tile.layouts import layout_of
from oxide.tile.operand_rings import ring_of

# registers a thread after `setmaxnreg`, by consumer warps: (producer, consumers). A block
# of 384 threads starts at 168 (65536 / 384, in steps of 8): 128 * 40 + 256 * 232 fits.
REGISTERS = {8: (40, 232)}
# the tile ops the producer's copy may keep, on 0-d tiles (scalars every thread holds)
_SCALAR_KINDS = ("full", "splat", "from_scalar", "extract", "binary", "unary", "compare",
                 "cast", "where", "narrow_compare", "broadcast", "convert", "expand",
                 "squeeze", "var_read", "var_write")
# the scalar ops it may keep (none reports an error or touches memory)
_SCALAR_OPS = (ops.ConstantOp, ops.BinaryOp, ops.UnaryOp, ops.CompareOp, ops.CastOp,
               ops.SelectOp, ops.ArrayDimOp, ops.SlotReadOp, ops.SlotWriteOp, ops.BranchOp,
               ops.CondBranchOp, ops.ReturnOp)
_BLOCK_REGISTERS = ("ctaid.x", "ctaid.y", "ctaid.z", "nctaid.x", "nctaid.y", "nctaid.z")
_CLONE_KEY = 1 << 40  # the producer's blocks and ops sort after the consumers'


def plan_producer(b: TileBuilder, num_warps: int, occupancy: int | None) -> bool:
    """Whether the kernel gets a producer warp group (see the module docstring); where it
    does, its products on TMA rings are marked (`producer`): no block barrier follows them."""
    if num_warps not in (4, 8) or occupancy is not None or not producer_enabled():
        return False
    rings = _ring_loads(b)
    if not rings or not all(ring_of(layout_of(op.results[0])).tma  # type: ignore[union-attr]
                            for op in rings):
        return False
    if _needed(_body(b), rings) is None:
        return False
    for op in b.tile_ops:
        if kind_of(op) == "mma" and any(getattr(layout_of(v), "tma", False)
                                        for v in op.operands[:2]):
            op.set_param("producer", True)  # type: ignore[attr-defined]
    return True


def split_roles(b: TileBuilder, em: Any) -> None:
    """Give the kernel its producer warp group (see the module docstring): the body's
    copy for the producer, and the block that sends each thread to its role."""
    body = _body(b)
    clones = _clone_blocks(b, body)
    originals = {c: o for o, c in clones.items()}
    needed = _needed(body, _ring_loads(b))
    assert needed is not None, "plan_producer accepted what the producer cannot compute"
    doomed = [c for o, c in clones.items() if isinstance(o, Operation) and o not in needed]
    for op in doomed:
        op.detach()
    for op in doomed:
        op.erase(safe_erase=False)
    kept = [clones[op] for op in b.tile_ops if op in needed]
    for op in kept:
        original = originals[op]
        b.order[op] = _clone_key(b.order[original])
        b.spans[op] = b.spans.get(original)
        b.origins[op] = b.origins.get(original, ())
        if kind_of(op) == "load":
            op.set_param("role", "producer")  # type: ignore[attr-defined]
    b.tile_ops.extend(kept)
    for original in list(b.uniform):
        clone = _result_clone(clones, original)
        if clone is not None:
            b.uniform.add(clone)
    _route(b, em, body[0], clones[body[0]])  # type: ignore[arg-type]
    end = clones[b.block]  # the frontend's last block: the producer's copy returns there
    if not _terminated(end):
        end.add_op(ops.ReturnOp())
    em.consumer_threads = em.num_warps * WARP_SIZE


def _body(b: TileBuilder) -> list[Block]:
    return list(b.func.body.blocks)[1:]


def _ring_loads(b: TileBuilder) -> list[Operation]:
    """The kernel's loads into product operand rings (tile/operand_rings.py)."""
    return [op for op in b.tile_ops if kind_of(op) == "load"
            and ring_of(layout_of(op.results[0])) is not None]


def _terminated(block: Block) -> bool:
    return isinstance(block.last_op, (ops.BranchOp, ops.CondBranchOp, ops.ReturnOp,
                                      ops.UnreachableOp))


def _clone_key(key: tuple[int, ...]) -> tuple[int, ...]:
    return (_CLONE_KEY + key[0], *key[1:])


def _clone_blocks(b: TileBuilder, body: list[Block]) -> dict[Any, Any]:
    """A copy of every body block (after the consumers' blocks), op for op: original
    block or op -> its copy. Values the body defines are replaced by their copies; those
    of the entry block (declarations, parameters) are shared."""
    blocks = {}
    for block in body:
        assert not block.args, "tile code carries values in slots, not block arguments"
        copy = Block()
        blocks[block] = copy
        b.func.body.add_block(copy)
        b.order[copy] = _clone_key(b.order[block])
    values: dict[SSAValue, SSAValue] = {}
    copies: dict[Any, Any] = dict(blocks)
    for block in body:
        for op in block.ops:
            clone = op.clone(value_mapper=values, block_mapper=blocks)  # type: ignore[arg-type]
            blocks[block].add_op(clone)
            copies[op] = clone
    for op in list(copies.values()):  # operands defined in a later block
        if isinstance(op, Operation) and any(v in values for v in op.operands):
            op.operands = tuple(values.get(v, v) for v in op.operands)
    return copies


def _result_clone(copies: dict[Any, Any], value: SSAValue) -> SSAValue | None:
    owner = value.owner
    clone = copies.get(owner) if isinstance(owner, Operation) else None
    if clone is None:
        return None
    return clone.results[value.index]  # type: ignore[attr-defined]


def _needed(body: list[Block], rings: list[Operation]) -> set[Operation] | None:
    """The body's ops the producer needs: its ring loads (their tile indices), every
    branch, and what those read, through the slots and tile variables they read; None
    where one of them is not a scalar computation (module docstring)."""
    inside = {id(block) for block in body}
    slot_writes: dict[SSAValue, list[Operation]] = defaultdict(list)
    var_writes: dict[SSAValue, list[Operation]] = defaultdict(list)
    stack: list[Operation] = list(rings)
    for block in body:
        for op in block.ops:
            if isinstance(op, ops.SlotWriteOp):
                slot_writes[op.operands[0]].append(op)
            elif kind_of(op) == "var_write":
                var_writes[op.operands[0]].append(op)
        if block.last_op is not None and _terminated(block):
            stack.append(block.last_op)
    needed: set[Operation] = set()
    while stack:
        op = stack.pop()
        if op in needed:
            continue
        needed.add(op)
        kind = kind_of(op)
        if kind == "load":
            if op not in rings:
                return None
            operands = op.operands[2:]  # the tile index (the array is a parameter)
        elif not _scalar(op):
            return None
        else:
            operands = op.operands
        for v in operands:
            owner = v.owner
            if isinstance(owner, Operation) and id(owner.parent_block()) in inside:
                stack.append(owner)
        if isinstance(op, ops.SlotReadOp):
            stack.extend(slot_writes[op.operands[0]])
        elif kind == "var_read":
            stack.extend(var_writes[op.operands[0]])
    return needed


def _scalar(op: Operation) -> bool:
    """Whether the producer may compute `op`: a scalar op or a 0-d tile op that reports
    nothing, reads no memory and means the same in every thread."""
    kind = kind_of(op)
    if kind is not None:
        if kind not in _SCALAR_KINDS:
            return False
        types = [v.type for v in (*op.operands, *op.results)]
        return all(t.tile.dims == () if isinstance(t, TileVarType) else
                   not isinstance(t, TileType) or t.dims == () for t in types)
    if isinstance(op, ops.RegisterOp):
        return op.reg.data in _BLOCK_REGISTERS
    if isinstance(op, ops.BinaryOp) and op.site is not None:
        return False  # a division that reports a zero divisor
    return isinstance(op, _SCALAR_OPS)


def _role_thread(route: Block, em: Any, tid: SSAValue) -> SSAValue:
    """The thread index the roles are told apart by: `tid` itself, or with
    OXIDE_TILE_UNIFORM_ROLE on a GPU the first thread of its warp group, broadcast from
    lane 0 by `shfl.sync` (CUTLASS's canonical warp group index does the same), which
    ptxas takes as warp-uniform: the consumers' branch is then no divergent path to it
    (codegen/switches.py says why that matters)."""
    if em.cpu or not uniform_role_enabled():
        return tid
    group = ops.BinaryOp("shr", tid, em.const(7, T.i32))
    broadcast = ops.InlineAsmOp("shfl.sync.idx.b32 $0, $1, 0, 31, -1;", "=r,r",
                                [group.results[0]], [ir_type(T.i32)], False)
    first = ops.BinaryOp("shl", broadcast.results[0], em.const(7, T.i32))
    route.add_ops([group, broadcast, first])
    return first.results[0]


def _route(b: TileBuilder, em: Any, consumers: Block, producer: Block) -> None:
    """The body's new first block: threads below num_warps * 32 go on as consumers, the
    producer warp group hands its registers over and keeps one thread, which runs the
    producer's copy of the body."""
    threads = em.num_warps * WARP_SIZE
    registers = None if em.cpu else REGISTERS.get(em.num_warps)  # a GPU's register file
    route, consumer, producers, leave = Block(), Block(), Block(), Block()
    for k, block in enumerate((route, consumer, producers, leave)):
        b.func.body.add_block(block)
        b.order[block] = (-1, k)
    tid = ops.RegisterOp("tid.x", ir_type(T.i32))
    route.add_op(tid)
    is_consumer = ops.CompareOp("lt", _role_thread(route, em, tid.results[0]),
                                em.const(threads, T.i32))
    # warp-uniform (whole warp groups), and no block barrier follows on either side
    b.uniform.add(is_consumer.results[0])
    route.add_ops([is_consumer,
                   ops.CondBranchOp(is_consumer.results[0], consumer, producers)])
    if registers is not None:
        consumer.add_op(ops.HopperOp("setmaxnreg.inc", [], [], imm=(registers[1],)))
        producers.add_op(ops.HopperOp("setmaxnreg.dec", [], [], imm=(registers[0],)))
    consumer.add_op(ops.BranchOp(consumers))
    leader = ops.CompareOp("eq", tid.results[0], em.const(threads, T.i32))
    producers.add_ops([leader, ops.CondBranchOp(leader.results[0], producer, leave)])
    leave.add_op(ops.ReturnOp())

