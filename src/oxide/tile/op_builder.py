"""Making the tile dialect's ops (`ir/tile_ops.py`) for the tile frontend.

One method per op: it takes frontend values (`Tile`, SSA values, Python constants),
emits the op at the builder's insertion point, records it for the passes
(`TileBuilder.tile_op`, with the span of the statement being lowered) and returns the
result as a `Tile`. Shapes and dtypes are the frontend's to check; layouts are left to
`tile/layouts.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xdsl.ir import SSAValue

from oxide import types as T
from oxide.errors import Span
from oxide.ir.tile_ops import TileType, TileVarType, make
from oxide.ir.types import ir_type
from oxide.tile.builder import TileBuilder
from oxide.tile.values import Tile


class TileOps:
    """Builds tile ops into one kernel (see the module docstring)."""

    def __init__(self, b: TileBuilder, span: Callable[[], Span | None]) -> None:
        self.b = b
        self.span = span  # the span of the statement being lowered

    def make(self, op_kind: str, operands: Sequence[Tile | SSAValue],
             result_shape: tuple[int, ...], dt: T.DType, **params: Any) -> Tile:
        args = [x.ssa if isinstance(x, Tile) else x for x in operands]
        op = make(op_kind, args, [TileType.of(result_shape, dt)], **params)
        self.b.tile_op(op, self.span())
        return Tile(dt, result_shape, op.results[0])

    # -- making tiles -----------------------------------------------------------------

    def full(self, shape: tuple[int, ...], value: int | float | bool, dt: T.DType,
             layout: str = "blocked") -> Tile:
        """`layout='mma'`: in the tensor-core accumulator layout where the shape has one."""
        return self.make("full", [], shape, dt, value=value, dtype=dt,
                         layout=None if layout == "blocked" else layout)

    def scalar(self, ssa: SSAValue, dt: T.DType, divisor: int | None = None) -> Tile:
        """A scalar SIMT value as a 0-d tile; `divisor`: a power of two it is a multiple of."""
        return self.make("from_scalar", [ssa], (), dt, dtype=dt, divisor=divisor)

    def extract(self, t: Tile) -> SSAValue:
        """A 0-d tile's value, for scalar SIMT ops."""
        assert not t.shape, "only 0-d tiles are scalars"
        op = make("extract", [t.ssa], [ir_type(t.dtype)])
        self.b.tile_op(op, self.span())
        return op.results[0]

    def splat(self, scalar: Tile, shape: tuple[int, ...]) -> Tile:
        return self.make("splat", [scalar], shape, scalar.dtype)

    def arange(self, n: int, dt: T.DType) -> Tile:
        return self.make("arange", [], (n,), dt, dtype=dt)

    def index(self, like: Tile, axis: int | None) -> Tile:
        return self.make("index", [like], like.shape, T.i32, axis=axis)

    # -- elementwise ------------------------------------------------------------------

    def cast(self, t: Tile, dt: T.DType) -> Tile:
        if dt == t.dtype:
            return Tile(dt, t.shape, t.ssa)
        return self.make("cast", [t], t.shape, dt, dtype=dt)

    def binary(self, kind: str, a: Tile, b: Tile, site: int | None = None) -> Tile:
        return self.make("binary", [a, b], a.shape, a.dtype, kind=kind, site=site)

    def compare(self, pred: str, a: Tile, b: Tile) -> Tile:
        return self.make("compare", [a, b], a.shape, T.bool_, pred=pred)

    def narrow_compare(self, pred: str, x: Tile, n: Tile) -> Tile:
        return self.make("narrow_compare", [x, n], x.shape, T.bool_, pred=pred)

    def unary(self, kind: str, a: Tile) -> Tile:
        return self.make("unary", [a], a.shape, a.dtype, kind=kind)

    def math(self, fn: str, operands: Sequence[Tile], dt: T.DType) -> Tile:
        """ox.math's `fn` elementwise on operands of one shape, layout and dtype (the type
        it computes in); `dt` is the result's (bool for the predicates)."""
        return self.make("math", list(operands), operands[0].shape, dt, fn=fn)

    def where(self, c: Tile, a: Tile, b: Tile) -> Tile:
        return self.make("where", [c, a, b], a.shape, a.dtype)

    # -- data movement ----------------------------------------------------------------

    def broadcast(self, t: Tile, shape: tuple[int, ...], *candidates: Tile) -> Tile:
        """`t` broadcast to `shape`, in the layout of the first candidate of that shape."""
        return self.make("broadcast", [t, *candidates], shape, t.dtype, shape=shape)

    def convert(self, t: Tile, to: str) -> Tile:
        return self.make("convert", [t], t.shape, t.dtype, to=to)

    def expand(self, t: Tile, axes: tuple[int, ...], shape: tuple[int, ...]) -> Tile:
        return self.make("expand", [t], shape, t.dtype, axes=axes)

    def squeeze(self, t: Tile) -> Tile:
        """`t` (every extent 1) as a 0-d tile: the element every thread holds."""
        return self.make("squeeze", [t], (), t.dtype)

    def permute(self, t: Tile, axes: tuple[int, ...]) -> Tile:
        return self.make("permute", [t], tuple(t.shape[k] for k in axes), t.dtype, axes=axes)

    def reshape(self, t: Tile, shape: tuple[int, ...]) -> Tile:
        return self.make("reshape", [t], shape, t.dtype, shape=shape)

    def slices(self, x: Tile, index: Sequence[Tile], starts: Sequence[tuple[int, ...]],
               subs: Sequence[tuple[int, ...]], drop: tuple[int, ...] = ()) -> list[Tile]:
        """Sub-tiles of `x` (`tile.slices` in ir/tile_ops.py); `index`: 0-d i32 tiles."""
        shapes = [tuple(n for d, n in enumerate(sub) if d not in drop) for sub in subs]
        op = make("slices", [x.ssa, *(i.ssa for i in index)],
                  [TileType.of(s, x.dtype) for s in shapes], starts=tuple(starts),
                  subs=tuple(subs), drop=drop or None)
        self.b.tile_op(op, self.span())
        return [Tile(x.dtype, s, r) for s, r in zip(shapes, op.results, strict=True)]

    def cat(self, parts: Sequence[Tile], axis: int) -> Tile:
        shape = list(parts[0].shape)
        shape[axis] = sum(p.shape[axis] for p in parts)
        return self.make("cat", list(parts), tuple(shape), parts[0].dtype, axis=axis)

    # -- reductions -------------------------------------------------------------------

    def reduce(self, kind: str, t: Tile, axis: int, keepdims: bool) -> Tile:
        return self.make("reduce", [t], _reduced(t.shape, axis, keepdims), t.dtype,
                         kind=kind, axis=axis, keepdims=keepdims)

    def arg_reduce(self, kind: str, x: Tile, index: Tile, axis: int, keepdims: bool
                   ) -> tuple[Tile, Tile]:
        shape = _reduced(x.shape, axis, keepdims)
        op = make("arg_reduce", [x.ssa, index.ssa],
                  [TileType.of(shape, x.dtype), TileType.of(shape, index.dtype)],
                  kind=kind, axis=axis, keepdims=keepdims)
        self.b.tile_op(op, self.span())
        return Tile(x.dtype, shape, op.results[0]), Tile(index.dtype, shape, op.results[1])

    def cumsum(self, t: Tile, axis: int) -> Tile:
        return self.make("cumsum", [t], t.shape, t.dtype, axis=axis)

    def mma(self, a: Tile, b: Tile, acc: Tile) -> Tile:
        return self.make("mma", [a, b, acc], acc.shape, acc.dtype)

    # -- memory -----------------------------------------------------------------------

    def load(self, array: SSAValue, vectors: bool | None, dt: T.DType, padding: Tile,
             index: Sequence[Tile], shape: tuple[int, ...],
             pipe: tuple[int, int, bool, tuple[int, ...]] | None = None,
             live: Tile | None = None, drop: int = 0, lone: bool = False) -> Tile:
        """`pipe`: (which pipelined load statement, iterations ahead, whether it is the
        first load of the loop's prologue, the pipelined loops it is in: its own last),
        for tile/operand_rings.py; `live`: whether
        the iteration it is issued for runs (a 0-d bool), the op's last operand (`live_of`);
        `drop`: the array's leading dimensions of extent 1 the tile leaves out (a view's
        fixed indices), so the tile is `shape[drop:]`; `lone`: issued once, in none of the
        kernel's loops (tile/operand_rings.py may give it a resident ring)."""
        extra = [] if live is None else [live.ssa]
        return self.make("load", [array, padding, *index, *extra], shape[drop:], dt,
                         shape=shape, vectors=vectors, pipe=pipe, live=live is not None,
                         drop=drop or None, lone=lone or None)

    def store(self, array: SSAValue, vectors: bool | None, value: Tile,
              index: Sequence[Tile], drop: int = 0) -> None:
        """`drop`: the array's leading dimensions of extent 1 the tile leaves out."""
        op = make("store", [array, value.ssa, *(i.ssa for i in index)], [], vectors=vectors,
                  drop=drop or None)
        self.b.tile_op(op, self.span())

    def atomic(self, array: SSAValue, kind: str, sem: str, scope: str, values: Sequence[Tile],
               index: Sequence[Tile], site: int, drop: int = 0,
               vectors: bool | None = None) -> Tile:
        """`kind` on the tile of `values[-1]`'s shape at `index` (values: the compare
        first for cas, in one layout); the old values. `drop`: the array's leading
        dimensions of extent 1 the tile leaves out (a view's), as for `load`; `vectors`:
        whether the array's rows take 16-byte vectors, as for `store` (a TMA reduction
        needs them, tile/tma_stores.py)."""
        value = values[-1]
        return self.make("atomic", [array, *values, *index], value.shape, value.dtype,
                         kind=kind, sem=sem, scope=scope, values=len(values), site=site,
                         drop=drop or None, vectors=vectors)

    # -- variables (an `if`'s merged names, a loop's carried tiles) ---------------------

    def var(self, shape: tuple[int, ...], dt: T.DType) -> SSAValue:
        op = make("var", [], [TileVarType(TileType.of(shape, dt))])
        self.b.tile_op(op, self.span(), declare=True)
        return op.results[0]

    def var_write(self, var: SSAValue, t: Tile) -> None:
        self.b.tile_op(make("var_write", [var, t.ssa], []), self.span())

    def var_read(self, var: SSAValue, shape: tuple[int, ...], dt: T.DType) -> Tile:
        return self.make("var_read", [var], shape, dt)


def _reduced(shape: tuple[int, ...], axis: int, keepdims: bool) -> tuple[int, ...]:
    return (*shape[:axis], 1, *shape[axis + 1:]) if keepdims else shape[:axis] + shape[axis + 1:]
