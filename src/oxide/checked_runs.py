"""A checked, timed run of a kernel, as the shipped examples report one (`ox.testing`).

The examples used to keep this in a private module that every one of them imported, so
`oxide show vecadd > mine.py` gave a file that ran only inside oxide's own package. These
are the public pieces a script needs to do what an example does, re-exported by
`oxide.testing`: time the launches, say where they ran, prove the kernel builds for a
GPU architecture, and report PASS or FAIL with a figure (`oxide run FILE.py` prints a
`RunResult` that `main()` returns as it prints an example's).

    with ox.device(device) as dev:
        seconds = ox.testing.seconds_per_launch(lambda: vecadd[cfg](a, b, out), dev)
        return ox.testing.RunResult("vecadd", ok, ox.testing.describe_device(dev),
                                    f"n = {n:,} f32", seconds, work=12 * n, unit="GB/s")
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oxide.runtime.device import cuda_device_count, current_device, parse_device
from oxide.runtime.launch import synchronize


@dataclass(frozen=True)
class RunResult:
    """The outcome of one checked, timed run: PASS/FAIL, one figure, and where it ran.

    `work / seconds` is the figure: bytes for memory-bound kernels (a `unit` of "GB/s"),
    pixels or interactions for compute-bound ones, scaled by 1e6 for a unit that starts
    with "M" and by 1e9 otherwise. `str()` is the line `oxide run` prints.
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
        """`0.490 ms, 25.70 GB/s`: the time per launch and the rate."""
        scale = 1e6 if self.unit.startswith("M") else 1e9
        rate = self.work / self.seconds / scale if self.seconds > 0 else float("inf")
        return f"{self.seconds * 1e3:.3f} ms, {rate:,.2f} {self.unit}"

    def __str__(self) -> str:
        extra = f"  ({self.detail})" if self.detail else ""
        return f"{self.status} {self.name}: {self.problem}; {self.figure} on {self.device}{extra}"


def _gpu_of(device: Any) -> tuple[Any, Any]:
    """(the Device, its GPUDevice or None for the CPU): the current device by default
    (`"cpu"`, an ordinal or a Device otherwise)."""
    dev = current_device() if device is None else parse_device(device)
    if dev.is_cpu:
        return dev, None
    from oxide.runtime.gpu import gpu_device

    return dev, gpu_device(dev.index)


def describe_device(device: Any = None) -> str:
    """A device as a person reads it: `CPU (no CUDA GPU found)`, `GPU 0: NVIDIA H200
    (sm_90)`; the current one by default (`"cpu"`, an ordinal or a Device otherwise)."""
    dev, gpu = _gpu_of(device)
    if gpu is None:
        return "CPU" if cuda_device_count() else "CPU (no CUDA GPU found)"
    return f"GPU {dev.index}: {gpu.name} ({gpu.arch})"


def device_arch(device: Any = None) -> str | None:
    """The GPU architecture of a device (`"sm_90"`), None for the CPU; the current one by
    default. Examples pick their tile shapes by it."""
    gpu = _gpu_of(device)[1]
    return None if gpu is None else gpu.arch  # type: ignore[no-any-return]


def seconds_per_launch(launch: Callable[[], Any], device: Any = None,
                       repeats: int | None = None) -> float:
    """Seconds per call of `launch`: the best of 3 rounds of `repeats` back-to-back calls
    (default 3 on the CPU, 20 on a GPU), after one call that compiles.

    Back to back, with one synchronization per round, it measures the kernel's throughput
    rather than the launch latency, and the best round is the one the machine disturbed
    least: a figure comparable across runs. (`do_bench` instead times each call apart,
    from a cold L2, as Triton does.)
    """
    dev = current_device() if device is None else parse_device(device)
    launch()
    synchronize(dev)
    n = repeats or (3 if dev.is_cpu else 20)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(n):
            launch()
        synchronize(dev)
        best = min(best, (time.perf_counter() - start) / n)
    return best


def check_arch(kernel: Any, arch: str | None, *args: Any) -> str:
    """Compile `kernel` for `args` (types or example values) and GPU architecture `arch`
    too, to PTX and then a cubin (no GPU needed); "cubin for sm_90: N bytes", or "" when
    `arch` is None. Proof, on a machine without that GPU, that the kernel builds for it."""
    if arch is None:
        return ""
    ck = kernel.compile(*args, arch=arch)
    return f"cubin for {ck.arch}: {len(ck.cubin):,} bytes"
