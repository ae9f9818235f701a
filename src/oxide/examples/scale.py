"""Scale: out[i] = input[i] * factor (the design guide's kernel, launched CUDA-style)."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import DisjointSlice, Slice, f32, thread
from oxide.examples import _harness as h


@ox.kernel
def scale(input: Slice[f32], factor: f32, out: DisjointSlice[f32]):
    i = thread.index_1d()          # a ThreadIndex: unique to this thread in the launch
    if i in out:                   # bounds guard
        out[i] = input[i] * factor # DisjointSlice accepts only a ThreadIndex: no races


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> h.ExampleResult:
    """Scales a random vector by 2.5 with `kernel[grid, block](...)` and checks it against NumPy."""
    with h.running_on(device) as dev:
        n = h.pick_size(dev, size, cpu=1 << 20, gpu=1 << 24)
        x = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
        y = np.zeros(n, dtype=np.float32)
        d_x, d_y = h.to_device(dev, x, y)
        block = 256
        grid = (n + block - 1) // block
        seconds = h.time_launch(dev, lambda: scale[grid, block](d_x, 2.5, d_y))
        passed = np.array_equal(h.to_numpy(d_y), x * np.float32(2.5))
        return h.ExampleResult("scale", passed, h.describe(dev), f"n = {n:,} f32", seconds,
                               work=2 * 4 * n, unit="GB/s",
                               detail=h.check_arch(scale, arch, x, 2.5, y))


if __name__ == "__main__":
    print(main())
