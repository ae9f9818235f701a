"""SAXPY, generic over the element type: out[i] = a * x[i] + y[i]."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import DisjointSlice, Slice, thread
from oxide.testing import RunResult, check_arch, describe_device, seconds_per_launch

T = ox.TypeVar("T")


@ox.kernel
def saxpy(a: T, x: Slice[T], y: Slice[T], out: DisjointSlice[T]):
    i = thread.index_1d()
    if i in out:
        out[i] = a * x[i] + y[i]


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """Runs the generic kernel specialized for f32 and checks it against NumPy (FMA tolerance)."""
    with ox.device(device) as dev:
        n = size or (1 << 20 if dev.is_cpu else 1 << 24)
        rng = np.random.default_rng(2)
        a = np.float32(0.75)  # a NumPy f32 scalar binds T = f32 (a Python float would be f64)
        x = rng.standard_normal(n, dtype=np.float32)
        y = rng.standard_normal(n, dtype=np.float32)
        out = np.zeros(n, dtype=np.float32)
        d_x, d_y, d_out = [ox.to_device(arr) for arr in (x, y, out)]
        config = ox.LaunchConfig.for_num_elems(n)
        seconds = seconds_per_launch(lambda: ox.launch(saxpy, config, a, d_x, d_y, d_out), dev)
        # The compiler may fuse a * x + y into one FMA (one rounding instead of two).
        error = float(np.max(np.abs(d_out.to_numpy() - (a * x + y)), initial=0.0))
        return RunResult("saxpy", error <= 1e-5, describe_device(dev), f"n = {n:,} f32",
                         seconds, work=3 * 4 * n, unit="GB/s",
                         detail="; ".join(filter(None, (f"max error {error:.1e}",
                                                        check_arch(saxpy, arch, a, x, y, out)))))


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
