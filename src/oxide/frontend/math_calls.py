"""Math calls: `ox.math.*`, and Python's `math` module mapped onto it (docs/language.md).

Mixed into FunctionLowering through CallsMixin; constant arguments fold as Python
computes them, the rest lower to MathOp (libm on the CPU, libdevice on the GPU) or to
other ops where neither library has the function (`modf`, `frexp`).
"""

from __future__ import annotations

import ast
import math as pymath
from typing import Any

from oxide import types as T
from oxide.errors import KernelSyntaxError, KernelTypeError
from oxide.frontend.values import Lit, Tup, Val, Witness, describe
from oxide.ir import ops
from oxide.ir.types import ir_type
from oxide.lang import MATH_FUNCTIONS

_MATH_ARITY = {"atan2": 2, "pow": 2, "fmod": 2, "hypot": 2, "copysign": 2, "fmin": 2,
               "fmax": 2, "fma": 3, "remainder": 2, "nextafter": 2, "ldexp": 2}
_MATH_PREDICATES = {"isnan", "isinf", "isfinite"}
# ox.math functions the frontend builds from other ops (or that return tuples).
_MATH_COMPOSED = {"degrees", "radians", "modf", "frexp", "ldexp", "gamma"}
_DEGREES = {"degrees": 180.0 / pymath.pi, "radians": pymath.pi / 180.0}  # CPython's constants

# Hints for the functions of Python's `math` module that kernels lack.
_PY_MATH_HINTS = {
    "comb": "write it as a loop in an @ox.func", "perm": "write it as a loop in an @ox.func",
    "factorial": "write it as a loop in an @ox.func",
    "gcd": "write Euclid's loop in an @ox.func", "lcm": "write Euclid's loop in an @ox.func",
    "isqrt": "use `int(ox.math.sqrt(f64(n)))` and correct it by one where needed",
    "fsum": "sum in a loop (kernels have no sequences to pass it)",
    "prod": "multiply in a loop (kernels have no sequences to pass it)",
    "sumprod": "accumulate in a loop", "dist": "use `math.hypot(dx, dy)` for two dimensions",
    "isclose": "compare `abs(a - b) <= tol * max(abs(a), abs(b))`",
    "ulp": "use `math.nextafter(x, math.inf) - x`",
}


