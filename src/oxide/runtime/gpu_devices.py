"""CUDA devices as oxide uses them, and their memory: below DeviceArray and the launchers.

Per device (`GPUDevice`): its primary context, architecture and limits, a pool of
error records in mapped pinned memory, and the launchers run since the last full
synchronization (whose records the host reads). The memory functions serve
`ox.DeviceArray` (runtime/arrays.py); the launchers (runtime/gpu.py) build on both, so
this module imports neither (docs/architecture.md, "Layers"). Every name is also
importable from `oxide.runtime.gpu`, as before.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from oxide.errors import DeviceError, LaunchError
from oxide.runtime import cuda_driver as cd
from oxide.runtime.device import cuda_device_count
from oxide.runtime.kernel_errors import ErrorRecord
from oxide.runtime.native_binder import RecordTable

_TOO_LARGE = "CUDA_ERROR_INVALID_VALUE"  # cuCtxSetLimit: beyond the per-thread maximum

_RECORD_BYTES = 32
_POOL_BYTES = 4096

_devices: dict[int, GPUDevice] = {}
_devices_lock = threading.Lock()


class _ThreadState(threading.local):
    def __init__(self) -> None:
        self.ctx: int | None = None  # the context oxide last made current on this thread


_tls = _ThreadState()


# ---------------------------------------------------------------------------
# Devices


class RecordPool:
    """Error records in mapped pinned memory: one 32-byte slot per launcher, never freed."""

    def __init__(self) -> None:
        self._free: list[tuple[int, int]] = []

    def take(self) -> tuple[ErrorRecord, int]:
        """A cleared record and its device address."""
        if not self._free:
            host, dev = cd.host_alloc_mapped(_POOL_BYTES)
            ctypes.memset(host, 0, _POOL_BYTES)
            self._free = [(host + i, dev + i) for i in range(_POOL_BYTES - _RECORD_BYTES, -1,
                                                              -_RECORD_BYTES)]
        host, dev = self._free.pop()
        return ErrorRecord(host), dev


class GPUDevice:
    """One CUDA device as oxide uses it (created on first use, kept for the process)."""

    def __init__(self, index: int) -> None:
        cd.init()
        self.index = index
        self.handle = cd.device_handle(index)
        self.ctx = cd.retain_primary_context(self.handle)
        self.ctx_id = int(self.ctx)
        self.single = cuda_device_count() == 1
        self.enter()
        attr = self.attribute
        self.arch = f"sm_{attr('COMPUTE_CAPABILITY_MAJOR')}{attr('COMPUTE_CAPABILITY_MINOR')}"
        self.name = cd.device_name(self.handle)
        self.max_threads = attr("MAX_THREADS_PER_BLOCK")
        self.max_block = (attr("MAX_BLOCK_DIM_X"), attr("MAX_BLOCK_DIM_Y"), attr("MAX_BLOCK_DIM_Z"))
        self.max_grid = (attr("MAX_GRID_DIM_X"), attr("MAX_GRID_DIM_Y"), attr("MAX_GRID_DIM_Z"))
        self.smem_default = attr("MAX_SHARED_MEMORY_PER_BLOCK")
        self.smem_optin = attr("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
        self.records = RecordPool()
        self.active: list[Any] = []  # runtime/gpu.py Launchers launched since the last full sync
        # Their records' i32 views, for the launch path's per-launch check. Both lists
        # are changed in place only: binders hold them.
        self.active_records: list[Any] = []
        # Their records' addresses, for native binders (runtime/native_binder.py).
        self.record_table = RecordTable()
        self._record_addresses: Any = None  # the array record_table points into
        self.lock = threading.Lock()
        self.stack_size = 0  # the context's stack limit as last read (reserve_stack)

    def attribute(self, name: str) -> int:
        return cd.device_attribute(self.handle, name)

    def reserve_stack(self, nbytes: int) -> None:
        """Raise the context's stack per thread (CU_LIMIT_STACK_SIZE) to `nbytes` if it is
        lower; never lower it (a kernel loaded earlier may need it). Called once per loaded
        kernel that needs a stack (recursive @ox.funcs), so other launches pay nothing.
        The driver reserves the stack for every thread the GPU holds at once, and waits
        for the work queued on the context before changing it.

        A stack beyond the device's per-thread maximum (CUDA_ERROR_INVALID_VALUE: 523712
        bytes, 512 KiB less 576, on an H200 with driver 580) is clamped to that maximum,
        found by bisection: the depth guard then counts with the stack the thread has.
        One the device's memory cannot hold is a LaunchError naming the bytes."""
        if nbytes <= self.stack_size:
            return
        self.enter()
        current = cd.context_limit("STACK_SIZE")
        if current < nbytes:
            error = cd.set_context_limit("STACK_SIZE", nbytes)
            if error == _TOO_LARGE:
                self._largest_stack(current, nbytes)
            elif error:
                raise self._stack_error(nbytes, error)
            current = cd.context_limit("STACK_SIZE")
        self.stack_size = current

    def _largest_stack(self, fits: int, too_large: int) -> None:
        """Set the largest stack from `fits` up (which the context has) below
        `too_large` that the driver takes, to 16 bytes (its granularity)."""
        while too_large - fits > 16:
            mid = (fits + too_large) // 2 // 16 * 16
            error = cd.set_context_limit("STACK_SIZE", mid)
            if error is None:
                fits = mid
            elif error == _TOO_LARGE:
                too_large = mid
            else:
                raise self._stack_error(mid, error)
        if cd.set_context_limit("STACK_SIZE", fits) is not None:
            raise DeviceError(f"{self}: could not set the stack back to {fits} bytes")

    def _stack_error(self, nbytes: int, error: str) -> LaunchError:
        threads = (self.attribute("MULTIPROCESSOR_COUNT")
                   * self.attribute("MAX_THREADS_PER_MULTIPROCESSOR"))
        return LaunchError(
            f"{self} could not give each thread {nbytes} bytes of stack for recursive "
            f"@ox.funcs ({error}): the driver reserves it for all {threads} threads the GPU "
            f"holds at once, {nbytes * threads / 2**30:.1f} GiB. Ask for less with "
            "`@ox.kernel(stack_size=...)` (depth x frame bytes, plus a margin), or free "
            "device memory")

    def __str__(self) -> str:
        return f"cuda:{self.index} ({self.name})"

    def enter(self) -> None:
        """Make this device's primary context current on the calling thread."""
        if self.single and _tls.ctx == self.ctx_id:
            return  # one device: only oxide or its own kind (torch, CuPy) set contexts here
        if cd.current_context() != self.ctx_id:
            cd.set_current_context(self.ctx)
        _tls.ctx = self.ctx_id

    def activate(self, launcher: Any) -> None:
        with self.lock:
            if not launcher.active:
                launcher.active = True
                self.active.append(launcher)
                self.active_records.append(launcher.rec_i32)
                self._active_changed()

    def check_errors(self) -> None:
        """Raise the error a kernel launched on this device reported, if any (no sync)."""
        for launcher in self.active:
            if launcher.rec_i32[1]:
                launcher.record.raise_if_failed(launcher.kernel_name, launcher.sites)

    def synchronize(self) -> None:
        """Wait for all work on the device, then raise any reported kernel error."""
        self.enter()
        launched = list(self.active)  # what the synchronization covers
        try:
            cd.synchronize_context()
        except DeviceError as exc:
            names = ", ".join(sorted({la.kernel_name for la in self.active})) or "none"
            raise DeviceError(f"{exc} (on {self}; oxide kernels launched since the last "
                              f"synchronization: {names}). A device fault leaves the CUDA "
                              "context unusable: restart the process.") from None
        self.check_errors()
        with self.lock:
            for launcher in launched:
                launcher.active = False
                if launcher.native_context is not None:
                    launcher.native_context.active = 0
            self.active[:] = [la for la in self.active if la.active]
            self.active_records[:] = [la.rec_i32 for la in self.active]
            self._active_changed()

    def _active_changed(self) -> None:
        """Mirror `active` where native binders read it: each launcher's context flag,
        and the table of record addresses (a new array: the GIL is held, and the native
        binders read it only while they hold it)."""
        addresses = (ctypes.c_uint64 * max(len(self.active), 1))(
            *[la.record.address for la in self.active])
        self._record_addresses = addresses
        self.record_table.addresses = ctypes.addressof(addresses)
        self.record_table.count = len(self.active)
        for launcher in self.active:
            if launcher.native_context is not None:
                launcher.native_context.active = 1


