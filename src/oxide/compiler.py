"""The pipeline: frontend -> oxide IR -> passes -> LLVM IR -> PTX -> cubin (or host code).

`compile_kernel` produces a `CompiledKernel`; later stages (`.ptx`, `.cubin`)
run when first asked for, so `ck.ir` costs only the frontend.
"""

from __future__ import annotations

import hashlib
import os
import sys
from functools import cached_property
from typing import Any

from oxide import types as T
from oxide.codegen.abi import RECURSIVE_SYMBOL_PREFIX, ParamABI, logical_grid_abi
from oxide.errors import CompileError, InternalCompilerError
from oxide.frontend.builder import Site
from oxide.progress import activity
from oxide.runtime.witness_rules import (
    WHOLE_WARP_GROUPS,
    WHOLE_WARP_ROWS,
    WHOLE_WARPS,
    grid_rule,
)
from oxide.specialize import ConstValue


class CompiledKernel:
    """One specialization of a kernel for one target, with every stage inspectable."""

    def __init__(self, kernel: Any, sig: tuple[Any, ...], target: str, arch: str | None,
                 symbol: str, func: Any, llvm_text: str, abi: list[ParamABI], sites: list[Site],
                 uses_barriers: bool) -> None:
        self.kernel = kernel
        self.signature = sig
        self.target = target
        self.arch = arch
        self.name = symbol
        self._func = func
        self.llvm_unoptimized = llvm_text
        self.abi = abi
        self.sites = sites
        self.uses_barriers = uses_barriers
        self._stages: dict[str, Any] = {}
        # (symbol, ox.ConstantArray) for each constant array the kernel reads: the runtime
        # fills each symbol's global from the array's host values before a launch
        self.constants: list[tuple[str, Any]] = []
        # the `oxide.func`s of the recursive @ox.funcs the kernel calls (usually none)
        self.device_functions: list[Any] = []
        # a tile kernel's tile-dialect IR before lowering, kept for OXIDE_DUMP=tile
        self.tile: str | None = None

    @cached_property
    def ir(self) -> str:
        """The oxide IR (xDSL text), after the safety pass; then the device functions of
        the recursive @ox.funcs it calls, if any."""
        return "\n".join(str(f) for f in (self._func, *self.device_functions))

    def compiling(self) -> str:
        """What the progress line says while a stage of this kernel is made."""
        return compiling(self.kernel, self.target, self.arch)

    @cached_property
    def _ptx(self) -> str:
        from oxide.codegen.llvm import to_ptx

        with activity(self.compiling()):
            return to_ptx(self.llvm_unoptimized, self.arch or "sm_80", self._needs_libdevice)

    @property
    def _needs_libdevice(self) -> bool:
        return "@__nv_" in self.llvm_unoptimized

    @cached_property
    def llvm(self) -> str:
        """The optimized LLVM IR."""
        if self.target == "nvptx":
            from oxide.codegen.llvm import optimized_ir

            return optimized_ir(self.llvm_unoptimized, self.arch or "sm_80",
                                self._needs_libdevice)
        return self.host.llvm

    @cached_property
    def host_object(self) -> tuple[bytes, str]:
        """(object code for this host, optimized LLVM IR) of a CPU specialization."""
        if self.target != "cpu":
            raise AttributeError("host code exists only for the CPU target (target='cpu')")
        from oxide.codegen.host import compile_object

        with activity(self.compiling()):
            return compile_object(self.llvm_unoptimized)

    @cached_property
    def host(self) -> Any:
        """The loaded host code (`codegen.host.HostKernel`) of a CPU specialization."""
        from oxide.codegen.host import load_object

        obj, optimized = self.host_object
        return load_object(obj, f"{self.name}_launch", optimized)

    @property
    def ptx(self) -> str:
        if self.target != "nvptx":
            raise AttributeError("PTX exists only for GPU targets (compile with arch='sm_90')")
        return self._ptx

    @cached_property
    def cubin(self) -> bytes:
        from oxide.codegen.nvjitlink import ptx_to_cubin

        with activity(self.compiling()):
            return ptx_to_cubin(self.ptx, self.arch or "sm_80", self.name)

    @cached_property
    def module_image(self) -> bytes:
        """What the GPU runtime loads: the cubin; but for an sm_90a kernel that uses
        `setmaxnreg`, its PTX (NUL-terminated), which the driver JIT-compiles as a whole
        program. nvJitLink assembles relocatable code, for which ptxas drops setmaxnreg
        (its note C7504: "unable to determine register count at entry"), while the
        driver's whole-program compile keeps it: gemm_hopper went from 743 to 775 TFLOPS
        at 4096^3 on the H200 (2026-12-03). The cubin is not built for such a kernel:
        ptxas would run twice on the first call (0.3-0.5 s each for tile_attention), and
        nvJitLink's register report, blind to setmaxnreg, says nothing true of the code
        that runs. Where the driver rejects the PTX, the runtime assembles it with
        nvJitLink for ptxas's diagnostic (runtime/gpu.py `load_module`); `.cubin` still
        assembles it on request. The driver caches its own compile across processes.

        `OXIDE_DRIVER_JIT=1` loads every kernel's PTX this way (relocatable code also
        costs registers: tile_layernorm f32 90 through nvJitLink, 62 assembled as a whole
        program by ptxas; docs/performance.md has what it measured), but for kernels that
        call a recursive @ox.func: their stack and recursion limit come from the frame
        sizes in the nvJitLink cubin (runtime/gpu.py), which the driver's code need not
        share."""
        whole = bool(self.arch and self.arch.endswith("a") and "setmaxnreg" in self.ptx)
        if whole or (os.environ.get("OXIDE_DRIVER_JIT") == "1"
                     and RECURSIVE_SYMBOL_PREFIX not in self.ptx):
            return self.ptx.encode() + b"\0"
        return self.cubin

    def __repr__(self) -> str:
        return f"<CompiledKernel {self.name} for {self.arch or self.target}>"


