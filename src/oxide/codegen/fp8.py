"""Conversions to and from the 8-bit floats (f8e4m3, f8e5m2), in integer code.

An 8-bit float is an `i8` in LLVM: its bits. `Emitter.cast` hands every conversion that
involves one to `cast` here, which computes it with integer operations (and one exact
`uitofp`), so the CPU and every GPU give the same bits, and no target's own conversion
(sm_89+'s `cvt.*.e4m3x2`, none before) decides the result. The rule is oxide/fp8.py's:

- from an 8-bit float: exact, through f32 (`to_f32`), which holds every value of both
  formats; NaNs become f32's quiet NaN of the same sign (as ml_dtypes gives);
- to an 8-bit float: one rounding to nearest even from the source value (`from_float`,
  on the source's own bits: f32 for f16/bf16/f32, which widen to it exactly, f64 for f64
  and integers), saturating at the largest finite value (infinities too), NaN to 0x7F.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Protocol

from oxide import types as T
from oxide.fp8 import FORMATS, NAN_BITS, SIGN_BIT, Fp8Format


class _Emitter(Protocol):
    """The Emitter's part these functions use (codegen/emit.py)."""

    def ins(self, text: str) -> str: ...
    def intrinsic(self, name: str, ret: str, args: list[tuple[str, str]]) -> str: ...
    def cast(self, x: str, src: T.DType, dst: T.DType) -> str: ...


@dataclass(frozen=True)
class _Wide:
    """An IEEE binary format an 8-bit float is rounded from (f32 or f64)."""

    dtype: T.DType
    int: str  # the integer type of its bits
    bits: int
    mantissa_bits: int
    bias: int

    def bits_of(self, value: float) -> int:
        return struct.unpack(f"<{'I' if self.bits == 32 else 'Q'}",
                             struct.pack(f"<{'f' if self.bits == 32 else 'd'}", value))[0]


_F32 = _Wide(T.f32, "i32", 32, 23, 127)
_F64 = _Wide(T.f64, "i64", 64, 52, 1023)


def cast(em: _Emitter, x: str, src: T.DType, dst: T.DType) -> str:
    """`x` of type `src` converted to `dst`, one of them an 8-bit float (the other may be
    one too: e4m3 <-> e5m2 goes through f32 exactly, then rounds once)."""
    if src.is_fp8:
        if dst.is_bool:  # as floats: NaN is true, both zeros false
            mag = em.ins(f"and i8 {x}, {NAN_BITS}")
            return em.ins(f"icmp ne i8 {mag}, 0")
        wide = to_f32(em, x, FORMATS[src.name])
        return em.cast(wide, T.f32, dst)
    fmt = FORMATS[dst.name]
    if src.name in ("f16", "bf16", "f32"):
        return from_float(em, em.cast(x, src, T.f32), _F32, fmt)
    # f64 from its own bits. An integer goes to f64 first, exact below 2**53; at or above
    # that it saturates whichever way f64 rounds it (f64 rounding is monotone and keeps it
    # far beyond the largest 8-bit float), so it too is rounded once in effect.
    return from_float(em, em.cast(x, src, T.f64), _F64, fmt)


def to_f32(em: _Emitter, x: str, fmt: Fp8Format) -> str:
    """The f32 holding the value of the 8-bit float `x` (exactly).

    A normal value moves its exponent and mantissa fields into f32's, the exponent
    rebiased by adding to the bits. A subnormal is `mantissa * 2**(min_exponent - m)`:
    the mantissa as an f32 (`uitofp`, exact for so small an integer), its exponent field
    lowered by `m - min_exponent` (still a normal f32).
    """
    m = fmt.mantissa_bits
    byte = em.ins(f"zext i8 {x} to i32")
    mag = em.ins(f"and i32 {byte}, {NAN_BITS}")
    sign = em.ins(f"and i32 {byte}, {SIGN_BIT}")
    sign = em.ins(f"shl i32 {sign}, 24")
    normal = em.ins(f"shl i32 {mag}, {23 - m}")
    normal = em.ins(f"add i32 {normal}, {(127 - fmt.bias) << 23}")
    small = em.ins(f"uitofp i32 {mag} to float")
    small = em.ins(f"bitcast float {small} to i32")
    small = em.ins(f"sub i32 {small}, {(m - fmt.min_exponent) << 23}")
    is_zero = em.ins(f"icmp eq i32 {mag}, 0")
    small = em.ins(f"select i1 {is_zero}, i32 0, i32 {small}")
    is_small = em.ins(f"icmp ult i32 {mag}, {1 << m}")
    bits = em.ins(f"select i1 {is_small}, i32 {small}, i32 {normal}")
    if fmt.has_infinity:  # the top exponent: infinity (mantissa 0) or NaN
        top = ((1 << fmt.exponent_bits) - 1) << m
        is_inf = em.ins(f"icmp eq i32 {mag}, {top}")
        bits = em.ins(f"select i1 {is_inf}, i32 {_F32.bits_of(float('inf'))}, i32 {bits}")
        is_nan = em.ins(f"icmp ugt i32 {mag}, {top}")
    else:
        is_nan = em.ins(f"icmp eq i32 {mag}, {NAN_BITS}")
    bits = em.ins(f"select i1 {is_nan}, i32 {0x7FC00000}, i32 {bits}")
    bits = em.ins(f"or i32 {bits}, {sign}")
    return em.ins(f"bitcast i32 {bits} to float")


