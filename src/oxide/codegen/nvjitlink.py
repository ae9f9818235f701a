"""PTX to cubin with nvJitLink, called through ctypes.

This is the library behind cuda.core's `Linker`; calling it directly keeps a
cold compile off cuda.core's ~0.3 s import. It needs no GPU.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from typing import Any

from oxide.codegen.toolchain import find_nvjitlink
from oxide.errors import TargetError

_INPUT_PTX = 2  # nvJitLinkInputType: NVJITLINK_INPUT_PTX
_lock = threading.Lock()


@functools.cache
def _lib() -> Any:
    lib = ctypes.CDLL(find_nvjitlink())
    h = ctypes.c_void_p
    lib.nvJitLinkCreate.argtypes = [ctypes.POINTER(h), ctypes.c_uint32,
                                    ctypes.POINTER(ctypes.c_char_p)]
    lib.nvJitLinkAddData.argtypes = [h, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                                     ctypes.c_char_p]
    lib.nvJitLinkComplete.argtypes = [h]
    lib.nvJitLinkGetLinkedCubinSize.argtypes = [h, ctypes.POINTER(ctypes.c_size_t)]
    lib.nvJitLinkGetLinkedCubin.argtypes = [h, ctypes.c_void_p]
    lib.nvJitLinkGetErrorLogSize.argtypes = [h, ctypes.POINTER(ctypes.c_size_t)]
    lib.nvJitLinkGetErrorLog.argtypes = [h, ctypes.c_char_p]
    lib.nvJitLinkDestroy.argtypes = [ctypes.POINTER(h)]
    return lib


def ptx_to_cubin(ptx: str, arch: str, name: str = "kernel") -> bytes:
    """Assemble `ptx` for `arch` (e.g. "sm_90a"); raise TargetError with ptxas's log on failure."""
    lib = _lib()
    handle = ctypes.c_void_p()
    opts = [f"-arch={arch}".encode(), b"-O3"]
    argv = (ctypes.c_char_p * len(opts))(*opts)
    with _lock:
        status = lib.nvJitLinkCreate(ctypes.byref(handle), len(opts), argv)
        if status:
            raise TargetError(f"nvJitLink could not start for {arch} (status {status})")
        try:
            data = ptx.encode()
            status = lib.nvJitLinkAddData(handle, _INPUT_PTX, data, len(data), name.encode())
            if status == 0:
                status = lib.nvJitLinkComplete(handle)
            if status:
                size = ctypes.c_size_t()
                lib.nvJitLinkGetErrorLogSize(handle, ctypes.byref(size))
                log = ctypes.create_string_buffer(size.value + 1)
                lib.nvJitLinkGetErrorLog(handle, log)
                raise TargetError(f"nvJitLink rejected the PTX for {arch} (status {status}):\n"
                                  f"{log.value.decode(errors='replace')}")
            size = ctypes.c_size_t()
            lib.nvJitLinkGetLinkedCubinSize(handle, ctypes.byref(size))
            out = ctypes.create_string_buffer(size.value)
            lib.nvJitLinkGetLinkedCubin(handle, out)
            return out.raw
        finally:
            lib.nvJitLinkDestroy(ctypes.byref(handle))
