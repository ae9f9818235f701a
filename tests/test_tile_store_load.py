"""Inside one tile block, accesses of one array keep program order (issue 27, item 4;
tile/ordering.py): a load sees the block's earlier stores, the last store wins, and a
load reads what was there before a later store, whichever threads the layouts give the
elements to.

On the CPU a block's threads run one after another between barriers
(codegen/cpu_sync.py; a kernel without barriers runs each thread to its end in turn), so
a missing barrier shows as a wrong value: each test here failed before the ordering pass,
but the mma one, whose product the CPU computes in the layout the load uses (no tensor
cores: tests/test_gpu_tile_store_load.py runs it on the GPU, and the PTX test below
checks its barrier)."""

from __future__ import annotations

import re

import numpy as np

import oxide as ox
from oxide import Const, DisjointSlice, RawSlice, Slice, f16, f32, i32, tile

rng = np.random.default_rng(4)


def run(kernel, grid, *args, device: str | int = "cpu") -> None:
    with ox.device(device):
        kernel[grid](*args)
        ox.synchronize()


def small_ints(shape, dtype=np.float32) -> np.ndarray:
    """Values whose sums and products are exact in any order."""
    return rng.integers(-4, 5, shape).astype(dtype)


# -- a load after a store of the same elements from other threads --------------------------

@tile.kernel(num_warps=4)
def overwrite_row(x: RawSlice[f32, 2], y: i32, BN: Const[int]):
    """Liger's in-place cross entropy: the row overwritten chunk by chunk, then one
    element of it read and overwritten again (a (1, 1) tile: held by every thread,
    stored by thread 0, while a chunk's store wrote it from another thread)."""
    row = tile.bid(0)
    with ox.unsafe():
        for c in range(tile.num_tiles(x, 1, BN)):
            tile.store(x, (row, c), tile.load(x, (row, c), (1, BN)) * 2.0)
        tile.store(x, (row, y), tile.load(x, (row, y), (1, 1)) + 1.0)


def check_overwrite_row(device: str | int = "cpu") -> None:
    x = small_ints((3, 300))
    want = x * 2
    want[:, 170] += 1
    run(overwrite_row, 3, x, 170, 64, device=device)
    np.testing.assert_array_equal(x, want)


def test_chunks_then_one_element_through_a_raw_slice() -> None:
    check_overwrite_row()


@tile.kernel(num_warps=4)
def row_sums_back(x: Slice[f32, 2], s: DisjointSlice[f32, 2], out: DisjointSlice[f32, 2],
                  BM: Const[int], BN: Const[int]):
    """A row sum stored from its reduction's layout (row r in lane 16 (r & 1) of warp
    r >> 1) and loaded back blocked (row r in lane r of every warp)."""
    i = tile.bid(0)
    tile.store(s, (i, 0), tile.sum(tile.load(x, (i, 0), (BM, BN)), 1, keepdims=True))
    tile.store(out, (i, 0), tile.load(s, (i, 0), (BM, 1)) * 2.0)


def check_row_sums_back(device: str | int = "cpu") -> None:
    x = small_ints((32, 64))
    s, out = np.zeros((32, 1), np.float32), np.zeros((32, 1), np.float32)
    run(row_sums_back, 2, x, s, out, 16, 64, device=device)
    np.testing.assert_array_equal(out, 2 * x.sum(1, keepdims=True))


def test_a_tile_stored_from_a_reduction_is_loaded_back() -> None:
    check_row_sums_back()


@tile.kernel(num_warps=4)
def product_then_reload(a: Slice[f16, 2], b: Slice[f16, 2], c: DisjointSlice[f32, 2],
                        out: DisjointSlice[f32, 2], BM: Const[int], BN: Const[int],
                        BK: Const[int]):
    """A product stored from the tensor cores' accumulator layout (on the GPU), then
    loaded back in a blocked one: safe code that read the stale tile."""
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.mma(tile.load(a, (i, 0), (BM, BK)), tile.load(b, (0, j), (BK, BN)),
                   tile.zeros((BM, BN), f32))
    tile.store(c, (i, j), acc)
    tile.store(out, (i, j), tile.load(c, (i, j), (BM, BN)) + 1.0)


