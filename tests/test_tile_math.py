"""Elementwise math on tiles (issue 28, item 1): `tile.abs/log2/log1p/exp/exp2/sin/cos/tan/
sigmoid/erf/floor/ceil/fma/pow`, `**`, `ox.math.*` and Python's `math.*`, `abs`, `min` and
`max` on tiles and 0-d tiles, against NumPy on the CPU with ragged edges, within the ulps
docs/language.md states; f16 and bf16 computed in f32 and rounded once; the diagnostics.
tests/test_gpu_tile_lang.py runs the same kernels on the GPU."""

from __future__ import annotations

import math

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, Slice, bf16, f16, f32, f64, i8, i32, tile

pytest.importorskip("ml_dtypes")
rng = np.random.default_rng(280)

# function -> (NumPy in f64, the largest error in ulps of the result's type, input range):
# CUDA's documented f32 bounds (the C library's are within them), sigmoid composed
UNARY = {
    "exp": (np.exp, 2, (-10, 10)), "exp2": (np.exp2, 2, (-10, 10)),
    "log": (np.log, 1, (1e-3, 1e3)), "log2": (np.log2, 1, (1e-3, 1e3)),
    "log1p": (np.log1p, 1, (-0.9, 1e3)), "sqrt": (np.sqrt, 0, (0, 1e3)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), 2, (1e-3, 1e3)), "tanh": (np.tanh, 2, (-5, 5)),
    "sin": (np.sin, 2, (-20, 20)), "cos": (np.cos, 2, (-20, 20)),
    "tan": (np.tan, 4, (-1.5, 1.5)), "erf": (np.vectorize(math.erf), 2, (-3, 3)),
    "floor": (np.floor, 0, (-50, 50)), "ceil": (np.ceil, 0, (-50, 50)),
    "abs": (np.abs, 0, (-50, 50)), "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), 4, (-20, 20)),
}
NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": bf16.numpy}


def ulps(got: np.ndarray, want64: np.ndarray, dtype: type) -> np.ndarray:
    """|got - want| in ulps of `dtype` at the exact value (NaN where both are NaN: 0)."""
    want = want64.astype(np.float64)
    spacing = np.abs(np.spacing(want.astype(dtype)).astype(np.float64))
    tiny = np.finfo(dtype).smallest_subnormal if dtype is not bf16.numpy else 2.0 ** -133
    err = np.abs(got.astype(np.float64) - want) / np.maximum(spacing, tiny)
    both_nan = np.isnan(got.astype(np.float64)) & np.isnan(want)
    return np.where(both_nan | (got.astype(np.float64) == want), 0.0, err)


def assert_within(got: np.ndarray, want64: np.ndarray, dtype: type, bound: float) -> None:
    """Within `bound` ulps, plus the 0.5 of rounding the exact value to `dtype` (a 16-bit
    result is computed in f32 and rounded once: within 1 ulp of its own type)."""
    e = ulps(got, want64, dtype)
    assert e.max() <= bound + 0.5, f"{e.max()} ulps at {np.argmax(e)}"


def make_unary(name: str):
    fn = getattr(tile, name)

    @tile.kernel(num_warps=4)
    def unary(x: Slice[f32], o: DisjointSlice[f32], s: f32, so: DisjointSlice[f32],
              B: Const[int]):
        i = tile.bid(0)
        tile.store(o, (i,), fn(tile.load(x, (i,), (B,))))
        tile.store(so, (i,), tile.full((B,), fn(s)))  # a 0-d tile: a scalar parameter

    return unary


UNARY_KERNELS = {name: make_unary(name) for name in UNARY}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_function_against_numpy(name: str) -> None:
    ref, bound, (lo, hi) = UNARY[name]
    n, B = 1000, 256  # 4 blocks, the last ragged
    x = rng.uniform(lo, hi, n).astype(np.float32)
    o, so = np.full(n, -7.0, np.float32), np.zeros(n, np.float32)
    with ox.device("cpu"):
        UNARY_KERNELS[name][tile.cdiv(n, B)](x, o, np.float32(x[3]), so, B)
    assert_within(o, ref(x.astype(np.float64)), np.float32, bound)
    assert_within(so, np.full(n, ref(np.float64(x[3]))), np.float32, bound)


