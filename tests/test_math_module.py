"""Python's `math` module in kernels, and the ox.math names it brought (degrees, radians,
remainder, nextafter, modf, frexp, ldexp, gamma).

On the CPU, f64 results match Python's `math` bit for bit wherever CPython calls the C
library too (the kernel calls the same libm); CPython computes lgamma, gamma and hypot
itself, so those are compared within a stated tolerance. f32 results are compared with
Python's f64 result rounded to f32. tests/test_gpu_intrinsics.py runs the same checks on
a GPU, where libdevice gives its own (documented) error bounds.
"""

from __future__ import annotations

import math
import math as m
from math import pi, sqrt
from typing import Any

import numpy as np
import pytest

import oxide as ox
from oxide import DisjointSlice, Slice, f16, f32, f64, i32, i64, thread

ARCHES = ("sm_80", "sm_90")
T = ox.TypeVar("T")
rng = np.random.default_rng(8)

UNARY = ("sqrt cbrt exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh "
         "tanh asinh acosh atanh erf erfc lgamma gamma fabs degrees radians").split()
BINARY = "atan2 pow fmod hypot copysign remainder nextafter".split()
# CPython computes these itself instead of calling libm: (relative, absolute) tolerance.
# lgamma's relative error is large only next to its zeros (x = 1, 2, ...), where the value
# is tiny, so it gets an absolute bound too.
OWN_IMPLEMENTATION = {"lgamma": (1e-13, 1e-14), "gamma": (1e-14, 0.0), "hypot": (3e-16, 0.0)}
SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 1e-310, -1e-310, 5e-324, 1e300, -1e300,
            math.inf, -math.inf, math.nan, 2.5, -2.5, 3.0, 7.75, 1e16 + 2, 2.0**-1022]


