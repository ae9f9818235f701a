"""ox.tile on the CPU: every op of the first slice against NumPy, with ragged edges
(sizes that are not a multiple of the tile), padding, broadcasting and reductions
along each axis; and each kernel compiled to PTX and a cubin for sm_80 and sm_90."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, RawSlice, Slice, bf16, f32, i32, tile
from oxide.tile.layout import blocked

rng = np.random.default_rng(11)


def cpu(kernel, grid, *args):
    with ox.device("cpu"):
        kernel[grid](*args)


# -- layouts ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(1,), (8,), (128,), (1024,), (4, 8), (64, 32), (1, 256),
                                   (256, 1), (2, 2), (16, 128)])
@pytest.mark.parametrize("warps", [1, 4, 8])
def test_blocked_layout_covers_every_element_once(shape, warps):
    """Each element has exactly one canonical owner among the block's threads."""
    layout = blocked(shape, warps)
    seen: dict[tuple[int, ...], int] = {}
    lane_free = 31 & ~layout.lane_bits()
    warp_free = (warps - 1) & ~layout.warp_bits()
    for t in range(warps * 32):
        lane, warp = t % 32, t // 32
        base, owner = [], not (lane & lane_free) and not (warp & warp_free)
        for d, m in enumerate(layout.dims):
            pos = ((warp >> m.warp_shift) & (m.wpc - 1)) * m.tpw + ((lane >> m.lane_shift) & (m.tpw - 1))
            raw = pos * m.spt
            if m.span > shape[d]:
                owner &= raw < shape[d]
            base.append(raw & (shape[d] - 1))
        for offs in layout.offsets():
            coord = tuple(b + o for b, o in zip(base, offs, strict=True))
            assert all(0 <= c < n for c, n in zip(coord, shape, strict=True))
            if owner:
                seen[coord] = seen.get(coord, 0) + 1
    assert len(seen) == math.prod(shape) and set(seen.values()) == {1}


# -- loads, stores, elementwise ----------------------------------------------------------


@tile.kernel
def vadd(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32], B: Const[int]):
    i = tile.bid(0)
    tile.store(c, (i,), tile.load(a, (i,), (B,)) + tile.load(b, (i,), (B,)))


