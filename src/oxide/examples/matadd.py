"""2-D matrix add with thread.index_2d(): one thread per element, 16x16 blocks."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import DisjointSlice, Slice, f32, thread
from oxide.examples import _harness as h


@ox.kernel
def matadd(a: Slice[f32, 2], b: Slice[f32, 2], out: DisjointSlice[f32, 2]):
    ij = thread.index_2d()   # .row from the y dimension, .col from x (neighbours share a row)
    if ij in out:
        out[ij] = a[ij] + b[ij]


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> h.ExampleResult:
    """Adds two `size` x `size` + 3 matrices (a ragged edge) and checks against NumPy."""
    with h.running_on(device) as dev:
        rows = h.pick_size(dev, size, cpu=512, gpu=4096)
        cols = rows + 3  # not a multiple of the block: the bounds guard matters
        rng = np.random.default_rng(3)
        a = rng.standard_normal((rows, cols), dtype=np.float32)
        b = rng.standard_normal((rows, cols), dtype=np.float32)
        out = np.zeros((rows, cols), dtype=np.float32)
        d_a, d_b, d_out = h.to_device(dev, a, b, out)
        block = (16, 16)  # (x, y): x walks columns, y walks rows
        grid = (-(-cols // block[0]), -(-rows // block[1]))
        config = ox.LaunchConfig(grid=grid, block=block)
        seconds = h.time_launch(dev, lambda: ox.launch(matadd, config, d_a, d_b, d_out))
        passed = np.array_equal(h.to_numpy(d_out), a + b)
        return h.ExampleResult("matadd", passed, h.describe(dev), f"{rows:,} x {cols:,} f32",
                               seconds, work=3 * 4 * rows * cols, unit="GB/s",
                               detail=h.check_arch(matadd, arch, a, b, out))


if __name__ == "__main__":
    print(main())