def gpu_device(index: int) -> GPUDevice:
    """The GPUDevice for CUDA ordinal `index`, initialized on first use."""
    dev = _devices.get(index)
    if dev is None:
        with _devices_lock:
            dev = _devices.get(index)
            if dev is None:
                dev = _devices[index] = GPUDevice(index)
    return dev


def synchronize_device(index: int) -> None:
    """`ox.synchronize()` on a GPU: wait for the device, raise reported kernel errors."""
    dev = _devices.get(index)
    if dev is not None:
        dev.synchronize()


# ---------------------------------------------------------------------------
# Memory (for DeviceArray)


def allocate_device_memory(index: int, nbytes: int) -> int:
    gpu_device(index).enter()
    return cd.mem_alloc(nbytes)


def free_device_memory(index: int, ptr: int) -> None:
    """Free an allocation; quiet at interpreter exit, when the driver may be gone.

    A finalizer calls it, at any allocation of the thread: it never makes a GPUDevice
    (one may be under construction in this very thread, holding `_devices_lock`). The
    device an allocation came from exists, unless a test reset the devices."""
    dev = _devices.get(index)
    if dev is None:
        return
    try:
        dev.enter()
        cd.mem_free(ptr)
    except Exception:  # a finalizer must not raise; the process is exiting or the context died
        pass


