"""The GPU runtime's host side against a fake driver (tests/fake_cuda.py): no GPU needed.

Covers what the real-GPU tests cannot see from outside: the packed parameter
buffer, configuration checks, error records and their reset, streams, copies.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
import pytest
from fake_cuda import FakeDriver, raise_device_error, use_launch_flavor, write_record

import oxide as ox
from oxide import DisjointSlice, Slice, bf16, f32, i32, thread
from oxide.runtime import cuda_driver
from oxide.runtime.kernel_errors import ErrorRecord, kernel_error


@ox.kernel
def scale(x: Slice[f32], a: f32, out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * a


@ox.kernel
def mixed(x: Slice[f32, 2], n: i32, h: bf16, out: DisjointSlice[f32, 2]):
    i = thread.index_2d()
    if i in out:
        out[i] = x[i] + f32(n) + f32(h)


@ox.kernel
def checked(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        assert x[i] >= 0.0, "x must be non-negative"
        out[i] = x[i + 1]


@pytest.fixture(params=["native", "ctypes"])
def fake(request, monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[FakeDriver]:
    """The fake driver, with launches through the native trampoline or through ctypes."""
    driver = FakeDriver()
    driver.install(monkeypatch)
    use_launch_flavor(monkeypatch, request.param)
    monkeypatch.setenv("OXIDE_CACHE_DIR", str(tmp_path / "cache"))
    for k in (scale, mixed, checked):
        k.__dict__.pop("_oxide_launchers", None)
    with ox.device(0):
        yield driver


def cfg(n: int) -> ox.LaunchConfig:
    return ox.LaunchConfig.for_num_elems(n)


def test_launch_packs_machine_arguments(fake: FakeDriver) -> None:
    x = ox.to_device(np.arange(8, dtype=np.float32))
    y = ox.empty(8, ox.f32)
    fake.formats = "Qqf" + "Qq"
    ox.launch(scale, cfg(8), x, 2.5, y)
    rec = fake.launches[-1]
    assert rec["function"] == scale.compile(Slice[f32], f32, DisjointSlice[f32],
                                            arch="sm_90").name
    assert rec["args"] == [x.data_ptr, 8, 2.5, y.data_ptr, 8]
    assert rec["grid"] == (1, 1, 1) and rec["block"] == (256, 1, 1) and rec["stream"] == 0
    assert rec["error_record"] != 0


def test_strided_2d_and_bf16_arguments(fake: FakeDriver) -> None:
    x = ox.to_device(np.zeros((4, 6), np.float32))
    base = ox.empty((4, 12), ox.f32)

    class Strided:  # a (4, 6) column-strided view of `base`, as CuPy would export it
        __cuda_array_interface__ = {"shape": (4, 6), "typestr": "<f4",
                                    "data": (base.data_ptr, False), "strides": (48, 8),
                                    "version": 3}

    fake.formats = "Qqq" + "i" + "H" + "Qqqqq"
    mixed[(1, 1), (8, 8)](x, 3, 1.5, Strided())
    assert fake.launches[-1]["args"] == [x.data_ptr, 4, 6, 3, 0x3FC0, base.data_ptr, 4, 6, 12, 2]
    mixed[(1, 1), (8, 8)](x, 4, -2.0, Strided())  # the relaunch: through the binder
    assert "bf16_bits" in mixed.__dict__["_oxide_launchers"].last.source
    assert fake.launches[-1]["args"] == [x.data_ptr, 4, 6, 4, 0xC000, base.data_ptr, 4, 6, 12, 2]


def test_relaunch_reuses_the_launcher(fake: FakeDriver) -> None:
    x, y = ox.zeros(8), ox.zeros(8)
    fake.formats = "QqfQq"
    scale[cfg(8)](x, 1.0, y)
    launcher = next(iter(scale.__dict__["_oxide_launchers"].values()))
    scale[cfg(8)](x, 2.0, y)
    assert len(scale.__dict__["_oxide_launchers"]) == 1
    assert next(iter(scale.__dict__["_oxide_launchers"].values())) is launcher
    assert fake.launches[-1]["args"][2] == 2.0


def test_index_error_is_raised_at_the_next_launch_then_cleared(fake: FakeDriver) -> None:
    x, y = ox.zeros(8), ox.zeros(8)
    fake.formats = "QqQq"
    checked[cfg(8)](x, y)
    ck = checked.compile(Slice[f32], DisjointSlice[f32], arch="sm_90")
    site = next(i for i, s in enumerate(ck.sites) if s.kind == "index" and s.detail == "x"
                and "i + 1" in s.span.text)
    write_record(fake.launches[-1]["error_record"], 1, site, 0, 8, 8)
    with pytest.raises(ox.KernelIndexError) as info:
        checked[cfg(8)](x, y)
    message = str(info.value)
    assert "index 8 is out of bounds for axis 0 of `x` (length 8) in kernel `checked`" in message
    assert f"test_runtime_gpu_host.py:{ck.sites[site].span.line}" in message
    assert info.value.index == 8 and info.value.length == 8
    n = len(fake.launches)
    checked[cfg(8)](x, y)  # the record was reset: the context stays usable
    ox.synchronize()
    assert len(fake.launches) == n + 1


def test_assertion_is_raised_at_synchronize(fake: FakeDriver) -> None:
    x, y = ox.zeros(8), ox.zeros(8)
    fake.formats = "QqQq"
    ck = checked.compile(Slice[f32], DisjointSlice[f32], arch="sm_90")
    site = next(i for i, s in enumerate(ck.sites) if s.kind == "assert")
    fake.on_launch = lambda rec: write_record(rec["error_record"], 2, site, 0, 0, 0)
    checked[cfg(8)](x, y)
    with pytest.raises(ox.KernelAssertionError, match="x must be non-negative"):
        ox.synchronize()
    fake.on_launch = None
    ox.synchronize()  # cleared


def test_to_numpy_is_a_sync_point_for_errors(fake: FakeDriver) -> None:
    x, y = ox.zeros(8), ox.zeros(8)
    fake.formats = "QqQq"
    fake.on_launch = lambda rec: write_record(rec["error_record"], 1, 0, 0, 99, 8)
    checked[cfg(8)](x, y)
    fake.on_launch = None
    with pytest.raises(ox.KernelIndexError, match="index 99"):
        y.to_numpy()
    assert (y.to_numpy() == 0).all()


def test_device_fault_becomes_device_error(fake: FakeDriver, monkeypatch) -> None:
    x, y = ox.zeros(8), ox.zeros(8)
    fake.formats = "QqfQq"
    scale[cfg(8)](x, 1.0, y)
    monkeypatch.setattr(cuda_driver, "synchronize_context", raise_device_error)
    with pytest.raises(ox.DeviceError, match="ILLEGAL_ADDRESS.*oxide kernels launched since "
                                             "the last synchronization: scale"):
        ox.synchronize()


def test_launch_config_is_checked_against_the_device(fake: FakeDriver) -> None:
    x, y = ox.zeros(8), ox.zeros(8)
    fake.formats = "QqfQq"
    with pytest.raises(ox.LaunchError, match="grid.y = 70000 exceeds"):
        scale[(1, 70000), 32](x, 1.0, y)
    with pytest.raises(ox.LaunchError, match="block.z = 65 exceeds"):
        scale[1, (1, 1, 65)](x, 1.0, y)
    with pytest.raises(ox.LaunchError, match="at most 227 KiB|at most 232448"):
        scale[ox.LaunchConfig(grid=1, block=32, shared_mem_bytes=300 * 1024)](x, 1.0, y)
    scale[ox.LaunchConfig(grid=1, block=32, shared_mem_bytes=100 * 1024)](x, 1.0, y)
    assert fake.set_attributes == [("MAX_DYNAMIC_SHARED_SIZE_BYTES", 100 * 1024)]
    assert fake.launches[-1]["shmem"] == 100 * 1024


def test_kernel_thread_limit(fake: FakeDriver) -> None:
    fake.function_attributes["MAX_THREADS_PER_BLOCK"] = 512
    fake.formats = "QqfQq"
    x, y = ox.zeros(8), ox.zeros(8)
    with pytest.raises(ox.LaunchError, match="runs at most 512 threads per block"):
        scale[1, 1024](x, 1.0, y)


def test_streams(fake: FakeDriver) -> None:
    x, y = ox.zeros(8), ox.zeros(8)
    fake.formats = "QqfQq"

    class CoreStream:  # cuda.core's protocol
        def __cuda_stream__(self) -> tuple[int, int]:
            return (0, 0xABC)

    class TorchLikeStream:
        cuda_stream = 0xDEF

    scale[cfg(8)](x, 1.0, y, stream=CoreStream())
    assert fake.launches[-1]["stream"] == 0xABC
    ox.launch(scale, cfg(8), x, 1.0, y, stream=TorchLikeStream())
    assert fake.launches[-1]["stream"] == 0xDEF
    scale[8, 32, 0x123](x, 1.0, y)
    assert fake.launches[-1]["stream"] == 0x123
    with pytest.raises(ox.LaunchError, match="stream= takes"):
        scale[cfg(8)](x, 1.0, y, stream="default")


class _BrokenProtocol:
    def __cuda_stream__(self) -> tuple[int, int]:
        raise RuntimeError("no stream here")


class _FloatHandle:
    cuda_stream = 1.5


GARBAGE_STREAMS = ["default", 1.5, -1, 2**64, True, np.float64(3.0), object(), [0],
                   _BrokenProtocol(), _FloatHandle()]


@pytest.mark.parametrize("stream", GARBAGE_STREAMS, ids=lambda s: type(s).__name__)
def test_garbage_streams_are_argument_errors(fake: FakeDriver, stream: object) -> None:
    """Issue 27: what is no stream is an ArgumentError before anything runs, on the first
    launch (the general path) and on a relaunch (the binder of runtime/fastpath.py)."""
    x, y = ox.zeros(8), ox.zeros(8)
    fake.formats = "QqfQq"
    for _ in range(2):
        with pytest.raises(ox.ArgumentError, match="stream= takes"):
            scale[cfg(8)](x, 1.0, y, stream=stream)
        scale[cfg(8)](x, 1.0, y, stream=np.uint64(0x42))  # a NumPy integer handle is fine
    assert [launch["stream"] for launch in fake.launches] == [0x42, 0x42]


def test_host_arrays_are_copied_in_and_back_with_one_warning(fake: FakeDriver,
                                                             monkeypatch) -> None:
    from oxide.runtime import args

    monkeypatch.setattr(args, "_host_copy_warned", False)
    x = np.arange(8, dtype=np.float32)
    out = np.full(8, 7.0, np.float32)
    fake.formats = "QqfQq"

    def kernel_body(rec: dict) -> None:  # play the kernel: out = x * a
        import ctypes

        src = np.ctypeslib.as_array((ctypes.c_float * 8).from_address(rec["args"][0]))
        dst = np.ctypeslib.as_array((ctypes.c_float * 8).from_address(rec["args"][3]))
        dst[:] = src * rec["args"][2]

    fake.on_launch = kernel_body
    with pytest.warns(UserWarning, match="host array\\(s\\) `x`, `out` copied to cuda:0"):
        scale[cfg(8)](x, 2.0, out)
    assert (out == x * 2).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scale[cfg(8)](x, 3.0, out)  # warned once per process
    assert (out == x * 3).all()
    frozen = np.zeros(8, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ox.ArgumentError, match="read-only"):
        scale[cfg(8)](x, 3.0, frozen)


def test_aliasing_is_checked_on_the_gpu(fake: FakeDriver) -> None:
    x = ox.zeros(8)
    with pytest.raises(ox.AliasingError, match="`out`"):
        scale[cfg(8)](x, 1.0, x)


def test_device_arrays_round_trip(fake: FakeDriver) -> None:
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    d = ox.to_device(a)
    assert d.device == ox.runtime.device.Device("cuda", 0)
    assert (d.to_numpy() == a).all() and d.shape == (3, 4) and d.strides == (8, 2)
    cai = d.__cuda_array_interface__
    assert cai["data"] == (d.data_ptr, False) and cai["typestr"] == "<i2"
    assert (ox.zeros((2, 2), ox.f64).to_numpy() == 0).all()


def test_dlpack_export_round_trips_through_the_reader(fake: FakeDriver) -> None:
    import gc

    from oxide.runtime import dlpack

    d = ox.to_device(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert d.__dlpack_device__() == (dlpack.CUDA_DEVICE, 0)
    v = dlpack.view_from_dlpack(d)
    assert v.ptr == d.data_ptr and v.shape == (2, 3) and v.device == 0 and v.dtype == f32
    del v
    gc.collect()
    assert not dlpack._exports  # the capsule died unconsumed: its destructor released it


def test_error_record_formatting_without_a_site() -> None:
    exc = kernel_error("k", [], 3, 0, 0, 0, 0)
    assert isinstance(exc, ox.KernelAssertionError) and "division by zero" in str(exc)
    rec = ErrorRecord.host()
    assert not rec.failed and rec.take() is None
    write_record(rec.address, 1, 5, 1, 3, 2)
    assert rec.failed
    with pytest.raises(ox.KernelIndexError, match="index 3 is out of bounds for axis 1 of"):
        rec.raise_if_failed("k", [])
    assert not rec.failed

