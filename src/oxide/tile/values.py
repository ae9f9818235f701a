"""What the tile frontend computes with: tiles, witnesses, arrays and static values.

A `Tile` is immutable: a static power-of-two shape and a dtype, one value of the tile
dialect; after the layout pass, `tile/to_simt.py` holds it as `Slots`, one SSA value
per slot of its layout (`tile/layout.py`) in every thread. A scalar is a 0-d tile (one
slot, the same value in every thread). Python numbers and
Const parameters stay Python values (`Static`): weak literals that take the type of the
tile they meet.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from xdsl.ir import SSAValue

from oxide import types as T
from oxide.tile.layout import Layout


@dataclass(frozen=True)
class Witness:
    """What makes a 0-d integer tile a TileIndex: two blocks that differ along grid axis
    `axis` never hold one value of it. `tile.bid(axis)` is one; so is the variable of `for
    t in tile.tiles(n)` for axis 0 (a block's values are its `tile.bid(0)` plus multiples
    of the grid's size, so they are never another block's `tile.bid(0)` or `t` either:
    both are the same witness). A witness is never negative.

    `part` is 0 or 1 for the row or column of `tile.grouped`'s pair: a function of a
    witness that no two of its values share, for the sizes `sizes` (the launch-uniform
    sizes' keys, `tile/uniform.py`); only the two parts of one pair together tell blocks
    apart.
    """

    axis: int
    part: int | None = None
    sizes: Hashable = None

    def describe(self) -> str:
        if isinstance(self.sizes, tuple) and self.sizes[:1] == ("run",):
            return (f"a TileIndex of grid axis {self.axis}'s runs of {self.sizes[1]} rows "
                    f"(tile/run_witness.py)")
        if self.part is None:
            return f"a TileIndex of grid axis {self.axis}"
        return f"the {('row', 'column')[self.part]} of a tile.grouped pair"


@dataclass(frozen=True)
class Tile:
    """A tile value of the frontend: its dtype, static shape and `ssa`, a `!tile.tile`
    value of the tile dialect (`ir/tile_ops.py`), whose layout `tile/layouts.py` picks
    later.

    `witness`: set where the tile is a TileIndex (`Witness`). Arithmetic drops it, and so
    does a narrowing cast (it can wrap); a cast to an integer type at least as wide keeps
    it (`tile.bid(0).astype(i64)`: a witness is never negative, so sign does not matter).
    """

    dtype: T.DType
    shape: tuple[int, ...]
    ssa: SSAValue
    witness: Witness | None = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def describe(self) -> str:
        if not self.shape:
            return f"a {self.dtype.name} scalar" + (" (a TileIndex)" if self.witness is not None
                                                    else "")
        return f"a tile of shape {shape_text(self.shape)} and dtype {self.dtype.name}"


def keeps_witness(src: T.DType, dst: T.DType) -> bool:
    """Whether a cast from `src` to `dst` keeps a witness's values: to an integer type at
    least as wide (a witness is never negative and fits `src`'s signed range)."""
    return dst.is_int and not dst.is_bool and dst.bits >= src.bits


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
    """An array parameter: its IR value, type and name; or a view of one, `arr[i]` (as
    NumPy's): the parameter's elements whose leading indices are `fixed`, an array of
    the remaining dimensions (`type` has their rank). A view's tiles are the parameter's
    tiles of extent 1 along the fixed dimensions, at those indices (tile/memory.py)."""

    ssa: SSAValue
    type: T.ArrayType
    name: str
    fixed: tuple[Any, ...] = ()  # a view's leading indices: integer scalars (Tiles)
    fixed_nodes: tuple[Any, ...] = ()  # where each was written (ast nodes)

    @property
    def dtype(self) -> T.DType:
        return self.type.dtype

    @property
    def base_rank(self) -> int:
        """The parameter's rank (a view's and its fixed dimensions')."""
        return self.type.rank + len(self.fixed)


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
