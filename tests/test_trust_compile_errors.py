"""Issue 14 (items 7 and 14): compile-time crashes become diagnostics with spans, memory
limits are checked before any IR is built, and RawSlice writes are bounds-checked.

Each failing case asserts the error's class, its message and the source line its span
points at (never an InternalCompilerError, a Python exception or a hang); each accepted
case checks the value the kernel computes on the CPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import oxide as ox
from oxide import DisjointSlice, RawSlice, bf16, f16, f32, f64, i32, i64, thread, u8, u64

NAN = math.nan
INF = math.inf
BIG = 2**2000


@pytest.fixture(autouse=True)
def on_cpu() -> Iterator[None]:
    with ox.device("cpu"):
        yield


def expect(build: Callable[[], Any], cls: type[ox.CompileError], words: tuple[str, ...],
           line_text: str, *sig: Any) -> ox.CompileError:
    """Runs `build` (and compiles the kernel it returns for `sig`); asserts the error's
    class, that each of `words` is in its message/label/hint, and that its span is the
    line of this file holding `line_text`."""
    with pytest.raises(ox.CompileError) as info:
        k = build()
        k.compile(*sig)
    err = info.value
    assert type(err) is cls, f"{type(err).__name__}: {err}"
    said = "\n".join((err.message, err.label, err.hint))
    for word in words:
        assert word in said, f"{word!r} not in: {said}"
    assert err.span is not None, str(err)
    assert err.span.file == __file__, str(err)
    assert line_text in err.span.text, f"span on the wrong line: {err}"
    return err


def kernel_from_source(src: str, options: str = "") -> Any:
    """A kernel defined by `src` in a file of its own (registered with linecache, so
    spans read its lines): lets one test body cover many shapes of one mistake."""
    import linecache

    text = f"@ox.kernel{options}\n{src}"
    path = f"<trust-{abs(hash(text))}>"
    linecache.cache[path] = (len(text), None, text.splitlines(True), path)
    scope: dict[str, Any] = dict(globals())
    exec(compile(text, path, "exec"), scope)
    return scope["k"]


def expect_source(src: str, cls: type[ox.CompileError], words: tuple[str, ...], line: int,
                  *sig: Any) -> ox.CompileError:
    """Like `expect`, for a kernel built from `src`: `line` counts from its `def` (1)."""
    with pytest.raises(ox.CompileError) as info:
        kernel_from_source(src).compile(*sig)
    err = info.value
    assert type(err) is cls, f"{type(err).__name__}: {err}"
    said = "\n".join((err.message, err.label, err.hint))
    for word in words:
        assert word in said, f"{word!r} not in: {said}"
    assert err.span is not None and err.span.line == line + 1, str(err)
    return err


def run1(k: Any, dtype: Any, n: int = 1) -> np.ndarray:
    out = np.zeros(n, dtype)
    k[ox.LaunchConfig(grid=1, block=n)](out)
    return out


# -- conversions of constants: what the host (Python, NumPy) computes, or an error ---------

def test_float_to_int_constants_truncate_toward_zero() -> None:
    @ox.kernel
    def k(out: DisjointSlice[i64]):
        i = thread.index_1d()
        if i in out:
            out[i] = i64(i32(2.9)) + i64(i32(-2.9)) * 10 + i64(u8(-0.5)) * 100
    assert run1(k, np.int64)[0] == 2 - 20 + 0


@pytest.mark.parametrize("expr,words", [
    ("i32(NAN)", ("NaN", "ValueError", "i32")),
    ("i64(INF)", ("infinity", "OverflowError", "i64", "2**63 - 1")),
    ("i32(-INF)", ("infinity", "OverflowError", "-2**31")),
    ("u64(INF)", ("infinity", "2**64 - 1")),
    ("int(NAN)", ("NaN", "i32")),
    ("i32(3e10)", ("does not fit in i32", "OverflowError")),
    ("u8(-3.7)", ("does not fit in u8", "from 0 to 2**8 - 1")),
    ("i64(1e19)", ("does not fit in i64",)),
])
def test_float_to_int_constants_python_refuses_are_errors(expr: str, words: tuple[str, ...]
                                                          ) -> None:
    """Python raises for `int(nan)` and `int(inf)`, NumPy for `np.int32(3e10)`: a
    constant the compiler folds raises at compile time too (issue 27), where it once
    gave the saturated run-time result silently."""
    src = ("def k(out: DisjointSlice[i64]):\n"
           "    i = thread.index_1d()\n"
           "    if i in out:\n"
           f"        out[i] = i64({expr})\n")
    err = expect_source(src, ox.KernelTypeError, words, 4, DisjointSlice[i64])
    assert "the constant" in err.message


def test_float_constants_round_to_the_type_and_overflow_to_inf() -> None:
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = f32(1e300) + f32(f16(70000.0)) * 0.0 + f32(bf16(NAN)) * 0.0
    # inf + inf*0 (nan) -> nan: the f16 and bf16 constants are inf and nan, not errors
    assert math.isnan(run1(k, np.float32)[0])

    @ox.kernel
    def big(out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = f32(1e300) + f32(2**100) + f32(f16(70000))
    assert run1(big, np.float32)[0] == np.inf

    @ox.kernel
    def exact(out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = f32(2**100) + f32(f16(65504)) * 0.0 + f32(bf16(2**127))
    assert run1(exact, np.float32)[0] == np.float32(2.0**100) + np.float32(2.0**127)
    # the same constants assemble for the GPU
    assert big.compile(DisjointSlice[f32], arch="sm_90").cubin


def test_int_constant_beyond_a_float_range_is_an_error() -> None:
    def build() -> Any:
        @ox.kernel
        def k(out: DisjointSlice[f32]):
            i = thread.index_1d()
            if i in out:
                out[i] = f32(BIG)  # line: f32(BIG)
        return k
    expect(build, ox.KernelTypeError, ("2001-bit integer", "beyond the range of f32",
                                       "every float type", "math.inf"), "f32(BIG)",
           DisjointSlice[f32])


def test_int_constant_that_does_not_fit_the_integer_type() -> None:
    def build() -> Any:
        @ox.kernel
        def k(out: DisjointSlice[i32]):
            i = thread.index_1d()
            if i in out:
                out[i] = i32(2**40)  # line: i32(2**40)
        return k
    expect(build, ox.KernelTypeError, ("does not fit in i32",), "i32(2**40)",
           DisjointSlice[i32])


# -- bounded constant folding -------------------------------------------------------

@pytest.mark.parametrize("text, words", [
    ("1 << 2**40", "about a 1099511627777-bit integer"),
    ("2 ** 2 ** 40", "about a 1099511627777-bit integer"),
    ("3 ** 1000", "about a 1585-bit integer"),
    ("BIG * BIG", "about a 4001-bit integer"),
    ("BIG << 100", "2101-bit integer"),
    ("2 ** BIG", "a more than 2**2000-bit integer"),
    ("1 << BIG", "a more than 2**2000-bit integer"),
])
def test_huge_integer_constant_expressions_are_refused(text: str, words: str) -> None:
    src = ("def k(out: DisjointSlice[i64]):\n"
           "    i = thread.index_1d()\n"
           "    if i in out:\n"
           f"        out[i] = {text}\n")
    err = expect_source(src, ox.KernelTypeError, ("is too large", words, "at most 64 bits"),
                        4, DisjointSlice[i64])
    assert text in err.span.text


def test_exact_folding_within_128_bits() -> None:
    @ox.kernel
    def k(out: DisjointSlice[u64]):
        i = thread.index_1d()
        if i in out:
            out[i] = (1 << 64) - 1 + (-1 >> 2**40) + 1 + (2**127 >> 120) * 0
    assert run1(k, np.uint64)[0] == 2**64 - 1


def test_module_constant_beyond_64_bits_is_an_error_where_used() -> None:
    def build() -> Any:
        @ox.kernel
        def k(out: DisjointSlice[i64]):
            i = thread.index_1d()
            x = 2**70  # line: x = 2**70
            if i in out:
                out[i] = x
        return k
    expect(build, ox.KernelTypeError, ("1180591620717411303424 does not fit",),
           "x = 2**70", DisjointSlice[i64])

    def used_directly() -> Any:
        @ox.kernel
        def k(out: DisjointSlice[i64]):
            i = thread.index_1d()
            if i in out:
                out[i] = 2**70 + 0 * i  # line: 2**70 + 0 * i
        return k
    expect(used_directly, ox.KernelTypeError, ("does not fit in i64", "at most 64 bits"),
           "2**70 + 0 * i", DisjointSlice[i64])


def test_index_literal_beyond_i64_is_an_error() -> None:
    def build() -> Any:
        @ox.kernel
        def k(x: ox.Slice[f32], out: DisjointSlice[f32]):
            i = thread.index_1d()
            if i in out:
                out[i] = x[1 << 64]  # line: x[1 << 64]
        return k
    expect(build, ox.KernelTypeError, ("does not fit in i64", "at most 64 bits"),
           "x[1 << 64]", ox.Slice[f32], DisjointSlice[f32])


def test_float_overflow_in_a_constant_expression() -> None:
    def build() -> Any:
        @ox.kernel
        def k(out: DisjointSlice[f32]):
            i = thread.index_1d()
            if i in out:
                out[i] = 2.0 ** 10000  # line: 2.0 ** 10000
        return k
    expect(build, ox.KernelTypeError, ("overflows", "beyond the range of f64", "math.inf"),
           "2.0 ** 10000", DisjointSlice[f32])


def test_float_constants_folding_to_inf_and_nan_compile() -> None:
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = 1e308 * 10.0 if i == 0 else (INF - INF)
    out = run1(k, np.float32, 2)
    assert out[0] == np.inf and math.isnan(out[1])
    assert k.compile(DisjointSlice[f32], arch="sm_90").cubin


@pytest.mark.parametrize("checks", [True, False])
def test_integer_division_by_constant_zero_keeps_runtime_semantics(checks: bool) -> None:
    @ox.kernel(checks=checks)
    def k(out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i in out:
            out[i] = 7 // 0 + 5 % 0 + 1
    out = np.full(1, -5, np.int32)
    if checks:
        with pytest.raises(ox.KernelAssertionError, match="integer division by zero"):
            k[ox.LaunchConfig(grid=1, block=1)](out)
    else:
        k[ox.LaunchConfig(grid=1, block=1)](out)
    assert out[0] == 1


# -- compile-time tuples ------------------------------------------------------------

def test_tuples_repeat_and_join_at_compile_time() -> None:
    @ox.kernel
    def k(out: DisjointSlice[i32]):
        i = thread.index_1d()
        grid = ox.local.array(i32, (2,) * 3)
        a, b, c = (1, 2) + (3,)
        grid[1, 1, 1] = a * 100 + b * 10 + c
        if i in out:
            out[i] = grid[1, 1, 1] + len(3 * (0, 0))
    assert run1(k, np.int32)[0] == 129


@pytest.mark.parametrize("text, words", [
    ("(0,) * 2**40", ("would have 1099511627776 items", "at most 1024")),
    ("(0,) * n", ("constant integer number of times, not i32",)),
    ("(0,) * 1.5", ("constant integer number of times, not a float literal",)),
    ("(0,) + 1", ("`+` joins two tuples, not a tuple and an int literal",)),
])
def test_bad_tuple_arithmetic(text: str, words: tuple[str, ...]) -> None:
    src = ("def k(out: DisjointSlice[i32], n: i32):\n"
           f"    t = {text}\n")
    expect_source(src, ox.KernelTypeError, words, 2, DisjointSlice[i32], i32)


# -- shared and local arrays --------------------------------------------------------

def test_huge_local_array_is_a_compile_error() -> None:
    def build() -> Any:
        @ox.kernel
        def k(out: DisjointSlice[f32]):
            scratch = ox.local.array(f32, (1 << 28,))  # line: local 2^28
            scratch[0] = 1.0
        return k
    expect(build, ox.KernelTypeError, ("1 GiB", "at most 64 KiB per thread", "ox.shared.array"),
           "local 2^28", DisjointSlice[f32])


def test_local_arrays_add_up_against_the_limit() -> None:
    def build() -> Any:
        @ox.kernel
        def k(out: DisjointSlice[f32]):
            a = ox.local.array(f64, 8192)
            b = ox.local.array(f32, 1)  # line: one float too many
            a[0] = 1.0
            b[0] = 1.0
        return k
    expect(build, ox.KernelTypeError, ("4 bytes", "64 KiB already used", "at most 64 KiB per thread"),
           "one float too many", DisjointSlice[f32])


@ox.kernel
def local_read_before_write(x: ox.Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    buf = ox.local.array(f32, 8)
    big = ox.local.array(f32, 4096)
    if x[0] > 100.0:
        buf[3] = 1.0
        big[4095] = 1.0
    if i in out:
        out[i] = buf[3] + buf[5] + big[(i + 4095) % 4096]


def test_local_arrays_start_zeroed() -> None:
    out = np.full(4, 7.0, np.float32)
    local_read_before_write[ox.LaunchConfig(grid=1, block=4)](np.zeros(1, np.float32), out)
    assert out.tolist() == [0, 0, 0, 0]  # not the write that did not happen (undef)
    ptx = local_read_before_write.compile(ox.Slice[f32], DisjointSlice[f32], arch="sm_90")
    assert ptx.cubin


def test_local_array_at_the_limit_runs() -> None:
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d()
        scratch = ox.local.array(f32, (16, 1024))
        scratch[15, 1023] = 2.5
        if i in out:
            out[i] = scratch[15, 1023]
    assert run1(k, np.float32)[0] == 2.5


@pytest.mark.parametrize("shape, words", [
    ("(1 << 31, 1 << 31, 1 << 31)", ("about 2**95 bytes", "at most 48 KiB per block")),
    ("(1 << 31,) * 3", ("about 2**95 bytes", "at most 48 KiB per block")),
    ("(1 << 20,)", ("4 MiB", "at most 48 KiB per block", "ox.shared.dynamic")),
])
def test_big_shared_arrays_are_compile_errors(shape: str, words: tuple[str, ...]) -> None:
    src = ("def k(out: DisjointSlice[f32]):\n"
           f"    s = ox.shared.array(f32, {shape})\n"
           "    with ox.unsafe():\n"
           "        s[0] = 1.0\n")
    expect_source(src, ox.KernelTypeError, words, 2, DisjointSlice[f32])


def test_big_shared_array_fails_before_llvm_for_the_gpu() -> None:
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        s = ox.shared.array(f32, (1 << 20,))  # line: 4 MiB
        with ox.unsafe():
            s[0] = 1.0
    with pytest.raises(ox.KernelTypeError) as info:
        k.compile(DisjointSlice[f32], arch="sm_90")
    assert info.value.span is not None and "line: 4 MiB" in info.value.span.text


def test_shared_arrays_add_up_and_48_kib_compiles_for_the_gpu() -> None:
    def build() -> Any:
        @ox.kernel
        def k(out: DisjointSlice[f32]):
            a = ox.shared.array(f32, (64, 128))
            b = ox.shared.array(f64, 2048)
            c = ox.shared.array(u8, 1)  # line: one byte too many
            with ox.unsafe():
                a[0, 0] = 1.0
                b[0] = 1.0
                c[0] = 1
        return k
    expect(build, ox.KernelTypeError, ("1 bytes", "48 KiB already used"),
           "one byte too many", DisjointSlice[f32])

    @ox.kernel
    def fits(out: DisjointSlice[f32]):
        a = ox.shared.array(f32, (64, 128))
        b = ox.shared.array(f64, 2048)
        with ox.unsafe():
            a[0, 0] = 1.0
            b[0] = 2.0
            ox.sync_threads()
            out[0] = a[0, 0] + f32(b[0])
    assert fits.compile(DisjointSlice[f32], arch="sm_90").cubin
    assert run1(fits, np.float32)[0] == 3.0


TABLE_A = ox.ConstantArray(f32, 10000)
TABLE_B = ox.ConstantArray(f32, 10000)


def test_constant_arrays_add_up_against_constant_memory() -> None:
    def build() -> Any:
        @ox.kernel
        def k(out: DisjointSlice[f32]):
            i = thread.index_1d()
            if i in out:
                out[i] = TABLE_A[i % 10000] + TABLE_B[i % 10000]  # line: two tables
        return k
    err = expect(build, ox.KernelTypeError, ("`TABLE_B` needs 39.1 KiB", "use 39.1 KiB",
                                             "64 KiB in all"),
                 "line: two tables", DisjointSlice[f32])
    assert err.span is not None and err.span.text[err.span.col:].startswith("TABLE_B")

    @ox.kernel
    def one(out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = TABLE_A[i % 10000] + TABLE_A[0]
    assert one.compile(DisjointSlice[f32], arch="sm_90").cubin


@pytest.mark.parametrize("space", ["shared", "local"])
@pytest.mark.parametrize("shape, words", [
    ("(4, 0)", ("must be positive, not 0",)),
    ("-1", ("must be positive, not -1",)),
    ("2.0", ("compile-time integers, not a float literal",)),
    ("(True, 2)", ("compile-time integers, not a bool literal",)),
    ("(1, 2, 3, 4)", ("takes 1 to 3 dimensions, not 4",)),
    ("n", ("compile-time integers, not i32",)),
    ("(2, n)", ("compile-time integers, not i32",)),
])
def test_bad_array_shapes(space: str, shape: str, words: tuple[str, ...]) -> None:
    src = ("def k(out: DisjointSlice[f32], n: i32):\n"
           f"    a = ox.{space}.array(f32, {shape})\n")
    expect_source(src, ox.KernelTypeError, (f"ox.{space}.array", *words), 2,
                  DisjointSlice[f32], i32)


# -- decorator options and targets ---------------------------------------------------

@pytest.mark.parametrize("option, value, words", [
    ("max_threads", 4096, ("`max_threads` must be an int from 1 to 1024, not 4096",)),
    ("max_threads", 0, ("not 0",)),
    ("max_threads", True, ("not True",)),
    ("max_threads", 128.0, ("not 128.0",)),
    ("checks", 1, ("`checks` must be True or False, not 1",)),
    ("contract", "no", ("`contract` must be True or False",)),
    ("coarsen", None, ("`coarsen` must be True or False, not None",)),
])
def test_kernel_options_are_validated_at_the_decorator(option: str, value: Any,
                                                       words: tuple[str, ...]) -> None:
    def build() -> Any:
        @ox.kernel(**{option: value})  # line: decorator
        def k(out: DisjointSlice[f32]):
            pass
        return k
    err = expect(build, ox.KernelTypeError, words, "line: decorator")
    assert err.hint


def test_kernel_on_a_class_points_at_the_decorator() -> None:
    def build() -> Any:
        @ox.kernel  # line: class decorator
        class NotAKernel:
            pass
        return NotAKernel
    expect(build, ox.KernelSyntaxError, ("decorates a Python function", "the class `NotAKernel`"),
           "line: class decorator")

    def build_func() -> Any:
        @ox.func  # line: func on a class
        class NotAFunc:
            pass
        return NotAFunc
    expect(build_func, ox.KernelSyntaxError, ("@ox.func decorates", "the class `NotAFunc`"),
           "line: func on a class")


def test_valid_options_still_compile() -> None:
    @ox.kernel(checks=False, contract=False, max_threads=1024, coarsen=False)
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = 1.0
    assert ".maxntid 1024" in k.compile(DisjointSlice[f32], arch="sm_90").ptx


# -- starred assignment -------------------------------------------------------------

def test_starred_unpacking_of_tuples() -> None:
    @ox.kernel
    def k(out: DisjointSlice[i32]):
        i = thread.index_1d()
        a, *b = (1, 2, 3)
        *c, d = (4, 5)
        e, *f, g = (6, 7)
        h, *rest = b
        if i in out:
            out[i] = a * 1000 + b[1] * 100 + len(c) * 10 + d + len(f) + h * 0 + len(rest) * 0 \
                + e * 0 + g * 0
    assert run1(k, np.int32)[0] == 1315


def test_starred_unpacking_errors() -> None:
    def too_few() -> Any:
        @ox.kernel
        def k(out: DisjointSlice[i32]):
            _a, _b, *_c = (1,)  # line: too few
        return k
    expect(too_few, ox.KernelTypeError, ("cannot unpack 1 values into 2 names and a starred",),
           "line: too few", DisjointSlice[i32])


# -- RawSlice writes are bounds-checked when checks are on ----------------------------

@ox.kernel
def raw_write(out: RawSlice[f32], k: i64):
    with ox.unsafe():
        out[k] = 1.0


@ox.kernel(checks=False)
def raw_write_unchecked(out: RawSlice[f32], k: i64):
    with ox.unsafe():
        out[k] = 1.0


def test_raw_slice_write_out_of_bounds_is_reported_and_skipped() -> None:
    buf = np.zeros(8, np.float32)
    view = buf[:4]
    with pytest.raises(ox.KernelIndexError) as info:
        raw_write[ox.LaunchConfig(grid=1, block=1)](view, 4)
    assert info.value.index == 4 and info.value.length == 4
    assert "out[k] = 1.0" in str(info.value)
    assert not buf.any()  # the write was skipped, not done past the end
    with pytest.raises(ox.KernelIndexError):
        raw_write[ox.LaunchConfig(grid=1, block=1)](view, 1 << 40)  # a wild write: no segfault
    raw_write[ox.LaunchConfig(grid=1, block=1)](view, 3)
    assert buf.tolist() == [0, 0, 0, 1, 0, 0, 0, 0]


def test_raw_slice_write_checks_go_with_checks_false() -> None:
    assert "oxide.report" in raw_write.compile(RawSlice[f32], i64, arch="cpu").llvm
    assert "oxide.report" not in raw_write_unchecked.compile(RawSlice[f32], i64, arch="cpu").llvm
    buf = np.zeros(8, np.float32)
    raw_write_unchecked[ox.LaunchConfig(grid=1, block=1)](buf[:4], 4)  # inside buf: harmless
    assert buf[4] == 1.0  # unchecked: the write went where it was told
    assert raw_write.compile(RawSlice[f32], i64, arch="sm_90").cubin


def test_unsafe_still_permits_any_index() -> None:
    @ox.kernel
    def k(out: RawSlice[f32], d: DisjointSlice[f32], n: i64):
        i = thread.index_1d()
        with ox.unsafe():
            out[n - 1 - i] = f32(i)
            d[n - 1 - i] = f32(i)
    a = np.zeros(4, np.float32)
    b = np.zeros(4, np.float32)
    k[ox.LaunchConfig(grid=1, block=4)](a, b, 4)
    assert a.tolist() == [3, 2, 1, 0] and b.tolist() == [3, 2, 1, 0]
