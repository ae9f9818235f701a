"""The 8-bit float conversions' kernels and their NumPy references (docs/language.md,
"8-bit floats"), shared by tests/test_fp8.py (CPU) and tests/test_gpu_fp8_convert.py.

The reference of a conversion to an 8-bit float rounds the source's exact value to the
nearest of the values ml_dtypes decodes (ties to even) after clipping it to the largest
finite one, which is the saturation (infinities included); NaN is 0x7F in both formats.
"""

from __future__ import annotations

import functools
from typing import Any

import ml_dtypes
import numpy as np

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f8e4m3, f8e5m2, f32, thread, tile

FP8 = (f8e4m3, f8e5m2)
MAX = {"f8e4m3": 448.0, "f8e5m2": 57344.0}
MAX_BITS = {"f8e4m3": 0x7E, "f8e5m2": 0x7B}  # the patterns of those
NAN_BITS = 0x7F
T = ox.TypeVar("T")


@functools.cache
def converter(dst: Any) -> Any:
    """`out[i] = dst(a[i])`, the source generic."""

    @ox.kernel(contract=False)
    def convert(a: Slice[T], out: DisjointSlice[dst]):
        i = thread.index_1d()
        if i in out:
            out[i] = dst(a[i])

    return convert


def all_patterns(dt: Any) -> np.ndarray:
    """The 256 values of an 8-bit float type, in bit order."""
    return np.arange(256, dtype=np.uint8).view(dt.numpy)


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint8)


def to_fp8(x: np.ndarray, dt: Any) -> np.ndarray:
    """The reference conversion of `x` (floats, ints or bools) to `dt`, as bits: of the
    values ml_dtypes decodes the patterns to, the nearest to `x` clipped to the largest
    finite one (ties to the even pattern), the sign kept; NaN to 0x7F. Every source is
    exact in f64 (integers past 2**53 aside, which saturate either way), so this rounds
    once whatever ml_dtypes' own f64 conversion does (0.6 went through f32)."""
    values = all_patterns(dt).astype(np.float64)[:MAX_BITS[dt.name] + 1]  # ascending
    with np.errstate(invalid="ignore"):  # signaling NaNs among random bits
        wide = np.asarray(x).astype(np.float64)
        mag = np.minimum(np.abs(wide), values[-1])
    hi = np.minimum(np.searchsorted(values, mag), len(values) - 1)  # the first >= mag
    lo = np.maximum(hi - 1, 0)
    mid = (values[lo] + values[hi]) / 2  # exact: at most 5 significant bits
    up = (mag > mid) | ((mag == mid) & (hi % 2 == 0))
    pick = np.where((values[hi] == mag) | up, hi, lo)
    out = (pick | np.where(np.signbit(wide), 0x80, 0)).astype(np.uint8)
    out[np.isnan(wide)] = NAN_BITS
    return out


def f32_edge_values(dt: Any) -> np.ndarray:
    """f32 values where a conversion to `dt` can go wrong: zeros, the largest finite value
    and its neighbours, every halfway point between adjacent values (ties go to the even
    one, so both directions occur) and the f32 values on either side of it, the smallest
    subnormal and fractions of it, infinities, NaN, f32's extremes."""
    finite = all_patterns(dt).astype(np.float32)
    finite = np.unique(finite[np.isfinite(finite) & (finite >= 0)])
    half = ((finite[:-1].astype(np.float64) + finite[1:]) / 2).astype(np.float32)  # exact
    tiny = finite[1]  # the smallest subnormal
    top = np.float32(MAX[dt.name])
    step = top - finite[-2]
    special = np.array([0.0, tiny, tiny / 2, tiny / 4, tiny * 0.75, tiny * 1.5, tiny * 2.5,
                        top, top + step / 2, top + step, np.float32(1e30), np.inf, np.nan,
                        np.finfo(np.float32).max, np.finfo(np.float32).tiny,
                        np.float32(1e-45)], np.float32)
    inf = np.float32(np.inf)
    around_top = np.nextafter(np.array([top, top]), np.array([inf, -inf]))
    out = np.concatenate([finite, half, np.nextafter(half, inf), np.nextafter(half, -inf),
                          around_top, special])
    return np.concatenate([out, -out])


