"""Constant folding with bounds, and explicit conversions of constants.

Constant expressions (`1 << 20`, `2 ** 10`, a module constant times two) fold at
compile time as Python evaluates them, so a kernel means what the same expression
means on the host. Python's integers are unbounded, though, and a user can ask
for `2 ** 2 ** 40`: that must be a diagnostic, not a compiler that runs out of
memory. So every folded integer stays within `FOLD_BITS` bits, and the operators
that could build a huge one (`**`, `<<`) are refused *before* Python evaluates
them. 128 bits leave room for idioms such as `(1 << 64) - 1` (u64's maximum); a
value still has to fit its kernel type where it is used (64 bits at most).

Conversions of constants (`i32(NAN)`, `f32(1e300)`) follow the run-time
conversions of docs/language.md, so folding never changes a result:
float-to-integer saturates and NaN gives 0; conversions to a float type round
to the nearest value of the type and overflow to infinity.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable

import numpy as np

from oxide import types as T

FOLD_BITS = 128  # the widest integer a constant expression may produce along the way

_NP_FLOAT = {"f16": np.float16, "f32": np.float32, "f64": np.float64}


class FoldError(Exception):
    """A constant expression kernels cannot fold; the message says why (a user error)."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


def _int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _too_big(bits: int) -> FoldError:
    size = f"a {bits}-bit" if bits < 10**15 else f"a more than 2**{bits.bit_length() - 1}-bit"
    return FoldError(f"is too large: it would be about {size} integer, and kernel "
                     "integers have at most 64 bits",
                     hint=f"constant expressions fold exactly up to {FOLD_BITS}-bit "
                     "intermediate values; use floats for larger magnitudes")


def precheck(fn: Callable[..., object], values: tuple[object, ...]) -> None:
    """Refuses, without evaluating them, `**` and `<<` whose result would exceed FOLD_BITS."""
    if len(values) != 2:
        return
    a, b = values
    if fn is operator.pow and _int(a) and _int(b) and b > 0 and abs(a) > 1:
        try:
            bits = int(b * math.log2(abs(a))) + 1
        except OverflowError:  # an exponent beyond float range (`2 ** BIG`)
            bits = b + 1
        if bits > FOLD_BITS:
            raise _too_big(bits)
    if fn is operator.lshift and _int(a) and _int(b) and b > 0 and a != 0:
        bits = a.bit_length() + b
        if bits > FOLD_BITS:
            raise _too_big(bits)


def check_result(result: object) -> None:
    """Refuses a folded integer wider than FOLD_BITS (module constants can be any size)."""
    if _int(result) and result.bit_length() > FOLD_BITS:
        raise _too_big(result.bit_length())


def int_division_by_zero(kind: str, a: object, b: object) -> bool:
    """Whether `a // b` or `a % b` on integer constants divides by zero.

    Those are not folded: they compile to the run-time operation, which gives 0
    and reports `KernelAssertionError("integer division by zero")`, exactly as a
    run-time zero divisor does (docs/language.md).
    """
    return (kind in ("floordiv", "mod") and isinstance(a, int) and isinstance(b, int)
            and b == 0)  # bools are integers here, as in Python


def float_to_int(value: float, dt: T.DType) -> int:
    """A float constant converted to integer type `dt` as at run time: truncated toward
    zero, saturated at the type's limits, NaN to 0 (PTX's `cvt.rzi.sat`)."""
    lo, hi = (-(2 ** (dt.bits - 1)), 2 ** (dt.bits - 1) - 1) if dt.is_signed else (0, 2**dt.bits - 1)
    if math.isnan(value):
        return 0
    if math.isinf(value):
        return hi if value > 0 else lo
    return max(lo, min(hi, int(value)))


def to_float(value: int | float, dt: T.DType) -> float:
    """A constant converted to float type `dt` as a run-time conversion does: rounded to
    the nearest value of `dt`, overflowing to infinity (`f32(1e300)`, `f16(70000)`).

    An integer constant no float can come near (beyond f64's range, `f32(2 ** 2000)`)
    is a `FoldError`, as `float(2 ** 2000)` is an error in Python: it is no run-time
    value, and an infinity would hide the mistake.
    """
    try:
        as_float = float(value)
    except OverflowError:
        raise FoldError(f"is beyond the range of {dt.name} (and of every float type)",
                        hint="write a float constant (`math.inf`) if infinity is meant"
                        ) from None
    return float(_round(as_float, dt))


def _round(value: float, dt: T.DType) -> float:
    with np.errstate(over="ignore"):
        if dt.name == "bf16":
            # bf16 keeps f32's exponent: round the f32 value to 8 significant bits
            f = np.float32(value)
            bits = int(f.view(np.uint32))
            if not math.isfinite(float(f)):
                return float(f)
            bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
            return float(np.uint32(bits & 0xFFFFFFFF).view(np.float32))
        return float(_NP_FLOAT[dt.name](value))
