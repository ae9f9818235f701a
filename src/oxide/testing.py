"""Timing and checking kernels: `ox.testing.do_bench(fn)`, as Triton's `do_bench` times,
and what a script needs to run a kernel as the shipped examples do (`RunResult`,
`seconds_per_launch`, `describe_device`, `device_arch`, `check_arch`:
oxide/checked_runs.py).

    ms = ox.testing.do_bench(lambda: saxpy[cfg](a, x, y, out))

`fn` runs once to compile and warm up, then as many times as fit in `warmup` ms and
`rep` ms. On a GPU each run is timed by a pair of CUDA events on the stream oxide
launches on, after a 256 MiB buffer is zeroed so that no run finds the last one's data
in L2 (Triton's method). On the CPU each run is timed with `time.perf_counter`.
The result is the median in milliseconds, or the requested quantiles.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from oxide.checked_runs import (
    RunResult,
    check_arch,
    describe_device,
    device_arch,
    seconds_per_launch,
)
from oxide.errors import ArgumentError, OxideError
from oxide.runtime.device import current_device, parse_device
from oxide.tracebacks import user_frames_only

__all__ = ["RunResult", "check_arch", "describe_device", "device_arch", "do_bench",
           "seconds_per_launch"]

FLUSH_BYTES = 256 << 20  # larger than any L2 (the H200's is 50 MiB)
_RETURN_MODES = ("min", "max", "mean", "median", "all")


def do_bench(fn: Callable[[], Any], warmup: float = 25.0, rep: float = 100.0,
             quantiles: Sequence[float] | None = None, return_mode: str = "median",
             device: Any = None, flush_l2: bool = True) -> Any:
    """Milliseconds per call of `fn` (a function of no arguments that launches work).

    `warmup` and `rep` are budgets in milliseconds; at least one timed run is made.
    `quantiles` (e.g. `(0.2, 0.5, 0.8)`) returns those quantiles as a list instead;
    `return_mode` is "median" (default), "mean", "min", "max" or "all" (every run).
    `device` (default: the current one) says where `fn`'s launches run.
    """
    try:
        return _measure(fn, warmup, rep, quantiles, return_mode, device, flush_l2)
    except OxideError as exc:  # the user's frames and the diagnostic (oxide/tracebacks.py)
        user_frames_only(exc)
        raise


def _measure(fn: Callable[[], Any], warmup: float, rep: float,
             quantiles: Sequence[float] | None, return_mode: str, device: Any,
             flush_l2: bool) -> Any:
    if return_mode not in _RETURN_MODES:
        raise ArgumentError(f"return_mode must be one of {', '.join(_RETURN_MODES)}, "
                            f"not {return_mode!r}")
    if quantiles is not None and not all(0.0 <= q <= 1.0 for q in quantiles):
        raise ArgumentError(f"quantiles are numbers in [0, 1]; got {list(quantiles)}")
    if warmup < 0 or rep <= 0:
        raise ArgumentError(f"warmup must be >= 0 and rep > 0 (milliseconds); got {warmup}, "
                            f"{rep}")
    dev = current_device() if device is None else parse_device(device)
    timer = _cpu_times if dev.is_cpu else _gpu_timer(dev.index, flush_l2)
    # the first call compiles: not in the estimate
    estimate = max(statistics.median(timer(fn, 5)), 1e-4)
    warm_runs = int(warmup / estimate)
    if warm_runs:
        timer(fn, warm_runs)
    times = timer(fn, max(1, int(rep / estimate)))
    if quantiles is not None:
        return [float(q) for q in np.quantile(times, list(quantiles))]
    if return_mode == "all":
        return times
    return float({"min": min, "max": max, "mean": statistics.mean,
                  "median": statistics.median}[return_mode](times))


def _cpu_times(fn: Callable[[], Any], runs: int) -> list[float]:
    fn()  # the first call of a batch is not timed either: it may compile
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1e3)
    return out


_FLUSH_BUFFERS: dict[int, Any] = {}  # device ordinal -> the L2-flush buffer do_bench writes


def _gpu_timer(index: int, flush_l2: bool) -> Callable[[Callable[[], Any], int], list[float]]:
    from oxide.runtime import gpu

    flush = None
    if flush_l2:
        ptr = _FLUSH_BUFFERS.get(index)
        if ptr is None:  # one per device for the process: autotuning times many configs
            ptr = _FLUSH_BUFFERS[index] = gpu.allocate_device_memory(index, FLUSH_BYTES)
        flush = (ptr, FLUSH_BYTES)

    def times(fn: Callable[[], Any], runs: int) -> list[float]:
        fn()
        gpu.synchronize_device(index)
        return gpu.time_on_stream(index, fn, flush, runs)

    return times


def __dir__() -> list[str]:
    """`dir()` lists the API (`__all__`), not the modules and typing names it is built from."""
    return sorted({*__all__, *(n for n in globals() if n.startswith("__"))})
