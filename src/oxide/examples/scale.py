"""Scale: out[i] = input[i] * factor (the design guide's kernel, launched CUDA-style)."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import DisjointSlice, Slice, f32, thread
from oxide.testing import RunResult, check_arch, describe_device, seconds_per_launch


@ox.kernel
def scale(input: Slice[f32], factor: f32, out: DisjointSlice[f32]):
    i = thread.index_1d()          # a ThreadIndex: unique to this thread in the launch
    if i in out:                   # bounds guard
        out[i] = input[i] * factor # DisjointSlice accepts only a ThreadIndex: no races


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """Scales a random vector by 2.5 with `kernel[grid, block](...)` and checks it against NumPy."""
    with ox.device(device) as dev:
        n = size or (1 << 20 if dev.is_cpu else 1 << 24)
        x = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
        y = np.zeros(n, dtype=np.float32)
        d_x, d_y = [ox.to_device(arr) for arr in (x, y)]
        block = 256
        grid = (n + block - 1) // block
        seconds = seconds_per_launch(lambda: scale[grid, block](d_x, 2.5, d_y), dev)
        passed = np.array_equal(d_y.to_numpy(), x * np.float32(2.5))
        return RunResult("scale", passed, describe_device(dev), f"n = {n:,} f32", seconds,
                         work=2 * 4 * n, unit="GB/s",
                         detail=check_arch(scale, arch, x, 2.5, y))


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
