"""Hopper GEMM C = A @ B in bf16 (f32 accumulation): TMA, an mbarrier ring, wgmma, warp specialization.

The kernel, `gemm_hopper`, is written in oxide SIMT in `oxide/kernels/hopper_gemm.py`
(its docstring walks through the recipe: a TMA ring with 128-byte swizzle and parity
waits, a producer and two consumer warp groups with setmaxnreg, a persistent grid in
grouped order, 2x1 clusters with multicast, a TMA-store epilogue); it lives in the
library because `tile_matmul`'s K loop runs on it on sm_90. This example checks it
against NumPy at a ragged size and at 4096^3, and reports what ptxas made of it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import oxide as ox
from oxide.examples import _harness as h
from oxide.kernels.hopper_gemm import (
    BK,
    CPU,
    DEFAULT,
    FASTEST,
    Config,
    gemm_hopper,
    launch_config,
    matmul,
    replace,
    signature,
    tensor_maps,
)

NEEDS_ARCH = "sm_90a"  # wgmma: main(arch=...) builds no cubin for any other architecture


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


def sm_count(dev: Any) -> int:
    """The GPU's SM count (the persistent grid's size); 2 on the CPU, so blocks there walk
    several tiles."""
    if dev.is_cpu:
        return 2
    from oxide.runtime.gpu import gpu_device

    return int(gpu_device(dev.index).attribute("MULTIPROCESSOR_COUNT"))


def _bf16(x: np.ndarray) -> np.ndarray:
    import ml_dtypes

    return x.astype(ml_dtypes.bfloat16)


def padded(x: np.ndarray) -> np.ndarray:
    """`x` with zero columns appended up to a multiple of 8: TMA needs each row to start
    16-byte aligned. The kernel is told the true sizes; the zeros add nothing to C."""
    cols = -(-x.shape[1] // 8) * 8
    out = np.zeros((x.shape[0], cols), x.dtype)
    out[:, :x.shape[1]] = x
    return out


def check(dev: Any, m: int, n: int, k: int, cfg: Config, seed: int = 0,
          repeats: int | None = None) -> tuple[bool, float]:
    """Runs one size against NumPy (f32 products of the bf16 inputs); returns (passed,
    seconds per launch)."""
    rng = np.random.default_rng(seed)
    a = _bf16(rng.standard_normal((m, k), dtype=np.float32))
    b = _bf16(rng.standard_normal((k, n), dtype=np.float32))
    b_in = b if cfg.b_mn else np.ascontiguousarray(b.T)
    # every element must be written; rows padded for the TMA-store epilogue's map
    c = padded(_bf16(np.full((m, n), np.nan, np.float32)))
    d_a, d_b, d_c = h.to_device(dev, padded(a), padded(b_in), c)
    sms = sm_count(dev)
    seconds = h.time_launch(dev, lambda: matmul(d_a, d_b, d_c, m, n, k, cfg, sms),
                            repeats=repeats)
    want = a.astype(np.float32) @ b.astype(np.float32)
    got = h.to_numpy(d_c)[:, :n].astype(np.float32)
    # bf16 output keeps 8 significant bits: a relative error up to 2^-8 of each result
    # (the f32 sums' own rounding is far below that)
    passed = bool(np.allclose(got, want, rtol=1 / 128, atol=1e-2))
    return passed, seconds


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> h.ExampleResult:
    """A ragged product (M x K x N = 1000 x 700 x 1500 on a GPU, `size` x 0.7 `size` x
    1.5 `size` when given) and 4096^3, against NumPy.

    The CPU runs the variant without setmaxnreg (only a GPU has it) at a small ragged size;
    `arch` also builds the default variant's cubin for that architecture (wgmma is sm_90a's
    alone: any other is a TargetError).
    """
    with h.running_on(device) as dev:
        cfg = CPU if dev.is_cpu else FASTEST
        m = h.pick_size(dev, size, cpu=136, gpu=1000)
        k, n = m * 7 // 10, m * 3 // 2  # ragged: no dimension a multiple of its tile
        passed, seconds = check(dev, m, n, k, cfg, repeats=1 if dev.is_cpu else None)
        problem = f"{m:,} x {k:,} x {n:,} bf16"
        if not dev.is_cpu and size is None:
            big_ok, seconds = check(dev, 4096, 4096, 4096, cfg, seed=1)
            passed = passed and big_ok
            m = n = k = 4096
            problem += " and 4,096^3 (timed)"
        note = ("the CPU runs the kernel without setmaxnreg; full speed needs an sm_90 GPU"
                if dev.is_cpu else "")
        return h.ExampleResult("gemm_hopper", passed, h.describe(dev),
                               f"{problem}, {cfg.label()}", seconds, work=2.0 * m * n * k,
                               unit="GFLOP/s", detail=h.join(note, check_arch(arch)))


def check_arch(arch: str | None) -> str:
    """The default variant's cubin for `arch` (sm_90 builds sm_90a). wgmma exists on sm_90a
    alone, so an older architecture gets no cubin: said here rather than raised, since the
    CPU run above still checked the kernel."""
    if arch is None:
        return ""
    try:
        ck = gemm_hopper.compile(*signature(DEFAULT), arch=arch)
    except ox.TargetError as exc:
        return f"no cubin for {arch}: {str(exc).splitlines()[0]}"
    return f"cubin for {ck.arch}: {len(ck.cubin):,} bytes"


__all__ = ["BK", "Config", "DEFAULT", "FASTEST", "CPU", "gemm_hopper", "matmul", "tensor_maps",
           "launch_config", "signature", "ptxas_report", "padded", "check", "main", "replace"]


if __name__ == "__main__":
    print(main())
