"""DisjointSlice accesses of several tile shapes (tile/disjoint.py): accepted where the
shapes agree along the dimensions the TileIndexes index, refused where they differ."""

from __future__ import annotations

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, i32, tile


@tile.kernel(num_warps=4)
def row_and_element(x: DisjointSlice[f32, 2], y: Slice[i32], BN: Const[int]):
    """Liger's cross entropy's shape: a row in (1, BN) chunks, one element as (1, 1)."""
    row = tile.bid(0)
    target = tile.load(y, (row,), ())
    picked = tile.load(x, (row, target), (1, 1))
    for c in range(tile.num_tiles(x, 1, BN)):
        tile.store(x, (row, c), tile.load(x, (row, c), (1, BN)) * 2.0)
    tile.store(x, (row, target), picked + 100.0)
    tile.store(x, (row, 0), tile.load(x, (row, 0), (1, 16)) + 0.5)


@tile.kernel(num_warps=4)
def rows_of_two_and_one(x: DisjointSlice[f32, 2], BN: Const[int]):
    b = tile.bid(0)
    tile.store(x, (b, 0), tile.zeros((2, BN), f32))  # rows 2b, 2b + 1
    tile.store(x, (b, 0), tile.zeros((1, BN), f32))  # row b: block 1's is block 0's


@tile.kernel(num_warps=4)
def columns_differ(x: DisjointSlice[f32, 2], BM: Const[int]):
    b = tile.bid(0)
    tile.store(x, (0, b), tile.zeros((BM, 4), f32))
    tile.store(x, (0, b), tile.zeros((BM, 8), f32))


@pytest.fixture
def cpu():
    with ox.device("cpu"):
        yield


def test_shapes_that_agree_along_the_witness_dimension(cpu) -> None:
    x = np.arange(5 * 100, dtype=np.float32).reshape(5, 100)
    y = np.array([3, 0, 99, 50, 64], np.int32)
    got = x.copy()
    row_and_element[5](got, y, 32)
    want = 2 * x
    want[np.arange(5), y] = x[np.arange(5), y] + 100
    want[:, :16] += 0.5
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kernel, extent", [(rows_of_two_and_one, 8), (columns_differ, 4)])
def test_shapes_that_differ_along_it_are_refused(cpu, kernel, extent) -> None:
    x = np.zeros((16, 16), np.float32)
    with pytest.raises(ox.SafetyError, match="differ along the dimension their TileIndex"):
        kernel[2](x, extent)
