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


@dataclass(frozen=True)
class FixedArray:
    """A shared-memory or thread-local array with a fixed shape."""

    ssa: SSAValue
    dtype: T.DType
    shape: tuple[int, ...]
    space: str  # "shared" or "local"
    name: str = ""


@dataclass(frozen=True)
class Tup:
    """A tuple of values (tuples exist only at compile time)."""

    items: tuple[Any, ...]


@dataclass(frozen=True)
class Static:
    """A Python object resolved at compile time: a module, dtype, intrinsic, @ox.func."""

    obj: Any


@dataclass
class Slot:
    """A mutable scalar local variable."""

    ssa: SSAValue
    dtype: T.DType


@dataclass
class SlotTuple:
    """A local variable holding a tuple: one slot (or nested tuple) per element."""

    items: tuple[Any, ...]


@dataclass
class ShapeOf:
    """`a.shape`: indexable by constants, unpackable, `len()`-able."""

    array: Any
    dims: list[Any] = field(default_factory=list)


def describe(v: Any) -> str:
    """A short human name of a value's type, for messages."""
    if isinstance(v, Lit):
        return f"a {type(v.value).__name__} literal"
    if isinstance(v, Val):
        return v.dtype.name
    if isinstance(v, Witness):
        return f"a {v.rank}-D ThreadIndex"
    if isinstance(v, Array):
        return repr(v.type)
    if isinstance(v, FixedArray):
        return f"a {v.space} array"
    if isinstance(v, Tup):
        return "a tuple"
    if isinstance(v, Static):
        return f"`{getattr(v.obj, '__name__', type(v.obj).__name__)}`"
    return type(v).__name__
