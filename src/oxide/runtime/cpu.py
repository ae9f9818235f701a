"""Launching kernels on the CPU: check arguments, JIT once, run the compiled driver.

The kernel's own `<symbol>_launch` (codegen/cpu_driver.py) runs a range of
blocks; no Python runs per thread. Large grids are split into contiguous block
ranges across OS threads (ctypes releases the GIL during the call). NumPy
arrays are used in place. Everything a relaunch needs that depends only on the
argument types (the specialization, its JIT-compiled code, the argument
packer) is cached per binding plan, so a relaunch only packs values.

>>> with ox.device("cpu"):                          # doctest: +SKIP
...     scale[ox.LaunchConfig.for_num_elems(n)](x, 2.5, y)
"""

from __future__ import annotations

import ctypes
import functools
import os
import struct
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from oxide import types as T
from oxide.codegen.persistent_grid import GRID_PARAMS, hardware_blocks, is_persistent
from oxide.codegen.switches import codegen_switches
from oxide.codegen.switches import hopper_on_cpu as _hopper_on_cpu
from oxide.codegen.warp_roles import extra_threads
from oxide.errors import ArgumentError, LaunchError
from oxide.progress import activity
from oxide.runtime.args import Plan, bind
from oxide.runtime.config import LaunchConfig
from oxide.runtime.device import CPU
from oxide.runtime.kernel_errors import ErrorRecord
from oxide.runtime.operand_maps import cpu_descriptions, value_starts
from oxide.runtime.streams import stream_handle
from oxide.runtime.witness_rules import check_block_shape, check_witness_config

# Splitting a grid across OS threads pays off only for enough work.
_PARALLEL_MIN_THREADS = 1 << 16
_SLOT_SIZES = {"e": 2, "H": 2, "f": 4, "i": 4, "I": 4, "d": 8, "q": 8, "Q": 8, "b": 1,
               "B": 1, "?": 1, "h": 2}
_CFG = struct.Struct("<9q")
# Every CUDA GPU's limits (sm_80 and later): a launch the CPU accepts also runs on a GPU.
_MAX_BLOCK = (1024, 1024, 64)
_MAX_GRID = ((1 << 31) - 1, 65535, 65535)
# A kernel calling ox.grid.sync() runs each block on an OS thread of its own, all at once
# (codegen/grid_sync.py); a GPU holds about this many blocks at once (132 SMs x 8).
MAX_GRID_SYNC_BLOCKS = 1024
# Dynamic shared memory per block: an sm_90 GPU's opt-in maximum (227 KiB; sm_80 has 163 KiB).
# A launch asking for more fails on the GPU, so it fails on the CPU too.
MAX_DYNAMIC_SHARED = 227 * 1024
_local = threading.local()


class _Entry:
    """One specialization ready to run: its host code, what its errors and launch rules
    need, and how to pack its arguments."""

    __slots__ = ("host", "object_code", "sites", "thread_index_ranks", "launch", "packer",
                 "bf16_slots", "writable", "prints", "constants", "symbol", "grid_counter",
                 "grid_lock", "operand_maps", "map_starts", "extra_threads", "persistent")

    def __init__(self, kernel: Any, plan: Plan) -> None:
        constants: list[tuple[str, Any]] = []
        self.operand_maps: tuple[Any, ...] = ()
        if not _from_disk_cache(self, kernel, plan):
            with activity(f"compiling `{kernel.__name__}` for the CPU"):  # to machine code
                ck = kernel.compile(*plan.signature, target="cpu")
                self.host, self.sites = ck.host, list(ck.sites)
            self.symbol = ck.name
            self.object_code = ck.host_object[0]
            self.thread_index_ranks = tuple(ck.thread_index_ranks)
            self.operand_maps = tuple(getattr(ck, "operand_maps", ()))
            constants = list(ck.constants)
            _to_disk_cache(kernel, plan, ck)
        self.launch = self.host.launch
        # a tile kernel walking its logical grid (codegen/persistent_grid.py)
        self.persistent = is_persistent(self.symbol, self.object_code)
        # One 8-byte little-endian slot per machine argument (the driver's `args`), then
        # a persistent kernel's logical grid, then the address of each hidden tensor map's
        # description (OXIDE_TILE_CPU_HOPPER=1)
        self.packer = struct.Struct("<" + "".join(f + "x" * (8 - _SLOT_SIZES[f])
                                                  for f in plan.formats)
                                    + "I4x" * (GRID_PARAMS if self.persistent else 0)
                                    + "Q" * len(self.operand_maps))
        self.map_starts = value_starts(plan.params)
        # a tile kernel's producer warp group: threads past the ones a launch names
        self.extra_threads = extra_threads(self.symbol, self.object_code)
        self.bf16_slots = [i for i, dt in enumerate(plan.dtypes) if dt.name == "bf16"]
        self.writable = [i for i, p in enumerate(plan.params) if p.kind == "array" and p.writable]
        # stdout is flushed around a launch that prints (libc's buffer and Python's)
        self.prints = b"printf" in self.object_code
        engine = self.host.engine
        self.constants = [(arr, engine.get_global_value_address(symbol))
                          for symbol, arr in constants]
        # ox.grid.sync(): the kernel's barrier counter (0 for other kernels)
        from oxide.codegen.grid_sync import counter_symbol

        self.grid_counter = engine.get_global_value_address(counter_symbol(self.symbol))
        self.grid_lock = threading.Lock() if self.grid_counter else None


