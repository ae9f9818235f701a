"""The IR builder of a tile kernel: the frontend's builder, and then the lowering's.

The tile frontend builds tile-dialect ops (`ir/tile_ops.py`) between the kernel's scalar
ops; `tile/to_simt.py` later replaces each tile op, in the order the frontend made them,
by SIMT ops. This builder makes the result what building the SIMT ops on the spot would
have given, op for op:

- while an op is lowered (`lowering`), what the emitter emits goes just before that op
  in its block; where the emitter ends the block (a branch: `tile/access.py`'s two ways,
  the mma k-loop), the op and everything after it move to the block the emitter ends in;
- every declaration (`alloc`, in the entry block) and every block carries the position
  it would have had (`order`): the frontend's in the order they were made, the
  lowering's just after those of the op they came from. `finish` sorts by it.

What the frontend relies on: `tile_op` records an op with the span of the statement it
came from (diagnostics raised while lowering it point there).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from xdsl.ir import Attribute, Block, Operation

from oxide.errors import Span
from oxide.frontend.builder import IRBuilder
from oxide.ir import ops

_TERMINATORS = (ops.BranchOp, ops.CondBranchOp, ops.ReturnOp, ops.UnreachableOp)


class TileBuilder(IRBuilder):
    """An IRBuilder that keeps tile ops in creation order and lowers them in place."""

    def __init__(self, name: str, arg_types: Sequence[Attribute]) -> None:
        super().__init__(name, arg_types)
        self._seq = 0
        self.order: dict[object, tuple[int, ...]] = {self.block: (0,)}
        self.tile_ops: list[Operation] = []  # in creation order
        self.spans: dict[Operation, Span | None] = {}
        self.span_now: Span | None = None  # the statement of the op being built or lowered
        self._anchor: Operation | None = None
        self._lowering_key = 0
        self._sub = 0
        self._tail: list[Operation] = []
        self._end: Block | None = None  # the frontend's last block, once lowering begins
        # the deepest `num_stages` whose operand rings fit, where a pipelined loop's did
        # not at the kernel's (tile/operand_rings.py `_too_deep`)
        self.stages_that_fit: int | None = None

    def _next_key(self) -> tuple[int, ...]:
        if self._anchor is None and not self._lowering_key:
            self._seq += 1
            return (self._seq,)
        self._sub += 1
        return (self._lowering_key, self._sub)

    # -- the frontend -------------------------------------------------------------------

    def tile_op(self, op: Operation, span: Span | None, declare: bool = False) -> Operation:
        """Records a tile op (emitted here, or with `declare` at the top of the entry
        block, where the slots it lowers to are declared)."""
        if declare:
            self.entry.add_op(op)
            self.origins.setdefault(op, self.where)
        else:
            self.emit(op)
        self.order[op] = self._next_key()
        self.tile_ops.append(op)
        self.spans[op] = span
        return op

    def insert_tile_op(self, op: Operation, beside: Operation, after: bool = False) -> None:
        """A tile op a pass adds just before (or `after`) `beside`: lowered just before
        (after) it, as part of it (its declarations and blocks sort with beside's)."""
        block = beside.parent_block()
        assert block is not None
        if after:
            block.insert_op_after(op, beside)
        else:
            block.insert_op_before(op, beside)
        self.order[op] = self.order[beside]
        self.spans[op] = self.spans.get(beside)
        self.origins[op] = self.origins.get(beside, ())
        self.tile_ops.insert(self.tile_ops.index(beside) + (1 if after else 0), op)

    def insert_tile_op_at(self, op: Operation, before: Operation, lowered_before: Operation
                          ) -> None:
        """A tile op a pass adds just before `before` (any op, a terminator too), lowered
        when tile op `lowered_before` is about to be: its SIMT ops stand where it stands,
        and its declarations and blocks sort with `lowered_before`'s (a key of its own
        block's could sort them before the constants earlier lowerings declared)."""
        block = before.parent_block()
        assert block is not None
        block.insert_op_before(op, before)
        self.order[op] = self.order[lowered_before]
        self.spans[op] = self.spans.get(lowered_before)
        self.origins[op] = self.origins.get(lowered_before, ())
        self.tile_ops.insert(self.tile_ops.index(lowered_before), op)

    # -- both -------------------------------------------------------------------------

    def emit(self, op: Operation) -> Operation:
        anchor = self._anchor
        if anchor is not None and anchor.parent is self.block:
            self.block.insert_op_before(op, anchor)
            if isinstance(op, _TERMINATORS):  # the block ends here: the rest moves on
                self._tail = _detach_from(anchor)
        else:
            self.block.add_op(op)
        self.origins.setdefault(op, self.where)
        return op

    def alloc(self, op: Operation) -> Operation:  # type: ignore[override]
        self.order[op] = self._next_key()
        return super().alloc(op)

    def at_entry(self, op: Operation) -> None:
        self.order[op] = self._next_key()
        super().at_entry(op)

    def new_block(self) -> Block:
        block = super().new_block()
        self.order[block] = self._next_key()
        return block

    @property
    def terminated(self) -> bool:
        anchor = self._anchor
        if anchor is not None and anchor.parent is self.block:
            return False
        return super().terminated

    # -- the lowering -----------------------------------------------------------------

    @contextmanager
    def lowering(self, op: Operation) -> Iterator[None]:
        """Emit the SIMT ops of tile op `op` in its place (see the module docstring)."""
        if self._end is None:
            self._end = self.block
        block = op.parent_block()
        self._anchor = op if block is not None else None
        self._lowering_key = self.order[op][0]
        if block is not None:
            self.block = block
        self.span_now = self.spans.get(op)
        outer, self.where = self.where, self.origins.get(op, ())
        try:
            yield
        finally:
            if self._tail:
                if block is self._end:  # the rest of the frontend's last block moved on
                    self._end = self.block
                for moved in self._tail:
                    self.block.add_op(moved)
            self._tail = []
            self._anchor = None
            self.where = outer

    @property
    def end_block(self) -> Block:
        """The block the kernel ends in (its return goes there at `finish`)."""
        return self._end if self._end is not None else self.block

    def finish(self) -> ops.FuncOp:
        """Declarations and blocks in the order building the SIMT ops on the spot would
        have made them; then the IRBuilder's sealing."""
        if self._end is not None:
            self.block = self._end
        # constants first: they need nothing, and a constant is made once and reused, so
        # the lowering that made it may sort after a later one's declaration using it
        self._entry_allocs.sort(key=lambda o: (not isinstance(o, ops.ConstantOp),
                                               self.order[o]))
        region = self.func.body
        blocks = list(region.blocks)[1:]
        for block in blocks:
            region.detach_block(block)
        for block in sorted(blocks, key=lambda b: self.order[b]):
            region.add_block(block)
        return super().finish()


def _detach_from(op: Operation) -> list[Operation]:
    """`op` and every op after it in its block, detached, in order."""
    out = []
    cur: Operation | None = op
    while cur is not None:
        nxt = cur.next_op
        cur.detach()
        out.append(cur)
        cur = nxt
    return out
