"""Array views in tile kernels: `arr[i]` is the array at leading index i, as in NumPy (an
array of the remaining dimensions; tile/values.py `TArray.fixed`). Its tiles are the
parameter's tiles of extent 1 along the fixed dimensions, read and written by tile.load
and tile.store without those dimensions (the ops' `drop`), checked by the same
DisjointSlice rules, and on sm_90 a product's operand from a view comes by TMA like a
2-d array's. CPU runs against NumPy; the attention kernel that reads heads as views is
tested in test_tile_attention_any_length.py."""

from __future__ import annotations

import collections
import re

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, i32, tile


def cpu(kernel, grid, *args) -> None:
    with ox.device("cpu"):
        kernel[grid](*args)
        ox.synchronize()


@tile.kernel
def per_head(x: Slice[f32, 3], out: DisjointSlice[f32, 3], BM: Const[int], BN: Const[int]):
    """Block (i, h) doubles head h's rows i * BM ...: `x[h]` bound to a name, `o[h]` in
    place; a view's shape is its own dimensions."""
    i, h = tile.bid(0), tile.bid(1)
    xh = x[h]
    t = tile.load(xh, (i, 0), (BM, BN))
    tile.store(out[h], (i, 0), t * 2.0 + xh.shape[1] + 10 * tile.num_tiles(xh, 0, BM))


def test_a_view_reads_and_writes_its_heads_tiles() -> None:
    """10 rows of 7 a head, tiles of 4 x 8: the last row tile and every column tile
    cross the head's end, and read padding there (not the next head's rows)."""
    x = np.arange(3 * 10 * 7, dtype=np.float32).reshape(3, 10, 7)
    out = np.full_like(x, -1.0)
    cpu(per_head, (3, 3), x, out, 4, 8)
    np.testing.assert_array_equal(out, x * 2 + 7 + 10 * 3)


@tile.kernel
def rows_of_a_matrix(x: Slice[f32, 3], out: DisjointSlice[f32, 2], B: Const[int]):
    """A view of a view: `x[a][b]` is a row; one element of it (a scalar load); and
    a view at two leading indices at once, `x[a, b]`."""
    a = tile.bid(0)
    row = tile.load(x[a][1], (0,), (B,)) + tile.load(x[a, 2], (0,), (B,))
    first = tile.load(x[a][0], (3,), ())
    tile.store(out, (a, 0), (row + first)[None, :])


def test_views_of_views_and_scalar_loads() -> None:
    x = np.random.default_rng(1).standard_normal((4, 3, 5)).astype(np.float32)
    out = np.zeros((4, 8), np.float32)
    cpu(rows_of_a_matrix, 4, x, out, 8)
    want = np.zeros((4, 8), np.float32)
    want[:, :5] = x[:, 1] + x[:, 2] + x[:, 0, 3:4]
    want[:, 5:] = x[:, 0, 3:4]  # past the row: padding 0, plus the scalar
    np.testing.assert_allclose(out, want, rtol=1e-6)


@tile.kernel
def transposed_head(x: Slice[f32, 3], out: DisjointSlice[f32, 3], B: Const[int]):
    """`order=` over a view's own dimensions: head h's tile read transposed."""
    h = tile.bid(0)
    tile.store(out[h], (0, 0), tile.load(x[h], (0, 0), (B, B), order=(1, 0)))


def test_a_view_takes_order() -> None:
    x = np.arange(2 * 4 * 4, dtype=np.float32).reshape(2, 4, 4)
    out = np.zeros_like(x)
    cpu(transposed_head, 2, x, out, 4)
    np.testing.assert_array_equal(out, x.transpose(0, 2, 1))


@tile.kernel
def one_head_for_all(x: Slice[f32, 3], out: DisjointSlice[f32, 3], B: Const[int]):
    i = tile.bid(0)
    tile.store(out[0], (i, 0), tile.load(x[tile.bid(1)], (i, 0), (B, B)))


