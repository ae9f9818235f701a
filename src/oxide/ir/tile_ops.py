"""The `tile` dialect: a tile kernel as whole-tile operations, before layouts and threads.

The tile frontend (`tile/frontend.py`) builds these ops; their values are tiles of a
static shape and dtype (`!tile.tile`), in the same control-flow graph as the kernel's
scalar `oxide.*` ops (loop counters, branches, array extents). Passes then run in
order (`tile/pipeline.py`):

- `tile/layouts.py` gives every tile value its layout (which thread holds which
  element, `tile/layout.py`) and inserts `tile.convert` where two layouts must agree;
- `tile/ordering.py` inserts `tile.barrier` where two accesses of one array hand an
  element between threads;
- `tile/to_simt.py` replaces each tile op by the SIMT ops of one thread
  (`tile/lower.py`), so codegen, the CPU target and the runtime are the SIMT kernel's.

Every op has the same three parts: its operands, its results, and `params`, a
`StaticAttr` of the compile-time values it needs (`kind`, `axis`, `dtype`, ...). The
table `TILE_OPS` names each op and says what it computes.
"""

from __future__ import annotations

import functools
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, Data, Dialect, ParametrizedAttribute, SSAValue, TypeAttribute
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    prop_def,
    var_operand_def,
    var_result_def,
)

from oxide import types as T
from oxide.ir.ops import build
from oxide.tile.layout import Layout


@irdl_attr_definition
class StaticAttr(Data[tuple]):  # type: ignore[type-arg]
    """Compile-time parameters of a tile op: sorted (name, value) pairs of hashable
    Python values (ints, strings, dtypes, layouts, tuples)."""

    name = "tile.static"

    @classmethod
    def parse_parameter(cls, parser: Any) -> tuple:  # type: ignore[type-arg]
        raise NotImplementedError("the tile dialect is built by the tile frontend, not parsed")

    def print_parameter(self, printer: Any) -> None:
        printer.print_string("<" + ", ".join(f"{k}={_text(v)}" for k, v in self.data) + ">")


@irdl_attr_definition
class LayoutAttr(Data[Layout | None]):
    """A tile value's layout; None until `tile/layouts.py` has run."""

    name = "tile.layout"

    @classmethod
    def parse_parameter(cls, parser: Any) -> Layout | None:
        raise NotImplementedError("the tile dialect is built by the tile frontend, not parsed")

    def print_parameter(self, printer: Any) -> None:
        printer.print_string("<?>" if self.data is None else _layout_text(self.data))


@irdl_attr_definition
class TileType(ParametrizedAttribute, TypeAttribute):
    """`!tile.tile<[128, 64], "f32", layout>`: an immutable tile (a 0-d tile is a scalar
    every thread of the block holds alike)."""

    name = "tile.tile"
    shape: ArrayAttr[IntAttr]
    element: StringAttr
    layout: LayoutAttr

    @staticmethod
    def of(shape: tuple[int, ...], dt: T.DType, layout: Layout | None = None) -> TileType:
        return _tile_type(tuple(shape), dt.name, layout)

    def print_parameters(self, printer: Any) -> None:
        """`<1x128xf32, <layout>>`: the shape, dtype and layout (`<?>` before the pass)."""
        layout = self.layout.data
        printer.print_string("<" + "".join(f"{n}x" for n in self.dims) + self.element.data
                             + ", " + ("<?>" if layout is None else _layout_text(layout)) + ">")

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(n.data for n in self.shape.data)

    @property
    def dtype(self) -> T.DType:
        return T.SCALARS[self.element.data]


@functools.lru_cache(maxsize=4096)
def _tile_type(shape: tuple[int, ...], dtype: str, layout: Layout | None) -> TileType:
    """One TileType per (shape, dtype, layout), shared (attributes are immutable): a
    kernel's compile asks for thousands, each five attributes to build and verify."""
    return TileType(ArrayAttr([IntAttr(n) for n in shape]), StringAttr(dtype),
                    LayoutAttr(layout))


@irdl_attr_definition
class TileVarType(ParametrizedAttribute, TypeAttribute):
    """A mutable tile variable (`tile.var`): what an `if` merges and a loop carries."""

    name = "tile.var"
    tile: TileType


class TileOperation(IRDLOperation):
    """What every tile op shares: operands, results and `params`."""

    def param(self, key: str, default: Any = None) -> Any:
        for k, v in self.params.data:  # type: ignore[attr-defined]
            if k == key:
                return v
        return default

    def set_param(self, key: str, value: Any) -> None:
        """Sets (or replaces) one param: what a pass records on the op for later ones."""
        params = dict(self.params.data)  # type: ignore[attr-defined]
        params[key] = value
        self.properties["params"] = StaticAttr(tuple(sorted(params.items())))


