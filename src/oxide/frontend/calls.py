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
from oxide.frontend import device_functions
from oxide.frontend.bit_calls import BitCallsMixin
from oxide.frontend.hopper_calls import HopperCallsMixin
from oxide.frontend.math_calls import MathCallsMixin
from oxide.frontend.parallel_calls import ParallelCallsMixin
from oxide.frontend.return_target import ReturnTarget
from oxide.frontend.values import (
    Array,
    BlockPosition,
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


class CallsMixin(ParallelCallsMixin, MathCallsMixin, BitCallsMixin, HopperCallsMixin):
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
        from oxide.kernel_types import DeviceFunction, KernelBase

        if isinstance(obj, DeviceFunction):
            return self.inline_call(obj, node)
        if isinstance(obj, KernelBase):
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
        if isinstance(v, Array) and v.type.rank == 0:
            raise self.error(KernelTypeError, node, f"len() of the 0-d array `{v.name}`: it has "
                             "no dimension", hint=f"it holds one element, `{v.name}[()]`")
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
        dt = self.arithmetic_dtype(args, node, f"{kind}()")
        acc = self.materialize(args[0], dt, node)
        for a in args[1:]:
            acc = self.b.value(ops.BinaryOp(kind, acc, self.materialize(a, dt, node)))
        return Val(acc, dt)

    def builtin_abs(self, node: ast.Call) -> Any:
        (v,) = self.args_exact(node, 1, "abs()")
        if isinstance(v, Lit):
            return Lit(abs(v.value))
        s = self.scalar(v, node)
        self.refuse_storage(s.dtype, node, "abs()")
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
            if s.dtype.is_fp8:  # printed as the value it holds
                s = Val(self.b.cast(s.ssa, T.f32), T.f32)
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

    def intr_thread_in_block(self, node: ast.Call) -> Any:
        """The block-local position: the index shared arrays are proved race-free with."""
        self.args_exact(node, 0, "thread.in_block()")
        block = self.ctx.block
        if block is None:
            raise self.error(KernelTypeError, node, "thread.in_block() needs the kernel's "
                             "block shape", hint="declare it: `@ox.kernel(block=(256,))` or "
                             "`@ox.kernel(block=(32, 8))`")
        if block[2] != 1:
            raise self.error(KernelTypeError, node, "thread.in_block() is for 1-D and 2-D "
                             f"blocks; this kernel declares block={block}",
                             hint="use ox.thread_idx.x, .y and .z")
        x = Val(self.b.value(ops.RegisterOp("tid.x", ir_type(T.i32))), T.i32)
        if block[1] == 1:
            return x
        y = Val(self.b.value(ops.RegisterOp("tid.y", ir_type(T.i32))), T.i32)
        return BlockPosition((y, x))

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

    def inline_call(self, fn: Any, node: ast.Call) -> Any:
        """An @ox.func call: inlined, or, for a recursive function (frontend/
        device_functions.py), a call of its own device function."""
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
        if fn in self.call_stack or device_functions.is_recursive(self.ctx, fn):
            return device_functions.call(self, fn, node)
        return self.inline_values(fn, [self.expr(a) for a in node.args], node, node.args)

    def inline_values(self, fn: Any, values: list[Any], node: ast.Call,
                      arg_nodes: list[ast.expr]) -> Any:
        """Inlines `fn` on already evaluated arguments (intrinsics built on @ox.func use it)."""
        source = fn.source
        params = source.tree.args
        env: dict[str, Any] = {}
        for p, v, a_node in zip(params.args, values, arg_nodes, strict=True):
            if p.annotation is not None:
                v = self.bind_annotated(fn, p, v, a_node)
            env[p.arg] = v
        self.ctx.functions.add(fn)
        # the caller's own lowering class (frontend/lower.py's FunctionLowering), passed
        # down rather than imported: lower.py imports this module
        callee_lowering = type(self)(
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
        like assignments; arrays must match the declared kind, dtype and rank, if any)."""
        ann = fn.annotations.get(p.arg)
        if isinstance(ann, T.TypeVar):
            ann = self.typevars.get(ann, ann)
        if isinstance(ann, T.ArrayType):
            dtype_ok = isinstance(ann.dtype, T.TypeVar) or (
                isinstance(v, Array) and v.type.dtype == ann.dtype)
            if not (isinstance(v, Array) and v.type.access == ann.access and dtype_ok
                    and (v.type.rank == ann.rank or not ann.ranked)):
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
    from oxide.kernel_types import DeviceFunction

    return isinstance(obj, (Intrinsic, DeviceFunction, T.DType)) or inspect.isroutine(obj)


def _oxide_dtype_name(np_type: type) -> str:
    try:
        return T.dtype_of(np.dtype(np_type)).name
    except TypeError:
        return "f32"