def test_a_view_does_not_hide_a_race_between_blocks() -> None:
    """Blocks (i, 0), (i, 1) ... all write `out[0]`'s tile i: the launch is refused, as
    for the same store written with a 3-d index."""
    x = np.zeros((3, 8, 8), np.float32)
    with pytest.raises(ox.LaunchError, match="grid.y = 3"):
        cpu(one_head_for_all, (2, 3), x, np.zeros_like(x), 4)


def test_a_view_takes_at_most_rank_integer_indices() -> None:
    def whole(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
        tile.store(out, (0, 0), tile.load(x[0, 1, 2], (0,), (4,))[None, :])

    def floating(x: Slice[f32, 2], out: DisjointSlice[f32, 2], s: f32):
        tile.store(out, (0, 0), tile.load(x[s], (0,), (4,))[None, :])

    def negative(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
        tile.store(out, (0, 0), tile.load(x[-1], (0,), (4,))[None, :])

    for fn, message in ((whole, "at most 2 indexes, not 3"), (floating, "integer scalars"),
                        (negative, "do not wrap around")):
        k = tile.kernel(fn)
        with pytest.raises(ox.OxideError, match=message):
            k.compile(Slice[f32, 2], DisjointSlice[f32, 2], *([f32] if fn is floating else []))


@tile.kernel(num_warps=8, num_stages=2)
def batched_product(a: Slice[ox.bf16, 3], b: Slice[ox.bf16, 3], c: DisjointSlice[f32, 3],
                    BM: Const[int], BN: Const[int], BK: Const[int]):
    """One GEMM per batch entry, each through views: the K loop's operands by TMA."""
    i, j, z = tile.bid(0), tile.bid(1), tile.bid(2)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(a[z], 1, BK)):
        acc = tile.mma(tile.load(a[z], (i, k), (BM, BK)), tile.load(b[z], (k, j), (BK, BN)),
                       acc)
    tile.store(c[z], (i, j), acc)


def test_a_views_product_operands_come_by_tma_on_sm90() -> None:
    """The batched product on sm_90: its operand rings are filled by 3-d TMA copies (box 1
    along the batch), no operand is staged by the threads, and the result goes out by
    3-d TMA stores."""
    from test_tile_tma_rings import V

    sig = (V(Slice[ox.bf16, 3], vectors=True),) * 2 + (V(DisjointSlice[f32, 3], vectors=True),)
    ptx = batched_product.compile(*sig, 128, 128, 64, arch="sm_90").ptx
    ops = collections.Counter(re.findall(r"^\s*([a-z][\w.:]*)", ptx, re.M))
    copies = {k: v for k, v in ops.items() if k.startswith("cp.async.bulk.tensor")}
    assert copies and all(".3d." in k for k in copies), copies
    assert any(".global.shared::cta." in k for k in copies), copies  # the TMA stores
    assert not any(k.startswith(("st.shared.v4", "cp.async.cg")) for k in ops)


def test_a_views_product_on_the_cpus_sm90(monkeypatch) -> None:
    """The same kernel as sm_90 compiles it, run on the CPU (TMA copies of the views'
    boxes, the producer warp group): 3 batch entries of ragged (100 x 72) @ (72 x 130)."""
    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", "1")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 100, 72)).astype(ox.bf16.numpy)
    b = rng.standard_normal((3, 72, 130)).astype(ox.bf16.numpy)
    c = np.zeros((3, 100, 130), np.float32)
    cpu(batched_product, (1, 2, 3), a, b, c, 128, 128, 64)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)


def test_an_int_view_index_may_be_any_integer_scalar() -> None:
    @tile.kernel
    def pick(x: Slice[f32, 2], out: DisjointSlice[f32, 2], r: i32, B: Const[int]):
        tile.store(out, (0, 0), tile.load(x[r + 1], (0,), (B,))[None, :])

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = np.zeros((1, 4), np.float32)
    cpu(pick, 1, x, out, 1, 4)
    np.testing.assert_array_equal(out[0], x[2])


