"""Elementwise math on tiles: `tile.exp` & co., `ox.math.*` and Python's `math.*` on
tiles, the builtins `abs`, `min` and `max`, and `**` (mixed into `TileLowering`).

Every function is `ox.math`'s (frontend/math_calls.py), applied element by element: one
`tile.math` op whose lowering is the SIMT kernel's `MathOp`, so the GPU calls libdevice
and the CPU the C library, exactly as a SIMT kernel's `ox.math.exp(x)` does, within the
bounds docs/language.md states. 16-bit floats compute in f32 and round once, as there.
Operands broadcast and promote as `+`'s do (weak literals). Compositions (`sigmoid`,
`modf`, `degrees`) are built from the same ops a SIMT kernel's would be.
"""

from __future__ import annotations

import ast
import builtins
import math as pymath
from typing import Any

from oxide import types as T
from oxide.errors import KernelTypeError
from oxide.frontend.math_calls import _DEGREES, _MATH_ARITY, _MATH_PREDICATES, _PY_MATH_HINTS
from oxide.lang import MATH_FUNCTIONS
from oxide.tile.values import Static, Tile, describe

# tile.<name>: the ox.math function it is (floats only, as Triton's and cuTile's); `abs`,
# `sigmoid`, `pow` and `fma` have their own rules below
TILE_MATH = ("exp", "exp2", "log", "log2", "log1p", "sqrt", "rsqrt", "tanh", "sin", "cos",
             "tan", "erf", "floor", "ceil")
TILE_ELEMENTWISE = (*TILE_MATH, "abs", "sigmoid", "pow", "fma")


