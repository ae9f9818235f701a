"""Integer intrinsics: `ox.popc/clz/ffs/brev/mulhi/byte_perm` and `int.bit_count()`.

CUDA's __popc & co., with CUDA's argument widening (narrower ints become 32-bit first);
docs/language.md gives the result types.
"""

from __future__ import annotations

import ast
from typing import Any

from oxide import types as T
from oxide.errors import KernelSyntaxError, KernelTypeError
from oxide.frontend.values import Lit, Val, Witness, describe
from oxide.ir import ops
from oxide.ir.types import ir_type


class BitCallsMixin:
    """Integer bit intrinsics."""

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
