"""Choosing where launches run: a CUDA device or the CPU.

`with ox.device("cpu"):` / `with ox.device(0):` set the device for a block of
code; `ox.set_device(...)` sets it for the calling thread. Without either, the
first CUDA GPU is used, or the CPU where there is none (said once, on stderr).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from oxide.errors import DeviceError
from oxide.runtime.config import as_int


@dataclass(frozen=True)
class Device:
    """`kind` is "cpu" or "cuda"; `index` the CUDA ordinal."""

    kind: str
    index: int = 0

    @property
    def is_cpu(self) -> bool:
        return self.kind == "cpu"

    def __str__(self) -> str:
        return "cpu" if self.is_cpu else f"cuda:{self.index}"


CPU = Device("cpu")
# One Device object per CUDA ordinal: the launch path's binders test the device by identity.
_GPUS: dict[int, Device] = {0: Device("cuda", 0)}


def _gpu(index: int) -> Device:
    dev = _GPUS.get(index)
    if dev is None:
        dev = _GPUS.setdefault(index, Device("cuda", index))
    return dev


class _State(threading.local):
    """Per thread: the `ox.device` blocks entered, the `ox.set_device` choice, and `current`,
    the innermost of the two (None: neither), kept up to date for the launch path."""

    def __init__(self) -> None:
        self.stack: list[Device] = []
        self.device: Device | None = None
        self.current: Device | None = None

    def update(self) -> None:
        current = self.current = self.stack[-1] if self.stack else self.device
        elsewhere = current is not None and (current.kind != "cuda" or current.index != 0)
        if elsewhere != (self.__dict__.get("elsewhere") is not None):
            self.elsewhere = _Elsewhere() if elsewhere else None


class _Elsewhere:
    """Held by a thread's `_State` while that thread chooses a device other than GPU 0;
    `only_gpu0` is 0 while any thread holds one. A thread that ends drops its state,
    and with it its token."""

    def __init__(self) -> None:
        global _elsewhere
        with _elsewhere_lock:
            only_gpu0.value = 0
            _elsewhere += 1

    def __del__(self) -> None:
        global _elsewhere
        with _elsewhere_lock:  # reentrant: a collection may run this inside __init__
            _elsewhere -= 1
            if _elsewhere == 0:
                only_gpu0.value = 1


# 1 while no thread chooses a device other than GPU 0 (`_Elsewhere`): native binders
# (runtime/native_binder.py) launch, on GPU 0, only while it holds.
only_gpu0 = ctypes.c_uint8(1)
_elsewhere = 0
_elsewhere_lock = threading.RLock()
_state = _State()
_announced = False
_default: Device | None = None  # what default_device() found (it does not change)
_several = False  # several CUDA GPUs: a launch with no device chosen follows its arrays


@functools.cache
def cuda_device_count() -> int:
    """How many CUDA GPUs the driver sees; 0 without a driver (never raises)."""
    if os.environ.get("OXIDE_FORCE_CPU") == "1":
        return 0
    try:
        from cuda.bindings import driver

        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return 0
        err, count = driver.cuDeviceGetCount()
        return int(count) if err == driver.CUresult.CUDA_SUCCESS else 0
    except Exception:  # no driver library, or bindings that do not load
        return 0


def parse_device(spec: object) -> Device:
    if isinstance(spec, Device):
        return CPU if spec.is_cpu else parse_device(spec.index)
    if spec == "cpu":
        return CPU
    index = _cuda_index(spec)
    if index is not None:
        count = cuda_device_count()
        if not 0 <= index < count:
            raise DeviceError(f"CUDA device {index} does not exist "
                              f"({count} CUDA device{'s' if count != 1 else ''} found)")
        return _gpu(index)
    raise DeviceError(f"unknown device {spec!r}: use \"cpu\", an int, or \"cuda:N\"")


def _cuda_index(spec: object) -> int | None:
    """The ordinal `spec` names: an integer (NumPy's too, not a bool), "cuda" (0) or
    "cuda:N"; None for anything else."""
    if isinstance(spec, str):
        if spec == "cuda":
            return 0
        head, _, tail = spec.partition(":")
        return int(tail) if head == "cuda" and tail.isdigit() else None
    return as_int(spec)


def default_device() -> Device:
    """The first CUDA GPU, else the CPU (said once); found once, then kept in `_default`."""
    global _announced, _default, _several
    if _default is not None:
        return _default
    if cuda_device_count() > 0:
        _several = cuda_device_count() > 1
        _default = _GPUS[0]
        return _default
    if not _announced:
        _announced = True
        print("oxide: no CUDA GPU found; kernels run on the CPU", file=sys.stderr)
    _default = CPU
    return CPU


def quiet_cpu_notice() -> None:
    """Count the no-GPU notice as given: for a caller that says it itself where it reports
    the device (`oxide run`'s `ran on CPU (no CUDA GPU found)`), so it is printed once."""
    global _announced
    _announced = True


def current_device() -> Device:
    return _state.current or _default or default_device()


def launch_device(args: tuple[object, ...]) -> Device:
    """Where a launch with no device chosen runs (no `device=`, `ox.device` or
    `ox.set_device`): the GPU its first GPU array lives on, on a machine with several (a
    torch tensor on cuda:1 launches on GPU 1); else the default device. The launch path
    calls this only where `_several` is set, so one GPU pays nothing for it."""
    for a in args:
        where = getattr(a, "__dlpack_device__", None)
        if where is None:
            continue
        try:
            kind, index = where()
        except Exception:  # not an array after all: the argument checks will say so
            continue
        if int(kind) == 2:  # kDLCUDA
            return _gpu(int(index))
    return current_device()


def set_device(spec: object) -> Device:
    """Select the device for launches from this thread."""
    dev = parse_device(spec)
    _state.device = dev
    _state.update()
    return dev


def device(spec: object) -> contextlib.AbstractContextManager[Device]:
    """Run the launches inside the block on `spec` ("cpu", 0, "cuda:1"); None selects
    nothing and yields the current device (so a function with an optional `device=`
    passes it straight on; with several GPUs, launches still follow their arrays).

    The device is checked here, not on entering the block, so a bad one fails at once.
    """
    if spec is None:
        return contextlib.nullcontext(current_device())
    return _selected(parse_device(spec))


@contextlib.contextmanager
def _selected(dev: Device) -> Iterator[Device]:
    state = _state
    state.stack.append(dev)
    state.update()
    try:
        yield dev
    finally:
        state.stack.pop()
        state.update()
