"""Tile vector add: each tile block adds one tile of 1024 elements (ox.tile)."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, tile
from oxide.examples import _harness as h

TILE = 1024


@tile.kernel
def tile_vecadd(a: Slice[f32], b: Slice[f32], out: DisjointSlice[f32], B: Const[int]):
    """Block `i` adds tile `i`; the last tile's elements past the end are padded on load
    and dropped on store, so no size check is written."""
    i = tile.bid(0)
    tile.store(out, (i,), tile.load(a, (i,), (B,)) + tile.load(b, (i,), (B,)))


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> h.ExampleResult:
    """Adds two random vectors of `size` floats (not a multiple of the tile) against NumPy."""
    with h.running_on(device) as dev:
        n = h.pick_size(dev, size, cpu=(1 << 20) + 3, gpu=(1 << 24) + 3)
        rng = np.random.default_rng(0)
        a = rng.standard_normal(n, dtype=np.float32)
        b = rng.standard_normal(n, dtype=np.float32)
        out = np.zeros(n, dtype=np.float32)
        d_a, d_b, d_out = h.to_device(dev, a, b, out)
        grid = tile.cdiv(n, TILE)
        seconds = h.time_launch(dev, lambda: ox.launch(tile_vecadd, grid, d_a, d_b, d_out, TILE))
        passed = np.array_equal(h.to_numpy(d_out), a + b)
        return h.ExampleResult("tile_vecadd", passed, h.describe(dev), f"n = {n:,} f32",
                               seconds, work=3 * 4 * n, unit="GB/s",
                               detail=h.check_arch(tile_vecadd, arch, a, b, out, TILE))


if __name__ == "__main__":
    print(main())
