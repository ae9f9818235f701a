"""Tile shapes (issue 28, item 6): rank-3 tiles (loads and stores with ragged edges,
elementwise ops, reductions along each axis, permutes), batched products over the
leading dimension, `Tile.extract` (cuTile's sub-tile), `tile.split` and `tile.cat`,
against NumPy on the CPU; the diagnostics. tests/test_gpu_tile_lang.py runs the same
kernels on the GPU."""

from __future__ import annotations

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, Slice, bf16, f16, f32, i32, tile

pytest.importorskip("ml_dtypes")
rng = np.random.default_rng(286)


def cpu(kernel, grid, *args):
    with ox.device("cpu"):
        kernel[grid](*args)


# -- rank-3 tiles -----------------------------------------------------------------------


@tile.kernel(num_warps=4)
def rank3(x: Slice[f32, 3], o: DisjointSlice[f32, 3], s0: DisjointSlice[f32, 3],
          s1: DisjointSlice[f32, 3], s2: DisjointSlice[f32, 3], tr: DisjointSlice[f32, 3],
          A: Const[int], B: Const[int], C: Const[int]):
    i, j, k = tile.bid(0), tile.bid(1), tile.bid(2)
    t = tile.load(x, (i, j, k), (A, B, C), padding=0.0)
    tile.store(o, (i, j, k), tile.exp(t) * 2.0 - tile.max(t, 2, keepdims=True)
               + t[:, :, :] * tile.sum(t, 0)[None, :, :])
    tile.store(s0, (i, j, k), tile.sum(t, 0, keepdims=True))
    tile.store(s1, (i, j, k), tile.min(t, 1, keepdims=True))
    tile.store(s2, (i, j, k), tile.max(t, 2, keepdims=True))
    tile.store(tr, (k, j, i), t.permute((2, 1, 0)))


@pytest.mark.parametrize("shape,tile_shape", [((5, 20, 7), (4, 8, 8)),
                                              ((3, 9, 70), (2, 4, 32)),
                                              ((2, 2, 2), (8, 1, 4))])
def test_rank3_tiles_load_compute_reduce_store(shape, tile_shape) -> None:
    x = rng.standard_normal(shape).astype(np.float32)
    grid = tuple(tile.cdiv(n, b) for n, b in zip(shape, tile_shape, strict=True))
    A, B, C = tile_shape
    o = np.zeros_like(x)
    sums = [np.zeros((grid[0], shape[1], shape[2]), np.float32),
            np.zeros((shape[0], grid[1], shape[2]), np.float32),
            np.zeros((shape[0], shape[1], grid[2]), np.float32)]
    tr = np.zeros(shape[::-1], np.float32)
    cpu(rank3, grid, x, o, *sums, tr, A, B, C)
    padded = np.zeros([g * b for g, b in zip(grid, tile_shape, strict=True)], np.float32)
    padded[:shape[0], :shape[1], :shape[2]] = x
    want = np.zeros_like(padded)
    red = [np.zeros((grid[0], padded.shape[1], padded.shape[2]), np.float32),
           np.zeros((padded.shape[0], grid[1], padded.shape[2]), np.float32),
           np.zeros((padded.shape[0], padded.shape[1], grid[2]), np.float32)]
    for bi in range(grid[0]):
        for bj in range(grid[1]):
            for bk in range(grid[2]):
                at = (slice(bi * A, bi * A + A), slice(bj * B, bj * B + B),
                      slice(bk * C, bk * C + C))
                t = padded[at]
                want[at] = np.exp(t) * 2 - t.max(2, keepdims=True) + t * t.sum(0)
                red[0][bi, at[1], at[2]] = t.sum(0)
                red[1][at[0], bj, at[2]] = t.min(1)
                red[2][at[0], at[1], bk] = t.max(2)
    cut = (slice(shape[0]), slice(shape[1]), slice(shape[2]))
    np.testing.assert_allclose(o, want[cut], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sums[0], red[0][:, cut[1], cut[2]], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(sums[1], red[1][cut[0], :, cut[2]])
    np.testing.assert_array_equal(sums[2], red[2][cut[0], cut[1]])
    np.testing.assert_array_equal(tr, x.transpose(2, 1, 0))


# -- batched products ---------------------------------------------------------------------


@tile.kernel(num_warps=4)
def bmm(a: Slice[bf16, 3], b: Slice[bf16, 3], c: DisjointSlice[f32, 3], c2: DisjointSlice[f32, 3],
        BB: Const[int], BM: Const[int], BN: Const[int], BK: Const[int]):
    """cuTile's batch matmul on rank-3 tiles: `acc += a @ b` and the explicit tile.mma."""
    z, i, j = tile.bid(0), tile.bid(1), tile.bid(2)
    acc = tile.zeros((BB, BM, BN), f32)
    acc2 = tile.zeros((BB, BM, BN), f32)
    for k in range(tile.num_tiles(a, 2, BK)):
        x = tile.load(a, (z, i, k), (BB, BM, BK))
        y = tile.load(b, (z, k, j), (BB, BK, BN))
        acc += x @ y
        acc2 = tile.mma(x, y, acc2)
    tile.store(c, (z, i, j), acc)
    tile.store(c2, (z, i, j), acc2)


@pytest.mark.parametrize("batch,m,n,k,tiles", [(5, 40, 30, 50, (2, 16, 16, 16)),
                                               (3, 17, 9, 33, (4, 16, 8, 16)),
                                               (2, 64, 64, 64, (1, 32, 32, 32))])
def test_batched_products_over_the_leading_dimension(batch, m, n, k, tiles) -> None:
    a = rng.standard_normal((batch, m, k)).astype(bf16.numpy)
    b = rng.standard_normal((batch, k, n)).astype(bf16.numpy)
    c, c2 = np.zeros((batch, m, n), np.float32), np.zeros((batch, m, n), np.float32)
    BB, BM, BN, _ = tiles
    grid = (tile.cdiv(batch, BB), tile.cdiv(m, BM), tile.cdiv(n, BN))
    cpu(bmm, grid, a, b, c, c2, *tiles)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), atol=1e-4,
                               rtol=1e-5)
    np.testing.assert_array_equal(c, c2)


