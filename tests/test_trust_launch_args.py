"""Launch-argument holes of issue 14 (items 3, 6, 7, 15): self-overlapping writable arrays,
byte order, alignment, masked arrays, shared-memory and block limits on the CPU, scalar
and Const errors, keyword arguments, bools, NumPy integers in launch configurations.

Each refusal is tested on the first launch and on a relaunch, on the CPU and on the GPU
host path against the fake driver (tests/fake_cuda.py), where the relaunch goes through
a binder of runtime/fastpath.py: binders must never skip a check the general path makes.
"""

from __future__ import annotations

import itertools
import operator
import sys
import warnings
from collections.abc import Iterator

import numpy as np
import pytest
from fake_cuda import FakeDriver, Tensor, fake_torch, use_launch_flavor

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, f64, i32, thread
from oxide.runtime.cpu import MAX_DYNAMIC_SHARED
from oxide.runtime.overlap import DISJOINT, EXACT_LIMIT, OVERLAPS, UNPROVED, self_overlap

as_strided = np.lib.stride_tricks.as_strided


@ox.kernel
def scale(x: Slice[f32], a: f32, out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * a


@ox.kernel
def add2(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
    i = thread.index_2d()
    if i in out:
        out[i] = x[i] + 1.0


@ox.kernel
def fill(out: DisjointSlice[f32], n: i32, B: Const[int]):
    i = thread.index_1d()
    if i in out:
        out[i] = f32(n + B)


@ox.kernel
def wide(x: Slice[f64], a: f64, out: DisjointSlice[f64]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * a


@ox.kernel
def window_sum(w: Slice[f32, 2], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = w[i, 0] + w[i, 1] + w[i, 2]


@ox.kernel
def untouched(x: Slice[f32]):
    """Uses no ThreadIndex: any grid and block shape is fine for it."""


KERNELS = (scale, add2, fill, wide, window_sum, untouched)
CFG = ox.LaunchConfig(grid=1, block=32)


@pytest.fixture
def cpu() -> Iterator[None]:
    with ox.device("cpu"):
        yield


def f32s(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.float32)


# ---------------------------------------------------------------------------
# Item 3: writable arrays whose own elements overlap


def _brute_overlap(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    offsets = [sum(i * s for i, s in zip(ix, strides, strict=True))
               for ix in itertools.product(*(range(n) for n in shape))]
    return len(offsets) != len(set(offsets))


def test_self_overlap_agrees_with_listing_every_offset() -> None:
    rng = np.random.default_rng(3)
    for _ in range(3000):
        rank = int(rng.integers(1, 5))
        shape = tuple(int(n) for n in rng.integers(0, 5, rank))
        strides = tuple(int(s) for s in rng.integers(-13, 14, rank))
        expected = OVERLAPS if _brute_overlap(shape, strides) else DISJOINT
        assert self_overlap(shape, strides) == expected, (shape, strides)


@pytest.mark.parametrize("shape, strides, expected", [
    ((4, 4), (1, 1), OVERLAPS),  # as_strided(buf, (4, 4), (4, 4)) in f32 elements
    ((6, 3), (1, 1), OVERLAPS),  # sliding_window_view(x, 3)
    ((4, 4), (0, 1), OVERLAPS),  # a broadcast row
    ((4, 1), (0, 7), OVERLAPS),
    ((1, 4), (9, 0), OVERLAPS),
    ((4, 4), (4, 1), DISJOINT),
    ((4, 4), (1, 4), DISJOINT),  # a transpose
    ((4, 4), (-4, -1), DISJOINT),  # reversed
    ((4, 4), (8, 2), DISJOINT),  # a step
    ((3, 2), (2, 3), DISJOINT),  # interleaved: only the exact test proves it
    ((4, 3), (2, 3), OVERLAPS),  # 3*2 + 0*3 == 0*2 + 2*3
    ((2, 3, 4), (12, 4, 1), DISJOINT),
    ((2, 3, 4), (1, 2, 6), DISJOINT),
    ((2, 3, 4), (12, 4, 4), OVERLAPS),
    ((5, 0, 3), (0, 0, 0), DISJOINT),  # empty
    ((1, 1), (0, 0), DISJOINT),
])
def test_self_overlap_cases(shape, strides, expected) -> None:
    assert self_overlap(shape, strides) == expected


def test_self_overlap_too_large_to_decide_is_unproved() -> None:
    """Three interleaved dimensions beyond EXACT_LIMIT elements: refused unproved. Two are
    always decided (a closed form), however large."""
    n = 128
    assert n**3 > EXACT_LIMIT
    assert self_overlap((n, n, n), (n - 1, n, n + 1)) == UNPROVED
    assert self_overlap((4096, 4096), (4095, 4096)) == DISJOINT
    assert self_overlap((4097, 4098), (4097, 4096)) == OVERLAPS  # 4096 * 4097 == 4097 * 4096
    assert self_overlap((1, 4096, 4096), (0, 4095, 4096)) == DISJOINT  # via the general path


def _overlapping_out() -> np.ndarray:
    buf = np.zeros(32, np.float32)
    return as_strided(buf, (4, 4), (4, 4))


def test_cpu_refuses_writable_arrays_that_overlap_themselves(cpu) -> None:
    x = np.ones((4, 4), np.float32)
    for _ in range(2):  # first launch and relaunch
        with pytest.raises(ox.ArgumentError, match="`out` is writable but its elements "
                                                   "overlap one another"):
            add2[1, (4, 4)](x, _overlapping_out())
    window = np.lib.stride_tricks.sliding_window_view(np.zeros(8, np.float32), 3,
                                                      writeable=True)
    with pytest.raises(ox.ArgumentError, match="overlap one another"):
        add2[1, (4, 8)](np.ones(window.shape, np.float32), window)
    good = np.zeros((4, 8), np.float32)[:, ::2]  # strided, disjoint: same plan as above
    add2[1, (4, 4)](x, good)
    np.testing.assert_array_equal(good, 2.0)
    with pytest.raises(ox.ArgumentError, match="overlap one another"):
        add2[1, (4, 4)](x, _overlapping_out())  # after a good strided launch
    with pytest.raises(ox.ArgumentError, match="zero stride"):
        add2[1, (4, 4)](x, as_strided(np.zeros(4, np.float32), (4, 4), (0, 4)))


def test_cpu_reads_from_self_overlapping_slices(cpu) -> None:
    """Read-only arguments may overlap themselves: a sliding window is a fine input."""
    data = np.arange(10, dtype=np.float32)
    window = np.lib.stride_tricks.sliding_window_view(data, 3)
    out = np.zeros(8, np.float32)
    for _ in range(2):
        window_sum[1, 8](window, out)
        np.testing.assert_array_equal(out, window.sum(axis=1))


def test_cpu_writes_disjoint_strided_layouts(cpu) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for out in (np.zeros((4, 3), np.float32).T, np.zeros((3, 4), np.float32)[::-1, ::-1],
                np.zeros((6, 8), np.float32)[::2, ::2]):
        add2[1, (4, 3)](x, out)
        np.testing.assert_array_equal(out, x + 1)


# ---------------------------------------------------------------------------
# Item 6: byte order, alignment, masked arrays, strides that are not whole elements


def _misaligned(n: int) -> np.ndarray:
    raw = np.zeros(4 * n + 4, np.uint8)
    a = raw[1:1 + 4 * n].view(np.float32)
    assert a.ctypes.data % 4
    return a


def _byte_strided(n: int) -> np.ndarray:
    return as_strided(np.zeros(2 * n, np.float32), (n,), (6,))


@pytest.mark.parametrize("bad, message", [
    (lambda: np.zeros(8, ">f4"), "non-native byte order"),
    (lambda: _misaligned(8), "misaligned"),
    (lambda: np.ma.masked_array(np.zeros(8, np.float32), mask=[True] * 8), "masked array"),
    (lambda: _byte_strided(8), "not multiples of its element size 4"),
])
def test_cpu_refuses_unreadable_arrays(cpu, bad, message) -> None:
    out = np.zeros(8, np.float32)
    scale[CFG](f32s(8), 1.0, out)
    for _ in range(2):
        with pytest.raises(ox.ArgumentError, match=f"`x` is Slice\\[f32\\]; got .*{message}"):
            scale[CFG](bad(), 1.0, out)
        with pytest.raises(ox.ArgumentError, match=f"`out` is DisjointSlice.*{message}"):
            scale[CFG](f32s(8), 1.0, bad())
    np.testing.assert_array_equal(out, np.arange(8))  # the first launch only


class DLPackOnly:
    """A JAX-like host array: only `__dlpack__` and `__dlpack_device__`."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_cpu_dlpack_arrays_must_be_aligned(cpu) -> None:
    out = np.zeros(8, np.float32)
    scale[CFG](DLPackOnly(f32s(8)), 2.0, out)
    np.testing.assert_array_equal(out, f32s(8) * 2)
    for _ in range(2):
        with pytest.raises(ox.ArgumentError, match="`x` .*misaligned"):
            scale[CFG](DLPackOnly(_misaligned(8)), 2.0, out)


def test_structured_field_views(cpu) -> None:
    """A field of a packed structured array: byte strides of 5, misaligned: refused. An
    aligned field (strides of whole elements) runs."""
    packed = np.zeros(8, np.dtype([("tag", "u1"), ("v", "<f4")]))
    with pytest.raises(ox.ArgumentError, match="`x` is Slice\\[f32\\]; got an array with strides"):
        scale[CFG](packed["v"], 1.0, np.zeros(8, np.float32))
    aligned = np.zeros(8, np.dtype([("v", "<f4"), ("w", "<f4")]))
    aligned["v"] = np.arange(8)
    out = np.zeros(8, np.float32)
    scale[CFG](aligned["v"], 2.0, out)
    np.testing.assert_array_equal(out, np.arange(8) * 2)


def test_to_device_converts_byte_order_and_refuses_masks(cpu) -> None:
    arr = ox.to_device(np.arange(4, dtype=">f4"))
    assert arr.dtype == np.float32 and arr.dtype.isnative
    np.testing.assert_array_equal(arr.to_numpy(), np.arange(4))
    with pytest.raises(ox.ArgumentError, match="masked array"):
        ox.to_device(np.ma.masked_array(np.zeros(4, np.float32)))


# ---------------------------------------------------------------------------
# Item 7: the CPU keeps to a GPU's launch limits


def test_cpu_refuses_configs_a_gpu_cannot_run(cpu) -> None:
    x = f32s(8)
    untouched[ox.LaunchConfig(1, 32, MAX_DYNAMIC_SHARED)](x)  # the limit itself runs
    for _ in range(2):
        with pytest.raises(ox.LaunchError, match=f"asks for {MAX_DYNAMIC_SHARED + 1} bytes "
                                                 "of dynamic shared memory"):
            untouched[ox.LaunchConfig(1, 32, MAX_DYNAMIC_SHARED + 1)](x)
    with pytest.raises(ox.LaunchError, match="at most 1024 threads"):
        untouched[1, (32, 33)](x)
    with pytest.raises(ox.LaunchError, match="block.z = 65 exceeds"):
        untouched[1, (1, 1, 65)](x)
    with pytest.raises(ox.LaunchError, match="grid.y = 65536 exceeds"):
        untouched[(1, 65536), 1](x)
    with pytest.raises(ox.LaunchError, match="grid.z = 65536 exceeds"):
        untouched[(1, 1, 65536), 1](x)


# ---------------------------------------------------------------------------
# Item 15: scalars, Const values, keywords, bools, NumPy integers


def test_cpu_huge_int_for_a_float_parameter(cpu) -> None:
    x, out = f32s(8), np.zeros(8, np.float32)
    scale[CFG](x, 3, out)  # an int for an f32: fine
    for k, arr in ((scale, x), (wide, x.astype(np.float64))):
        for _ in range(2):
            with pytest.raises(ox.ArgumentError, match="`a` is f(32|64); got an int too large "
                                                       "for any float"):
                k[CFG](arr, 10**400, np.zeros(8, arr.dtype))
    with pytest.raises(ox.ArgumentError, match="`a` is f32, whose largest value is"):
        scale[CFG](x, 10**39, out)  # a float, but not an f32


def test_cpu_unhashable_const_names_the_parameter(cpu) -> None:
    out = np.zeros(8, np.float32)
    for bad in ([1], {"a": 1}, np.int64):
        with pytest.raises(ox.ArgumentError, match="`B` is Const\\[int\\]"):
            fill[CFG](out, 1, bad)
    with pytest.raises(ox.ArgumentError, match="`B` is Const\\[int\\]; got float 2.5"):
        fill[CFG](out, 1, 2.5)
    fill[CFG](out, 1, np.int64(2))  # NumPy integers are ints
    np.testing.assert_array_equal(out, 3)


def test_cpu_bools_are_not_numbers(cpu) -> None:
    out = np.zeros(8, np.float32)
    fill[CFG](out, 1, 2)
    for _ in range(2):
        with pytest.raises(ox.ArgumentError, match="`n` is i32; got the bool True \\(pass "
                                                   "`int\\(True\\)`"):
            fill[CFG](out, True, 2)
        with pytest.raises(ox.ArgumentError, match="`a` is f32; got the bool False"):
            scale[CFG](f32s(8), False, out)
        with pytest.raises(ox.ArgumentError, match="`n` is i32; got a bool_ scalar"):
            fill[CFG](out, np.True_, 2)


def test_cpu_keyword_arguments_bind_by_name(cpu) -> None:
    x = f32s(8)
    out = np.zeros(8, np.float32)
    scale[CFG](x=x, a=2.0, out=out)
    np.testing.assert_array_equal(out, x * 2)
    scale[CFG](x, out=out, a=3.0)
    np.testing.assert_array_equal(out, x * 3)
    ox.launch(scale, CFG, x, 4.0, out=out)
    np.testing.assert_array_equal(out, x * 4)
    fill[CFG](out, B=5, n=1)
    np.testing.assert_array_equal(out, 6)


@pytest.mark.parametrize("args, kwargs, message", [
    ((), {"x": 1, "a": 2.0}, "`scale` is missing a value for `out`; its parameters are "
                             "\\(x, a, out\\)"),
    ((), {}, "`scale` has 3 parameters"),
    ((), {"x": 1, "a": 2.0, "out": 3, "y": 4}, "`scale` has no parameter `y`"),
    ((1,), {"x": 1, "a": 2.0, "out": 3}, "`scale` got two values for `x`: the positional "
                                        "argument 1 and the keyword"),
    ((1, 2, 3, 4), {"out": 3}, "`scale` has 3 parameters \\(x, a, out\\); got 4 positional"),
])
def test_cpu_keyword_argument_errors(cpu, args, kwargs, message) -> None:
    with pytest.raises(ox.ArgumentError, match=message):
        scale[CFG](*args, **kwargs)
    with pytest.raises(ox.ArgumentError, match=message):
        ox.launch(scale, CFG, *args, **kwargs)


def test_calling_a_kernel_without_a_config_is_a_launch_error(cpu) -> None:
    with pytest.raises(ox.LaunchError, match="`scale` is a kernel: launch it with "
                                             "`scale\\[config\\]"):
        scale(f32s(8), 2.0, np.zeros(8, np.float32))


@ox.kernel
def streamed(stream: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = stream[i]


def test_a_parameter_named_stream_is_passed_by_position(cpu) -> None:
    out = np.zeros(8, np.float32)
    streamed[CFG](f32s(8), out=out)
    np.testing.assert_array_equal(out, f32s(8))
    for call in (lambda: streamed[CFG](stream=f32s(8), out=out),
                 lambda: streamed[CFG](out, stream=f32s(8))):
        with pytest.raises(ox.ArgumentError, match="`stream=` is the launch's stream: pass "
                                                   "the parameter `stream` by position"):
            call()


def test_launching_something_that_is_not_a_kernel(cpu) -> None:
    def plain(x, a, out):
        out[:] = x * a

    with pytest.raises(ox.LaunchError, match="ox.launch takes an @ox.kernel; `plain` is a "
                                             "function"):
        ox.launch(plain, CFG, f32s(8), 2.0, np.zeros(8, np.float32))


class BrokenDLPack:
    def __dlpack__(self, **kwargs):
        return 5

    def __dlpack_device__(self):
        return (1, 0)


class BrokenCai:
    __cuda_array_interface__ = {"shape": (8,), "typestr": "<f4", "data": (None, False),
                                "version": 3}


class NoShapeCai:
    __cuda_array_interface__ = {"typestr": "<f4", "data": (0x1000, False), "version": 3}


@pytest.mark.parametrize("bad, message", [
    (BrokenDLPack(), "BrokenDLPack whose DLPack export oxide cannot read"),
    (BrokenCai(), "BrokenCai whose __cuda_array_interface__ oxide cannot read"),
    (NoShapeCai(), "NoShapeCai whose __cuda_array_interface__ oxide cannot read \\(KeyError"),
])
def test_broken_array_producers_are_argument_errors(cpu, bad, message) -> None:
    with pytest.raises(ox.ArgumentError, match=f"`x` is Slice\\[f32\\]; got a {message}"):
        scale[CFG](bad, 2.0, np.zeros(8, np.float32))


@pytest.mark.parametrize("make, message", [
    (lambda: ox.empty(-1, ox.f32), "a shape is non-negative ints, got -1"),
    (lambda: ox.zeros((2, True)), "a shape is non-negative ints"),
    (lambda: ox.empty(4, np.complex64), "no dtype for complex64"),
    (lambda: ox.empty(4, "not a dtype"), "is not a dtype"),
    (lambda: ox.to_device(np.array(["a", "b"])), "no dtype for <U1"),
])
def test_array_creation_errors_are_oxide_errors(cpu, make, message) -> None:
    with pytest.raises(ox.ArgumentError, match=message):
        make()


def test_const_int_refuses_bools(cpu) -> None:
    out = np.zeros(8, np.float32)
    for _ in range(2):
        with pytest.raises(ox.ArgumentError, match="`B` is Const\\[int\\]; got bool True"):
            fill[CFG](out, 1, True)


class Index:
    """An integer that is not an int: `operator.index` takes it, as a launch should."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __index__(self) -> int:
        return self.n


def test_numpy_integers_in_launch_configurations(cpu) -> None:
    x, out = f32s(8), np.zeros(8, np.float32)
    scale[np.int64(1), np.int64(8)](x, 2.0, out)
    np.testing.assert_array_equal(out, x * 2)
    cfg = ox.LaunchConfig(grid=(np.int32(2), np.uint8(1)), block=np.int16(4),
                          shared_mem_bytes=np.int64(16))
    assert cfg.grid == (2, 1, 1) and cfg.block == (4, 1, 1) and cfg.shared_mem_bytes == 16
    assert all(type(v) is int for v in (*cfg.grid, *cfg.block, cfg.shared_mem_bytes))
    scale[cfg](x, 3.0, out)
    np.testing.assert_array_equal(out, x * 3)
    assert ox.LaunchConfig(grid=Index(3), block=[Index(2), 2]).grid == (3, 1, 1)
    assert ox.LaunchConfig.for_num_elems(np.int64(1000), block=np.int32(128)).grid == (8, 1, 1)
    scale[np.int64(1), np.int64(8), None, np.int64(0)](x, 4.0, out)
    np.testing.assert_array_equal(out, x * 4)


@pytest.mark.parametrize("make, message", [
    (lambda: ox.LaunchConfig(grid=np.True_), "grid must be an int"),
    (lambda: ox.LaunchConfig(grid=True), "grid must be an int"),
    (lambda: ox.LaunchConfig(block=(np.bool_(True), 2)), "block dimensions must be positive"),
    (lambda: ox.LaunchConfig(block=2.0), "block must be an int"),
    (lambda: ox.LaunchConfig(grid=np.float64(2)), "grid must be an int"),
    (lambda: ox.LaunchConfig(grid=np.int64(0)), "grid dimensions must be positive"),
    (lambda: ox.LaunchConfig(shared_mem_bytes=True), "shared_mem_bytes must be"),
    (lambda: ox.LaunchConfig(shared_mem_bytes=np.int64(-1)), "shared_mem_bytes must be"),
    (lambda: ox.LaunchConfig(shared_mem_bytes=1.0), "shared_mem_bytes must be"),
    (lambda: ox.LaunchConfig.for_num_elems(np.float32(8)), "n must be"),
    (lambda: ox.LaunchConfig.for_num_elems(8, block=0), "block must be a positive int"),
    (lambda: ox.LaunchConfig(grid=np.int64(2**32)), "beyond what a CUDA launch takes"),
])
def test_launch_configurations_refuse_bools_floats_and_bad_values(make, message) -> None:
    with pytest.raises(ox.LaunchError, match=message):
        make()


def test_operator_index_is_what_configs_take() -> None:
    assert operator.index(np.uint16(7)) == ox.LaunchConfig(grid=np.uint16(7)).grid[0]


# ---------------------------------------------------------------------------
# The GPU host path (fake driver): first launch and relaunch through the binders


@pytest.fixture(params=["native", "ctypes"])
def fake(request, monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[FakeDriver]:
    driver = FakeDriver()
    driver.install(monkeypatch)
    use_launch_flavor(monkeypatch, request.param)
    monkeypatch.setenv("OXIDE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    for k in KERNELS:
        k.__dict__.pop("_oxide_launchers", None)
        k.__dict__.pop("_oxide_bound", None)
    with ox.device(0):
        yield driver


def test_gpu_misaligned_tensor_is_refused_on_relaunch(fake, general) -> None:
    fake.formats = "QqfQq"
    scale[CFG](Tensor(0x1000, (8,)), 2.0, Tensor(0x2000, (8,)))
    scale[CFG](Tensor(0x1100, (8,)), 2.0, Tensor(0x2100, (8,)))
    binder = scale.__dict__["_oxide_launchers"].last
    assert len(general) == 1 and "(ptr0 | ptr2) & 3" in binder.source  # one test, both arrays
    for _ in range(2):
        with pytest.raises(ox.ArgumentError, match="`x` .*0x1002 is not a multiple of its "
                                                   "element size 4"):
            scale[CFG](Tensor(0x1002, (8,)), 2.0, Tensor(0x2000, (8,)))
        with pytest.raises(ox.ArgumentError, match="`out` .*misaligned"):
            scale[CFG](Tensor(0x1000, (8,)), 2.0, Tensor(0x2001, (8,)))
    assert len(fake.launches) == 2


def test_gpu_self_overlapping_tensor_is_refused_on_relaunch(fake, general) -> None:
    fake.formats = "QqqQqqqq"
    x = Tensor(0x1000, (4, 4))
    add2[(1, 1), (4, 4)](x, Tensor(0x2000, (4, 4), strides=(8, 2)))
    add2[(1, 1), (4, 4)](x, Tensor(0x3000, (4, 4), strides=(1, 4)))
    assert len(general) == 1
    for strides in ((1, 1), (0, 1), (2, 3)):
        with pytest.raises(ox.ArgumentError, match="`out` is writable but"):
            add2[(1, 1), (4, 4)](x, Tensor(0x2000, (4, 4), strides=strides))
    add2[(1, 1), (4, 4)](Tensor(0x1000, (4, 4), strides=(1, 1)), Tensor(0x3000, (4, 4),
                                                                        strides=(1, 4)))
    assert len(fake.launches) == 3  # an overlapping Slice is fine


def test_gpu_self_overlap_rank_1_on_relaunch(fake, general) -> None:
    """A rank-1 writable array: the binder's inline quick test (others call self_overlap)."""
    fake.formats = "QqfQqq"
    x = Tensor(0x1000, (8,))
    scale[CFG](x, 1.0, Tensor(0x2000, (8,), strides=(2,)))
    scale[CFG](x, 1.0, Tensor(0x2000, (8,), strides=(-1,)))
    assert len(general) == 1
    with pytest.raises(ox.ArgumentError, match="`out` is writable but has a zero stride"):
        scale[CFG](x, 1.0, Tensor(0x2000, (8,), strides=(0,)))
    assert len(fake.launches) == 2


class Cai:
    """A numba/CuPy-like array: only `__cuda_array_interface__`."""

    def __init__(self, ptr: int, n: int, typestr: str = "<f4",
                 strides: tuple[int, ...] | None = None) -> None:
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": typestr,
                                         "data": (ptr, False), "strides": strides,
                                         "version": 3}


@pytest.mark.parametrize("bad, message", [
    (Cai(0x1000, 8, ">f4"), "non-native byte order"),
    (Cai(0x1002, 8), "misaligned"),
    (Cai(0x1000, 8, strides=(6,)), "not multiples of its element size 4"),
])
def test_gpu_cuda_array_interface_checks_on_relaunch(fake, general, bad, message) -> None:
    fake.formats = "QqfQq"
    scale[CFG](Cai(0x1000, 8), 2.0, Cai(0x2000, 8))
    scale[CFG](Cai(0x1100, 8), 2.0, Cai(0x2100, 8))
    assert len(general) == 1
    for _ in range(2):
        with pytest.raises(ox.ArgumentError, match=f"`x` .*{message}"):
            scale[CFG](bad, 2.0, Cai(0x2000, 8))
        with pytest.raises(ox.ArgumentError, match=f"`out` .*{message}"):
            scale[CFG](Cai(0x1000, 8), 2.0, bad)
    assert len(fake.launches) == 2


def test_gpu_host_arrays_are_checked_before_copying(fake) -> None:
    fake.formats = "QqqQqq"  # contiguous: no strides (more would read past the pointers)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = np.ones((4, 4), np.float32)
        add2[(1, 1), (4, 4)](x, np.zeros((4, 4), np.float32))
        for _ in range(2):
            with pytest.raises(ox.ArgumentError, match="`out` is writable but its elements"):
                add2[(1, 1), (4, 4)](x, _overlapping_out())
            with pytest.raises(ox.ArgumentError, match="`x` .*non-native byte order"):
                add2[(1, 1), (4, 4)](np.ones((4, 4), ">f4"), np.zeros((4, 4), np.float32))
            with pytest.raises(ox.ArgumentError, match="`out` .*masked array"):
                add2[(1, 1), (4, 4)](x, np.ma.masked_array(np.zeros((4, 4), np.float32)))
    assert len(fake.launches) == 1


def test_gpu_scalar_const_and_bool_errors_on_relaunch(fake, general) -> None:
    fake.formats = "Qqi"
    out = Tensor(0x1000, (8,))
    fill[CFG](out, 1, 4)
    fill[CFG](out, 2, 4)
    assert len(general) == 1
    for _ in range(2):
        with pytest.raises(ox.ArgumentError, match="`n` is i32; got the bool True"):
            fill[CFG](out, True, 4)
        with pytest.raises(ox.ArgumentError, match="`B` is Const\\[int\\].*unhashable list"):
            fill[CFG](out, 1, [4])
    fake.formats = "QqfQq"
    x = Tensor(0x2000, (8,))
    scale[CFG](x, 3, out)
    scale[CFG](x, 4, out)  # the binder of int-for-f32
    for _ in range(2):
        with pytest.raises(ox.ArgumentError, match="`a` is f32; got an int too large"):
            scale[CFG](x, 10**400, out)
        with pytest.raises(ox.ArgumentError, match="`a` is f32; got the bool True"):
            scale[CFG](x, True, out)
    assert [rec["args"][-1] for rec in fake.launches[:2]] == [1, 2]
    assert fake.launches[-1]["args"][2] == 4.0 and len(fake.launches) == 4


def test_gpu_keywords_take_the_binder(fake, general) -> None:
    fake.formats = "QqfQq"
    x, out = Tensor(0x1000, (8,)), Tensor(0x2000, (8,))
    scale[CFG](out=out, a=2.0, x=x)
    scale[CFG](x, out=out, a=3.0)
    ox.launch(scale, CFG, a=4.0, x=x, out=out, stream=0x55)
    assert len(general) == 1
    assert [rec["args"] for rec in fake.launches] == [[0x1000, 8, a, 0x2000, 8]
                                                      for a in (2.0, 3.0, 4.0)]
    assert fake.launches[-1]["stream"] == 0x55
    with pytest.raises(ox.ArgumentError, match="got two values for `x`"):
        scale[CFG](x, 1.0, out, x=x)


def test_gpu_numpy_integer_configs_and_shared_memory_limit(fake) -> None:
    fake.formats = "QqfQq"
    x, out = Tensor(0x1000, (8,)), Tensor(0x2000, (8,))
    scale[np.int64(2), np.int64(64)](x, 1.0, out)
    assert fake.launches[-1]["grid"][0] >= 1 and fake.launches[-1]["block"] == (64, 1, 1)
    scale[ox.LaunchConfig(1, 32, np.int64(100 * 1024))](x, 1.0, out)
    assert fake.launches[-1]["shmem"] == 100 * 1024
    with pytest.raises(ox.LaunchError, match="asks for 232449 bytes of dynamic shared memory"):
        scale[ox.LaunchConfig(1, 32, MAX_DYNAMIC_SHARED + 1)](x, 1.0, out)


# ---------------------------------------------------------------------------
# On a real GPU (`pytest -m gpu`): the same refusals, and the context stays usable


class DeviceView:
    """A view into an ox.DeviceArray exported through `__cuda_array_interface__`
    (as numba or CuPy would), with any byte offset, shape and byte strides."""

    def __init__(self, base: ox.DeviceArray, offset: int, shape: tuple[int, ...],
                 strides: tuple[int, ...] | None, typestr: str = "<f4") -> None:
        self.base = base
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (base.data_ptr + offset, False),
                                         "strides": strides, "version": 3}


@pytest.fixture
def on_gpu() -> Iterator[None]:
    with ox.device(0):
        yield
    ox.synchronize(0)


@pytest.mark.gpu
def test_gpu_real_misaligned_and_big_endian_arrays_are_refused(on_gpu) -> None:
    base = ox.to_device(np.arange(16, dtype=np.float32))
    out = ox.zeros(8)
    scale[CFG](DeviceView(base, 0, (8,), None), 2.0, out)
    for _ in range(2):
        with pytest.raises(ox.ArgumentError, match="`x` .*misaligned"):
            scale[CFG](DeviceView(base, 2, (8,), None), 2.0, out)
        with pytest.raises(ox.ArgumentError, match="`x` .*non-native byte order"):
            scale[CFG](DeviceView(base, 0, (8,), None, ">f4"), 2.0, out)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(ox.ArgumentError, match="`x` .*non-native byte order"):
                scale[CFG](np.arange(8, dtype=">f4"), 2.0, out)
            with pytest.raises(ox.ArgumentError, match="`out` .*masked array"):
                scale[CFG](base, 2.0, np.ma.masked_array(np.zeros(8, np.float32)))
    scale[CFG](DeviceView(base, 4, (8,), None), 3.0, out)  # aligned at an offset: fine
    np.testing.assert_array_equal(out.to_numpy(), np.arange(1, 9) * 3)


@pytest.mark.gpu
def test_gpu_real_self_overlap_refused_for_writes_fine_for_reads(on_gpu) -> None:
    data = ox.to_device(np.arange(10, dtype=np.float32))
    out = ox.zeros(8)
    window = DeviceView(data, 0, (8, 3), (4, 4))  # sliding_window_view(data, 3)
    for _ in range(2):
        window_sum[CFG](window, out)
        np.testing.assert_array_equal(out.to_numpy(), np.arange(8) * 3 + 3)
    x = ox.to_device(np.ones((4, 4), np.float32))
    buf = ox.zeros(32)
    add2[(1, 1), (4, 4)](x, DeviceView(buf, 0, (4, 4), (32, 8)))  # disjoint, strided
    for _ in range(2):
        with pytest.raises(ox.ArgumentError, match="`out` is writable but its elements "
                                                   "overlap"):
            add2[(1, 1), (4, 4)](x, DeviceView(buf, 0, (4, 4), (4, 4)))
    expected = np.zeros((4, 8), np.float32)
    expected[:, ::2] = 2.0  # only the disjoint launch wrote
    np.testing.assert_array_equal(buf.to_numpy().reshape(4, 8), expected)


@pytest.mark.gpu
def test_gpu_real_keywords_numpy_configs_and_scalar_errors(on_gpu) -> None:
    x = ox.to_device(np.arange(8, dtype=np.float32))
    out = ox.zeros(8)
    scale[np.int64(1), np.int64(8)](out=out, a=2.0, x=x)
    np.testing.assert_array_equal(out.to_numpy(), np.arange(8) * 2)
    ox.launch(scale, ox.LaunchConfig(np.int32(1), np.int32(32), np.int64(0)), x, out=out, a=5.0)
    np.testing.assert_array_equal(out.to_numpy(), np.arange(8) * 5)
    for _ in range(2):
        with pytest.raises(ox.ArgumentError, match="`a` is f32; got an int too large"):
            scale[CFG](x, 10**400, out)
        with pytest.raises(ox.ArgumentError, match="`n` is i32; got the bool True"):
            fill[CFG](out, True, 4)
        with pytest.raises(ox.ArgumentError, match="`B` is Const\\[int\\].*unhashable"):
            fill[CFG](out, 1, [4])
    fill[CFG](out, 1, 4)
    np.testing.assert_array_equal(out.to_numpy(), 5)


@pytest.mark.gpu
def test_gpu_real_dynamic_shared_memory_limit(on_gpu) -> None:
    x = ox.zeros(8)
    untouched[ox.LaunchConfig(1, 32, 100 * 1024)](x)  # opts in beyond 48 KB
    ox.synchronize()
    with pytest.raises(ox.LaunchError, match="dynamic shared memory"):
        untouched[ox.LaunchConfig(1, 32, 1 << 20)](x)
    untouched[ox.LaunchConfig(1, 32, 0)](x)
    ox.synchronize()


# -- Const values: compile(), --sig/--const and a launch take the same ones


BAD_CONST_INTS = [
    (2.5, r"got float 2\.5"), (None, r"got NoneType None"), ([2], r"unhashable list"),
    (True, r"got bool True"), ("2", r"got str '2'"), (np.float64(2.0), r"got float64"),
]


@pytest.mark.parametrize("value, said", BAD_CONST_INTS, ids=[repr(v) for v, _ in BAD_CONST_INTS])
def test_compile_refuses_the_const_values_a_launch_refuses(cpu, value, said) -> None:
    from oxide.specialize import ConstValue

    want = r"`B` is Const\[int\].*" + said
    with pytest.raises(ox.ArgumentError, match=want):
        fill.compile(DisjointSlice[f32], i32, value, arch="cpu")
    with pytest.raises(ox.ArgumentError, match=want):  # a ConstValue is checked too
        fill.compile(DisjointSlice[f32], i32, ConstValue(value), arch="sm_90")
    with pytest.raises(ox.ArgumentError, match=want):
        fill[CFG](np.zeros(4, np.float32), 1, value)


def test_compile_takes_the_const_values_a_launch_takes(cpu) -> None:
    for value in (4, np.int64(4), np.uint8(4)):
        ck = fill.compile(DisjointSlice[f32], i32, value, arch="cpu")
        assert ck is fill.compile(DisjointSlice[f32], i32, 4, arch="cpu")  # one specialization
    out = np.zeros(4, np.float32)
    fill[CFG](out, 1, np.int64(4))
    np.testing.assert_array_equal(out, 5)
    for typ in (i32, Const[int], int):
        with pytest.raises(ox.ArgumentError, match="compile it with a value, not a type"):
            fill.compile(DisjointSlice[f32], i32, typ, arch="cpu")


def test_cli_signatures_refuse_a_bad_const_value() -> None:
    from oxide.cli.signatures import compile_args, parse_consts, parse_types

    for args in (compile_args(fill, None, parse_consts(["B=2.5"])),
                 compile_args(fill, parse_types("DisjointSlice[f32], i32, None"), {})):
        with pytest.raises(ox.ArgumentError, match=r"`B` is Const\[int\]"):
            fill.compile(*args, arch="sm_90")
    assert fill.compile(*compile_args(fill, None, {"B": 3}), arch="sm_90").ptx


# -- ox.ConstantArray: declared and set exactly, or an ArgumentError


BAD_DECLARATIONS = [
    (np.complex64, 4, r"complex64.* is not a dtype a ConstantArray can hold"),
    (object, 4, r"is not a dtype a ConstantArray can hold"),
    ("f33", 4, r"'f33' is not a dtype"),
    (ox.bool_, 4, r"hold numbers; use u8 for flags"),
    (np.bool_, 4, r"hold numbers; use u8 for flags"),
    (f32, 0, r"1 to 3 positive ints, got 0"),
    (f32, True, r"1 to 3 positive ints, got True"),
    (f32, (2, 2, 2, 2), r"1 to 3 positive ints"),
    (f32, (4, 2.0), r"1 to 3 positive ints"),
    (f32, "4", r"1 to 3 positive ints, got '4'"),
    (f64, 1 << 14, r"131,072 bytes; they do not fit in the GPU's 64 KiB"),
]


def _case_id(dtype: object, arg: object) -> str:
    return f"{getattr(dtype, '__name__', dtype)}-{arg!r}"[:40]


@pytest.mark.parametrize("dtype, shape, said", BAD_DECLARATIONS,
                         ids=[_case_id(d, s) for d, s, _ in BAD_DECLARATIONS])
def test_constant_array_declarations_refused(dtype, shape, said) -> None:
    with pytest.raises(ox.ArgumentError, match=said):
        ox.ConstantArray(dtype, shape)


def test_constant_array_takes_numpy_dtypes_and_ints() -> None:
    assert ox.ConstantArray(np.float32, 4).dtype is f32  # as ox.empty(4, np.float32) does
    assert ox.ConstantArray(np.dtype("uint16"), np.int64(3)).dtype is ox.u16
    assert ox.ConstantArray("i32", [2, np.int32(3)]).shape == (2, 3)


BAD_VALUES = [
    (ox.u8, [300, 1], r"u8's range is 0\.\.255; got 300"),
    (ox.u8, np.array([1, 300]), r"u8's range is 0\.\.255; got 300"),  # NumPy would wrap it
    (ox.u32, [-1, 1], r"u32's range is 0\.\.4294967295; got -1"),
    (ox.i64, [2**64 - 1, -1], r"i64's range .*; got 18446744073709551615"),
    (ox.u64, [2**64, 0], r"got 18446744073709551616"),
    (i32, [float("nan"), 1.0], r"holds integers; got the float nan"),
    (i32, [1.5, 2], r"holds integers; got the float 1\.5 .*astype\(np\.int32\)"),
    (i32, np.array([1.0, 2.0]), r"holds integers; got the float 1\.0"),
    (f32, [1e300, 1.0], r"1e\+300 is beyond f32's range \(it would become infinity\)"),
    (f32, np.array([1.0, -1e300]), r"-1e\+300 is beyond f32's range"),
    (ox.f16, np.array([1, 70000], np.int32), r"70000 is beyond f16's range"),
    (ox.bf16, [1e39, 0.0], r"1e\+39 is beyond bf16's range"),
    (f64, [10**400, 1], r"too large for any float"),
    (f32, ["1", "2"], r"holds numbers; got str '1'"),
    (f32, np.array(["1", "2"]), r"holds numbers; got values of dtype <U1"),
    (f32, np.array([1 + 2j, 0]), r"holds numbers; got values of dtype complex128"),
    (f32, [None, 1.0], r"holds numbers; got NoneType None"),
    (f32, [[1.0], 2.0], r"holds numbers; got list \[1\.0\]"),
    (f32, np.zeros(3, np.float32), r"has shape \(2,\); set with values of shape \(3,\)"),
    (f32, None, r"has shape \(2,\); set with values of shape \(\)"),
    (f32, np.ma.masked_array([1.0, 2.0], mask=[True, False]), r"masked array.*filled"),
]


@pytest.mark.parametrize("dtype, values, said", BAD_VALUES,
                         ids=[_case_id(d, v) for d, v, _ in BAD_VALUES])
def test_constant_array_set_refuses_values_that_do_not_fit(dtype, values, said) -> None:
    c = ox.ConstantArray(dtype, 2)
    c.set([0, 1])
    with pytest.raises(ox.ArgumentError, match=said):
        c.set(values)
    assert c.values.tolist() == [0, 1] and c.version == 1  # the old values stay


def test_constant_array_set_converts_exactly() -> None:
    c = ox.ConstantArray(ox.u64, 2)
    c.set([2**64 - 1, np.uint8(7)])  # no detour through float64
    assert c.values.tolist() == [2**64 - 1, 7]
    flags = ox.ConstantArray(ox.u8, 3)
    flags.set(np.array([True, False, True]))
    assert flags.values.tolist() == [1, 0, 1]
    c = ox.ConstantArray(ox.f16, 4)
    c.set([65519.0, float("inf"), float("nan"), 2**11 + 1])  # rounds, keeps inf and NaN
    assert c.values.tolist()[:2] == [65504.0, float("inf")]
    assert np.isnan(c.values[2]) and c.values[3] == 2048.0
    c = ox.ConstantArray(ox.bf16, 2)
    c.set(np.array([1.5, -2.0], ox.bf16.numpy))
    assert c.values.astype(np.float32).tolist() == [1.5, -2.0]
    with pytest.raises(ox.ArgumentError, match=r"ConstantArray\(bf16, 2\) is read inside"):
        c[0]
