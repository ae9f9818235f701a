"""Streams (cuda.core, torch, CuPy, raw handles) and device selection on a real GPU."""

from __future__ import annotations

import numpy as np
import pytest

import oxide as ox
from oxide import DisjointSlice, Slice, f32, thread
from oxide.runtime.device import cuda_device_count

pytestmark = pytest.mark.gpu


@ox.kernel
def add_one(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] + 1.0


def cfg(n: int) -> ox.LaunchConfig:
    return ox.LaunchConfig.for_num_elems(n)


def test_torch_current_stream_is_the_default() -> None:
    torch = pytest.importorskip("torch")
    s = torch.cuda.Stream()
    x = torch.zeros(1 << 22, device="cuda")
    out = torch.empty_like(x)
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        x.fill_(41.0)  # queued on s; oxide must order after it
        add_one[cfg(x.numel())](x, out)
    s.synchronize()
    assert bool((out == 42.0).all())


def test_explicit_torch_stream() -> None:
    torch = pytest.importorskip("torch")
    s = torch.cuda.Stream()
    x = torch.full((1000,), 2.0, device="cuda")
    out = torch.empty_like(x)
    torch.cuda.synchronize()
    add_one[cfg(1000)](x, out, stream=s)
    s.synchronize()
    assert bool((out == 3.0).all())


def test_cuda_core_stream() -> None:
    core = pytest.importorskip("cuda.core")
    dev = core.Device(0)
    dev.set_current()
    s = dev.create_stream()
    with ox.device(0):
        x = ox.to_device(np.full(1000, 5.0, np.float32))
        out = ox.empty(1000, ox.f32)
        ox.launch(add_one, cfg(1000), x, out, stream=s)
        s.sync()
        np.testing.assert_array_equal(out.to_numpy(), np.full(1000, 6.0, np.float32))


def test_cupy_stream() -> None:
    cp = pytest.importorskip("cupy")
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.full(1000, 7.0, cp.float32)
        out = cp.empty_like(x)
        add_one[cfg(1000)](x, out)  # CuPy's current stream
    s.synchronize()
    assert bool((out == 8.0).all())


def test_device_selection() -> None:
    with ox.device(0) as dev:
        assert str(dev) == "cuda:0"
        x = ox.to_device(np.zeros(10, np.float32))
        assert x.device == dev
        out = ox.empty(10, ox.f32)
        add_one[cfg(10)](x, out)
        np.testing.assert_array_equal(out.to_numpy(), np.ones(10, np.float32))
    with pytest.raises(ox.DeviceError, match="does not exist"):
        ox.device(cuda_device_count())
    from oxide.runtime import device as devmod

    before = getattr(devmod._state, "device", None)
    try:
        assert ox.set_device("cpu").is_cpu
        x = ox.to_device(np.zeros(10, np.float32))
        assert x.device.is_cpu
        out = ox.empty(10, ox.f32)
        add_one[cfg(10)](x, out)
        np.testing.assert_array_equal(out.to_numpy(), np.ones(10, np.float32))
    finally:  # the choice and the current device it makes (later tests launch on GPU 0)
        devmod._state.device = before
        devmod._state.update()


def test_compiled_for_the_devices_arch() -> None:
    from oxide.runtime.gpu import gpu_device

    with ox.device(0):
        x, out = ox.zeros(4), ox.zeros(4)
        add_one[1, 32](x, out)
        ox.synchronize()
    launcher = next(iter(add_one.__dict__["_oxide_launchers"].values()))
    gpu = gpu_device(0)
    assert launcher.gdev is gpu and gpu.arch.startswith("sm_")


def test_gpu_arrays_on_a_cpu_launch_are_an_error() -> None:
    with ox.device(0):
        x = ox.zeros(4)
    with ox.device("cpu"), pytest.raises(ox.ArgumentError, match="`x` is in cuda:0"):
        add_one[1, 4](x, np.zeros(4, np.float32))


@pytest.mark.skipif(cuda_device_count() < 2, reason="needs two GPUs")
def test_second_device() -> None:
    with ox.device(1):
        x = ox.to_device(np.zeros(100, np.float32))
        out = ox.empty(100, ox.f32)
        add_one[cfg(100)](x, out)
        np.testing.assert_array_equal(out.to_numpy(), np.ones(100, np.float32))
    with ox.device(0), pytest.raises(ox.ArgumentError, match="is on cuda:1"):
        add_one[cfg(100)](x, ox.empty(100, ox.f32))