# name -> what the op computes. Operands first, then `params` in brackets.
TILE_OPS: dict[str, str] = {
    "full": "a tile of one constant [value, dtype, layout: 'blocked' | 'mma' | 'scalar']",
    "splat": "(scalar) the 0-d tile in every element [shape]",
    "arange": "0, 1, ..., n - 1 [dtype]",
    "index": "(like) each element's coordinate along `axis` of `like`, or its row-major "
             "position when axis is None [axis]",
    "cast": "(x) each element converted (NumPy's astype) [dtype]",
    "binary": "(a, b) elementwise `kind`; operands of one shape and dtype [kind, site]",
    "compare": "(a, b) elementwise `pred`, a bool tile [pred]",
    "narrow_compare": "(x, n) `x pred n` of a narrow signed int tile and a wider signed "
                      "scalar, computed in x's type [pred]",
    "unary": "(a) elementwise `kind` [kind]",
    "math": "(*operands) ox.math's `fn` elementwise, operands of one layout and dtype [fn]",
    "where": "(cond, a, b) elementwise select",
    "broadcast": "(x, *candidates) x broadcast to `shape`; its layout is the first "
                 "candidate's of that shape, else the default [shape]",
    "convert": "(x) x in another layout [to: 'blocked' | 'mma' | a Layout]",
    "expand": "(x) new dimensions of extent 1 at `axes` (`x[:, None]`) [axes]",
    "squeeze": "(x) a tile of extents 1 as a 0-d tile (the element each thread holds)",
    "permute": "(x) dimensions reordered: result dimension k is x's axes[k] [axes]",
    "reshape": "(x) the same elements in row-major order, another shape [shape]",
    "slices": "(x, *index) sub-tiles: result r is x[starts[r] + index * subs[r] + c] for c "
              "in the full-rank shape subs[r], the dimensions `drop` left out; `index` (0-d "
              "i32 tiles, one per dimension, or none) taken modulo the sub-tiles along each "
              "[starts, subs, drop]",
    "cat": "(*parts) the parts side by side along `axis` [axis]",
    "reduce": "(x) `kind` along `axis` [kind, axis, keepdims]",
    "arg_reduce": "(x, index) the `kind` of x along `axis` and the index where it is "
                  "first found: two results [kind, axis, keepdims]",
    "cumsum": "(x) inclusive prefix sums along `axis` [axis]",
    "load": "(array, padding, *index) the tile at a tile index; elements outside the "
            "array read as padding [shape, vectors]",
    "store": "(array, value, *index) the owned elements inside the array written [vectors]",
    "atomic": "(array, *values, *index) `kind` on each owned element inside the array of "
              "the tile at a tile index (values: compare and value for cas, else value); "
              "the old values, 0 outside [kind, sem, scope, values, site]",
    "mma": "(a, b, acc) a @ b + acc on tensor cores where the shapes allow",
    "barrier": "a block barrier: orders the block's global accesses before it against "
               "those after it (tile/ordering.py places it)",
    "schedule": "a point where the consumer warp groups take turns at the tensor cores "
                "(tile/pingpong.py): before a loop (`enter`) or after it (`leave`) [step]",
    "from_scalar": "(scalar) a scalar SIMT value as a 0-d tile [dtype, divisor]",
    "extract": "(x) a 0-d tile's value, for the kernel's scalar SIMT ops",
    "var": "a tile variable (declared in the entry block)",
    "var_write": "(var, x) x into the variable",
    "var_read": "(var) the variable's tile",
}


def _define(short: str, doc: str) -> type[TileOperation]:
    """One op class of the dialect: `tile.<short>`, as `TILE_OPS` describes."""
    fields = {"name": f"tile.{short}", "__doc__": doc, "__module__": __name__,
              "args": var_operand_def(), "outs": var_result_def(),
              "params": prop_def(StaticAttr)}
    cls = type("".join(p.capitalize() for p in short.split("_")) + "Op", (TileOperation,),
               fields)
    return irdl_op_definition(cls)


OP_CLASSES: dict[str, type[TileOperation]] = {k: _define(k, v) for k, v in TILE_OPS.items()}

Tile = Dialect("tile", list(OP_CLASSES.values()),
               [StaticAttr, LayoutAttr, TileType, TileVarType])


def make(op_kind: str, operands: list[SSAValue], result_types: list[Attribute],
         **params: Any) -> TileOperation:
    """A `tile.<op_kind>` op (params with value None are left out)."""
    items = tuple(sorted((k, v) for k, v in params.items() if v is not None))
    cls = OP_CLASSES[op_kind]
    op = cls.__new__(cls)
    build(op, operands, result_types, {"params": StaticAttr(items)})  # one var group each
    return op


def kind_of(op: Any) -> str | None:
    """`binary` for a `tile.binary` op; None for any other op."""
    if isinstance(op, TileOperation):
        return op.name[len("tile."):]
    return None


def _text(v: Any) -> str:
    if isinstance(v, T.DType):
        return v.name
    if isinstance(v, Layout):
        return _layout_text(v)
    return repr(v)


def _layout_text(layout: Layout) -> str:
    """Per dimension: elements per thread, lanes (from lane bit @), warps (from warp bit
    @), and the warp's own repetitions where there are any (the mma accumulator)."""
    dims = "; ".join(f"{m.spt} x {m.tpw}@{m.lane_shift} x {m.wpc}@{m.warp_shift}"
                     + (f" x inner {m.inner}" if m.inner > 1 else "") for m in layout.dims)
    return f"<{dims}>"