@tile.kernel
def count_per_row(x: Slice[i32, 2], counts: ox.AtomicSlice[i32, 2], B: Const[int]):
    """Block (c, r) counts row r's values 0..7 in chunk c, into `counts[r]`: atomics
    through a view; the old values come back (their sum is checked on the host)."""
    c, r = tile.bid(0), tile.bid(1)
    t = tile.load(x, (r, c), (1, B), padding=-1)
    for v in range(8):
        hits = tile.sum(tile.where(t == v, 1, 0))
        tile.atomic_add(counts[r], (v,), hits)


@tile.kernel
def bump(acc: ox.AtomicSlice[i32, 3], old: DisjointSlice[i32, 2], B: Const[int]):
    """Block (i, b) adds a tile of ones to `acc[b][0]` (row 0 of batch entry b, all blocks
    at once) and keeps what one column held before, in order of arrival."""
    i, b = tile.bid(0), tile.bid(1)
    before = tile.atomic_add(acc[b][0], (0,), tile.full((B,), 1, i32))
    tile.store(old, (b, i), tile.max(before)[None, None] + tile.zeros((1, 1), i32))


def test_atomic_tiles_through_a_view() -> None:
    acc = np.zeros((2, 3, 16), np.int32)
    old = np.full((2, 4), -1, np.int32)
    cpu(bump, (4, 2), acc, old, 16)
    assert (acc[:, 0] == 4).all() and (acc[:, 1:] == 0).all()
    assert sorted(old[0]) == [0, 1, 2, 3] and sorted(old[1]) == [0, 1, 2, 3]


def test_atomics_through_a_view() -> None:
    x = np.random.default_rng(3).integers(0, 8, (3, 300)).astype(np.int32)
    counts = np.zeros((3, 8), np.int32)
    cpu(count_per_row, (5, 3), x, counts, 64)
    want = np.stack([np.bincount(row, minlength=8) for row in x])
    np.testing.assert_array_equal(counts, want)


@ox.kernel
def head_sums(a: Slice[f32, 4], out: DisjointSlice[f32], twice: ox.RawSlice[f32, 4]):
    """A SIMT kernel over a rank-4 array: reads, and writes through a RawSlice."""
    i = ox.thread.index_1d()
    if i in out:
        s = f32(0.0)
        for b in range(a.shape[0]):
            for h in range(a.shape[1]):
                for t in range(a.shape[2]):
                    s += a[b, h, t, i]
                    with ox.unsafe():
                        twice[b, h, t, i] = a[b, h, t, i] * 2.0
        out[i] = s


def test_rank_4_arrays_in_a_simt_kernel() -> None:
    x = np.arange(2 * 3 * 5 * 7, dtype=np.float32).reshape(2, 3, 5, 7)
    out, twice = np.zeros(7, np.float32), np.zeros_like(x)
    with ox.device("cpu"):
        ox.launch(head_sums, ox.LaunchConfig(grid=1, block=32), x, out, twice)
    np.testing.assert_array_equal(out, x.sum((0, 1, 2)))
    np.testing.assert_array_equal(twice, 2 * x)


@tile.kernel
def per_batch_head(x: Slice[f32, 4], out: DisjointSlice[f32, 4], BM: Const[int],
                   BN: Const[int]):
    """torch's (batch, heads, seq, D) layout: block (i, h, b) reads `x[b, h]`'s row tile i
    and writes `out[b][h]`'s."""
    i, h, b = tile.bid(0), tile.bid(1), tile.bid(2)
    tile.store(out[b][h], (i, 0), tile.load(x[b, h], (i, 0), (BM, BN)) + x.shape[3])