def inputs(dt: ox.DType, n: int = 700) -> np.ndarray:
    """Special values, values of both signs across the exponent range, and small values."""
    spread = np.exp(rng.uniform(-40, 40, n // 2)) * rng.choice([-1.0, 1.0], n // 2)
    small = rng.uniform(-4, 4, n - n // 2)
    with np.errstate(over="ignore"):
        return np.concatenate([SPECIALS, spread, small]).astype(dt.numpy)


def python(fn: Any, *args: float) -> Any:
    """Python's result, or None where Python raises (a domain error or an overflow)."""
    try:
        return fn(*args)
    except (ValueError, OverflowError):
        return None


def same(a: float, b: float) -> bool:
    """Equal bit for bit up to NaN payloads (signed zeros differ)."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def make_kernel(name: str) -> Any:
    fn = getattr(math, name)
    if name in BINARY:
        @ox.kernel
        def k2(x: Slice[T], y: Slice[T], out: DisjointSlice[T]):
            i = thread.index_1d()
            if i in out:
                out[i] = fn(x[i], y[i])
        return k2

    @ox.kernel
    def k1(x: Slice[T], out: DisjointSlice[T]):
        i = thread.index_1d()
        if i in out:
            out[i] = fn(x[i])
    return k1


KERNELS = {name: make_kernel(name) for name in UNARY + BINARY}


def run_math(name: str, dt: ox.DType) -> tuple[list[tuple[float, ...]], np.ndarray]:
    """Launches math.<name> over `inputs(dt)` (and a permutation as the second operand)."""
    x = inputs(dt)
    args = (x, rng.permutation(x)) if name in BINARY else (x,)
    out = np.zeros(len(x), dt.numpy)
    KERNELS[name][(len(x) + 63) // 64, 64](*args, out)
    rows = [tuple(float(a[j]) for a in args) for j in range(len(x))]
    return rows, out


def check_f64(name: str, ulps: float = 0.0) -> None:
    """f64 against Python: bit for bit (ulps=0), or within `ulps` units in the last place
    (or CPython's own-implementation tolerance)."""
    fn = getattr(math, name)
    rows, out = run_math(name, f64)
    rtol, atol = OWN_IMPLEMENTATION.get(name, (0.0, 0.0))
    bad = []
    for args, got in zip(rows, out.tolist(), strict=True):
        want = python(fn, *args)
        if want is None or same(got, want):
            continue
        if math.isfinite(want) and math.isfinite(got) and (
                abs(got - want) <= max(rtol * abs(want), atol, ulps * math.ulp(want))):
            continue
        bad.append((args, got, want))
    assert not bad, f"math.{name} f64: (args, got, want) {bad[:4]} ({len(bad)} in all)"


def check_f32(name: str, ulps: float) -> None:
    """f32 against Python's f64 result rounded to f32, within `ulps` f32 ulps."""
    fn = getattr(math, name)
    if name == "nextafter":  # one f32 step, not an f64 one rounded
        fn = lambda a, b: float(np.nextafter(np.float32(a), np.float32(b)))  # noqa: E731
    rows, out = run_math(name, f32)
    bad = []
    for args, got in zip(rows, out.tolist(), strict=True):
        want = python(fn, *args)
        if want is None:
            continue
        with np.errstate(over="ignore"):
            want32 = float(np.float32(want))  # beyond f32's range: inf, as the kernel gives
        if same(got, want32):
            continue
        ulp = float(np.spacing(np.float32(abs(want32)))) if math.isfinite(want32) else 0.0
        if math.isfinite(got) and math.isfinite(want32) and abs(got - want32) <= ulps * ulp:
            continue
        if name == "lgamma" and math.isfinite(got) and abs(got - want) < 1e-6:
            continue  # next to lgamma's zeros the value is tiny: absolute error
        bad.append((args, got, want32))
    assert not bad, f"math.{name} f32: (args, got, want) {bad[:4]} ({len(bad)} in all)"


@pytest.fixture(autouse=True)
def _cpu():
    with ox.device("cpu"):
        yield


@pytest.mark.parametrize("name", UNARY + BINARY)
def test_f64_matches_python(name: str) -> None:
    check_f64(name)


# glibc's f32 functions are within 1 ulp of the exact result, 2 after the f64 reference
# is itself rounded; gamma and lgamma are tgammaf/lgammaf, a few ulp more.
F32_ULPS = {"gamma": 8.0, "lgamma": 8.0}


@pytest.mark.parametrize("name", UNARY + BINARY)
def test_f32_close_to_python(name: str) -> None:
    check_f32(name, F32_ULPS.get(name, 2.0))


# -- modf, frexp, ldexp: exact, on every float type ----------------------------------------

@ox.kernel
def split_k(x: Slice[T], frac: DisjointSlice[T], whole: DisjointSlice[T],
            mant: DisjointSlice[T], exp: DisjointSlice[i32], scaled: DisjointSlice[T],
            k: i32):
    i = thread.index_1d()
    if i in frac:
        f, w = math.modf(x[i])
        frac[i] = f
        with ox.unsafe():
            whole[i] = w
            mant[i], exp[i] = math.frexp(x[i])
            scaled[i] = math.ldexp(x[i], k)


def check_split(dt: ox.DType, k: int) -> None:
    x = inputs(dt, 300)
    outs = [np.zeros(len(x), dt.numpy) for _ in range(3)]
    exp = np.zeros(len(x), np.int32)
    scaled = np.zeros(len(x), dt.numpy)
    split_k[(len(x) + 63) // 64, 64](x, *outs, exp, scaled, np.int32(k))
    frac, whole, mant = outs
    for j, v in enumerate(x.tolist()):
        wf, ww = math.modf(v)
        wm, we = math.frexp(v)
        try:
            with np.errstate(over="ignore"):
                ws = float(dt.numpy.type(math.ldexp(v, k)))
        except OverflowError:
            ws = math.copysign(math.inf, v)
        got = (float(frac[j]), float(whole[j]), float(mant[j]), int(exp[j]), float(scaled[j]))
        assert all(same(float(g), float(w)) for g, w in zip(got, (wf, ww, wm, we, ws),
                                                             strict=True)), (v, got)


@pytest.mark.parametrize("dt", (f64, f32, f16), ids=lambda d: d.name)
@pytest.mark.parametrize("k", (0, 3, -5, 200, -1100))
def test_modf_frexp_ldexp_exact(dt: ox.DType, k: int) -> None:
    check_split(dt, k)


@ox.kernel
def ldexp_wide(x: Slice[f64], e: Slice[i64], out: DisjointSlice[f64]):
    i = thread.index_1d()
    if i in out:
        out[i] = ox.math.ldexp(x[i], e[i])


def test_ldexp_wide_exponent_saturates() -> None:
    """An i64 exponent beyond i32's range gives what Python's ldexp gives (inf or 0)."""
    x = np.array([1.5, -1.5, 1.5, 0.0, 3.0])
    e = np.array([2**40, 2**40, -(2**40), 2**40, 4], np.int64)
    out = np.zeros(5)
    ldexp_wide[1, 5](x, e, out)
    for v, k, got in zip(x.tolist(), e.tolist(), out.tolist(), strict=True):
        try:
            want = math.ldexp(v, k)
        except OverflowError:
            want = math.copysign(math.inf, v)
        assert same(got, want), (v, k, got)


# -- constants, folding, spelling ---------------------------------------------------------

@ox.kernel
def constants_k(x: Slice[f32], out: DisjointSlice[f32, 2]):
    i = thread.index_1d()
    if i < len(x):
        with ox.unsafe():
            out[0, i] = x[i] * math.pi
            out[1, i] = x[i] + math.e
            out[2, i] = x[i] * m.tau
            out[3, i] = min(x[i], math.inf)
            out[4, i] = x[i] * pi
            out[5, i] = x[i] if x[i] < math.inf else math.nan
            out[6, i] = sqrt(x[i])


def test_constants_are_weak_float_literals() -> None:
    """math.pi & co. take the type of what they meet (x: f32 stays f32), as 0.5 would."""
    x = np.array([0.0, 1.0, -2.5, 3e38, np.inf], np.float32)
    out = np.zeros((7, 5), np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        constants_k[1, 5](x, out)
        want = [x * np.float32(math.pi), x + np.float32(math.e), x * np.float32(math.tau),
                np.minimum(x, np.float32(np.inf)), x * np.float32(math.pi),
                np.where(x < np.inf, x, np.float32(np.nan)), np.sqrt(x)]
    np.testing.assert_array_equal(out, np.array(want, np.float32))


@ox.kernel
def folding_k(x: Slice[f64], out: DisjointSlice[f64, 2]):
    i = thread.index_1d()
    if i < len(x):
        with ox.unsafe():
            out[0, i] = math.sqrt(2.0)
            out[1, i] = math.log(x[i], 2.0)
            out[2, i] = math.log(1024.0, 2.0)
            out[3, i] = math.modf(2.75)[0] + math.modf(2.75)[1] * 10
            out[4, i] = f64(math.floor(x[i])) + f64(math.ceil(-x[i]) * 1000)
            out[5, i] = f64(math.trunc(i64(7)))
            out[6, i] = math.gamma(5.0) + math.lgamma(x[i])


def test_folding_and_python_rounding() -> None:
    """Constant arguments fold as Python computes them; floor/ceil/trunc give integers;
    `math.log(x, base)` is log(x) / log(base)."""
    x = np.array([0.5, 2.0, 1e10, 7.25])
    out = np.zeros((7, 4))
    folding_k[1, 4](x, out)
    for j, v in enumerate(x.tolist()):
        assert out[0, j] == math.sqrt(2.0)
        assert out[1, j] == math.log(v) / math.log(2.0)
        assert out[2, j] == math.log(1024.0, 2.0)
        assert out[3, j] == 0.75 + 20.0
        assert out[4, j] == math.floor(v) + math.ceil(-v) * 1000
        assert out[5, j] == 7
        assert out[6, j] == math.gamma(5.0) + math.lgamma(v)


def test_floor_gives_i64() -> None:
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[i64]):
        i = thread.index_1d()
        if i in out:
            out[i] = math.floor(x[i]) + math.ceil(x[i]) * 10 + math.trunc(x[i]) * 100

    x = np.array([-2.5, 2.5, 0.0, 1e12], np.float32)
    out = np.zeros(4, np.int64)
    k[1, 4](x, out)
    want = [math.floor(v) + math.ceil(v) * 10 + math.trunc(v) * 100 for v in x.tolist()]
    np.testing.assert_array_equal(out, want)


def test_new_ox_math_names() -> None:
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32, 2]):
        i = thread.index_1d()
        if i < len(x):
            with ox.unsafe():
                out[0, i] = ox.math.degrees(x[i])
                out[1, i] = ox.math.radians(x[i])
                out[2, i] = ox.math.remainder(x[i], 0.75)
                out[3, i] = ox.math.nextafter(x[i], 0.0)
                out[4, i] = ox.math.gamma(x[i])
                out[5, i] = ox.math.ldexp(x[i], -3)

    x = np.array([1.5, -2.25, 10.0, 0.25, 3.75], np.float32)
    out = np.zeros((6, 5), np.float32)
    k[1, 5](x, out)
    for j, v in enumerate(x.tolist()):
        assert out[0, j] == np.float32(v) * np.float32(180.0 / math.pi)
        assert out[1, j] == np.float32(v) * np.float32(math.pi / 180.0)
        assert out[2, j] == np.float32(math.remainder(v, 0.75))
        assert out[3, j] == np.nextafter(np.float32(v), np.float32(0.0))
        assert abs(out[4, j] - math.gamma(v)) <= 8 * np.spacing(np.float32(abs(math.gamma(v))))
        assert out[5, j] == np.float32(v / 8)


# -- diagnostics ----------------------------------------------------------------------------

def compile_body(body: str, params: str = "x: f32") -> None:
    import linecache

    namespace: dict[str, Any] = {"ox": ox, "math": math, "f16": f16, "f32": f32, "f64": f64,
                                 "i32": i32, "DisjointSlice": DisjointSlice, "thread": thread}
    src = (f"def k({params}, out: DisjointSlice[f32]):\n"
           "    i = thread.index_1d()\n"
           "    if i in out:\n"
           f"        out[i] = f32({body})\n")
    fname = f"<math diag {body}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    exec(compile(src, fname, "exec"), namespace)
    kernel = ox.kernel(namespace["k"])
    types = [namespace[p.split(":")[1].strip()] for p in params.split(",")]
    kernel.compile(*types, DisjointSlice[f32], target="cpu")


@pytest.mark.parametrize(("body", "words"), [
    ("math.comb(5, 2)", ("`math.comb` is not supported", "loop")),
    ("math.isqrt(i32(x))", ("`math.isqrt` is not supported", "ox.math.sqrt")),
    ("math.isclose(x, 1.0)", ("`math.isclose`", "abs(a - b)")),
    ("math.hypot(x, x, x)", ("math.hypot() takes 2 arguments", "nest")),
    ("math.sqrt(-1.0)", ("fails in Python", "math domain error")),
    ("math.ldexp(x, 1.5)", ("integer exponent",)),
    ("math.sqrt(x, x)", ("math.sqrt() takes 1 argument",)),
    ("ox.math.nextafter(f16(x), f16(1))", ("nextafter() on f16",)),
])
def test_diagnostics(body: str, words: tuple[str, ...]) -> None:
    with pytest.raises(ox.KernelTypeError) as info:
        compile_body(body)
    text = str(info.value)
    for w in words:
        assert w in text, text


# -- GPU code generation (no GPU needed) ------------------------------------------------------

@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("dt", (f32, f64, f16), ids=lambda d: d.name)
def test_assembles_for_gpu(arch: str, dt: ox.DType) -> None:
    ck = split_k.compile(Slice[dt], *[DisjointSlice[dt]] * 3, DisjointSlice[i32],
                         DisjointSlice[dt], i32, arch=arch)
    assert len(ck.cubin) > 0
    if dt.bits > 16:
        for name in ("remainder", "nextafter", "gamma", "degrees", "hypot", "lgamma"):
            ck = KERNELS[name].compile(*[Slice[dt]] * (2 if name in BINARY else 1),
                                       DisjointSlice[dt], arch=arch)
            assert len(ck.cubin) > 0
