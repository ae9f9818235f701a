"""The DisjointSlice rule of tile kernels accepts what cannot race (issue 27): an index
whose witnessed items tell blocks apart may hold any other integers, a widened witness
stays one, and tile.grouped pairs of launch-uniform sizes are unique to their block.
Each kernel runs on the CPU against NumPy; the refusals are tests/corpus/tile_safety.py."""

from __future__ import annotations

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, i32, i64, tile

rng = np.random.default_rng(27)


def cpu(kernel, grid, *args):
    with ox.device("cpu"):
        kernel[grid](*args)


@tile.kernel(num_warps=4)
def rms_norm_wide(x: Slice[f32, 2], w: Slice[f32, 2], out: DisjointSlice[f32, 2],
                  BN: Const[int]):
    """Triton's layernorm forward shape: a row wider than one tile, summed chunk by chunk,
    then normalized and stored chunk by chunk at `(row, c)`."""
    row = tile.bid(0)
    chunks = tile.num_tiles(x, 1, BN)
    acc = tile.zeros((1, BN), f32)
    for c in range(chunks):
        t = tile.load(x, (row, c), (1, BN))
        acc = acc + t * t
    scale = tile.rsqrt(tile.sum(acc) / x.shape[1] + 1e-6)
    for c in range(chunks):
        tile.store(out, (row, c), tile.load(x, (row, c), (1, BN)) * scale
                   * tile.load(w, (0, c), (1, BN)))


