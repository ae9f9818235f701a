"""The ordering pass: block barriers between a tile block's accesses of one array that
its threads make for one element from different threads.

Tile code means program order: a load sees the block's earlier stores, a later store to
an element wins over an earlier one, and a load reads what was there before a later
store. But each access runs in the threads its layout gives the elements to
(`tile/layout.py`): a store writes an element from its owner, a load reads it in every
thread that holds it, replicas included. Where two accesses of one array, at least one
a store, may use different threads for an element, nothing orders them across threads:
a load reads the stale value (a tile stored from the mma accumulator layout and loaded
back in a blocked one), the earlier of two stores lands last (a row overwritten chunk by
chunk, then one element of it again), or a replica reads the new value of an element a
later store wrote. A block barrier (`bar.sync`, which orders the CTA's global memory
accesses as well as its shared ones; on the CPU, a point every thread of the block
reaches before any goes on) between the two orders them.

What it assumes: the layout pass has run; tile code is block-uniform (a barrier
anywhere is reached by every thread); accesses of one array with one tile shape meet
only at equal tile indices, so an access with the shape and layout of an earlier one
either touches the same elements from the same threads or none of the earlier one's;
distinct array parameters do not overlap where one is written (the launch's aliasing
check).

What it guarantees: on every path from an access to a later access of the same array
with a store among them, unless both have one shape and one layout (with no replicas
where one is a load, or none whose values are used), a block barrier lies between: one the lowering of an op in
between emits (`syncs_block`; `tile/to_simt.py` checks that it does), or a
`tile.barrier` this pass puts just before the later access. Kernels without such pairs
(most: no array both stored and accessed again) are left as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Block, Operation, SSAValue

from oxide.ir.tile_ops import kind_of, make
from oxide.tile.builder import TileBuilder
from oxide.tile.layout import Layout
from oxide.tile.layouts import layout_of

# ops that compute each slot from the same slot of their operands, in one layout
_PER_SLOT = ("binary", "unary", "math", "cast", "compare", "where", "narrow_compare")


@dataclass(frozen=True)
class _Access:
    """A global access as the pass compares them: its array, whether it stores, its
    layout's key (shape and map), and whether it reads elements in replica threads
    whose values matter (`_replicas_used`; a store writes from owners only)."""

    array: SSAValue
    store: bool
    key: tuple[object, ...]
    replicas_read: bool

    def same_threads(self, other: _Access) -> bool:
        """Whether every element both touch is touched by one thread in both: one
        layout, and no replica's read that matters (each element from its owner)."""
        return self.key == other.key and not (self.replicas_read or other.replicas_read)


def syncs_block(op: Operation) -> bool:
    """Whether the lowering of `op` (after the layout pass) always passes a block barrier:
    a layout conversion through shared memory (not one to the accumulator layout, which
    may remake a constant in place), a permute, reshape, slices or cat (through shared
    memory), a product (its operands are staged in shared memory between barriers) but one
    whose operands a producer warp group copies."""
    kind = kind_of(op)
    if kind == "mma" and op.param("producer"):  # TMA operands, a producer warp group:
        return False  # no barrier at all (tile/producer.py)
    if kind in ("permute", "reshape", "slices", "cat", "mma"):
        return True
    if kind == "atomic":  # a release meets at a barrier first (tile/atomic_lower.py)
        return op.param("sem") in ("release", "acq_rel")
    return (kind == "convert" and op.param("to") != "mma"
            and layout_of(op.operands[0]).key() != layout_of(op.results[0]).key())


def _access(op: Operation) -> _Access | None:
    kind = kind_of(op)
    if kind == "load":
        layout = layout_of(op.results[0])
        return _Access(op.operands[0], False, layout.key(),
                       _replicated(layout) and _replicas_used(op))
    if kind == "store":
        return _Access(op.operands[0], True, layout_of(op.operands[1]).key(), False)
    if kind == "atomic":  # a read-modify-write, from each element's owner
        return _Access(op.operands[0], True, layout_of(op.operands[1]).key(), False)
    return None


def _replicas_used(load: Operation) -> bool:
    """Whether the values a load leaves in replica threads can matter: they do unless
    every use, through ops that work slot by slot in its layout, is the value of a store
    (which writes from each element's owner only), as in `tile.store(x, i, tile.load(x, i,
    (1, 1)) + 1.0)`. A replica that reads an element before or after its owner writes it
    then changes nothing."""
    stack, seen = [load.results[0]], set()
    while stack:
        v = stack.pop()
        for use in v.uses:
            user = use.operation
            kind = kind_of(user)
            if kind == "store" and use.index == 1 or kind == "broadcast" and use.index > 0:
                continue  # written from owners only; a candidate for the layout only
            moves = kind == "broadcast" and (
                layout_of(user.results[0]).key() != layout_of(v).key())
            if kind not in (*_PER_SLOT, "broadcast") or moves:
                return True
            if id(user) not in seen:
                seen.add(id(user))
                stack.append(user.results[0])
    return False


def _replicated(layout: Layout) -> bool:
    """Whether some element is held by more than one thread."""
    lanes = 31 & ~layout.lane_bits()
    warps = (layout.num_warps - 1) & ~layout.warp_bits()
    return bool(lanes or warps) or any(layout.wraps(d) for d, n in enumerate(layout.shape)
                                       if n > 1)


def _conflicts(pending: frozenset[_Access], later: _Access) -> bool:
    return any(p.array is later.array and (p.store or later.store)
               and not p.same_threads(later) for p in pending)


def place_barriers(b: TileBuilder) -> None:
    """Put a `tile.barrier` before each access that needs one (see the module
    docstring): a forward data-flow over the kernel's blocks of the accesses made since
    the last barrier on some path, to a fixed point."""
    accesses = {op: a for op in b.tile_ops if (a := _access(op)) is not None}
    stored = {a.array for a in accesses.values() if a.store}
    kinds: dict[SSAValue, set[_Access]] = {}
    for a in accesses.values():
        if a.array in stored:
            kinds.setdefault(a.array, set()).add(a)
    if all(x.same_threads(y) or not (x.store or y.store)
           for v in kinds.values() for x in v for y in v):
        return  # each stored array is touched from the same threads throughout
    blocks = list(b.func.body.blocks)
    entry: dict[Block, frozenset[_Access]] = {blk: frozenset() for blk in blocks}
    needs: set[Operation] = set()  # accesses that get a barrier (sticky: the walk terminates)
    work = list(blocks)
    while work:
        block = work.pop(0)
        state = entry[block]
        for op in block.ops:
            a = accesses.get(op)
            if syncs_block(op):  # an atomic's barrier comes before its own access
                state = frozenset()
            if a is None:
                continue
            if op in needs or _conflicts(state, a):
                needs.add(op)
                state = frozenset()
            state |= {a}
        last = block.last_op
        for succ in (last.successors if last is not None else ()):
            if not state <= entry[succ]:
                entry[succ] |= state
                if succ not in work:
                    work.append(succ)
    for op in list(b.tile_ops):
        if op in needs:
            b.insert_tile_op(make("barrier", [], []), op)