def mangle(kernel: Any, sig: tuple[Any, ...]) -> str:
    """A symbol unique to the specialization (layouts included: ArrayType's repr omits them)."""
    key = repr([(s, getattr(s, "contiguous", None)) if getattr(s, "vectors", None) is None
                else (s, s.contiguous, s.vectors) for s in sig])
    return f"{kernel.__name__}_{hashlib.sha1(key.encode()).hexdigest()[:10]}"


def compiling(kernel: Any, target: str, arch: str | None) -> str:
    """"compiling `k` for the CPU" / "... for sm_90": a compile, as the progress line
    (oxide/progress.py) names it."""
    where = "the CPU" if target == "cpu" else arch or "sm_80"
    return f"compiling `{kernel.__name__}` for {where}"


def compile_kernel(kernel: Any, sig: tuple[Any, ...], target: str, arch: str | None
                   ) -> CompiledKernel:
    """Run the pipeline for one specialization. Every failure is a CompileError."""
    try:
        with activity(compiling(kernel, target, arch)):
            return _compile(kernel, sig, target, arch)
    except CompileError as exc:
        note = _ranks_from_arguments(kernel, sig)
        if note and exc.span is not None and note not in exc.hint:
            exc.hint = f"{exc.hint}; {note}" if exc.hint else note
            exc.args = (exc.render(),)
        raise
    except RecursionError as exc:
        raise InternalCompilerError(f"kernel `{kernel.__name__}` is nested too deeply to "
                                    "compile") from exc


def launch_bound(options: Any) -> int | None:
    """The most threads a block of this kernel has (`.maxntid`): `max_threads`, else the
    declared block shape's size."""
    if options.max_threads is not None:
        return options.max_threads
    if options.block is not None:
        x, y, z = options.block
        return x * y * z
    return None


def declared_block_size(options: Any) -> int | None:
    """The threads of every block of this kernel, where the kernel fixes its block shape
    (`block=`; a tile kernel's `num_warps`): launches with another shape are refused
    (runtime/witness_rules.check_block_shape), so the GPU code may rely on it."""
    if options.block is None:
        return None
    x, y, z = options.block
    return x * y * z