def test_a_wide_row_stored_chunk_by_chunk() -> None:
    x = rng.standard_normal((5, 300)).astype(np.float32)
    w = rng.standard_normal((1, 300)).astype(np.float32)
    out = np.zeros_like(x)
    cpu(rms_norm_wide, 5, x, w, out, 64)
    want = x / np.sqrt((x.astype(np.float64) ** 2).mean(1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@tile.kernel(num_warps=2)
def gather_rows(x: Slice[f32, 2], order: Slice[i32, 2], out: DisjointSlice[f32, 2],
                BN: Const[int]):
    """Column tile c of row `row` lands at the column tile `order` names: a free item read
    from data, beside the witness."""
    row = tile.bid(0)
    for c in range(tile.num_tiles(x, 1, BN)):
        dest = tile.max(tile.load(order, (0, c), (1, 1)))
        tile.store(out, (row, dest), tile.load(x, (row, c), (1, BN)))


def test_a_data_dependent_item_beside_the_witness() -> None:
    x = rng.standard_normal((3, 64)).astype(np.float32)
    order = np.array([[2, 0, 3, 1]], np.int32)
    out = np.zeros_like(x)
    cpu(gather_rows, 3, x, order, out, 16)
    want = np.zeros_like(x)
    for c, d in enumerate(order[0]):
        want[:, d * 16:(d + 1) * 16] = x[:, c * 16:(c + 1) * 16]
    np.testing.assert_array_equal(out, want)


@tile.kernel
def widened(x: Slice[f32, 2], out: DisjointSlice[f32, 2], BN: Const[int]):
    """Liger's kernels index with `tile.bid(0).astype(i64)`; `i64(...)` is the same cast."""
    row = tile.bid(0).astype(i64)
    col = i64(tile.bid(1))
    tile.store(out, (row, col), tile.load(x, (row, col), (1, BN)) + 1.0)


def test_a_widening_cast_keeps_the_witness() -> None:
    x = rng.standard_normal((4, 64)).astype(np.float32)
    out = np.zeros_like(x)
    cpu(widened, (4, 2), x, out, 32)
    np.testing.assert_array_equal(out, x + 1)


@tile.kernel
def diagonal(x: Slice[f32, 2], out: DisjointSlice[f32, 2], B: Const[int]):
    """`(i, i)`: the first item tells blocks apart; the second is just an integer."""
    i = tile.bid(0)
    tile.store(out, (i, i), tile.load(x, (i, i), (B, B)) * 2.0)


def test_a_witness_used_twice() -> None:
    x = rng.standard_normal((16, 16)).astype(np.float32)
    out = np.zeros_like(x)
    cpu(diagonal, 4, x, out, 4)
    want = np.zeros_like(x)
    for b in range(4):
        s = slice(4 * b, 4 * b + 4)
        want[s, s] = 2 * x[s, s]
    np.testing.assert_array_equal(out, want)


@tile.kernel
def row_then_its_first_tile(x: Slice[f32, 2], out: DisjointSlice[f32, 2], BN: Const[int]):
    """Stores at `(row, c)` and `(row, 0)`: the witness sits in dimension 0 in both."""
    row = tile.bid(0)
    for c in range(tile.num_tiles(x, 1, BN)):
        tile.store(out, (row, c), tile.load(x, (row, c), (1, BN)))
    tile.store(out, (row, 0), tile.load(out, (row, 0), (1, BN)) * 3.0)


def test_accesses_that_agree_on_the_witness_mix_freely() -> None:
    x = rng.standard_normal((3, 48)).astype(np.float32)
    out = np.zeros_like(x)
    cpu(row_then_its_first_tile, 3, x, out, 16)
    want = x.copy()
    want[:, :16] *= 3
    np.testing.assert_array_equal(out, want)


# -- tile.grouped ---------------------------------------------------------------------------

@tile.kernel
def grouped_from_extents(c: DisjointSlice[i32, 2], BM: Const[int], BN: Const[int]):
    """Sizes from array extents (`tile.num_tiles`), twice: the two calls give one order."""
    i, j = tile.grouped_bid(tile.num_tiles(c, 0, BM), tile.num_tiles(c, 1, BN), 2)
    tile.store(c, (i, j), tile.full((BM, BN), 0, i32) + tile.bid(0))
    p, q = tile.grouped_bid(tile.num_tiles(c, 0, BM), tile.num_tiles(c, 1, BN), 2)
    tile.store(c, (p, q), tile.load(c, (p, q), (BM, BN)) + 1000)


def triton_order(pid: int, num_m: int, num_n: int, group: int) -> tuple[int, int]:
    per_group = group * num_n
    first = (pid // per_group) * group
    size = min(num_m - first, group)
    return first + (pid % per_group) % size, (pid % per_group) // size


def test_grouped_sizes_from_array_extents() -> None:
    c = np.full((3 * 4, 5 * 8), -1, np.int32)
    cpu(grouped_from_extents, 15, c, 4, 8)
    for pid in range(15):
        i, j = triton_order(pid, 3, 5, 2)
        assert (c[i * 4:(i + 1) * 4, j * 8:(j + 1) * 8] == pid + 1000).all(), pid


@tile.kernel
def grouped_ids(out: DisjointSlice[i32, 2], num_m: i32, num_n: i32, G: Const[int]):
    i, j = tile.grouped_bid(num_m, num_n, G)
    tile.store(out, (i, j), tile.full((1, 1), 0, i32) + tile.bid(0))


@tile.kernel
def grouped_ids_64(out: DisjointSlice[i32, 2], num_m: i64, num_n: i64, G: Const[int]):
    i, j = tile.grouped_bid(num_m, num_n, G)
    tile.store(out, (i, j), tile.full((1, 1), 0, i32) + tile.bid(0))


@pytest.mark.parametrize("kernel, num_n, group", [
    (grouped_ids, 2**30, 4),            # group * num_n is 2**32: past i32
    (grouped_ids, 2**31 - 1, 2**31 - 1),
    (grouped_ids_64, 2**62, 4),         # past i64
])
def test_grouped_sizes_whose_product_overflows(kernel, num_n: int, group: int) -> None:
    """`group * num_n` past the type's range acts as the exact product does: every block
    id lies in the first group (Python's integers are the reference)."""
    num_m = 3
    out = np.full((3, 4), -1, np.int32)
    cpu(kernel, 12, out, num_m, num_n, group)
    want = np.full((3, 4), -1, np.int32)
    for pid in range(12):
        want[triton_order(pid, num_m, num_n, group)] = pid
    np.testing.assert_array_equal(out, want)
