"""The few CUDA driver calls oxide makes, through cuda.bindings, with errors as `DeviceError`.

oxide talks to the driver directly instead of through cuda.core: importing
cuda.core costs ~0.3-1 s and its launch path builds a parameter holder per call,
while a warm first launch must stay within ~20 ms and relaunches within a few
microseconds. Primary contexts are used, so memory and streams are shared with
torch, CuPy and cuda.core in the same process.
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Callable
from typing import Any

from cuda.bindings import driver as drv

from oxide.errors import DeviceError

DA = drv.CUdevice_attribute
FA = drv.CUfunction_attribute
HOSTALLOC_MAPPED = drv.CU_MEMHOSTALLOC_DEVICEMAP | drv.CU_MEMHOSTALLOC_PORTABLE

# CUlaunchConfig: gridDim x y z, blockDim x y z, sharedMemBytes, hStream, attrs, numAttrs.
LAUNCH_CONFIG = struct.Struct("@7I4xQQI4x")
INVALID_CONTEXT = int(drv.CUresult.CUDA_ERROR_INVALID_CONTEXT)  # e.g. a thread with none current
LaunchFunction = Callable[[int, int, int, Any], int]  # (config*, CUfunction, params**, extra**)
_launch_address: int | None = None
_launch_function: LaunchFunction | None = None


def launch_address() -> int:
    """The address of the driver's `cuLaunchKernelEx`.

    It comes from `cuGetProcAddress`, so it is the driver cuda.bindings uses, with
    the same default-stream semantics (`CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM=1`
    makes stream 0 the per-thread stream, as it does there).
    """
    global _launch_address
    if _launch_address is None:
        flags = drv.CUdriverProcAddress_flags
        per_thread = os.environ.get("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM") == "1"
        mode = (flags.CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM if per_thread
                else flags.CU_GET_PROC_ADDRESS_LEGACY_STREAM)
        pfn = call(drv.cuGetProcAddress, b"cuLaunchKernelEx", 12000, mode,
                   what="finding cuLaunchKernelEx")
        if isinstance(pfn, tuple):  # (pointer, symbol status)
            pfn = pfn[0]
        if not int(pfn):
            raise DeviceError("the CUDA driver has no cuLaunchKernelEx: oxide needs a driver "
                              "for CUDA 12.0 or newer (R525+)")
        _launch_address = int(pfn)
    return _launch_address


def launch_function() -> LaunchFunction:
    """`cuLaunchKernelEx` (`launch_address`) as a ctypes function: `(config address,
    function handle, parameter-pointer array address, None) -> CUresult`.

    Why not `drv.cuLaunchKernel`: its eleven converted arguments cost more than the
    launch path's whole Python budget. This takes four plain ints, and the launch
    configuration is a struct (`LAUNCH_CONFIG`) a Launcher packs once per config
    and stream, not per launch. The call releases the GIL, like the binding's.
    Launches use it until the native trampoline (runtime/native_launch.py), which
    calls the same address, is built.
    """
    global _launch_function
    if _launch_function is None:
        proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_void_p, ctypes.c_void_p)
        _launch_function = proto(launch_address())
    return _launch_function


def error_text(err: Any) -> str:
    """`CUDA_ERROR_X: description` for a CUresult."""
    try:
        _, name = drv.cuGetErrorName(err)
        _, desc = drv.cuGetErrorString(err)
        return f"{name.decode()}: {desc.decode()}"
    except Exception:  # an unknown code: still say which
        return f"CUDA error {int(err)}"


def fail(err: Any, what: str) -> DeviceError:
    return DeviceError(f"{what} failed: {error_text(err)}")


def call(fn: Any, *args: Any, what: str = "") -> Any:
    """Call a driver function; its one result (or None), or DeviceError on failure."""
    result = fn(*args)
    err = result[0]
    if err:
        raise fail(err, what or fn.__name__)
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


def init() -> None:
    call(drv.cuInit, 0)


def device_handle(index: int) -> Any:
    return call(drv.cuDeviceGet, index)


def device_attribute(dev: Any, name: str) -> int:
    return int(call(drv.cuDeviceGetAttribute, getattr(DA, "CU_DEVICE_ATTRIBUTE_" + name), dev))


def device_name(dev: Any) -> str:
    raw = call(drv.cuDeviceGetName, 256, dev)
    return bytes(raw).split(b"\0", 1)[0].decode()


def driver_version() -> int:
    return int(call(drv.cuDriverGetVersion))


def retain_primary_context(dev: Any) -> Any:
    return call(drv.cuDevicePrimaryCtxRetain, dev)


def current_context() -> int:
    err, ctx = drv.cuCtxGetCurrent()
    if err:
        raise fail(err, "cuCtxGetCurrent")
    return int(ctx)


def set_current_context(ctx: Any) -> None:
    call(drv.cuCtxSetCurrent, ctx)


def can_access_peer(dev: Any, peer: Any) -> bool:
    """Whether device `dev` can read and write memory of device `peer` (NVLink or PCIe)."""
    return bool(call(drv.cuDeviceCanAccessPeer, dev, peer))


def enable_peer_access(peer_ctx: Any) -> None:
    """Let the current context reach `peer_ctx`'s memory; enabling it twice is fine."""
    (err,) = drv.cuCtxEnablePeerAccess(peer_ctx, 0)
    if err and err != drv.CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED:
        raise fail(err, "enabling peer access")


