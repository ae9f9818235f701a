"""ptxas's verbose report on a kernel's PTX: registers, spills, shared memory, and the
performance notes (C75xx: a serialized wgmma, an ignored setmaxnreg).

For the GEMM tests and benchmarks (tests/test_gemm_hopper.py, tests/test_gpu_gemm_hopper.py,
benchmarks/gemm_bench.py). It reads nvJitLink's log through oxide's own binding, or the
CUDA driver's, so it is a developer's tool, not oxide API.
"""

from __future__ import annotations

from typing import Any


def ptxas_report(ptx: str, arch: str, jit: bool = False) -> dict[str, Any]:
    """ptxas's verbose report for `ptx`: registers, spill bytes, shared bytes and the
    performance notes (C75xx: serialized wgmma, an ignored setmaxnreg), from the compile
    oxide loads: nvJitLink's (no GPU needed), or with `jit` the driver's whole-program
    JIT, which a setmaxnreg kernel loads through (`CompiledKernel.module_image`; needs a
    GPU: the driver compiles for the device at hand)."""
    import re

    log = _driver_jit_log(ptx) if jit else _nvjitlink_log(ptx, arch)

    def number(pattern: str) -> int:
        found = re.search(pattern, log)
        return int(found.group(1)) if found else -1

    return {"registers": number(r"Used (\d+) registers"),
            "spill_stores": number(r"(\d+) bytes spill stores"),
            "spill_loads": number(r"(\d+) bytes spill loads"),
            "smem": number(r"(\d+) bytes smem"),
            "notes": sorted(set(re.findall(r"\((C75\d\d)\)", log))), "log": log}


def _nvjitlink_log(ptx: str, arch: str) -> str:
    import ctypes

    from oxide.codegen.nvjitlink import _INPUT_PTX, _lib

    lib = _lib()
    lib.nvJitLinkGetInfoLogSize.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    lib.nvJitLinkGetInfoLog.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    handle = ctypes.c_void_p()
    opts = [f"-arch={arch}".encode(), b"-O3", b"-verbose"]
    argv = (ctypes.c_char_p * len(opts))(*opts)
    if lib.nvJitLinkCreate(ctypes.byref(handle), len(opts), argv):
        raise RuntimeError(f"nvJitLink could not start for {arch}")
    try:
        data = ptx.encode()
        status = lib.nvJitLinkAddData(handle, _INPUT_PTX, data, len(data), b"gemm")
        status = status or lib.nvJitLinkComplete(handle)
        size = ctypes.c_size_t()
        lib.nvJitLinkGetInfoLogSize(handle, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value + 1)
        lib.nvJitLinkGetInfoLog(handle, buf)
        log = buf.value.decode(errors="replace")
    finally:
        lib.nvJitLinkDestroy(ctypes.byref(handle))
    if status:
        raise RuntimeError(f"nvJitLink failed (status {status}):\n{log}")
    return log


def _driver_jit_log(ptx: str) -> str:
    """The driver JIT's verbose log for `ptx` (cuModuleLoadDataEx on the current device,
    then the module is unloaded). A comment with a fresh nonce makes the text new to the
    driver's compute cache, which would otherwise hand back the launch's compile and
    no log."""
    import uuid

    from cuda.bindings import driver as drv

    from oxide.runtime.gpu import gpu_device

    gpu_device(0).enter()  # a current context
    opt = drv.CUjit_option
    size = 1 << 16
    info, err = bytearray(size), bytearray(size)
    names = [opt.CU_JIT_INFO_LOG_BUFFER, opt.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
             opt.CU_JIT_ERROR_LOG_BUFFER, opt.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
             opt.CU_JIT_LOG_VERBOSE]
    text = f"{ptx}\n// oxide ptxas report {uuid.uuid4().hex}\n"
    status, module = drv.cuModuleLoadDataEx(text.encode() + b"\0", len(names), names,
                                            [info, size, err, size, 1])
    if status != drv.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"the driver JIT failed ({status}):\n"
                           f"{bytes(err).rstrip(bytes(1)).decode(errors='replace')}")
    drv.cuModuleUnload(module)
    return bytes(info).rstrip(bytes(1)).decode(errors="replace")