class TileMathMixin:
    """Elementwise math calls (see the module docstring)."""

    # -- tile.<fn> ----------------------------------------------------------------------

    def call_tile_math(self, name: str, node: ast.Call) -> Tile:
        """`tile.<name>(...)`: floats in, the same float type out (`abs` takes integers
        too); `pow` and `fma` broadcast their operands."""
        if name == "abs":
            (x,) = self.positional(node, 1, "tile.abs(x)")
            return self.tile_abs(x, node.args[0])
        if name == "sigmoid":
            (x,) = self.positional(node, 1, "tile.sigmoid(x)")
            return self.sigmoid(x, node)
        if name == "exp2" and node.keywords:
            (x,) = self.positional(node, 1, "tile.exp2(x, flush_to_zero=False)",
                                   ("flush_to_zero",))
            fn = "exp2_ftz" if self._flush_to_zero(node) else "exp2"
            return self.elementwise(fn, [x], list(node.args), node, "tile.exp2",
                                    integers=False)
        n = 3 if name == "fma" else 2 if name == "pow" else 1
        names = {1: "x", 2: "x, y", 3: "a, b, c"}[n]
        args = self.positional(node, n, f"tile.{name}({names})")
        return self.elementwise(name, args, list(node.args), node, f"tile.{name}",
                                integers=False)

    def _flush_to_zero(self, node: ast.Call) -> bool:
        """`flush_to_zero=` of `tile.exp2`: a compile-time bool (cuTile's keyword)."""
        value, at = self.keyword(node, "flush_to_zero")
        if not (isinstance(value, Static) and isinstance(value.obj, bool)):
            raise self.error(KernelTypeError, at, "flush_to_zero is True or False, known at "
                             f"compile time, not {describe(value)}",
                             hint="use a literal or a Const[bool] parameter")
        return value.obj

    def tile_abs(self, x: Any, at: ast.AST) -> Any:
        """`abs(x)`: the magnitude (floats clear the sign bit, so `abs(-0.0)` is 0.0 and
        a NaN stays a NaN; integers wrap, so `abs(MIN)` is MIN, as SIMT kernels' `abs`)."""
        if isinstance(x, Static) and isinstance(x.obj, (bool, int, float)):
            return self.fold(builtins.abs, (x.obj,), at)
        t = self.as_tile(x, at)
        self.refuse_storage(t.dtype, at, "abs()")
        if t.dtype.is_bool:
            raise self.error(KernelTypeError, at, "abs() of a bool tile",
                             hint="convert first: `x.astype(i32)`")
        return self.t.unary("abs", t)

    def sigmoid(self, x: Any, node: ast.Call) -> Tile:
        """`1 / (1 + exp(-x))` (Triton's definition), with `exp` ox.math's (libdevice's
        accurate `expf` on the GPU) and IEEE division; 16-bit floats in f32, rounded once."""
        t = self._float_operand(x, node.args[0], "tile.sigmoid")
        compute = _compute(t.dtype)
        e = self.t.math("exp", [self.t.unary("neg", self.t.cast(t, compute))], compute)
        one = Static(1.0)
        r = self.binop(ast.Div(), one, self.binop(ast.Add(), one, e, node), node)
        return self.t.cast(r, t.dtype)

    def _float_operand(self, x: Any, at: ast.AST, what: str) -> Tile:
        t = self.as_tile(x, at, T.f32)
        if not t.dtype.is_float:
            raise self.error(KernelTypeError, at, f"{what} takes floats, not {t.dtype.name}",
                             label=f"this is {t.describe()}",
                             hint="convert first: `x.astype(f32)`")
        return t

    # -- the common path ------------------------------------------------------------------

    def elementwise(self, fn: str, args: list[Any], nodes: list[ast.expr], node: ast.AST,
                    what: str, integers: bool) -> Any:
        """ox.math's `fn` on `args` (tiles and numbers), broadcast together, in the float
        type `math_dtype` gives, computed in f32 for 16-bit floats and rounded once.
        Predicates give bool tiles."""
        dt = self.math_dtype(args, nodes, node, what, integers)
        if fn == "nextafter" and dt.bits == 16:
            raise self.error(KernelTypeError, node, f"{what} on {dt.name} is not supported: it "
                             "would step by an f32 ulp", hint="convert the operands to f32 or f64")
        compute = _compute(dt)
        operands = self.broadcast_all([self.as_tile(a, n, compute) for a, n in
                                       zip(args, nodes, strict=True)], node)
        operands = [self.t.cast(a, compute) for a in operands]
        if fn in _MATH_PREDICATES:
            return self.t.math(fn, operands, T.bool_)
        return self.t.cast(self.t.math(fn, operands, compute), dt)

    def math_dtype(self, args: list[Any], nodes: list[ast.expr], node: ast.AST, what: str,
                   integers: bool) -> T.DType:
        """The float type of a math function's result: its operands promoted as `+`'s
        (literals weak; numbers alone are f32); integer tiles give f32 (64-bit ones f64),
        as `ox.math` converts them, where `integers` allows them, else an error."""
        dt: T.DType | None = None
        for a, n in zip(args, nodes, strict=True):
            if not (isinstance(a, Tile) or (isinstance(a, Static)
                                            and isinstance(a.obj, (bool, int, float)))):
                raise self.error(KernelTypeError, n, f"{what} takes tiles or numbers, not "
                                 f"{describe(a)}")
            if isinstance(a, Tile):
                if a.dtype.is_bool:
                    raise self.error(KernelTypeError, n, f"{what} of a bool tile",
                                     hint="convert first: `x.astype(f32)`")
                dt = a.dtype if dt is None else self.promote(_typed(dt), a, node)
        if dt is None:
            return T.f32
        for a in args:
            if isinstance(a, Static):
                dt = self.promote(_typed(dt), a, node)
        self.refuse_storage(dt, node, what)
        if not dt.is_float:
            if not integers:
                bad = next(n for a, n in zip(args, nodes, strict=True)
                           if isinstance(a, Tile) and not a.dtype.is_float)
                raise self.error(KernelTypeError, bad, f"{what} takes floats, not {dt.name}",
                                 hint="convert first: `x.astype(f32)`")
            dt = T.f64 if dt.bits == 64 else T.f32
        return dt

    def broadcast_all(self, tiles: list[Tile], node: ast.AST) -> list[Tile]:
        """Tiles broadcast to their common shape, in one layout (the first's of that
        shape), as `operands` does for two."""
        shape: tuple[int, ...] = ()
        for t in tiles:
            shape = self.broadcast_shape(shape, t.shape, node)
        return [self.t.broadcast(t, shape, *tiles) for t in tiles]

    # -- ox.math.* and Python's math.* ----------------------------------------------------

    def call_ox_math(self, fn: str, node: ast.Call, prefix: str) -> Any:
        """`ox.math.<fn>(...)` (or `math.<fn>`) with a tile argument: elementwise, in the
        types `ox.math` gives (integers to f32, 64-bit ones to f64). Python's `math` on
        constants folds as Python computes it; `ox.math` on numbers alone makes 0-d tiles,
        as a SIMT kernel computes it at run time."""
        if node.keywords:
            raise self.error(KernelTypeError, node.keywords[0].value,
                             f"{prefix}.{fn}() takes its arguments by position")
        if prefix == "math" and fn not in MATH_FUNCTIONS:
            raise self.error(KernelTypeError, node.func, f"`math.{fn}` is not supported in "
                             "kernels", hint=_PY_MATH_HINTS.get(fn, "kernels support the "
                                                                "math functions of `ox.math`"))
        args = [self.expr(a) for a in node.args]
        if prefix == "math" and args and all(isinstance(a, Static) for a in args):
            return self._fold_python_math(fn, args, node)
        if prefix == "math" and fn in ("floor", "ceil", "trunc"):
            (x,) = self._arity(fn, args, node, prefix, 1)
            return self._python_rounding(fn, x, node)
        if prefix == "math" and fn == "log" and len(args) == 2:  # as CPython computes it
            dt = self.math_dtype(args, list(node.args), node, "math.log()", True)
            num, den = (self.elementwise("log", [self.as_tile(a, n, dt)], [n], node,
                                         "math.log()", True)
                        for a, n in zip(args, node.args, strict=True))
            return self.binop(ast.Div(), num, den, node)
        fn = "tgamma" if fn == "gamma" else fn
        n = _MATH_ARITY.get(fn, 1)
        args = self._arity(fn, args, node, prefix, n)
        what = f"{prefix}.{fn}()"
        if fn in _DEGREES:  # one rounding, by CPython's constants
            t, dt = self._float_tile(args, node, what)
            k = self.t.full((), _DEGREES[fn], t.dtype)
            r = self.t.binary("mul", t, self.t.broadcast(k, t.shape, t))
            return self.t.cast(r, dt)
        if fn == "modf":
            return self._modf(args, node, what)
        if fn == "frexp":
            return self._frexp(args, node, what)
        if fn == "ldexp":
            return self._ldexp(args, node, what)
        return self.elementwise(fn, args, list(node.args), node, what, integers=True)

    def _arity(self, fn: str, args: list[Any], node: ast.Call, prefix: str, n: int
               ) -> list[Any]:
        if len(args) != n:
            raise self.error(KernelTypeError, node, f"{prefix}.{fn}() takes {n} argument"
                             f"{'s' if n != 1 else ''}, got {len(args)}")
        return args

    def _fold_python_math(self, fn: str, args: list[Static], node: ast.Call) -> Static:
        try:
            r = getattr(pymath, fn)(*(a.obj for a in args))
        except (ValueError, OverflowError, TypeError) as exc:
            raise self.error(KernelTypeError, node, f"`{self.text(node)}` fails in Python: "
                             f"{exc}", hint="constant arguments are computed at compile "
                             "time, as Python computes them") from None
        return Static(r)

    def _python_rounding(self, fn: str, x: Any, node: ast.Call) -> Tile:
        """`math.floor/ceil/trunc` of a tile: i64, as Python gives an int (an integer
        tile is returned as it is); a float past i64 saturates, NaN gives 0."""
        t = self.as_tile(x, node.args[0])
        self.refuse_storage(t.dtype, node, f"math.{fn}()")
        if not t.dtype.is_float:
            return t
        compute = _compute(t.dtype)
        r = self.t.math(fn, [self.t.cast(t, compute)], compute)
        return self.t.cast(r, T.i64)

    def _float_tile(self, args: list[Any], node: ast.Call, what: str) -> tuple[Tile, T.DType]:
        """The one argument of modf/frexp/ldexp as a tile of the float type it computes in,
        and the result's float type."""
        dt = self.math_dtype(args[:1], list(node.args[:1]), node, what, True)
        t = self.as_tile(args[0], node.args[0], dt)
        return self.t.cast(t, _compute(dt)), dt

    def _modf(self, args: list[Any], node: ast.Call, what: str) -> tuple[Tile, Tile]:
        """(fraction, integer part), both with x's sign, as SIMT kernels' `modf`."""
        x, dt = self._float_tile(args, node, what)
        c = x.dtype
        whole = self.t.math("trunc", [x], c)
        frac = self.t.math("copysign", [self.t.binary("sub", x, whole), x], c)
        zero = self.t.math("copysign", [self.t.broadcast(self.t.full((), 0.0, c), x.shape, x),
                                        x], c)
        frac = self.t.where(self.t.math("isinf", [x], T.bool_), zero, frac)
        return self.t.cast(frac, dt), self.t.cast(whole, dt)

    def _frexp(self, args: list[Any], node: ast.Call, what: str) -> tuple[Tile, Tile]:
        """(mantissa in [0.5, 1) with x's sign, i32 exponent), as SIMT kernels' `frexp`."""
        x, dt = self._float_tile(args, node, what)
        m = self.t.math("frexp_mantissa", [x], x.dtype)
        e = self.t.math("frexp_exponent", [x], T.i32)
        return self.t.cast(m, dt), e

    def _ldexp(self, args: list[Any], node: ast.Call, what: str) -> Tile:
        """`x * 2**e` with an integer `e`, read as i32 (a 64-bit one saturates to i32's
        range, which gives the same inf or 0), as SIMT kernels' `ldexp`."""
        x, dt = self._float_tile(args[:1], node, what)
        e = self.as_tile(args[1], node.args[1], T.i32)
        if not e.dtype.is_int or e.dtype.is_bool:
            raise self.error(KernelTypeError, node.args[1], f"{what} takes an integer "
                             f"exponent, not {e.describe()}", hint="convert it: `.astype(i32)`")
        if e.dtype.bits == 64 or e.dtype == T.u32:
            def clamp(kind: str, bound: int) -> None:
                nonlocal e
                b = self.t.broadcast(self.t.full((), bound, e.dtype), e.shape, e)
                e = self.t.binary(kind, e, b)
            if e.dtype.is_signed:
                clamp("max", -(2**31))
            clamp("min", 2**31 - 1)
        x, e = self.broadcast_all([x, self.t.cast(e, T.i32)], node)
        return self.t.cast(self.t.math("ldexp", [x, e], x.dtype), dt)

    # -- builtins and ** --------------------------------------------------------------------

    def builtin_min_max(self, fn: Any, node: ast.Call) -> Any:
        """`min(a, b, ...)` / `max(a, b, ...)` of tiles and numbers: elementwise, folded
        from the left (`tile.minimum`/`tile.maximum`: a NaN loses to a number, -0.0
        orders below 0.0)."""
        kind = "min" if fn is builtins.min else "max"
        args = [self.expr(a) for a in node.args]
        if args and not node.keywords and all(isinstance(a, Static) for a in args):
            return self.fold(fn, tuple(a.obj for a in args), node)  # `min(BM, BN)`
        if node.keywords or len(node.args) < 2:
            raise self.error(KernelTypeError, node,
                             f"`{kind}` in a tile kernel takes two or more tiles or numbers",
                             hint=f"reduce a tile with `tile.{kind}(x)`")
        acc, at = args[0], node.args[0]
        for b, nb in zip(args[1:], node.args[1:], strict=True):
            acc = self.minimum_maximum(kind, acc, b, node, at, nb)
        return acc

    def minimum_maximum(self, kind: str, a: Any, b: Any, node: ast.AST, na: ast.AST,
                        nb: ast.AST) -> Any:
        if isinstance(a, Static) and isinstance(b, Static):
            return self.fold(builtins.max if kind == "max" else builtins.min, (a.obj, b.obj),
                             node)
        dt = self.promote(a, b, node)
        self.refuse_storage(dt, node, f"{kind}imum")
        if dt.is_bool:
            raise self.error(KernelTypeError, node, f"{kind}imum of bools",
                             hint="use `|` or `&`")
        ta, tb = self.operands(a, b, node, na, nb, dt)
        return self.t.binary(kind, ta, tb)

    def power(self, a: Any, b: Any, node: ast.AST, na: ast.AST, nb: ast.AST) -> Tile:
        """`a ** b` as SIMT kernels compute it: a constant integer exponent from 0 to 16
        is repeated multiplication from the left (`x ** 3` is `(x * x) * x`, `x ** 0` is
        1, NaN too; integers wrap); otherwise floats only, through ox.math's `pow`."""
        dt = self.promote(a, b, node)
        self.refuse_storage(dt, node, "`**`")
        if dt.is_bool:
            raise self.error(KernelTypeError, node, "`**` on bool tiles is not defined",
                             hint="convert with `.astype(i32)` first")
        if isinstance(b, Static) and type(b.obj) is int and 0 <= b.obj <= 16:
            x = self.t.cast(self.as_tile(a, na, dt), dt)
            if b.obj == 0:
                return self.t.broadcast(self.t.full((), 1, dt), x.shape, x)
            result = x
            for _ in range(b.obj - 1):
                result = self.t.binary("mul", result, x)
            return result
        if not dt.is_float:
            raise self.error(KernelTypeError, node,
                             "integer `**` needs a constant exponent from 0 to 16",
                             hint="convert to a float type for a run-time exponent")
        return self.elementwise("pow", [a, b], [na, nb], node, "`**`", integers=False)


def _typed(dt: T.DType) -> Tile:
    """A stand-in tile of `dt` for `promote`, which reads only operands' dtypes."""
    return Tile(dt, (), None)  # type: ignore[arg-type]


def _compute(dt: T.DType) -> T.DType:
    """The type a float function computes in: f32 for the 16-bit floats."""
    return T.f32 if dt.bits < 32 else dt