@tile.kernel(num_warps=2)
def halves(x: Slice[f16], y: Slice[bf16], ox16: DisjointSlice[f16, 2],
           oy: DisjointSlice[bf16, 2], B: Const[int]):
    i = tile.bid(0)
    a, b = tile.load(x, (i,), (B,)), tile.load(y, (i,), (B,))
    tile.store(ox16, (0, i), tile.exp(a)[None, :])
    tile.store(ox16, (1, i), tile.sigmoid(a)[None, :])
    tile.store(ox16, (2, i), (tile.abs(a) ** 1.5)[None, :])
    tile.store(oy, (0, i), tile.sin(b)[None, :])
    tile.store(oy, (1, i), tile.erf(b)[None, :])
    tile.store(oy, (2, i), tile.fma(b, b, b)[None, :])


def test_16_bit_floats_compute_in_f32_and_round_once() -> None:
    n, B = 200, 64
    x = rng.uniform(-4, 4, n).astype(np.float16)
    y = rng.uniform(-4, 4, n).astype(bf16.numpy)
    o16, oy = np.zeros((3, n), np.float16), np.zeros((3, n), bf16.numpy)
    with ox.device("cpu"):
        halves[tile.cdiv(n, B)](x, y, o16, oy, B)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    for got, want in ((o16[0], np.exp(x64)), (o16[1], 1 / (1 + np.exp(-x64))),
                      (o16[2], np.abs(x64) ** 1.5)):
        assert_within(got, want, np.float16, 0.5)
    erf = np.vectorize(math.erf)
    for got, want in ((oy[0], np.sin(y64)), (oy[1], erf(y64))):
        assert_within(got, want, bf16.numpy, 0.5)
    # fma: one rounding of the exact b * b + b, in f32, then to bf16
    exact = (y64 * y64 + y64).astype(np.float32).astype(bf16.numpy)
    np.testing.assert_array_equal(oy[2], exact)


@tile.kernel(num_warps=4)
def binary(x: Slice[f32, 2], y: Slice[f32], o: DisjointSlice[f32, 3], BM: Const[int],
           BN: Const[int]):
    i, j = tile.bid(0), tile.bid(1)
    a = tile.load(x, (i, j), (BM, BN), padding=1.0)
    b = tile.load(y, (j,), (BN,), padding=1.0)[None, :]     # broadcast along rows
    tile.store(o, (0, i, j), tile.pow(tile.abs(a), b)[None, :, :])
    tile.store(o, (1, i, j), tile.fma(a, b, 0.5)[None, :, :])
    tile.store(o, (2, i, j), ox.math.atan2(a, b)[None, :, :])
    tile.store(o, (3, i, j), math.hypot(a, b)[None, :, :])
    tile.store(o, (4, i, j), max(a, b, 0.0)[None, :, :])
    tile.store(o, (5, i, j), min(a, 0.25)[None, :, :])
    tile.store(o, (6, i, j), (tile.abs(a) ** b)[None, :, :])
    tile.store(o, (7, i, j), (2.0 ** a)[None, :, :])


def test_binary_and_ternary_functions_broadcast() -> None:
    M, N = 37, 70
    x = rng.uniform(-3, 3, (M, N)).astype(np.float32)
    y = rng.uniform(-2, 2, N).astype(np.float32)
    o = np.zeros((8, M, N), np.float32)
    with ox.device("cpu"):
        binary[(tile.cdiv(M, 16), tile.cdiv(N, 32))](x, y, o, 16, 32)
    a, b = x.astype(np.float64), y.astype(np.float64)[None, :]
    assert_within(o[0], np.abs(a) ** b, np.float32, 4)
    np.testing.assert_array_equal(o[1], (a * b + 0.5).astype(np.float32))  # fused: exact
    assert_within(o[2], np.arctan2(a, b), np.float32, 3)
    assert_within(o[3], np.hypot(a, b), np.float32, 3)
    np.testing.assert_array_equal(o[4], np.maximum(np.maximum(x, y[None, :]), 0))
    np.testing.assert_array_equal(o[5], np.minimum(x, np.float32(0.25)))
    np.testing.assert_array_equal(o[6], o[0])
    assert_within(o[7], 2.0 ** a, np.float32, 2)


@tile.kernel(num_warps=1)
def integer_ops(x: Slice[i32], y: Slice[i8], o: DisjointSlice[i32, 2], oy: DisjointSlice[i8, 2],
                B: Const[int]):
    i = tile.bid(0)
    a, b = tile.load(x, (i,), (B,)), tile.load(y, (i,), (B,))
    tile.store(o, (0, i), abs(a)[None, :])
    tile.store(o, (1, i), (a ** 3)[None, :])           # wraps, as SIMT kernels' `**`
    tile.store(o, (2, i), (a ** 0)[None, :])
    tile.store(o, (3, i), max(a, 7)[None, :])
    tile.store(o, (4, i), min(a, -3, 100)[None, :])
    tile.store(oy, (0, i), tile.abs(b)[None, :])       # abs(-128) is -128 in i8
    tile.store(oy, (1, i), (b ** 2)[None, :])