def _ranks_from_arguments(kernel: Any, sig: tuple[Any, ...]) -> str:
    """Say which arrays took a rank other than 1 from their arguments: a kernel written for
    vectors and launched with a matrix fails inside its body, and the error should say why
    the array has that rank."""
    taken = [(p.name, p.annotation, s) for p, s in zip(kernel.params, sig, strict=False)
             if isinstance(p.annotation, T.ArrayType) and not p.annotation.ranked
             and isinstance(s, T.ArrayType) and s.rank != 1]
    if not taken:
        return ""
    name, ann, s = taken[0]
    dt = getattr(ann.dtype, "name", repr(ann.dtype))
    return (f"`{name}: {ann.title}[{dt}]` took rank {s.rank} from its argument; declare "
            f"`{ann.title}[{dt}, 1]` to refuse other ranks at launch")


def _compile(kernel: Any, sig: tuple[Any, ...], target: str, arch: str | None) -> CompiledKernel:
    from oxide.codegen.emit import Emitter, check_supported
    from oxide.frontend import device_functions
    from oxide.frontend.entry import lower_kernel
    from oxide.passes.disjoint_reads import check_disjoint_reads
    from oxide.passes.safety import check_disjoint_writes
    from oxide.passes.shared_races import check_shared_races, needs_proof
    from oxide.passes.uniformity import check_barrier_uniformity, varying_values
    from oxide.passes.whole_warps import launch_group

    symbol = mangle(kernel, sig)
    if target == "nvptx":
        from oxide.codegen.nvptx import NVPTXTarget

        tgt: Any = NVPTXTarget(arch or "sm_80", launch_bound(kernel.options),
                               getattr(kernel.options, "occupancy", None),
                               declared_block_size(kernel.options))
    else:
        from oxide.codegen.cpu import CPUTarget

        tgt = CPUTarget()
    if getattr(kernel, "is_tile", False):  # @ox.tile.kernel: the tile frontend
        from oxide.codegen.switches import hopper_on_cpu as cpu_hopper
        from oxide.codegen.switches import tma_enabled, wgmma_enabled
        from oxide.tile.frontend import lower_tile_kernel

        hopper_on_cpu = target == "cpu" and cpu_hopper()
        lowered = lower_tile_kernel(
            kernel, sig, symbol, keep_tile_ir="tile" in os.environ.get("OXIDE_DUMP", ""),
            verify=os.environ.get("OXIDE_VERIFY_IR", "") not in ("", "0"),
            tensor_cores=target == "nvptx" or hopper_on_cpu,
            wgmma=(target == "nvptx" and arch in ("sm_90", "sm_90a") and wgmma_enabled()
                   or hopper_on_cpu),
            tma=tma_enabled(), cpu=target == "cpu")
    else:
        lowered = lower_kernel(kernel, sig, symbol)
    func = lowered.func
    if target == "nvptx":
        from oxide.codegen.hopper import needs_arch_specific

        big_shared = lowered.ctx.big_shared  # the error for past 48 KiB of static shared memory
        arch_specific = (arch == "sm_90" or big_shared is not None) and needs_arch_specific(func)
        if big_shared is not None and not arch_specific and arch not in ("sm_90", "sm_90a"):
            raise big_shared  # (a kernel with sm_90a instructions gets its TargetError first)
        if arch == "sm_90" and (arch_specific or big_shared is not None):
            # An instruction only sm_90a has (setmaxnreg, wgmma), or more static shared
            # memory than 48 KiB (227 KiB there): compiled for sm_90a when asked for sm_90;
            # its cubin still loads on the sm_90 GPU that asked (other GPUs: a TargetError
            # at the call, codegen/hopper.py).
            arch = "sm_90a"
            tgt = NVPTXTarget(arch, launch_bound(kernel.options),
                              getattr(kernel.options, "occupancy", None),
                              declared_block_size(kernel.options))
    chosen = getattr(lowered, "occupancy", None)
    if chosen and target == "nvptx":  # (a tile kernel compiled for two blocks an SM)
        tgt.min_blocks = chosen
    producer_threads = getattr(lowered, "producer_threads", 0)
    if producer_threads and target == "nvptx":  # a producer warp group past the warps
        tgt.max_threads += producer_threads
        tgt.block_size += producer_threads
    verify_ir = os.environ.get("OXIDE_VERIFY_IR", "") not in ("", "0")
    if verify_ir:
        # xDSL's verifier walks every op (a tenth of a big tile kernel's compile): the test
        # suite turns it on (tests/conftest.py); LLVM verifies the IR oxide emits anyway
        try:
            func.verify()
        except Exception as exc:
            raise InternalCompilerError(f"oxide produced invalid IR for `{kernel.__name__}`: "
                                        f"{exc}\n{func}") from exc
    check_disjoint_writes(func, lowered.sites)
    check_disjoint_reads(func, lowered.sites)
    # a SIMT kernel that declares its block shape is run lane by lane at compile time
    # (passes/shared_races.py): its shared memory, index-map writes and warp collectives
    is_tile = getattr(kernel, "is_tile", False)
    lanes_proved = kernel.options.block is not None and not is_tile
    divergent = None
    launch_rules: tuple[int, ...] = ()
    if not is_tile or verify_ir:
        # tile code is block-uniform by construction (its scalars are 0-d tiles every
        # thread holds alike, tile/frontend.py), so the pass that checks its barriers is a
        # check of the compiler itself there: run where the IR is verified (the tests),
        # not in every compile (a tenth of a big tile kernel's)
        declared = kernel.options.block
        uniformity = check_barrier_uniformity(
            func, lowered.builder.origins, lowered.builder.uniform, lanes_proved=lanes_proved,
            whole_warp_rows=True if is_tile else
            None if declared is None else declared[0] % 32 == 0)
        divergent = uniformity.deferred
        if uniformity.needs_whole_warp_rows:
            launch_rules = (WHOLE_WARP_ROWS,)
    if not is_tile:  # tensor-core and warp-group instructions need whole warps (groups)
        group = launch_group(func, lowered.builder.origins, kernel.options.block)
        if group:
            launch_rules += (WHOLE_WARPS if group == 32 else WHOLE_WARP_GROUPS,)
    # tile kernels: the grid axes their DisjointSlice stores tell blocks apart by, and
    # what their witnesses need of a launch
    grid_axes = getattr(lowered, "grid_axes", None)
    launch_rules += getattr(lowered, "launch_rules", ())
    if lanes_proved and (divergent is not None or needs_proof(func)):
        grid_axes = check_shared_races(func, lowered.sites, lowered.builder.origins,
                                       varying_values(func, lowered.builder.uniform),
                                       kernel.options.block, divergent)
    # recursive @ox.funcs (frontend/device_functions.py): their own functions, checked alike
    device_funcs = [spec.func for spec in device_functions.specializations(lowered.ctx)]
    for f in device_funcs:
        try:
            f.verify()
        except Exception as exc:
            raise InternalCompilerError(f"oxide produced invalid IR for `{kernel.__name__}`: "
                                        f"{exc}\n{f}") from exc
        check_supported(tgt, f)
    check_supported(tgt, func)
    abi = [ParamABI(p.name, s) for p, s in zip(kernel.params, sig, strict=True)
           if not isinstance(s, ConstValue)]
    # a tile kernel walking its grid takes the logical grid next (codegen/persistent_grid.py),
    # then its hidden tensor maps (its TMA rings')
    persistent = getattr(lowered, "persistent_grid", False)
    if persistent:
        abi += logical_grid_abi()
    operand_maps = tuple(getattr(lowered, "operand_maps", ()))
    abi += [m.abi for m in operand_maps]
    prefetch, factor = None, 1
    # a coarsened body overrides block_idx.x, which a device function would not see
    if target == "nvptx" and kernel.options.coarsen and not device_funcs:
        from oxide.codegen.coarsen import FACTOR, prefetchable_loads

        prefetch = prefetchable_loads(func)
        factor = FACTOR if prefetch else 1
    lines = None
    if target == "nvptx":
        from oxide.codegen import lineinfo

        if lineinfo.enabled(kernel.options.lineinfo):
            source = kernel.source
            lines = lineinfo.LineTable(source.file, kernel.__name__,
                                       source.span(source.tree).line)
    emitter = Emitter(func, lowered.sites, abi, tgt, kernel.options.contract,
                      prefetch, lines, lowered.builder.origins)
    emitter.device_functions = device_funcs
    if producer_threads:  # the launcher adds the producer's threads (codegen/warp_roles.py)
        from oxide.codegen.warp_roles import marker_global

        emitter.globals.append(marker_global(symbol, cpu=target == "cpu"))
    if persistent:  # and the logical grid, running fewer blocks
        from oxide.codegen import persistent_grid

        emitter.globals.append(persistent_grid.marker_global(symbol, cpu=target == "cpu"))
    llvm_text = emitter.emit()
    ck = CompiledKernel(kernel, sig, target, arch, symbol, func, llvm_text, abi,
                        lowered.sites, lowered.ctx.uses_barriers)
    ck.device_functions = device_funcs
    ck.tile = getattr(lowered, "tile_ir", None)
    # A coarsened kernel runs logical blocks F*b .. F*b+F-1 in block b and takes the logical
    # grid.x as a hidden last argument: the launcher divides grid.x by F.
    ck.grid_x_factor = factor
    ck.operand_maps = operand_maps  # the launch builds them from the array arguments
    ck.persistent_grid = persistent  # it takes the logical grid (codegen/persistent_grid.py)
    # The witness ranks the kernel creates: a launch must keep them unique
    # (runtime/witness_rules.py checks the grid and block before anything runs).
    ck.thread_index_ranks = tuple(sorted(set(
        thread_index_ranks(func) + grid_rule(grid_axes) + launch_rules)))
    ck.constants = list(lowered.ctx.constants)
    # what the body resolved from outside it: the disk cache checks its key covered these
    ck.folded = dict(lowered.ctx.folded)
    ck.functions = frozenset(lowered.ctx.functions)
    dump = os.environ.get("OXIDE_DUMP", "")
    if dump:
        dump_stages(ck, dump)
    return ck


