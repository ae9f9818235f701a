"""Constant folding with bounds, and explicit conversions of constants.

Constant expressions (`1 << 20`, `2 ** 10`, a module constant times two) fold at
compile time as Python evaluates them, so a kernel means what the same expression
means on the host. Python's integers are unbounded, though, and a user can ask
for `2 ** 2 ** 40`: that must be a diagnostic, not a compiler that runs out of
memory. So every folded integer stays within `FOLD_BITS` bits, and the operators
that could build a huge one (`**`, `<<`) are refused *before* Python evaluates
them. 128 bits leave room for idioms such as `(1 << 64) - 1` (u64's maximum); a
value still has to fit its kernel type where it is used (64 bits at most).

A constant expression means what Python means by it, so where Python raises
(`1 << -1`, `7 / 0`, `int(NAN)`) folding raises too: a `FoldError` the frontends
(SIMT and tile alike) turn into a diagnostic at the expression. Conversions of
constants follow the host's meaning of the dtypes (NumPy's): to an integer type
the value is truncated and must fit (`i32(NAN)`, `i64(INF)`, `i32(3e10)` are
errors, as `np.int32(...)` raises); to a float type it is rounded to the nearest
value of the type and overflows to infinity (`f32(1e300)` is inf, as NumPy
gives), but an integer beyond every float's range is an error.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable

import numpy as np

from oxide import fp8
from oxide import types as T

FOLD_BITS = 128  # the widest integer a constant expression may produce along the way
MAX_SEQUENCE_ITEMS = 1024  # compile-time tuples (and strings): more than any shape needs

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


def evaluate(fn: Callable[..., object], values: tuple[object, ...]) -> object:
    """`fn(*values)` as Python computes it, for an operator (or builtin) on compile-time
    values; a FoldError (message and hint for the diagnostic) where Python raises, and
    where the result would be too large to compute (checked before evaluating).

    >>> evaluate(operator.lshift, (1, 4))
    16
    """
    _precheck(fn, values)
    try:
        result = fn(*values)
    except OverflowError:
        raise FoldError("overflows: its value is beyond the range of f64",
                        hint="constants fold as Python evaluates them; write `math.inf` if "
                             "infinity is meant") from None
    except (ArithmeticError, TypeError, ValueError) as exc:
        raise FoldError(f"fails: {exc}",
                        hint="constant expressions are computed at compile time, as Python "
                             "computes them, and Python raises here") from None
    _check_result(result)
    return result


def _precheck(fn: Callable[..., object], values: tuple[object, ...]) -> None:
    """Refuses, without evaluating them, `**` and `<<` whose result would exceed FOLD_BITS
    and a sequence repeated past MAX_SEQUENCE_ITEMS (`(0,) * 2**40`)."""
    if len(values) != 2:
        return
    a, b = values
    if fn is operator.mul:
        seq, n = (a, b) if isinstance(a, (tuple, str)) else (b, a)
        if isinstance(seq, (tuple, str)) and _int(n) and n * len(seq) > MAX_SEQUENCE_ITEMS:
            raise FoldError(f"is too long: it would hold {n * len(seq)} items",
                            hint=f"compile-time tuples hold at most {MAX_SEQUENCE_ITEMS}")
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


def _check_result(result: object) -> None:
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


def convert(value: bool | int | float, dt: T.DType) -> bool | int | float:
    """`dt(value)` on a constant, as the host computes it (`ox.i32(x)` is NumPy's
    `np.int32(x)`): a FoldError where that raises.

    To an integer type a float is truncated toward zero (Python's `int`) and must then
    fit, as an integer must: NaN (ValueError in Python), an infinity (OverflowError)
    and a value beyond the type's range (`i32(3e10)`, `u8(-3.7)`: NumPy's OverflowError)
    are errors, not the saturated value a run-time conversion gives. To a float type,
    `to_float`. To an 8-bit float, the run-time conversion's rounding and saturation
    (oxide/fp8.py): it is the only meaning that type's conversion has.

    >>> convert(2.9, T.i32), convert(-2.9, T.i32)
    (2, -2)
    """
    if dt.is_bool:
        return bool(value)
    if dt.is_fp8:
        return fp8.rounded(value, fp8.FORMATS[dt.name])
    if dt.is_float:
        return to_float(value, dt)
    if isinstance(value, float):
        if math.isnan(value):
            raise FoldError(f"cannot be converted to {dt.name}: NaN is no integer (`int(nan)` "
                            f"raises ValueError in Python, and `ox.{dt.name}(nan)` on the host)",
                            hint="write the integer meant (a run-time NaN converts to 0)")
        if math.isinf(value):
            raise FoldError(f"cannot be converted to {dt.name}: an infinity is no integer "
                            f"(`int({value!r})` raises OverflowError in Python, and "
                            f"`ox.{dt.name}({value!r})` on the host)",
                            hint=f"write the integer meant, e.g. the type's limit "
                                 f"`{_limit_text(dt, value > 0)}`")
        value = int(value)
    if not _fits(int(value), dt):
        raise FoldError(f"does not fit in {dt.name} (from {_limit_text(dt, False)} to "
                        f"{_limit_text(dt, True)}; `ox.{dt.name}(...)` raises OverflowError on "
                        "the host)", hint="write a value in the range, or convert to a wider "
                                          "type")
    return int(value)


def _fits(value: int, dt: T.DType) -> bool:
    lo, hi = (-(2 ** (dt.bits - 1)), 2 ** (dt.bits - 1)) if dt.is_signed else (0, 2**dt.bits)
    return lo <= value < hi


def _limit_text(dt: T.DType, top: bool) -> str:
    if top:
        return f"2**{dt.bits - 1} - 1" if dt.is_signed else f"2**{dt.bits} - 1"
    return f"-2**{dt.bits - 1}" if dt.is_signed else "0"


def negative_shift(kind: str, amount: object) -> bool:
    """Whether `kind` ("shl"/"shr") shifts by a constant negative `amount`: Python raises
    ValueError ("negative shift count") whatever the value shifted, so a kernel's
    constant one is refused too (a run-time negative amount reads as unsigned)."""
    return kind in ("shl", "shr") and _int(amount) and amount < 0  # type: ignore[operator]


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