def test_integer_abs_min_max_and_powers_wrap() -> None:
    n, B = 70, 32
    x = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    x[:4] = (-2**31, 2**31 - 1, 0, -1)
    y = rng.integers(-128, 128, n).astype(np.int8)
    y[0] = -128
    o, oy = np.zeros((5, n), np.int32), np.zeros((2, n), np.int8)
    with ox.device("cpu"):
        integer_ops[tile.cdiv(n, B)](x, y, o, oy, B)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(o[0], np.abs(x))
        np.testing.assert_array_equal(o[1], x * x * x)
        np.testing.assert_array_equal(o[2], np.ones(n, np.int32))
        np.testing.assert_array_equal(o[3], np.maximum(x, 7))
        np.testing.assert_array_equal(o[4], np.minimum(np.minimum(x, -3), 100))
        np.testing.assert_array_equal(oy[0], np.abs(y))
        np.testing.assert_array_equal(oy[1], y * y)


@tile.kernel(num_warps=2)
def ox_math_all(x: Slice[f64], o: DisjointSlice[f64, 2], e: DisjointSlice[i32],
                w: DisjointSlice[f64, 2], B: Const[int]):
    """ox.math and Python's math on f64 tiles, compositions included."""
    i = tile.bid(0)
    a = tile.load(x, (i,), (B,), padding=1.0)
    frac, whole = math.modf(a)
    m, ex = ox.math.frexp(a)
    tile.store(o, (0, i), frac[None, :])
    tile.store(o, (1, i), whole[None, :])
    tile.store(o, (2, i), m[None, :])
    tile.store(e, (i,), ex)
    tile.store(o, (3, i), ox.math.ldexp(m, ex)[None, :])
    tile.store(o, (4, i), math.degrees(a)[None, :])
    tile.store(o, (5, i), ox.math.cbrt(a)[None, :])
    tile.store(o, (6, i), ox.math.copysign(3.0, a)[None, :])
    tile.store(o, (7, i), math.log(tile.abs(a) + 1.0, 10.0)[None, :])
    tile.store(o, (8, i), ox.math.isfinite(a).astype(f64)[None, :])
    tile.store(w, (0, i), math.floor(a).astype(f64)[None, :])   # Python's: i64


def test_ox_math_and_python_math_on_f64_tiles() -> None:
    n, B = 100, 64
    x = rng.uniform(-100, 100, n)
    x[:3] = (np.inf, -0.0, 2.5)
    o, e, w = np.zeros((9, n)), np.zeros(n, np.int32), np.zeros((1, n))
    with ox.device("cpu"):
        ox_math_all[tile.cdiv(n, B)](x, o, e, w, B)
    frac, whole = np.modf(x)
    np.testing.assert_array_equal(o[0], frac)
    np.testing.assert_array_equal(np.signbit(o[0]), np.signbit(frac))
    np.testing.assert_array_equal(o[1], whole)
    mant, ex = np.frexp(x)
    np.testing.assert_array_equal(o[2], mant)
    np.testing.assert_array_equal(e[1:], ex[1:])        # inf's exponent is unspecified
    np.testing.assert_array_equal(o[3], x)
    np.testing.assert_array_equal(o[4], x * (180 / math.pi))
    np.testing.assert_allclose(o[5], np.cbrt(x), rtol=1e-15)
    np.testing.assert_array_equal(o[6], np.copysign(3.0, x))
    np.testing.assert_allclose(o[7], np.log(np.abs(x) + 1) / np.log(10.0), rtol=1e-15)
    np.testing.assert_array_equal(o[8], np.isfinite(x).astype(np.float64))
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(w[0, 1:], np.floor(x[1:]))


@tile.kernel(num_warps=1)
def integer_math(x: Slice[i32], o: DisjointSlice[f32], B: Const[int]):
    i = tile.bid(0)
    tile.store(o, (i,), ox.math.sqrt(tile.load(x, (i,), (B,))))  # i32 -> f32, as ox.math


