"""The reference semantics of oxide's scalar arithmetic, written from docs/language.md.

This module is the fuzzer's contract. It does not import oxide: every rule here is
read from the language page (weak literals, NumPy-style promotion, wrapping integers,
Python's `//` and `%`, shifts, saturating conversions, NaN-aware `min`/`max`).

Values: integers are Python ints kept in their type's range, floats are NumPy
`float32`/`float64` scalars (so f32 arithmetic rounds to f32 at every operation), and
booleans are Python bools. Types are their names (`"i32"`, `"f64"`, `"bool"`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

INTS = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
FLOATS = ("f16", "bf16", "f32", "f64")
HALVES = ("f16", "bf16")  # computed in f32 and rounded once per operation
NUMERIC = INTS + FLOATS
NP = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
      "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "f16": np.float16,
      "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64, "bool": np.bool_}
# float formats: (significand bits, smallest normal exponent, largest finite value)
FORMATS = {"f16": (11, -14, 65504.0), "bf16": (8, -126, 3.3895313892515355e38),
           "f32": (24, -126, 3.4028234663852886e38), "f64": (53, -1022, 1.7976931348623157e308)}


def bits(ty: str) -> int:
    """The width of a numeric type."""
    return 16 if ty == "bf16" else int(ty[1:])


def is_int(ty: str) -> bool:
    return ty in INTS


def is_float(ty: str) -> bool:
    return ty in FLOATS


def signed(ty: str) -> bool:
    return ty[0] == "i"


def int_range(ty: str) -> tuple[int, int]:
    """The smallest and largest value of an integer type."""
    n = bits(ty)
    return (-(1 << (n - 1)), (1 << (n - 1)) - 1) if signed(ty) else (0, (1 << n) - 1)


class NoCommonType(Exception):
    """Two types the language refuses to mix (a signed and an unsigned integer of one width)."""


def promote(a: str, b: str) -> str:
    """The common type of two typed operands (docs/language.md, "Types and literals").

    Floats win over integers and keep their own width; within a kind the wider type
    wins; a signed and an unsigned integer promote as NumPy does (i8 + u8 -> i16),
    except that one width has no common type. `i* + u64` is left undefined by the
    page (NumPy would go to f64, which the page rules out): callers never ask.
    """
    if a == b:
        return a
    if is_float(a) and is_float(b):
        if {a, b} == set(HALVES):
            return "f32"
        return a if bits(a) > bits(b) else b
    if is_float(a) or is_float(b):
        return a if is_float(a) else b
    if signed(a) == signed(b):
        return a if bits(a) > bits(b) else b
    s, u = (a, b) if signed(a) else (b, a)
    if bits(s) > bits(u):
        return s
    if bits(s) < bits(u) < 64:
        return f"i{2 * bits(u)}"
    raise NoCommonType(f"{a} and {b}")


def can_promote(a: str, b: str) -> bool:
    try:
        promote(a, b)
    except NoCommonType:
        return False
    return True


# -- conversions -------------------------------------------------------------------------

def wrap(v: int, ty: str) -> int:
    """An integer reduced into `ty` by two's-complement wraparound."""
    n = bits(ty)
    v &= (1 << n) - 1
    if signed(ty) and v >= 1 << (n - 1):
        v -= 1 << n
    return v


def round_float(x: float, ty: str) -> Any:
    """A double rounded once to float type `ty`: nearest, ties to even, subnormals kept,
    overflow to infinity (what a conversion does, docs/language.md)."""
    if ty == "f64" or math.isnan(x) or math.isinf(x) or x == 0:
        return NP[ty](x)
    p, emin, top = FORMATS[ty]
    _, e = math.frexp(abs(x))  # abs(x) = m * 2**e, 0.5 <= m < 1
    quantum = math.ldexp(1.0, max(e, emin + 1) - p)  # the spacing of `ty` near x
    r = round(abs(x) / quantum) * quantum  # exact scaling; round() ties to even
    if r > top:
        r = math.inf
    return NP[ty](math.copysign(r, x))  # exactly representable: no second rounding


def int_to_float(v: int, ty: str) -> Any:
    """An integer rounded once to float type `ty` (not through f64)."""
    p = FORMATS[ty][0]
    m = abs(v)
    shift = m.bit_length() - p
    if shift > 0:
        q, r = divmod(m, 1 << shift)
        half = 1 << (shift - 1)
        if r > half or (r == half and q & 1):
            q += 1
        m = q << shift
    return round_float(float(m if v >= 0 else -m), ty)  # m fits in p <= 53 bits: exact


def int_to_f32(v: int) -> np.float32:
    return int_to_float(v, "f32")


def to_type(v: Any, src: str, dst: str) -> Any:
    """`dst(v)`: an explicit conversion, also used for implicit promotion.

    int -> int wraps, int -> float rounds to nearest, float -> int truncates toward
    zero and saturates with NaN -> 0, float -> float rounds, anything -> bool is `!= 0`.
    """
    if dst == "bool":
        if src == "bool":
            return v
        if is_float(src):
            return bool(v != 0) or bool(np.isnan(v))
        return v != 0
    if src == "bool":
        v, src = int(v), "i32"
    if is_int(dst):
        if is_int(src):
            return wrap(v, dst)
        if np.isnan(v):
            return 0
        lo, hi = int_range(dst)
        if np.isinf(v):
            return hi if v > 0 else lo
        return max(lo, min(hi, math.trunc(float(v))))
    if is_int(src):
        return int_to_float(v, dst)
    return round_float(float(v), dst)  # a float widens exactly, or rounds once


