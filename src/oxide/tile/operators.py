"""Operators on tiles and numbers in a tile kernel: `+ - * / // % ** @ & | ^ << >> ~`,
unary `-`, comparisons, and the typing they share (mixed into `TileLowering`).

Operands are tiles (`Tile`) and compile-time numbers (`Static`), which fold as Python
computes them (frontend/constfold.py's bounds) and otherwise stay *weak* literals that
take the type of the tile they meet. Two tiles meet NumPy-style (`promote`) and
broadcast to one shape, in the layout of the first operand of that shape (`operands`).
"""

from __future__ import annotations

import ast
import operator
from typing import Any

from oxide import types as T
from oxide.errors import KernelTypeError, UnsupportedFeatureError
from oxide.frontend.constfold import FoldError, convert, evaluate, negative_shift
from oxide.frontend.promote import literal_fits, storage_error, storage_hint
from oxide.tile.values import Static, Tile, describe, shape_text

_BIN_KINDS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div",
              ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.BitAnd: "and", ast.BitOr: "or",
              ast.BitXor: "xor", ast.LShift: "shl", ast.RShift: "shr"}
_PY_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
           ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
           ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.Pow: operator.pow}
_CMP = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_PY_CMP = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
           ast.Eq: operator.eq, ast.NotEq: operator.ne}
_UNARY = {ast.USub: "-", ast.Invert: "~"}
_SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
           ast.Mod: "%", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<",
           ast.RShift: ">>", ast.Pow: "**", ast.MatMult: "@"}


