"""Calls: builtins, oxide intrinsics, casts, print, and inlined @ox.func calls."""

from __future__ import annotations

import ast
import builtins
import inspect
import math as pymath
from typing import Any

import numpy as np

from oxide import types as T
from oxide.errors import KernelSyntaxError, KernelTypeError, UnsupportedFeatureError
from oxide.frontend.parallel_calls import ParallelCallsMixin
from oxide.frontend.values import (
    Array,
    FixedArray,
    Lit,
    ShapeOf,
    Slot,
    Static,
    Tup,
    Val,
    Witness,
    describe,
    py_name,
)
from oxide.ir import ops
from oxide.ir.types import ir_type
from oxide.lang import MATH_FUNCTIONS
from oxide.lang.intrinsic import Intrinsic

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


class CallsMixin(ParallelCallsMixin):
    """Call lowering; mixed into FunctionLowering."""

    def expr_Call(self, node: ast.Call) -> Any:
        if isinstance(node.func, ast.Attribute) and node.func.attr == "bit_count":
            base = self.expr(node.func.value)
            if not isinstance(base, Static):
                return self.int_bit_count(base, node)
        callee = self.expr(node.func)
        if not isinstance(callee, Static):
            raise self.error(KernelTypeError, node.func,
                             f"`{self.text(node.func)}` is {describe(callee)}, not a function")
        obj = callee.obj
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
                k.arg is None for k in node.keywords):
            raise self.error(UnsupportedFeatureError, node, "`*args` and `**kwargs` are not "
                             "supported in kernels", hint="pass arguments one by one")
        if isinstance(obj, T.DType):
            return self.call_cast(obj, node)
        if getattr(obj, "__self__", None) is pymath:
            return self.call_python_math(obj, node)
        if isinstance(obj, Intrinsic):
            handler = getattr(self, "intr_" + obj.name.replace(".", "_"), None)
            if handler is None:
                raise self.error(UnsupportedFeatureError, node,
                                 f"`ox.{obj.name}` is not implemented yet in kernels")
            return handler(node)
        if obj is builtins.print:
            return self.call_print(node)
        builtin = py_name(obj)
        if getattr(builtins, str(builtin), None) is obj and builtin in (
                "len", "min", "max", "abs", "float", "int", "bool"):
            return getattr(self, f"builtin_{builtin}")(node)
        if obj is builtins.range:
            raise self.error(KernelSyntaxError, node, "range() is only allowed in `for` loops")
        from oxide.kernel import DeviceFunction, Kernel

        if isinstance(obj, DeviceFunction):
            return self.inline_call(obj, node)
        if isinstance(obj, Kernel):
            raise self.error(UnsupportedFeatureError, node,
                             f"`{obj.__name__}` is a kernel; kernels cannot call kernels",
                             hint="move the shared code into an @ox.func")
        raise self.not_callable(obj, node)

    def not_callable(self, obj: Any, node: ast.Call) -> UnsupportedFeatureError:
        """The diagnostic for calling a Python object kernels cannot call, with the hint
        that fits what it is: a math function has an `ox.math` twin, a NumPy type an
        oxide dtype, a builtin a list of the supported ones, a Python function @ox.func."""
        name = py_name(obj)
        if name in MATH_FUNCTIONS:
            hint = f"use `ox.math.{name}(...)`"
        elif isinstance(obj, type) and issubclass(obj, np.generic):
            hint = f"convert with an oxide dtype, e.g. `{_oxide_dtype_name(obj)}(...)`"
        elif getattr(builtins, name, None) is obj:
            hint = ("kernels support the builtins len, min, max, abs, range (in `for`), print, "
                    "float, int and bool")
        elif inspect.isfunction(obj):
            hint = f"decorate `{name}` with @ox.func to call it from kernels"
        else:
            hint = ""
        return self.error(UnsupportedFeatureError, node.func,
                          f"`{name}` is not an @ox.func; kernels can only call @ox.func "
                          "functions, oxide intrinsics and a few builtins", hint=hint)

    def args_exact(self, node: ast.Call, n: int | tuple[int, int], what: str) -> list[Any]:
        lo, hi = (n, n) if isinstance(n, int) else n
        if node.keywords or not lo <= len(node.args) <= hi:
            count = str(lo) if lo == hi else f"{lo} to {hi}"
            raise self.error(KernelSyntaxError, node,
                             f"{what} takes {count} positional argument{'s' if hi != 1 else ''}")
        return [self.expr(a) for a in node.args]

    def keyword_args(self, node: ast.Call, allowed: dict[str, Any]) -> dict[str, Any]:
        out = dict(allowed)
        for kw in node.keywords:
            if kw.arg not in allowed:
                raise self.error(KernelSyntaxError, kw.value,
                                 f"unexpected keyword argument `{kw.arg}`")
            out[kw.arg] = self.expr(kw.value)
        return out

    # -- builtins --------------------------------------------------------------------

    def call_cast(self, dt: T.DType, node: ast.Call) -> Val:
        (v,) = self.args_exact(node, 1, f"{dt.name}()")
        if not isinstance(v, (Lit, Val, Witness)):
            raise self.error(KernelTypeError, node, f"cannot convert {describe(v)} to {dt.name}")
        return self.convert(v, dt, node)

    def builtin_float(self, node: ast.Call) -> Val:
        return self.call_cast(T.f32, node)

    def builtin_int(self, node: ast.Call) -> Val:
        return self.call_cast(T.i32, node)

    def builtin_bool(self, node: ast.Call) -> Val:
        return self.call_cast(T.bool_, node)

    def builtin_len(self, node: ast.Call) -> Any:
        (v,) = self.args_exact(node, 1, "len()")
        if isinstance(v, Array):
            return self.array_dim(v, 0)
        if isinstance(v, FixedArray):
            return self.fixed_dim(v, 0)
        if isinstance(v, (Tup, ShapeOf)):
            return Lit(len(v.items))
        raise self.error(KernelTypeError, node, f"len() of {describe(v)}")

    def builtin_min(self, node: ast.Call) -> Any:
        return self.min_max("min", node)

    def builtin_max(self, node: ast.Call) -> Any:
        return self.min_max("max", node)

    def min_max(self, kind: str, node: ast.Call) -> Any:
        args = self.args_exact(node, (2, 8), f"{kind}()")
        if all(isinstance(a, Lit) for a in args):
            return Lit((min if kind == "min" else max)(a.value for a in args))
        dt = self.common_dtype(args, node)
        acc = self.materialize(args[0], dt, node)
        for a in args[1:]:
            acc = self.b.value(ops.BinaryOp(kind, acc, self.materialize(a, dt, node)))
        return Val(acc, dt)

    def builtin_abs(self, node: ast.Call) -> Any:
        (v,) = self.args_exact(node, 1, "abs()")
        if isinstance(v, Lit):
            return Lit(abs(v.value))
        s = self.scalar(v, node)
        if not s.dtype.is_signed and not s.dtype.is_float:
            return s
        return Val(self.b.value(ops.UnaryOp("abs", s.ssa)), s.dtype)

    def call_print(self, node: ast.Call) -> Static:
        sep, end = " ", "\n"
        for kw in node.keywords:
            if kw.arg in ("sep", "end") and isinstance(kw.value, ast.Constant) and isinstance(
                    kw.value.value, str):
                sep, end = (kw.value.value, end) if kw.arg == "sep" else (sep, kw.value.value)
            else:
                raise self.error(KernelSyntaxError, kw.value,
                                 "print() in kernels takes only `sep` and `end` string literals")
        pieces: list[str] = []
        args: list[Any] = []
        for a in node.args:
            if isinstance(a, ast.Constant) and isinstance(a.value, str):
                pieces.append(a.value.replace("%", "%%"))
                continue
            v = self.expr(a)
            if isinstance(v, Lit):
                pieces.append(str(v.value).replace("%", "%%"))
                continue
            s = self.scalar(v, a)
            if s.dtype.is_bool:
                pieces.append("%s")
            elif s.dtype.is_float:
                pieces.append("%g")
            elif s.dtype.bits == 64:
                pieces.append("%lld" if s.dtype.is_signed else "%llu")
            else:
                pieces.append("%d" if s.dtype.is_signed else "%u")
            args.append(s.ssa)
        self.b.emit(ops.PrintOp(sep.replace("%", "%%").join(pieces) + end.replace("%", "%%"),
                                args))
        return Static(None)

    # -- thread indexing -------------------------------------------------------------

    def intr_thread_index_1d(self, node: ast.Call) -> Witness:
        self.args_exact(node, 0, "thread.index_1d()")
        return Witness(self.b.value(ops.ThreadIndexOp(1)), 1)

    def intr_thread_index_2d(self, node: ast.Call) -> Witness:
        self.args_exact(node, 0, "thread.index_2d()")
        return Witness(self.b.value(ops.ThreadIndexOp(2)), 2)

    def intr_lane_id(self, node: ast.Call) -> Val:
        self.args_exact(node, 0, "ox.lane_id()")
        return Val(self.b.value(ops.RegisterOp("laneid", ir_type(T.i32))), T.i32)

    def intr_warp_id(self, node: ast.Call) -> Val:
        self.args_exact(node, 0, "ox.warp_id()")
        return Val(self.b.value(ops.RegisterOp("warpid", ir_type(T.i32))), T.i32)

    # -- synchronization -------------------------------------------------------------

    def _barrier(self, node: ast.Call, kind: str, what: str) -> Static:
        self.args_exact(node, 0, what)
        op = self.b.emit(ops.BarrierOp(kind))
        self.b.origins[op] = (*self.call_spans, self.src.span(node))  # passes/uniformity.py
        self.ctx.uses_barriers |= kind in ("block", "warp")
        return Static(None)

    def intr_sync_threads(self, node: ast.Call) -> Static:
        return self._barrier(node, "block", "ox.sync_threads()")

    def intr_sync_threads_count(self, node: ast.Call) -> Val:
        return self.sync_threads_vote("count", node)

    def intr_sync_threads_and(self, node: ast.Call) -> Val:
        return self.sync_threads_vote("and", node)

    def intr_sync_threads_or(self, node: ast.Call) -> Val:
        return self.sync_threads_vote("or", node)

    def sync_threads_vote(self, kind: str, node: ast.Call) -> Val:
        """`__syncthreads_count/and/or`: a block reduction of `pred != 0` (lang/collectives.py).
        Its barriers order every thread's earlier memory accesses before any thread's later
        ones, as `sync_threads` does, and the uniformity pass checks them the same way."""
        from oxide.lang.collectives import implementation

        what = f"ox.sync_threads_{kind}()"
        (v,) = self.args_exact(node, 1, what)
        if not isinstance(v, (Lit, Val, Witness)):
            raise self.error(KernelTypeError, node.args[0],
                             f"{what} takes a condition, not {describe(v)}")
        flag = self.b.cast(self.truth(v, node.args[0]), T.i32)
        reduce_kind = {"count": "reduce_add", "and": "reduce_min", "or": "reduce_max"}[kind]
        fn, extra = implementation(reduce_kind)
        r = self.inline_values(fn, [Val(flag, T.i32), Static(T.i32),
                                    *(Static(e) for e in extra)],
                               node, [node.args[0]] * (2 + len(extra)))
        self.b.uniform.add(r.ssa)
        if kind == "count":
            return Val(r.ssa, T.i32)
        one = self.b.value(ops.CompareOp("ne", r.ssa, self.b.constant(0, T.i32)))
        self.b.uniform.add(one)
        return Val(one, T.bool_)

    def intr_atomic_inc(self, node: ast.Call) -> Val:
        return self.atomic_wrap("inc", node)

    def intr_atomic_dec(self, node: ast.Call) -> Val:
        return self.atomic_wrap("dec", node)

    def atomic_wrap(self, kind: str, node: ast.Call) -> Val:
        """CUDA's atomicInc/atomicDec on u32: inc stores `old >= v ? 0 : old + 1`, dec stores
        `old == 0 or old > v ? v : old - 1` (LLVM's uinc_wrap/udec_wrap); returns old."""
        r = self.call_atomic(kind, node)
        if r.dtype != T.u32:
            raise self.error(KernelTypeError, node,
                             f"ox.atomic.{kind}() works on u32 arrays (CUDA's atomic"
                             f"{kind.capitalize()}), not {r.dtype.name}",
                             hint="declare the array `AtomicSlice[u32]` (or a u32 shared "
                             f"array); use ox.atomic.{'add' if kind == 'inc' else 'sub'} for "
                             "a plain count")
        return r

    def intr_sync_warp(self, node: ast.Call) -> Static:
        return self._barrier(node, "warp", "ox.sync_warp()")

    def intr_threadfence(self, node: ast.Call) -> Static:
        return self._barrier(node, "fence.device", "ox.threadfence()")

    def intr_threadfence_block(self, node: ast.Call) -> Static:
        return self._barrier(node, "fence.block", "ox.threadfence_block()")

    def intr_threadfence_system(self, node: ast.Call) -> Static:
        return self._barrier(node, "fence.system", "ox.threadfence_system()")

    # -- math ------------------------------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        if name.startswith("intr_math_") and name[10:] in MATH_FUNCTIONS:
            fn = name[10:]
            return lambda node: self.call_math(fn, node)
        if name.startswith("intr_atomic_"):
            kind = name[12:].rstrip("_")
            return lambda node: self.call_atomic(kind, node)
        if name.startswith("intr_warp_"):
            kind = name[10:]
            return lambda node: self.call_warp(kind, node)
        if name.startswith("intr_block_"):
            kind = name[11:]
            return lambda node: self.call_block(kind, node)
        raise AttributeError(name)

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
        dt = self.common_dtype(args, node)
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

    def int_arg(self, v: Any, node: ast.AST, what: str, widen: bool = True) -> Val:
        """An integer argument of an integer intrinsic; with `widen`, one narrower than 32
        bits is converted to i32 or u32 first, as C's promotion does in CUDA."""
        if isinstance(v, Lit) and isinstance(v.value, float):
            v_dt = "a float"
        elif isinstance(v, (Lit, Val, Witness)):
            s = self.scalar(v, node)
            if s.dtype.is_int and not s.dtype.is_bool:
                if widen and s.dtype.bits < 32:
                    dt = T.i32 if s.dtype.is_signed else T.u32
                    return Val(self.b.cast(s.ssa, dt), dt)
                return s
            v_dt = s.dtype.name
        else:
            v_dt = describe(v)
        raise self.error(KernelTypeError, node, f"{what} needs an integer, got {v_dt}",
                         hint="convert it: `i32(...)`, `u32(...)`, `i64(...)` or `u64(...)`")

    def int_unary(self, fn: str, node: ast.Call, ret: T.DType | None) -> Val:
        (v,) = self.args_exact(node, 1, f"ox.{fn}()")
        x = self.int_arg(v, node.args[0], f"ox.{fn}()")
        dt = ret or x.dtype
        return Val(self.b.value(ops.MathOp(fn, [x.ssa], ir_type(dt))), dt)

    def intr_popc(self, node: ast.Call) -> Val:
        return self.int_unary("popc", node, T.i32)

    def intr_clz(self, node: ast.Call) -> Val:
        return self.int_unary("clz", node, T.i32)

    def intr_ffs(self, node: ast.Call) -> Val:
        return self.int_unary("ffs", node, T.i32)

    def intr_brev(self, node: ast.Call) -> Val:
        return self.int_unary("brev", node, None)

    def intr_mulhi(self, node: ast.Call) -> Val:
        args = self.args_exact(node, 2, "ox.mulhi()")
        for a, a_node in zip(args, node.args, strict=True):
            if not isinstance(a, Lit):
                self.int_arg(a, a_node, "ox.mulhi()", widen=False)
        dt = self.common_dtype(args, node)
        if not dt.is_int or dt.is_bool:
            raise self.error(KernelTypeError, node, f"ox.mulhi() needs integers, got {dt.name}",
                             hint="convert them: `i32(...)`, `u32(...)`, `i64(...)` or `u64(...)`")
        xs = [self.materialize(a, dt, node) for a in args]
        if dt.bits < 32:
            dt = T.i32 if dt.is_signed else T.u32
            xs = [self.b.cast(x, dt) for x in xs]
        return Val(self.b.value(ops.MathOp("mulhi", xs, ir_type(dt))), dt)

    def intr_byte_perm(self, node: ast.Call) -> Val:
        args = self.args_exact(node, 3, "ox.byte_perm()")
        xs = []
        for a, a_node in zip(args, node.args, strict=True):
            if isinstance(a, Lit) and isinstance(a.value, int) and not isinstance(a.value, bool):
                if not -(2**31) <= a.value < 2**32:
                    raise self.error(KernelTypeError, a_node,
                                     f"ox.byte_perm() takes 32-bit values; {a.value} does not "
                                     "fit", hint="mask it: `x & 0xFFFFFFFF`")
                xs.append(self.b.constant(a.value & 0xFFFFFFFF, T.u32))
                continue
            x = self.int_arg(a, a_node, "ox.byte_perm()")
            if x.dtype.bits != 32:
                raise self.error(KernelTypeError, a_node,
                                 f"ox.byte_perm() takes 32-bit integers, got {x.dtype.name}",
                                 hint="convert it: `u32(...)`")
            xs.append(self.b.cast(x.ssa, T.u32))
        return Val(self.b.value(ops.MathOp("byte_perm", xs, ir_type(T.u32))), T.u32)

    def int_bit_count(self, base: Any, node: ast.Call) -> Any:
        """`x.bit_count()`, Python's meaning: the set bits of abs(x), as i32."""
        if node.args or node.keywords:
            raise self.error(KernelSyntaxError, node, "bit_count() takes no arguments")
        if isinstance(base, Lit) and isinstance(base.value, int):
            return Lit(int(base.value).bit_count())
        x = self.int_arg(base, node.func, "bit_count()", widen=False)
        v = x.ssa
        if x.dtype.is_signed:
            v = self.b.value(ops.UnaryOp("abs", v))  # abs(MIN) wraps to MIN: the right bits
        return Val(self.b.value(ops.MathOp("popc", [v], ir_type(T.i32))), T.i32)

    # -- @ox.func --------------------------------------------------------------------

    def inline_call(self, fn: Any, node: ast.Call) -> Any:
        if fn in self.call_stack:
            raise self.error(UnsupportedFeatureError, node,
                             f"`{fn.__name__}` calls itself; recursion is not supported in "
                             "kernels", hint="rewrite it as a loop")
        source = fn.source
        params = source.tree.args
        if params.vararg or params.kwarg or params.kwonlyargs or params.defaults:
            raise self.error(UnsupportedFeatureError, node,
                             f"`{fn.__name__}` uses defaults, *args or keyword-only parameters, "
                             "which @ox.func does not support")
        names = [a.arg for a in params.args]
        if node.keywords:
            raise self.error(KernelSyntaxError, node.keywords[0].value,
                             f"`{fn.__name__}` takes its arguments by position; keyword "
                             "arguments are not supported in kernels",
                             hint=f"call `{fn.__name__}({', '.join(names)})`")
        if len(node.args) != len(names):
            raise self.error(KernelTypeError, node,
                             f"`{fn.__name__}` takes {len(names)} positional "
                             f"argument{'' if len(names) == 1 else 's'}, got {len(node.args)}",
                             hint=f"call `{fn.__name__}({', '.join(names)})`")
        return self.inline_values(fn, [self.expr(a) for a in node.args], node, node.args)

    def inline_values(self, fn: Any, values: list[Any], node: ast.Call,
                      arg_nodes: list[ast.expr]) -> Any:
        """Inlines `fn` on already evaluated arguments (intrinsics built on @ox.func use it)."""
        from oxide.frontend.lower import FunctionLowering, ReturnTarget

        source = fn.source
        params = source.tree.args
        env: dict[str, Any] = {}
        for p, v, a_node in zip(params.args, values, arg_nodes, strict=True):
            if p.annotation is not None:
                v = self.bind_annotated(fn, p, v, a_node)
            env[p.arg] = v
        self.ctx.functions.add(fn)
        callee_lowering = FunctionLowering(
            self.b, source, fn.scope, self.ctx, {}, self.typevars,
            ReturnTarget(self.b.new_block(), self.declared_return_slot(fn)),
            self.call_stack + (fn,))
        callee_lowering.call_spans = (*self.call_spans, self.src.span(node))
        for name, v in env.items():
            if isinstance(v, (Val, Lit)) and not isinstance(v, Lit):
                callee_lowering.assign_name(name, v, node)
            else:
                callee_lowering.env[name] = v
        callee_lowering.lower_body(source.tree.body)
        target = callee_lowering.return_target
        assert target is not None
        returns_value = target.slot is not None or (
            bool(target.returned) and not target.returned[0][0])
        if returns_value and not self.b.terminated and self.b.reachable(self.b.block):
            last = source.tree.body[-1]
            raise callee_lowering.error(
                KernelTypeError, last,
                f"`{fn.__name__}` returns a value, but can reach its end without one",
                label="control can fall off the end after this",
                hint="return a value on every path")
        self.b.br(target.block)
        self.b.set_block(target.block)
        if target.slot is None:
            return Static(None)
        if isinstance(target.slot, Tup) or hasattr(target.slot, "items"):
            return self.read_slot_tuple(target.slot)
        return Val(self.b.value(ops.SlotReadOp(target.slot.ssa)), target.slot.dtype)

    def declared_return_slot(self, fn: Any) -> Slot | None:
        """The slot of an @ox.func's value when it declares a scalar return type
        (`-> i64`): every `return` then converts to it as an assignment would, instead
        of the first `return` deciding (`return 1` alone would make it i32)."""
        ann = fn.annotations.get("return")
        if isinstance(ann, T.TypeVar):
            ann = self.typevars.get(ann)
        if not isinstance(ann, T.DType):
            return None
        return Slot(self.b.alloc(ops.SlotOp(ir_type(ann))), ann)

    def bind_annotated(self, fn: Any, p: ast.arg, v: Any, node: ast.AST) -> Any:
        """Check an argument against the @ox.func parameter's annotation (scalars convert
        like assignments; arrays must match the declared kind, dtype and rank)."""
        ann = fn.annotations.get(p.arg)
        if isinstance(ann, T.TypeVar):
            ann = self.typevars.get(ann, ann)
        if isinstance(ann, T.ArrayType):
            dtype_ok = isinstance(ann.dtype, T.TypeVar) or (
                isinstance(v, Array) and v.type.dtype == ann.dtype)
            if not (isinstance(v, Array) and v.type.access == ann.access and dtype_ok
                    and v.type.rank == ann.rank):
                raise self.error(KernelTypeError, node,
                                 f"`{fn.__name__}` takes `{p.arg}: {ann!r}`, got {describe(v)}")
            return v
        if isinstance(ann, T.DType):
            if isinstance(v, Val) and v.dtype != ann:
                raise self.error(KernelTypeError, node,
                                 f"`{fn.__name__}` takes `{p.arg}: {ann.name}`, got "
                                 f"{v.dtype.name}", hint=f"convert: `{ann.name}(...)`")
            if isinstance(v, (Lit, Val, Witness)):
                return Val(self.materialize(v, ann, node), ann)
        return v


def is_function(obj: Any) -> bool:
    """Whether naming `obj` without calling it is surely a slip (`ox.sync_threads`):
    an oxide intrinsic, an @ox.func, a dtype's conversion, or a Python function or
    builtin. Namespaces (`ox.warp`), register groups and values are not functions."""
    from oxide.kernel import DeviceFunction

    return isinstance(obj, (Intrinsic, DeviceFunction, T.DType)) or inspect.isroutine(obj)


def _oxide_dtype_name(np_type: type) -> str:
    try:
        return T.dtype_of(np.dtype(np_type)).name
    except TypeError:
        return "f32"
