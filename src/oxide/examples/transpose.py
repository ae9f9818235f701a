"""Matrix transpose through shared memory: 32x33 padded tiles, coalesced reads and writes."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import DisjointSlice, Slice, f32, i32
from oxide.testing import RunResult, check_arch, describe_device, seconds_per_launch

TILE = 32
ROWS = 8  # a block is TILE x ROWS threads; each moves TILE // ROWS elements


@ox.kernel(checks=False, block=(TILE, ROWS))
def transpose(a: Slice[f32, 2], out: DisjointSlice[f32, 2]):
    """out = a.T. A warp reads a row of the tile and writes a row of the transposed tile,
    so both global accesses are coalesced; the tile's 33rd column shifts each row by one
    bank, so reading a column of it is free of bank conflicts.

    No `unsafe`: with the block shape declared, oxide proves at compile time that no two
    threads share a tile cell between the barriers, and that the writes to `out` give
    every thread of the launch its own elements. The guards keep every index inside its
    array, so the per-access checks are off.
    """
    tile = ox.shared.array(f32, (TILE, TILE + 1))
    rows = i32(a.shape[0])
    cols = i32(a.shape[1])
    tx = ox.thread_idx.x
    ty = ox.thread_idx.y
    x = ox.block_idx.x * TILE + tx
    y = ox.block_idx.y * TILE + ty
    vals = ox.local.array(f32, TILE // ROWS)  # every load in flight before any store
    for k in range(TILE // ROWS):
        vals[k] = a[y + k * ROWS, x] if y + k * ROWS < rows and x < cols else 0.0
    for k in range(TILE // ROWS):
        tile[ty + k * ROWS, tx] = vals[k]
    ox.sync_threads()
    x_out = ox.block_idx.y * TILE + tx
    y_out = ox.block_idx.x * TILE + ty
    for k in range(TILE // ROWS):
        if y_out + k * ROWS < cols and x_out < rows:
            out[y_out + k * ROWS, x_out] = tile[tx, ty + k * ROWS]


def launch_config(rows: int, cols: int) -> ox.LaunchConfig:
    return ox.LaunchConfig(grid=(-(-cols // TILE), -(-rows // TILE)), block=(TILE, ROWS))


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """Transposes a `size` x (`size` + 5) matrix (a ragged edge) and checks against NumPy."""
    with ox.device(device) as dev:
        rows = size or (500 if dev.is_cpu else 16384)
        cols = rows + 5
        a = np.random.default_rng(2).standard_normal((rows, cols), dtype=np.float32)
        out = np.zeros((cols, rows), np.float32)
        d_a, d_out = [ox.to_device(arr) for arr in (a, out)]
        config = launch_config(rows, cols)
        seconds = seconds_per_launch(lambda: ox.launch(transpose, config, d_a, d_out), dev)
        passed = np.array_equal(d_out.to_numpy(), a.T)
        return RunResult("transpose", passed, describe_device(dev), f"{rows:,} x {cols:,} f32",
                         seconds, work=2 * 4 * rows * cols, unit="GB/s",
                         detail=check_arch(transpose, arch, a, out))


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