DUMP_STAGES = {"tile": ("cpu", "nvptx"), "ir": ("cpu", "nvptx"), "llvm": ("cpu", "nvptx"), "ptx": ("nvptx",)}


def dump_stages(ck: CompiledKernel, spec: str) -> None:
    """Print the stages `OXIDE_DUMP` names (comma-separated) to stderr, those that exist for
    `ck`'s target: one variable serves CPU and GPU launches, so `ptx` in it is skipped with
    a note for a CPU compile rather than failing the launch."""
    for stage in (s.strip() for s in spec.split(",")):
        if not stage:
            continue
        if stage not in DUMP_STAGES:
            print(f"// ---- oxide: OXIDE_DUMP names no stage `{stage}` (stages: "
                  f"{', '.join(DUMP_STAGES)}) ----", file=sys.stderr)
        elif ck.target not in DUMP_STAGES[stage]:
            print(f"// ---- oxide {stage}: {ck.name}: none, compiled for the "
                  f"{'CPU' if ck.target == 'cpu' else ck.target} ----", file=sys.stderr)
        elif stage == "tile" and ck.tile is None:
            print(f"// ---- oxide tile: {ck.name}: none, a SIMT kernel ----", file=sys.stderr)
        else:
            print(f"// ---- oxide {stage}: {ck.name} ----", file=sys.stderr)
            print(getattr(ck, stage), file=sys.stderr)


def thread_index_ranks(func: Any) -> tuple[int, ...]:
    """The ranks of the `thread.index_Nd()` witnesses `func` creates, ascending."""
    from oxide.ir import ops

    return tuple(sorted({op.rank.data for op in func.walk()
                         if isinstance(op, ops.ThreadIndexOp)}))


def describe_signature(sig: tuple[Any, ...]) -> str:
    return ", ".join(repr(s) if not isinstance(s, T.DType) else s.name for s in sig)
