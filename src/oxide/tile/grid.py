"""The grid of one block per output tile, from a tile kernel's stores and its arrays' shapes.

`oxide bench` launched tile kernels over its SIMT default (one thread per element of the
largest array, 256 to a block): `tile_vecadd` with 1M elements and B=1024 ran 8192 blocks
where its 1024 tiles need 1024, and took 2.6 times as long. A tile kernel writes each
DisjointSlice tile at `tile.bid(axis)` in some dimension of the array; the grid along that
axis is then the number of tiles there, `cdiv(extent, tile extent)`. Evaluating the body
for the signature (the tile frontend, without layouts or code) finds those stores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oxide.tile.frontend import evaluate_body


class GridUnknown(ValueError):
    """Why no grid follows from the kernel's stores (the caller asks for an explicit one)."""


@dataclass(frozen=True)
class TileGrid:
    """A grid and how it was derived, axis by axis (`out: 1048576 / 1024 = 1024 tiles`)."""

    grid: tuple[int, ...]
    reasons: tuple[str, ...]


def output_grid(kernel: Any, sig: tuple[Any, ...], shapes: dict[str, tuple[int, ...]]
                ) -> TileGrid:
    """One block per output tile of `kernel` specialized to `sig`, over arrays of `shapes`
    (by parameter name). GridUnknown where the stores do not say it: none at a
    `tile.bid(...)`, tiles handed out by a persistent loop or `tile.grouped_bid`, or two
    stores that disagree on an axis's tile count."""
    _, low, _ = evaluate_body(kernel, sig, f"{kernel.__name__}_grid")
    stores = low.stores
    if stores.persistent:
        raise GridUnknown("its blocks walk the tiles in a persistent `tile.tiles(...)` loop, "
                          "so any grid does the work")
    if stores.grouped:
        raise GridUnknown("it hands out tiles with tile.grouped_bid(...)")
    if not stores.tiled:
        raise GridUnknown("it stores no DisjointSlice tile at a tile.bid(...) index")
    grid = [1] * (max(stores.tiled) + 1)
    reasons = []
    for axis, uses in sorted(stores.tiled.items()):
        counts = {(name, dim, extent): -(-shapes[name][dim] // extent)
                  for name, dim, extent in uses}
        if len(set(counts.values())) > 1:
            said = ", ".join(f"{n}[dim {d}]: {c}" for (n, d, _), c in sorted(counts.items()))
            raise GridUnknown(f"its stores at tile.bid({axis}) need different tile counts "
                              f"({said})")
        (name, dim, extent), count = min(counts.items())
        grid[axis] = count
        reasons.append(f"tile.bid({axis}): `{name}` dim {dim}, {shapes[name][dim]} / "
                       f"{extent} = {count} tiles")
    return TileGrid(tuple(grid), tuple(reasons))