def check_product_then_reload(device: str | int = "cpu", bm: int = 32) -> None:
    """`bm` 32: mma.sync on the GPU; 64 (16 rows a warp): wgmma on sm_90."""
    a, b = small_ints((128, 32), np.float16), small_ints((32, 64), np.float16)
    c, out = np.zeros((128, 64), np.float32), np.zeros((128, 64), np.float32)
    run(product_then_reload, (128 // bm, 2), a, b, c, out, bm, 32, 32, device=device)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_array_equal(c, want)
    np.testing.assert_array_equal(out, want + 1)


def test_a_product_stored_then_loaded_back() -> None:
    check_product_then_reload()


def test_the_product_reload_waits_at_a_barrier_on_the_gpu() -> None:
    """sm_90 PTX: a bar.sync stands between the store of `c` and its load (the only
    coherent `ld.global`: `a` and `b` are read through the non-coherent cache)."""
    a, b = np.zeros((64, 32), np.float16), np.zeros((32, 64), np.float16)
    c = np.zeros((64, 64), np.float32)
    ck = product_then_reload.compile(a, b, c, c.copy(), 32, 32, 32, arch="sm_90")
    lines = [ln.strip() for ln in ck.ptx.splitlines()
             if re.search(r"st\.global|ld\.global|bar\.sync", ln)]
    load_c = next(k for k, ln in enumerate(lines) if re.search(r"ld\.global(?!\.nc)", ln))
    stores = [k for k in range(load_c) if "st.global" in lines[k]]
    assert stores and any("bar.sync" in ln for ln in lines[stores[-1]:load_c]), lines


# -- two stores of one element from different threads: the last one wins -------------------

@tile.kernel(num_warps=4)
def store_twice(x: Slice[f32, 2], y: Slice[f32, 2], out: DisjointSlice[f32, 2],
                BM: Const[int], BN: Const[int]):
    i = tile.bid(0)
    tile.store(out, (i, 0), tile.sum(tile.load(x, (i, 0), (BM, BN)), 1, keepdims=True))
    tile.store(out, (i, 0), tile.load(y, (i, 0), (BM, 1)))


def check_store_twice(device: str | int = "cpu") -> None:
    x, y = small_ints((32, 64)), small_ints((32, 1))
    out = np.zeros((32, 1), np.float32)
    run(store_twice, 2, x, y, out, 16, 64, device=device)
    np.testing.assert_array_equal(out, y)


def test_the_last_store_wins() -> None:
    check_store_twice()


# -- a load before a store of the same elements from other threads -------------------------

@tile.kernel(num_warps=4)
def read_then_mark(x: RawSlice[f32, 2], out: DisjointSlice[f32, 2], y: i32, BN: Const[int]):
    """The row is read (each element by one thread), then one element of it is
    overwritten from thread 0: the read must not see it."""
    row = tile.bid(0)
    t = tile.load(x, (row, 0), (1, BN))
    with ox.unsafe():
        tile.store(x, (row, y), tile.full((1, 1), -100.0))
    tile.store(out, (row, 0), t)


@tile.kernel(num_warps=4)
def spread_then_clear(x: RawSlice[f32, 2], out: DisjointSlice[f32, 2], y: i32,
                      BN: Const[int]):
    """One element read by every thread (a (1, 1) tile) and spread over a row, then the
    row cleared: every copy must hold the value from before."""
    row = tile.bid(0)
    v = tile.load(x, (row, y), (1, 1))
    with ox.unsafe():
        tile.store(x, (row, 0), tile.zeros((1, BN)))
    tile.store(out, (row, 0), tile.broadcast_to(v, (1, BN)))


def check_loads_before_stores(device: str | int = "cpu") -> None:
    x = small_ints((3, 128)) + 10
    before = x.copy()
    out = np.zeros_like(x)
    run(read_then_mark, 3, x, out, 77, 128, device=device)
    np.testing.assert_array_equal(out, before)
    assert (x[:, 77] == -100).all()
    x = before.copy()
    run(spread_then_clear, 3, x, out, 77, 128, device=device)
    np.testing.assert_array_equal(out, np.repeat(before[:, 77:78], 128, axis=1))
    assert (x == 0).all()


def test_a_load_reads_what_was_there_before_a_later_store() -> None:
    check_loads_before_stores()


# -- through control flow -----------------------------------------------------------------

@tile.kernel(num_warps=4)
def doubling_history(x: Slice[f32, 2], acc: DisjointSlice[f32, 2],
                     history: DisjointSlice[f32, 2], steps: i32, BM: Const[int],
                     BN: Const[int]):
    """A value kept in memory across a loop: each step loads it (blocked) into its column
    of `history` and stores its double back from the reduction's layout, so each load
    must see the store of the step before (the loop's back edge) or, at first, the one
    under the `if`."""
    i = tile.bid(0)
    s = tile.sum(tile.load(x, (i, 0), (BM, BN)), 1, keepdims=True)
    if steps > 0:
        tile.store(acc, (i, 0), s)
    for k in range(steps):
        tile.store(history, (i, k), tile.load(acc, (i, 0), (BM, 1)))
        s = s * 2.0
        tile.store(acc, (i, 0), s)


def check_doubling_history(device: str | int = "cpu") -> None:
    x = small_ints((32, 64))
    acc, history = np.zeros((32, 1), np.float32), np.zeros((32, 3), np.float32)
    run(doubling_history, 2, x, acc, history, 3, 16, 64, device=device)
    np.testing.assert_array_equal(history, x.sum(1, keepdims=True) * [1, 2, 4])


def test_ordering_across_a_loop_and_an_if() -> None:
    check_doubling_history()


# -- what needs no barrier keeps none -------------------------------------------------------

@tile.kernel(num_warps=4)
def double_in_place(x: RawSlice[f32, 2], BN: Const[int]):
    row = tile.bid(0)
    with ox.unsafe():
        for c in range(tile.num_tiles(x, 1, BN)):
            tile.store(x, (row, c), tile.load(x, (row, c), (1, BN)) * 2.0)


def test_accesses_in_one_layout_need_no_barrier(monkeypatch, capfd) -> None:
    """Each element is loaded and stored by one thread (the replicas of the (1, 64) tile
    on 128 threads only feed the store, which they do not do): no barrier."""
    monkeypatch.setenv("OXIDE_DUMP", "tile")
    monkeypatch.setenv("OXIDE_CACHE", "0")
    ck = double_in_place.compile(RawSlice[f32, 2], 64, arch="sm_90")
    assert "tile.barrier" not in capfd.readouterr().err
    assert "bar.sync" not in ck.ptx
    ck = overwrite_row.compile(RawSlice[f32, 2], i32, 64, arch="sm_90")
    assert capfd.readouterr().err.count('"tile.barrier"') == 1
    assert ck.ptx.count("bar.sync") == 1
