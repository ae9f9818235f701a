"""Choosing where launches run: a CUDA device or the CPU.

`with ox.device("cpu"):` / `with ox.device(0):` set the device for a block of
code; `ox.set_device(...)` sets it for the calling thread. Without either, the
first CUDA GPU is used, or the CPU where there is none (said once, on stderr).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from oxide.errors import DeviceError


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
FIRST_GPU = Device("cuda", 0)  # the default, made once: current_device() is on the launch path


class _State(threading.local):
    """Per thread: the `ox.device` blocks entered and the `ox.set_device` choice."""

    def __init__(self) -> None:
        self.stack: list[Device] = []
        self.device: Device | None = None


_state = _State()
_announced = False


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
        return spec
    if spec == "cpu":
        return CPU
    if isinstance(spec, str) and spec.startswith("cuda"):
        spec = int(spec.split(":")[1]) if ":" in spec else 0
    if isinstance(spec, int) and not isinstance(spec, bool):
        count = cuda_device_count()
        if not 0 <= spec < count:
            raise DeviceError(f"CUDA device {spec} does not exist "
                              f"({count} CUDA device{'s' if count != 1 else ''} found)")
        return Device("cuda", spec)
    raise DeviceError(f"unknown device {spec!r}: use \"cpu\", an int, or \"cuda:N\"")


def default_device() -> Device:
    global _announced
    if cuda_device_count() > 0:
        return FIRST_GPU
    if not _announced:
        _announced = True
        print("oxide: no CUDA GPU found; kernels run on the CPU", file=sys.stderr)
    return CPU


def current_device() -> Device:
    state = _state  # on every launch: plain attributes, no getattr defaults
    if state.stack:
        return state.stack[-1]
    chosen = state.device
    return chosen if chosen is not None else default_device()


def set_device(spec: object) -> Device:
    """Select the device for launches from this thread."""
    dev = parse_device(spec)
    _state.device = dev
    return dev


def device(spec: object) -> contextlib.AbstractContextManager[Device]:
    """Run the launches inside the block on `spec` ("cpu", 0, "cuda:1").

    The device is checked here, not on entering the block, so a bad one fails at once.
    """
    return _selected(parse_device(spec))


@contextlib.contextmanager
def _selected(dev: Device) -> Iterator[Device]:
    stack = _state.stack
    stack.append(dev)
    try:
        yield dev
    finally:
        stack.pop()