class MathCallsMixin:
    """`ox.math.<fn>(...)` and `math.<fn>(...)` calls."""

    def call_math(self, fn: str, node: ast.Call, prefix: str = "ox.math",
                  args: list[Any] | None = None) -> Any:
        """`ox.math.<fn>(...)`; `args`, when given, are the arguments already evaluated."""
        if fn in _MATH_COMPOSED:
            return getattr(self, f"math_{fn}")(node, prefix, args)
        args = self.math_args(fn, node, prefix, args)
        dt, compute = self.math_types(fn, args, node, prefix)
        if fn == "nextafter" and compute != dt:
            raise self.error(KernelTypeError, node,
                             f"{prefix}.nextafter() on {dt.name} is not supported: it would "
                             "step by an f32 ulp", hint="convert the operands to f32 or f64")
        xs = [self.materialize(a, compute, node) for a in args]
        if fn in _MATH_PREDICATES:
            return Val(self.b.value(ops.MathOp(fn, xs, ir_type(T.bool_))), T.bool_)
        return self.math_result(fn, xs, compute, dt)

    def math_args(self, fn: str, node: ast.Call, prefix: str,
                  args: list[Any] | None) -> list[Any]:
        n = _MATH_ARITY.get(fn, 1)
        if args is None:
            return self.args_exact(node, n, f"{prefix}.{fn}()")
        if len(args) != n:
            raise self.error(KernelTypeError, node, f"{prefix}.{fn}() takes {n} argument"
                             f"{'s' if n != 1 else ''}, got {len(args)}")
        return args

    def math_types(self, fn: str, args: list[Any], node: ast.Call,
                   prefix: str) -> tuple[T.DType, T.DType]:
        """(result type, type computed in) of a math call: floats keep their type, 64-bit
        integers go to f64 and other integers to f32; f16 and bf16 compute in f32."""
        for a, a_node in zip(args, node.args, strict=False):
            if not isinstance(a, (Lit, Val, Witness)):
                raise self.error(KernelTypeError, a_node,
                                 f"{prefix}.{fn}() needs numbers, got {describe(a)}")
        dt = self.arithmetic_dtype(args, node, f"{prefix}.{fn}()")
        if not dt.is_float:
            dt = T.f64 if dt.bits == 64 else T.f32
        return dt, T.f32 if dt.bits == 16 else dt

    def math_result(self, fn: str, xs: list[Any], compute: T.DType, dt: T.DType) -> Val:
        r = self.b.value(ops.MathOp(fn, xs, ir_type(compute)))
        if compute != dt:
            r = self.b.cast(r, dt)
        return Val(r, dt)

    def math_float(self, fn: str, node: ast.Call, prefix: str,
                   args: list[Any] | None) -> tuple[Any, T.DType, T.DType]:
        """The one float argument of `fn`, in the type it computes in, and (dt, compute)."""
        (a,) = self.math_args(fn, node, prefix, args)
        dt, compute = self.math_types(fn, [a], node, prefix)
        return self.materialize(a, compute, node), dt, compute

    def math_gamma(self, node: ast.Call, prefix: str, args: list[Any] | None) -> Val:
        x, dt, compute = self.math_float("gamma", node, prefix, args)
        return self.math_result("tgamma", [x], compute, dt)

    def math_degrees(self, node: ast.Call, prefix: str, args: list[Any] | None) -> Val:
        return self.math_scaled("degrees", node, prefix, args)

    def math_radians(self, node: ast.Call, prefix: str, args: list[Any] | None) -> Val:
        return self.math_scaled("radians", node, prefix, args)

    def math_scaled(self, fn: str, node: ast.Call, prefix: str, args: list[Any] | None) -> Val:
        """`x * (180 / pi)` or `x * (pi / 180)`, one rounding, as CPython computes them."""
        x, dt, compute = self.math_float(fn, node, prefix, args)
        k = self.b.constant(_DEGREES[fn], compute)
        r = self.b.value(ops.BinaryOp("mul", x, k))
        return Val(self.b.cast(r, dt), dt)

    def math_modf(self, node: ast.Call, prefix: str, args: list[Any] | None) -> Tup:
        """(fraction, integer part), both with x's sign, as Python's: `x - trunc(x)` is exact;
        an infinity's fraction is a signed zero."""
        x, dt, compute = self.math_float("modf", node, prefix, args)
        t = ir_type(compute)
        whole = self.b.value(ops.MathOp("trunc", [x], t))
        frac = self.b.value(ops.BinaryOp("sub", x, whole))
        frac = self.b.value(ops.MathOp("copysign", [frac, x], t))
        inf = self.b.value(ops.MathOp("isinf", [x], ir_type(T.bool_)))
        zero = self.b.value(ops.MathOp("copysign", [self.b.constant(0.0, compute), x], t))
        frac = self.b.value(ops.SelectOp(inf, zero, frac))
        return Tup((Val(self.b.cast(frac, dt), dt), Val(self.b.cast(whole, dt), dt)))

    def math_frexp(self, node: ast.Call, prefix: str, args: list[Any] | None) -> Tup:
        """(mantissa in [0.5, 1) with x's sign, i32 exponent); 0, inf and NaN give (x, 0)."""
        x, dt, compute = self.math_float("frexp", node, prefix, args)
        m = self.b.value(ops.MathOp("frexp_mantissa", [x], ir_type(compute)))
        e = self.b.value(ops.MathOp("frexp_exponent", [x], ir_type(T.i32)))
        return Tup((Val(self.b.cast(m, dt), dt), Val(e, T.i32)))

    def math_ldexp(self, node: ast.Call, prefix: str, args: list[Any] | None) -> Val:
        """x * 2**e with an integer `e`, read as i32 (a 64-bit one saturates to i32's range,
        which gives the same inf or 0)."""
        a, e = self.math_args("ldexp", node, prefix, args)
        dt, compute = self.math_types("ldexp", [a], node, prefix)
        x = self.materialize(a, compute, node)
        if isinstance(e, Lit) and isinstance(e.value, int) and not isinstance(e.value, bool):
            exp = self.b.constant(max(-(2**31), min(2**31 - 1, e.value)), T.i32)
        else:
            s = self.scalar(e, node.args[1]) if isinstance(e, (Lit, Val, Witness)) else None
            if s is None or not s.dtype.is_int or s.dtype.is_bool:
                raise self.error(KernelTypeError, node.args[1],
                                 f"{prefix}.ldexp() takes an integer exponent, got "
                                 f"{describe(e) if s is None else s.dtype.name}",
                                 hint="convert it: `i32(...)`")
            exp = self.int_to_i32_saturated(s)
        return self.math_result("ldexp", [x, exp], compute, dt)

    def int_to_i32_saturated(self, s: Val) -> Any:
        v = s.ssa
        if s.dtype.bits == 64:
            hi = 2**31 - 1
            if s.dtype.is_signed:
                lo = self.b.constant(-(2**31), s.dtype)
                v = self.b.value(ops.BinaryOp("max", v, lo))
            v = self.b.value(ops.BinaryOp("min", v, self.b.constant(hi, s.dtype)))
        elif s.dtype == T.u32:
            v = self.b.value(ops.BinaryOp("min", v, self.b.constant(2**31 - 1, T.u32)))
        return self.b.cast(v, T.i32)

    # -- Python's math module ----------------------------------------------------------

    def call_python_math(self, fn: Any, node: ast.Call) -> Any:
        """`math.sqrt(x)` (or `sqrt` from `from math import sqrt`): constants fold as Python
        computes them; run-time values go to the `ox.math` function of the same name, in the
        argument's type. floor, ceil and trunc give i64, as Python gives an int."""
        name = fn.__name__
        if name not in MATH_FUNCTIONS:
            raise self.error(KernelTypeError, node.func,
                             f"`math.{name}` is not supported in kernels",
                             hint=_PY_MATH_HINTS.get(name, "kernels support the math functions "
                                                     "of `ox.math`"))
        if name == "log" and len(node.args) == 2 and not node.keywords:
            return self.python_log_base(node)
        if name == "hypot" and len(node.args) != 2:
            raise self.error(KernelTypeError, node,
                             f"math.hypot() takes 2 arguments in kernels, got {len(node.args)}",
                             hint="nest it: `math.hypot(math.hypot(x, y), z)`")
        if node.keywords:
            raise self.error(KernelSyntaxError, node.keywords[0].value,
                             f"math.{name}() takes its arguments by position")
        args = [self.expr(a) for a in node.args]
        if args and all(isinstance(a, Lit) for a in args):
            return self.fold_python_math(fn, [a.value for a in args], node)
        if name in ("floor", "ceil", "trunc"):
            return self.python_rounding(name, node, args)
        return self.call_math(name, node, "math", args)

    def fold_python_math(self, fn: Any, values: list[Any], node: ast.Call) -> Any:
        try:
            r = fn(*values)
        except (ValueError, OverflowError, TypeError) as exc:
            raise self.error(KernelTypeError, node,
                             f"`{self.text(node)}` fails in Python: {exc}",
                             hint="constant arguments are computed at compile time, as "
                             "Python computes them") from None
        if isinstance(r, tuple):
            return Tup(tuple(Lit(v) for v in r))
        return Lit(r)

    def python_rounding(self, name: str, node: ast.Call, args: list[Any]) -> Val:
        (a,) = self.math_args(name, node, "math", args)
        if not isinstance(a, (Lit, Val, Witness)):
            raise self.error(KernelTypeError, node.args[0],
                             f"math.{name}() needs a number, got {describe(a)}")
        s = self.scalar(a, node)
        self.refuse_storage(s.dtype, node, f"math.{name}()")
        if not s.dtype.is_float:
            return s  # Python returns an integer argument itself
        x = s.ssa if s.dtype.bits > 16 else self.b.cast(s.ssa, T.f32)
        r = self.b.value(ops.MathOp(name, [x], x.type))
        return Val(self.b.cast(r, T.i64), T.i64)

    def python_log_base(self, node: ast.Call) -> Val:
        """`math.log(x, base)` is `log(x) / log(base)`, as CPython computes it."""
        args = [self.expr(a) for a in node.args]
        if all(isinstance(a, Lit) for a in args):
            return self.fold_python_math(pymath.log, [a.value for a in args], node)
        dt, compute = self.math_types("log", args, node, "math")
        xs = [self.materialize(a, compute, node) for a in args]
        t = ir_type(compute)
        num = self.b.value(ops.MathOp("log", [xs[0]], t))
        den = self.b.value(ops.MathOp("log", [xs[1]], t))
        r = self.b.value(ops.BinaryOp("div", num, den))
        return Val(self.b.cast(r, dt), dt)

    # -- integer intrinsics ------------------------------------------------------------
