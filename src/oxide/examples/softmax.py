"""Row softmax: one block per row; ox.block.reduce_max, then ox.block.reduce_add of exp."""

from __future__ import annotations

import math

import numpy as np

import oxide as ox
from oxide import DisjointSlice, Slice, f32, i32
from oxide.testing import RunResult, check_arch, describe_device, seconds_per_launch

BLOCK = 256
NEG_INF = -math.inf


@ox.kernel(block=BLOCK)
def softmax(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
    """Subtracting the row maximum keeps exp() finite for any input, as torch does. No
    `unsafe`: with the block shape declared, oxide proves that the strided writes give
    each element of the row to one thread."""
    row = ox.block_idx.x
    cols = i32(x.shape[1])
    t = ox.thread_idx.x
    m = f32(NEG_INF)
    for c in range(t, cols, ox.block_dim.x):
        m = max(m, x[row, c])
    m = ox.block.reduce_max(m)
    s = f32(0)
    for c in range(t, cols, ox.block_dim.x):
        s += ox.math.exp(x[row, c] - m)
    scale = 1.0 / ox.block.reduce_add(s)
    for c in range(t, cols, ox.block_dim.x):
        out[row, c] = ox.math.exp(x[row, c] - m) * scale


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """Softmax of a `size` x (`size` + 7) matrix, checked against NumPy."""
    with ox.device(device) as dev:
        rows = size or (256 if dev.is_cpu else 8192)
        cols = rows + 7
        x = (np.random.default_rng(6).standard_normal((rows, cols), dtype=np.float32) * 4)
        out = np.zeros_like(x)
        d_x, d_out = [ox.to_device(arr) for arr in (x, out)]
        config = ox.LaunchConfig(grid=rows, block=BLOCK)
        seconds = seconds_per_launch(lambda: ox.launch(softmax, config, d_x, d_out), dev)
        e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
        want = e / e.sum(axis=1, keepdims=True)
        passed = bool(np.allclose(d_out.to_numpy(), want, rtol=1e-4, atol=1e-7))
        return RunResult("softmax", passed, describe_device(dev), f"{rows:,} x {cols:,} f32",
                         seconds, work=2 * 4 * rows * cols, unit="GB/s",
                         detail=check_arch(softmax, arch, x, out))


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
