"""Emitter ops for scalar arithmetic: constants, operators, comparisons, casts, math.

Python's semantics where they differ from LLVM's: floor division and modulo take
the divisor's sign, a zero integer divisor is reported (not a trap), shifts by
the width or more give 0, float-to-int conversions saturate.
"""

from __future__ import annotations

import struct
from typing import Any

from xdsl.dialects.builtin import FloatAttr, IntegerAttr

from oxide import types as T
from oxide.errors import UnsupportedFeatureError
from oxide.ir import ops
from oxide.ir.types import dtype_of_ir

_ICMP = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}
_FCMP = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}


def float_literal(value: float, dt: T.DType) -> str:
    """LLVM's spelling of a float constant of type `dt` (hex, so it is exact)."""
    if dt.name == "f64":
        return f"0x{struct.unpack('<Q', struct.pack('<d', value))[0]:016X}"
    if dt.name == "f32":
        rounded = struct.unpack("<f", struct.pack("<f", value))[0] if abs(value) < 3.5e38 else value
        return f"0x{struct.unpack('<Q', struct.pack('<d', rounded))[0]:016X}"
    if dt.name == "f16":
        return f"0xH{struct.unpack('<H', struct.pack('<e', value))[0]:04X}"
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return "0xR%04X" % (rounded & 0xFFFF)


def float_suffix(dt: T.DType) -> str:
    """The type suffix of LLVM's float intrinsics (`llvm.floor.f32`)."""
    return {"f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64"}[dt.name]


