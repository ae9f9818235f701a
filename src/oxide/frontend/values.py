"""What a Python expression in a kernel evaluates to, at compile time.

The frontend evaluates kernel code abstractly: each expression becomes one of
these. Literals stay weak (`Lit`) until they meet a typed operand; witnesses
(`Witness`) stay distinct from plain integers so the safety rules can see them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from oxide import types as T

if TYPE_CHECKING:  # xdsl is imported at first compile, not at `import oxide`
    from xdsl.ir import SSAValue


@dataclass(frozen=True)
class Lit:
    """A weakly typed literal or folded Python constant (int, float or bool)."""

    value: int | float | bool


@dataclass(frozen=True)
class Val:
    """A typed scalar computed at run time.

    `note` explains, for integers derived from a witness, why they are plain
    integers now; safety diagnostics show it.
    """

    ssa: SSAValue
    dtype: T.DType
    note: str | None = None


@dataclass(frozen=True)
class Witness:
    """A ThreadIndex: launch-unique, the only index a DisjointSlice accepts."""

    ssa: SSAValue
    rank: int
    name: str = ""


@dataclass(frozen=True)
class Array:
    """A kernel array parameter (Slice, DisjointSlice, AtomicSlice or RawSlice)."""

    ssa: SSAValue
    type: T.ArrayType
    name: str


@dataclass
class ArrayVar:
    """An array name rebound in the body (`if c: src = a` / `else: src = b`, or the
    ping-pong swap `src, dst = dst, src` in a loop): an `i32` slot holding which of
    `candidates` (array parameters, or arrays an @ox.func received, all of one type) it is
    now. Each read selects through `oxide.array_select` ops, so the safety passes see every
    array a read or write may touch (a DisjointSlice written through it counts as written
    in each candidate), exactly as for `a if c else b`.

    `known` caches the last read (or a write of a known array): the `Array`, the block it
    was made in and the write count `gen` then; a read in a block that block dominates,
    with no write since, reuses it. Why: the guard analysis matches arrays by SSA value,
    so `if ij in dst:` and `dst[ij] = v` must see one value, not two selects.
    """

    slot: SSAValue
    type: T.ArrayType
    candidates: tuple[Array, ...]
    name: str
    gen: int = 0
    known: tuple[Array, Any, int] | None = None


@dataclass(frozen=True)
class FixedArray:
    """A shared-memory, thread-local or constant array with a fixed shape.

    Dynamic shared memory (`ox.shared.dynamic`) has the extent `None`: its
    length is the launch's, read at run time.
    """

    ssa: SSAValue
    dtype: T.DType
    shape: tuple[int | None, ...]
    space: str  # "shared", "local" or "constant"
    name: str = ""


@dataclass(frozen=True)
class Tup:
    """A tuple of values (tuples exist only at compile time)."""

    items: tuple[Any, ...]


@dataclass(frozen=True)
class BlockPosition(Tup):
    """`thread.in_block()` in a 2-D block: the pair (row, col) = (thread_idx.y,
    thread_idx.x), an index for 2-D shared arrays, with `.row` and `.col`."""

    def field(self, name: str) -> Any:
        return self.items[("row", "col").index(name)] if name in ("row", "col") else None


@dataclass(frozen=True)
class Static:
    """A Python object resolved at compile time: a module, dtype, intrinsic, @ox.func."""

    obj: Any


@dataclass
class Slot:
    """A mutable scalar local variable.

    `note` is set once the variable has been assigned a value derived from a
    witness: reads carry it, so a DisjointSlice write at the variable explains
    why it is not a ThreadIndex.
    """

    ssa: SSAValue
    dtype: T.DType
    note: str | None = None


@dataclass
class SlotTuple:
    """A local variable holding a tuple: one slot (or nested tuple) per element."""

    items: tuple[Any, ...]


@dataclass
class ShapeOf:
    """`a.shape`: indexable by constants, unpackable, `len()`-able."""

    array: Any
    dims: list[Any] = field(default_factory=list)


def py_name(obj: Any) -> str:
    """A Python object's name for messages, without trusting the object.

    Some objects answer any attribute (oxide's register groups raise on every
    unknown one), so `getattr(obj, "__name__")` alone can raise; never let a
    message about a user's mistake crash the compiler.
    """
    try:
        name = obj.__name__
    except Exception:  # any failure means "no usable name"
        name = None
    if isinstance(name, str):
        return name
    if type(obj).__module__.startswith("oxide"):
        return repr(obj)  # oxide's own markers print as users write them (`Slice`, `Const`)
    return type(obj).__name__


def article(word: str) -> str:
    """`word` with "a" or "an" ("an i64", "an int literal", "a u32")."""
    return ("an " if word[:1] in "aeioAEIO" else "a ") + word


def literal_text(value: Any) -> str:
    """A literal as the user wrote it, shortened when huge (`10 ** 10000`)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"(a {value.bit_length() + (value < 0)}-bit integer)"
    return repr(value)


def describe(v: Any) -> str:
    """A short human name of a value's type, for messages."""
    if isinstance(v, Lit):
        return article(f"{type(v.value).__name__} literal")
    if isinstance(v, Val):
        return v.dtype.name
    if isinstance(v, Witness):
        return f"a {v.rank}-D ThreadIndex"
    if isinstance(v, (Array, ArrayVar)):
        return repr(v.type)
    if isinstance(v, FixedArray):
        return f"a {v.space} array"
    if isinstance(v, (Tup, SlotTuple)):
        return "a tuple"
    if isinstance(v, Slot):
        return v.dtype.name
    if isinstance(v, Static):
        return "None" if v.obj is None else f"`{py_name(v.obj)}`"
    return type(v).__name__


def unpack_hint(value: Any) -> str:
    """The help line for `a, b = value` when `value` cannot be unpacked."""
    if isinstance(value, Witness) and value.rank == 2:
        return ("a 2-D ThreadIndex is one value, so that DisjointSlices take it whole "
                "(`out[ij]`); its coordinates are `.row` and `.col`: "
                "`ij = thread.index_2d(); r = ij.row`")
    return "only tuples unpack"


def constant_int(value: Any) -> Any:
    """`value` as a Lit where it is a typed integer constant (an unrolled loop's
    variable, which is an `oxide.constant`); otherwise `value` itself."""
    if isinstance(value, Val) and not value.dtype.is_float:
        from oxide.ir import ops

        owner = value.ssa.owner
        if isinstance(owner, ops.ConstantOp):
            return Lit(owner.value.value.data)  # type: ignore[attr-defined]
    return value