def random_f32(n: int, seed: int = 0) -> np.ndarray:
    """Random f32 bit patterns (every exponent), and values near 8-bit floats' range."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    near = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 18, n))).astype(np.float32)
    return np.concatenate([raw, near])


def f64_single_rounding_values(dt: Any) -> np.ndarray:
    """f64 values a detour through f32 would round twice: just past each halfway point
    between adjacent values of `dt` (by 2**-40 of it, below f32's precision), on both
    sides, so that f32 rounds them onto the tie and the tie then goes to even."""
    finite = all_patterns(dt).astype(np.float64)
    finite = np.unique(finite[np.isfinite(finite) & (finite >= 0)])
    half = (finite[:-1] + finite[1:]) / 2
    nudge = half * 2.0**-40
    out = np.concatenate([half + nudge, half - nudge, half])
    return np.concatenate([out, -out])


def int_values() -> np.ndarray:
    """i64 values: small ones (exact or rounded), around the saturation points, huge."""
    small = np.arange(-1000, 1001, dtype=np.int64)
    edges = [448, 449, 463, 464, 465, 479, 480, 481, 57343, 57344, 57345, 61439, 61440,
             61441, 2**31 - 1, -(2**31), 2**53 + 1, 2**62, -(2**63), 2**63 - 1]
    return np.concatenate([small, np.array(edges + [-e for e in edges[:-2]], np.int64)])


def float_formats() -> dict[str, Any]:
    """The NumPy dtype of each float type a conversion may start from."""
    return {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32,
            "f64": np.float64}


def to_int(x: np.ndarray, dt: Any) -> np.ndarray:
    """The reference float -> integer conversion: truncated toward zero, saturated at the
    type's range, NaN to 0 (docs/language.md, "Operators")."""
    info = np.iinfo(dt.numpy)
    out = [0 if np.isnan(v) else info.max if v >= info.max else info.min if v <= info.min
           else int(v) for v in x.astype(np.float64)]
    return np.array(out, dt.numpy)


@ox.kernel(contract=False)
def scale_shift(a: Slice[f8e4m3], b: Slice[f8e5m2], s: f32, out: DisjointSlice[f8e5m2],
                wide: DisjointSlice[f32]):
    """Loads of both formats, f32 arithmetic, a store of each kind; `a[i] if ... else
    0.5` chooses between 8-bit values without computing on them."""
    i = thread.index_1d()
    if i in out and i in wide:
        x = f32(a[i]) * s + f32(b[i])
        out[i] = f8e5m2(x)
        wide[i] = f32(a[i] if b[i] else 0.5)


def scale_shift_reference(a: np.ndarray, b: np.ndarray, s: float
                          ) -> tuple[np.ndarray, np.ndarray]:
    x = a.astype(np.float32) * np.float32(s) + b.astype(np.float32)
    chosen = np.where(b.astype(np.float32) != 0, a.astype(np.float32), np.float32(0.5))
    return to_fp8(x, f8e5m2), chosen


@ox.tile.kernel(num_warps=4)
def tile_scale(x: Slice[f8e4m3, 2], y: DisjointSlice[f8e5m2, 2], s: f32,
               BM: Const[int], BN: Const[int]):
    """Tiles of 8-bit floats loaded (padding past the edges), converted, computed on in
    f32, chosen between and stored; a full tile of a saturated constant."""
    i, j = tile.bid(0), tile.bid(1)
    t = tile.load(x, (i, j), (BM, BN), padding=1.0).astype(f32)
    big = tile.full((BM, BN), 1e6, f8e5m2)  # saturates to 57344
    r = tile.where(t > 0.0, (t * s).astype(f8e5m2), big)
    tile.store(y, (i, j), tile.where(t == 0.0, tile.zeros((BM, BN), f8e5m2), r))


def tile_scale_reference(x: np.ndarray, s: float) -> np.ndarray:
    t = x.astype(np.float32)
    scaled = to_fp8(t * np.float32(s), f8e5m2)
    return np.where(t > 0, scaled, np.where(t == 0, 0, to_fp8(np.float32([1e6]), f8e5m2)))


# -- checks, given `convert(dst, a)`: `dst(a[i])` for every element, in a kernel ------------

Convert = Any  # Callable[[DType, np.ndarray], np.ndarray]


def same_floats(got: np.ndarray, want: np.ndarray) -> bool:
    got, want = got.astype(np.float64), want.astype(np.float64)
    return bool(np.all((got == want) | (np.isnan(got) & np.isnan(want))))


def check_widening(convert: Convert, src: Any, dst: Any) -> None:
    """Every pattern of `src` to the float type `dst`: exact, NaNs as NaNs."""
    a = all_patterns(src)
    got = convert(dst, a)
    assert same_floats(got, a.astype(dst.numpy))
    assert np.isnan(got.astype(np.float32)).sum() == np.isnan(a.astype(np.float32)).sum()


def check_to_int(convert: Convert, src: Any, dst: Any) -> None:
    a = all_patterns(src)
    np.testing.assert_array_equal(convert(dst, a), to_int(a, dst))


def check_to_bool(convert: Convert, src: Any) -> None:
    a = all_patterns(src)
    got = convert(ox.bool_, a)
    assert not got[0] and not got[0x80]  # both zeros are false
    np.testing.assert_array_equal(got, a.astype(np.float32) != 0)  # NaNs are true


def check_narrowing(convert: Convert, dst: Any, x: np.ndarray) -> None:
    """`x` (floats, ints or bools; 8-bit floats of the other format) to `dst`."""
    wide = x.astype(np.float32) if x.dtype in (f8e4m3.numpy, f8e5m2.numpy) else x
    np.testing.assert_array_equal(bits(convert(dst, x)), to_fp8(wide, dst))


def half_sources(dst: Any, src: str) -> np.ndarray:
    """Edge values and random ones of f16 or bf16."""
    x = np.concatenate([f32_edge_values(dst), random_f32(5_000, seed=3)])
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(float_formats()[src])


def random_f64(dst: Any) -> np.ndarray:
    rng = np.random.default_rng(5)
    return np.concatenate([f32_edge_values(dst).astype(np.float64),
                           rng.integers(0, 2**64, 20_000, dtype=np.uint64).view(np.float64)])


def ints_of(src: type) -> np.ndarray:
    v = int_values()
    return v.view(np.uint64) if src is np.uint64 else v.astype(src)


INT_SOURCES = (np.int8, np.uint8, np.int32, np.int64, np.uint64, np.bool_)
