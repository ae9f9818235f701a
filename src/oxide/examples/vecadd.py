"""Vector add: out[i] = a[i] + b[i], one thread per element."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import DisjointSlice, Slice, f32, thread
from oxide.examples import _harness as h


@ox.kernel
def vecadd(a: Slice[f32], b: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] + b[i]


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> h.ExampleResult:
    """Adds two random vectors of `size` floats and checks the sum against NumPy."""
    with h.running_on(device) as dev:
        n = h.pick_size(dev, size, cpu=1 << 20, gpu=1 << 24)
        rng = np.random.default_rng(0)
        a = rng.standard_normal(n, dtype=np.float32)
        b = rng.standard_normal(n, dtype=np.float32)
        out = np.zeros(n, dtype=np.float32)
        d_a, d_b, d_out = h.to_device(dev, a, b, out)
        config = ox.LaunchConfig.for_num_elems(n)
        seconds = h.time_launch(dev, lambda: ox.launch(vecadd, config, d_a, d_b, d_out))
        passed = np.array_equal(h.to_numpy(d_out), a + b)
        return h.ExampleResult("vecadd", passed, h.describe(dev), f"n = {n:,} f32", seconds,
                               work=3 * 4 * n, unit="GB/s",
                               detail=h.check_arch(vecadd, arch, a, b, out))


if __name__ == "__main__":
    print(main())