def copy_to_device(index: int, ptr: int, host: np.ndarray, stream: int | None) -> None:
    gpu_device(index).enter()
    cd.memcpy_htod(ptr, host.ctypes.data, host.nbytes, stream or 0)
    if stream is None:
        cd.synchronize_stream(0)


def copy_to_host(index: int, out: np.ndarray, ptr: int) -> None:
    """Synchronize the device (a sync point for kernel errors), then copy."""
    dev = gpu_device(index)
    dev.synchronize()
    cd.memcpy_dtoh(out.ctypes.data, ptr, out.nbytes, 0)


def zero_device_memory(index: int, ptr: int, nbytes: int) -> None:
    gpu_device(index).enter()
    cd.memset_zero(ptr, nbytes, 0)
    cd.synchronize_stream(0)


def time_on_stream(index: int, fn: Callable[[], Any], flush: tuple[int, int] | None,
                   runs: int) -> list[float]:
    """Milliseconds of each of `runs` calls of `fn` on the legacy default stream, where
    oxide launches by default: a pair of events around each call, after zeroing the
    `flush` buffer (device pointer, bytes) so that every run starts with a cold L2."""
    gpu_device(index).enter()
    pairs = [(cd.event_create(), cd.event_create()) for _ in range(runs)]
    try:
        for start, end in pairs:
            if flush is not None:
                cd.memset_zero(flush[0], flush[1], 0)
            cd.event_record(start, 0)
            fn()
            cd.event_record(end, 0)
        synchronize_device(index)  # reports a kernel's error before any time is read
        return [cd.event_elapsed_ms(start, end) for start, end in pairs]
    finally:
        for start, end in pairs:
            cd.event_destroy(start)
            cd.event_destroy(end)
