"""llvmlite: parse the emitted module, link libdevice, optimize (O3), emit PTX or host code.

llvmlite is imported on first use, not at `import oxide` (it costs ~60 ms).
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from oxide.codegen.ptx_rewrite import halves_in_f32, keep_negations
from oxide.errors import InternalCompilerError, TargetError

_lock = threading.Lock()


@functools.cache
def binding() -> Any:
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


@functools.cache
def nvptx_machine(arch: str) -> Any:
    llvm = binding()
    target = llvm.Target.from_triple("nvptx64-nvidia-cuda")
    features = "+ptx80" if arch.startswith("sm_9") else "+ptx78"
    return target.create_target_machine(cpu=arch, features=features, opt=3)


@functools.cache
def libdevice_bitcode() -> bytes:
    from oxide.codegen.toolchain import find_libdevice

    with open(find_libdevice(), "rb") as f:
        return f.read()


def parse(text: str, context: Any = None) -> Any:
    """The module of `text`, in `context` (LLVM's global one by default)."""
    llvm = binding()
    try:
        module = llvm.parse_assembly(text, context)
        module.verify()
    except RuntimeError as exc:  # oxide emitted invalid IR: a compiler bug
        numbered = "\n".join(f"{i + 1:4} {line}" for i, line in enumerate(text.splitlines()))
        raise InternalCompilerError(f"oxide produced invalid LLVM IR: {exc}\n{numbered}") from exc
    return module


def optimize(module: Any, machine: Any) -> None:
    llvm = binding()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(machine, pto)
    pb.getModulePassManager().run(module, pb)


def to_ptx(text: str, arch: str, needs_libdevice: bool) -> str:
    """The PTX of one kernel module, as ptxas gets it: LLVM's, rewritten around two
    ptxas wrong-code bugs (codegen/ptx_rewrite.py)."""
    return keep_negations(halves_in_f32(llvm_ptx(text, arch, needs_libdevice)))


def llvm_ptx(text: str, arch: str, needs_libdevice: bool) -> str:
    """LLVM's PTX of one kernel module, before the rewrites (tests read ptxas's faults
    in it)."""
    with _lock:
        machine = nvptx_machine(arch)
        module = _optimized(text, machine, needs_libdevice)
        try:
            return machine.emit_assembly(module)  # type: ignore[no-any-return]
        except RuntimeError as exc:
            raise TargetError(f"LLVM could not generate PTX for {arch}: {exc}") from exc


def optimized_ir(text: str, arch: str, needs_libdevice: bool) -> str:
    """The optimized LLVM IR of one kernel module, as `to_ptx` optimizes it. Made again
    on request rather than printed by every compile: a wgmma kernel's IR is megabytes of
    text (tile_attention: 1.9 MB, 25-30 ms to print on the dev VM) that few read."""
    with _lock:
        return str(_optimized(text, nvptx_machine(arch), needs_libdevice))


def _optimized(text: str, machine: Any, needs_libdevice: bool) -> Any:
    """The module parsed, linked with libdevice where it calls it, and optimized. Each in
    a context of its own: the named struct types of its text (`%oxide.floatx128`,
    codegen/emit.py `struct_type`) would otherwise pile up in LLVM's global context and
    be renamed (`%oxide.floatx128.0`, ...) in every later module that names them."""
    llvm = binding()
    context = llvm.create_context()
    module = parse(text, context)
    module.data_layout = str(machine.target_data)
    if needs_libdevice:
        lib = llvm.parse_bitcode(libdevice_bitcode(), context)
        lib.triple = module.triple
        lib.data_layout = module.data_layout
        module.link_in(lib)
        _internalize_except_kernels(module)
        _drop_unused(module, machine)
    optimize(module, machine)
    return module


def _drop_unused(module: Any, machine: Any) -> None:
    """Global dead code elimination alone, before O3: the ~1,000 internal libdevice
    functions a kernel does not call go at once, instead of riding through O3's early
    passes (tile_softmax 8192: O3 110-145 ms -> 43-60 ms, the same PTX)."""
    llvm = binding()
    pb = llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options(speed_level=0))
    mpm = llvm.create_new_module_pass_manager()
    mpm.add_global_dead_code_eliminate_pass()
    mpm.run(module, pb)


def _internalize_except_kernels(module: Any) -> None:
    """Marks linked libdevice functions internal so O3 drops the unused ones."""
    for fn in module.functions:
        if fn.name.startswith("__nv_") and not fn.is_declaration:
            fn.linkage = "internal"
