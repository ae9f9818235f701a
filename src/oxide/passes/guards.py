"""Bounds facts established by branches: which witness is known to lie inside which array.

A fact `(w, a, d)` says coordinate `d` of witness `w` is below dimension `d` of
array `a`. Conditions that establish facts: `w in a`, `i < len(a)`,
`w.row < a.shape[0]` (and their mirror forms), negations, and the early-return
form `if i >= len(a): return`. A block knows a fact when it is dominated by the
branch edge that tests it, entered only through that edge.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Block, SSAValue

from oxide.ir import ops
from oxide.passes.cfg import dominators_of, immediate_dominators, predecessors

Fact = tuple[SSAValue, SSAValue, int]  # (witness, array, dimension)


@dataclass
class GuardFacts:
    """The facts each block of a function may rely on."""

    by_block: dict[Block, set[Fact]]

    def holds(self, block: Block, witness: SSAValue, array: SSAValue, rank: int) -> bool:
        known = self.by_block.get(block, set())
        return all((witness, array, d) in known for d in range(rank))


def condition_facts(cond: SSAValue, polarity: bool) -> set[Fact]:
    """Facts that hold when `cond` evaluates to `polarity`."""
    op = cond.owner
    if isinstance(op, ops.UnaryOp) and op.kind.data == "not":
        return condition_facts(op.operand, not polarity)
    if isinstance(op, ops.InBoundsOp):
        if not polarity:
            return set()
        rank = op.witness.type.rank.data  # type: ignore[attr-defined]
        return {(op.witness, op.array, d) for d in range(rank)}
    if isinstance(op, ops.CompareOp):
        pred = op.predicate.data
        lhs, rhs = op.lhs.owner, op.rhs.owner
        if isinstance(rhs, ops.IndexComponentOp) and isinstance(lhs, ops.ArrayDimOp):
            lhs, rhs = rhs, lhs
            pred = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}.get(pred, pred)
        if not (isinstance(lhs, ops.IndexComponentOp) and isinstance(rhs, ops.ArrayDimOp)):
            return set()
        if lhs.dim.data != rhs.dim.data:
            return set()
        if (pred == "lt" and polarity) or (pred == "ge" and not polarity):
            return {(lhs.witness, rhs.array, lhs.dim.data)}
    return set()


def analyze(func: ops.FuncOp) -> GuardFacts:
    idom = immediate_dominators(func)
    preds = predecessors(func)
    entry_facts: dict[Block, set[Fact]] = {}
    for block in func.body.blocks:
        if len(preds[block]) != 1:
            continue
        term = preds[block][0].last_op
        if isinstance(term, ops.CondBranchOp) and term.then_block is not term.else_block:
            polarity = block is term.then_block
            facts = condition_facts(term.cond, polarity)
            if facts:
                entry_facts[block] = facts
    by_block: dict[Block, set[Fact]] = {}
    for block in func.body.blocks:
        if block not in idom:
            continue
        known: set[Fact] = set()
        for dom in dominators_of(block, idom):
            known |= entry_facts.get(dom, set())
        by_block[block] = known
    return GuardFacts(by_block)
