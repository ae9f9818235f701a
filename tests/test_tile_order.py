"""`order=` on tile.load and tile.store (transposed access), on the CPU against NumPy,
with ragged edges, and its diagnostics."""

from __future__ import annotations

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, tile

rng = np.random.default_rng(5)


@tile.kernel
def load_transposed(x: Slice[f32, 2], out: DisjointSlice[f32, 2], BM: Const[int],
                    BN: Const[int]):
    """out's (BM, BN) tile (i, j) is x's (BN, BM) tile (j, i), transposed on load."""
    i, j = tile.bid(0), tile.bid(1)
    tile.store(out, (i, j), tile.load(x, (i, j), (BM, BN), order=(1, 0), padding=-1.0))


@tile.kernel
def store_transposed(x: Slice[f32, 2], out: DisjointSlice[f32, 2], BM: Const[int],
                     BN: Const[int]):
    """x's (BM, BN) tile (i, j) lands transposed in out: its dimension 0 walks out's
    dimension 1, both with the tile's own index i."""
    i, j = tile.bid(0), tile.bid(1)
    tile.store(out, (i, j), tile.load(x, (i, j), (BM, BN)), order="F")


def cpu(kernel, grid, *args):
    with ox.device("cpu"):
        kernel[grid](*args)


@pytest.mark.parametrize("rows, cols", [(64, 32), (37, 50), (8, 3)])
def test_load_with_order_transposes(rows: int, cols: int) -> None:
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    out = np.zeros((cols, rows), np.float32)
    cpu(load_transposed, (-(-cols // 16), -(-rows // 8)), x, out, 16, 8)
    np.testing.assert_array_equal(out, x.T)


@pytest.mark.parametrize("rows, cols", [(64, 32), (37, 50)])
def test_store_with_order_f_transposes(rows: int, cols: int) -> None:
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    out = np.zeros((cols, rows), np.float32)
    cpu(store_transposed, (-(-rows // 16), -(-cols // 32)), x, out, 16, 32)
    np.testing.assert_array_equal(out, x.T)


def test_padding_follows_the_array_edges() -> None:
    """A ragged tile: elements past x's edge read the padding wherever they land."""
    x = rng.standard_normal((5, 7)).astype(np.float32)
    out = np.zeros((8, 8), np.float32)
    cpu(load_transposed, (1, 1), x, out, 8, 8)
    want = np.full((8, 8), -1.0, np.float32)
    want[:7, :5] = x.T
    np.testing.assert_array_equal(out, want)


@tile.kernel
def bad_order(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
    i = tile.bid(0)
    tile.store(out, (i, 0), tile.load(x, (i, 0), (8, 8), order=(0, 0)))


def test_order_must_be_a_permutation() -> None:
    x = np.zeros((8, 8), np.float32)
    with pytest.raises(ox.KernelTypeError, match="permutation of") as info:
        cpu(bad_order, 1, x, x.copy())
    assert "order=(0, 0)" in str(info.value)
