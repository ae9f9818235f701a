"""2-D matrix add with thread.index_2d(): one thread per element, 16x16 blocks."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import DisjointSlice, Slice, f32, thread
from oxide.testing import RunResult, check_arch, describe_device, seconds_per_launch


@ox.kernel
def matadd(a: Slice[f32, 2], b: Slice[f32, 2], out: DisjointSlice[f32, 2]):
    ij = thread.index_2d()   # .row from the y dimension, .col from x (neighbours share a row)
    if ij in out:
        out[ij] = a[ij] + b[ij]


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """Adds two `size` x `size` + 3 matrices (a ragged edge) and checks against NumPy."""
    with ox.device(device) as dev:
        rows = size or (512 if dev.is_cpu else 4096)
        cols = rows + 3  # not a multiple of the block: the bounds guard matters
        rng = np.random.default_rng(3)
        a = rng.standard_normal((rows, cols), dtype=np.float32)
        b = rng.standard_normal((rows, cols), dtype=np.float32)
        out = np.zeros((rows, cols), dtype=np.float32)
        d_a, d_b, d_out = [ox.to_device(arr) for arr in (a, b, out)]
        block = (16, 16)  # (x, y): x walks columns, y walks rows
        grid = (-(-cols // block[0]), -(-rows // block[1]))
        config = ox.LaunchConfig(grid=grid, block=block)
        seconds = seconds_per_launch(lambda: ox.launch(matadd, config, d_a, d_b, d_out), dev)
        passed = np.array_equal(d_out.to_numpy(), a + b)
        return RunResult("matadd", passed, describe_device(dev), f"{rows:,} x {cols:,} f32",
                         seconds, work=3 * 4 * rows * cols, unit="GB/s",
                         detail=check_arch(matadd, arch, a, b, out))


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