@tile.kernel(num_warps=2)
def shared_weight(x: Slice[f32, 3], w: Slice[f32, 2], o: DisjointSlice[f32, 3]):
    """A batch times one matrix (NumPy's broadcast of the batch), f32 in f32."""
    i = tile.bid(0)
    tile.store(o, (i, 0, 0), tile.load(x, (i, 0, 0), (4, 8, 16)) @ tile.load(w, (0, 0), (16, 8)))


def test_a_batch_times_one_matrix() -> None:
    x = rng.standard_normal((6, 8, 16)).astype(np.float32)
    w = rng.standard_normal((16, 5)).astype(np.float32)
    o = np.zeros((6, 8, 5), np.float32)
    cpu(shared_weight, 2, x, w, o)
    np.testing.assert_allclose(o, x.astype(np.float64) @ w, rtol=1e-5, atol=1e-5)


# -- extract, split, cat --------------------------------------------------------------------


@tile.kernel(num_warps=4)
def pieces(x: Slice[f32, 2], k: i32, o: DisjointSlice[f32, 2], e: DisjointSlice[f32, 2],
           s: DisjointSlice[f16, 2]):
    t = tile.load(x, (0, 0), (16, 32), padding=-1.0)
    left, right = tile.split(t, 2, axis=1)
    tile.store(o, (0, 0), tile.cat((right, left), axis=1))            # swap halves
    top, mid, rest = tile.split(t, (4, 8))                            # 4 + 4 + 8 rows
    tile.store(o, (1, 0), tile.cat((rest, mid, top), 0))
    tile.store(e, (0, 0), t.extract((1, 1), (8, 16)))                 # constant index
    tile.store(e, (1, 0), tile.extract(t, (k, 0), (8, 16)))           # run-time index
    tile.store(e, (0, 1), tile.cat((t.extract((0, 0), (8, 8)),
                                    tile.full((8, 8), 2.0, f16)), axis=1))  # promoted to f32
    tile.store(s, (0, 0), tile.cat((tile.split(t, 4, axis=1)[3].astype(f16),), axis=0))


@pytest.mark.parametrize("k", [0, 1, 3, -1])
def test_extract_split_and_cat(k: int) -> None:
    x = rng.standard_normal((13, 30)).astype(np.float32)  # ragged: padded with -1
    o, e = np.zeros((32, 32), np.float32), np.zeros((16, 32), np.float32)
    s = np.zeros((16, 8), np.float16)
    cpu(pieces, 1, x, np.int32(k), o, e, s)
    t = np.full((16, 32), -1.0, np.float32)
    t[:13, :30] = x
    np.testing.assert_array_equal(o[:16], np.concatenate([t[:, 16:], t[:, :16]], 1))
    np.testing.assert_array_equal(o[16:], np.concatenate([t[8:], t[4:8], t[:4]], 0))
    np.testing.assert_array_equal(e[:8, :16], t[8:, 16:])
    r = (k % 2) * 8  # a run-time index is taken modulo the 2 sub-tiles of rows
    np.testing.assert_array_equal(e[8:, :16], t[r:r + 8, :16])
    np.testing.assert_array_equal(e[:8, 16:], np.concatenate([t[:8, :8], np.full((8, 8), 2.0)],
                                                             1))
    np.testing.assert_array_equal(s, t[:, 24:].astype(np.float16))


