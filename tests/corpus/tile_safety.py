"""Tile kernels whose DisjointSlice accesses could let two blocks touch one tile (issue
27): witnesses in different positions across the accesses of one array (an adversarial
corpus's hole), `order=` transposing one access and not another, tile.grouped pairs with
sizes that differ between blocks, and witnesses lost to arithmetic or narrowing casts;
and a launch whose grid has an axis the indices do not tell apart."""

# ruff: noqa: F841 - the corpus is bad kernels on purpose

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import DisjointSlice, Slice, f32, i16, i32, tile

from . import bad

SE, LE = ox.SafetyError, ox.LaunchError
MISPLACED = r"their TileIndex witnesses index different dimensions, so two blocks can reach"


# -- every access of one array must place its witnesses alike -----------------------------


@bad(SE, pattern=MISPLACED + r".*`j` \(a TileIndex of grid axis 1\) indexes dimension 0")
def witnesses_swapped_between_two_stores():
    @tile.kernel
    def k(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
        i, j = tile.bid(0), tile.bid(1)
        t = tile.load(x, (i, j), (16, 16))
        tile.store(out, (i, j), t)
        tile.store(out, (j, i), t * 2.0)  # <-
    return k


@bad(SE, pattern=MISPLACED + r".*`i` \(a TileIndex of grid axis 0\) indexes dimension 1")
def witness_moves_to_the_other_dimension():
    """Block 1 writes (1, 0) at the first store, block 0 writes (1, 0) at the second."""
    @tile.kernel
    def k(out: DisjointSlice[f32, 2]):
        i = tile.bid(0)
        tile.store(out, (i, 0), tile.zeros((8, 8)))
        tile.store(out, (1, i), tile.zeros((8, 8)) + 1.0)  # <-
    return k


@bad(SE, pattern=MISPLACED + r".*`row` \(a TileIndex of grid axis 0\) indexes dimension 1")
def row_chunks_then_column_chunks():
    """`(row, c)` alone is fine (a wide row chunk by chunk); with `(c, row)` block c writes
    block row's tile."""
    @tile.kernel
    def k(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
        row = tile.bid(0)
        for c in range(tile.num_tiles(x, 1, 16)):
            t = tile.load(x, (row, c), (16, 16))
            tile.store(out, (row, c), t)
            tile.store(out, (c, row), t)  # <-
    return k


@bad(SE, pattern=r"written at `\(i, j\)` \(`order=` sends tile item k to array dimension "
                 r"order\[k\]\).*" + MISPLACED)
def transposed_store_mixed_with_a_plain_one():
    @tile.kernel
    def k(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
        i, j = tile.bid(0), tile.bid(1)
        t = tile.load(x, (i, j), (16, 16))
        tile.store(out, (i, j), t)
        tile.store(out, (i, j), t, order=(1, 0))  # <-
    return k


@bad(SE, pattern=r"`out` is a DisjointSlice read at `\(j, i\)`.*" + MISPLACED)
def disjoint_read_at_swapped_witnesses():
    """Another block's store races with this block's read."""
    @tile.kernel
    def k(out: DisjointSlice[f32, 2]):
        i, j = tile.bid(0), tile.bid(1)
        tile.store(out, (i, j), tile.zeros((8, 8)))
        back = tile.load(out, (j, i), (8, 8))  # <-
    return k


@bad(SE, pattern=r"constants only: every block would reach this tile")
def witness_store_then_constant_load():
    @tile.kernel
    def k(out: DisjointSlice[f32, 2]):
        i = tile.bid(0)
        tile.store(out, (i, 0), tile.zeros((8, 8)))
        first = tile.load(out, (0, 0), (8, 8))  # <-
    return k


# -- tile.grouped pairs -------------------------------------------------------------------


@bad(SE, pattern=r"grouped pair whose sizes can differ between blocks.*`rows` is not "
                 r"launch-uniform")
def grouped_sizes_read_from_data():
    """Each block reads its own num_m: two blocks map their ids through two orders."""
    @tile.kernel
    def k(sizes: Slice[i32, 2], x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
        rows = tile.max(tile.load(sizes, (tile.bid(0), 0), (1, 1)))
        i, j = tile.grouped_bid(rows, 4, 2)  # <-
        tile.store(out, (i, j), tile.load(x, (i, j), (8, 8)))
    return k


@bad(SE, pattern=r"grouped pair whose sizes can differ between blocks.*`g` is not "
                 r"launch-uniform")
def grouped_sizes_from_a_loop_variable():
    @tile.kernel
    def k(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
        for g in range(1, 3):
            i, j = tile.grouped_bid(4, 4, g)  # <-
            tile.store(out, (i, j), tile.load(x, (i, j), (8, 8)))
    return k


@bad(SE, pattern=MISPLACED + r".*comes from a tile.grouped call with other sizes")
def two_grouped_orders_on_one_array():
    @tile.kernel
    def k(out: DisjointSlice[f32, 2], m: i32, n: i32):
        i, j = tile.grouped_bid(m, n, 2)
        tile.store(out, (i, j), tile.zeros((8, 8)))
        p, q = tile.grouped_bid(m, n, 4)
        tile.store(out, (p, q), tile.zeros((8, 8)) + 1.0)  # <-
    return k


# -- witnesses lost -----------------------------------------------------------------------


@bad(SE, pattern=r"`row` is a TileIndex cast to a narrower type, which can wrap")
def witness_narrowed_to_i16():
    @tile.kernel
    def k(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
        row = tile.bid(0).astype(i16)
        tile.store(out, (row, 0), tile.load(x, (row, 0), (1, 64)))  # <-
    return k


@bad(SE, pattern=r"`row \+ 1` is a computed integer; arithmetic drops the uniqueness")
def witness_shifted_by_one():
    @tile.kernel
    def k(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
        row = tile.bid(0)
        tile.store(out, (row + 1, 0), tile.load(x, (row, 0), (1, 64)))  # <-
    return k


@bad(SE, pattern=r"`c` is not derived from a TileIndex, and no other item of the index is one")
def loop_index_without_a_witness():
    @tile.kernel
    def k(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
        for c in range(4):
            tile.store(out, (0, c), tile.load(x, (0, c), (1, 64)))  # <-
    return k


# -- the launch: grid axes no witness covers ------------------------------------------------


@tile.kernel
def _row_chunks(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
    row = tile.bid(0)
    for c in range(tile.num_tiles(x, 1, 16)):
        tile.store(out, (row, c), tile.load(x, (row, c), (1, 16)))


@bad(LE, pattern=r"tell blocks apart by tile\.bid\(0\) only, so this launch \(grid\.y = 2\) "
                 r"would have several blocks write one element", launch=True)
def row_chunks_on_a_2d_grid():
    """`(row, c)` tells blocks apart along x only: blocks (r, 0) and (r, 1) write one row."""
    x = np.zeros((4, 64), np.float32)
    _row_chunks[(4, 2)](x, np.zeros_like(x))