def test_ox_math_converts_integer_tiles_as_it_converts_integers() -> None:
    x = np.arange(40, dtype=np.int32)
    o = np.zeros(40, np.float32)
    with ox.device("cpu"):
        integer_math[2](x, o, 32)
    np.testing.assert_array_equal(o, np.sqrt(x.astype(np.float32)))


def test_math_compiles_to_libdevice_for_the_gpu() -> None:
    ck = UNARY_KERNELS["erf"].compile(Slice[f32], DisjointSlice[f32], f32, DisjointSlice[f32],
                                      128, arch="sm_90")
    assert ck.cubin
    ck = binary.compile(Slice[f32, 2], Slice[f32], DisjointSlice[f32, 3], 16, 32, arch="sm_80")
    assert "fma.rn.f32" in ck.ptx and ck.cubin


# -- diagnostics ---------------------------------------------------------------------------


@tile.kernel
def exp_of_ints(x: Slice[i32], o: DisjointSlice[f32]):
    tile.store(o, (0,), tile.exp(tile.load(x, (0,), (8,))))


@tile.kernel
def int_power(x: Slice[i32], o: DisjointSlice[i32]):
    t = tile.load(x, (0,), (8,))
    tile.store(o, (0,), t ** t)


@tile.kernel
def abs_of_bools(x: Slice[i32], o: DisjointSlice[i32]):
    t = tile.load(x, (0,), (8,))
    tile.store(o, (0,), abs(t > 0).astype(i32))


@tile.kernel
def max_of_one_tile(x: Slice[f32], o: DisjointSlice[f32]):
    tile.store(o, (0,), tile.full((8,), max(tile.load(x, (0,), (8,)))))


@tile.kernel
def python_comb(x: Slice[f32], o: DisjointSlice[f32]):
    tile.store(o, (0,), math.comb(tile.load(x, (0,), (8,)), 2))


@tile.kernel
def nextafter_halves(x: Slice[f16], o: DisjointSlice[f16]):
    t = tile.load(x, (0,), (8,))
    tile.store(o, (0,), ox.math.nextafter(t, t))


@pytest.mark.parametrize("kernel,types,message", [
    (exp_of_ints, (Slice[i32], DisjointSlice[f32]), "tile.exp takes floats, not i32"),
    (int_power, (Slice[i32], DisjointSlice[i32]),
     "integer `**` needs a constant exponent from 0 to 16"),
    (abs_of_bools, (Slice[i32], DisjointSlice[i32]), "abs() of a bool tile"),
    (max_of_one_tile, (Slice[f32], DisjointSlice[f32]), "takes two or more"),
    (python_comb, (Slice[f32], DisjointSlice[f32]), "`math.comb` is not supported"),
    (nextafter_halves, (Slice[f16], DisjointSlice[f16]), "nextafter() on f16"),
])
def test_math_misuse_is_a_diagnostic(kernel, types, message) -> None:
    with pytest.raises(ox.KernelTypeError, match=".*") as info:
        kernel.compile(*types, arch="cpu")
    assert message in str(info.value)
    assert info.value.span is not None and info.value.hint


@tile.kernel
def _exp2_rows(x: Slice[f32], o: DisjointSlice[f32], B: Const[int]):
    i = tile.bid(0)
    tile.store(o, (i,), tile.exp2(tile.load(x, (i,), (B,))))


@tile.kernel
def exp2_flushed(x: Slice[f32], o: DisjointSlice[f32], o64: DisjointSlice[f64],
                 o16: DisjointSlice[bf16], kept: DisjointSlice[f32], B: Const[int]):
    i = tile.bid(0)
    t = tile.load(x, (i,), (B,))
    tile.store(o, (i,), tile.exp2(t, flush_to_zero=True))
    # f64: 2 ** (x * 8) reaches below 2^-1022 where x reaches below -127.75
    tile.store(o64, (i,), tile.exp2(t.astype(f64) * 8.0, flush_to_zero=True))
    tile.store(o16, (i,), tile.exp2(t.astype(bf16), flush_to_zero=True))
    tile.store(kept, (i,), tile.exp2(t, flush_to_zero=False))


def exp2_flush_inputs(n: int = 1000) -> np.ndarray:
    """Exponents from -160 to 10 that keep 0.01 away from -126 and -127.75, where a
    2-ulp difference could move a result across the smallest normal."""
    x = np.linspace(-160.0, 10.0, n)
    for edge in (-126.0, -127.75):
        x = np.where(np.abs(x - edge) < 0.01, edge + 0.013, x)
    return x.astype(np.float32)


