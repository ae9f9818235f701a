"""Emits oxide IR into one kernel's control-flow graph.

Holds the insertion point, creates blocks, materializes constants and casts,
and records the diagnostic sites (bounds checks, asserts) the runtime reports.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Attribute, Block, Operation, SSAValue

from oxide import types as T
from oxide.errors import Span
from oxide.ir import ops
from oxide.ir.sites import Site
from oxide.ir.types import constant_attr, ir_type


class IRBuilder:
    """Appends ops at an insertion point inside one `oxide.func`."""

    def __init__(self, name: str, arg_types: Sequence[Attribute]) -> None:
        self.func = ops.FuncOp(name, arg_types)
        self.entry = self.func.body.block
        self.block: Block = Block()
        self.func.body.add_block(self.block)
        self._entry_allocs: list[Operation] = []
        self.sites: list[Site] = []
        # For the uniformity pass's diagnostics (passes/uniformity.py): where each
        # branch and barrier comes from, as the chain of @ox.func call sites that
        # inlined it, outermost first, then its own span; `where` is the chain of the
        # statement being lowered. `uniform` holds values the frontend knows are the
        # same in every thread of a block (a block reduction's result).
        self.where: tuple[Span, ...] = ()
        self.origins: dict[Operation, tuple[Span, ...]] = {}
        self.uniform: set[SSAValue] = set()

    @property
    def args(self) -> tuple[SSAValue, ...]:
        return tuple(self.entry.args)

    def emit(self, op: Operation) -> Operation:
        self.block.add_op(op)
        self.origins.setdefault(op, self.where)  # the statement it came from (lineinfo)
        return op

    def value(self, op: Operation) -> SSAValue:
        self.emit(op)
        return op.results[0]

    def alloc(self, op: Operation) -> SSAValue:
        """Emits a declaration (slot, fixed array) in the entry block, where LLVM wants allocas."""
        self._entry_allocs.append(op)
        return op.results[0]

    def at_entry(self, op: Operation) -> None:
        """Emits `op` in the entry block after the declarations made so far (a slot's
        first value, which every later read sees)."""
        self._entry_allocs.append(op)

    def new_block(self) -> Block:
        block = Block()
        self.func.body.add_block(block)
        return block

    def set_block(self, block: Block) -> None:
        self.block = block

    @property
    def terminated(self) -> bool:
        last = self.block.last_op
        return last is not None and isinstance(
            last, (ops.BranchOp, ops.CondBranchOp, ops.ReturnOp, ops.UnreachableOp))

    def reachable(self, block: Block) -> bool:
        """Whether control can reach `block` from the start of the body.

        Code after `return`/`break` lands in fresh blocks, and those may still branch
        onward (the join of an `if` whose branches all returned), so this walks the
        graph forward from the first body block rather than asking for predecessors.
        """
        start = self.func.body.blocks[1]
        seen = {id(start)}
        stack = [start]
        while stack:
            b = stack.pop()
            if b is block:
                return True
            for succ in (b.last_op.successors if b.last_op is not None else ()):
                if id(succ) not in seen:
                    seen.add(id(succ))
                    stack.append(succ)
        return False

    def br(self, dest: Block) -> None:
        if not self.terminated:
            self.emit(ops.BranchOp(dest))

    def cond_br(self, cond: SSAValue, then_block: Block, else_block: Block) -> None:
        self.origins[self.emit(ops.CondBranchOp(cond, then_block, else_block))] = self.where

    def constant(self, value: int | float | bool, dt: T.DType) -> SSAValue:
        return self.value(ops.ConstantOp(constant_attr(value, dt), ir_type(dt)))

    def cast(self, v: SSAValue, dt: T.DType) -> SSAValue:
        t = ir_type(dt)
        return v if v.type == t else self.value(ops.CastOp(v, t))

    def site(self, kind: str, span: Span, detail: str) -> int:
        self.sites.append(Site(kind, span, detail))
        return len(self.sites) - 1

    def finish(self) -> ops.FuncOp:
        """Seals the CFG: allocas and a jump into the body in the entry block, dead blocks gone."""
        if not self.terminated:
            self.emit(ops.ReturnOp())
        first_body = self.func.body.blocks[1]
        for op in self._entry_allocs:
            self.entry.add_op(op)
        self.entry.add_op(ops.BranchOp(first_body))
        _remove_unreachable(self.func)
        return self.func


def _remove_unreachable(func: ops.FuncOp) -> None:
    blocks = list(func.body.blocks)
    seen = {id(blocks[0])}
    stack = [blocks[0]]
    while stack:
        block = stack.pop()
        term = block.last_op
        for succ in (term.successors if term is not None else ()):
            if id(succ) not in seen:
                seen.add(id(succ))
                stack.append(succ)
    for block in blocks:
        if id(block) not in seen:
            for op in reversed(list(block.ops)):
                op.detach()
                op.erase(safe_erase=False)
            func.body.detach_block(block)
            block.erase(safe_erase=False)
