"""The DisjointSlice read rule: a kernel that writes a DisjointSlice reads it only at
this thread's ThreadIndex.

Each element of a written DisjointSlice belongs to the thread whose witness it
is, and that thread may write it at any moment; a read of the element at any
other index (`out[i + 1]`) races with its owner's write, and GPU threads run in
no defined order. A read at the witness sees only this thread's own writes, so
it is safe. A DisjointSlice the kernel never writes is read-only for the whole
launch, so it may be read anywhere, as a `Slice` is. Reads inside
`with ox.unsafe():` are the user's responsibility, as writes there are.
"""

from __future__ import annotations

from xdsl.ir import SSAValue

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


def check_disjoint_reads(func: ops.FuncOp, sites: list[Site]) -> None:
    """Raise SafetyError for a read of a written DisjointSlice at a non-witness index."""
    written = _written_disjoint_arrays(func)
    if not written:
        return
    for op in func.walk():
        if not isinstance(op, ops.LoadOp) or op.array not in written:
            continue
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
