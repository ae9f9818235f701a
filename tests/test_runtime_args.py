"""Argument binding (runtime/args.py, runtime/views.py): checks, signatures, machine values."""

from __future__ import annotations

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, RawSlice, Slice, f16, f32, i32, thread, u8
from oxide.runtime.args import bind
from oxide.runtime.device import CPU, Device
from oxide.runtime.dlpack import view_from_dlpack
from oxide.runtime.views import HOST, view_of
from oxide.specialize import ConstValue

T = ox.TypeVar("T")
GPU0 = Device("cuda", 0)


@ox.kernel
def k(x: Slice[f32], a: f32, n: i32, B: Const[int], out: DisjointSlice[f32, 2]):
    thread.index_1d()


@ox.kernel
def generic(x: Slice[T], a: T, out: DisjointSlice[T]):
    thread.index_1d()


@ox.kernel
def two_reads(x: Slice[f32], y: Slice[f32]):
    thread.index_1d()


@ox.kernel
def small(h: f16, b: u8, r: RawSlice[u8]):
    thread.index_1d()


x = np.arange(10, dtype=np.float32)
o = np.zeros((3, 4), np.float32)


def test_signature_and_values_contiguous() -> None:
    b = bind(k, (x, 2.5, 3, 7, o), CPU)
    assert b.signature == (Slice[f32].with_layout(True), f32, i32, ConstValue(7),
                           DisjointSlice[f32, 2].with_layout(True))
    assert b.values == [x.ctypes.data, 10, 2.5, 3, o.ctypes.data, 3, 4]
    assert b.plan.formats == ["Q", "q", "f", "i", "Q", "q", "q"]
    typed = b.numpy_values()
    assert [type(v) for v in typed] == [np.uint64, np.int64, np.float32, np.int32, np.uint64,
                                        np.int64, np.int64]


def test_strided_arrays_pass_strides_in_elements() -> None:
    view = o[:, ::2]
    b = bind(k, (x, 2.5, 3, 7, view), CPU)
    assert b.signature[4] == DisjointSlice[f32, 2].with_layout(False)
    assert b.values[4:] == [view.ctypes.data, 3, 2, 4, 2]
    assert b.plan.formats[4:] == ["Q", "q", "q", "q", "q"]


def test_size_one_dimensions_stay_contiguous() -> None:
    col = np.zeros((5, 1), np.float32)[:, :1]
    assert view_of(col).strides is None
    assert view_of(np.zeros((1, 4), np.float32)[:, ::1]).strides is None


def test_const_values_select_specializations() -> None:
    a = bind(k, (x, 2.5, 3, 7, o), CPU)
    b = bind(k, (x, 2.5, 3, 8, o), CPU)
    c = bind(k, (x, 2.5, 3, np.int64(7), o), CPU)  # NumPy integers are ints
    assert a.plan is not b.plan and a.plan is not c.plan
    with pytest.raises(ox.ArgumentError, match="`B` is Const\\[int\\]; got bool True"):
        bind(k, (x, 2.5, 3, True, o), CPU)  # a bool is not an int here (issue 14)
    assert bind(k, (x, 1.0, 4, 7, o), CPU).plan is a.plan  # values do not make new plans


@pytest.mark.parametrize("args, message", [
    ((x, 2.5, 2**40, 7, o), "`n` is i32, whose range is"),
    ((x, 2.5, 3.0, 7, o), "`n` is i32; got the float 3.0"),
    ((x.astype(np.float64), 2.5, 3, 7, o), "`x` is Slice[f32]; got an array of f64"),
    ((x, 2.5, 3, 7, x), "`out` is DisjointSlice[f32, 2]; got an array of rank 1: declare `DisjointSlice[f32, 1]`"),
    ((x, 1e40, 3, 7, o), "`a` is f32, whose largest value is"),
    ((x, np.float64(1), 3, 7, o), "`a` is f32; got a f64 scalar"),
    ((x, x, 3, 7, o), "`a` is a scalar (f32); got an array"),
    ((x, "2", 3, 7, o), "`a` is a scalar (f32); got str"),
    ((3, 2.5, 3, 7, o), "`x` is Slice[f32]; got int, which is not an array"),
    ((x, 2.5, 3, 7), "has 5 parameters"),
    ((x.astype(np.complex64), 2.5, 3, 7, o), "`x` is Slice[f32]; got an array of complex64"),
])
def test_argument_errors_name_the_parameter(args: tuple, message: str) -> None:
    with pytest.raises(ox.ArgumentError) as info:
        bind(k, args, CPU)
    assert message in str(info.value)


