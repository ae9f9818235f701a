"""Emitter ops for scalar arithmetic: constants, operators, comparisons, casts, math.

Python's semantics where they differ from LLVM's: floor division and modulo take
the divisor's sign, a zero integer divisor is reported (not a trap), shifts by
the width or more give 0, float-to-int conversions saturate.
"""

from __future__ import annotations

import struct
from typing import Any

from xdsl.dialects.builtin import FloatAttr, IntegerAttr

from oxide import fp8 as fp8_values
from oxide import types as T
from oxide.codegen import fp8
from oxide.errors import UnsupportedFeatureError
from oxide.ir import ops
from oxide.ir.types import dtype_of_ir

_ICMP = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}
_FCMP = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}


def float_literal(value: float, dt: T.DType) -> str:
    """LLVM's spelling of a float constant of type `dt` (hex, so it is exact; an 8-bit
    float's is its bits as a signed `i8`)."""
    if dt.is_fp8:
        bits = fp8_values.to_bits(value, fp8_values.FORMATS[dt.name])
        return str(bits - 256 if bits & fp8_values.SIGN_BIT else bits)
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
    t: Any  # the target (codegen/nvptx.py, codegen/cpu.py)

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
        if dt.name == "bf16" and getattr(self.t, "soft_bf16", False):
            a, b, dt = self.cast(a, dt, T.f32), self.cast(b, dt, T.f32), T.f32
        if dt.is_float:
            text = f"fcmp {_FCMP[pred]} {dt.llvm} {a}, {b}"
            if hasattr(self.t, "nan_guarded_compare"):
                guarded = self.t.nan_guarded_compare(self, pred, dt, a, b, text)
                if guarded is not None:
                    self.names[op.result] = guarded
                    return
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
        elif dt.name == "bf16" and kind in ("neg", "abs") and getattr(self.t, "soft_bf16", False):
            # the sign bit, in integer code: x86's `fneg bfloat` goes through f32 and back,
            # and the way back (vcvtneps2bf16) flushes subnormals, the operand's too
            bits = self.ins(f"bitcast bfloat {x} to i16")
            bits = self.ins(f"{'xor' if kind == 'neg' else 'and'} i16 {bits}, "
                            f"{-32768 if kind == 'neg' else 32767}")
            r = self.ins(f"bitcast i16 {bits} to bfloat")
        elif kind == "neg":
            r = self.ins(f"fneg {dt.llvm} {x}") if dt.is_float else self.wrapping("sub", dt, "0", x)
        elif kind == "abs":
            if dt.is_float:
                r = self.intrinsic(f"llvm.fabs.{float_suffix(dt)}", dt.llvm, [(dt.llvm, x)])
            else:
                r = self.int_abs(dt, x)
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
        elif kind in ("add", "sub", "mul"):
            r = self.wrapping(kind, dt, a, b)
        elif kind in ("and", "or", "xor"):
            r = self.ins(f"{kind} {t} {a}, {b}")
        elif kind in ("min", "max") and dt.bits < 32 and hasattr(self.t, "narrow_min_max"):
            r = self.t.narrow_min_max(self, kind, dt, a, b)
        elif kind in ("min", "max"):
            r = self.intrinsic(f"llvm.{'s' if dt.is_signed else 'u'}{kind}.{t}", t,
                               [(t, a), (t, b)])
        elif kind in ("shl", "shr"):
            r = self.shift(kind, dt, a, b)
        elif kind in ("floordiv", "mod"):
            r = self.int_division(kind, dt, a, b, op)
        else:
            raise UnsupportedFeatureError(f"integer `{kind}`")
        self.names[op.result] = r

    def shift(self, kind: str, dt: T.DType, a: str, b: str) -> str:
        """`<<` / `>>` with the amount read as unsigned; the width or more gives 0 (or the sign).

        The obvious `select(b < width, shl(a, b), 0)` is right for 32 bits and less, but
        for 64 bits LLVM's NVPTX backend folds the select away (PTX's shl/shr clamp the
        amount) while passing only the amount's low 32 bits to the instruction, so
        `x << 2**32` became `x << 0`. For 64 bits the value is zeroed first and the
        amount masked, which leaves no select to fold and a shift that is always defined.
        """
        t = dt.llvm
        ok = self.ins(f"icmp ult {t} {b}, {dt.bits}")
        if kind == "shr" and dt.is_signed:  # sign fill: shifting by width - 1 is the same
            amount = self.ins(f"select i1 {ok}, {t} {b}, {t} {dt.bits - 1}")
            return self.ins(f"ashr {t} {a}, {amount}")
        op = "shl" if kind == "shl" else "lshr"
        if dt.bits == 64:
            value = self.ins(f"select i1 {ok}, {t} {a}, {t} 0")
            amount = self.ins(f"and {t} {b}, {dt.bits - 1}")
            return self.ins(f"{op} {t} {value}, {amount}")
        s = self.wrapping("shl", dt, a, b) if op == "shl" else self.ins(f"{op} {t} {a}, {b}")
        return self.ins(f"select i1 {ok}, {t} {s}, {t} 0")

    def float_binary(self, kind: str, dt: T.DType, a: str, b: str) -> str:
        t = dt.llvm
        if dt.name == "bf16" and getattr(self.t, "soft_bf16", False) and kind != "floordiv" \
                and kind != "mod":  # one f32 operation, rounded once: exact bf16 arithmetic
            wide = self.float_binary(kind, T.f32, self.cast(a, dt, T.f32), self.cast(b, dt, T.f32))
            return self.cast(wide, T.f32, dt)
        if kind in ("add", "sub", "mul"):
            return self.ins(f"f{kind}{self.fast} {t} {a}, {b}")
        if kind == "div":
            if dt.name == "f32" and self.call_free_division:
                return self.call_free_divide(a, b)
            return self.ins(f"fdiv {t} {a}, {b}")
        if kind in ("min", "max"):  # IEEE 754-2019 minimumNumber: NaN loses, -0.0 < +0.0
            own = getattr(self.t, "float_min_max", None)  # the CPU's (see codegen/cpu_sync.py)
            if own is not None:
                return own(self, kind, dt, a, b)
            return self.intrinsic(f"llvm.{kind}imumnum.{float_suffix(dt)}", t, [(t, a), (t, b)])
        if kind in ("floordiv", "mod"):
            return self.float_divmod(kind, dt, a, b)
        raise UnsupportedFeatureError(f"float `{kind}`")

    def call_free_divide(self, a: str, b: str) -> str:
        """f32 `a / b`, correctly rounded, with no call (what `div.rn.f32` has: its slow path
        is a subroutine, and any call makes ptxas serialize a kernel's wgmma, C7509).

        In f64 (exact for f32 operands): the reciprocal's approximation refined by three
        Newton steps, the quotient corrected once by its exact remainder (an fma), which
        gives the f64 quotient to within its last bit, exact where it is representable;
        then rounded to f32. Rounding twice is harmless here: an f32 quotient is never
        within 2**-49 (relative) of an f32 rounding boundary unless it lies on it, and
        f64 carries 53 bits, more than the 2 * 24 + 2 that makes the second rounding give
        the correctly rounded f32 (results in the subnormal range have fewer bits still).
        Zeros, infinities and NaNs take the reciprocal's product, whose IEEE rules give
        the quotient's (x / 0 is inf or NaN, x / inf is 0, inf / x is inf); a NaN comes
        out as the GPU's canonical one."""
        a64 = self.ins(f"fpext float {a} to double")
        b64 = self.ins(f"fpext float {b} to double")
        r = self.intrinsic("llvm.nvvm.rcp.approx.ftz.d", "double", [("double", b64)])
        special_q = self.ins(f"fmul double {a64}, {r}")
        nb = self.ins(f"fneg double {b64}")
        fma = "llvm.fma.f64"
        for _ in range(3):
            e = self.intrinsic(fma, "double", [("double", nb), ("double", r), ("double", "1.0")])
            r = self.intrinsic(fma, "double", [("double", r), ("double", e), ("double", r)])
        q = self.ins(f"fmul double {a64}, {r}")
        rem = self.intrinsic(fma, "double", [("double", nb), ("double", q), ("double", a64)])
        q = self.intrinsic(fma, "double", [("double", rem), ("double", r), ("double", q)])
        checks = []
        for x in (a, b):
            size = self.intrinsic("llvm.fabs.f32", "float", [("float", x)])
            checks.append(self.ins(f"fcmp oeq float {x}, 0.0"))
            checks.append(self.ins(f"fcmp ueq float {size}, 0x7FF0000000000000"))  # inf, NaN
        special = checks[0]
        for c in checks[1:]:
            special = self.ins(f"or i1 {special}, {c}")
        q = self.ins(f"select i1 {special}, double {special_q}, double {q}")
        return self.ins(f"fptrunc double {q} to float")

    def float_divmod(self, kind: str, dt: T.DType, a: str, b: str) -> str:
        """Python's float `//` and `%`, bit for bit: NumPy's `npy_divmod` (CPython's too).

        Both start from the exact remainder `fmod(a, b)` (libdevice's `__nv_fmod[f]` on
        the GPU, libm on the CPU; LLVM's `frem` lowers on NVPTX to a - trunc(a/b)*b,
        which is wrong once the quotient passes 2^24), then move it to the divisor's
        sign; the quotient is `(a - mod) / b` snapped to the integer it must be. A zero
        divisor gives NumPy's `a / b` and `fmod(a, 0)` (inf or nan). f16 and bf16 are
        computed in f32 and rounded once, as NumPy does for float16.
        """
        if dt.bits == 16:
            wide = self.float_divmod(kind, T.f32, self.cast(a, dt, T.f32),
                                     self.cast(b, dt, T.f32))
            return self.cast(wide, T.f32, dt)
        t, sfx = dt.llvm, float_suffix(dt)
        mod = self.t.math(self, "fmod", dt, dt, [a, b])
        b_zero = self.ins(f"fcmp oeq {t} {b}, 0.0")
        quotient = self.ins(f"fdiv {t} {a}, {b}")
        mod_nz = self.ins(f"fcmp une {t} {mod}, 0.0")  # nan counts as non-zero, as in C
        b_neg = self.ins(f"fcmp olt {t} {b}, 0.0")
        mod_neg = self.ins(f"fcmp olt {t} {mod}, 0.0")
        other_sign = self.ins(f"xor i1 {b_neg}, {mod_neg}")
        fix = self.ins(f"and i1 {mod_nz}, {other_sign}")  # mod += b; div -= 1
        if kind == "mod":
            moved = self.ins(f"fadd {t} {mod}, {b}")
            signed_zero = self.intrinsic(f"llvm.copysign.{sfx}", t, [(t, "0.0"), (t, b)])
            r = self.ins(f"select i1 {fix}, {t} {moved}, {t} {mod}")
            r = self.ins(f"select i1 {mod_nz}, {t} {r}, {t} {signed_zero}")
            return self.ins(f"select i1 {b_zero}, {t} {mod}, {t} {r}")
        exact = self.ins(f"fsub {t} {a}, {mod}")
        div = self.ins(f"fdiv {t} {exact}, {b}")
        less = self.ins(f"fsub {t} {div}, 1.0")
        div = self.ins(f"select i1 {fix}, {t} {less}, {t} {div}")
        floor = self.intrinsic(f"llvm.floor.{sfx}", t, [(t, div)])
        frac = self.ins(f"fsub {t} {div}, {floor}")
        up = self.ins(f"fcmp ogt {t} {frac}, 0.5")
        floor_up = self.ins(f"fadd {t} {floor}, 1.0")
        snapped = self.ins(f"select i1 {up}, {t} {floor_up}, {t} {floor}")
        div_nz = self.ins(f"fcmp une {t} {div}, 0.0")
        signed_zero = self.intrinsic(f"llvm.copysign.{sfx}", t, [(t, "0.0"), (t, quotient)])
        q = self.ins(f"select i1 {div_nz}, {t} {snapped}, {t} {signed_zero}")
        return self.ins(f"select i1 {b_zero}, {t} {quotient}, {t} {q}")

    def wrapping(self, kind: str, dt: T.DType, a: str, b: str) -> str:
        """`add`, `sub`, `mul` or `shl` that wraps around the type (docs/language.md)."""
        if dt.bits == 16 and hasattr(self.t, "wrapping_16"):
            return self.t.wrapping_16(self, kind, dt, a, b)
        return self.ins(f"{kind} {dt.llvm} {a}, {b}")

    def int_abs(self, dt: T.DType, x: str) -> str:
        """`abs` of an integer; `abs` of the minimum is the minimum (it wraps)."""
        if dt.bits >= 16 and hasattr(self.t, "int_abs"):
            return self.t.int_abs(self, dt, x)
        return self.intrinsic(f"llvm.abs.{dt.llvm}", dt.llvm, [(dt.llvm, x), ("i1", "false")])

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
                neg = self.wrapping("sub", dt, "0", a)  # -MIN wraps to MIN
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
        if src.is_fp8 or dst.is_fp8:  # in integer code, the same bits on every target
            return fp8.cast(self, x, src, dst)
        if src.name == "bf16" and (dst.is_float or getattr(self.t, "soft_bf16", False)):
            # never `fpext bfloat`: InstCombine shrinks `fptrunc(fdiv(fpext bf16 a, ...))
            # to half` into a half division, as if bf16 fit in half (LLVM 20)
            wide = self.widen_bf16(x)
            return wide if dst.name == "f32" else self.cast(wide, T.f32, dst)
        if dst.is_bool:
            if src.is_float:
                return self.ins(f"fcmp une {src.llvm} {x}, 0.0")
            return self.ins(f"icmp ne {src.llvm} {x}, 0")
        if src.is_float and dst.name == "bf16" and getattr(self.t, "soft_bf16", False):
            return self.round_to_bf16(x, src)
        if src.name == "f64" and dst.name == "f16" and getattr(self.t, "soft_f16", False):
            # LLVM calls compiler-rt's __truncdfhf2 here, which the host JIT lacks; f32
            # rounded to odd keeps enough bits that the second rounding is the only one
            return self.ins(f"fptrunc float {self.f64_to_f32_odd(x)} to half")
        if src.is_float and dst.is_float:
            if {src.name, dst.name} == {"f16", "bf16"}:
                return self.cast(self.cast(x, src, T.f32), T.f32, dst)
            op = "fpext" if dst.bits > src.bits else "fptrunc"
            return self.ins(f"{op} {src.llvm} {x} to {dst.llvm}")
        if src.is_float:
            kind = "fptosi" if dst.is_signed else "fptoui"
            return self.intrinsic(f"llvm.{kind}.sat.{dst.llvm}.{float_suffix(src)}", dst.llvm,
                                  [(src.llvm, x)])
        if dst.name == "bf16" and src.is_int:
            # one rounding, on every target (NVPTX on sm_80 goes through f32, rounding
            # twice): through f32 or f64, where the value is exact (64-bit ones are made so)
            if src.bits == 64:
                return self.cast(self.int64_exact_in_f64(x, src), T.f64, dst)
            wide = T.f64 if src.bits == 32 else T.f32
            return self.cast(self.cast(x, src, wide), wide, dst)
        if dst.is_float:
            op = "sitofp" if src.is_signed else "uitofp"
            if dst.name == "f16" and src.bits >= 32:
                x = self.clamp_to_f16_range(x, src)
            return self.ins(f"{op} {src.llvm} {x} to {dst.llvm}")
        if dst.bits < src.bits:
            return self.ins(f"trunc {src.llvm} {x} to {dst.llvm}")
        if dst.bits == src.bits:
            return x
        op = "sext" if src.is_signed else "zext"
        return self.ins(f"{op} {src.llvm} {x} to {dst.llvm}")

    def clamp_to_f16_range(self, x: str, src: T.DType) -> str:
        """`x` clamped to [-65520, 65520], which converts to f16 as `x` does: every
        integer from 65520 up rounds to +inf (65520 is halfway to 2^16 and rounds to even).

        Without it LLVM's InstCombine folds `fpext(sitofp x to half)` into `sitofp x to
        float` whenever `x` has at most 11 significant bits, taking the f16 step as exact
        even where the value overflows f16 (`f32(f16(1 << 16))` gave 65536.0, not inf). A
        clamped value with at most 11 significant bits is at most 65504, which f16 holds,
        so the fold is then right."""
        t = src.llvm
        if src.is_signed:
            x = self.intrinsic(f"llvm.smax.{t}", t, [(t, x), (t, "-65520")])
            return self.intrinsic(f"llvm.smin.{t}", t, [(t, x), (t, "65520")])
        return self.intrinsic(f"llvm.umin.{t}", t, [(t, x), (t, "65520")])

    def int64_exact_in_f64(self, x: str, src: T.DType) -> str:
        """A 64-bit int as an f64 that rounds to bf16 (or f32) as the int itself would.

        Past 40 significant bits, the bits below the top 40 are folded into one sticky
        bit, so the value fits f64's 53 bits exactly and a later rounding is the only one.
        """
        neg = self.ins(f"icmp slt i64 {x}, 0") if src.is_signed else "false"
        mag = self.int_abs(T.i64, x) if src.is_signed else x
        lz = self.intrinsic("llvm.ctlz.i64", "i64", [("i64", mag), ("i1", "false")])
        drop = self.ins(f"sub i64 24, {lz}")  # bit length - 40
        drop = self.intrinsic("llvm.smax.i64", "i64", [("i64", drop), ("i64", "0")])
        kept = self.ins(f"lshr i64 {mag}, {drop}")
        low = self.ins(f"shl i64 {kept}, {drop}")
        sticky = self.ins(f"icmp ne i64 {low}, {mag}")
        sticky = self.ins(f"zext i1 {sticky} to i64")
        kept = self.ins(f"or i64 {kept}, {sticky}")
        kept = self.ins(f"shl i64 {kept}, {drop}")
        wide = self.ins(f"uitofp i64 {kept} to double")
        negated = self.ins(f"fneg double {wide}")
        return self.ins(f"select i1 {neg}, double {negated}, double {wide}")

    def widen_bf16(self, x: str) -> str:
        """A bf16 as the f32 with the same value, in integer code (its bits, shifted up).

        On the CPU, LLVM's own bf16 `fcmp` (and `fpext` folded into it) flushes subnormals
        to zero on hosts with AVX512-BF16, so `bf16(0) > -1e-40` was false; the GPU keeps
        them. Everything that reads a bf16 on such a target goes through here.
        """
        bits = self.ins(f"bitcast bfloat {x} to i16")
        bits = self.ins(f"zext i16 {bits} to i32")
        bits = self.ins(f"shl i32 {bits}, 16")
        return self.ins(f"bitcast i32 {bits} to float")

    def f64_to_f32_odd(self, x: str) -> str:
        """An f64 rounded to f32 toward odd: an inexact result gets an odd last bit.

        f32 has at least two bits more than f16 and bf16, so rounding this to either one
        (to nearest) gives the f64 rounded once. Beyond f32's range it gives the largest
        finite f32 (odd), which then overflows as the f64 would; NaN stays NaN.
        """
        near = self.ins(f"fptrunc double {x} to float")
        back = self.ins(f"fpext float {near} to double")
        inexact = self.ins(f"fcmp one double {back}, {x}")
        bits = self.ins(f"bitcast float {near} to i32")
        even = self.ins(f"and i32 {bits}, 1")
        even = self.ins(f"icmp eq i32 {even}, 0")
        fix = self.ins(f"and i1 {inexact}, {even}")
        mag_back = self.intrinsic("llvm.fabs.f64", "double", [("double", back)])
        mag_x = self.intrinsic("llvm.fabs.f64", "double", [("double", x)])
        above = self.ins(f"fcmp ogt double {mag_back}, {mag_x}")
        step = self.ins(f"select i1 {above}, i32 -1, i32 1")
        odd = self.ins(f"add i32 {bits}, {step}")
        bits = self.ins(f"select i1 {fix}, i32 {odd}, i32 {bits}")
        return self.ins(f"bitcast i32 {bits} to float")

    def round_to_bf16(self, x: str, src: T.DType) -> str:
        """A float rounded to bf16 (nearest, ties to even; subnormals kept) in integer code.

        For targets whose own conversion flushes subnormals to zero: x86's vcvtneps2bf16
        (which LLVM uses wherever AVX512-BF16 exists) does, where the GPU's cvt.rn.bf16
        does not. An f64 goes to f32 rounding to odd first, so it is rounded only once.
        """
        if src.name in ("f16", "bf16"):
            x = self.cast(x, src, T.f32)
        elif src.name == "f64":
            x = self.f64_to_f32_odd(x)
        bits = self.ins(f"bitcast float {x} to i32")
        high = self.ins(f"lshr i32 {bits}, 16")
        lsb = self.ins(f"and i32 {high}, 1")
        bias = self.ins(f"add i32 {lsb}, 32767")
        rounded = self.ins(f"add i32 {bits}, {bias}")
        rounded = self.ins(f"lshr i32 {rounded}, 16")
        nan = self.ins(f"fcmp uno float {x}, 0.0")
        quiet = self.ins(f"or i32 {high}, 64")
        half = self.ins(f"select i1 {nan}, i32 {quiet}, i32 {rounded}")
        half = self.ins(f"trunc i32 {half} to i16")
        return self.ins(f"bitcast i16 {half} to bfloat")

    def op_MathOp(self, op: ops.MathOp) -> None:
        dt = dtype_of_ir(op.args[0].type)
        ret = dtype_of_ir(op.result.type)
        self.names[op.result] = self.t.math(self, op.fn.data, dt, ret, [self.v(a) for a in op.args])

    # -- indexing --------------------------------------------------------------------
