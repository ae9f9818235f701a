"""Tile transpose: each tile block moves one 32 x 32 tile to its mirrored place (ox.tile)."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, tile
from oxide.testing import RunResult, check_arch, describe_device, seconds_per_launch

TILE = 32


@tile.kernel
def tile_transpose(x: Slice[f32, 2], out: DisjointSlice[f32, 2], B: Const[int]):
    """Tile (i, j) of `x` is tile (j, i) of `out`: both witnesses, each once, so no two
    blocks write one element; `tile.permute` reorders the tile through shared memory."""
    i, j = tile.bid(0), tile.bid(1)
    tile.store(out, (j, i), tile.permute(tile.load(x, (i, j), (B, B)), (1, 0)))


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """Transposes a `size` x (`size` + 9) matrix, checked against NumPy."""
    with ox.device(device) as dev:
        rows = size or (1000 if dev.is_cpu else 16384)
        cols = rows + 9
        x = np.random.default_rng(8).standard_normal((rows, cols), dtype=np.float32)
        out = np.zeros((cols, rows), np.float32)
        d_x, d_out = [ox.to_device(arr) for arr in (x, out)]
        grid = (tile.cdiv(rows, TILE), tile.cdiv(cols, TILE))
        seconds = seconds_per_launch(lambda: ox.launch(tile_transpose, grid, d_x, d_out, TILE), dev)
        passed = np.array_equal(d_out.to_numpy(), x.T)
        return RunResult("tile_transpose", passed, describe_device(dev),
                         f"{rows:,} x {cols:,} f32", seconds, work=2 * 4 * rows * cols,
                         unit="GB/s", detail=check_arch(tile_transpose, arch, x, out, TILE))


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