# -- operators ---------------------------------------------------------------------------

@dataclass
class Faults:
    """Run-time faults the language reports as KernelAssertionError."""

    kinds: list[str] = field(default_factory=list)

    def add(self, kind: str) -> None:
        self.kinds.append(kind)


def _float_min_max(kind: str, a: Any, b: Any) -> Any:
    if np.isnan(a):
        return b
    if np.isnan(b):
        return a
    if a == 0 and b == 0:  # -0.0 orders below +0.0 (IEEE 754-2019 minimum/maximum)
        neg = np.signbit(a) or np.signbit(b) if kind == "min" else np.signbit(a) and np.signbit(b)
        return -abs(a) if neg else abs(a)
    return (a if a < b else b) if kind == "min" else (a if a > b else b)


def binary(kind: str, ty: str, a: Any, b: Any, faults: Faults) -> Any:
    """`a <kind> b` with both operands already of type `ty` (the promoted type).

    `div` is handled by the caller (it converts integers to a float type first).
    """
    if ty in HALVES:  # in f32, then rounded once (exact for + - * /, the page for // %)
        r = binary(kind, "f32", np.float32(a), np.float32(b), faults)
        return round_float(float(r), ty)
    if is_float(ty):
        with np.errstate(all="ignore"):
            if kind == "add":
                return a + b
            if kind == "sub":
                return a - b
            if kind == "mul":
                return a * b
            if kind == "div":
                return a / b
            if kind == "floordiv":
                return np.floor_divide(a, b)
            if kind == "mod":
                return np.remainder(a, b)
            if kind in ("min", "max"):
                return _float_min_max(kind, a, b)
        raise ValueError(f"float {kind}")
    if kind == "add":
        return wrap(a + b, ty)
    if kind == "sub":
        return wrap(a - b, ty)
    if kind == "mul":
        return wrap(a * b, ty)
    if kind in ("floordiv", "mod"):
        if b == 0:
            faults.add("integer division by zero")
            return 0
        return wrap(a // b if kind == "floordiv" else a % b, ty)
    if kind == "and":
        return wrap(a & b, ty)
    if kind == "or":
        return wrap(a | b, ty)
    if kind == "xor":
        return wrap(a ^ b, ty)
    if kind in ("shl", "shr"):
        n = bits(ty)
        amount = b & ((1 << n) - 1)  # a negative amount reads as unsigned
        if amount >= n:
            return -1 if kind == "shr" and a < 0 else 0
        return wrap(a << amount, ty) if kind == "shl" else wrap(
            (a if signed(ty) else a & ((1 << n) - 1)) >> amount, ty)
    if kind == "min":
        return min(a, b)
    if kind == "max":
        return max(a, b)
    raise ValueError(f"integer {kind}")


def div_type(ty: str) -> str:
    """The result type of `/` on operands promoted to `ty`."""
    if is_float(ty):
        return ty
    return "f64" if bits(ty) == 64 else "f32"


def unary(kind: str, ty: str, a: Any) -> Any:
    if ty in HALVES and kind in ("neg", "abs"):  # exact: flip or clear the sign
        return round_float(float(unary(kind, "f32", np.float32(a))), ty)
    if kind == "neg":
        return -a if is_float(ty) else wrap(-a, ty)
    if kind == "invert":
        return wrap(~a, ty)
    if kind == "abs":
        return np.abs(a) if is_float(ty) else wrap(abs(a), ty)
    if kind == "not":
        return not a
    raise ValueError(kind)


def compare(kind: str, a: Any, b: Any) -> bool:
    """A comparison of two values of one type (IEEE: anything with NaN is False but `!=`)."""
    return bool({"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b, "eq": a == b,
                 "ne": a != b}[kind])


def literal_value(text_value: int | float, ty: str) -> Any:
    """A weak literal's value once it takes type `ty`."""
    if is_float(ty):
        return round_float(float(text_value), ty)
    return int(text_value)


# -- comparing results -------------------------------------------------------------------

def same_bits(ty: str, expected: Any, got: Any) -> bool:
    """Bit-for-bit equality; every NaN equals every NaN (payloads and signs are free)."""
    if is_float(ty):
        e, g = NP[ty](expected), NP[ty](got)
        if np.isnan(e) or np.isnan(g):
            return bool(np.isnan(e) and np.isnan(g))
        return float_bits(ty, e) == float_bits(ty, g)
    return int(expected) == int(got)


def float_bits(ty: str, v: Any) -> int:
    """A float's bit pattern as an unsigned integer."""
    return int(np.array([v], dtype=NP[ty]).view(f"u{bits(ty) // 8}")[0])


def show(ty: str, v: Any) -> str:
    """A value as the report prints it (floats with their bit pattern)."""
    if is_float(ty):
        x = NP[ty](v)
        return f"{ty}({float(x)!r}) (0x{float_bits(ty, x):x})"
    return repr(v)
