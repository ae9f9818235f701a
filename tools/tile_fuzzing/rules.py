"""The dtype rules of docs/language.md ("Types and literals", "Operators", "The Tile
model") that the generator types its programs with and the model computes in.

The dtypes a generated program uses are f32, f16 and i32 (plus bool from comparisons,
i64 only as `arr.shape[d]` in a comparison, and the 8-bit floats only on the way
through a conversion or into a product). Each rule is written from the page,
not from oxide's frontend, so a disagreement shows up as a compile error (a store of
the wrong dtype) or a wrong value.
"""

from __future__ import annotations

import numpy as np

NP: dict[str, type[np.generic]] = {"f32": np.float32, "f16": np.float16, "i32": np.int32,
                                   "i64": np.int64, "bool": np.bool_}
FLOATS = ("f16", "f32")
NUMERIC = ("f32", "f16", "i32")

# relative rounding bound (one full ulp, on purpose generous) and the smallest
# subnormal, the absolute rounding error near zero
EPS = {"f32": 2.0**-23, "f16": 2.0**-10}
TINY = {"f32": 2.0**-149, "f16": 2.0**-24}
MAX = {"f32": float(np.finfo(np.float32).max), "f16": 65504.0}
INT_RANGE = {"i32": (-(2**31), 2**31 - 1), "i64": (-(2**63), 2**63 - 1)}


def is_float(dt: str) -> bool:
    return dt in FLOATS


def promote(a: str, b: str) -> str:
    """Two typed operands (tiles, 0-d tiles included): the same dtype stays; two floats
    give the wider; an int with a float gives the float; i32 with i64 gives i64."""
    if a == b:
        return a
    if is_float(a) and is_float(b):
        return "f32"
    if is_float(a) or is_float(b):
        return a if is_float(a) else b
    if {a, b} == {"i32", "i64"}:
        return "i64"
    raise ValueError(f"the generator does not mix {a} and {b}")


def with_literal(dt: str, lit: int | float) -> str:
    """A weak literal takes the typed operand's dtype, except that a float literal
    next to an i32 makes f32 (docs/language.md: `i32_tile * 0.5` is f32)."""
    if isinstance(lit, float) and not is_float(dt):
        return "f32"
    return dt


def literal_fits(lit: int | float, dt: str) -> bool:
    """A literal that does not fit its type is an error (`u8` and 300, f16 and 1e5)."""
    if is_float(dt):
        return abs(float(lit)) <= MAX[dt]
    if isinstance(lit, float):
        return False
    lo, hi = INT_RANGE[dt]
    return lo <= lit <= hi


def constant(lit: int | float, dt: str) -> np.ndarray:
    """A literal converted to `dt`: rounded once from the Python number (a double, or
    an integer exact in one) to nearest, ties to even."""
    if is_float(dt):
        return np.array(float(lit), np.float64).astype(NP[dt])
    return np.array(lit, NP[dt])


# the 8-bit floats: their ml_dtypes dtype and largest finite value
FP8 = {"f8e4m3": ("float8_e4m3fn", 448.0), "f8e5m2": ("float8_e5m2", 57344.0)}


def through_fp8(x: np.ndarray, fmt: str, dst: str) -> np.ndarray:
    """`x.astype(fmt).astype(dst)` as the page's "8-bit floats" defines it: one rounding
    to nearest even of the value, saturating at the largest finite value (infinities
    too), NaN stays NaN, then exact on the way back. ml_dtypes rounds from f32 once, and
    every value meets it exactly in f32 once clipped (f16 and f32 values are f32, and an
    integer within +-57344 is exact there)."""
    import ml_dtypes

    name, top = FP8[fmt]
    wide = x.astype(np.float64)
    nan = np.isnan(wide)
    clipped = np.clip(np.where(nan, 0.0, wide), -top, top).astype(np.float32)
    out = clipped.astype(getattr(ml_dtypes, name)).astype(np.float64)
    return np.where(nan, np.nan, out).astype(NP[dst])


def convert(x: np.ndarray, src: str, dst: str) -> np.ndarray:
    """`x.astype(dst)` as the page defines it: float to int truncates toward zero,
    saturates at the target's range and gives 0 for NaN; conversions to a float round
    once to nearest (an i32 or i64 shape goes through f64, where it is exact)."""
    if src == dst:
        return x
    if is_float(src) and not is_float(dst) and dst != "bool":
        f = x.astype(np.float64)
        lo, hi = INT_RANGE[dst]
        out = np.where(np.isnan(f), 0.0, np.clip(np.trunc(np.nan_to_num(f, nan=0.0)), lo, hi))
        # clip in f64 rounds i32's bounds exactly; the cast of a saturated value is exact
        return out.astype(NP[dst])
    if is_float(dst) and not is_float(src):
        with np.errstate(over="ignore"):  # past f16's range: inf, as the page says
            return x.astype(np.float64).astype(NP[dst])
    return x.astype(NP[dst])
