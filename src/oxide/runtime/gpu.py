"""Launching on a CUDA GPU: per-device state, loaded kernels, the launch fast path.

Per device (`GPUDevice`): its primary context, architecture and limits, a pool of
error records in mapped pinned memory, and the kernels launched since the last
full synchronization (whose records the host reads). Per kernel, argument type
key and device (`Launcher`): the loaded function, the argument plan and what a
launch hands the driver: a `native_launch.LaunchContext` for the launch
trampoline, which packs the values and calls `cuLaunchKernelEx` in one C call,
or, before the trampoline is built or without llvmlite, a parameter buffer and
launch-config struct that a launch packs and passes to `cuLaunchKernelEx`
through ctypes (cuda_driver.launch_function).

Run-time errors: every launcher owns one 32-byte record (a slot of the device's
pool) and passes its device address as the kernel's hidden last argument. The
host reads the records (plain memory reads, no synchronization) at the start
of every launch on the device, and after synchronizing in `ox.synchronize()`,
`DeviceArray.to_numpy()` and the copy-back of host arrays; a filled record
becomes `ox.KernelIndexError` / `ox.KernelAssertionError` and is cleared.
"""

from __future__ import annotations

import ctypes
import re
import struct
import sys
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from oxide import types as T
from oxide.codegen.abi import DEFAULT_STACK_SIZE, RECURSION_LIMIT_SYMBOL, RECURSIVE_SYMBOL_PREFIX
from oxide.codegen.grid_sync import counter_symbol as grid_counter_symbol
from oxide.codegen.persistent_grid import GRID_PARAMS, hardware_blocks, is_persistent
from oxide.codegen.warp_roles import extra_threads
from oxide.errors import DeviceError, InternalCompilerError, LaunchError
from oxide.progress import activity
from oxide.runtime import cuda_driver as cd
from oxide.runtime import gpu_devices, native_launch
from oxide.runtime.args import (
    _CONST,
    TENSORMAP_FORMAT,
    Plan,
    _param_kinds,
    check_aliasing,
    copy_host_arrays,
    flatten,
    plan_for,
    read_args,
)
from oxide.runtime.config import LaunchConfig
from oxide.runtime.device import Device
from oxide.runtime.gpu_devices import (  # noqa: F401 - this module's names too
    _POOL_BYTES,
    _RECORD_BYTES,
    GPUDevice,
    RecordPool,
    _devices,
    _devices_lock,
    _tls,
    allocate_device_memory,
    copy_to_device,
    copy_to_host,
    cuda_device_count,
    free_device_memory,
    gpu_device,
    synchronize_device,
    time_on_stream,
    zero_device_memory,
)
from oxide.runtime.kernel_image import (  # noqa: F401 - public here too
    _LLVM_SIZES,
    KernelImage,
    with_hidden_args,
)
from oxide.runtime.operand_maps import OperandMapPacker, value_starts
from oxide.runtime.streams import stream_handle as explicit_stream
from oxide.runtime.views import ArrayView
from oxide.runtime.witness_rules import check_block_shape, check_witness_config

# CUlaunchAttribute {id, pad, 64-byte value}: CU_LAUNCH_ATTRIBUTE_COOPERATIVE (2), value 1
_COOPERATIVE_ATTRIBUTE = struct.Struct("@I4xi60x")
_CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2
# CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION (4), value {x, y, z} as u32
_CLUSTER_ATTRIBUTE = struct.Struct("@I4x3I52x")
_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4

# ---------------------------------------------------------------------------
# Kernels on a device


def stack_bytes(kernel: Any, cubin: bytes) -> int:
    """The stack per thread `kernel` needs, in bytes, or 0 for the driver's own: its
    `stack_size` option, else DEFAULT_STACK_SIZE where the cubin holds a recursive
    @ox.func's device function (ptxas cannot bound a recursion's stack; without a larger
    limit a deep one overflows CUDA's 1 KiB default, a device fault)."""
    explicit = getattr(getattr(kernel, "options", None), "stack_size", None)
    if explicit:
        return int(explicit)
    return DEFAULT_STACK_SIZE if RECURSIVE_SYMBOL_PREFIX.encode() in cubin else 0


