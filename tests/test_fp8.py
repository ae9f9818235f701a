"""8-bit floats (f8e4m3, f8e5m2) as storage types on the CPU (docs/language.md, "8-bit
floats"): every conversion to and from them against NumPy and ml_dtypes, kernels that
load, convert and store them (SIMT and tile), literals and constants, what is refused,
and the host side. tests/test_gpu_fp8_convert.py runs the conversions on a GPU."""

from __future__ import annotations

import dataclasses
import linecache
import math
from collections.abc import Iterator
from typing import Any

import fp8_cases as fc
import ml_dtypes
import numpy as np
import pytest

import oxide as ox
from oxide import (
    AtomicSlice,
    DisjointSlice,
    Slice,
    bf16,
    f8e4m3,
    f8e5m2,
    f16,
    f32,
    f64,
    i8,
    i32,
    i64,
    thread,
    tile,
    u8,
    u64,
)
from oxide import fp8 as formats
from oxide.errors import KernelTypeError

FLOATS = (f16, bf16, f32, f64)


@pytest.fixture(autouse=True)
def on_cpu() -> Iterator[None]:
    with ox.device("cpu"):
        yield


def convert(dst: Any, a: np.ndarray) -> np.ndarray:
    """`dst(a[i])` for every element, in a kernel."""
    out = np.zeros(a.shape, dst.numpy)
    fc.converter(dst)[ox.LaunchConfig.for_num_elems(a.size)](a, out)
    return out


# -- from 8-bit floats ------------------------------------------------------------------


