"""Calls of the `tile.*` operations in a tile kernel: typing, diagnostics, and the
tile op each becomes (mixed into `TileLowering`).

Creation (`zeros`, `full`, `arange`), indices (`bid`, `num_blocks`, `cdiv`,
`num_tiles`), math, `where`, reductions and scans, shape changes (`broadcast_to`,
`reshape`, `permute`, the `astype`/`reshape`/`permute` methods), and matrix products
(`tile.mma`, the `@` operator; lowered by `tile/mma_lower.py`).
"""

from __future__ import annotations

import ast
from typing import Any

from oxide import types as T
from oxide.errors import KernelSyntaxError, KernelTypeError, UnsupportedFeatureError
from oxide.tile.elementwise import TILE_ELEMENTWISE
from oxide.tile.lower import reduce_dtype
from oxide.tile.mma_lower import accumulate_dtype
from oxide.tile.uniform import uniform_key
from oxide.tile.values import (
    Method,
    Static,
    TArray,
    Tile,
    Witness,
    describe,
    keeps_witness,
    shape_text,
)

_REDUCE = {"sum": "add", "max": "max", "min": "min"}


class TileCallsMixin:
    """The `call_<name>` methods for `tile.<name>(...)`."""

    def call_tile(self, name: str, node: ast.Call) -> Any:
        """`tile.<name>(...)`: the math functions (tile/elementwise.py) and reductions share
        one lowering each;
        every other function has its own `call_<name>`."""
        if name in TILE_ELEMENTWISE:
            return self.call_tile_math(name, node)
        if name in _REDUCE:
            return self._reduce(name, node)
        if name in ("argmax", "argmin"):
            return self._argreduce(name[3:], node)
        if name.startswith("atomic_"):
            return self.call_atomic(name[len("atomic_"):], node)
        return getattr(self, f"call_{name}")(node)

    def _axis(self, v: Any, node: ast.AST, what: str) -> int:
        if not (isinstance(v, Static) and isinstance(v.obj, int) and not isinstance(v.obj, bool)
                and 0 <= v.obj <= 2):
            raise self.error(KernelTypeError, node, f"{what} takes a grid axis: 0, 1 or 2, "
                             "as a constant", hint="e.g. `tile.bid(0)`")
        return v.obj

    def call_bid(self, node: ast.Call) -> Tile:
        (a,) = self.positional(node, 1, "tile.bid(axis)")
        return self.block_index(self._axis(a, node.args[0], "tile.bid"))

    def call_tiles(self, node: ast.Call) -> Tile:
        raise self.error(KernelSyntaxError, node, "`tile.tiles(n)` is the iterable of a "
                         "persistent loop", hint="write `for t in tile.tiles(n):`")

    def call_grouped_bid(self, node: ast.Call) -> tuple[Tile, Tile]:
        """`tile.grouped_bid(num_m, num_n, group)`: `tile.grouped(tile.bid(0), ...)`."""
        args = self.positional(node, 3, "tile.grouped_bid(num_m, num_n, group)")
        return self._grouped(self.block_index(0), args, node.args)

    def call_grouped(self, node: ast.Call) -> tuple[Tile, Tile]:
        """`tile.grouped(t, num_m, num_n, group)`: the (row, column) tile index of linear
        tile `t` in grouped order (Triton's: `group` tile rows take turns on each column,
        so the column's tiles stay in L2).

        For t >= 0 and any one num_m, num_n and group, no two values of `t` share a pair:
        `row // group` gives back t's group and then `row % group` and `col` its place in
        the group (divisors are clamped to at least 1, `group * num_n` to what its type
        holds, which every t below it divides alike; a `t` past num_m * num_n gets a row
        or column past num_m/num_n, whose tiles stores clip). So where `t` is a TileIndex
        (`tile.bid(0)`, or the variable of `for t in tile.tiles(n)`) and the sizes are
        the same in every block (`tile/uniform.py`), the pair together is one: a
        DisjointSlice is indexed with both. Sizes that can differ between blocks give
        two blocks two different functions, whose pairs can meet: plain integers then."""
        args = self.positional(node, 4, "tile.grouped(t, num_m, num_n, group)")
        t = self.as_tile(args[0], node.args[0], T.i32)
        if t.ndim or not t.dtype.is_int:
            raise self.error(KernelTypeError, node.args[0], f"tile.grouped takes an integer "
                             f"scalar tile index, not {t.describe()}")
        return self._grouped(t, args[1:], node.args[1:])

    def _grouped(self, pid: Tile, args: list[Any], nodes: list[ast.expr]) -> tuple[Tile, Tile]:
        num_m, num_n, group = (self.as_tile(v, a, T.i32) for v, a in zip(args, nodes,
                                                                          strict=True))
        for t, a in zip((num_m, num_n, group), nodes, strict=True):
            if t.ndim or not t.dtype.is_int:
                raise self.error(KernelTypeError, a, f"the sizes of the grouped order are "
                                 f"integer scalars, not {t.describe()}")
        dt = T.i64 if T.i64 in (pid.dtype, num_m.dtype, num_n.dtype, group.dtype) else T.i32
        one = self.t.full((), 1, dt)

        def op(kind: str, a: Tile, b: Tile) -> Tile:
            return self.t.binary(kind, self.t.cast(a, dt), self.t.cast(b, dt))

        g, n = op("max", group, one), op("max", num_n, one)
        # g * n where it fits dt, else dt's largest value: above every t, as the product is
        top = self.t.full((), (1 << (dt.bits - 1)) - 1, dt)
        fits = self.t.compare("le", g, op("floordiv", top, n))
        per_group = self.t.where(fits, op("mul", g, n), top)
        first = op("mul", op("floordiv", pid, per_group), g)
        size = op("max", op("min", op("sub", num_m, first), g), one)
        r = op("mod", pid, per_group)
        row = op("add", first, op("mod", r, size))
        col = op("floordiv", r, size)
        w = pid.witness
        if w is None or w.part is not None:
            return row, col  # a plain integer in, plain integers out
        keys = [uniform_key(x.ssa, self.b.entry) for x in (num_m, num_n, group)]
        if None in keys:
            at = nodes[keys.index(None)]
            why = (f"`{self.text(at)}` is not launch-uniform: it can differ between blocks "
                   "(read from data, or changing in a loop)")
            for x in (row, col):
                self.stores.notes[x.ssa] = (why, at)
            return row, col
        sizes = tuple(keys)
        return (self.witness(row, Witness(w.axis, 0, sizes)),
                self.witness(col, Witness(w.axis, 1, sizes)))

    def cast(self, t: Tile, dt: T.DType) -> Tile:
        """`t.astype(dt)`, `dt(t)`: a TileIndex stays one where the cast keeps its values
        (`values.keeps_witness`: to an integer type at least as wide)."""
        out = self.t.cast(t, dt)
        if t.witness is not None and keeps_witness(t.dtype, dt):
            return self.witness(out, t.witness)
        return out

    def call_num_blocks(self, node: ast.Call) -> Tile:
        (a,) = self.positional(node, 1, "tile.num_blocks(axis)")
        return self.scalar_tile(self.grid_extent(self._axis(a, node.args[0], "tile.num_blocks")),
                                T.i32)

    def _cdiv(self, a: Any, b: Any, node: ast.AST) -> Any:
        if isinstance(a, Static) and isinstance(b, Static):
            if not all(isinstance(x.obj, int) for x in (a, b)) or b.obj == 0:
                raise self.error(KernelTypeError, node, "tile.cdiv takes integers, the "
                                 "divisor non-zero")
            return Static(-(-a.obj // b.obj))
        for v in (a, b):
            if isinstance(v, Tile) and (v.ndim or not v.dtype.is_int):
                raise self.error(KernelTypeError, node, f"tile.cdiv takes integer scalars, not "
                                 f"{describe(v)}")
        num = self.binop(ast.Add(), a, self.binop(ast.Sub(), b, Static(1), node), node)
        return self.binop(ast.FloorDiv(), num, b, node)

    def call_cdiv(self, node: ast.Call) -> Any:
        a, b = self.positional(node, 2, "tile.cdiv(a, b)")
        return self._cdiv(a, b, node)

    def call_num_tiles(self, node: ast.Call) -> Any:
        arr, axis, size = self.positional(node, 3, "tile.num_tiles(arr, axis, size)")
        if not isinstance(arr, TArray):
            raise self.error(KernelTypeError, node.args[0], f"tile.num_tiles takes an array, "
                             f"not {describe(arr)}")
        rank = arr.type.rank
        if not (isinstance(axis, Static) and isinstance(axis.obj, int) and 0 <= axis.obj < rank):
            raise self.error(KernelTypeError, node.args[1], f"the axis of `{arr.name}` is a "
                             f"constant from 0 to {rank - 1}")
        self.static_shape(size, node.args[2], "the tile size")
        return self._cdiv(self.extent(arr, axis.obj), size, node)

    def call_zeros(self, node: ast.Call) -> Tile:
        args = self.positional(node, (1, 2), "tile.zeros(shape, dtype=f32)", ("dtype",))
        dt = self._dtype_arg(node, 1) or T.f32
        shape = self.static_shape(args[0], node.args[0], "the shape of tile.zeros")
        return self.t.full(shape, 0, dt)

    def call_full(self, node: ast.Call) -> Tile:
        args = self.positional(node, (2, 3), "tile.full(shape, value, dtype=None)", ("dtype",))
        shape = self.static_shape(args[0], node.args[0], "the shape of tile.full")
        dt = self._dtype_arg(node, 2)
        value = args[1]
        if isinstance(value, Static) and isinstance(value.obj, (bool, int, float)):
            if dt is None:
                dt = self.as_tile(value, node.args[1]).dtype
            if dt.is_fp8 or (isinstance(value.obj, float) and not dt.is_float):
                # `dtype=` converts, as NumPy's np.full does: truncated, NaN refused (an
                # 8-bit float rounds and saturates, as its conversion does)
                return self.t.full(shape, self.convert_constant(value, dt, node.args[1]), dt)
            self.as_tile(value, node.args[1], dt)  # range check
            return self.t.full(shape, value.obj, dt)
        if isinstance(value, Tile) and value.ndim == 0:
            return self.t.splat(self.t.cast(value, dt or value.dtype), shape)
        raise self.error(KernelTypeError, node.args[1], f"the value of tile.full is a number "
                         f"or a scalar, not {describe(value)}")

    def _dtype_arg(self, node: ast.Call, position: int) -> T.DType | None:
        v, n = self.keyword(node, "dtype", position)
        if v is None or (isinstance(v, Static) and v.obj is None):
            return None
        if not (isinstance(v, Static) and isinstance(v.obj, T.DType)):
            raise self.error(KernelTypeError, n, f"expected a dtype (f32, i32, ...), not "
                             f"{describe(v)}")
        return v.obj

    def call_arange(self, node: ast.Call) -> Tile:
        args = self.positional(node, (1, 2), "tile.arange(n, dtype=i32)", ("dtype",))
        (n,) = self.static_shape(args[0], node.args[0], "the length of tile.arange")
        dt = self._dtype_arg(node, 1) or T.i32
        return self.t.arange(n, dt)

    def call_maximum(self, node: ast.Call) -> Any:
        a, b = self.positional(node, 2, "tile.maximum(a, b)")
        return self.minimum_maximum("max", a, b, node, node.args[0], node.args[1])

    def call_minimum(self, node: ast.Call) -> Any:
        a, b = self.positional(node, 2, "tile.minimum(a, b)")
        return self.minimum_maximum("min", a, b, node, node.args[0], node.args[1])

    def call_where(self, node: ast.Call) -> Tile:
        c, a, b = self.positional(node, 3, "tile.where(cond, a, b)")
        ct = self.as_tile(c, node.args[0])
        if not ct.dtype.is_bool:
            raise self.error(KernelTypeError, node.args[0],
                             f"the condition of tile.where is a bool tile, not "
                             f"{ct.describe()}", hint="compare: `x > 0`")
        if isinstance(a, Static) and isinstance(b, Static):
            dt = self.as_tile(a, node.args[1]).dtype
            if isinstance(b.obj, float) and not dt.is_float:
                dt = T.f32
        else:
            dt = self.promote(a, b, node)
        ta, tb = self.as_tile(a, node.args[1], dt), self.as_tile(b, node.args[2], dt)
        ta, tb = self.t.cast(ta, dt), self.t.cast(tb, dt)
        shape = self.broadcast_shape(ta.shape, tb.shape, node)
        shape = self.broadcast_shape(ct.shape, shape, node, " (the condition and the values)")
        like = (ta, tb, ct)  # the result's layout: the first of these of its shape
        return self.t.where(self.t.broadcast(ct, shape, *like),
                            self.t.broadcast(ta, shape, *like),
                            self.t.broadcast(tb, shape, *like))

    def _reduce(self, name: str, node: ast.Call) -> Tile:
        args = self.positional(node, (1, 3), f"tile.{name}(x, axis=None, keepdims=False)",
                               ("axis", "keepdims"))
        x = self.as_tile(args[0], node.args[0])
        self.refuse_storage(x.dtype, node.args[0], f"tile.{name}")
        if x.dtype.is_bool:
            raise self.error(KernelTypeError, node.args[0], f"tile.{name} of a bool tile",
                             hint="convert first: `x.astype(i32)`")
        axes, keepdims = self._axes(name, x, node)
        # over several axes, a 16-bit float is reduced in f32 throughout and rounded once
        # (axis by axis in its own type, a partial sum past its range was inf)
        narrow = x.dtype
        if len(axes) > 1:
            x = self.t.cast(x, reduce_dtype(narrow))
        # reduce the highest axis first, so the others keep their numbers
        for axis in sorted(axes, reverse=True):
            x = self.t.reduce(_REDUCE[name], x, axis, keepdims)
        return self.t.cast(x, narrow)

    def _argreduce(self, kind: str, node: ast.Call) -> Tile:
        name = f"arg{kind}"
        args = self.positional(node, (1, 3), f"tile.{name}(x, axis=None, keepdims=False)",
                               ("axis", "keepdims"))
        x = self.as_tile(args[0], node.args[0])
        self.refuse_storage(x.dtype, node.args[0], f"tile.{name}")
        if x.dtype.is_bool:
            raise self.error(KernelTypeError, node.args[0], f"tile.{name} of a bool tile",
                             hint="convert first: `x.astype(i32)`")
        axes, keepdims = self._axes(name, x, node)
        if not x.ndim:
            return self.t.full((), 0, T.i32)
        if len(axes) == 1:
            _, idx = self.t.arg_reduce(kind, x, self.t.index(x, axes[0]), axes[0], keepdims)
            return idx
        idx = self.t.index(x, None)  # NumPy: the position in the flattened tile
        for axis in sorted(axes, reverse=True):
            x, idx = self.t.arg_reduce(kind, x, idx, axis, keepdims)
        return idx

    # -- matrix products ----------------------------------------------------------------

    def _mma_operands(self, a: Any, b: Any, node: ast.AST, na: ast.AST, nb: ast.AST,
                      what: str) -> tuple[Tile, Tile]:
        """`a` (M, K) and `b` (K, N), or batches of them ((B, M, K), (B, K, N); a rank-2
        one serves every batch): float tiles with equal K (and B)."""
        for v, n, name in ((a, na, "a"), (b, nb, "b")):
            if not isinstance(v, Tile):
                raise self.error(KernelTypeError, n, f"{what} multiplies tiles; `{name}` is "
                                 f"{describe(v)}", hint="load one with `tile.load(...)`")
            if v.ndim not in (2, 3):
                raise self.error(KernelTypeError, n,
                                 f"{what} multiplies 2-d tiles; `{name}` is {v.describe()}",
                                 label=f"rank {v.ndim}",
                                 hint="add an axis (`x[None, :]`, `x[:, None]`) or reshape "
                                      "(3-d tiles are batches of 2-d ones)")
        assert isinstance(a, Tile) and isinstance(b, Tile)
        if a.shape[-1] != b.shape[-2]:
            raise self.error(KernelTypeError, node,
                             f"{what}: the inner dimensions differ: `a` is "
                             f"{shape_text(a.shape)} and `b` is {shape_text(b.shape)}",
                             label=f"{shape_text(a.shape)} @ {shape_text(b.shape)}",
                             hint="a is (M, K) and b is (K, N): load the tiles with the same K")
        if self.product_shape(a, b) is None:
            raise self.error(KernelTypeError, node,
                             f"{what}: the batches differ: `a` is {shape_text(a.shape)} and "
                             f"`b` is {shape_text(b.shape)}",
                             label=f"{shape_text(a.shape)} @ {shape_text(b.shape)}",
                             hint="batched operands share their leading dimension")
        for t, n in ((a, na), (b, nb)):
            if t.dtype.is_bool:
                raise self.error(KernelTypeError, n, f"{what} of a bool tile",
                                 hint="convert first: `x.astype(f32)`")
            if t.dtype.is_int:
                raise self.error(UnsupportedFeatureError, n,
                                 f"{what} on integers (int8 tensor cores) is not built yet",
                                 label=f"this is {t.describe()}",
                                 hint="convert to a float type first: `x.astype(f32)`")
        return a, b

    def call_mma(self, node: ast.Call) -> Tile:
        """`tile.mma(a, b, acc)`: `a @ b + acc` in the accumulator's dtype, as cuTile's
        `ct.mma` (no promotion between `a` and `b`; 16-bit and 8-bit floats accumulate in
        f32)."""
        a, b, acc = self.positional(node, 3, "tile.mma(a, b, acc)")
        ta, tb = self._mma_operands(a, b, node, node.args[0], node.args[1], "tile.mma")
        if ta.dtype != tb.dtype:
            raise self.error(KernelTypeError, node,
                             f"tile.mma multiplies tiles of one dtype: `a` is "
                             f"{ta.dtype.name} and `b` is {tb.dtype.name}",
                             label=f"{ta.dtype.name} vs {tb.dtype.name}",
                             hint=f"convert one: `.astype({ta.dtype.name})`, or use `a @ b`, "
                                  "which promotes")
        want = self.product_shape(ta, tb)
        assert want is not None
        acc_dt = accumulate_dtype(ta.dtype)
        if not isinstance(acc, Tile):
            raise self.error(KernelTypeError, node.args[2],
                             f"the accumulator of tile.mma is a tile, not {describe(acc)}",
                             hint=f"start from `tile.zeros({shape_text(want)}, "
                                  f"{acc_dt.name})`")
        if acc.shape != want:
            raise self.error(KernelTypeError, node.args[2],
                             f"the accumulator of tile.mma is (M, N) = {shape_text(want)} for "
                             f"`a` {shape_text(ta.shape)} and `b` {shape_text(tb.shape)}, "
                             f"not {shape_text(acc.shape)}",
                             label=f"this is {acc.describe()}")
        if acc.dtype != acc_dt:
            raise self.error(KernelTypeError, node.args[2],
                             f"{ta.dtype.name} tiles accumulate in {acc_dt.name}; the "
                             f"accumulator is {acc.dtype.name}",
                             label=f"this is {acc.describe()}",
                             hint=f"start from `tile.zeros({shape_text(want)}, {acc_dt.name})`"
                                  f"; convert the result afterwards (`.astype(...)`)")
        if len(want) == 3:
            return self.batched(ta, tb, acc)
        return self.t.mma(ta, tb, acc)

    def matmul(self, a: Any, b: Any, node: ast.AST, na: ast.AST, nb: ast.AST,
               acc: Tile | None = None) -> Tile:
        """`a @ b`: the operands promoted to one dtype (as for `+`) and multiplied in the
        type they accumulate in, which is the result's: f32 for 16-bit floats (exact
        products, f32 sums, as Triton's `tl.dot`; a bf16 result is one `.astype(bf16)`
        away, rounded once), the promoted dtype otherwise. With `acc` (a tile of the
        result's shape and dtype, `acc + a @ b`), the sums start from it: `tile.mma(a, b,
        acc)`, as Triton folds `acc += tl.dot(a, b)` into the dot."""
        ta, tb = self._mma_operands(a, b, node, na, nb, "`@`")
        # 8-bit floats promote to nothing (a storage type): one dtype, or promotion's error
        dt = ta.dtype if ta.dtype == tb.dtype else self.promote(ta, tb, node)
        ta, tb = self.t.cast(ta, dt), self.t.cast(tb, dt)
        shape = (ta.shape[0], tb.shape[1])
        if ta.ndim == 3 or tb.ndim == 3:
            return self.batched(ta, tb, acc)
        if acc is None:
            acc = self.t.full(shape, 0, accumulate_dtype(dt), layout="mma")
        return self.t.mma(ta, tb, acc)

    def add_product(self, node: ast.AST, product: ast.BinOp, acc_node: ast.expr | None,
                    acc_first: bool, acc: Any = None) -> Any:
        """`acc + a @ b` (`acc_first`), `a @ b + acc` or `acc += a @ b` (`acc` given, the
        target's value): where `acc` is a tile of the product's shape and dtype, one
        `tile.mma(a, b, acc)`, so the three spellings equal the explicit one bit for bit
        (Triton folds `acc += tl.dot(a, b)` into its dot the same way); otherwise the
        product, then `+`. Operands are evaluated in Python's order."""
        if acc_first and acc_node is not None:
            acc = self.expr(acc_node)
        a, b = self.expr(product.left), self.expr(product.right)
        if not acc_first and acc_node is not None:
            acc = self.expr(acc_node)
        if (isinstance(a, Tile) and isinstance(b, Tile) and isinstance(acc, Tile)
                and a.dtype.is_float and b.dtype.is_float
                and acc.shape == self.product_shape(a, b)
                and acc.dtype == accumulate_dtype(self.promote(a, b, product))):
            return self.matmul(a, b, product, product.left, product.right, acc)
        p = self.matmul(a, b, product, product.left, product.right)
        return self.binop(ast.Add(), acc, p, node) if acc_first else \
            self.binop(ast.Add(), p, acc, node)

    def call_cumsum(self, node: ast.Call) -> Tile:
        args = self.positional(node, (1, 2), "tile.cumsum(x, axis=0)", ("axis",))
        x = self.as_tile(args[0], node.args[0])
        self.refuse_storage(x.dtype, node.args[0], "tile.cumsum")
        if x.dtype.is_bool:
            raise self.error(KernelTypeError, node.args[0], "tile.cumsum of a bool tile",
                             hint="convert first: `x.astype(i32)`")
        if not x.ndim:
            raise self.error(KernelTypeError, node.args[0], "tile.cumsum of a scalar")
        axis_v, axis_node = self.keyword(node, "axis", 1)
        axis = 0 if axis_v is None else axis_v.obj if isinstance(axis_v, Static) else None
        if not (isinstance(axis, int) and not isinstance(axis, bool)
                and -x.ndim <= axis < x.ndim):
            raise self.error(KernelTypeError, axis_node or node,
                             f"the axis of tile.cumsum is a constant from {-x.ndim} to "
                             f"{x.ndim - 1} for {x.describe()}")
        return self.t.cumsum(x, axis % x.ndim)

    def _axes(self, name: str, x: Tile, node: ast.Call) -> tuple[list[int], bool]:
        """The axes a reduction's `axis` names (all for None), and its `keepdims`."""
        axis_v, axis_node = self.keyword(node, "axis", 1)
        keep_v, keep_node = self.keyword(node, "keepdims", 2)
        keepdims = False
        if keep_v is not None:
            if not (isinstance(keep_v, Static) and isinstance(keep_v.obj, bool)):
                raise self.error(KernelTypeError, keep_node, "keepdims is True or False")
            keepdims = keep_v.obj
        if axis_v is None or (isinstance(axis_v, Static) and axis_v.obj is None):
            return list(range(x.ndim)), keepdims
        if not (isinstance(axis_v, Static) and isinstance(axis_v.obj, int)
                and not isinstance(axis_v.obj, bool) and -x.ndim <= axis_v.obj < x.ndim):
            raise self.error(KernelTypeError, axis_node,
                             f"the axis of tile.{name} is a constant from {-x.ndim} to "
                             f"{x.ndim - 1} for {x.describe()}" if x.ndim else
                             f"tile.{name} of a scalar takes no axis")
        return [axis_v.obj % x.ndim], keepdims

    def call_broadcast_to(self, node: ast.Call) -> Tile:
        x, s = self.positional(node, 2, "tile.broadcast_to(x, shape)")
        t = self.as_tile(x, node.args[0])
        shape = self.static_shape(s, node.args[1], "the shape of tile.broadcast_to")
        got = self.broadcast_shape(t.shape, shape, node)
        if got != shape:
            raise self.error(KernelTypeError, node,
                             f"cannot broadcast {shape_text(t.shape)} to {shape_text(shape)}",
                             hint="the target must be at least as large in every dimension")
        return self.t.broadcast(t, shape)

    def call_reshape(self, node: ast.Call) -> Tile:
        x, s = self.positional(node, 2, "tile.reshape(x, shape)")
        return self._reshape(self.as_tile(x, node.args[0]), s, node, node.args[1])

    def _reshape(self, t: Tile, s: Any, node: ast.AST, shape_node: ast.AST) -> Tile:
        shape = self.static_shape(s, shape_node, "the shape of tile.reshape")
        size = 1
        for n in shape:
            size *= n
        have = 1
        for n in t.shape:
            have *= n
        if size != have:
            raise self.error(KernelTypeError, node,
                             f"cannot reshape {t.describe()} ({have} elements) to "
                             f"{shape_text(shape)} ({size} elements)")
        if shape == t.shape:
            return self.t.convert(t, "blocked")
        return self.t.reshape(t, shape)

    def call_permute(self, node: ast.Call) -> Tile:
        x, a = self.positional(node, 2, "tile.permute(x, axes)")
        return self._permute(self.as_tile(x, node.args[0]), a, node.args[1])

    def _permute(self, t: Tile, a: Any, node: ast.AST) -> Tile:
        axes = a.obj if isinstance(a, Static) else None
        if not (isinstance(axes, tuple) and sorted(axes) == list(range(t.ndim))):
            raise self.error(KernelTypeError, node,
                             f"the axes of tile.permute are a permutation of "
                             f"{tuple(range(t.ndim))} for {t.describe()}, not {describe(a)}",
                             hint="e.g. `tile.permute(x, (1, 0))` transposes")
        return self.t.permute(t, axes)

    def call_method(self, m: Method, node: ast.Call) -> Tile:
        if m.name == "astype":
            (dt,) = self.positional(node, 1, "x.astype(dtype)")
            if not (isinstance(dt, Static) and isinstance(dt.obj, T.DType)):
                raise self.error(KernelTypeError, node.args[0], f"astype takes a dtype, not "
                                 f"{describe(dt)}")
            return self.cast(m.tile, dt.obj)
        if m.name == "reshape":
            (shape,) = self.positional(node, 1, "x.reshape(shape)")
            return self._reshape(m.tile, shape, node, node.args[0])
        if m.name == "extract":
            index, shape = self.positional(node, 2, "x.extract(index, shape)")
            return self.extract(m.tile, index, shape, node, node.args[0], node.args[1])
        (axes,) = self.positional(node, 1, "x.permute(axes)")
        return self._permute(m.tile, axes, node.args[0])