def test_range_checks_of_small_types() -> None:
    r = np.zeros(4, np.uint8)
    assert bind(small, (1.5, 255, r), CPU).values[:2] == [1.5, 255]
    with pytest.raises(ox.ArgumentError, match="`b` is u8, whose range is 0..255; got 256"):
        bind(small, (1.0, 256, r), CPU)
    with pytest.raises(ox.ArgumentError, match="`b` is u8, whose range is 0..255; got -1"):
        bind(small, (1.0, -1, r), CPU)
    with pytest.raises(ox.ArgumentError, match="`h` is f16, whose largest value is"):
        bind(small, (1e6, 1, r), CPU)


def test_typevars_bind_from_arrays_and_scalars() -> None:
    d = np.zeros(4, np.float64)
    b = bind(generic, (d, 2.0, d.copy()), CPU)
    assert b.signature[1] == ox.f64
    with pytest.raises(ox.ArgumentError, match="binds T = f32, but an earlier parameter bound "
                                               "T = f64"):
        bind(generic, (d, 2.0, np.zeros(4, np.float32)), CPU)


def test_writable_argument_overlapping_another_is_an_aliasing_error() -> None:
    buf = np.zeros(16, np.float32)
    with pytest.raises(ox.AliasingError, match="`out` .* overlaps `x`"):
        bind(generic, (buf, 1.0, buf), CPU)
    with pytest.raises(ox.AliasingError):
        bind(generic, (buf[:9], 1.0, buf[8:]), CPU)
    bind(generic, (buf[:8], 1.0, buf[8:]), CPU)  # neighbours: no shared byte
    bind(two_reads, (buf, buf), CPU)  # two readers may share
    bind(generic, (buf[:0], 1.0, buf[:4]), CPU)  # an empty array touches nothing


def test_broadcast_writable_is_an_error() -> None:
    base = np.zeros(4, np.float32)
    bcast = np.broadcast_to(base, (3, 4))
    with pytest.raises(ox.ArgumentError, match="zero stride"):
        bind(k, (x, 1.0, 1, 1, bcast), CPU)


class FakeCudaArray:
    """What numba/CuPy-style GPU arrays look like to oxide."""

    def __init__(self, ptr: int, shape: tuple[int, ...], typestr: str = "<f4",
                 strides: tuple[int, ...] | None = None) -> None:
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (ptr, False), "strides": strides,
                                         "version": 3}


def test_gpu_array_on_a_cpu_launch_is_an_error() -> None:
    with pytest.raises(ox.ArgumentError, match="`x` is in GPU memory, but this launch runs "
                                               "on the CPU"):
        bind(two_reads, (FakeCudaArray(0x1000, (4,)), x), CPU)


def test_cuda_array_interface_on_a_gpu_launch() -> None:
    a = FakeCudaArray(0x10000, (4, 6), strides=(48, 8))
    b = FakeCudaArray(0x20000, (8,))
    bound = bind(k, (b, 1.0, 2, 3, a), GPU0)
    assert bound.values == [0x20000, 8, 1.0, 2, 0x10000, 4, 6, 12, 2]
    assert bound.signature[4].contiguous is False


def test_gpu_aliasing_uses_device_pointers() -> None:
    a = FakeCudaArray(0x10000, (16,))
    with pytest.raises(ox.AliasingError):
        bind(generic, (a, 1.0, FakeCudaArray(0x10000 + 32, (4,))), GPU0)


class DLPackOnly:
    """A producer reachable only through DLPack (as JAX arrays are)."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __dlpack__(self, **kwargs: object) -> object:
        return self.array.__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.array.__dlpack_device__()


def test_dlpack_fallback_reads_in_place() -> None:
    base = np.arange(12, dtype=np.int32).reshape(3, 4)[:, 1:3]
    v = view_from_dlpack(DLPackOnly(base))
    assert v.ptr == base.ctypes.data and v.shape == (3, 2) and v.strides == (4, 1)
    assert v.dtype == ox.i32 and v.device == HOST
    assert view_of(DLPackOnly(base)).ptr == base.ctypes.data


def test_device_array_on_the_cpu_wraps_numpy() -> None:
    with ox.device("cpu"):
        d = ox.to_device(np.arange(6, dtype=np.float32).reshape(2, 3))
        z = ox.zeros((2, 3), ox.f32)
        e = ox.empty(4, np.int32)
    assert d.shape == (2, 3) and d.dtype == np.float32 and d.strides == (12, 4)
    assert (d.to_numpy() == np.arange(6).reshape(2, 3)).all()
    assert (z.to_numpy() == 0).all() and e.shape == (4,) and e.dtype == np.int32
    assert np.asarray(d).sum() == 15
    bound = bind(two_reads, (d.to_numpy().ravel(), d.to_numpy().ravel()), CPU)
    assert bound.values[1] == 6
    v = view_of(d)
    assert v.device == HOST and v.ptr == d.data_ptr
