"""Tile vector add: each tile block adds one tile of 1024 elements (ox.tile)."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, tile
from oxide.testing import RunResult, check_arch, describe_device, seconds_per_launch

TILE = 1024


@tile.kernel
def tile_vecadd(a: Slice[f32], b: Slice[f32], out: DisjointSlice[f32], B: Const[int]):
    """Block `i` adds tile `i`; the last tile's elements past the end are padded on load
    and dropped on store, so no size check is written."""
    i = tile.bid(0)
    tile.store(out, (i,), tile.load(a, (i,), (B,)) + tile.load(b, (i,), (B,)))


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """Adds two random vectors of `size` floats (not a multiple of the tile) against NumPy."""
    with ox.device(device) as dev:
        n = size or ((1 << 20) + 3 if dev.is_cpu else (1 << 24) + 3)
        rng = np.random.default_rng(0)
        a = rng.standard_normal(n, dtype=np.float32)
        b = rng.standard_normal(n, dtype=np.float32)
        out = np.zeros(n, dtype=np.float32)
        d_a, d_b, d_out = [ox.to_device(arr) for arr in (a, b, out)]
        grid = tile.cdiv(n, TILE)
        seconds = seconds_per_launch(
            lambda: ox.launch(tile_vecadd, grid, d_a, d_b, d_out, TILE), dev)
        passed = np.array_equal(d_out.to_numpy(), a + b)
        return RunResult("tile_vecadd", passed, describe_device(dev), f"n = {n:,} f32",
                         seconds, work=3 * 4 * n, unit="GB/s",
                         detail=check_arch(tile_vecadd, arch, a, b, out, TILE))


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
