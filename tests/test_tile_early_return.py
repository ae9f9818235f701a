"""Early `return` in tile kernels (tile/early_return.py): the statements after an `if`
that returns run in its other arm only; what stays refused."""

from __future__ import annotations

import re

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, i32, tile


@tile.kernel(num_warps=4)
def skip_marked_rows(x: Slice[f32, 2], mark: Slice[i32], out: DisjointSlice[f32, 2],
                     BN: Const[int]):
    row = tile.bid(0)
    if tile.load(mark, (row,), ()) == 1:
        tile.store(out, (row, 0), tile.full((1, BN), -1.0, f32))
        return
    v = tile.load(x, (row, 0), (1, BN))
    if tile.sum(v) > 100.0:
        if tile.load(mark, (row,), ()) == 2:
            return  # nested: the row keeps its zeros
        v = v * 0.5
    else:
        v = v + 1.0
    tile.store(out, (row, 0), v)


@tile.kernel(num_warps=4)
def return_in_else(x: Slice[f32, 2], out: DisjointSlice[f32, 2], BN: Const[int]):
    row = tile.bid(0)
    v = tile.load(x, (row, 0), (1, BN))
    if row % 2 == 0:
        v = v * 3.0
    else:
        return
    tile.store(out, (row, 0), v)


def model(x: np.ndarray, mark: np.ndarray) -> np.ndarray:
    out = np.zeros_like(x)
    for r in range(x.shape[0]):
        if mark[r] == 1:
            out[r] = -1.0
        elif x[r].sum() > 100.0:
            if mark[r] != 2:
                out[r] = x[r] * 0.5
        else:
            out[r] = x[r] + 1.0
    return out


def inputs(rows: int = 12, cols: int = 32) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    x = rng.uniform(0, 7, (rows, cols)).astype(np.float32)
    mark = rng.integers(0, 3, rows).astype(np.int32)
    return x, mark


def test_a_return_leaves_the_rest_to_the_other_arm() -> None:
    x, mark = inputs()
    out = np.zeros_like(x)
    with ox.device("cpu"):
        skip_marked_rows[12](x, mark, out, 32)
        np.testing.assert_array_equal(out, model(x, mark))
        out2 = np.zeros_like(x)
        return_in_else[12](x, out2, 32)
    want = np.zeros_like(x)
    want[::2] = x[::2] * 3.0
    np.testing.assert_array_equal(out2, want)


@tile.kernel(num_warps=4)
def return_in_loop(x: Slice[f32, 2], out: DisjointSlice[f32, 2], BN: Const[int]):
    for c in range(4):
        if c == 2:
            return
        tile.store(out, (tile.bid(0), c), tile.load(x, (tile.bid(0), c), (1, BN)))


@tile.kernel(num_warps=4)
def return_in_unsafe(x: Slice[f32, 2], out: DisjointSlice[f32, 2], BN: Const[int]):
    with ox.unsafe():
        if tile.bid(0) == 0:
            return
    tile.store(out, (tile.bid(0), 0), tile.load(x, (tile.bid(0), 0), (1, BN)))


@tile.kernel(num_warps=4)
def return_a_value(x: Slice[f32, 2], out: DisjointSlice[f32, 2], BN: Const[int]):
    if tile.bid(0) == 0:
        return 1
    tile.store(out, (tile.bid(0), 0), tile.load(x, (tile.bid(0), 0), (1, BN)))


@pytest.mark.parametrize("kernel, error, text", [
    (return_in_loop, ox.UnsupportedFeatureError, "`return` in a tile kernel loop"),
    (return_in_unsafe, ox.UnsupportedFeatureError, "inside `with ox.unsafe():`"),
    (return_a_value, ox.KernelSyntaxError, "returns nothing"),
])
def test_returns_that_stay_refused(kernel, error, text) -> None:
    x = np.zeros((4, 32), np.float32)
    with ox.device("cpu"), pytest.raises(error, match=re.escape(text)):
        kernel[4](x, np.zeros_like(x), 8)


@pytest.mark.gpu
def test_a_return_on_the_gpu() -> None:
    x, mark = inputs(200, 64)
    out = ox.to_device(np.zeros_like(x))
    with ox.device(0):
        skip_marked_rows[200](ox.to_device(x), ox.to_device(mark), out, 64)
    np.testing.assert_array_equal(out.to_numpy(), model(x, mark))
