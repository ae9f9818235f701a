"""The literal and promotion rules of DESIGN.md.

- Literals are weak: they take the type of the typed operand they meet
  (`x * 0.5` with `x: f32` stays f32; `n + 1` with `n: u32` stays u32).
- Alone, an int literal is i32 (i64 if it does not fit), a float literal f32.
- Typed operands promote as NumPy does (f32+f64 -> f64, i32+i64 -> i64,
  i8+u16 -> i32, int+float -> the float); signed/unsigned mixes of one width
  are an error rather than a silent 64-bit widening.
- Except for `&`, `|` and `^`: on integers of one width they give the same bits
  whichever signedness is picked, so `mask_u32 & lane_bits_i32` is the unsigned
  type (C's usual conversions), with no cast (`bitwise_dtype`).
- 8-bit floats are storage types: they meet only themselves (a choice between two
  values, a merge of one variable), and literals take them as they take any float
  type; arithmetic on them is refused where it is written (`storage_error`).
"""

from __future__ import annotations

import math

from oxide import fp8
from oxide import types as T

_FLOAT_MAX = {"f16": 65504.0, "bf16": 3.3895313892515355e38, "f32": 3.4028234663852886e38,
              "f64": 1.7976931348623157e308}


class PromotionError(Exception):
    """Two operand types with no safe common type; the message says which, the hint
    (where it is not the usual "convert one side") what to write instead."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


def storage_hint(dt: T.DType, tile: bool = False) -> str:
    """What to write instead of arithmetic on the 8-bit float `dt`."""
    example = "x.astype(f32)" if tile else "f32(x)"
    return f"{dt.name} is a storage type: convert it first, e.g. `{example}`"


def storage_error(dt: T.DType, what: str) -> str:
    """The message for `what` (an operation) on the 8-bit float `dt`."""
    return (f"{what} on {dt.name}: 8-bit floats are storage types (loads, stores and "
            "conversions), with no arithmetic")


def literal_dtype(value: int | float | bool) -> T.DType:
    """The type of a literal standing alone."""
    if isinstance(value, bool):
        return T.bool_
    if isinstance(value, int):
        return T.i32 if -(2**31) <= value < 2**31 else T.i64
    return T.f32


def literal_fits(value: int | float | bool, dt: T.DType) -> bool:
    """Whether a weak literal can take `dt` without changing its value."""
    if dt.is_bool:
        return isinstance(value, bool) or value in (0, 1)
    if dt.is_fp8:  # rounded as a conversion would, but never saturated (nor an infinity)
        nan = isinstance(value, float) and math.isnan(value)
        return nan or abs(value) <= fp8.FORMATS[dt.name].max_finite
    if dt.is_float:
        # Floats take any literal their range holds; a huge int (2**2000) is an
        # error here rather than an OverflowError or a silent inf later.
        try:
            return math.isnan(value) or math.isinf(value) or abs(float(value)) <= _FLOAT_MAX[dt.name]
        except OverflowError:
            return False
    if isinstance(value, float):
        return False
    lo, hi = (-(2 ** (dt.bits - 1)), 2 ** (dt.bits - 1)) if dt.is_signed else (0, 2**dt.bits)
    return lo <= int(value) < hi


def promote(a: T.DType, b: T.DType) -> T.DType:
    """The common type of two typed operands."""
    if a == b:
        return a
    if a.is_fp8 or b.is_fp8:
        storage = a if a.is_fp8 else b
        raise PromotionError(f"{a.name} and {b.name} have no common type: 8-bit floats are "
                             "storage types", hint=storage_hint(storage))
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    if a.is_float and b.is_float:
        if {a.name, b.name} == {"f16", "bf16"}:
            return T.f32
        return a if a.bits > b.bits else b
    if a.is_float or b.is_float:
        return a if a.is_float else b
    if a.kind == b.kind:
        return a if a.bits > b.bits else b
    signed, unsigned = (a, b) if a.is_signed else (b, a)
    if signed.bits > unsigned.bits:
        return signed
    if signed.bits < unsigned.bits < 64:
        return T.SCALARS[f"i{unsigned.bits * 2}"]
    raise PromotionError(
        f"mixing {a.name} and {b.name}: signed and unsigned integers of "
        f"{'one width' if a.bits == b.bits else 'these widths'} have no common type")


def bitwise_dtype(a: T.DType, b: T.DType) -> T.DType | None:
    """The type of `a & b`, `a | b`, `a ^ b` where the usual promotion has none: integers
    of one width and different signedness give the unsigned type. Why it is safe: a
    bitwise operation acts on each bit alone, so reading either operand as the other
    type changes no bit of the result; only its interpretation, and C's usual
    arithmetic conversions pick the unsigned one. None: promote as usual."""
    if (a.is_int and b.is_int and not a.is_bool and not b.is_bool and a.bits == b.bits
            and a.is_signed != b.is_signed):
        return b if a.is_signed else a
    return None


def literal_with(value: int | float | bool, other: T.DType) -> T.DType:
    """The type a weak literal takes next to a typed operand of type `other`."""
    if isinstance(value, bool):
        return other
    if other.is_bool:
        return literal_dtype(value)
    if isinstance(value, float) and not other.is_float and not other.is_fp8:
        return T.f64 if other.bits == 64 else T.f32
    return other
