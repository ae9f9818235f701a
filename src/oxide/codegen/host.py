"""Host code: optimize a CPU kernel module for this machine and load it with MCJIT.

The module is optimized at O3 for the host CPU (its vector width, FMA), which
also runs LLVM's coroutine passes for kernels that synchronize, and compiled to an
object file; MCJIT loads that object (fresh, or from the disk cache, keyed by
`host_target_id`). Math and `printf` resolve against the C library and libm,
loaded into the process once.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import hashlib
from dataclasses import dataclass
from typing import Any

from oxide.codegen.llvm import _lock, binding, optimize, parse
from oxide.errors import InternalCompilerError

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


def _host_features() -> tuple[str, str]:
    """(CPU name, feature string) the host code is built for: the features LLVM gets wrong
    (above) turned off."""
    llvm = binding()
    features = llvm.get_host_cpu_features()
    for name in _MISCOMPILED_FEATURES:
        if features.get(name):
            features[name] = False
    return llvm.get_host_cpu_name(), features.flatten()


def _host_machine() -> Any:
    """A fresh target machine: each MCJIT engine takes ownership of its own."""
    llvm = binding()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    cpu, features = _host_features()
    return target.create_target_machine(cpu=cpu, features=features, opt=3,
                                        codemodel="jitdefault")


@functools.cache
def host_target_id() -> str:
    """What host object code depends on besides the module: the disk cache keys CPU
    entries with it, so code built for another CPU is never loaded here."""
    llvm = binding()
    cpu, features = _host_features()
    digest = hashlib.sha256(f"{llvm.get_process_triple()}|{cpu}|{features}".encode())
    return f"cpu-{cpu}-{digest.hexdigest()[:16]}"


def compile_object(text: str) -> tuple[bytes, str]:
    """The module `text` optimized and compiled for this host: (object code, optimized IR)."""
    llvm = binding()
    with _lock:
        machine = _host_machine()
        module = parse(text)
        module.triple = llvm.get_process_triple()
        module.data_layout = str(machine.target_data)
        optimize(module, machine)
        return machine.emit_object(module), str(module)


def load_object(obj: bytes, entry: str, llvm_text: str = "") -> HostKernel:
    """Load object code from `compile_object` (fresh, or from the disk cache) and return
    its entry point `entry` (`<kernel symbol>_launch`); libc and libm resolve its calls."""
    llvm = binding()
    _load_c_libraries()
    with _lock:
        empty = llvm.parse_assembly("")
        empty.triple = llvm.get_process_triple()
        engine = llvm.create_mcjit_compiler(empty, _host_machine())
        engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        engine.finalize_object()
        address = engine.get_function_address(entry)
    if not address:
        raise InternalCompilerError(f"host object code lacks `{entry}`")
    return HostKernel(engine, LAUNCH_PROTOTYPE(address), llvm_text)


def jit(text: str, symbol: str) -> HostKernel:
    """Compile the module `text` and return its `<symbol>_launch` entry point."""
    obj, optimized = compile_object(text)
    return load_object(obj, f"{symbol}_launch", optimized)
