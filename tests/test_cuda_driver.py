"""oxide.runtime.cuda_driver.launch_function: which cuLaunchKernelEx it asks the driver for."""

from __future__ import annotations

import ctypes

import pytest

from oxide.errors import DeviceError
from oxide.runtime import cuda_driver as cd


@pytest.fixture
def proc_address(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """cuGetProcAddress answering with libc's `labs` (never called), recording the calls."""
    calls: list[tuple] = []
    address = ctypes.cast(ctypes.CDLL(None).labs, ctypes.c_void_p).value

    def get_proc_address(symbol: bytes, version: int, flags: object) -> tuple:
        calls.append((symbol, version, flags))
        return (0, address, 0)

    monkeypatch.setattr(cd.drv, "cuGetProcAddress", get_proc_address)
    monkeypatch.setattr(cd, "_launch_function", None)
    monkeypatch.setattr(cd, "_launch_address", None)
    return calls


@pytest.mark.parametrize(("env", "mode"), [
    (None, "CU_GET_PROC_ADDRESS_LEGACY_STREAM"),
    ("0", "CU_GET_PROC_ADDRESS_LEGACY_STREAM"),
    ("1", "CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM"),
])
def test_default_stream_semantics_follow_cuda_python(proc_address, monkeypatch, env,
                                                     mode) -> None:
    name = "CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM"
    if env is None:
        monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv(name, env)
    fn = cd.launch_function()
    assert cd.launch_function() is fn  # asked once per process
    assert proc_address == [(b"cuLaunchKernelEx", 12000,
                             getattr(cd.drv.CUdriverProcAddress_flags, mode))]


def test_a_driver_without_cuLaunchKernelEx_is_a_device_error(proc_address, monkeypatch) -> None:
    monkeypatch.setattr(cd.drv, "cuGetProcAddress", lambda *args: (0, 0, 0))
    with pytest.raises(DeviceError, match="CUDA 12.0 or newer"):
        cd.launch_function()


def test_the_launch_config_struct_matches_the_driver_header() -> None:
    """CUlaunchConfig as cuda.bindings lays it out: 7 x u32, stream, attrs, numAttrs."""
    config = cd.drv.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = 5, 6, 7
    config.blockDimX, config.blockDimY, config.blockDimZ = 32, 2, 1
    config.sharedMemBytes = 4096
    config.hStream = cd.drv.CUstream(0x1234_5678_9A)
    raw = ctypes.string_at(config.getPtr(), cd.LAUNCH_CONFIG.size)
    assert cd.LAUNCH_CONFIG.unpack(raw) == (5, 6, 7, 32, 2, 1, 4096, 0x1234_5678_9A, 0, 0)
