"""What the tile frontend computes with: tiles, witnesses, arrays and static values.

A `Tile` is immutable: a static power-of-two shape and a dtype, one value of the tile
dialect; after the layout pass, `tile/to_simt.py` holds it as `Slots`, one SSA value
per slot of its layout (`tile/layout.py`) in every thread. A scalar is a 0-d tile (one
slot, the same value in every thread). Python numbers and
Const parameters stay Python values (`Static`): weak literals that take the type of the
tile they meet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.ir import SSAValue

from oxide import types as T
from oxide.tile.layout import Layout


@dataclass(frozen=True)
class Tile:
    """A tile value of the frontend: its dtype, static shape and `ssa`, a `!tile.tile`
    value of the tile dialect (`ir/tile_ops.py`), whose layout `tile/layouts.py` picks
    later.

    `witness` is the grid axis when the tile is `tile.bid(axis)` itself (a TileIndex:
    unique to the block along that axis), or `("grouped", k)` for part k of
    `tile.grouped_bid`'s (row, column) pair (unique to the block together, from grid axis
    0); any arithmetic on it drops it.
    """

    dtype: T.DType
    shape: tuple[int, ...]
    ssa: SSAValue
    witness: int | tuple[str, int] | None = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def describe(self) -> str:
        if not self.shape:
            return f"a {self.dtype.name} scalar" + (" (a TileIndex)" if self.witness is not None
                                                    else "")
        return f"a tile of shape {shape_text(self.shape)} and dtype {self.dtype.name}"


@dataclass(frozen=True)
class Slots:
    """A tile as one thread holds it (`tile/lower.py`): `values[k]` is this thread's
    element at slot `k` of `layout`. A 0-d tile has one slot, the same in every thread."""

    dtype: T.DType
    layout: Layout
    values: tuple[SSAValue, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return self.layout.shape

    @property
    def ndim(self) -> int:
        return len(self.layout.shape)

    @property
    def scalar(self) -> SSAValue:
        assert not self.layout.shape, "only 0-d tiles are scalars"
        return self.values[0]


@dataclass(frozen=True)
class TArray:
    """An array parameter: its IR value, type and name."""

    ssa: SSAValue
    type: T.ArrayType
    name: str

    @property
    def dtype(self) -> T.DType:
        return self.type.dtype


@dataclass(frozen=True)
class Static:
    """A compile-time value: a Python number, bool, tuple, dtype, module or function."""

    obj: Any


@dataclass(frozen=True)
class ShapeOf:
    """`arr.shape`: indexed with a constant, it gives the extent as a 0-d i64 tile."""

    array: TArray


@dataclass(frozen=True)
class Method:
    """A bound method of a tile (`x.astype`, `x.reshape`)."""

    tile: Tile
    name: str


def shape_text(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def describe(v: Any) -> str:
    if isinstance(v, Tile):
        return v.describe()
    if isinstance(v, TArray):
        return f"the array `{v.name}` ({v.type!r})"
    if isinstance(v, Static):
        o = v.obj
        if isinstance(o, bool):
            return f"the constant {o}"
        if isinstance(o, (int, float)):
            return f"the constant {o!r}"
        if isinstance(o, tuple):
            return "a tuple"
        if isinstance(o, T.DType):
            return f"the dtype {o.name}"
        return f"`{getattr(o, '__name__', type(o).__name__)}`"
    if isinstance(v, ShapeOf):
        return f"`{v.array.name}.shape`"
    if isinstance(v, Method):
        return f"the method `.{v.name}`"
    return type(v).__name__