def assert_exp2_flushed(x: np.ndarray, got: np.ndarray, scale: float, dtype: type,
                        compute: type) -> None:
    """`got` is 2 ** (x * scale) in `dtype` (computed in `compute`) with every result below
    `compute`'s smallest normal exactly 0, the others within 2 ulps (bf16: rounded once
    from f32, within 1 of its own)."""
    if dtype is bf16.numpy:  # the kernel rounds the exponents to bf16 first
        x = x.astype(bf16.numpy)
    want = np.exp2(x.astype(np.float64) * scale)
    flushed = want < np.finfo(compute).tiny
    assert flushed.any() and (~flushed).any()
    assert (got[flushed] == 0).all()
    assert_within(got[~flushed], want[~flushed], dtype, 1 if dtype is bf16.numpy else 2)


def test_exp2_flush_to_zero_flushes_below_the_smallest_normal() -> None:
    """`tile.exp2(x, flush_to_zero=True)` (cuTile's keyword): a result below the smallest
    normal of the type it is computed in is 0 (f32 for f32 and bf16, f64 for f64), the
    rest as `tile.exp2`; without it the CPU keeps subnormal results."""
    x = exp2_flush_inputs()
    n, B = x.size, 256
    outs = [np.zeros(n, np.float32), np.zeros(n, np.float64), np.zeros(n, bf16.numpy),
            np.zeros(n, np.float32)]
    ox.launch(exp2_flushed, tile.cdiv(n, B), x, *outs, B)
    o, o64, o16, kept = outs
    assert_exp2_flushed(x, o, 1.0, np.float32, np.float32)
    assert_exp2_flushed(x, o64, 8.0, np.float64, np.float64)
    assert_exp2_flushed(x, o16, 1.0, bf16.numpy, np.float32)
    assert (kept[(x < -127) & (x > -149)] > 0).all()  # subnormal results kept


def test_exp2_flush_to_zero_is_one_instruction_on_the_gpu() -> None:
    """f32: `ex2.approx.ftz.f32` (the MUFU alone: no range test and rescale around it, as
    `ex2.approx.f32` has); f64, which has no such instruction, takes libdevice's exp2 and
    then the flush (checked on the GPU by tests/test_gpu_tile_lang.py)."""
    sig = (Slice[f32], DisjointSlice[f32], DisjointSlice[f64], DisjointSlice[bf16],
           DisjointSlice[f32], 256)
    ptx = exp2_flushed.compile(*sig, arch="sm_90").ptx
    assert "ex2.approx.ftz.f32" in ptx and "ex2.approx.f32" in ptx  # flushed / kept


@tile.kernel
def exp2_flush_of_a_tile(x: Slice[f32], o: DisjointSlice[f32]):
    t = tile.load(x, (0,), (8,))
    tile.store(o, (0,), tile.exp2(t, flush_to_zero=t > 0))


@tile.kernel
def exp_flushed(x: Slice[f32], o: DisjointSlice[f32]):
    tile.store(o, (0,), tile.exp(tile.load(x, (0,), (8,)), flush_to_zero=True))


@pytest.mark.parametrize("kernel,message", [
    (exp2_flush_of_a_tile, "flush_to_zero is True or False, known at compile time"),
    (exp_flushed, "`tile.exp(x)` has no keyword argument `flush_to_zero`"),
])
def test_flush_to_zero_misuse_is_a_diagnostic(kernel, message) -> None:
    with pytest.raises(ox.KernelTypeError) as info:
        kernel.compile(Slice[f32], DisjointSlice[f32], arch="cpu")
    assert message in str(info.value)
    assert info.value.span is not None


def test_exp2_is_the_non_flushing_instruction_unless_measured(monkeypatch) -> None:
    """`tile.exp2` in f32 is `ex2.approx.f32` on the GPU (a subnormal 2^x is kept, as
    docs/language.md says); OXIDE_TILE_EXP2_FTZ=1, a switch for measuring what flushing
    would buy attention (codegen/switches.py), makes it `ex2.approx.ftz.f32`."""
    sig = (Slice[f32], DisjointSlice[f32], 128)
    ptx = _exp2_rows.compile(*sig, arch="sm_90").ptx
    assert "ex2.approx.f32" in ptx and "ftz" not in ptx
    monkeypatch.setenv("OXIDE_TILE_EXP2_FTZ", "1")
    assert "ex2.approx.ftz.f32" in _exp2_rows.compile(*sig, arch="sm_90").ptx