def _cache_key(kernel: Any, plan: Plan) -> str | None:
    """The disk-cache key of `plan`'s host code on this CPU (None: not cacheable)."""
    from oxide.kernel_types import KernelBase

    if not isinstance(kernel, KernelBase) or _hopper_on_cpu():  # (a test mode's code)
        return None
    from oxide.codegen.host import host_target_id
    from oxide.runtime import cache

    return cache.entry_key(kernel, plan.signature, host_target_id())


def _arg_sizes(plan: Plan) -> tuple[int, ...]:
    return tuple(struct.calcsize(f) for f in plan.formats) + (8,)


def _from_disk_cache(entry: _Entry, kernel: Any, plan: Plan) -> bool:
    """Fill `entry` from a cached object file; False on a miss (the caller compiles)."""
    key = _cache_key(kernel, plan)
    if key is None:
        return False
    from oxide.codegen.host import load_object
    from oxide.runtime import cache

    data = cache.load_entry(key, _arg_sizes(plan))
    if data is None:
        return False
    entry.host = load_object(data.cubin, data.symbol)
    entry.symbol = data.symbol.removesuffix("_launch")
    entry.object_code = data.cubin
    entry.sites = cache.cached_sites(data)
    entry.thread_index_ranks = data.thread_index_ranks
    return True


def _to_disk_cache(kernel: Any, plan: Plan, ck: Any) -> None:
    key = _cache_key(kernel, plan)
    if key is not None:
        from oxide.runtime import cache

        cache.store_entry(key, ck, f"{ck.name}_launch", _arg_sizes(plan), 1,
                          ck.thread_index_ranks, ck.sites, ck.host_object[0])


def _entry(kernel: Any, plan: Plan) -> _Entry:
    cache = kernel.__dict__.setdefault("_oxide_cpu_entries", {})
    key = (plan, codegen_switches())  # a switch changes a tile kernel's code
    entry = cache.get(key)
    if entry is None:
        entry = cache[key] = _Entry(kernel, plan)
    return entry


def launch_cpu(kernel: Any, cfg: LaunchConfig, args: tuple[Any, ...], stream: Any = None
               ) -> None:
    """Run `kernel` over `cfg` on the CPU; raises what the kernel reported, after it ran.
    The CPU has no streams, but a `stream` a GPU would refuse is refused here too, after
    the arguments (as the GPU runtime checks them)."""
    _check_config(kernel, cfg)
    bound = bind(kernel, args, CPU)
    if stream is not None:
        stream_handle(stream)
    entry = _entry(kernel, bound.plan)
    if entry.thread_index_ranks:
        check_witness_config(kernel.__name__, entry.thread_index_ranks, cfg,
                             getattr(kernel, "block_threads", None))
    for i in entry.writable:
        a = args[i]
        if isinstance(a, np.ndarray) and not a.flags.writeable:
            raise ArgumentError(f"`{kernel.params[i].name}` is a "
                                f"{bound.plan.params[i].spec!r} but the array is read-only")
    values = bound.values
    hidden: tuple[int, ...] = ()
    if entry.persistent:  # the logical grid; at most one block per worker (and 2) walk it
        hidden = cfg.grid
        blocks = hardware_blocks(cfg.grid, max(2, _workers()[1]), kernel.__name__)
        cfg = LaunchConfig((blocks, 1, 1), cfg.block, cfg.shared_mem_bytes)
    if entry.bf16_slots:
        values = list(values)
        for i in entry.bf16_slots:
            values[i] = int(np.array(values[i], T.bf16.numpy).view(np.uint16))
    if entry.operand_maps:  # OXIDE_TILE_CPU_HOPPER=1: the hidden maps' descriptions
        descriptions = cpu_descriptions(entry.operand_maps, entry.map_starts, values)
        packed = entry.packer.pack(*values, *hidden,
                                   *(ctypes.addressof(d) for d in descriptions))
    else:
        packed = entry.packer.pack(*values, *hidden)
    if entry.extra_threads:  # the producer warp group's threads (tile/producer.py)
        (bx, by, bz) = cfg.block
        cfg = LaunchConfig(cfg.grid, (bx + entry.extra_threads, by, bz),
                           cfg.shared_mem_bytes)
    for arr, address in entry.constants:
        arr.sync_to(("cpu", address), functools.partial(_upload, address), kernel.__name__)
    record = _record()
    if entry.prints:
        sys.stdout.flush()
    if entry.grid_counter:
        _run_grid(entry, kernel.__name__, packed, record.address, cfg)
    else:
        _run(entry.launch, packed, record.address, cfg)
    if entry.prints:
        _libc().fflush(None)
    record.raise_if_failed(kernel.__name__, entry.sites)