class TileOperatorsMixin:
    """Operators and their typing (see the module docstring)."""

    def expr_BinOp(self, node: ast.BinOp) -> Any:
        if isinstance(node.op, ast.Add):
            if is_product(node.right):
                return self.add_product(node, node.right, node.left, True)
            if is_product(node.left):
                return self.add_product(node, node.left, node.right, False)
        return self.binop(node.op, self.expr(node.left), self.expr(node.right), node)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Any:
        v = self.expr(node.operand)
        if isinstance(v, Static) and isinstance(v.obj, (int, float, bool)):
            f = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
                 ast.Invert: operator.invert}[type(node.op)]
            return self.fold(f, (v.obj,), node)
        if isinstance(node.op, ast.Not):
            return self.logical_not(v, node)
        t = self.as_tile(v, node.operand)
        if isinstance(node.op, ast.UAdd):
            return Tile(t.dtype, t.shape, t.ssa)
        self.refuse_storage(t.dtype, node, f"unary `{_UNARY[type(node.op)]}`")
        if isinstance(node.op, ast.USub):
            if t.dtype.is_bool:
                raise self.error(KernelTypeError, node, "cannot negate a bool tile",
                                 hint="use `~x` for logical not")
            return self.t.unary("neg", t)
        if t.dtype.is_float:  # `~x`
            raise self.error(KernelTypeError, node, f"`~` needs integers or bools, not "
                             f"{t.dtype.name}")
        if t.dtype.is_bool:
            true = self.t.broadcast(self.t.full((), True, T.bool_), t.shape, t)
            return self.t.binary("xor", t, true)
        return self.t.unary("invert", t)

    def expr_Compare(self, node: ast.Compare) -> Any:
        if len(node.ops) != 1:
            raise self.error(UnsupportedFeatureError, node, "chained comparisons are not "
                             "supported on tiles", hint="combine with `&`: `(a < b) & (b < c)`")
        a, b = self.expr(node.left), self.expr(node.comparators[0])
        op = type(node.ops[0])
        if op not in _CMP:
            raise self.error(UnsupportedFeatureError, node, "tiles compare with <, <=, >, >=, "
                             "==, !=")
        if isinstance(a, Static) and isinstance(b, Static):
            return self.fold(_PY_CMP[op], (a.obj, b.obj), node)
        narrow = self.narrow_compare(_CMP[op], a, b, node)
        if narrow is not None:
            return narrow
        ta, tb = self.operands(a, b, node, node.left, node.comparators[0])
        self.refuse_storage(ta.dtype, node, "a comparison")
        return self.t.compare(_CMP[op], ta, tb)

    def narrow_compare(self, pred: str, a: Any, b: Any, node: ast.AST) -> Tile | None:
        """`x < n` of a narrow signed integer tile `x` and a wider signed 0-d `n` (as in
        `tile.arange(BN)[None, :] < x.shape[1]`: i32 against i64), computed in `x`'s
        type (`tile/to_simt.py`'s `narrow_compare`): the same truth values as the
        promoted compare, one narrow compare an element. None where this does not
        apply."""
        swap = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}
        if isinstance(a, Tile) and a.ndim == 0 and isinstance(b, Tile) and b.ndim > 0:
            a, b, pred = b, a, swap[pred]
        if not (isinstance(a, Tile) and isinstance(b, Tile) and a.ndim > 0 and b.ndim == 0
                and a.dtype.is_int and b.dtype.is_int and a.dtype.is_signed
                and b.dtype.is_signed and a.dtype.bits < b.dtype.bits):
            return None
        return self.t.narrow_compare(pred, a, b)  # lowered by tile/to_simt.py


    def fold(self, fn: Any, values: tuple[Any, ...], node: ast.AST) -> Static:
        """An operator (or builtin) on compile-time values, as Python computes it, with the
        SIMT frontend's bounds (frontend/constfold.py): where Python raises, or the result
        would be too large to compute (`2 ** 2 ** 40`), a diagnostic at `node`."""
        try:
            return Static(evaluate(fn, values))
        except FoldError as exc:
            raise self.error(KernelTypeError, node,
                             f"constant expression `{self.text(node)}` {exc}",
                             hint=exc.hint) from None

    def convert_constant(self, v: Static, dt: T.DType, node: ast.AST) -> bool | int | float:
        """`dt(c)` on a compile-time number, as the SIMT frontend converts one
        (frontend/constfold.py `convert`): `i32(NAN)` and `i32(3e10)` are errors."""
        if not isinstance(v.obj, (bool, int, float)):
            raise self.error(KernelTypeError, node, f"`{dt.name}(...)` converts numbers and "
                             f"tiles, not {describe(v)}")
        try:
            return convert(v.obj, dt)
        except FoldError as exc:
            raise self.error(KernelTypeError, node, f"the constant {v.obj!r} {exc}",
                             hint=exc.hint) from None


    def as_tile(self, v: Any, node: ast.AST, dt: T.DType | None = None) -> Tile:
        """A value as a tile: literals become 0-d tiles of `dt` (or their default type).
        An 8-bit float takes a literal its range holds (NaN too), rounded to it."""
        if isinstance(v, Tile):
            return v
        if isinstance(v, Static) and isinstance(v.obj, (bool, int, float)):
            if dt is None:
                dt = T.bool_ if isinstance(v.obj, bool) else (
                    T.i32 if isinstance(v.obj, int) else T.f32)
            if dt.is_fp8:
                if not literal_fits(v.obj, dt):
                    raise self.error(KernelTypeError, node, f"the literal {v.obj!r} does not "
                                     f"fit in {dt.name}", hint=f"convert explicitly: "
                                     f"`{dt.name}({v.obj!r})` saturates")
                return self.t.full((), v.obj, dt)
            if isinstance(v.obj, int) and dt.is_int and not _fits(v.obj, dt):
                raise self.error(KernelTypeError, node, f"the literal {v.obj} does not fit in "
                                 f"{dt.name}")
            if isinstance(v.obj, float) and not dt.is_float:  # as SIMT kernels' literals
                raise self.error(KernelTypeError, node, f"the literal {v.obj!r} is not "
                                 f"{'a bool' if dt.is_bool else 'an integer'} ({dt.name})",
                                 hint=f"convert explicitly: `{dt.name}({v.obj!r})`")
            return self.t.full((), v.obj, dt)
        raise self.error(KernelTypeError, node, f"expected a tile or a number, got "
                         f"{describe(v)}")

    def promote(self, a: Any, b: Any, node: ast.AST) -> T.DType:
        """The dtype two operands meet in (NumPy-like, literals weak)."""
        ta = a.dtype if isinstance(a, Tile) else None
        tb = b.dtype if isinstance(b, Tile) else None
        if ta is None and tb is None:
            raise AssertionError("two constants fold in Python")
        if ta is None or tb is None:
            t, lit = (ta, b) if tb is None else (tb, a)
            assert t is not None
            obj = lit.obj if isinstance(lit, Static) else None
            if not isinstance(obj, (bool, int, float)):
                raise self.error(KernelTypeError, node, f"expected a tile or a number, got "
                                 f"{describe(lit)}")
            if t.is_fp8:  # the literal takes it (as_tile checks its range)
                return t
            if isinstance(obj, float) and not isinstance(obj, bool) and not t.is_float:
                return T.f32
            if isinstance(obj, int) and not isinstance(obj, bool) and t.is_bool:
                return T.i32
            return t
        if ta == tb:
            return ta
        if ta.is_fp8 or tb.is_fp8:
            storage = ta if ta.is_fp8 else tb
            raise self.error(KernelTypeError, node, f"{ta.name} and {tb.name} have no common "
                             "type: 8-bit floats are storage types",
                             hint=storage_hint(storage, tile=True))
        if ta.is_float and tb.is_float:
            return ta if ta.bits > tb.bits else tb if tb.bits > ta.bits else T.f32
        if ta.is_float or tb.is_float:
            return ta if ta.is_float else tb
        if ta.is_bool or tb.is_bool:
            return tb if ta.is_bool else ta
        if ta.is_signed != tb.is_signed:
            raise self.error(KernelTypeError, node,
                             f"{ta.name} and {tb.name} mix signed and unsigned integers",
                             hint="convert one with `.astype(...)`")
        return ta if ta.bits > tb.bits else tb

    def refuse_storage(self, dt: T.DType, node: ast.AST, what: str) -> None:
        """A KernelTypeError at `node` where `what` would compute on an 8-bit float (on
        its bits, as an integer, otherwise): convert it with `.astype(f32)` first."""
        if dt.is_fp8:
            raise self.error(KernelTypeError, node, storage_error(dt, what),
                             hint=storage_hint(dt, tile=True))

    def broadcast_shape(self, a: tuple[int, ...], b: tuple[int, ...], node: ast.AST,
                        what: str = "") -> tuple[int, ...]:
        n = len(a) if len(a) > len(b) else len(b)
        pa, pb = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
        out = []
        for x, y in zip(pa, pb, strict=True):
            if x != y and x != 1 and y != 1:
                raise self.error(KernelTypeError, node,
                                 f"cannot broadcast shapes {shape_text(a)} and {shape_text(b)}"
                                 f"{what}", label=f"{shape_text(a)} vs {shape_text(b)}",
                                 hint="dimensions must be equal or 1; add an axis with "
                                      "`x[:, None]` or `x[None, :]`")
            out.append(x if y == 1 else y)
        return tuple(out)

    def operands(self, a: Any, b: Any, node: ast.AST, na: ast.AST, nb: ast.AST,
                 dt: T.DType | None = None) -> tuple[Tile, Tile]:
        """Two operands as tiles of one dtype and one layout (broadcast)."""
        for v, n in ((a, na), (b, nb)):
            if not (isinstance(v, Tile) or (isinstance(v, Static)
                                            and isinstance(v.obj, (bool, int, float)))):
                raise self.error(KernelTypeError, n, f"expected a tile or a number, got "
                                 f"{describe(v)}")
        dt = dt or self.promote(a, b, node)
        ta, tb = self.as_tile(a, na, dt), self.as_tile(b, nb, dt)
        shape = self.broadcast_shape(ta.shape, tb.shape, node)
        # the result's layout: the first operand's of the result's shape (tile/layouts.py)
        return (self.t.broadcast(self.t.cast(ta, dt), shape, ta, tb),
                self.t.broadcast(self.t.cast(tb, dt), shape, ta, tb))

    def binop(self, op: ast.operator, a: Any, b: Any, node: ast.AST) -> Any:
        na = getattr(node, "left", node)
        nb = getattr(node, "right", getattr(node, "value", node))
        if isinstance(a, Static) and isinstance(b, Static):
            return self.fold(_PY_BIN[type(op)], (a.obj, b.obj), node)
        symbol = _SYMBOL.get(type(op), "?")
        if isinstance(op, ast.MatMult):
            return self.matmul(a, b, node, na, nb)
        if isinstance(op, ast.Pow):
            return self.power(a, b, node, na, nb)
        kind = _BIN_KINDS[type(op)]
        if isinstance(b, Static) and negative_shift(kind, b.obj):
            raise self.error(KernelTypeError, nb,
                             f"`{self.text(node)}` shifts by a negative constant ({b.obj}): "
                             "Python raises ValueError (negative shift count)",
                             label="a negative shift amount",
                             hint=f"shift the other way: `{'>>' if kind == 'shl' else '<<'}` by "
                                  f"{-b.obj}")
        dt = self.promote(a, b, node) if isinstance(a, Tile) or isinstance(b, Tile) else None
        if not isinstance(a, Tile) and not isinstance(b, Tile):
            raise self.error(KernelTypeError, node, f"`{symbol}` needs tiles or numbers, got "
                             f"{describe(a)} and {describe(b)}")
        assert dt is not None
        self.refuse_storage(dt, node, f"`{symbol}`")
        if kind == "div" and not dt.is_float:
            dt = T.f32  # true division, as NumPy's: integers give floats
        if kind in ("and", "or", "xor") and dt.is_float:
            raise self.error(KernelTypeError, node, f"`{symbol}` needs integers or bools, not "
                             f"{dt.name}")
        if kind in ("shl", "shr") and not (dt.is_int):
            raise self.error(KernelTypeError, node, f"`{symbol}` needs integers, not "
                             f"{dt.name}")
        if kind in ("add", "sub", "mul", "div", "floordiv", "mod") and dt.is_bool:
            raise self.error(KernelTypeError, node, f"`{symbol}` on bool tiles is not defined",
                             hint="convert with `.astype(i32)` first")
        ta, tb = self.operands(a, b, node, na, nb, dt)
        site = None
        if kind in ("floordiv", "mod") and not dt.is_float:
            site = self.b.site("assert", self.src.span(node), "integer division by zero")
        return self.t.binary(kind, ta, tb, site)


def is_product(node: ast.expr) -> bool:
    """Whether `node` is written `a @ b` (a temporary no other code can name)."""
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult)


def _fits(v: int, dt: T.DType) -> bool:
    if dt.is_bool:
        return v in (0, 1)
    if dt.is_signed:
        return -(1 << (dt.bits - 1)) <= v < (1 << (dt.bits - 1))
    return 0 <= v < (1 << dt.bits)