def synchronize_context() -> None:
    call(drv.cuCtxSynchronize, what="synchronizing the device")


def synchronize_stream(stream: int) -> None:
    call(drv.cuStreamSynchronize, stream, what="synchronizing the stream")


def context_limit(name: str) -> int:
    """A limit of the current context (`STACK_SIZE`: bytes of stack per thread)."""
    return int(call(drv.cuCtxGetLimit, getattr(drv.CUlimit, "CU_LIMIT_" + name)))


def set_context_limit(name: str, value: int) -> str | None:
    """Set a limit of the current context; waits for the work queued on it. None when
    it is set, else the driver's error name (`CUDA_ERROR_INVALID_VALUE` for a stack
    beyond the per-thread maximum, `CUDA_ERROR_OUT_OF_MEMORY` for one the device's
    memory cannot hold): the caller decides what a refusal means."""
    (err,) = drv.cuCtxSetLimit(getattr(drv.CUlimit, "CU_LIMIT_" + name), value)
    if not err:
        return None
    return error_text(err).split(":", 1)[0]


def load_module(image: bytes) -> Any:
    buf = ctypes.create_string_buffer(image, len(image))  # an address the binding surely takes
    return call(drv.cuModuleLoadData, ctypes.addressof(buf), what="loading the kernel's cubin")


def get_function(module: Any, name: str) -> Any:
    return call(drv.cuModuleGetFunction, module, name.encode())


def module_global(module: Any, name: str) -> tuple[int, int]:
    """(device address, bytes) of a module's global variable."""
    ptr, size = call(drv.cuModuleGetGlobal, module, name.encode())
    return int(ptr), int(size)


def function_attribute(fn: Any, name: str) -> int:
    return int(call(drv.cuFuncGetAttribute, getattr(FA, "CU_FUNC_ATTRIBUTE_" + name), fn))


def set_function_attribute(fn: Any, name: str, value: int) -> None:
    call(drv.cuFuncSetAttribute, fn, getattr(FA, "CU_FUNC_ATTRIBUTE_" + name), value)


def mem_alloc(nbytes: int) -> int:
    return int(call(drv.cuMemAlloc, max(nbytes, 1), what=f"allocating {nbytes} bytes"))


def mem_free(ptr: int) -> None:
    call(drv.cuMemFree, ptr)


def memcpy_htod(dst: int, src: int, nbytes: int, stream: int) -> None:
    call(drv.cuMemcpyHtoDAsync, dst, src, nbytes, stream, what="copying to the device")


def memcpy_dtoh(dst: int, src: int, nbytes: int, stream: int) -> None:
    call(drv.cuMemcpyDtoHAsync, dst, src, nbytes, stream, what="copying from the device")


def memset_zero(dst: int, nbytes: int, stream: int) -> None:
    call(drv.cuMemsetD8Async, dst, 0, nbytes, stream, what="zeroing device memory")


def host_alloc_mapped(nbytes: int) -> tuple[int, int]:
    """Pinned host memory the GPU can address: (host pointer, device pointer)."""
    host = int(call(drv.cuMemHostAlloc, nbytes, HOSTALLOC_MAPPED, what="allocating pinned memory"))
    dev = int(call(drv.cuMemHostGetDevicePointer, host, 0))
    return host, dev


def event_create() -> Any:
    """A CUDA event for timing (default flags: it records a timestamp)."""
    return call(drv.cuEventCreate, 0, what="creating an event")


def event_record(event: Any, stream: int) -> None:
    call(drv.cuEventRecord, event, stream, what="recording an event")


def event_elapsed_ms(start: Any, end: Any) -> float:
    """Milliseconds between two recorded events, once `end` has completed."""
    call(drv.cuEventSynchronize, end, what="waiting for an event")
    return float(call(drv.cuEventElapsedTime, start, end, what="reading an event's time"))


def event_destroy(event: Any) -> None:
    call(drv.cuEventDestroy, event)