@pytest.mark.parametrize("n,B", [(1, 16), (1000, 256), (1024, 256), (77, 64), (5000, 1024)])
def test_vecadd_ragged(n, B):
    a = rng.standard_normal(n, dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    c = np.full(n + 0, -7.0, np.float32)
    cpu(vadd, tile.cdiv(n, B), a, b, c, B)
    np.testing.assert_array_equal(c, a + b)


def test_ox_launch_and_launch_config():
    n, B = 300, 128
    a = rng.standard_normal(n, dtype=np.float32)
    c = np.zeros(n, np.float32)
    ox.launch(vadd, (tile.cdiv(n, B),), a, a, c, B, device="cpu")
    np.testing.assert_array_equal(c, 2 * a)
    c[:] = 0
    ox.launch(vadd, ox.LaunchConfig(grid=3, block=128), a, a, c, B, device="cpu")
    np.testing.assert_array_equal(c, 2 * a)
    with pytest.raises(ox.LaunchError, match="block is 128 threads"):
        ox.launch(vadd, ox.LaunchConfig(grid=3, block=64), a, a, c, B, device="cpu")


@tile.kernel
def elementwise(x: Slice[f32, 2], y: Slice[f32, 2], o: DisjointSlice[f32, 2], which: Const[int],
                BM: Const[int], BN: Const[int]):
    i, j = tile.bid(0), tile.bid(1)
    a = tile.load(x, (i, j), (BM, BN), padding=1.0)
    b = tile.load(y, (i, j), (BM, BN), padding=1.0)
    if which == 0:
        r = a * b - a / (b + 3.0) + 2
    elif which == 1:
        r = tile.exp(a) + tile.exp2(b) + tile.tanh(a - b)
    elif which == 2:
        r = tile.log(tile.maximum(a, 0.5)) + tile.sqrt(tile.minimum(b * b, 4.0))
    elif which == 3:
        r = tile.rsqrt(a * a + 1.0) - -b
    else:
        r = tile.where(a > b, a, b * 2.0) + tile.where(a <= 0, 1.0, 0.0)
    tile.store(o, (i, j), r)


def _ref(which, a, b):
    if which == 0:
        return a * b - a / (b + 3.0) + 2
    if which == 1:
        return np.exp(a) + np.exp2(b) + np.tanh(a - b)
    if which == 2:
        return np.log(np.maximum(a, 0.5)) + np.sqrt(np.minimum(b * b, 4.0))
    if which == 3:
        return 1 / np.sqrt(a * a + 1.0) + b
    return np.where(a > b, a, b * 2.0) + np.where(a <= 0, 1.0, 0.0)


@pytest.mark.parametrize("which", range(5))
def test_elementwise_2d_ragged(which):
    M, N, BM, BN = 37, 45, 16, 32
    x = rng.standard_normal((M, N), dtype=np.float32)
    y = np.abs(rng.standard_normal((M, N), dtype=np.float32)) + 0.1
    o = np.zeros((M, N), np.float32)
    cpu(elementwise, (tile.cdiv(M, BM), tile.cdiv(N, BN)), x, y, o, which, BM, BN)
    np.testing.assert_allclose(o, _ref(which, x, y), rtol=2e-6, atol=2e-6)


@tile.kernel
def padded(x: Slice[f32], o: RawSlice[f32], B: Const[int]):
    t = tile.load(x, (0,), (B,), padding=-5.0)
    with ox.unsafe():
        tile.store(o, (0,), t)


def test_padding_fills_outside_elements():
    x = rng.standard_normal(10, dtype=np.float32)
    o = np.zeros(16, np.float32)
    cpu(padded, 1, x, o, 16)
    np.testing.assert_array_equal(o, np.concatenate([x, np.full(6, -5.0, np.float32)]))


@tile.kernel
def clipped(x: Slice[i32], o: DisjointSlice[i32], B: Const[int]):
    i = tile.bid(0)
    tile.store(o, (i,), tile.load(x, (i,), (B,)) * 3 + tile.arange(B) - 1)


def test_stores_clip_at_the_edge():
    """A tile past the end writes nothing outside the array (the guard word stays)."""
    x = np.arange(100, dtype=np.int32)
    buf = np.full(128, 12345, np.int32)
    o = buf[:100]
    cpu(clipped, 2, x, o, 64)
    ar = np.arange(100) % 64
    np.testing.assert_array_equal(o, x * 3 + ar - 1)
    assert (buf[100:] == 12345).all()


@tile.kernel
def casts(x: Slice[f32], o: DisjointSlice[bf16], oi: DisjointSlice[i32], B: Const[int]):
    i = tile.bid(0)
    t = tile.load(x, (i,), (B,))
    tile.store(o, (i,), (t * 2).astype(bf16))
    tile.store(oi, (i,), t.astype(i32) // 2 + t.astype(i32) % 3)


def test_astype_and_integer_ops():
    n = 200
    x = (rng.standard_normal(n) * 50).astype(np.float32)
    pytest.importorskip("ml_dtypes")  # NumPy's bfloat16

    o = np.zeros(n, dtype="bfloat16")
    oi = np.zeros(n, np.int32)
    cpu(casts, tile.cdiv(n, 64), x, o, oi, 64)
    np.testing.assert_array_equal(o.astype(np.float32), (x * 2).astype("bfloat16").astype(np.float32))
    xi = x.astype(np.int32)
    np.testing.assert_array_equal(oi, xi // 2 + xi % 3)


# -- broadcasting ---------------------------------------------------------------------


@tile.kernel
def outer(a: Slice[f32], b: Slice[f32], o: DisjointSlice[f32, 2], BM: Const[int],
          BN: Const[int]):
    i, j = tile.bid(0), tile.bid(1)
    x = tile.load(a, (i,), (BM,))
    y = tile.load(b, (j,), (BN,))
    tile.store(o, (i, j), x[:, None] * y[None, :] + y - tile.broadcast_to(x[:, None], (BM, BN)))


def test_broadcasting_outer_product():
    M, N = 50, 70
    a = rng.standard_normal(M, dtype=np.float32)
    b = rng.standard_normal(N, dtype=np.float32)
    o = np.zeros((M, N), np.float32)
    cpu(outer, (tile.cdiv(M, 32), tile.cdiv(N, 32)), a, b, o, 32, 32)
    np.testing.assert_allclose(o, a[:, None] * b[None, :] + b - a[:, None], rtol=1e-6, atol=1e-6)


@tile.kernel
def scalars(x: Slice[f32], o: DisjointSlice[f32], s: f32, B: Const[int]):
    i = tile.bid(0)
    t = tile.load(x, (i,), (B,))
    n = x.shape[0]
    tile.store(o, (i,), t * s + tile.full((B,), 1.5) + (tile.arange(B) + i * B < n).astype(f32))


def test_runtime_scalars_and_full():
    n = 90
    x = rng.standard_normal(n, dtype=np.float32)
    o = np.zeros(n, np.float32)
    cpu(scalars, tile.cdiv(n, 32), x, o, np.float32(0.5), 32)
    np.testing.assert_allclose(o, x * 0.5 + 1.5 + 1.0, rtol=1e-6)


# -- reductions -----------------------------------------------------------------------


@tile.kernel
def reduce2d(x: Slice[f32, 2], rows: DisjointSlice[f32, 2], cols: RawSlice[f32, 2],
             kind: Const[int], BM: Const[int], BN: Const[int]):
    i = tile.bid(0)
    t = tile.load(x, (i, 0), (BM, BN), padding=0.0 if kind == 0 else
                  (-float("inf") if kind == 1 else float("inf")))
    if kind == 0:
        r = tile.sum(t, 1, keepdims=True)
        c = tile.sum(t, axis=0)
    elif kind == 1:
        r = tile.max(t, 1, keepdims=True)
        c = tile.max(t, axis=0)
    else:
        r = tile.min(t, 1, keepdims=True)
        c = tile.min(t, axis=0)
    tile.store(rows, (i, 0), r)
    with ox.unsafe():
        tile.store(cols, (i, 0), c[None, :])


@pytest.mark.parametrize("kind", [0, 1, 2])
@pytest.mark.parametrize("M,N,BM,BN", [(5, 100, 4, 128), (64, 33, 16, 64), (3, 1000, 1, 1024),
                                       (40, 8, 64, 8), (9, 3, 2, 4)])
def test_reductions_along_each_axis(kind, M, N, BM, BN):
    x = rng.standard_normal((M, N), dtype=np.float32)
    grid = tile.cdiv(M, BM)
    rows = np.zeros((M, 1), np.float32)
    cols = np.zeros((grid, N), np.float32)
    cpu(reduce2d, grid, x, rows, cols, kind, BM, BN)
    f = (np.sum, np.max, np.min)[kind]
    np.testing.assert_allclose(rows[:, 0], f(x, axis=1), rtol=1e-5, atol=1e-5)
    for g in range(grid):
        np.testing.assert_allclose(cols[g], f(x[g * BM:(g + 1) * BM], axis=0), rtol=1e-5,
                                   atol=1e-5)


@tile.kernel
def total(x: Slice[i32], o: DisjointSlice[i32], B: Const[int]):
    i = tile.bid(0)
    t = tile.load(x, (i,), (B,))
    s = tile.sum(t)
    m = tile.max(t, 0)
    tile.store(o, (i,), tile.zeros((1,), i32) + s * 1000 + m)


@pytest.mark.parametrize("warps_n", [(1024, 4096), (8, 64)])
def test_full_reduction_to_a_scalar(warps_n):
    B, n = warps_n
    x = rng.integers(-20, 20, n).astype(np.int32)
    g = tile.cdiv(n, B)
    o = np.zeros(g, np.int32)
    cpu(total, g, x, o, B)
    want = [x[k * B:(k + 1) * B].sum() * 1000 + x[k * B:(k + 1) * B].max() for k in range(g)]
    np.testing.assert_array_equal(o, want)


@tile.kernel(num_warps=1)
def half_total(x: Slice[ox.f16, 3], o: DisjointSlice[ox.f16, 1], BL: Const[int],
               BM: Const[int], BN: Const[int]):
    tile.store(o, (0,), tile.sum(tile.load(x, (0, 0, 0), (BL, BM, BN))))


def test_a_16_bit_sum_over_several_axes_is_rounded_once() -> None:
    """`16-bit floats reduce in f32`: over every axis of a 3-d f16 tile the partial sums
    of one axis (here past f16's 65504) stay f32, and the total is rounded once (a tile
    fuzz find, seed 63 program 41: the sum was inf)."""
    x = np.full((4, 8, 8), -1.0, np.float16)
    x[0, 0, :] = 8500.0  # one row of 8 sums past f16's range (67968)
    x[2] = -100.0  # the whole does not (61384)
    o = np.zeros(1, np.float16)
    cpu(half_total, 1, x, o, 4, 8, 8)
    want = x.astype(np.float32).sum()
    assert x[0, 0].astype(np.float32).sum() > 65504 > want
    assert o[0] == np.float16(want)


@tile.kernel
def argreduce(x: Slice[f32, 2], rows: DisjointSlice[i32, 2], cols: RawSlice[i32, 2],
              whole: RawSlice[i32], kind: Const[int], BM: Const[int], BN: Const[int]):
    i = tile.bid(0)
    pad = -math.inf if kind == 0 else math.inf
    t = tile.load(x, (i, 0), (BM, BN), padding=pad)
    if kind == 0:
        r, c, w = tile.argmax(t, 1, keepdims=True), tile.argmax(t, axis=0), tile.argmax(t)
    else:
        r, c, w = tile.argmin(t, 1, keepdims=True), tile.argmin(t, axis=0), tile.argmin(t)
    tile.store(rows, (i, 0), r)
    with ox.unsafe():
        tile.store(cols, (i, 0), c[None, :])
        tile.store(whole, (i,), tile.zeros((1,), i32) + w)


@pytest.mark.parametrize("kind", [0, 1])
@pytest.mark.parametrize("M,N,BM,BN", [(5, 100, 4, 128), (64, 33, 16, 64), (2, 1000, 1, 1024),
                                       (40, 8, 64, 8)])
def test_argmax_argmin(kind, M, N, BM, BN):
    x = rng.integers(-4, 5, (M, N)).astype(np.float32)  # many ties: the first one wins
    grid = tile.cdiv(M, BM)
    rows = np.zeros((M, 1), np.int32)
    cols = np.zeros((grid, N), np.int32)
    whole = np.zeros(grid, np.int32)
    cpu(argreduce, grid, x, rows, cols, whole, kind, BM, BN)
    f = (np.argmax, np.argmin)[kind]
    np.testing.assert_array_equal(rows[:, 0], f(x, axis=1))
    for g in range(grid):
        block = x[g * BM:(g + 1) * BM]
        np.testing.assert_array_equal(cols[g], f(block, axis=0))
        padded = np.full((BM, BN), -np.inf if kind == 0 else np.inf, np.float32)
        padded[:block.shape[0], :N] = block
        assert whole[g] == f(padded)


@tile.kernel
def scans(x: Slice[i32, 2], rows: DisjointSlice[i32, 2], cols: RawSlice[i32, 2],
          BM: Const[int], BN: Const[int]):
    i = tile.bid(0)
    t = tile.load(x, (i, 0), (BM, BN))
    tile.store(rows, (i, 0), tile.cumsum(t, 1))
    with ox.unsafe():
        tile.store(cols, (i, 0), tile.cumsum(t, axis=0))


@pytest.mark.parametrize("M,N,BM,BN", [(4, 100, 4, 128), (30, 64, 16, 64), (1, 1000, 1, 1024),
                                       (64, 8, 64, 8), (2, 3, 2, 4), (128, 2, 128, 2),
                                       (8, 1024, 8, 1024)])
def test_cumsum_along_each_axis(M, N, BM, BN):
    """Exact (integers): wrapped layouts (segments), several warps and repetitions."""
    x = rng.integers(-5, 5, (M, N)).astype(np.int32)
    grid = tile.cdiv(M, BM)
    rows = np.zeros((M, N), np.int32)
    cols = np.zeros((M, N), np.int32)
    cpu(scans, grid, x, rows, cols, BM, BN)
    np.testing.assert_array_equal(rows, np.cumsum(x, 1))
    for g in range(grid):
        np.testing.assert_array_equal(cols[g * BM:(g + 1) * BM], np.cumsum(x[g * BM:(g + 1) * BM], 0))


@tile.kernel(num_warps=8)
def scan_1d(x: Slice[f32], o: DisjointSlice[f32], B: Const[int]):
    i = tile.bid(0)
    tile.store(o, (i,), tile.cumsum(tile.load(x, (i,), (B,))))


@pytest.mark.parametrize("B", [1, 2, 32, 64, 256, 2048, 8192])
def test_cumsum_1d(B):
    n = B * 2 + 1
    x = rng.standard_normal(n, dtype=np.float32)
    o = np.zeros(n, np.float32)
    cpu(scan_1d, tile.cdiv(n, B), x, o, B)
    for g in range(tile.cdiv(n, B)):
        want = np.cumsum(x[g * B:(g + 1) * B], dtype=np.float64)
        np.testing.assert_allclose(o[g * B:(g + 1) * B], want, rtol=1e-4, atol=1e-4)


@tile.kernel
def argmax_nan(x: Slice[f32], o: DisjointSlice[i32], B: Const[int]):
    i = tile.bid(0)
    t = tile.load(x, (i,), (B,), padding=-math.inf)
    tile.store(o, (i,), tile.zeros((2,), i32) + tile.where(tile.arange(2) == 0,
                                                           tile.argmax(t), tile.argmin(t)))


def test_argmax_first_nan_wins_as_in_numpy():
    x = rng.standard_normal(300).astype(np.float32)
    x[[17, 100, 250]] = np.nan
    o = np.zeros(2, np.int32)
    cpu(argmax_nan, 1, x, o, 512)
    assert list(o) == [np.argmax(x), np.argmin(x)] == [17, 17]


@tile.kernel(num_warps=8)
def softmax(x: Slice[f32, 2], y: DisjointSlice[f32, 2], BM: Const[int], BN: Const[int]):
    i = tile.bid(0)
    t = tile.load(x, (i, 0), (BM, BN), padding=-math.inf)
    e = tile.exp(t - tile.max(t, 1, keepdims=True))
    tile.store(y, (i, 0), e / tile.sum(e, 1)[:, None])


@pytest.mark.parametrize("M,N,BM,BN", [(7, 100, 4, 128), (3, 5, 2, 8), (20, 700, 1, 1024)])
def test_softmax_rows(M, N, BM, BN):
    x = rng.standard_normal((M, N), dtype=np.float32)
    y = np.zeros_like(x)
    cpu(softmax, tile.cdiv(M, BM), x, y, BM, BN)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


@tile.kernel(num_warps=2)
def row_stats(x: Slice[f32, 2], y: DisjointSlice[f32, 2], BM: Const[int], BN: Const[int]):
    """Sum and max of each row, tile by tile along the row: tiles carried through a loop
    with run-time bounds."""
    i = tile.bid(0)
    acc = tile.zeros((BM, 1))
    m = tile.full((BM, 1), -math.inf)
    for k in range(tile.num_tiles(x, 1, BN)):
        acc = acc + tile.sum(tile.load(x, (i, k), (BM, BN)), 1, keepdims=True)
        t = tile.load(x, (i, k), (BM, BN), padding=-math.inf)
        m = tile.maximum(m, tile.max(t, 1, keepdims=True))
    tile.store(y, (i, 0), tile.where(tile.arange(2)[None, :] == 0, acc, m))


@tile.kernel
def strided_loop(x: Slice[i32], y: DisjointSlice[i32], B: Const[int]):
    """A loop counting down with a step of -2 from a run-time start, and a scalar carried."""
    i = tile.bid(0)
    acc = tile.zeros((B,), i32)
    count = 0
    for k in range(tile.num_tiles(x, 0, B) - 1, -1, -2):
        acc += tile.load(x, (k,), (B,))
        count += 1
    tile.store(y, (i,), acc * 100 + count)


@pytest.mark.parametrize("M,N,BM,BN", [(37, 1000, 8, 128), (4, 64, 4, 64), (9, 5, 16, 4)])
def test_loops_carry_tiles(M, N, BM, BN):
    x = rng.standard_normal((M, N), dtype=np.float32)
    y = np.zeros((M, 2), np.float32)
    cpu(row_stats, tile.cdiv(M, BM), x, y, BM, BN)
    np.testing.assert_allclose(y[:, 0], x.sum(1), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(y[:, 1], x.max(1))


def test_loop_with_negative_step_and_scalar_carry():
    B, n = 32, 32 * 5 - 3
    x = rng.integers(-9, 9, n).astype(np.int32)
    y = np.zeros(B, np.int32)
    cpu(strided_loop, 1, x, y, B)
    xp = np.concatenate([x, np.zeros(3, np.int32)]).reshape(5, B)
    np.testing.assert_array_equal(y, xp[[4, 2, 0]].sum(0) * 100 + 3)


@tile.func
def normalized(t):
    e = tile.exp(t - tile.max(t, 1, keepdims=True))
    return e / tile.sum(e, 1, keepdims=True)


@tile.func
def put_row(o, row, v):
    tile.store(o, (row, 0), v)


@tile.kernel
def softmax_bf16(x: Slice[bf16, 2], y: DisjointSlice[bf16, 2], BN: Const[int]):
    """bf16 in and out, computed in f32 by an @ox.tile.func; the store through another."""
    i = tile.bid(0)
    t = tile.load(x, (i, 0), (1, BN), padding=-math.inf).astype(f32)
    put_row(y, i, normalized(t).astype(bf16))


def test_tile_funcs_and_bf16():
    pytest.importorskip("ml_dtypes")
    x = rng.standard_normal((6, 40)).astype("bfloat16")
    y = np.zeros_like(x)
    cpu(softmax_bf16, 6, x, y, 64)
    xf = x.astype(np.float32)
    e = np.exp(xf - xf.max(1, keepdims=True))
    want = (e / e.sum(1, keepdims=True)).astype("bfloat16").astype(np.float32)
    np.testing.assert_allclose(y.astype(np.float32), want, rtol=1e-2, atol=1e-3)


@tile.kernel
def in_place(o: DisjointSlice[f32, 2], BM: Const[int], BN: Const[int]):
    """A DisjointSlice read and written at the block's own tile."""
    i, j = tile.bid(0), tile.bid(1)
    t = tile.load(o, (i, j), (BM, BN))
    tile.store(o, (i, j), t * 2.0 + 1.0)


def test_disjoint_slice_updated_in_place():
    x = rng.standard_normal((20, 30), dtype=np.float32)
    o = x.copy()
    cpu(in_place, (tile.cdiv(20, 8), tile.cdiv(30, 16)), o, 8, 16)
    np.testing.assert_array_equal(o, x * 2 + 1)


@tile.kernel
def shapes(x: Slice[f32, 2], t: DisjointSlice[f32, 2], r: RawSlice[f32, 2], BM: Const[int],
           BN: Const[int]):
    i, j = tile.bid(0), tile.bid(1)
    a = tile.load(x, (i, j), (BM, BN))
    tile.store(t, (j, i), a.permute((1, 0)))
    with ox.unsafe():
        tile.store(r, (i * BM + j, 0), tile.reshape(a, (BN, BM)) + tile.arange(BM)[None, :])


@pytest.mark.parametrize("M,N,BM,BN", [(33, 70, 16, 32), (8, 8, 8, 8), (5, 3, 4, 2)])
def test_permute_and_reshape(M, N, BM, BN):
    x = rng.standard_normal((M, N), dtype=np.float32)
    gm, gn = tile.cdiv(M, BM), tile.cdiv(N, BN)
    t = np.zeros((N, M), np.float32)
    r = np.zeros((gm * BM * BN + gn * BN, BM), np.float32)
    cpu(shapes, (gm, gn), x, t, r, BM, BN)
    np.testing.assert_array_equal(t, x.T)
    xp = np.zeros((gm * BM, gn * BN), np.float32)
    xp[:M, :N] = x
    for i in range(gm):
        for j in range(gn):
            block = xp[i * BM:(i + 1) * BM, j * BN:(j + 1) * BN].reshape(BN, BM)
            row = (i * BM + j) * BN
            np.testing.assert_array_equal(r[row:row + BN], block + np.arange(BM, dtype=np.float32))


@tile.kernel
def branches(x: Slice[f32, 2], y: DisjointSlice[f32, 2], s: f32, BN: Const[int]):
    """`if` on scalars: a reduction's result, a bid; names rebound in the arms merge
    (one arm holds a reduction and its barriers, reached by the whole block or none)."""
    i = tile.bid(0)
    t = tile.load(x, (i, 0), (2, BN))
    if tile.max(t) > s:
        t = t - tile.sum(t, 1, keepdims=True)
        flag = 1.0
    elif i % 2 == 0:
        flag = 2.0
    else:
        t = t * 0.0
        flag = 3.0
    tile.store(y, (i, 0), t + flag)


def test_if_on_scalars():
    x = rng.standard_normal((12, 30), dtype=np.float32)
    y = np.zeros_like(x)
    cpu(branches, 6, x, y, np.float32(1.5), 32)
    want = np.zeros_like(x)
    for b in range(6):
        t = x[2 * b:2 * b + 2]
        if t.max() > 1.5:
            want[2 * b:2 * b + 2] = t - t.sum(1, keepdims=True) + 1
        elif b % 2 == 0:
            want[2 * b:2 * b + 2] = t + 2
        else:
            want[2 * b:2 * b + 2] = 3
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


T = ox.TypeVar("T")


@tile.kernel
def generic(a: Slice[T], o: DisjointSlice[T], B: Const[int]):
    i = tile.bid(0)
    t = tile.load(a, (i,), (B,))
    tile.store(o, (i,), t - tile.max(t) + tile.sum(t))


@pytest.mark.parametrize("dt", [np.float64, np.int64, np.float16, np.int16, np.uint8])
def test_generic_dtypes(dt):
    """One kernel over a TypeVar: 64-bit shuffles, 16- and 8-bit values reduced in 32 bits."""
    a = (np.arange(100) % 7).astype(dt)
    o = np.zeros_like(a)
    cpu(generic, tile.cdiv(100, 64), a, o, 64)
    want = np.concatenate([p - p.max() + p.sum(dtype=dt) for p in (a[:64], a[64:])]).astype(dt)
    np.testing.assert_array_equal(o, want)
    assert generic.compile(a, o, 64, arch="sm_80").cubin


def test_aliasing_is_checked_at_launch():
    a = np.zeros(64, np.float32)
    with pytest.raises(ox.AliasingError):
        cpu(vadd, 1, a, a, a, 64)


def test_launch_forms():
    """`kernel[grid]`, `kernel[(gx, gy)]`, `kernel[grid, stream]` (no stream on the CPU)."""
    n, B = 200, 64
    a = rng.standard_normal(n, dtype=np.float32)
    for config in (tile.cdiv(n, B), (tile.cdiv(n, B), 1), ((tile.cdiv(n, B),), None)):
        c = np.zeros(n, np.float32)
        cpu(vadd, config, a, a, c, B)
        np.testing.assert_array_equal(c, 2 * a)


def test_grid_rule_refuses_blocks_sharing_a_tile():
    """A store at (tile.bid(0),) is unique along x only: a grid with y > 1 is refused."""
    a = np.zeros(64, np.float32)
    with pytest.raises(ox.LaunchError, match="grid.y = 2"):
        cpu(vadd, (1, 2), a, a, a.copy(), 64)


# -- GPU code generation, checked locally --------------------------------------------------


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_and_cubin(arch):
    x2 = np.zeros((4, 4), np.float32)
    for k, args in ((vadd, (np.zeros(4, np.float32),) * 3 + (256,)),
                    (softmax, (x2, x2, 2, 1024)),
                    (reduce2d, (x2, x2, x2, 1, 16, 64)),
                    (outer, (np.zeros(4, np.float32),) * 2 + (x2, 32, 32)),
                    (row_stats, (x2, x2, 8, 128)),
                    (branches, (x2, x2, np.float32(1), 32)),
                    (scan_1d, (np.zeros(4, np.float32),) * 2 + (2048,)),
                    (argreduce, (x2, x2.astype(np.int32), x2.astype(np.int32),
                                 np.zeros(4, np.int32), 0, 16, 64))):
        ck = k.compile(*args, arch=arch)
        assert ".entry" in ck.ptx and len(ck.cubin) > 0
        if k is softmax:
            assert "shfl.sync.bfly" in ck.ptx and "bar.sync" in ck.ptx


@tile.kernel
def generic_scaled(a: Slice[T], o: DisjointSlice[T], B: Const[int]):
    """`astype(T)`: back to whatever dtype T stands for in this launch."""
    i = tile.bid(0)
    t = tile.load(a, (i,), (B,)).astype(f32)
    tile.store(o, (i,), (t * 0.5).astype(T))


@pytest.mark.parametrize("dt", [np.float32, np.float16, bf16.numpy])
def test_astype_of_a_type_variable(dt):
    a = np.arange(100).astype(dt)
    o = np.zeros_like(a)
    cpu(generic_scaled, tile.cdiv(100, 64), a, o, 64)
    np.testing.assert_array_equal(o, (a.astype(np.float32) * 0.5).astype(dt))


@pytest.mark.parametrize("dt", [np.float32, bf16.numpy])
def test_softmax_and_layernorm_examples_in_each_dtype(dt):
    """The examples are generic over the element type: bf16 rows computed in f32."""
    from oxide.examples import tile_layernorm, tile_softmax

    rng = np.random.default_rng(5)
    x = (rng.standard_normal((3, 200)) * 3).astype(dt)
    w, b = rng.standard_normal(200).astype(dt), rng.standard_normal(200).astype(dt)
    y, z = np.zeros_like(x), np.zeros_like(x)
    cpu(tile_softmax.tile_softmax, 3, x, y, 256)
    cpu(tile_layernorm.tile_layernorm, 3, x, w, b, z, np.float32(1e-5), 256)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(1, keepdims=True))
    d = x64 - x64.mean(1, keepdims=True)
    ln = d / np.sqrt((d * d).mean(1, keepdims=True) + 1e-5) * w.astype(np.float64) + b
    tol = 1e-5 if dt == np.float32 else 2 ** -8
    np.testing.assert_allclose(y.astype(np.float64), e / e.sum(1, keepdims=True), rtol=tol,
                               atol=1e-7)
    np.testing.assert_allclose(z.astype(np.float64), ln, rtol=tol, atol=tol * 8)


def test_an_unbound_type_variable_is_an_error():
    U = ox.TypeVar("U")

    @tile.kernel
    def unbound(a: Slice[f32], o: DisjointSlice[f32], B: Const[int]):
        i = tile.bid(0)
        tile.store(o, (i,), tile.load(a, (i,), (B,)).astype(U))

    with pytest.raises(ox.KernelTypeError, match="type variable `U` is not bound"):
        unbound.compile(Slice[f32], DisjointSlice[f32], 64)


@tile.func
def store_comparisons(out, x, y, n):
    """Rows 0-5 of `out`: `x <op> n`; rows 6-11: `n <op> y` (x is 2-d, y 1-d)."""
    tile.store(out, (0, 0), (x < n).astype(i32))
    tile.store(out, (1, 0), (x <= n).astype(i32))
    tile.store(out, (2, 0), (x > n).astype(i32))
    tile.store(out, (3, 0), (x >= n).astype(i32))
    tile.store(out, (4, 0), (x == n).astype(i32))
    tile.store(out, (5, 0), (x != n).astype(i32))
    tile.store(out, (6, 0), (n < y).astype(i32)[None, :])
    tile.store(out, (7, 0), (n <= y).astype(i32)[None, :])
    tile.store(out, (8, 0), (n > y).astype(i32)[None, :])
    tile.store(out, (9, 0), (n >= y).astype(i32)[None, :])
    tile.store(out, (10, 0), (n == y).astype(i32)[None, :])
    tile.store(out, (11, 0), (n != y).astype(i32)[None, :])


def comparisons(x: np.ndarray, y: np.ndarray, n: int) -> np.ndarray:
    """What `store_comparisons` writes, by NumPy (int64: no wrapping)."""
    return np.array([x < n, x <= n, x > n, x >= n, x == n, x != n,
                     n < y, n <= y, n > y, n >= y, n == y, n != y], dtype=np.int32)


@tile.kernel
def compare_to_scalar(n: ox.i64, out: DisjointSlice[i32, 2], B: Const[int]):
    """Each comparison of an i32 tile with an i64 scalar, both ways round (the frontend
    computes these in i32, clamping the scalar: `narrow_compare`)."""
    x = tile.arange(B) + (2**31 - B)  # i32's top B values ...
    y = tile.arange(B) + -(2**31)  # ... and its bottom B
    store_comparisons(out, x[None, :], y, n)


@pytest.mark.parametrize("n", [5, 2**31 - 1, 2**31, 2**31 - 3, 2**40, -(2**31), -(2**31) - 1,
                               -(2**31) + 2, -(2**40), 0])
def test_narrow_int_tile_against_wide_scalar(n):
    """The narrowed compare gives NumPy's answers for an i64 scalar inside, at the ends of
    and outside i32's range."""
    B = 16
    out = np.zeros((12, B), np.int32)
    cpu(compare_to_scalar, (1,), n, out, B)
    x = np.arange(B, dtype=np.int64)
    np.testing.assert_array_equal(out, comparisons(x + (2**31 - B), x - 2**31, n))


@tile.kernel(num_warps=2)
def compare_arange(n: ox.i64, out: DisjointSlice[i32, 2], B: Const[int]):
    """`tile.arange(B) (+ 3) <op> n` both ways round: the frontend compares each element's
    static offset with one per-thread room (`TileEmitter.compare_offsets`)."""
    store_comparisons(out, tile.arange(B)[None, :], tile.arange(B) + 3, n)


@pytest.mark.parametrize("B", [8, 256, 2048])
@pytest.mark.parametrize("n", [0, 1, 5, 100, 255, 256, 257, 2050, -1, -3, 2**31 - 1, 2**31,
                               2**40, -(2**31), -(2**31) - 1, -(2**40)])
def test_arange_against_a_scalar(B, n):
    """`arange < n` (as in layernorm's mask) for n inside the tile, at its ends, beyond
    it, negative, and at and past i32's ends, with 1 to 16 elements a thread."""
    out = np.zeros((12, B), np.int32)
    cpu(compare_arange, (1,), n, out, B)
    x = np.arange(B, dtype=np.int64)
    np.testing.assert_array_equal(out, comparisons(x, x + 3, n))


@tile.kernel
def compare_i8(n: ox.i32, out: DisjointSlice[i32, 2], B: Const[int]):
    """An i8 tile against an i32 scalar (`narrow_compare`'s clamped path at i8's width)."""
    x = (tile.arange(B) + -(B // 2)).astype(ox.i8)
    store_comparisons(out, x[None, :], x, n)


@pytest.mark.parametrize("n", [0, 5, -64, -128, -129, 127, 128, 1000, -1000, 2**31 - 1,
                               -(2**31)])
def test_narrow_i8_tile_against_i32_scalar(n):
    B = 256  # x runs over all of i8: -128 ... 127
    out = np.zeros((12, B), np.int32)
    cpu(compare_i8, (1,), n, out, B)
    x = np.arange(B, dtype=np.int64) - B // 2
    np.testing.assert_array_equal(out, comparisons(x, x, n))


U = ox.TypeVar("U")


@tile.kernel(num_warps=2)
def compare_row_length(x: Slice[U, 2], out: DisjointSlice[i32, 2], B: Const[int]):
    """`tile.arange(B) (+ 3) <op> x.shape[1]`: where the launch specialized `x` on 16-byte
    row vectors, the row length is a multiple of 16 bytes' worth of elements, and `lt` /
    `ge` share one compare per aligned run (`TileEmitter.compare_offsets`)."""
    store_comparisons(out, tile.arange(B)[None, :], tile.arange(B) + 3, x.shape[1])


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.float64])
@pytest.mark.parametrize("B", [16, 256, 1024])
@pytest.mark.parametrize("n", [16, 32, 48, 64, 112, 256, 496, 512, 1008, 1024, 2048, 17, 250])
def test_arange_against_a_row_length(dtype, B, n):
    """Shared compares give every element NumPy's answer, for row lengths inside the tile,
    at its end and past it, with 1 to 16 elements a thread (lengths that are not multiples
    of the vector take the unshared path)."""
    from oxide.runtime.args import make_plan, read_args
    from oxide.runtime.device import parse_device

    x = np.zeros((1, n), dtype)
    out = np.zeros((12, B), np.int32)
    args = (x, out, B)
    device = parse_device("cpu")
    _key, views = read_args(compare_row_length, args, device)
    fits = make_plan(compare_row_length, args, views, device).signature[0].vectors
    assert fits == (n * x.itemsize % 16 == 0 and x.ctypes.data % 16 == 0)
    cpu(compare_row_length, (1,), *args)
    k = np.arange(B, dtype=np.int64)
    np.testing.assert_array_equal(out, comparisons(k, k + 3, n))


@pytest.mark.parametrize("vectors,shared", [(True, True), (False, False), (None, False)])
def test_a_row_length_mask_takes_one_compare_per_vector(vectors, shared):
    """`arange(B) < x.shape[1]` over 16 f32 a thread: one compare per 4 elements where
    the launch knows the rows take 16-byte vectors, else one per element."""
    from oxide import types as T

    @tile.kernel(num_warps=2)
    def masked(x: Slice[f32, 2], out: DisjointSlice[f32, 2], B: Const[int]):
        t = tile.load(x, (0, 0), (1, B))
        tile.store(out, (0, 0), tile.where(tile.arange(B)[None, :] < x.shape[1], t, 1.0))

    arr = T.ArrayType("slice", f32, 2, True, vectors=vectors)
    res = T.ArrayType("disjoint", f32, 2, True, vectors=vectors)
    ptx = masked.compile(arr, res, 1024, arch="sm_90").ptx
    compares = len(re.findall(r"setp\.\w+\.s32", ptx))
    assert compares == (4 if shared else 16), ptx


@tile.kernel(num_warps=8)
def flip_big(x: Slice[f32, 2], out: DisjointSlice[f32, 2], B: Const[int]):
    """A 128 x 128 f32 transpose: its layout conversion stages 64.5 KiB in shared memory."""
    i, j = tile.bid(0), tile.bid(1)
    tile.store(out, (j, i), tile.load(x, (i, j), (B, B)).permute((1, 0)))


def test_more_than_48_kib_of_shared_memory_is_an_sm_90a_kernel():
    """Past the 48 KiB every GPU gives static shared memory, a tile kernel compiles for
    sm_90a when asked for sm_90 (227 KiB there) and is refused with the count elsewhere;
    the CPU runs it."""
    ptx = flip_big.compile(Slice[f32, 2], DisjointSlice[f32, 2], 128, arch="sm_90").ptx
    assert ".target sm_90a" in ptx and re.search(r"\.shared .*\[66048\]", ptx)
    with pytest.raises(ox.UnsupportedFeatureError, match=r"66048 bytes .* on sm_90"):
        flip_big.compile(Slice[f32, 2], DisjointSlice[f32, 2], 128, arch="sm_80")
    x = rng.standard_normal((256, 384)).astype(np.float32)
    out = np.zeros((384, 256), np.float32)
    cpu(flip_big, (2, 3), x, out, 128)
    np.testing.assert_array_equal(out, x.T)
