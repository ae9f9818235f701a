"""The two OCP 8-bit float formats (OFP8) and oxide's one rounding rule for them.

`f8e4m3` is the "fn" variant: no infinities, the largest finite value 448, and one NaN
per sign (S.1111.111). `f8e5m2` is IEEE-like: infinities (S.11111.00), NaNs and the
largest finite value 57344. Both are storage types in kernels (docs/language.md, "8-bit
floats"): values are loaded, converted and stored, never computed on.

Every conversion to them rounds once, to nearest with ties to even, from the source
value itself; finite values beyond the largest finite one and infinities *saturate* to
it (PTX's `cvt.rn.satfinite`, the usual quantization rule); NaN becomes 0x7F, a positive
NaN in both formats; -0.0 keeps its sign. The compiler's code (codegen/fp8.py) and the
constants it folds at compile time (this module, pure Python so that the compiler needs
no ml_dtypes) follow that one rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

NAN_BITS = 0x7F  # what NaN converts to, in both formats
SIGN_BIT = 0x80


@dataclass(frozen=True)
class Fp8Format:
    """The bit layout of one 8-bit float format: 1 sign bit, then exponent and mantissa."""

    exponent_bits: int
    mantissa_bits: int
    has_infinity: bool  # False: the "fn" (finite) variant, whose top exponent holds values

    @property
    def bias(self) -> int:
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def max_bits(self) -> int:
        """The bits of the largest finite value: below the infinities where there are
        some (e5m2's S.11110.11), else the last pattern before the NaN (e4m3's 0.1111.110)."""
        if self.has_infinity:
            return (((1 << self.exponent_bits) - 2) << self.mantissa_bits) | (
                (1 << self.mantissa_bits) - 1)
        return NAN_BITS - 1

    @property
    def max_finite(self) -> float:
        return from_bits(self.max_bits, self)

    @property
    def min_exponent(self) -> int:
        """The exponent of the smallest normal value, which subnormals share (1 - bias)."""
        return 1 - self.bias


E4M3 = Fp8Format(exponent_bits=4, mantissa_bits=3, has_infinity=False)
E5M2 = Fp8Format(exponent_bits=5, mantissa_bits=2, has_infinity=True)
FORMATS = {"f8e4m3": E4M3, "f8e5m2": E5M2}  # by oxide dtype name


def to_bits(value: float, fmt: Fp8Format) -> int:
    """`value` (a number, Python's or NumPy's) as the bits of `fmt`, rounded once to
    nearest even and saturated (the module docstring's rule).

    Clamping before rounding is the same as saturating after it, since the largest
    finite value is representable and rounding is monotone. An int beyond f64's range
    compares exactly with the clamp, so it never goes through a rounding to f64.

    >>> to_bits(1.0625, E4M3), to_bits(1000.0, E4M3), to_bits(-0.0, E5M2)
    (56, 126, 128)
    """
    if not isinstance(value, int):  # NumPy's floats and ints too, as Python floats
        value = float(value)
    if isinstance(value, float) and math.isnan(value):
        return NAN_BITS
    negative = value < 0 or (isinstance(value, float) and math.copysign(1.0, value) < 0)
    sign = SIGN_BIT if negative else 0
    mag = float(min(abs(value), fmt.max_finite))
    if mag == 0:
        return sign
    # the step between values of `mag`'s binade; subnormals share the smallest normal one's
    exponent = max(math.frexp(mag)[1] - 1, fmt.min_exponent)
    quantum = math.ldexp(1.0, exponent - fmt.mantissa_bits)
    steps = round(mag / quantum)  # exact: a power-of-two scaling; `round` ties to even
    # steps count from the binade's start, 2**m steps above the previous binade's; a
    # carry to 2**(m+1) is the next binade's first value, which this sum encodes too
    return sign | (((exponent - fmt.min_exponent) << fmt.mantissa_bits) + steps)


def from_bits(bits: int, fmt: Fp8Format) -> float:
    """The value of the 8-bit pattern `bits` of `fmt` (exact in a Python float)."""
    sign = -1.0 if bits & SIGN_BIT else 1.0
    mag = bits & ~SIGN_BIT & 0xFF
    exponent, mantissa = mag >> fmt.mantissa_bits, mag & ((1 << fmt.mantissa_bits) - 1)
    top = exponent == (1 << fmt.exponent_bits) - 1
    if fmt.has_infinity and top:
        return sign * math.inf if mantissa == 0 else math.nan
    if not fmt.has_infinity and mag == NAN_BITS:
        return math.nan
    if exponent == 0:
        return sign * math.ldexp(mantissa, fmt.min_exponent - fmt.mantissa_bits)
    return sign * math.ldexp((1 << fmt.mantissa_bits) | mantissa,
                             exponent - fmt.bias - fmt.mantissa_bits)


def rounded(value: float, fmt: Fp8Format) -> float:
    """`value` converted to `fmt` and back: what a kernel's conversion gives."""
    return from_bits(to_bits(value, fmt), fmt)