@tile.kernel(num_warps=1)
def extract3(x: Slice[f32, 3], o: DisjointSlice[f32, 3], j: i32):
    t = tile.load(x, (0, 0, 0), (4, 8, 16))
    tile.store(o, (0, 0, 0), t.extract((1, j, 3), (2, 4, 4)))


def test_extract_from_a_rank3_tile() -> None:
    x = rng.standard_normal((4, 8, 16)).astype(np.float32)
    o = np.zeros((2, 4, 4), np.float32)
    cpu(extract3, 1, x, o, np.int32(1))
    np.testing.assert_array_equal(o, x[2:4, 4:8, 12:16])


def test_shape_ops_compile_for_the_gpu() -> None:
    ck = pieces.compile(Slice[f32, 2], i32, DisjointSlice[f32, 2], DisjointSlice[f32, 2],
                        DisjointSlice[f16, 2], arch="sm_90")
    assert ck.cubin
    ck = bmm.compile(Slice[bf16, 3], Slice[bf16, 3], DisjointSlice[f32, 3], DisjointSlice[f32, 3],
                     2, 32, 32, 32, arch="sm_80")
    assert "mma.sync.aligned.m16n8k16" in ck.ptx and ck.cubin


# -- diagnostics ---------------------------------------------------------------------------

V2 = Slice[f32, 2]
W2 = DisjointSlice[f32, 2]


@tile.kernel
def rank4(a: Slice[f32, 2], o: DisjointSlice[f32, 2]):
    tile.store(o, (0, 0), tile.reshape(tile.zeros((2, 2, 2, 2)), (4, 4)))


@tile.kernel
def extract_out_of_range(a: Slice[f32, 2], o: DisjointSlice[f32, 2]):
    tile.store(o, (0, 0), tile.load(a, (0, 0), (8, 8)).extract((2, 0), (4, 8)))


@tile.kernel
def extract_too_large(a: Slice[f32, 2], o: DisjointSlice[f32, 2]):
    tile.store(o, (0, 0), tile.load(a, (0, 0), (8, 8)).extract((0, 0), (16, 8)))


@tile.kernel
def split_not_power_of_two(a: Slice[f32, 2], o: DisjointSlice[f32, 2]):
    x, y = tile.split(tile.load(a, (0, 0), (8, 8)), (3,), axis=1)
    tile.store(o, (0, 0), x)


@tile.kernel
def cat_not_power_of_two(a: Slice[f32, 2], o: DisjointSlice[f32, 2]):
    x = tile.load(a, (0, 0), (8, 8))
    tile.store(o, (0, 0), tile.cat((x, x, x), 1))


@tile.kernel
def cat_disagree(a: Slice[f32, 2], o: DisjointSlice[f32, 2]):
    x = tile.load(a, (0, 0), (8, 8))
    tile.store(o, (0, 0), tile.cat((x, x[:, :].reshape((4, 16))), 1))


@tile.kernel
def batches_differ(a: Slice[f32, 3], o: DisjointSlice[f32, 3]):
    x = tile.load(a, (0, 0, 0), (2, 8, 8))
    y = tile.load(a, (0, 0, 0), (4, 8, 8))
    tile.store(o, (0, 0, 0), x @ y)


@pytest.mark.parametrize("kernel,types,error,message", [
    (rank4, (V2, W2), ox.UnsupportedFeatureError, "tiles of rank 4 are not supported"),
    (extract_out_of_range, (V2, W2), ox.KernelTypeError, "sub-tile index 2 is out of range"),
    (extract_too_large, (V2, W2), ox.KernelTypeError, "sub-tiles of one rank and no larger"),
    (split_not_power_of_two, (V2, W2), ox.KernelTypeError, "give (3, 5)"),
    (cat_not_power_of_two, (V2, W2), ox.KernelTypeError, "an extent of 24 along axis 1"),
    (cat_disagree, (V2, W2), ox.KernelTypeError, "joins tiles equal in the other dimensions"),
    (batches_differ, (Slice[f32, 3], DisjointSlice[f32, 3]), ox.KernelTypeError,
     "the batches differ"),
])
def test_shape_misuse_is_a_diagnostic(kernel, types, error, message) -> None:
    with pytest.raises(error) as info:
        kernel.compile(*types, arch="cpu")
    assert message in str(info.value)
    assert info.value.span is not None
