"""`tile.grouped_bid`: the grouped (swizzled) tile order as a witness pair, on the CPU."""

from __future__ import annotations

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, RawSlice, Slice, f32, i32, tile


@tile.kernel
def where_tiles_go(out: DisjointSlice[i32, 2], num_m: i32, num_n: i32, G: Const[int]):
    """Each block writes its linear block id into its grouped tile (1 x 1 tiles)."""
    i, j = tile.grouped_bid(num_m, num_n, G)
    tile.store(out, (i, j), tile.full((1, 1), 0, i32) + tile.bid(0))


def triton_order(pid: int, num_m: int, num_n: int, group: int) -> tuple[int, int]:
    per_group = group * num_n
    first = (pid // per_group) * group
    size = min(num_m - first, group)
    return first + (pid % per_group) % size, (pid % per_group) // size


@pytest.mark.parametrize("num_m, num_n, group", [(8, 8, 4), (7, 5, 3), (5, 9, 8), (4, 4, 1),
                                                 (1, 6, 2)])
def test_every_tile_once_in_tritons_grouped_order(num_m: int, num_n: int, group: int) -> None:
    out = np.full((num_m, num_n), -1, np.int32)
    with ox.device("cpu"):
        where_tiles_go[num_m * num_n](out, num_m, num_n, group)
    want = np.full((num_m, num_n), -1, np.int32)
    for pid in range(num_m * num_n):
        want[triton_order(pid, num_m, num_n, group)] = pid
    np.testing.assert_array_equal(out, want)
    assert sorted(out.ravel().tolist()) == list(range(num_m * num_n))


def test_extra_blocks_and_zero_sizes_write_nothing_inside() -> None:
    """Blocks past num_m * num_n land past the array (clipped); a zero group or num_n is
    clamped to 1, not a division by zero."""
    out = np.full((3, 4), -1, np.int32)
    with ox.device("cpu"):
        where_tiles_go[40](out, 3, 4, 2)
    assert sorted(out.ravel().tolist()) == list(range(12))
    out0 = np.full((3, 4), -1, np.int32)
    with ox.device("cpu"):
        where_tiles_go[12](out0, 3, 0, 0)
    want = np.full((3, 4), -1, np.int32)  # group and num_n act as 1: block b at (b, 0)
    want[:, 0] = [0, 1, 2]
    np.testing.assert_array_equal(out0, want)


@tile.kernel
def one_part_only(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
    i, j = tile.grouped_bid(4, 4, 2)
    tile.store(out, (i, 0), tile.load(x, (i, 0), (8, 8)))


@tile.kernel
def part_twice(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
    i, j = tile.grouped_bid(4, 4, 2)
    tile.store(out, (i, i), tile.load(x, (i, j), (8, 8)))


@tile.kernel
def raw_is_fine(x: Slice[f32, 2], out: RawSlice[f32, 2]):
    i, j = tile.grouped_bid(4, 4, 2)
    with ox.unsafe():
        tile.store(out, (i, i), tile.load(x, (i, j), (8, 8)))


@pytest.mark.parametrize("kernel, pattern", [
    (one_part_only, r"uses one part of tile.grouped_bid's pair"),
    (part_twice, r"uses the same part of tile.grouped_bid's pair twice"),
])
def test_the_pair_is_a_witness_only_whole(kernel, pattern) -> None:
    x = np.zeros((32, 32), np.float32)
    with pytest.raises(ox.SafetyError, match=pattern):
        with ox.device("cpu"):
            kernel[16](x, x.copy())


def test_raw_slices_take_any_index() -> None:
    x = np.zeros((32, 32), np.float32)
    with ox.device("cpu"):
        raw_is_fine[16](x, x.copy())


# -- the persistent loop ----------------------------------------------------------------------

@tile.kernel
def persistent_grouped(out: DisjointSlice[i32, 2], num_m: i32, num_n: i32, G: Const[int]):
    """Each block walks tiles t = bid, bid + grid, ... and writes t into its grouped tile."""
    for t in tile.tiles(num_m * num_n):
        i, j = tile.grouped(t, num_m, num_n, G)
        tile.store(out, (i, j), tile.full((1, 1), 0, i32) + t.astype(i32))


@tile.kernel
def persistent_rows(x: Slice[f32, 2], out: DisjointSlice[f32, 2], B: Const[int]):
    for t in tile.tiles(tile.cdiv(x.shape[0], B)):
        tile.store(out, (t, 0), tile.load(x, (t, 0), (B, 16)) * 2.0)


@pytest.mark.parametrize("blocks", [1, 3, 7, 64])
def test_persistent_loop_visits_every_tile_once(blocks: int) -> None:
    num_m, num_n, group = 6, 5, 4
    out = np.full((num_m, num_n), -1, np.int32)
    with ox.device("cpu"):
        persistent_grouped[blocks](out, num_m, num_n, group)
    want = np.full((num_m, num_n), -1, np.int32)
    for t in range(num_m * num_n):
        want[triton_order(t, num_m, num_n, group)] = t
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("blocks", [1, 4, 100])
def test_persistent_rows(blocks: int) -> None:
    x = np.random.default_rng(3).standard_normal((37, 16)).astype(np.float32)
    out = np.zeros_like(x)
    with ox.device("cpu"):
        persistent_rows[blocks](x, out, 8)
    np.testing.assert_array_equal(out, x * 2)


@tile.kernel
def computed_from_t(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
    for t in tile.tiles(8):
        tile.store(out, (t + 1, 0), tile.load(x, (t, 0), (8, 8)))


@tile.kernel
def tiles_outside_a_loop(out: DisjointSlice[f32, 2]):
    tile.store(out, (tile.bid(0), 0), tile.zeros((8, 8)) + tile.tiles(8))


@tile.kernel
def grouped_of_a_plain_integer(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
    i, j = tile.grouped(tile.bid(0) + 1, 4, 4, 2)
    tile.store(out, (i, j), tile.load(x, (i, j), (8, 8)))


def test_witness_rules_of_the_persistent_loop() -> None:
    x = np.zeros((64, 64), np.float32)
    with pytest.raises(ox.SafetyError, match="computed integer"):
        with ox.device("cpu"):
            computed_from_t[4](x, x.copy())
    with pytest.raises(ox.KernelSyntaxError, match="iterable of a persistent loop"):
        with ox.device("cpu"):
            tiles_outside_a_loop[4](x)
    with pytest.raises(ox.SafetyError, match="computed integer"):
        with ox.device("cpu"):
            grouped_of_a_plain_integer[4](x, x.copy())
