"""A block's contiguous run of rows as a TileIndex (tile/run_witness.py): Liger-Kernel's
`for row in range(pid * R, min(pid * R + R, n))` stores to a DisjointSlice, what else
stays refused, and the launch rule of runs counted in 32 bits."""

from __future__ import annotations

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, i32, i64, tile


@tile.kernel(num_warps=4)
def runs(x: Slice[f32, 2], out: DisjointSlice[f32, 2], R: Const[int], BN: Const[int]):
    start = tile.bid(0) * R
    for row in range(start, tile.minimum(start + R, x.shape[0])):
        tile.store(out, (row, 0), tile.load(x, (row, 0), (1, BN)) * 2.0)


@tile.kernel(num_warps=4)
def runs_i64(x: Slice[f32, 2], out: DisjointSlice[f32, 2], R: Const[int], BN: Const[int]):
    start = tile.bid(0).astype(i64) * R
    for row in range(start, min(start + R, x.shape[0])):
        tile.store(out, (row, 0), tile.load(x, (row, 0), (1, BN)) + 1.0)


@tile.kernel(num_warps=4)
def runs_of_tiles(x: Slice[f32, 2], out: DisjointSlice[f32, 2], R: Const[int],
                  BN: Const[int]):
    """Runs of a persistent loop's tiles: its variable is a witness too."""
    for t in tile.tiles(tile.cdiv(x.shape[0], R)):
        for row in range(t * R, tile.minimum(t * R + R, x.shape[0])):
            tile.store(out, (row, 0), tile.load(x, (row, 0), (1, BN)) - 1.0)


def rows(n: int = 37, cols: int = 8) -> tuple[np.ndarray, np.ndarray]:
    x = np.arange(n * cols, dtype=np.float32).reshape(n, cols)
    return x, np.zeros_like(x)


@pytest.fixture
def cpu():
    with ox.device("cpu"):
        yield


def test_runs_of_rows_store_to_a_disjoint_slice(cpu) -> None:
    x, out = rows()
    runs[8](x, out, 5, 8)  # 8 runs of 5 rows cover 37
    np.testing.assert_array_equal(out, 2 * x)
    x, out = rows()
    runs_i64[10](x, out, 4, 8)
    np.testing.assert_array_equal(out, x + 1)
    x, out = rows()
    runs_of_tiles[3](x, out, 4, 8)
    np.testing.assert_array_equal(out, x - 1)


def test_a_run_in_32_bits_has_a_launch_rule_and_in_64_none(cpu) -> None:
    x, out = rows(4)
    with pytest.raises(ox.LaunchError, match=r"run of 1048576 rows.*astype\(i64\)"):
        runs[4096](x, out, 1 << 20, 8)  # 4096 * 2**20 = 2**32: b * R would wrap
    assert not out.any()  # refused before anything ran
    runs_i64[4096](x, out, 1 << 20, 8)  # block 0 takes all 4 rows, the others none
    np.testing.assert_array_equal(out, x + 1)


@tile.kernel(num_warps=4)
def run_one_too_long(x: Slice[f32, 2], out: DisjointSlice[f32, 2], R: Const[int],
                     BN: Const[int]):
    start = tile.bid(0) * R
    for row in range(start, start + R + 1):  # overlaps the next block's first row
        tile.store(out, (row, 0), tile.load(x, (row, 0), (1, BN)))


@tile.kernel(num_warps=4)
def run_of_other_length(x: Slice[f32, 2], out: DisjointSlice[f32, 2], R: Const[int],
                        BN: Const[int]):
    start = tile.bid(0) * R
    for row in range(start, start + 2 * R):
        tile.store(out, (row, 0), tile.load(x, (row, 0), (1, BN)))


@tile.kernel(num_warps=4)
def run_of_a_scalar(x: Slice[f32, 2], out: DisjointSlice[f32, 2], r: i32, BN: Const[int]):
    start = tile.bid(0) * r  # a scalar: not a constant (it could be 0 or negative)
    for row in range(start, start + r):
        tile.store(out, (row, 0), tile.load(x, (row, 0), (1, BN)))


@tile.kernel(num_warps=4)
def run_and_bid(x: Slice[f32, 2], out: DisjointSlice[f32, 2], R: Const[int], BN: Const[int]):
    start = tile.bid(0) * R
    for row in range(start, start + R):
        tile.store(out, (row, 0), tile.load(x, (row, 0), (1, BN)))
    tile.store(out, (tile.bid(0), 0), tile.zeros((1, BN), f32))  # block 5's row is block 1's


@tile.kernel(num_warps=4)
def run_descending(x: Slice[f32, 2], out: DisjointSlice[f32, 2], R: Const[int],
                   BN: Const[int]):
    start = tile.bid(0) * R
    for row in range(start + R - 1, start - 1, -1):
        tile.store(out, (row, 0), tile.load(x, (row, 0), (1, BN)))


@pytest.mark.parametrize("kernel", [run_one_too_long, run_of_other_length, run_of_a_scalar,
                                    run_descending])
def test_what_is_not_a_run_stays_refused(cpu, kernel) -> None:
    x, out = rows()
    with pytest.raises(ox.SafetyError, match="`row` is"):
        kernel[8](x, out, 5, 8)


def test_a_run_and_the_block_index_in_one_array_are_refused(cpu) -> None:
    x, out = rows()
    with pytest.raises(ox.SafetyError, match="different dimensions|no TileIndex"):
        run_and_bid[8](x, out, 5, 8)


@pytest.mark.gpu
def test_runs_of_rows_on_the_gpu() -> None:
    x, out = rows(1000, 64)
    dx, dout, dout2 = ox.to_device(x), ox.to_device(out), ox.to_device(out)
    with ox.device(0):
        runs[(1000 + 6) // 7](dx, dout, 7, 64)
        runs_of_tiles[5](dx, dout2, 16, 64)
    np.testing.assert_array_equal(dout.to_numpy(), 2 * x)
    np.testing.assert_array_equal(dout2.to_numpy(), x - 1)