def from_float(em: _Emitter, x: str, wide: _Wide, fmt: Fp8Format) -> str:
    """The f32 or f64 `x` rounded once to the 8-bit float `fmt` (nearest, ties to even),
    saturated at its largest finite value, NaN to 0x7F.

    On the magnitude's bits: clamped to the largest finite value's bits (a float's bits
    order as its magnitude does, so infinities and everything above saturate), then
    shifted right with rounding to `fmt`'s mantissa. A normal result keeps the whole
    pattern, its exponent rebiased by a subtraction, and a carry out of the mantissa
    steps to the next exponent as it should. A subnormal result shifts the significand
    (the implicit bit made explicit) further, by how far its exponent is below the
    smallest normal one; the shift is capped at the width - 1, which already leaves
    nothing (and a subnormal source, far below half the smallest 8-bit subnormal, gives
    zero whatever its made-up implicit bit).
    """
    it, width, mb = wide.int, wide.bits, wide.mantissa_bits
    bits = em.ins(f"bitcast {wide.dtype.llvm} {x} to {it}")
    mag = em.ins(f"and {it} {bits}, {(1 << (width - 1)) - 1}")
    is_nan = em.ins(f"icmp ugt {it} {mag}, {wide.bits_of(float('inf'))}")
    mag = em.intrinsic(f"llvm.umin.{it}", it,
                       [(it, mag), (it, str(wide.bits_of(fmt.max_finite)))])
    exponent = em.ins(f"lshr {it} {mag}, {mb}")
    min_normal = wide.bias + fmt.min_exponent  # the source exponent field of fmt's 2**emin
    is_normal = em.ins(f"icmp uge {it} {exponent}, {min_normal}")
    rebased = em.ins(f"sub {it} {mag}, {(wide.bias - fmt.bias) << mb}")
    significand = em.ins(f"and {it} {mag}, {(1 << mb) - 1}")
    significand = em.ins(f"or {it} {significand}, {1 << mb}")
    below = em.ins(f"sub {it} {min_normal + mb - fmt.mantissa_bits}, {exponent}")
    below = em.intrinsic(f"llvm.umin.{it}", it, [(it, below), (it, str(width - 1))])
    value = em.ins(f"select i1 {is_normal}, {it} {rebased}, {it} {significand}")
    shift = em.ins(f"select i1 {is_normal}, {it} {mb - fmt.mantissa_bits}, {it} {below}")
    rounded = _shift_right_to_even(em, it, value, shift)
    sign = em.ins(f"lshr {it} {bits}, {width - 8}")
    sign = em.ins(f"and {it} {sign}, {SIGN_BIT}")
    rounded = em.ins(f"or {it} {rounded}, {sign}")
    rounded = em.ins(f"select i1 {is_nan}, {it} {NAN_BITS}, {it} {rounded}")
    return em.ins(f"trunc {it} {rounded} to i8")


def _shift_right_to_even(em: _Emitter, it: str, value: str, shift: str) -> str:
    """`value >> shift` (shift >= 1), rounded to nearest, ties to even: adding half a
    step less one, plus the kept part's last bit, carries exactly when the dropped part
    is above half, or half with an odd kept part. `value` stays below 2**(width - 1),
    so the sum does not overflow."""
    kept = em.ins(f"lshr {it} {value}, {shift}")
    odd = em.ins(f"and {it} {kept}, 1")
    less = em.ins(f"sub {it} {shift}, 1")
    half = em.ins(f"shl {it} 1, {less}")
    bias = em.ins(f"sub {it} {half}, 1")
    bias = em.ins(f"add {it} {bias}, {odd}")
    total = em.ins(f"add {it} {value}, {bias}")
    return em.ins(f"lshr {it} {total}, {shift}")