def test_a_rank_4_array_through_views() -> None:
    x = np.arange(2 * 3 * 10 * 7, dtype=np.float32).reshape(2, 3, 10, 7)
    out = np.zeros_like(x)
    cpu(per_batch_head, (3, 3, 2), x, out, 4, 8)
    np.testing.assert_array_equal(out, x + 7)


def test_a_rank_4_tile_points_at_views() -> None:
    @tile.kernel
    def whole(x: Slice[f32, 4], out: DisjointSlice[f32, 4], B: Const[int]):
        tile.store(out, (0, 0, 0, 0), tile.load(x, (0, 0, 0, 0), (1, 1, B, B)))

    with pytest.raises(ox.UnsupportedFeatureError, match="rank 4") as e:
        whole.compile(Slice[f32, 4], DisjointSlice[f32, 4], 8)
    assert "q[b, h]" in (e.value.hint or "")


@tile.kernel(num_warps=8, num_stages=2)
def head_products(a: Slice[ox.bf16, 4], b: Slice[ox.bf16, 4], c: DisjointSlice[f32, 4],
                  BM: Const[int], BN: Const[int], BK: Const[int]):
    """One (M x K) @ (K x N) product per (batch, head), M <= BM and N <= BN."""
    hd, bt = tile.bid(0), tile.bid(1)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(a[bt, hd], 1, BK)):
        acc = tile.mma(tile.load(a[bt, hd], (0, k), (BM, BK)),
                       tile.load(b[bt, hd], (k, 0), (BK, BN)), acc)
    tile.store(c[bt, hd], (0, 0), acc)


def test_rank_4_views_come_by_4d_tma_on_sm90(monkeypatch) -> None:
    """Views at two leading indices on sm_90: 4-d TMA copies (box 1, 1 along batch and
    head) into the rings, 4-d TMA stores; and the same code run on the CPU."""
    from test_tile_tma_rings import V

    sig = (V(Slice[ox.bf16, 4], vectors=True),) * 2 + (V(DisjointSlice[f32, 4], vectors=True),)
    ptx = head_products.compile(*sig, 128, 128, 64, arch="sm_90").ptx
    copies = {k for k in re.findall(r"^\s*(cp\.async\.bulk\.tensor[\w.:]*)", ptx, re.M)}
    assert copies and all(".4d." in k for k in copies), copies
    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", "1")
    check_head_products(cpu)


def check_head_products(run) -> None:
    """head_products on (2, 3) heads of (100 x 136) @ (136 x 120), launched by `run`."""
    rng = np.random.default_rng(8)
    a = rng.standard_normal((2, 3, 100, 136)).astype(ox.bf16.numpy)
    b = rng.standard_normal((2, 3, 136, 120)).astype(ox.bf16.numpy)
    c = np.zeros((2, 3, 100, 120), np.float32)
    run(head_products, (3, 2), a, b, c, 128, 128, 64)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4,
                               atol=1e-3)


@tile.kernel(num_stages=2)
def row_sums_by_head(x: Slice[f32, 3], out: DisjointSlice[f32, 2], BN: Const[int]):
    """Block (r, b): row r of batch entry b summed in chunks, the next chunk's load issued
    a step ahead (`num_stages=2`: a view's loads pipelined through registers); the sum is
    one element of `out[b]`, at r."""
    r, b = tile.bid(0), tile.bid(1)
    xb = x[b]
    total = tile.zeros((1, BN), f32)
    for c in range(tile.num_tiles(xb, 1, BN)):
        total = total + tile.load(xb, (r, c), (1, BN))
    tile.store(out[b], (r,), tile.sum(total))


def test_a_views_loads_pipelined_through_a_loop() -> None:
    x = np.random.default_rng(2).standard_normal((3, 5, 300)).astype(np.float32)
    out = np.zeros((3, 5), np.float32)
    cpu(row_sums_by_head, (5, 3), x, out, 64)
    np.testing.assert_allclose(out, x.sum(2), rtol=1e-5, atol=1e-4)
