"""Launch-time and run-time errors on a real GPU, and the context staying usable after them."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import oxide as ox
from oxide import DisjointSlice, Slice, f32, i32, thread

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def on_gpu() -> Iterator[None]:
    with ox.device(0):
        yield


@ox.kernel
def shift_read(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i + 1]  # reads one past the end in the last thread


@ox.kernel
def copy(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i]


@ox.kernel
def copy_vector(x: Slice[f32, 1], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i]


@ox.kernel
def positive(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        assert x[i] > 0.0, "x must be positive"
        out[i] = x[i]


@ox.kernel
def divide(a: Slice[i32], b: Slice[i32], out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] // b[i]


@ox.kernel(max_threads=128)
def bounded(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i]


def cfg(n: int) -> ox.LaunchConfig:
    return ox.LaunchConfig.for_num_elems(n)


def test_index_error_then_a_correct_launch() -> None:
    n = 1000
    x = ox.to_device(np.arange(n, dtype=np.float32))
    out = ox.empty(n, ox.f32)
    shift_read[cfg(n)](x, out)
    with pytest.raises(ox.KernelIndexError) as info:
        ox.synchronize()
    message = str(info.value)
    assert "index 1000 is out of bounds for axis 0 of `x` (length 1000) in kernel `shift_read`" in message
    assert "test_gpu_errors.py:" in message and "x[i + 1]" in message
    assert info.value.index == 1000 and info.value.length == 1000
    copy[cfg(n)](x, out)  # the record was reset and the context is healthy
    np.testing.assert_array_equal(out.to_numpy(), np.arange(n, dtype=np.float32))


def test_error_surfaces_at_the_next_launch_without_sync() -> None:
    n = 256
    x = ox.to_device(np.ones(n, np.float32))
    out = ox.empty(n, ox.f32)
    shift_read[cfg(n)](x, out)
    from oxide.runtime import cuda_driver
    from oxide.runtime.gpu import gpu_device

    cuda_driver.synchronize_context()  # outside oxide: no check happens here
    assert gpu_device(0).active
    with pytest.raises(ox.KernelIndexError, match="shift_read"):
        copy[cfg(n)](x, out)
    copy[cfg(n)](x, out)
    ox.synchronize()


def test_to_numpy_reports_kernel_errors() -> None:
    x = ox.to_device(np.ones(64, np.float32))
    out = ox.empty(64, ox.f32)
    shift_read[cfg(64)](x, out)
    with pytest.raises(ox.KernelIndexError):
        out.to_numpy()
    assert (out.to_numpy()[:63] == 1).all()


def test_device_assert() -> None:
    x = ox.to_device(np.array([1.0, 2.0, -3.0, 4.0], np.float32))
    out = ox.empty(4, ox.f32)
    positive[1, 32](x, out)
    with pytest.raises(ox.KernelAssertionError, match="x must be positive") as info:
        ox.synchronize()
    assert "test_gpu_errors.py:" in str(info.value)
    ox.synchronize()  # cleared


def test_division_by_zero_is_reported() -> None:
    a = ox.to_device(np.arange(8, dtype=np.int32))
    b = ox.to_device(np.array([1, 1, 1, 0, 1, 1, 1, 1], np.int32))
    out = ox.empty(8, ox.i32)
    divide[1, 32](a, b, out)
    with pytest.raises(ox.KernelAssertionError, match="division by zero"):
        ox.synchronize()


def test_aliasing_error() -> None:
    x = ox.zeros(100)
    with pytest.raises(ox.AliasingError, match="`out`.*overlaps `x`"):
        copy[cfg(100)](x, x)
    torch = pytest.importorskip("torch")
    t = torch.zeros(100, device="cuda")
    with pytest.raises(ox.AliasingError):
        copy[cfg(99)](t[1:], t[:99])
    copy[cfg(50)](t[:50], t[50:])  # disjoint halves are fine
    torch.cuda.synchronize()


def test_launch_config_validation() -> None:
    x, out = ox.zeros(64), ox.zeros(64)
    with pytest.raises(ox.LaunchError, match="at most 1024 threads"):
        ox.LaunchConfig(grid=1, block=(32, 64))
    with pytest.raises(ox.LaunchError, match="grid.y = 70000 exceeds"):
        copy[(1, 70000), 32](x, out)
    with pytest.raises(ox.LaunchError, match="block.z = 128 exceeds"):
        copy[1, (1, 1, 128)](x, out)
    with pytest.raises(ox.LaunchError, match="dynamic shared memory"):
        copy[ox.LaunchConfig(grid=1, block=32, shared_mem_bytes=1 << 20)](x, out)
    copy[ox.LaunchConfig(grid=1, block=64, shared_mem_bytes=100 * 1024)](x, out)  # opt-in
    with pytest.raises(ox.LaunchError, match="runs at most 128 threads per block"):
        bounded[1, 256](x, out)
    bounded[1, 128](x, out)
    ox.synchronize()


def test_argument_errors() -> None:
    x = ox.zeros(64)
    with pytest.raises(ox.ArgumentError, match="`x` is Slice\\[f32\\]; got an array of f64"):
        copy[cfg(64)](ox.zeros(64, ox.f64), x)
    with pytest.raises(ox.KernelTypeError, match="`x: Slice\\[f32\\]` took rank 2 from its "
                       "argument"):
        copy[cfg(64)](ox.zeros((8, 8)), x)  # an unranked annotation takes the matrix's rank
    with pytest.raises(ox.ArgumentError, match="got an array of rank 2"):
        copy_vector[cfg(64)](ox.zeros((8, 8)), x)
    with pytest.raises(ox.ArgumentError, match="has 2 parameters"):
        copy[cfg(64)](x)
