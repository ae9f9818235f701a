"""Vector add: out[i] = a[i] + b[i], one thread per element."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import DisjointSlice, Slice, f32, thread
from oxide.testing import RunResult, check_arch, describe_device, seconds_per_launch


@ox.kernel
def vecadd(a: Slice[f32], b: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] + b[i]


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """Adds two random vectors of `size` floats and checks the sum against NumPy."""
    with ox.device(device) as dev:
        n = size or (1 << 20 if dev.is_cpu else 1 << 24)
        rng = np.random.default_rng(0)
        a = rng.standard_normal(n, dtype=np.float32)
        b = rng.standard_normal(n, dtype=np.float32)
        out = np.zeros(n, dtype=np.float32)
        d_a, d_b, d_out = [ox.to_device(arr) for arr in (a, b, out)]
        config = ox.LaunchConfig.for_num_elems(n)
        seconds = seconds_per_launch(lambda: ox.launch(vecadd, config, d_a, d_b, d_out), dev)
        passed = np.array_equal(d_out.to_numpy(), a + b)
        return RunResult("vecadd", passed, describe_device(dev), f"n = {n:,} f32", seconds,
                         work=3 * 4 * n, unit="GB/s",
                         detail=check_arch(vecadd, arch, a, b, out))


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