# .nv.info attributes of a cubin (ELF): EIATTR_FRAME_SIZE holds (symbol index, frame bytes)
_EIATTR_FRAME_SIZE = 0x11
_EIFMT_SVAL = 0x04
_SHT_SYMTAB = 2


def frame_sizes(cubin: bytes) -> dict[str, int] | None:
    """The stack frame of each function in `cubin` by symbol, in bytes, as ptxas reports
    them ("N bytes stack frame"): the `.nv.info` section's frame sizes, named through the
    symbol table. None where the image is not laid out as expected."""
    try:
        if cubin[:4] != b"\x7fELF" or cubin[4] != 2:  # 64-bit ELF
            return None
        shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
        entsize, count, names = struct.unpack_from("<HHH", cubin, 0x3A)
        # (name, type, flags, address, offset, size, link, info, align, entry size)
        sections = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + k * entsize)
                    for k in range(count)]

        def text(table: int, at: int) -> str:
            start = sections[table][4] + at
            return cubin[start:cubin.index(b"\0", start)].decode()

        symtab = next(sec for sec in sections if sec[1] == _SHT_SYMTAB)
        symbols = [text(symtab[6], struct.unpack_from("<I", cubin, symtab[4] + k * 24)[0])
                   for k in range(symtab[5] // 24)]
        info = next(sec for sec in sections if text(names, sec[0]) == ".nv.info")
        frames: dict[str, int] = {}
        k, end = info[4], info[4] + info[5]
        while k + 4 <= end:
            fmt, attr = cubin[k], cubin[k + 1]
            if fmt != _EIFMT_SVAL:
                k += 2 if fmt == 1 else 4
                continue
            length = struct.unpack_from("<H", cubin, k + 2)[0]
            if attr == _EIATTR_FRAME_SIZE and length == 8:
                index, size = struct.unpack_from("<II", cubin, k + 4)
                frames[symbols[index]] = size
            k += 4 + length
        return frames
    except (struct.error, IndexError, ValueError, StopIteration, UnicodeDecodeError):
        return None


STACK_MARGIN = 256  # bytes of a thread's stack the depth guard leaves unused


def recursion_limit(cubin: bytes, stack: int) -> int | None:
    """The deepest recursive call a thread's `stack` bytes hold: one frame of the largest
    recursive @ox.func per level (a level is one device function call), after the frames
    of every other function (the kernel's, and those of non-recursive functions it or
    the recursion calls, each at most once in a chain of calls) and a margin. The guard
    runs in the callee, whose frame is then on the stack already, hence one level less
    (0: one frame fits, and the first call reports); -1 where the stack holds no frame
    at all, which the kernel checks before its calls (codegen/emit.py `op_CallOp`), so
    no call is made. No limit where no recursive function has a frame:
    one that makes a real call saves its return address in its frame, so without frames
    LLVM has turned the recursion into loops. None where the frames cannot be read."""
    frames = frame_sizes(cubin)
    if frames is None:
        return None
    recursive = max((size for name, size in frames.items()
                     if name.startswith(RECURSIVE_SYMBOL_PREFIX)), default=0)
    if recursive == 0:
        return 2**31 - 1
    other = sum(size for name, size in frames.items()
                if not name.startswith(RECURSIVE_SYMBOL_PREFIX))
    return max(-1, (stack - STACK_MARGIN - other) // recursive - 1)


def write_recursion_limit(module: Any, cubin: bytes, stack: int) -> None:
    """Set the module's depth limit (codegen/nvptx.py `recursion_limit`) for `stack` bytes
    per thread, so that a deeper recursion is reported as a kernel error instead of
    overflowing the stack (a device fault). Kept as compiled (assuming 64-byte frames in
    the default stack) where the frames cannot be read."""
    if RECURSION_LIMIT_SYMBOL.encode() not in cubin:
        return
    limit = recursion_limit(cubin, stack)
    if limit is None:
        return
    ptr, _ = cd.module_global(module, RECURSION_LIMIT_SYMBOL)
    value = ctypes.c_int32(min(limit, 2**31 - 1))
    cd.memcpy_htod(ptr, ctypes.addressof(value), 4, 0)
    cd.synchronize_stream(0)  # before any launch, on any stream, reads it


def plan_sizes(plan: Plan) -> tuple[int, ...]:
    return tuple(struct.calcsize(f) for f in plan.formats) + (8,)


def load_image(kernel: Any, plan: Plan, arch: str) -> KernelImage:
    """The compiled code for `plan`'s signature on `arch`: from the disk cache when it has it."""
    from oxide.kernel_types import KernelBase

    cache_key = None
    if isinstance(kernel, KernelBase):
        from oxide.runtime import cache

        cache_key = cache.entry_key(kernel, plan.signature, arch)
        if cache_key is not None:
            image = cache.load(cache_key, plan_sizes(plan))
            if image is not None:
                return image
    with activity(f"compiling `{kernel.__name__}` for {arch}"):  # to the cubin
        ck = kernel.compile(*plan.signature, arch=arch)
        image = KernelImage.from_compiled(ck)
    packed = with_hidden_args(plan_sizes(plan), len(image.operand_maps),
                              is_persistent(image.symbol, image.code))
    if image.arg_sizes != packed:
        raise InternalCompilerError(
            f"`{kernel.__name__}`: the compiled kernel takes arguments of {image.arg_sizes} "
            f"bytes, the runtime packs {packed}")
    if cache_key is not None:
        from oxide.runtime import cache

        cache.store(cache_key, image, ck)
    return image


def f16_bits(x: float) -> int:
    """An f16 value as the bit pattern the native trampoline stores (it packs ints and
    f32/f64 only)."""
    return int.from_bytes(_F16.pack(x), "little")


_F16 = struct.Struct("<e")


def _bf16_bits(x: float) -> int:
    """Round-to-nearest-even f32 -> bf16, as the bit pattern the kernel parameter takes."""
    (bits,) = struct.unpack("<I", struct.pack("<f", x))
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF:
        return 0x7FC0
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def load_module(image: KernelImage) -> Any:
    """The module of `image` on the current device. An image of PTX (which the driver
    compiles: compiler.py `module_image`) that the driver rejects is assembled by nvJitLink,
    whose ptxas says why (a TargetError); the driver's own error where it does not."""
    try:
        return cd.load_module(image.code)
    except DeviceError:
        if not image.code.endswith(b"\0"):
            raise
        ptx = image.code[:-1].decode(errors="replace")
        target = re.search(r"^\.target\s+(sm_\w+)", ptx, re.M)
        if target is None:
            raise
        from oxide.codegen.nvjitlink import ptx_to_cubin

        ptx_to_cubin(ptx, target.group(1), image.symbol)
        raise


class Launcher:
    """One specialization loaded on one device, with its parameter buffer and error record."""

    def __init__(self, gdev: GPUDevice, kernel_name: str, plan: Plan, image: KernelImage,
                 stream_source: str | None) -> None:
        self.gdev = gdev
        self.kernel_name = kernel_name
        self.plan = plan
        self.sites = image.sites
        self.stream_source = stream_source  # where the default stream comes from
        gdev.enter()
        self.module = load_module(image)
        self.function = cd.get_function(self.module, image.symbol)
        self.max_threads = cd.function_attribute(self.function, "MAX_THREADS_PER_BLOCK")
        self.num_regs = cd.function_attribute(self.function, "NUM_REGS")
        self.static_smem = cd.function_attribute(self.function, "SHARED_SIZE_BYTES")
        self.dynamic_smem_limit = gdev.smem_default - self.static_smem
        self.constants = [(array, *cd.module_global(self.module, symbol))
                          for symbol, array in image.constants]
        # ox.grid.sync() (codegen/grid_sync.py): the kernel has a barrier counter; its
        # launches are cooperative, through the ctypes path (the trampoline packs no
        # launch attributes), and check_config checks the grid fits the GPU at once
        self.cooperative = grid_counter_symbol(image.symbol).encode() in image.code
        # a tile kernel's producer warp group: threads past the ones a launch names
        self.extra_threads = extra_threads(image.symbol, image.code)
        self.cooperative_attrs = (ctypes.create_string_buffer(_COOPERATIVE_ATTRIBUTE.pack(
            _CU_LAUNCH_ATTRIBUTE_COOPERATIVE, 1)) if self.cooperative else None)
        self.cluster_attrs: Any = None  # the attributes of the packed cluster launch
        self.record, record_dev = gdev.records.take()
        self.rec_i32 = self.record._i32
        self.active = False
        # Hidden arguments: the error record, then for a coarsened kernel the logical grid.x.
        self.grid_x_factor = image.grid_x_factor
        self.thread_index_ranks = image.thread_index_ranks
        self.block_shape: tuple[int, int, int] | None = None  # `@ox.kernel(block=...)`
        self.tile_block: int | None = None  # a tile kernel's threads per block
        # a tile kernel walking its logical grid: passed after the kernel's own values
        # (codegen/persistent_grid.py), and fewer blocks run (`prepare`)
        self.persistent = is_persistent(image.symbol, image.code)
        grid_params = GRID_PARAMS if self.persistent else 0
        maps = image.operand_maps  # hidden tensor maps, before the record
        formats = (plan.formats + ["I"] * grid_params + [TENSORMAP_FORMAT] * len(maps)
                   + ["Q"] + (["I"] if self.grid_x_factor > 1 else []))
        offsets = [struct.calcsize("@" + "".join(formats[:i + 1])) - struct.calcsize(formats[i])
                   for i in range(len(formats))]
        full = struct.Struct("@" + "".join(formats))
        self.packer = struct.Struct("@" + "".join(plan.formats))
        self.buffer = ctypes.create_string_buffer(max(full.size, 8))
        n = len(plan.formats)
        self.logical_grid_offsets = offsets[n:n + grid_params]
        n += grid_params
        struct.pack_into("@Q", self.buffer, offsets[n + len(maps)], record_dev)
        # writes the hidden tensor maps of this launch's arrays (TMA rings), or None
        self.map_packer = (OperandMapPacker(kernel_name, maps, value_starts(plan.params),
                                            self.buffer, offsets[n:n + len(maps)])
                           if maps else None)
        self.grid_offset = offsets[-1]
        self.grid_packer = struct.Struct("@I")
        base = ctypes.addressof(self.buffer)
        self.pointers = (ctypes.c_void_p * len(offsets))(*[base + off for off in offsets])
        self.params_address = ctypes.addressof(self.pointers)
        self.bf16_slots = [i for i, dt in enumerate(plan.dtypes) if dt == T.bf16]
        self.lock = threading.Lock()  # the parameter and config buffers are shared
        self.fptr = int(self.function)
        self.launch_ex = cd.launch_function()
        self.config_buffer = ctypes.create_string_buffer(cd.LAUNCH_CONFIG.size)
        self.config_address = ctypes.addressof(self.config_buffer)
        self.packed_cfg: LaunchConfig | None = None  # what config_buffer holds
        self.packed_stream: int | None = None
        # The native trampoline (runtime/native_launch.py), once the process has it.
        self.record_dev = record_dev
        self.checked_cfg: LaunchConfig | None = None  # the last config `check` passed
        self.native: Any = None
        self.native_context: native_launch.LaunchContext | None = None
        self.native_address = 0
        self.f16_slots = [i for i, f in enumerate(plan.formats) if f == "e"]
        # the trampoline packs numbers: a tensor map's 128 bytes go through ctypes
        self.fits_trampoline = (len(plan.formats) <= native_launch.MAX_VALUES
                                and not self.cooperative and not maps
                                and not self.extra_threads and not self.persistent
                                and TENSORMAP_FORMAT not in plan.formats)
        self.attach_native()

    def attach_native(self) -> None:
        """Launch through the native trampoline from now on, if the process has it
        (`native_launch.trampoline_if_due`) and it takes this many values."""
        if self.native is not None or not self.fits_trampoline:
            return
        trampoline = native_launch.trampoline_if_due()
        if trampoline is not None:
            self.native_context = native_launch.make_context(
                cd.launch_address(), self.fptr, self.record_dev, self.grid_x_factor,
                self.plan.formats)
            self.native_context.active = int(self.active)
            self.native_address = ctypes.addressof(self.native_context)
            self.native = trampoline

    @property
    def flavor(self) -> str:
        """How this launcher's binders launch: "native" (the trampoline), "warmup" (ctypes,
        counting launches towards building the trampoline) or "ctypes" (for good)."""
        if self.native is not None:
            return "native"
        if native_launch.attempted() or not self.fits_trampoline:
            return "ctypes"
        return "warmup"

    def check_config(self, cfg: LaunchConfig) -> None:
        """Reject a configuration the device or this kernel cannot run (LaunchError).

        Called by `prepare`, with the lock held."""
        gdev = self.gdev
        threads = cfg.threads_per_block + self.extra_threads
        if threads > self.max_threads:
            raise LaunchError(
                f"`{self.kernel_name}` runs at most {self.max_threads} threads per block on "
                f"{gdev} (it uses {self.num_regs} registers per thread); block {cfg.block} "
                f"has {threads}")
        for axis, n, limit in zip("xyz", cfg.block, gdev.max_block, strict=True):
            if n > limit:
                raise LaunchError(f"block.{axis} = {n} exceeds {gdev}'s limit of {limit}")
        for axis, n, limit in zip("xyz", cfg.grid, gdev.max_grid, strict=True):
            if n > limit:
                raise LaunchError(f"grid.{axis} = {n} exceeds {gdev}'s limit of {limit}")
        check_block_shape(self.kernel_name, self.block_shape, cfg)
        if cfg.cluster is not None:
            if self.persistent:
                raise LaunchError(f"`{self.kernel_name}` walks its grid with the blocks the "
                                  "GPU holds at once (a tile kernel with a producer warp "
                                  "group), which clusters do not take: launch without "
                                  "cluster=, or set OXIDE_TILE_PERSISTENT=0 before compiling")
            if self.grid_x_factor > 1:
                raise LaunchError(f"`{self.kernel_name}` runs several logical blocks per "
                                  "hardware block (coarsened), which clusters do not take")
            if int(gdev.arch[3:].rstrip("a")) < 90:
                raise LaunchError(f"cluster={cfg.cluster} needs an sm_90 GPU; {gdev} is "
                                  f"{gdev.arch}")
        if self.thread_index_ranks:
            check_witness_config(self.kernel_name, self.thread_index_ranks, cfg,
                                 self.tile_block)
        shm = cfg.shared_mem_bytes
        if shm > self.dynamic_smem_limit:
            total = self.static_smem + shm
            if total > gdev.smem_optin:
                raise LaunchError(
                    f"`{self.kernel_name}` asks for {shm} bytes of dynamic shared memory "
                    f"(+ {self.static_smem} static); {gdev} has at most {gdev.smem_optin} "
                    "per block")
            # beyond 48 KB needs the kernel's opt-in
            cd.set_function_attribute(self.function, "MAX_DYNAMIC_SHARED_SIZE_BYTES", shm)
            self.dynamic_smem_limit = shm
        if self.cooperative:
            self.check_co_resident(cfg)

    def check_co_resident(self, cfg: LaunchConfig) -> None:
        """A kernel with ox.grid.sync(): every block must be resident at once, or the
        blocks that are wait at the barrier for ones that never start (LaunchError)."""
        gx, gy, gz = cfg.grid
        blocks = gx * gy * gz
        threads = cfg.threads_per_block
        per_sm = blocks_per_sm(self.function, threads, cfg.shared_mem_bytes)
        sms = self.gdev.attribute("MULTIPROCESSOR_COUNT")
        if blocks > per_sm * sms:
            raise LaunchError(
                f"`{self.kernel_name}` calls ox.grid.sync(), so all {blocks} blocks of grid "
                f"{cfg.grid} must be resident on {self.gdev} at once; it holds at most "
                f"{per_sm * sms} ({per_sm} per SM x {sms} SMs, at {threads} threads, "
                f"{self.num_regs} registers per thread and {cfg.shared_mem_bytes} bytes of "
                "dynamic shared memory per block): launch fewer blocks and loop over the "
                "work in the kernel (a grid-stride loop)")

    def prepare(self, cfg: LaunchConfig, stream: int) -> None:
        """Check `cfg` and pack it with `stream` into the launch config (lock held).

        Launches repeat their config object and stream, so this runs once per change,
        not per launch; an equal config made anew (`kernel[grid, block]`) is not
        checked again. A coarsened kernel gets the logical grid.x as its hidden
        argument and runs ceil(grid.x / factor) hardware blocks."""
        if cfg != self.packed_cfg:
            self.check_config(cfg)
        (gx, gy, gz), (bx, by, bz) = cfg.grid, cfg.block
        bx += self.extra_threads
        if self.persistent:  # the logical grid to the kernel, as many blocks as fit
            for offset, n in zip(self.logical_grid_offsets, cfg.grid, strict=True):
                self.grid_packer.pack_into(self.buffer, offset, n)
            sms = self.gdev.attribute("MULTIPROCESSOR_COUNT")
            resident = sms * blocks_per_sm(self.function, bx * by * bz, cfg.shared_mem_bytes)
            gx, gy, gz = hardware_blocks(cfg.grid, resident, self.kernel_name), 1, 1
        factor = self.grid_x_factor
        if factor > 1:
            self.grid_packer.pack_into(self.buffer, self.grid_offset, gx)
            gx = (gx + factor - 1) // factor
        attrs, count = self.cooperative_attrs, 1
        if cfg.cluster is not None:  # the cluster shape as a launch attribute
            packed = _CLUSTER_ATTRIBUTE.pack(_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
                                             *cfg.cluster)
            if self.cooperative:  # both attributes, one after the other
                packed = _COOPERATIVE_ATTRIBUTE.pack(_CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
                                                     1) + packed
            attrs = self.cluster_attrs = ctypes.create_string_buffer(packed, len(packed))
            count = len(packed) // _CLUSTER_ATTRIBUTE.size
        cd.LAUNCH_CONFIG.pack_into(self.config_buffer, 0, gx, gy, gz, bx, by, bz,
                                   cfg.shared_mem_bytes, stream,
                                   0 if attrs is None else ctypes.addressof(attrs),
                                   0 if attrs is None else count)
        self.packed_cfg, self.packed_stream = cfg, stream

    def check(self, cfg: LaunchConfig) -> None:
        """`check_config` for the native path, once per config object; an equal config
        made anew is not checked again. Under the lock: it may raise the kernel's
        dynamic shared memory limit."""
        with self.lock:
            if cfg != self.checked_cfg:
                self.check_config(cfg)
            self.checked_cfg = cfg

    def launch(self, cfg: LaunchConfig, stream: int, values: list[Any]) -> None:
        """Launch with the machine values of the plan's parameters.

        The binders of runtime/fastpath.py inline these same steps."""
        if self.bf16_slots:
            for i in self.bf16_slots:
                values[i] = _bf16_bits(values[i])
        if self.constants:
            self.upload_constants(stream)
        if self.native is not None and cfg.cluster is None:  # the trampoline sets no attributes
            for i in self.f16_slots:
                values[i] = f16_bits(values[i])
            if cfg is not self.checked_cfg:
                self.check(cfg)
            err = self.native(self.native_address, cfg.dims, stream, *values)
            if err and self.make_context_current(err):
                err = self.native(self.native_address, cfg.dims, stream, *values)
        else:
            self.lock.acquire()  # not `with self.lock:`, which costs ~0.1 us more per launch
            try:
                if cfg is not self.packed_cfg or stream != self.packed_stream:
                    self.prepare(cfg, stream)
                self.packer.pack_into(self.buffer, 0, *values)
                if self.map_packer is not None:
                    self.map_packer.pack(values)
                err = self.launch_ex(self.config_address, self.fptr, self.params_address, None)
                if err:
                    err = self.retry_in_context(err)
            finally:
                self.lock.release()
        if err:
            raise launch_failure(err, self)
        if not self.active:
            self.gdev.activate(self)

    def make_context_current(self, err: int) -> bool:
        """After a launch failed with `err`: whether it was for want of a current context,
        which is now made current (the launch should be made again).

        A thread that never used CUDA has no current context; binders on a one-GPU
        machine do not test for one before each launch (`GPUDevice.enter` costs more
        than the launch path can spare), so the first launch there fails with
        CUDA_ERROR_INVALID_CONTEXT."""
        if err != cd.INVALID_CONTEXT:
            return False
        gdev = self.gdev
        cd.set_current_context(gdev.ctx)
        _tls.ctx = gdev.ctx_id
        return True

    def retry_in_context(self, err: int) -> int:
        """The ctypes launch again, if it failed for want of a current context (lock held)."""
        if not self.make_context_current(err):
            return err
        return self.launch_ex(self.config_address, self.fptr, self.params_address, None)

    def upload_constants(self, stream: int) -> None:
        """Copy each ox.ConstantArray the kernel reads into its module global, if stale."""
        key = (self.gdev.index, int(self.module))
        for array, ptr, size in self.constants:
            def upload(data: bytes, ptr: int = ptr, size: int = size) -> None:
                host = np.frombuffer(data, np.uint8)
                cd.memcpy_htod(ptr, host.ctypes.data, min(size, host.nbytes), stream)

            array.sync_to(key, upload, self.kernel_name)


def blocks_per_sm(function: Any, threads: int, dynamic_smem: int) -> int:
    """How many blocks of `function` one SM holds at once (the CUDA occupancy calculator,
    with its registers and static shared memory)."""
    return int(cd.call(cd.drv.cuOccupancyMaxActiveBlocksPerMultiprocessor, function, threads,
                       dynamic_smem, what="reading the kernel's occupancy"))


def launch_failure(err: Any, launcher: Launcher) -> Exception:
    if err == -1:  # the native trampoline's answer to a wrong number of values
        return InternalCompilerError(f"`{launcher.kernel_name}`: the launch packed a wrong "
                                     "number of arguments")
    text = cd.error_text(err)
    if "INVALID_VALUE" in text or "OUT_OF_RESOURCES" in text:
        return LaunchError(f"launching `{launcher.kernel_name}` on {launcher.gdev} failed: {text}")
    return cd.fail(err, f"launching `{launcher.kernel_name}` on {launcher.gdev}")


# ---------------------------------------------------------------------------
# Streams


def _stream_source(args: Sequence[Any], views: list[ArrayView | None]) -> str | None:
    modules = {type(a).__module__.split(".")[0] for a, v in zip(args, views, strict=True)
               if v is not None}
    if "torch" in modules:
        return "torch"
    if "cupy" in modules:
        return "cupy"
    return None


def _torch_stream(index: int) -> int:
    torch = sys.modules["torch"]
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return int(raw(index))
    return int(torch.cuda.current_stream(index).cuda_stream)


def stream_handle(stream: Any, source: str | None, index: int) -> int:
    """The raw CUstream for `stream=`; None means the current stream of the arrays' framework
    (torch, CuPy), else the legacy default stream. Anything that is no stream is an
    ArgumentError (runtime/streams.py)."""
    if stream is None:
        if source == "torch":
            return _torch_stream(index)
        if source == "cupy":
            return int(sys.modules["cupy"].cuda.get_current_stream().ptr)
        return 0
    return explicit_stream(stream)


# ---------------------------------------------------------------------------
# Launch


def no_binder(cfg: LaunchConfig, args: Any, stream: Any, device: Device) -> bool:
    """`Launchers.last` until a binder exists: declines every launch."""
    return False


class Launchers(dict):  # type: ignore[type-arg]
    """A kernel's `_oxide_launchers`: (device index, type key) -> Launcher, plus the binders
    of runtime/fastpath.py (dropped with it when a test resets a kernel): `fast` maps
    (device index, argument types or Const values) to one, `last` is the last one used,
    `native` its native twin, tried before it."""

    __slots__ = ("fast", "last", "native", "consts")

    def __init__(self, kernel: Any) -> None:
        super().__init__()
        self.fast: dict[Any, Any] = {}
        self.last: Any = no_binder
        self.native: Any = None  # the native twin of `last` (runtime/native_binder.py), if any
        self.consts = tuple(i for i, (kind, _) in enumerate(_param_kinds(kernel))
                            if kind == _CONST)  # the Const parameters' positions


def launch_gpu(kernel: Any, cfg: LaunchConfig, args: Sequence[Any], stream: Any,
               device: Device) -> Launcher:
    """Launch `kernel` on CUDA `device`: check, compile or load once, then launch.

    The general path: runtime/fastpath.py tries a cheaper one first. Returns the launcher.
    """
    gdev = gpu_devices._devices.get(device.index) or gpu_device(device.index)
    gdev.enter()
    if gdev.active:
        gdev.check_errors()
    key, views = read_args(kernel, args, device)
    launchers = kernel.__dict__.get("_oxide_launchers")
    if launchers is None:
        launchers = kernel.__dict__.setdefault("_oxide_launchers", Launchers(kernel))
    launcher = launchers.get((device.index, key))
    if launcher is None:
        plan = plan_for(kernel, (device, key), args, views, device)
        image = load_image(kernel, plan, gdev.arch)
        launcher = launchers[(device.index, key)] = Launcher(
            gdev, kernel.__name__, plan, image, _stream_source(args, views))
        launcher.block_shape = getattr(getattr(kernel, "options", None), "block", None)
        launcher.tile_block = getattr(kernel, "block_threads", None)  # a tile kernel's
        stack = stack_bytes(kernel, image.code)
        if stack:
            gdev.reserve_stack(stack)
            write_recursion_limit(launcher.module, image.code, gdev.stack_size)
    elif launcher.native is None:
        launcher.attach_native()  # the trampoline may have been built since
    plan = launcher.plan
    if plan.check_aliasing:
        check_aliasing(plan, views)
    handle = stream_handle(stream, launcher.stream_source, device.index)
    if plan.copies:
        copies: list[tuple[Any, Any, bool]] = []
        views = copy_host_arrays(plan, views, device, copies, handle)
        launcher.launch(cfg, handle, flatten(plan, args, views))
        gdev.synchronize()  # the copies are freed on return: the kernel must be done
        for host, dev_array, writable in copies:
            if writable:
                host[...] = dev_array.to_numpy()
        return launcher
    launcher.launch(cfg, handle, flatten(plan, args, views))
    return launcher
