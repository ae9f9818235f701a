"""Tile loads and stores in a tile kernel: their arguments and the tile ops they become
(mixed into `TileLowering`). A DisjointSlice access is checked by `tile/disjoint.py`,
with its index items in the array's dimension order (`order=` applied).
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Any

from oxide import types as T
from oxide.errors import KernelTypeError, SafetyError
from oxide.tile.values import ShapeOf, Static, TArray, Tile, describe, shape_text


class TileMemoryMixin:
    """`tile.load` and `tile.store`."""

    def _array_arg(self, v: Any, node: ast.AST, what: str) -> TArray:
        if not isinstance(v, TArray):
            raise self.error(KernelTypeError, node, f"{what} takes an array parameter, not "
                             f"{describe(v)}")
        return v

    def _item_nodes(self, index_node: ast.AST, rank: int) -> list[ast.AST]:
        """The source of each item of a tile index (the whole index where it is not
        written as a tuple)."""
        if isinstance(index_node, ast.Tuple) and len(index_node.elts) == rank:
            return list(index_node.elts)
        return [index_node] * rank

    def _index(self, arr: TArray, v: Any, node: ast.AST) -> list[Any]:
        items = list(v.obj) if isinstance(v, Static) and isinstance(v.obj, tuple) else (
            list(v) if isinstance(v, tuple) else [v])
        items = [Static(i) if not isinstance(i, (Tile, Static, TArray, ShapeOf)) else i
                 for i in items]
        if len(items) != arr.type.rank:
            raise self.error(KernelTypeError, node,
                             f"`{arr.name}` has rank {arr.type.rank}: its tile index has "
                             f"{arr.type.rank} item{'s' if arr.type.rank != 1 else ''}, not "
                             f"{len(items)}")
        for i in items:
            ok = (isinstance(i, Static) and isinstance(i.obj, int) and not isinstance(i.obj, bool)
                  ) or (isinstance(i, Tile) and i.ndim == 0 and i.dtype.is_int)
            if not ok:
                raise self.error(KernelTypeError, node,
                                 f"a tile index holds integer scalars, not {describe(i)}")
        return items

    def _index_i64(self, items: list[Any], node: ast.AST) -> list[Tile]:
        """The items of a tile index as i64 scalars (a constant beyond i64, `2**64`, is
        an error, as it is in a SIMT kernel's index)."""
        return [self.as_tile(i, node, T.i64) if isinstance(i, Static) else
                self.t.cast(i, T.i64) for i in items]

    def _tile_shape(self, arr: TArray, v: Any, node: ast.AST) -> tuple[int, ...]:
        shape = self.static_shape(v, node, "the tile shape")
        if shape == ():  # one element: the tile of shape (1, ..., 1) at the index
            return (1,) * arr.type.rank
        if len(shape) != arr.type.rank:
            raise self.error(KernelTypeError, node,
                             f"`{arr.name}` has rank {arr.type.rank}; the tile shape "
                             f"{shape_text(shape)} has {len(shape)} dimensions")
        return shape

    def _order(self, node: ast.Call, rank: int) -> tuple[int, ...] | None:
        """`order=`: for each tile dimension, the array dimension it walks ("C" is the
        identity, "F" the reverse); None for the identity."""
        v, at = self.keyword(node, "order")
        if v is None:
            return None
        obj = v.obj if isinstance(v, Static) else None
        if obj == "C":
            return None
        if obj == "F":
            obj = tuple(reversed(range(rank)))
        if not (isinstance(obj, tuple) and sorted(obj) == list(range(rank))):
            raise self.error(KernelTypeError, at,
                             f"`order=` is \"C\", \"F\" or a permutation of "
                             f"{tuple(range(rank))}, not {describe(v)}",
                             hint="order=(1, 0) reads a tile whose rows are the array's columns")
        return None if obj == tuple(range(rank)) else obj

    def call_load(self, node: ast.Call) -> Tile:
        """`tile.load(arr, index, shape, padding=0, order=None)`. With `order`, tile
        dimension k walks array dimension order[k] (`index` and `shape` are the tile's):
        the tile is loaded as the array lays it out (vector accesses along its rows) and
        permuted through shared memory."""
        args = self.positional(node, (3, 4), "tile.load(arr, index, shape, padding=0)",
                               ("padding", "order"))
        arr = self._array_arg(args[0], node.args[0], "tile.load")
        items = self._index(arr, args[1], node.args[1])
        shape = self._tile_shape(arr, args[2], node.args[2])
        scalar = isinstance(args[2], Static) and args[2].obj == ()
        order = None if scalar else self._order(node, arr.type.rank)
        nodes = self._item_nodes(node.args[1], arr.type.rank)
        if order is not None:
            items, shape = _to_array_order(items, order), _to_array_order(shape, order)
            nodes = _to_array_order(nodes, order)
        drop = len(arr.fixed)  # a view's fixed dimensions: extent 1, not in the tile
        arr, items, nodes, shape, in_array = _in_parameter(arr, items, nodes, shape, order)
        if arr.type.access == "disjoint":
            self.check_disjoint(arr, items, nodes, shape, node, node.args[1], "read",
                                in_array)
        elif arr.type.access == "atomic":
            raise self.error(SafetyError, node.args[0],
                             f"`{arr.name}` is an AtomicSlice: it is read and written only "
                             "through atomics", hint="use `tile.atomic_add(...)` and the "
                             "other tile.atomic_* operations, which return the old values")
        pad_v, pad_node = self.keyword(node, "padding", 3)
        dt = arr.dtype
        if pad_v is None:
            pad = self.t.full((), False if dt.is_bool else 0, dt)
        elif isinstance(pad_v, Static) and isinstance(pad_v.obj, (bool, int, float)):
            reals = dt.is_float or dt.is_fp8  # float paddings are theirs (as_tile checks)
            if isinstance(pad_v.obj, float) and not reals and pad_v.obj == pad_v.obj \
                    and pad_v.obj not in (float("inf"), float("-inf")) \
                    and pad_v.obj != int(pad_v.obj):
                raise self.error(KernelTypeError, pad_node,
                                 f"the padding {pad_v.obj!r} is not a {dt.name}")
            if not reals and isinstance(pad_v.obj, float):
                raise self.error(KernelTypeError, pad_node,
                                 f"`{arr.name}` holds {dt.name}: the padding is an integer")
            pad = self.as_tile(pad_v, pad_node, dt)
        elif isinstance(pad_v, Tile) and pad_v.ndim == 0:
            pad = pad_v  # converted to the array's dtype as the load is lowered
        else:
            raise self.error(KernelTypeError, pad_node, f"the padding is a number or a "
                             f"scalar, not {describe(pad_v)}")
        t = self.t.load(arr.ssa, arr.type.vectors, dt, pad, self._index_i64(items, node.args[1]),
                        shape, self.load_pipe, self.load_live, drop,
                        lone=self.loop_depth == 0 and self.load_pipe is None)
        if scalar:  # `tile.load(arr, index, ())`: the element as a 0-d tile
            return self.t.squeeze(t)
        if order is None:
            return t
        if self.load_pipe is not None:
            # issued ahead by a pipelined loop: it carries the tile as the array lays it
            # out and permutes it where the body binds it, so that a product's operand
            # is still `permute(load)` there (folded on wgmma, tile/layouts.py)
            self.piped_order = order
            return t
        return self.t.permute(t, order)

    def call_store(self, node: ast.Call) -> None:
        args = self.positional(node, 3, "tile.store(arr, index, t)", ("order",))
        arr = self._array_arg(args[0], node.args[0], "tile.store")
        items = self._index(arr, args[1], node.args[1])
        value = args[2]
        order = self._order(node, arr.type.rank)
        if isinstance(value, Static) and isinstance(value.obj, (bool, int, float)):
            value = self.as_tile(value, node.args[2], arr.dtype)  # one element
        if isinstance(value, Tile) and value.ndim == 0 and arr.type.rank:
            # a scalar: converted to the array's dtype (as a number is), then the tile of
            # shape (1, ..., 1) at the index, written by one thread
            if value.dtype != arr.dtype:
                value = self.cast(value, arr.dtype)
            rank = arr.type.rank
            value, order = self.t.expand(value, tuple(range(rank)), (1,) * rank), None
        if not isinstance(value, Tile):
            raise self.error(KernelTypeError, node.args[2], f"tile.store writes a tile, not "
                             f"{describe(value)}", hint="make one with `tile.full(shape, v)`")
        if value.ndim != arr.type.rank:
            raise self.error(KernelTypeError, node.args[2],
                             f"`{arr.name}` has rank {arr.type.rank}; cannot store "
                             f"{value.describe()} (rank {value.ndim})",
                             hint="add or remove axes: `x[None, :]`, or reduce with keepdims")
        access = arr.type.access
        if access == "slice":
            raise self.error(SafetyError, node.args[0],
                             f"`{arr.name}` is a Slice: kernels only read it",
                             hint="declare it DisjointSlice[...] (a block writes its own tiles)")
        if access == "atomic":
            raise self.error(SafetyError, node.args[0],
                             f"`{arr.name}` is an AtomicSlice: it is read and written only "
                             "through atomics", hint="use `tile.atomic_xchg(...)`, "
                             "`tile.atomic_add(...)` and the other tile.atomic_* operations")
        if access == "raw" and self.unsafe_depth == 0:
            raise self.error(SafetyError, node,
                             f"`{arr.name}` is a RawSlice: storing to it needs "
                             "`with ox.unsafe():`",
                             hint="declare it DisjointSlice[...] and store at the block's "
                                  "TileIndex, or wrap the store in `with ox.unsafe():`")
        nodes = self._item_nodes(node.args[1], arr.type.rank)
        if order is not None:  # the tile in the array's dimension order, then stored
            items, nodes = _to_array_order(items, order), _to_array_order(nodes, order)
            inverse = tuple(order.index(d) for d in range(len(order)))
            value = self.t.permute(value, inverse)
        drop = len(arr.fixed)
        arr, items, nodes, shape, in_array = _in_parameter(arr, items, nodes, value.shape,
                                                           order)
        if access == "disjoint":
            self.check_disjoint(arr, items, nodes, shape, node, node.args[1], "written",
                                in_array)
        if value.dtype != arr.dtype:
            raise self.error(KernelTypeError, node.args[2],
                             f"`{arr.name}` holds {arr.dtype.name}; cannot store "
                             f"{value.describe()}",
                             hint=f"convert: `.astype({arr.dtype.name})`")
        self.t.store(arr.ssa, arr.type.vectors, value, self._index_i64(items, node.args[1]),
                     drop)


def _in_parameter(arr: TArray, items: list[Any], nodes: list[ast.AST],
                  shape: tuple[int, ...], order: tuple[int, ...] | None
                  ) -> tuple[TArray, list[Any], list[ast.AST], tuple[int, ...],
                             tuple[int, ...] | None]:
    """An access of view `arr` (values.TArray) as the parameter's own: its fixed indices
    first, with extent 1, and `order` over the parameter's dimensions. An array itself
    comes back as it is."""
    k = len(arr.fixed)
    if not k:
        return arr, items, nodes, shape, order
    whole = TArray(arr.ssa, replace(arr.type, rank=arr.base_rank), arr.name)
    full_order = None if order is None else (*range(k), *(d + k for d in order))
    return (whole, [*arr.fixed, *items], [*arr.fixed_nodes, *nodes], (1,) * k + shape,
            full_order)


def _to_array_order(items: Any, order: tuple[int, ...]) -> Any:
    """Per-tile-dimension `items` rearranged per array dimension: tile dimension k walks
    array dimension order[k]."""
    out: list[Any] = [None] * len(order)
    for k, d in enumerate(order):
        out[d] = items[k]
    return type(items)(out) if isinstance(items, tuple) else out