@pytest.mark.parametrize("dst", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("src", fc.FP8, ids=lambda d: d.name)
def test_every_pattern_widens_exactly(src: Any, dst: Any) -> None:
    fc.check_widening(convert, src, dst)


@pytest.mark.parametrize("dst", (i8, u8, i32, i64, u64), ids=lambda d: d.name)
@pytest.mark.parametrize("src", fc.FP8, ids=lambda d: d.name)
def test_to_integers_truncates_and_saturates(src: Any, dst: Any) -> None:
    # 448 and 57344 overflow u8 and i8; e5m2's infinities saturate; NaN gives 0
    fc.check_to_int(convert, src, dst)


@pytest.mark.parametrize("src", fc.FP8, ids=lambda d: d.name)
def test_to_bool_is_nonzero(src: Any) -> None:
    fc.check_to_bool(convert, src)


# -- to 8-bit floats ----------------------------------------------------------------------


@pytest.mark.parametrize("dst", fc.FP8, ids=lambda d: d.name)
def test_f32_edge_values_round_to_even_and_saturate(dst: Any) -> None:
    x = fc.f32_edge_values(dst)
    fc.check_narrowing(convert, dst, x)
    got = dict(zip(x.tolist(), fc.bits(convert(dst, x)).tolist(), strict=True))
    top = formats.FORMATS[dst.name].max_bits
    assert got[math.inf] == top and got[-math.inf] == 0x80 | top
    assert got[float(np.float32(1e30))] == top
    assert fc.bits(convert(dst, np.float32([np.nan, -np.nan]))).tolist() == [0x7F, 0x7F]
    assert fc.bits(convert(dst, np.float32([-0.0]))).tolist() == [0x80]


@pytest.mark.parametrize("dst", fc.FP8, ids=lambda d: d.name)
def test_ties_go_both_ways(dst: Any) -> None:
    # 1 + 1/16 (e4m3) lies halfway between 1 and 1.125: the even 1.0; 1 + 3/16, between
    # 1.125 and 1.25, goes up to the even 1.25. e5m2 steps by 1/4 there.
    m = formats.FORMATS[dst.name].mantissa_bits
    q = 2.0 ** -m
    x = np.float32([1 + q / 2, 1 + 3 * q / 2, 2 - q / 2, -(1 + q / 2)])
    assert convert(dst, x).astype(np.float32).tolist() == [1.0, 1 + 2 * q, 2.0, -1.0]


@pytest.mark.parametrize("dst", fc.FP8, ids=lambda d: d.name)
def test_random_f32_bits(dst: Any) -> None:
    fc.check_narrowing(convert, dst, fc.random_f32(50_000, seed=7))


@pytest.mark.parametrize("src", ("f16", "bf16"))
@pytest.mark.parametrize("dst", fc.FP8, ids=lambda d: d.name)
def test_half_sources(dst: Any, src: str) -> None:
    fc.check_narrowing(convert, dst, fc.half_sources(dst, src))


@pytest.mark.parametrize("dst", fc.FP8, ids=lambda d: d.name)
def test_f64_rounds_once(dst: Any) -> None:
    x = fc.f64_single_rounding_values(dst)
    assert (fc.to_fp8(x, dst) != fc.to_fp8(x.astype(np.float32), dst)).sum() > 10  # not f32
    fc.check_narrowing(convert, dst, x)
    fc.check_narrowing(convert, dst, fc.random_f64(dst))


@pytest.mark.parametrize("src", fc.INT_SOURCES)
@pytest.mark.parametrize("dst", fc.FP8, ids=lambda d: d.name)
def test_integers_round_once(dst: Any, src: type) -> None:
    fc.check_narrowing(convert, dst, fc.ints_of(src))


@pytest.mark.parametrize("src", fc.FP8, ids=lambda d: d.name)
def test_between_the_formats(src: Any) -> None:
    fc.check_narrowing(convert, f8e5m2 if src == f8e4m3 else f8e4m3, fc.all_patterns(src))


# -- kernels that use them ----------------------------------------------------------------


def test_simt_kernel_loads_computes_and_stores() -> None:
    rng = np.random.default_rng(11)
    n = 1000
    a = (rng.standard_normal(n) * 40).astype(ml_dtypes.float8_e4m3fn)
    b = (rng.standard_normal(n) * 8).astype(ml_dtypes.float8_e5m2)
    b[::7] = 0
    out, wide = np.zeros(n, f8e5m2.numpy), np.zeros(n, np.float32)
    fc.scale_shift[ox.LaunchConfig.for_num_elems(n)](a, b, 3.0, out, wide)
    want_out, want_wide = fc.scale_shift_reference(a, b, 3.0)
    np.testing.assert_array_equal(fc.bits(out), want_out)
    np.testing.assert_array_equal(wide, want_wide)


@pytest.mark.parametrize("shape", [(64, 128), (70, 90)])  # rows of 16-byte vectors, or not
def test_tile_kernel_loads_computes_and_stores(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(12)
    x = (rng.standard_normal(shape) * 30).astype(ml_dtypes.float8_e4m3fn)
    x[0, :5] = np.array([0, -0.0, np.nan, 448, -448], np.float32)
    y = np.zeros(shape, f8e5m2.numpy)
    grid = (tile.cdiv(shape[0], 32), tile.cdiv(shape[1], 64))
    fc.tile_scale[grid](x, y, 200.0, 32, 64)
    np.testing.assert_array_equal(fc.bits(y), fc.tile_scale_reference(x, 200.0))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_gpu_code_assembles(arch: str) -> None:
    sig = (Slice[f8e4m3], Slice[f8e5m2], f32, DisjointSlice[f8e5m2], DisjointSlice[f32])
    assert fc.scale_shift.compile(*sig, arch=arch).cubin
    vectors = dataclasses.replace(Slice[f8e4m3, 2], vectors=True)
    out = dataclasses.replace(DisjointSlice[f8e5m2, 2], vectors=True)
    ck = fc.tile_scale.compile(vectors, out, f32, 32, 64, arch=arch)
    assert "ld.global.nc.v4.b32" in ck.ptx and ck.cubin  # 16 8-bit floats a load
    for dst in (f64, *fc.FP8):
        assert fc.converter(dst).compile(Slice[f64 if dst.is_fp8 else f8e5m2],
                                         DisjointSlice[dst], arch=arch).cubin


@ox.kernel(block=256)
def through_shared(a: Slice[f8e4m3], out: DisjointSlice[f8e4m3]):
    sh = ox.shared.array(f8e4m3, 256)
    t = thread.in_block()
    i = ox.block_idx.x * 256 + t
    sh[t] = a[i] if i < len(a) else -0.0
    ox.sync_threads()
    j = thread.index_1d()
    if j in out:
        out[j] = sh[255 - t]


def test_shared_arrays_of_8_bit_floats() -> None:
    a = fc.all_patterns(f8e4m3)
    out = np.zeros(256, f8e4m3.numpy)
    through_shared[1, 256](a, out)
    np.testing.assert_array_equal(fc.bits(out), fc.bits(a)[::-1])


@ox.kernel
def truth(a: Slice[f8e5m2], out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i in out:
        r = 0
        if a[i]:
            r = 1
        out[i] = r


@ox.tile.kernel(num_warps=1)
def tile_truth(a: Slice[f8e5m2], out: DisjointSlice[i32]):
    i = tile.bid(0)
    r = 0
    if tile.load(a, (i,), ()):
        r = 1
    tile.store(out, (i,), r)


def test_a_condition_tests_the_value() -> None:
    # NaN is true, both zeros are false: not the bits' test (-0.0 is 0x80)
    a = fc.all_patterns(f8e5m2)
    want = (a.astype(np.float32) != 0).astype(np.int32)
    for k, launch in ((truth, truth[1, 256]), (tile_truth, tile_truth[256])):
        out = np.zeros(256, np.int32)
        launch(a, out)
        np.testing.assert_array_equal(out, want, err_msg=k.__name__)


@ox.func
def pick(k: i32, a: f8e4m3, b: f8e4m3) -> f8e4m3:
    if k == 1:
        return a
    return b


@ox.kernel
def locals_and_functions(a: Slice[f8e4m3], out: DisjointSlice[f8e4m3]):
    loc = ox.local.array(f8e4m3, 2)
    i = thread.index_1d()
    if i in out:
        loc[0] = a[i]
        loc[1] = 2.5
        print("value", a[i])
        out[i] = pick(i32(i % 2), loc[0], loc[1])


def test_local_arrays_functions_and_print(capfd: pytest.CaptureFixture[str]) -> None:
    a = np.array([1.5, -3.0], ml_dtypes.float8_e4m3fn)
    out = np.zeros(2, f8e4m3.numpy)
    locals_and_functions[1, 2](a, out)
    assert out.astype(np.float32).tolist() == [2.5, -3.0]
    assert capfd.readouterr().out == "value 1.5\nvalue -3\n"


# -- literals and constants ---------------------------------------------------------------


@ox.kernel
def literals(flag: Slice[i32], out: DisjointSlice[f8e4m3]):
    i = thread.index_1d()
    if i in out:
        out[i] = 0.1  # rounded to 0.1015625
        if flag[i] == 1:
            out[i] = f8e4m3(1000.0)  # a conversion: saturates
        if flag[i] == 2:
            out[i] = -448.0
        if flag[i] == 3:
            out[i] = math.nan


def test_literals_round_and_conversions_saturate() -> None:
    out = np.zeros(4, f8e4m3.numpy)
    literals[1, 4](np.arange(4, dtype=np.int32), out)
    assert fc.bits(out).tolist() == [formats.to_bits(0.1, formats.E4M3), 0x7E, 0xFE, 0x7F]
    assert ox.f8e4m3(1000.0) == 448.0 and ox.f8e5m2(0.1) == 0.09375  # the host's, alike


def test_a_literal_beyond_the_range_is_refused() -> None:
    def store(a: Slice[f8e4m3], out: DisjointSlice[f8e4m3]):
        i = thread.index_1d()
        if i in out:
            out[i] = 500.0

    with pytest.raises(KernelTypeError, match="500.0 does not fit in f8e4m3"):
        ox.kernel(store).compile(Slice[f8e4m3], DisjointSlice[f8e4m3])


# -- what is refused ----------------------------------------------------------------------

SIMT_ARITHMETIC = [
    "out[i] = a[i] + a[i]",
    "out[i] = a[i] * 2.0",
    "out[i] = -a[i]",
    "out[i] = abs(a[i])",
    "out[i] = min(a[i], a[i])",
    "out[i] = f8e4m3(ox.math.sqrt(a[i]))",
    "out[i] = f8e4m3(math.floor(a[i]))",
    "out[i] = a[i] if a[i] < 1.0 else a[i]",
    "out[i] = f8e4m3(a[i] + f32(1.0))",
    "out[i] = ox.block.reduce_add(a[i])",
    "out[i] = f8e4m3(ox.warp.reduce_max(a[i]))",
]
TILE_ARITHMETIC = [
    "tile.store(out, (0, 0), x + x)",
    "tile.store(out, (0, 0), x * 2.0)",
    "tile.store(out, (0, 0), -x)",
    "tile.store(out, (0, 0), tile.where(x > 0.0, x, x))",
    "tile.store(out, (0, 0), tile.maximum(x, x))",
    "tile.store(out, (0, 0), tile.exp(x))",
    "tile.store(out, (0, 0), x ** 2)",
    "tile.store(out, (0, 0), tile.cumsum(x, 0))",
    "tile.store(out, (0, 0), tile.sum(x, 1, keepdims=True))",
    "tile.store(out, (0, 0), x + x.astype(f32))",
]


def kernel_from(decorator: str, params: str, body: str) -> Any:
    """A kernel `k(params)` whose last statement is `body`, in a file of its own (registered
    with linecache, so spans read its lines): the body is its line 5."""
    first = ("i = thread.index_1d()\n    if i in out:" if "tile" not in decorator
             else "x = tile.load(a, (0, 0), (16, 16))\n    if True:")
    text = f"@{decorator}\ndef k({params}):\n    {first}\n        {body}\n"
    path = f"<fp8-{abs(hash(text))}>"
    linecache.cache[path] = (len(text), None, text.splitlines(True), path)
    scope = {**globals(), "math": math, "T": fc.T}
    exec(compile(text, path, "exec"), scope)
    return scope["k"]


def refused(k: Any, *sig: Any, body: str, hint: str) -> None:
    with pytest.raises(KernelTypeError) as info:
        k.compile(*sig)
    err = info.value
    assert "8-bit floats are storage types" in err.message
    assert err.span is not None and err.span.line == 5 and body in err.span.text
    assert hint in (err.hint or "")


@pytest.mark.parametrize("body", SIMT_ARITHMETIC)
def test_simt_arithmetic_is_refused(body: str) -> None:
    k = kernel_from("ox.kernel", "a: Slice[f8e4m3], out: DisjointSlice[f8e4m3]", body)
    refused(k, Slice[f8e4m3], DisjointSlice[f8e4m3], body=body,
            hint="f8e4m3 is a storage type: convert it first, e.g. `f32(x)`")


@pytest.mark.parametrize("body", TILE_ARITHMETIC)
def test_tile_arithmetic_is_refused(body: str) -> None:
    k = kernel_from("ox.tile.kernel", "a: Slice[f8e5m2, 2], out: DisjointSlice[f8e5m2, 2]",
                    body)
    refused(k, Slice[f8e5m2, 2], DisjointSlice[f8e5m2, 2], body=body,
            hint="f8e5m2 is a storage type: convert it first, e.g. `x.astype(f32)`")


def test_the_ir_verifier_refuses_arithmetic_on_8_bit_floats() -> None:
    # the frontends' errors come first; the verifier (OXIDE_VERIFY_IR, on in the tests)
    # catches a path that would reach codegen, which would compute on the `i8` bits
    from xdsl.utils.exceptions import VerifyException

    from oxide.frontend.builder import IRBuilder
    from oxide.ir import ops

    b = IRBuilder("k", [])
    x = b.constant(0.1, f8e4m3)
    assert x.owner.value.value.data == 0.1015625  # type: ignore[attr-defined]  # rounded
    for op in (ops.BinaryOp("add", x, x), ops.UnaryOp("neg", x), ops.CompareOp("lt", x, x),
               ops.MathOp("sqrt", [x], x.type)):
        with pytest.raises(VerifyException, match="8-bit float"):
            op.verify()


def test_atomics_on_8_bit_floats_are_refused() -> None:
    k = kernel_from("ox.kernel", "a: Slice[f8e4m3], out: AtomicSlice[f8e4m3]",
                    "ox.atomic.add(out, 0, a[i])")
    with pytest.raises(KernelTypeError, match="does not support f8e4m3"):
        k.compile(Slice[f8e4m3], AtomicSlice[f8e4m3])


def test_scalar_parameters_are_refused() -> None:
    with pytest.raises(KernelTypeError, match="8-bit floats in arrays only") as info:
        kernel_from("ox.kernel", "s: f8e4m3, out: DisjointSlice[f32]", "out[i] = f32(s)")
    assert "`s: f32`" in (info.value.hint or "")
    k = kernel_from("ox.kernel", "s: T, out: DisjointSlice[f32]", "out[i] = f32(s)")
    scalar = np.array([1.5], ml_dtypes.float8_e4m3fn)[0]
    with pytest.raises(ox.ArgumentError, match="`s` is a scalar of f8e4m3"):
        k[1, 1](scalar, np.zeros(1, np.float32))
    with pytest.raises(ox.ArgumentError, match="`s` is a scalar of f8e5m2"):
        k.compile(f8e5m2, DisjointSlice[f32])


# -- the host side ------------------------------------------------------------------------


def test_dtype_names() -> None:
    class TorchDtype:  # what `str(torch.float8_e5m2)` gives, without torch
        def __str__(self) -> str:
            return "torch.float8_e5m2"

    assert ox.types.dtype_of("float8_e4m3fn") is f8e4m3
    assert ox.types.dtype_of(np.dtype(ml_dtypes.float8_e5m2)) is f8e5m2
    assert ox.types.dtype_of(TorchDtype()) is f8e5m2
    assert f8e4m3.numpy == np.dtype(ml_dtypes.float8_e4m3fn) and f8e4m3.itemsize == 1


def test_host_arrays_round_trip() -> None:
    a = fc.all_patterns(f8e5m2).reshape(16, 16)
    d = ox.to_device(a)
    assert d.dtype == a.dtype and d.shape == (16, 16)
    np.testing.assert_array_equal(fc.bits(d.to_numpy()), fc.bits(a))
    z = ox.zeros((3, 5), f8e4m3)
    assert z.dtype == np.dtype(ml_dtypes.float8_e4m3fn) and not fc.bits(z.to_numpy()).any()
    out = ox.empty(256, f32)
    fc.converter(f32)[1, 256](ox.to_device(a.reshape(-1)), out)
    assert fc.same_floats(out.to_numpy(), a.reshape(-1).astype(np.float32))


def test_a_wrong_dtype_is_refused_at_launch() -> None:
    with pytest.raises(ox.ArgumentError, match="got an array of f8e5m2"):
        fc.scale_shift[1, 32](np.zeros(32, f8e5m2.numpy), np.zeros(32, f8e5m2.numpy), 1.0,
                              np.zeros(32, f8e5m2.numpy), np.zeros(32, np.float32))
    with pytest.raises(ox.ArgumentError, match="got an array of u8"):
        fc.scale_shift[1, 32](np.zeros(32, np.uint8), np.zeros(32, f8e5m2.numpy), 1.0,
                              np.zeros(32, f8e5m2.numpy), np.zeros(32, np.float32))


class CudaProducer:
    """A DLPack producer on "CUDA" device 0 of an exported capsule (no GPU is touched)."""

    def __init__(self, capsule: Any) -> None:
        self.capsule = capsule

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0)  # kDLCUDA


def test_dlpack_codes() -> None:
    from oxide.runtime import dlpack

    for dt, code in ((f8e4m3, 10), (f8e5m2, 12)):  # DLPack 1.1's kDLFloat8_e4m3fn, _e5m2
        keep = np.zeros(4, np.uint8)
        capsule = dlpack.export(keep.ctypes.data, (4,), dt, 0, keep)
        view = dlpack.view_from_dlpack(CudaProducer(capsule))
        assert view.dtype is dt and view.shape == (4,) and view.ptr == keep.ctypes.data
        assert dlpack._dtype(dlpack.DLDataType(code, 8, 1)) is dt


C8 = ox.ConstantArray(f8e5m2, 4)


@ox.kernel
def read_constants(out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = f32(C8[i])


def test_constant_arrays_take_what_literals_take() -> None:
    # rounded once (0.1 in f64 is not rounded through f32), NaN as 0x7F
    C8.set(np.array([0.1, -57344.0, 0.203125 + 2.0**-40, math.nan]))  # a tie, nudged
    assert fc.bits(C8.values).tolist() == [formats.to_bits(0.1, formats.E5M2), 0xFB, 0x33,
                                           0x7F]
    out = np.zeros(4, np.float32)
    read_constants[1, 4](out)
    assert out[:3].tolist() == [0.09375, -57344.0, 0.21875] and math.isnan(out[3])
    for bad in (60000.0, math.inf):  # what a kernel's conversion would saturate
        with pytest.raises(ox.ArgumentError, match="beyond f8e5m2's range"):
            C8.set([bad, 0, 0, 0])
    e4 = ox.ConstantArray(f8e4m3, 2)
    e4.set(np.array([1.5, -448.0], ml_dtypes.float8_e4m3fn))
    assert e4.values.astype(np.float32).tolist() == [1.5, -448.0]
