"""The DisjointSlice read rule: a kernel that writes a DisjointSlice reads it only at
this thread's ThreadIndex.

Each element of a written DisjointSlice belongs to the thread whose witness it
is, and that thread may write it at any moment; a read of the element at any
other index (`out[i + 1]`) races with its owner's write, and GPU threads run in
no defined order. A read at the witness sees only this thread's own writes, so
it is safe. A DisjointSlice the kernel never writes is read-only for the whole
launch, so it may be read anywhere, as a `Slice` is. Reads inside
`with ox.unsafe():` are the user's responsibility, as writes there are.

A choice of arrays, `src = a if c else b`, reads (or writes) `a` where `c` holds and `b`
where it does not. Where `c` is computed from the kernel's scalar parameters and
constants alone, it is the same in every thread, so a read through `a if c else b` and
the writes through `b if c' else a` (with `c'` the same computation as `c`) never meet
in one launch: the Jacobi step's `src`/`dst` swap on the step's parity. Parameters that
are distinct DisjointSlices never overlap (the launch refuses aliasing ones).
"""

from __future__ import annotations

from typing import Any

from xdsl.ir import BlockArgument, SSAValue

from oxide.errors import SafetyError
from oxide.ir import ops
from oxide.ir.sites import Site
from oxide.ir.types import ArrayType, ThreadIndexType
from oxide.passes.safety import written_index


def _written_disjoint_arrays(func: ops.FuncOp) -> set[SSAValue]:
    """The DisjointSlices the kernel writes; a write through `a if c else b` writes both,
    and a read through such a choice reads a written array if either side is one."""
    written: set[SSAValue] = set()
    for op in func.walk():
        if isinstance(op, (ops.StoreOp, ops.AtomicOp)):
            t = op.array.type
            if isinstance(t, ArrayType) and t.access.data == "disjoint":
                written |= _sources(op.array)
    for op in func.walk():  # choices reaching a written array are written ones too
        if isinstance(op, ops.ArraySelectOp) and _sources(op.result) & written:
            written.add(op.result)
    return written


def _sources(array: SSAValue) -> set[SSAValue]:
    """`array` and, through `a if c else b` choices, the parameters it may be."""
    out = {array}
    owner = array.owner
    if isinstance(owner, ops.ArraySelectOp):
        out |= _sources(owner.if_true) | _sources(owner.if_false)
    return out


# An array a choice may give: the parameter, and the (condition, value) pairs under which
# it does (conditions by their computation: `_uniform_key`)
Outcome = tuple[SSAValue, frozenset[tuple[Any, bool]]]


class _Choices:
    """Which parameters a choice of arrays gives, under which uniform conditions."""

    def __init__(self, func: ops.FuncOp) -> None:
        # each slot's writes: a variable written once holds that value wherever it is read
        self.slot_writes: dict[SSAValue, list[SSAValue]] = {}
        for op in func.walk():
            if isinstance(op, ops.SlotWriteOp):
                self.slot_writes.setdefault(op.slot, []).append(op.value)

    def outcomes(self, array: SSAValue) -> list[Outcome]:
        """The parameters `array` may be, each with the uniform conditions that choose it
        (a condition that may differ between threads is left out: it chooses nothing for
        all of them)."""
        owner = array.owner
        if not isinstance(owner, ops.ArraySelectOp):
            return [(array, frozenset())]
        key = self.uniform_key(owner.cond)
        out = []
        for side, value in ((owner.if_true, True), (owner.if_false, False)):
            for param, conds in self.outcomes(side):
                out.append((param, conds | {(key, value)} if key is not None else conds))
        return out

    def uniform_key(self, v: SSAValue) -> Any:
        """`v`'s computation, when it is built from scalar kernel parameters and constants
        by pure arithmetic (so every thread computes it alike), as a key two equal
        computations share; else None."""
        if isinstance(v, BlockArgument):
            return ("parameter", v.index) if not isinstance(v.type, ArrayType) else None
        owner = v.owner
        if isinstance(owner, ops.ConstantOp):
            return ("constant", str(owner.value), str(v.type))
        if isinstance(owner, ops.SlotReadOp):
            writes = self.slot_writes.get(owner.slot, [])
            return self.uniform_key(writes[0]) if len(writes) == 1 else None
        if not isinstance(owner, (ops.BinaryOp, ops.UnaryOp, ops.CompareOp, ops.CastOp,
                                  ops.SelectOp)):
            return None
        operands = tuple(self.uniform_key(x) for x in owner.operands)
        if any(k is None for k in operands):
            return None
        props = tuple(sorted((k, str(p)) for k, p in owner.properties.items() if k != "site"))
        return (owner.name, props, str(v.type), operands)

    def may_meet(self, read: SSAValue, written: list[SSAValue]) -> bool:
        """Whether the array a read goes through can be one the kernel writes in the same
        launch: the same parameter under conditions that can hold together."""
        for param, conds in self.outcomes(read):
            for w in written:
                for wparam, wconds in self.outcomes(w):
                    if wparam is param and not any((k, not v) in wconds for k, v in conds):
                        return True
        return False


def check_disjoint_reads(func: ops.FuncOp, sites: list[Site]) -> None:
    """Raise SafetyError for a read of a written DisjointSlice at a non-witness index."""
    written = _written_disjoint_arrays(func)
    if not written:
        return
    writes = [op.array for op in func.walk() if isinstance(op, (ops.StoreOp, ops.AtomicOp))
              and isinstance(op.array.type, ArrayType) and op.array.type.access.data == "disjoint"]
    choices = _Choices(func)
    for op in func.walk():
        if not isinstance(op, ops.LoadOp) or op.array not in written:
            continue
        if not choices.may_meet(op.array, writes):
            continue  # a choice that never gives the array this launch writes
        if op.unsafe is not None and op.unsafe.data:
            continue
        indices = list(op.indices)
        if len(indices) == 1 and isinstance(indices[0].type, ThreadIndexType):
            continue
        site = sites[op.site.data]
        name = site.detail
        w = _witness_text(func, op.array, sites)
        at = f"`{name}[{w}]`, at the ThreadIndex `{w}`" if w else \
            f"`{name}` at this thread's ThreadIndex"
        raise SafetyError(
            f"`{name}` is a DisjointSlice this kernel writes: it can only be read at this "
            "thread's ThreadIndex",
            site.span,
            label="another thread may be writing this element",
            hint=f"read {at}; to read other elements, pass them in a separate Slice (or "
                 "take responsibility with `with ox.unsafe():`)")


def _witness_text(func: ops.FuncOp, array: SSAValue, sites: list[Site]) -> str | None:
    """The ThreadIndex a write of `array` uses, as the source spells it (`tid`)."""
    for op in func.walk():
        if (isinstance(op, ops.StoreOp) and op.array == array and len(op.indices) == 1
                and isinstance(op.indices[0].type, ThreadIndexType)):
            return written_index(sites[op.site.data].span)
    return None
