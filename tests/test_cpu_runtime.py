"""Kernels run on the CPU backend against NumPy: the same compiler, host code, GPU semantics.

Integers compare exactly; floats within stated tolerances (f32 rtol 1e-5, f64 1e-12).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, f64, i32, i64, thread, u32
from oxide.runtime.config import LaunchConfig
from oxide.runtime.device import device

T = ox.TypeVar("T")
rng = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def on_cpu() -> Iterator[None]:
    with device("cpu"):
        yield


def cfg(n: int, block: int = 256) -> LaunchConfig:
    return LaunchConfig.for_num_elems(n, block=block)


# -- elementwise ---------------------------------------------------------------------


@ox.kernel
def scale(input: Slice[f32], factor: f32, out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = input[i] * factor


def test_scale() -> None:
    x = rng.standard_normal(10_000).astype(np.float32)
    y = np.zeros_like(x)
    scale[cfg(x.size)](x, 2.5, y)
    np.testing.assert_array_equal(y, x * np.float32(2.5))


def test_scale_uses_arrays_in_place_and_relaunches() -> None:
    x = np.arange(1000, dtype=np.float32)
    y = np.zeros_like(x)
    for factor in (1.0, -3.0, 0.5):
        scale[cfg(x.size, 128)](x, factor, y)
        np.testing.assert_array_equal(y, x * np.float32(factor))
    # one specialization serves every relaunch (compiled, or loaded from the disk cache)
    assert len(scale.__dict__["_oxide_cpu_entries"]) == 1


@ox.kernel
def axpy(a: T, x: Slice[T], y: Slice[T], out: DisjointSlice[T]):
    i = thread.index_1d()
    if i in out:
        out[i] = a * x[i] + y[i]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_generic_axpy(dtype: type) -> None:
    n = 3000
    x = (rng.standard_normal(n) * 100).astype(dtype)
    y = (rng.standard_normal(n) * 100).astype(dtype)
    out = np.zeros(n, dtype)
    a = dtype(3)
    axpy[cfg(n)](a, x, y, out)
    if np.issubdtype(dtype, np.integer):
        np.testing.assert_array_equal(out, a * x + y)
    else:
        rtol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(out, a * x + y, rtol=rtol, atol=rtol)


@ox.kernel
def transpose_add(a: Slice[f64, 2], b: Slice[f64, 2], out: DisjointSlice[f64, 2]):
    w = thread.index_2d()
    if w in out:
        out[w] = a[w] + b[w.col, w.row] * f64(2)


def test_2d_index_and_strided_views() -> None:
    a = rng.standard_normal((37, 53))
    b = rng.standard_normal((53, 37))
    out = np.zeros((37, 53))
    transpose_add[(4, 3), (16, 16)](a, b, out)
    np.testing.assert_allclose(out, a + b.T * 2, rtol=1e-12)
    # a non-contiguous (transposed) view compiles a strided specialization
    out2 = np.zeros((37, 53))
    transpose_add[(4, 3), (16, 16)](b.T.copy().T.T, b, out2)
    np.testing.assert_allclose(out2, b.T + b.T * 2, rtol=1e-12)
    out3 = np.zeros((37, 53))
    transpose_add[(4, 3), (16, 16)](a, a.T, out3)
    np.testing.assert_allclose(out3, a * 3, rtol=1e-12)


# -- device functions, loops, integer semantics --------------------------------------


@ox.func
def collatz_steps(n: i64) -> i64:
    steps = i64(0)
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


@ox.kernel
def collatz(start: Slice[i64], out: DisjointSlice[i64]):
    i = thread.index_1d()
    if i in out:
        out[i] = collatz_steps(start[i])


def _collatz(n: int) -> int:
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def test_func_with_loops_and_branches() -> None:
    start = np.arange(1, 2001, dtype=np.int64)
    out = np.zeros_like(start)
    collatz[cfg(start.size, 64)](start, out)
    np.testing.assert_array_equal(out, [_collatz(int(n)) for n in start])


@ox.kernel
def floor_ops(a: Slice[i32], b: Slice[i32], q: DisjointSlice[i32], r: DisjointSlice[i32],
              fq: DisjointSlice[f64], fr: DisjointSlice[f64]):
    i = thread.index_1d()
    if i in q and i in r and i in fq and i in fr:
        q[i] = a[i] // b[i]
        r[i] = a[i] % b[i]
        fq[i] = f64(a[i]) // f64(b[i])
        fr[i] = f64(a[i]) % f64(b[i])


def test_python_floor_division_and_modulo() -> None:
    a = np.array([7, -7, 7, -7, 0, 13, -13, 2**31 - 1, -(2**31)], dtype=np.int32)
    b = np.array([2, 2, -2, -2, 5, -4, 4, 3, 7], dtype=np.int32)
    q, r = np.zeros_like(a), np.zeros_like(a)
    fq, fr = np.zeros(a.size), np.zeros(a.size)
    floor_ops[1, 32](a, b, q, r, fq, fr)
    np.testing.assert_array_equal(q, a // b)
    np.testing.assert_array_equal(r, a % b)
    af, bf = a.astype(np.float64), b.astype(np.float64)
    np.testing.assert_array_equal(fq, af // bf)
    np.testing.assert_array_equal(fr, af % bf)


@ox.kernel
def power_sum(x: Slice[f32], k: Const[int], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        acc = f32(0)
        p = f32(1)
        for _ in range(k):
            p = p * x[i]
            acc += p
        out[i] = acc


@pytest.mark.parametrize("k", [1, 4])
def test_const_loop_bound(k: int) -> None:
    x = rng.uniform(0.5, 1.5, 500).astype(np.float32)
    out = np.zeros_like(x)
    power_sum[cfg(x.size)](x, k, out)
    want = sum(x.astype(np.float64) ** j for j in range(1, k + 1))
    np.testing.assert_allclose(out, want, rtol=1e-5)


@ox.kernel
def casts(x: Slice[f64], as_i32: DisjointSlice[i32], as_u32: DisjointSlice[u32],
          as_f32: DisjointSlice[f32], back: DisjointSlice[i64]):
    i = thread.index_1d()
    if i in as_i32 and i in as_u32 and i in as_f32 and i in back:
        as_i32[i] = i32(x[i])
        as_u32[i] = u32(x[i])
        as_f32[i] = f32(x[i])
        back[i] = i64(i32(x[i])) * 2


def test_casts() -> None:
    x = np.array([0.0, 1.9, -1.9, 123456.7, 3e9, -3e9, 1e-3, 65535.5])
    a, b = np.zeros(8, np.int32), np.zeros(8, np.uint32)
    c, d = np.zeros(8, np.float32), np.zeros(8, np.int64)
    casts[1, 8](x, a, b, c, d)
    # float -> int truncates toward zero and saturates at the type's range (as on the GPU)
    np.testing.assert_array_equal(a, np.clip(np.trunc(x), -(2**31), 2**31 - 1).astype(np.int32))
    np.testing.assert_array_equal(b, np.clip(np.trunc(x), 0, 2**32 - 1).astype(np.uint32))
    np.testing.assert_array_equal(c, x.astype(np.float32))
    np.testing.assert_array_equal(d, a.astype(np.int64) * 2)


# -- math ----------------------------------------------------------------------------


@ox.kernel
def math_f(x: Slice[T], y: Slice[T], out: DisjointSlice[T, 2]):
    i = thread.index_1d()
    if i < len(x):
        with ox.unsafe():
            out[0, i] = ox.math.sin(x[i])
            out[1, i] = ox.math.exp(x[i])
            out[2, i] = ox.math.sqrt(y[i])
            out[3, i] = ox.math.atan2(x[i], y[i])
            out[4, i] = ox.math.pow(y[i], x[i])
            out[5, i] = ox.math.tanh(x[i])
            out[6, i] = ox.math.log(y[i])
            out[7, i] = ox.math.erf(x[i])
            out[8, i] = ox.math.rsqrt(y[i])
            out[9, i] = ox.math.fma(x[i], y[i], x[i])
            out[10, i] = ox.math.cbrt(x[i])
            out[11, i] = ox.math.floor(x[i]) + ox.math.ceil(y[i])


def _math_reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    from math import erf

    return np.stack([np.sin(x), np.exp(x), np.sqrt(y), np.arctan2(x, y), np.power(y, x),
                     np.tanh(x), np.log(y), np.vectorize(erf)(x.astype(np.float64)),
                     1 / np.sqrt(y), x * y + x, np.cbrt(x), np.floor(x) + np.ceil(y)])


@pytest.mark.parametrize(("dtype", "rtol"), [(np.float32, 1e-5), (np.float64, 1e-12)])
def test_math(dtype: type, rtol: float) -> None:
    n = 700
    x = rng.uniform(-3, 3, n).astype(dtype)
    y = rng.uniform(0.1, 5, n).astype(dtype)
    out = np.zeros((12, n), dtype)
    math_f[cfg(n)](x, y, out)
    want = _math_reference(x.astype(np.float64), y.astype(np.float64))
    np.testing.assert_allclose(out, want, rtol=rtol, atol=rtol)


# -- errors, asserts, print ------------------------------------------------------------


@ox.kernel
def shifted(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i + 1]


def test_index_error_names_site_then_next_launch_works() -> None:
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    with pytest.raises(ox.KernelIndexError) as info:
        shifted[1, 64](x, out)
    text = str(info.value)
    assert "index 64" in text and "`x`" in text and "length 64" in text
    assert "shifted" in text
    assert f"{__file__}:" in text and "out[i] = x[i + 1]" in text
    out2 = np.zeros(63, np.float32)
    shifted[1, 64](x, out2)
    np.testing.assert_array_equal(out2, x[1:])


@ox.kernel
def checked_sqrt(x: Slice[f64], out: DisjointSlice[f64]):
    i = thread.index_1d()
    if i in out:
        assert x[i] >= 0, "negative input"
        out[i] = ox.math.sqrt(x[i])


def test_device_assert() -> None:
    x = np.array([1.0, 4.0, -1.0, 9.0])
    out = np.zeros(4)
    with pytest.raises(ox.KernelAssertionError, match="negative input") as info:
        checked_sqrt[1, 4](x, out)
    assert "checked_sqrt" in str(info.value)
    checked_sqrt[1, 4](np.abs(x), out)
    np.testing.assert_array_equal(out, [1, 2, 1, 3])


@ox.kernel
def divide(a: Slice[i32], b: Slice[i32], out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] // b[i]


def test_division_by_zero() -> None:
    a = np.array([4, 5, 6], np.int32)
    out = np.zeros(3, np.int32)
    with pytest.raises(ox.KernelAssertionError, match="integer division by zero"):
        divide[1, 3](a, np.array([1, 0, 2], np.int32), out)


@ox.kernel
def hello(x: Slice[i32], f: f64):
    i = thread.index_1d()
    if i < len(x):
        print("thread", i, "value", x[i], f, i == 1)


def test_print(capfd: pytest.CaptureFixture[str]) -> None:
    hello[1, 2](np.array([10, -20], np.int32), 2.5)
    out = capfd.readouterr().out
    assert out == "thread 0 value 10 2.5 False\nthread 1 value -20 2.5 True\n"


# -- grids, arguments ------------------------------------------------------------------


@ox.kernel
def coords(out: DisjointSlice[i32, 2]):
    with ox.unsafe():
        x = ox.block_idx.x * ox.block_dim.x + ox.thread_idx.x
        y = ox.block_idx.y * ox.block_dim.y + ox.thread_idx.y
        z = ox.block_idx.z * ox.block_dim.z + ox.thread_idx.z
        nx = ox.grid_dim.x * ox.block_dim.x
        ny = ox.grid_dim.y * ox.block_dim.y
        lin = (z * ny + y) * nx + x
        out[lin, 0] = x
        out[lin, 1] = y
        out[lin, 2] = z


def test_3d_grid_registers() -> None:
    grid, block = (3, 2, 4), (5, 3, 2)
    nx, ny, nz = (g * b for g, b in zip(grid, block, strict=True))
    out = np.full((nx * ny * nz, 3), -1, np.int32)
    coords[grid, block](out)
    z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    np.testing.assert_array_equal(out, np.stack([x.ravel(), y.ravel(), z.ravel()], axis=1))


def test_large_grid_split_across_threads() -> None:
    n = (1 << 18) + 77
    x = rng.standard_normal(n).astype(np.float32)
    y = np.zeros_like(x)
    scale[cfg(n, 128)](x, -1.5, y)
    np.testing.assert_array_equal(y, x * np.float32(-1.5))


def test_argument_checks_before_running() -> None:
    x = np.arange(16, dtype=np.float32)
    y = np.zeros(16, np.float32)
    with pytest.raises(ox.ArgumentError, match="input"):
        scale[1, 16](x.astype(np.float64), 2.0, y)
    with pytest.raises(ox.AliasingError):
        scale[1, 16](x, 2.0, x)
    with pytest.raises(ox.ArgumentError, match="out"):
        scale[1, 16](x, 2.0, _readonly(16))
    with pytest.raises(ox.ArgumentError, match="factor"):
        scale[1, 16](x, "2", y)
    assert not y.any()


def _readonly(n: int) -> np.ndarray:
    a = np.zeros(n, np.float32)
    a.setflags(write=False)
    return a


def test_int_scalars_are_range_checked() -> None:
    out = np.zeros(3, np.int32)
    with pytest.raises(ox.ArgumentError, match="n"):
        fill[1, 3](out, 2**31)
    fill[1, 3](out, -(2**31))
    np.testing.assert_array_equal(out, [-(2**31)] * 3)


@ox.kernel
def fill(out: DisjointSlice[i32], n: i32):
    i = thread.index_1d()
    if i in out:
        out[i] = n


@ox.kernel(max_threads=64)
def small_blocks(out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i in out:
        out[i] = i32(i)


def test_launch_limits_match_the_gpu() -> None:
    out = np.zeros(128, np.int32)
    with pytest.raises(ox.LaunchError, match="at most 64 threads"):
        small_blocks[1, 128](out)
    with pytest.raises(ox.LaunchError, match="block.z"):
        fill[1, (1, 1, 65)](out, 1)
    small_blocks[2, 64](out)
    np.testing.assert_array_equal(out, np.arange(128))
