"""The safety pass: every DisjointSlice write is at a guarded witness; proven checks go.

Runs on oxide IR after the frontend. The frontend has already rejected writes
at non-witness indices (it knows the source expressions); this pass owns what
needs the control-flow graph: the bounds guard that must dominate each write,
and removing bounds checks on reads the same guards prove.
"""

from __future__ import annotations

import ast

from xdsl.dialects.builtin import IntAttr

from oxide.errors import SafetyError, Span
from oxide.ir import ops
from oxide.ir.sites import Site
from oxide.ir.types import ArrayType, ThreadIndexType
from oxide.passes.guards import analyze


def written_index(span: Span | None) -> str | None:
    """The index the write at `span` (`out[tid]`) uses, as the user wrote it (`tid`): the
    name a hint's guard must test. None where the span holds no plain subscript."""
    if span is None:
        return None
    try:
        node = ast.parse(span.text[span.col:span.end_col].strip(), mode="eval").body
    except SyntaxError:
        return None
    return ast.unparse(node.slice) if isinstance(node, ast.Subscript) else None


def check_disjoint_writes(func: ops.FuncOp, sites: list[Site]) -> None:
    """Raise SafetyError for a DisjointSlice write not dominated by its bounds guard;
    drop bounds checks on accesses the guards prove in range."""
    facts = analyze(func)
    for block in func.body.blocks:
        for op in block.ops:
            if not isinstance(op, (ops.LoadOp, ops.StoreOp)):
                continue
            arr_type = op.array.type
            if not isinstance(arr_type, ArrayType):
                continue
            indices = list(op.indices)
            witness = indices[0] if len(indices) == 1 and isinstance(
                indices[0].type, ThreadIndexType) else None
            proven = witness is not None and facts.holds(
                block, witness, op.array, arr_type.rank.data)
            if proven:
                op.properties["checked"] = IntAttr(0)
            # a write at another index map (only in a kernel with a declared block shape)
            # is proved one-thread-per-element by passes/shared_races.py and bounds-checked
            if (isinstance(op, ops.StoreOp) and arr_type.access.data == "disjoint"
                    and not op.unsafe.data and not proven and witness is not None):
                site = sites[op.site.data]
                name = site.detail
                w = written_index(site.span) or ("i" if arr_type.rank.data == 1 else "ij")
                hint = (f"guard it: `if {w} in {name}:` (or `if {w} < len({name}):`, or "
                        f"return early when `{w} >= len({name})`)")
                if arr_type.rank.data >= 2:  # a row/col test does not name the array guarded
                    hint = (f"guard it with the ThreadIndex itself: `if {w} in {name}:`, or "
                            f"return early: `if {w} not in {name}: return` (a test of its "
                            f"`.row`/`.col` against other bounds does not guard `{name}`)")
                raise SafetyError(
                    f"write to DisjointSlice `{name}` is not bounds-guarded",
                    site.span, label="this write may be out of bounds", hint=hint)