def _check_config(kernel: Any, cfg: LaunchConfig) -> None:
    if cfg.cluster is not None:  # the CPU runs blocks one by one: no cluster shares memory
        from oxide.errors import TargetError

        raise TargetError(f"`{kernel.__name__}`: a launch with cluster={cfg.cluster} runs "
                          "only on the GPU (sm_90): the CPU runs each block as a cluster of "
                          "one", hint="launch without cluster= on the CPU (ox.cluster.* "
                                      "then reads rank 0 of 1), or on an H100/H200")
    check_block_shape(kernel.__name__, kernel.options.block, cfg)
    limit = kernel.options.max_threads
    if limit is not None and cfg.threads_per_block > limit:
        raise LaunchError(f"`{kernel.__name__}` runs at most {limit} threads per block "
                          f"(max_threads={limit}); block {cfg.block} has "
                          f"{cfg.threads_per_block}")
    for what, dims, limits in (("block", cfg.block, _MAX_BLOCK), ("grid", cfg.grid, _MAX_GRID)):
        for axis, n, top in zip("xyz", dims, limits, strict=True):
            if n > top:
                raise LaunchError(f"{what}.{axis} = {n} exceeds the limit of {top} "
                                  "(as on every CUDA GPU)")
    shm = cfg.shared_mem_bytes
    if shm > MAX_DYNAMIC_SHARED:
        raise LaunchError(f"`{kernel.__name__}` asks for {shm} bytes of dynamic shared memory; "
                          f"a GPU block has at most {MAX_DYNAMIC_SHARED} (sm_90), and the CPU "
                          "keeps to the GPU's limits")


def _upload(address: int, data: bytes) -> None:
    ctypes.memmove(address, data, len(data))


def _run(launch: Any, packed: bytes, err: int, cfg: LaunchConfig) -> None:
    (gx, gy, gz), (bx, by, bz) = cfg.grid, cfg.block
    blocks = gx * gy * gz
    head = (gx, gy, gz, bx, by, bz, cfg.shared_mem_bytes)
    pool, n = _workers()
    if pool is None or blocks < 2 or blocks * bx * by * bz < _PARALLEL_MIN_THREADS:
        launch(packed, err, _CFG.pack(*head, 0, blocks))
        return
    bounds = [blocks * k // n for k in range(n + 1)]
    futures = [pool.submit(launch, packed, err, _CFG.pack(*head, bounds[k], bounds[k + 1]))
               for k in range(1, n)]
    launch(packed, err, _CFG.pack(*head, bounds[0], bounds[1]))
    for f in futures:
        f.result()


def _run_grid(entry: _Entry, name: str, packed: bytes, err: int, cfg: LaunchConfig) -> None:
    """A kernel with `ox.grid.sync()`: every block at once, each on an OS thread of its own,
    so that each can wait at the grid barrier for the others (codegen/grid_sync.py).

    The counter starts at 0 for each launch (a launch that failed a check may leave it
    anywhere), and one launch of the kernel runs at a time, as on the GPU, where
    overlapping launches would share it."""
    (gx, gy, gz), (bx, by, bz) = cfg.grid, cfg.block
    blocks = gx * gy * gz
    if blocks > MAX_GRID_SYNC_BLOCKS:
        raise LaunchError(
            f"`{name}` calls ox.grid.sync(), so all its blocks must run at once; the CPU runs "
            f"at most {MAX_GRID_SYNC_BLOCKS} (one OS thread each), the grid has {blocks}: "
            "launch fewer blocks and loop over the work in the kernel (a grid-stride loop)")
    head = (gx, gy, gz, bx, by, bz, cfg.shared_mem_bytes)
    assert entry.grid_lock is not None
    with entry.grid_lock:
        ctypes.c_uint32.from_address(entry.grid_counter).value = 0
        threads = [threading.Thread(target=entry.launch,
                                    args=(packed, err, _CFG.pack(*head, b, b + 1)),
                                    name=f"oxide-grid-{b}", daemon=True)
                   for b in range(1, blocks)]
        for t in threads:
            t.start()
        entry.launch(packed, err, _CFG.pack(*head, 0, 1))
        for t in threads:
            t.join()


@functools.cache
def _workers() -> tuple[ThreadPoolExecutor | None, int]:
    """A pool of (cores - 1) threads, and how many threads a split launch uses in all."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if not n or n < 2:
        return None, 1
    return ThreadPoolExecutor(max_workers=n - 1, thread_name_prefix="oxide-cpu"), n


def _record() -> ErrorRecord:
    """This thread's error record (launches from several Python threads stay apart)."""
    rec = getattr(_local, "record", None)
    if rec is None:
        rec = _local.record = ErrorRecord.host()
    return rec


@functools.cache
def _libc() -> Any:
    return ctypes.CDLL(None)