class ArithmeticMixin:
    """Scalar ops of the Emitter (see emit.py for the helpers they use)."""

    names: dict[Any, Any]
    fast: str

    def op_ConstantOp(self, op: ops.ConstantOp) -> None:
        dt = dtype_of_ir(op.result.type)
        value = op.value
        if isinstance(value, FloatAttr):
            text = float_literal(value.value.data, dt)
        else:
            assert isinstance(value, IntegerAttr)
            iv = value.value.data
            if dt.is_bool:
                text = "true" if iv else "false"
            else:
                iv = iv - (1 << dt.bits) if iv >= (1 << (dt.bits - 1)) else iv
                text = str(iv)
        self.names[op.result] = text

    def op_SelectOp(self, op: ops.SelectOp) -> None:
        t = dtype_of_ir(op.result.type).llvm
        self.names[op.result] = self.ins(
            f"select i1 {self.v(op.cond)}, {t} {self.v(op.if_true)}, {t} {self.v(op.if_false)}")

    def op_CompareOp(self, op: ops.CompareOp) -> None:
        dt = dtype_of_ir(op.lhs.type)
        pred = op.predicate.data
        a, b = self.v(op.lhs), self.v(op.rhs)
        if dt.is_float:
            text = f"fcmp {_FCMP[pred]} {dt.llvm} {a}, {b}"
        else:
            if pred in ("eq", "ne"):
                p = pred
            else:
                p = ("s" if dt.is_signed else "u") + _ICMP[pred]
            text = f"icmp {p} {dt.llvm} {a}, {b}"
        self.names[op.result] = self.ins(text)

    def op_UnaryOp(self, op: ops.UnaryOp) -> None:
        dt = dtype_of_ir(op.result.type)
        x = self.v(op.operand)
        kind = op.kind.data
        if kind == "not":
            r = self.ins(f"xor i1 {x}, true")
        elif kind == "invert":
            r = self.ins(f"xor {dt.llvm} {x}, -1")
        elif kind == "neg":
            r = self.ins(f"fneg {dt.llvm} {x}") if dt.is_float else self.ins(f"sub {dt.llvm} 0, {x}")
        elif kind == "abs":
            if dt.is_float:
                r = self.intrinsic(f"llvm.fabs.{float_suffix(dt)}", dt.llvm, [(dt.llvm, x)])
            else:
                r = self.intrinsic(f"llvm.abs.{dt.llvm}", dt.llvm, [(dt.llvm, x), ("i1", "false")])
        else:
            raise UnsupportedFeatureError(f"unary `{kind}`")
        self.names[op.result] = r

    def op_BinaryOp(self, op: ops.BinaryOp) -> None:
        dt = dtype_of_ir(op.result.type)
        a, b = self.v(op.lhs), self.v(op.rhs)
        kind = op.kind.data
        t = dt.llvm
        if dt.is_float:
            r = self.float_binary(kind, dt, a, b)
        elif kind in ("add", "sub", "mul", "and", "or", "xor"):
            r = self.ins(f"{kind} {t} {a}, {b}")
        elif kind in ("min", "max"):
            r = self.intrinsic(f"llvm.{'s' if dt.is_signed else 'u'}{kind}.{t}", t,
                               [(t, a), (t, b)])
        elif kind in ("shl", "shr"):
            ok = self.ins(f"icmp ult {t} {b}, {dt.bits}")
            if kind == "shl":
                s = self.ins(f"shl {t} {a}, {b}")
                r = self.ins(f"select i1 {ok}, {t} {s}, {t} 0")
            elif dt.is_signed:
                amt = self.ins(f"select i1 {ok}, {t} {b}, {t} {dt.bits - 1}")
                r = self.ins(f"ashr {t} {a}, {amt}")
            else:
                s = self.ins(f"lshr {t} {a}, {b}")
                r = self.ins(f"select i1 {ok}, {t} {s}, {t} 0")
        elif kind in ("floordiv", "mod"):
            r = self.int_division(kind, dt, a, b, op)
        else:
            raise UnsupportedFeatureError(f"integer `{kind}`")
        self.names[op.result] = r

    def float_binary(self, kind: str, dt: T.DType, a: str, b: str) -> str:
        t = dt.llvm
        if kind in ("add", "sub", "mul"):
            return self.ins(f"f{kind}{self.fast} {t} {a}, {b}")
        if kind == "div":
            return self.ins(f"fdiv {t} {a}, {b}")
        if kind in ("min", "max"):
            return self.intrinsic(f"llvm.{kind}num.{float_suffix(dt)}", t, [(t, a), (t, b)])
        if kind == "floordiv":
            q = self.ins(f"fdiv {t} {a}, {b}")
            return self.intrinsic(f"llvm.floor.{float_suffix(dt)}", t, [(t, q)])
        if kind == "mod":  # Python's modulo: the result takes the divisor's sign
            r = self.ins(f"frem {t} {a}, {b}")
            nz = self.ins(f"fcmp une {t} {r}, 0.0")
            rneg = self.ins(f"fcmp olt {t} {r}, 0.0")
            bneg = self.ins(f"fcmp olt {t} {b}, 0.0")
            diff = self.ins(f"xor i1 {rneg}, {bneg}")
            fix = self.ins(f"and i1 {nz}, {diff}")
            adj = self.ins(f"fadd {t} {r}, {b}")
            return self.ins(f"select i1 {fix}, {t} {adj}, {t} {r}")
        raise UnsupportedFeatureError(f"float `{kind}`")

    def int_division(self, kind: str, dt: T.DType, a: str, b: str, op: ops.BinaryOp) -> str:
        """Python's floor division and modulo; a zero divisor is reported, not a crash."""
        t = dt.llvm
        zero = self.ins(f"icmp eq {t} {b}, 0")
        site = op.properties.get("site")
        if site is not None:
            self.report_if(zero, 3, site.data, a, b)  # type: ignore[attr-defined]
        if dt.is_signed:
            minus1 = self.ins(f"icmp eq {t} {b}, -1")
            bad = self.ins(f"or i1 {zero}, {minus1}")
            safe_b = self.ins(f"select i1 {bad}, {t} 1, {t} {b}")
            q = self.ins(f"sdiv {t} {a}, {safe_b}")
            r = self.ins(f"srem {t} {a}, {safe_b}")
            rnz = self.ins(f"icmp ne {t} {r}, 0")
            rneg = self.ins(f"icmp slt {t} {r}, 0")
            bneg = self.ins(f"icmp slt {t} {safe_b}, 0")
            diff = self.ins(f"xor i1 {rneg}, {bneg}")
            fix = self.ins(f"and i1 {rnz}, {diff}")
            if kind == "floordiv":
                q1 = self.ins(f"sub {t} {q}, 1")
                res = self.ins(f"select i1 {fix}, {t} {q1}, {t} {q}")
                neg = self.ins(f"sub {t} 0, {a}")
                res = self.ins(f"select i1 {minus1}, {t} {neg}, {t} {res}")
            else:
                r1 = self.ins(f"add {t} {r}, {safe_b}")
                res = self.ins(f"select i1 {fix}, {t} {r1}, {t} {r}")
                res = self.ins(f"select i1 {minus1}, {t} 0, {t} {res}")
        else:
            safe_b = self.ins(f"select i1 {zero}, {t} 1, {t} {b}")
            res = self.ins(f"{'udiv' if kind == 'floordiv' else 'urem'} {t} {a}, {safe_b}")
        return self.ins(f"select i1 {zero}, {t} 0, {t} {res}")

    def op_CastOp(self, op: ops.CastOp) -> None:
        src = dtype_of_ir(op.operand.type)
        dst = dtype_of_ir(op.result.type)
        self.names[op.result] = self.cast(self.v(op.operand), src, dst)

    def cast(self, x: str, src: T.DType, dst: T.DType) -> str:
        if src == dst:
            return x
        if dst.is_bool:
            if src.is_float:
                return self.ins(f"fcmp une {src.llvm} {x}, 0.0")
            return self.ins(f"icmp ne {src.llvm} {x}, 0")
        if src.is_float and dst.is_float:
            if {src.name, dst.name} == {"f16", "bf16"}:
                return self.cast(self.cast(x, src, T.f32), T.f32, dst)
            op = "fpext" if dst.bits > src.bits else "fptrunc"
            return self.ins(f"{op} {src.llvm} {x} to {dst.llvm}")
        if src.is_float:
            kind = "fptosi" if dst.is_signed else "fptoui"
            return self.intrinsic(f"llvm.{kind}.sat.{dst.llvm}.{float_suffix(src)}", dst.llvm,
                                  [(src.llvm, x)])
        if dst.is_float:
            op = "sitofp" if src.is_signed else "uitofp"
            return self.ins(f"{op} {src.llvm} {x} to {dst.llvm}")
        if dst.bits < src.bits:
            return self.ins(f"trunc {src.llvm} {x} to {dst.llvm}")
        if dst.bits == src.bits:
            return x
        op = "sext" if src.is_signed else "zext"
        return self.ins(f"{op} {src.llvm} {x} to {dst.llvm}")

    def op_MathOp(self, op: ops.MathOp) -> None:
        dt = dtype_of_ir(op.args[0].type)
        ret = dtype_of_ir(op.result.type)
        self.names[op.result] = self.t.math(self, op.fn.data, dt, ret, [self.v(a) for a in op.args])

    # -- indexing --------------------------------------------------------------------
