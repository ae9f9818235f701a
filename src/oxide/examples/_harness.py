"""What every shipped example shares: where it runs, moving data, timing, the result line.

Examples stay short by leaving the ceremony here; each one only builds its
inputs, launches its kernel and says what NumPy expects.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

import oxide as ox
from oxide.runtime.device import Device, cuda_device_count, current_device, parse_device
from oxide.runtime.device import device as use_device


@dataclass(frozen=True)
class ExampleResult:
    """The outcome of one example run: the check, one figure, and where it ran.

    `work / seconds` is the figure (bytes for memory-bound kernels, so GB/s;
    pixels or body interactions for compute-bound ones), in `unit` after
    scaling by 1e9 (`G` prefix) or 1e6 (`M`).
    """

    name: str
    passed: bool
    device: str
    problem: str
    seconds: float
    work: float
    unit: str
    detail: str = ""

    @property
    def status(self) -> str:
        return "PASS" if self.passed else "FAIL"

    @property
    def figure(self) -> str:
        scale = 1e6 if self.unit.startswith("M") else 1e9
        rate = self.work / self.seconds / scale if self.seconds > 0 else float("inf")
        return f"{self.seconds * 1e3:.3f} ms, {rate:,.2f} {self.unit}"

    def __str__(self) -> str:
        extra = f"  ({self.detail})" if self.detail else ""
        return f"{self.status} {self.name}: {self.problem}; {self.figure} on {self.device}{extra}"


def resolve(spec: str | int) -> Device:
    """`"cpu"`, `0`, `"0"` (as a command line gives it) or `"cuda:1"` as a Device.

    DeviceError when there is no such device.
    """
    return parse_device(int(spec) if isinstance(spec, str) and spec.isdigit() else spec)


@contextlib.contextmanager
def running_on(spec: str | int | None) -> Iterator[Device]:
    """Launches inside run on `spec` ("cpu", a GPU ordinal), or oxide's default device."""
    if spec is None:
        yield current_device()
        return
    with use_device(resolve(spec)) as dev:
        yield dev


def describe(dev: Device) -> str:
    """A device as a person reads it: `CPU (no CUDA GPU found)`, `GPU 0: NVIDIA H200 (sm_90)`."""
    if dev.is_cpu:
        return "CPU" if cuda_device_count() else "CPU (no CUDA GPU found)"
    from oxide.runtime.gpu import gpu_device

    gpu = gpu_device(dev.index)
    return f"GPU {dev.index}: {gpu.name} ({gpu.arch})"


def pick_size(dev: Device, size: int | None, cpu: int, gpu: int) -> int:
    """The user's size, else one that finishes in well under a second on this device."""
    if size is not None:
        if size < 1:
            raise ValueError(f"size must be positive, got {size}")
        return size
    return cpu if dev.is_cpu else gpu


def to_device(dev: Device, *arrays: np.ndarray) -> list[Any]:
    """NumPy arrays as the launch should see them: in place on the CPU, copied once to a GPU.

    Copying up front (rather than letting each launch copy NumPy arrays in and
    out) keeps transfers out of the timed launches.
    """
    if dev.is_cpu:
        return list(arrays)
    return [ox.to_device(a, device=dev) for a in arrays]


def to_numpy(array: Any) -> np.ndarray:
    """A launch's output back on the host."""
    return array if isinstance(array, np.ndarray) else array.to_numpy()


def time_launch(dev: Device, launch: Callable[[], None], repeats: int | None = None) -> float:
    """Seconds per launch: the best of 3 rounds of back-to-back launches, after a warm-up.

    The warm-up compiles. Launching back to back and synchronizing once per round
    measures the kernel rather than the launch latency, and the best round is the
    least disturbed by the machine: the figure a reader can compare across runs.
    """
    launch()
    ox.synchronize(dev)
    n = repeats or (3 if dev.is_cpu else 20)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(n):
            launch()
        ox.synchronize(dev)
        best = min(best, (time.perf_counter() - start) / n)
    return best


def check_arch(kernel: Any, arch: str | None, *args: Any) -> str:
    """Compiles `kernel` for `arch` too (PTX, then a cubin through nvJitLink; no GPU needed).

    This is what `oxide run NAME --arch sm_90` adds on a machine without that
    GPU: proof that the example's exact specialization builds for it.
    """
    if arch is None:
        return ""
    ck = kernel.compile(*args, arch=arch)
    return f"cubin for {arch}: {len(ck.cubin):,} bytes"


def join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)
