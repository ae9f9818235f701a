"""Host code: optimize a CPU kernel module for this machine and JIT it with MCJIT.

The module is optimized at O3 for the host CPU (its vector width, FMA), which
also runs LLVM's coroutine passes for kernels that synchronize. Math and
`printf` resolve against the C library and libm, loaded into the process once.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from dataclasses import dataclass
from typing import Any

from oxide.codegen.llvm import _lock, binding, optimize, parse

# void <symbol>_launch(ptr args, ptr err, ptr cfg): see codegen/cpu_driver.py
LAUNCH_PROTOTYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


# x86 features whose bf16 conversions flush subnormals to zero (vcvtneps2bf16). With them,
# LLVM moves bf16 values (a `select`, a `phi`, a returned value) through f32 and back, and
# `bf16(-1e-40)` passed through a function came back as -0.0; the GPU keeps subnormals.
# Without them, bf16 stays 16 bits in integer registers and the emitter rounds in code.
# AVX512-FP16 goes too: with it LLVM lowers `llvm.fptosi.sat.i16.f16(nan)` to -32768, not
# 0 (the fuzzer, seed 1402, on the H200 host's Emerald Rapids); without it f16 math goes
# through f32, which is exact for one f16 operation.
_MISCOMPILED_FEATURES = ("avx512bf16", "avxneconvert", "amx-bf16", "avx512fp16")


@dataclass(frozen=True)
class HostKernel:
    """A JIT-compiled CPU kernel; holds the engine that owns its machine code."""

    engine: Any
    launch: Any  # LAUNCH_PROTOTYPE
    llvm: str  # the optimized module


@functools.cache
def _load_c_libraries() -> None:
    llvm = binding()
    for name in ("c", "m"):
        path = ctypes.util.find_library(name)
        if path:
            llvm.load_library_permanently(path)


def _host_machine() -> Any:
    """A fresh target machine: each MCJIT engine takes ownership of its own."""
    llvm = binding()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    features = llvm.get_host_cpu_features()
    for name in _MISCOMPILED_FEATURES:
        if features.get(name):
            features[name] = False
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                        features=features.flatten(),
                                        opt=3, codemodel="jitdefault")


def jit(text: str, symbol: str) -> HostKernel:
    """Compile the module `text` and return its `<symbol>_launch` entry point."""
    llvm = binding()
    _load_c_libraries()
    with _lock:
        machine = _host_machine()
        module = parse(text)
        module.triple = llvm.get_process_triple()
        module.data_layout = str(machine.target_data)
        optimize(module, machine)
        optimized = str(module)
        engine = llvm.create_mcjit_compiler(module, machine)
        engine.finalize_object()
        address = engine.get_function_address(f"{symbol}_launch")
    return HostKernel(engine, LAUNCH_PROTOTYPE(address), optimized)
