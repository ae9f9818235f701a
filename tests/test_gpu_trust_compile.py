"""Issue 14 (items 7 and 14) on a real GPU: RawSlice writes are bounds-checked, arrays at
the memory limits launch, and folded constants match what the device computes."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import oxide as ox
from oxide import DisjointSlice, RawSlice, Slice, f32, f64, i32, i64, thread

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def on_gpu() -> Iterator[None]:
    with ox.device(0):
        yield


@ox.kernel
def raw_write(out: RawSlice[f32], k: i64):
    with ox.unsafe():
        out[k] = 1.0


@ox.kernel
def local_at_limit(out: DisjointSlice[f32], k: i64):
    i = thread.index_1d()
    scratch = ox.local.array(f32, (16, 1024))  # 64 KiB per thread, the limit
    for j in range(16):
        scratch[j, i % 1024] = f32(j)
    acc = f32(0)
    for j in range(16):  # `k` is 0, which the compiler cannot know: the array stays
        acc += scratch[j, (i + k) % 1024]
    if i in out:
        out[i] = acc


@ox.kernel
def local_read_before_write(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    buf = ox.local.array(f32, 8)
    big = ox.local.array(f32, 4096)
    if x[0] > 100.0:
        buf[3] = 1.0
        big[4095] = 1.0
    if i in out:
        out[i] = buf[3] + buf[5] + big[(i + 4095) % 4096]


@ox.kernel
def shared_at_limit(out: DisjointSlice[f32]):
    i = thread.index_1d()
    t = ox.thread_idx.x
    a = ox.shared.array(f32, (64, 128))  # 32 KiB
    b = ox.shared.array(f32, 4096)  # 16 KiB: 48 KiB in all, the static limit
    with ox.unsafe():
        a[63, t] = 1.0
        b[4095 - t] = 2.0
        ox.sync_threads()
        if i in out:
            out[i] = a[63, t] + b[4095 - t]


@ox.kernel
def constants(out: DisjointSlice[f64]):
    i = thread.index_1d()
    if i in out:
        if i == 0:
            out[i] = f64(i32(-2.9))
        elif i == 1:
            out[i] = f64(i64(9.2e18))
        elif i == 2:
            out[i] = f64(f32(1e300))
        else:
            out[i] = f64(i32(-2147483648.0))


@ox.kernel
def divide_by_constant_zero(out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i in out:
        out[i] = 7 // 0 + 1


def test_raw_slice_write_out_of_bounds_on_the_gpu() -> None:
    out = ox.to_device(np.zeros(4, np.float32))
    raw_write[1, 1](out, 4)
    with pytest.raises(ox.KernelIndexError) as info:
        ox.synchronize()
    assert info.value.index == 4 and info.value.length == 4
    raw_write[1, 1](out, 1 << 40)  # a wild write: reported, not a fault
    with pytest.raises(ox.KernelIndexError):
        ox.synchronize()
    raw_write[1, 1](out, 2)  # the context is healthy
    assert out.to_numpy().tolist() == [0, 0, 1, 0]


def test_local_array_at_the_limit_launches() -> None:
    out = ox.empty(64, ox.f32)
    local_at_limit[1, 64](out, 0)
    assert (out.to_numpy() == 120.0).all()


def test_local_arrays_start_zeroed_on_the_gpu() -> None:
    x = ox.to_device(np.zeros(1, np.float32))
    out = ox.to_device(np.full(64, 7.0, np.float32))
    local_read_before_write[1, 64](x, out)
    assert (out.to_numpy() == 0).all()


def test_static_shared_at_the_limit_launches() -> None:
    out = ox.empty(128, ox.f32)
    shared_at_limit[1, 128](out)
    assert (out.to_numpy() == 3.0).all()


def test_constant_conversions_match_the_device() -> None:
    out = ox.empty(4, ox.f64)
    constants[1, 4](out)
    got = out.to_numpy()
    # (NaN, infinities and out-of-range floats converted to integers are compile errors:
    # tests/test_trust_compile_errors.py)
    assert got[0] == -2 and got[1] == 9.2e18 and got[2] == np.inf and got[3] == -(2**31)


def test_constant_division_by_zero_reports_on_the_gpu() -> None:
    out = ox.empty(1, ox.i32)
    divide_by_constant_zero[1, 1](out)
    with pytest.raises(ox.KernelAssertionError, match="integer division by zero"):
        ox.synchronize()
    assert out.to_numpy()[0] == 1
