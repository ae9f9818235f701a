"""Issue 28's tile language on the GPU: the CPU suites' kernels (tests/test_tile_math.py,
test_tile_product_f32.py, test_tile_control.py, test_tile_shapes.py, test_tile_random.py,
test_tile_scalars_atomics.py) against NumPy, within the same bounds; the random bits
against the CPU's, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import oxide as ox
from oxide import bf16, tile

pytestmark = pytest.mark.gpu
rng = np.random.default_rng(2800)


def gpu(kernel, grid, *args):
    """Run on device 0 with the arrays copied in; returns the arrays as NumPy."""
    dev = [ox.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    with ox.device(0):
        kernel[grid](*dev)
    return [d.to_numpy() if isinstance(a, np.ndarray) else a for a, d in zip(args, dev,
                                                                            strict=True)]


# -- item 7: `@` of halves is f32 ----------------------------------------------------------


def test_products_of_halves_are_f32_on_the_gpu():
    from test_tile_product_f32 import _layer, linear_aug, linear_mma, linear_spelled

    x, w, want = _layer(100, 72, 90)
    grid = (tile.cdiv(100, 64), tile.cdiv(90, 64))
    (_, _, y, *_) = gpu(linear_aug, grid, x, w, np.zeros((100, 90), np.float32), 64, 64, 32)
    assert np.abs(y - want).max() < 1e-4
    (_, _, ym, *_) = gpu(linear_mma, grid, x, w, np.zeros((100, 90), np.float32), 64, 64, 32)
    (_, _, ys, ys2, o16, *_) = gpu(linear_spelled, grid, x, w,
                                   np.zeros((100, 90), np.float32),
                                   np.zeros((100, 90), np.float32),
                                   np.zeros((100, 90), bf16.numpy), 64, 64, 32)
    np.testing.assert_array_equal(y, ym)
    np.testing.assert_array_equal(ys, ym)
    np.testing.assert_array_equal(ys2, ym)
    np.testing.assert_array_equal(o16, ym.astype(bf16.numpy))


# -- item 1: elementwise math ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["exp", "exp2", "log", "log2", "log1p", "sqrt", "rsqrt",
                                  "tanh", "sin", "cos", "tan", "erf", "floor", "ceil", "abs",
                                  "sigmoid"])
def test_unary_function_on_the_gpu(name):
    from test_tile_math import UNARY, UNARY_KERNELS, assert_within

    ref, bound, (lo, hi) = UNARY[name]
    n, B = 1000, 256
    x = rng.uniform(lo, hi, n).astype(np.float32)
    _, o, _, so, _ = gpu(UNARY_KERNELS[name], tile.cdiv(n, B), x, np.zeros(n, np.float32),
                         np.float32(x[3]), np.zeros(n, np.float32), B)
    assert_within(o, ref(x.astype(np.float64)), np.float32, bound)
    assert_within(so, np.full(n, ref(np.float64(x[3]))), np.float32, bound)


def test_exp2_flush_to_zero_on_the_gpu():
    """The GPU's `ex2.approx.ftz.f32` (and f64's flush after libdevice's exp2) give zeros
    exactly where the CPU's flush does, the rest within the same bounds."""
    from test_tile_math import assert_exp2_flushed, exp2_flush_inputs, exp2_flushed

    x = exp2_flush_inputs()
    n, B = x.size, 256
    _, o, o64, o16, kept, _ = gpu(exp2_flushed, tile.cdiv(n, B), x, np.zeros(n, np.float32),
                                  np.zeros(n, np.float64), np.zeros(n, bf16.numpy),
                                  np.zeros(n, np.float32), B)
    assert_exp2_flushed(x, o, 1.0, np.float32, np.float32)
    assert_exp2_flushed(x, o64, 8.0, np.float64, np.float64)
    assert_exp2_flushed(x, o16, 1.0, bf16.numpy, np.float32)
    assert (kept[(x < -127) & (x > -149)] > 0).all()  # ex2.approx.f32 keeps subnormals


def test_16_bit_math_on_the_gpu():
    import math

    from test_tile_math import assert_within, halves

    n, B = 200, 64
    x = rng.uniform(-4, 4, n).astype(np.float16)
    y = rng.uniform(-4, 4, n).astype(bf16.numpy)
    _, _, o16, oy, _ = gpu(halves, tile.cdiv(n, B), x, y, np.zeros((3, n), np.float16),
                           np.zeros((3, n), bf16.numpy), B)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    assert_within(o16[0], np.exp(x64), np.float16, 0.5)
    assert_within(o16[1], 1 / (1 + np.exp(-x64)), np.float16, 0.5)
    assert_within(o16[2], np.abs(x64) ** 1.5, np.float16, 0.5)
    assert_within(oy[0], np.sin(y64), bf16.numpy, 0.5)
    assert_within(oy[1], np.vectorize(math.erf)(y64), bf16.numpy, 0.5)
    np.testing.assert_array_equal(oy[2], (y64 * y64 + y64).astype(np.float32)
                                  .astype(bf16.numpy))


def test_binary_math_and_integer_ops_on_the_gpu():
    from test_tile_math import assert_within, binary, integer_ops

    M, N = 37, 70
    x = rng.uniform(-3, 3, (M, N)).astype(np.float32)
    y = rng.uniform(-2, 2, N).astype(np.float32)
    _, _, o, *_ = gpu(binary, (tile.cdiv(M, 16), tile.cdiv(N, 32)), x, y,
                      np.zeros((8, M, N), np.float32), 16, 32)
    a, b = x.astype(np.float64), y.astype(np.float64)[None, :]
    assert_within(o[0], np.abs(a) ** b, np.float32, 4)
    np.testing.assert_array_equal(o[1], (a * b + 0.5).astype(np.float32))
    assert_within(o[2], np.arctan2(a, b), np.float32, 3)
    assert_within(o[3], np.hypot(a, b), np.float32, 3)
    np.testing.assert_array_equal(o[4], np.maximum(np.maximum(x, y[None, :]), 0))
    np.testing.assert_array_equal(o[5], np.minimum(x, np.float32(0.25)))
    assert_within(o[7], 2.0 ** a, np.float32, 2)
    n = 70
    xi = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    yi = rng.integers(-128, 128, n).astype(np.int8)
    _, _, oi, oy, _ = gpu(integer_ops, tile.cdiv(n, 32), xi, yi, np.zeros((5, n), np.int32),
                          np.zeros((2, n), np.int8), 32)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(oi[0], np.abs(xi))
        np.testing.assert_array_equal(oi[1], xi * xi * xi)
        np.testing.assert_array_equal(oy[1], yi * yi)


# -- item 3: control flow and booleans ------------------------------------------------------


@pytest.mark.parametrize("k", [0, 3])
def test_boolean_operators_on_the_gpu(k):
    from test_tile_control import scalar_logic

    M, N, BN = 9, 37, 64
    x = rng.standard_normal((M, N)).astype(np.float32)
    x[2] = np.abs(x[2]) + 1
    _, _, o, v, _ = gpu(scalar_logic, M, x, np.int32(k), np.zeros((M, 5), np.int32),
                        np.zeros((M, BN * 2), np.float32), BN)
    s, m = x.sum(1, dtype=np.float64), x.max(1)
    np.testing.assert_array_equal(o[:, 0], (s > 0) & (m < 1.5))
    np.testing.assert_array_equal(o[:, 1], (s > 0) | ~(m < 1.5))
    np.testing.assert_array_equal(o[:, 3], np.full(M, k != 0 and 100 // k > 3))
    np.testing.assert_array_equal(o[:, 4], np.full(M, 100 // k if k else -1))
    np.testing.assert_array_equal(v[:, BN:BN + N], np.where(m[:, None] > 1.0, x * 2, x))


def test_while_loops_on_the_gpu():
    from test_tile_control import chunked_while, for_carries_scalars, newton_rsqrt

    M, N, BN = 5, 1000, 64
    x = rng.standard_normal((M, N)).astype(np.float32)
    _, sums, steps, _, _ = gpu(chunked_while, M, x, np.zeros(M, np.float32),
                               np.zeros(M, np.int32), np.int64(1000), BN)
    np.testing.assert_allclose(sums, x.sum(1, dtype=np.float64) / -(-N // BN), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_array_equal(steps, np.full(M, 9))
    xs = rng.uniform(0.5, 2.0, 300).astype(np.float32)
    _, o, iters, _ = gpu(newton_rsqrt, 3, xs, np.zeros(300, np.float32), np.zeros(3, np.int32),
                         128)
    np.testing.assert_allclose(o, 1 / np.sqrt(xs), rtol=2e-6)
    assert (iters > 0).all() and (iters < 100).all()
    y = rng.standard_normal((6, 200)).astype(np.float32)
    _, o4, _ = gpu(for_carries_scalars, 6, y, np.zeros((6, 4), np.float32), 64)
    np.testing.assert_allclose(o4[:, 0], y.sum(1, dtype=np.float64), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(o4[:, 1], y.max(1))
    np.testing.assert_array_equal(o4[:, 2], (y > 0).sum(1))



def test_a_loop_bound_reduced_in_every_warp_alike_on_the_gpu():
    from test_tile_control import replicated_bound, replicated_bound_reference

    x = rng.integers(0, 50, (6, 31)).astype(np.int32)
    _, o, _, _ = gpu(replicated_bound, (3, 2), x, np.zeros((6, 32), np.float32), 2, 16)
    np.testing.assert_array_equal(o[:, :31], replicated_bound_reference(x, o.shape)[:, :31])

# -- item 6: shapes ------------------------------------------------------------------------


def test_rank3_tiles_on_the_gpu():
    from test_tile_shapes import rank3

    shape, (A, B, C) = (3, 9, 70), (2, 4, 32)
    x = rng.standard_normal(shape).astype(np.float32)
    grid = tuple(tile.cdiv(n, b) for n, b in zip(shape, (A, B, C), strict=True))
    sums = [np.zeros((grid[0], 9, 70), np.float32), np.zeros((3, grid[1], 70), np.float32),
            np.zeros((3, 9, grid[2]), np.float32)]
    _, o, s0, s1, s2, tr, *_ = gpu(rank3, grid, x, np.zeros_like(x), *sums,
                                   np.zeros(shape[::-1], np.float32), A, B, C)
    np.testing.assert_array_equal(tr, x.transpose(2, 1, 0))
    np.testing.assert_array_equal(s1[:, 0], x[:, :4].min(1))
    np.testing.assert_array_equal(s2[:, :, 0], x[:, :, :32].max(2))
    np.testing.assert_allclose(s0[0], x[:2].sum(0), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("batch,m,n,k,tiles", [(5, 40, 30, 50, (2, 16, 16, 16)),
                                               (4, 128, 128, 96, (2, 64, 64, 32))])
def test_batched_products_on_the_gpu(batch, m, n, k, tiles):
    from test_tile_shapes import bmm

    a = rng.standard_normal((batch, m, k)).astype(bf16.numpy)
    b = rng.standard_normal((batch, k, n)).astype(bf16.numpy)
    BB, BM, BN, _ = tiles
    grid = (tile.cdiv(batch, BB), tile.cdiv(m, BM), tile.cdiv(n, BN))
    _, _, c, c2, *_ = gpu(bmm, grid, a, b, np.zeros((batch, m, n), np.float32),
                          np.zeros((batch, m, n), np.float32), *tiles)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), atol=1e-4,
                               rtol=1e-5)
    np.testing.assert_array_equal(c, c2)


@pytest.mark.parametrize("k", [0, 3])
def test_extract_split_cat_on_the_gpu(k):
    from test_tile_shapes import pieces

    x = rng.standard_normal((13, 30)).astype(np.float32)
    _, _, o, e, s = gpu(pieces, 1, x, np.int32(k), np.zeros((32, 32), np.float32),
                        np.zeros((16, 32), np.float32), np.zeros((16, 8), np.float16))
    t = np.full((16, 32), -1.0, np.float32)
    t[:13, :30] = x
    np.testing.assert_array_equal(o[:16], np.concatenate([t[:, 16:], t[:, :16]], 1))
    np.testing.assert_array_equal(o[16:], np.concatenate([t[8:], t[4:8], t[:4]], 0))
    np.testing.assert_array_equal(e[:8, :16], t[8:, 16:])
    r = (k % 2) * 8
    np.testing.assert_array_equal(e[8:, :16], t[r:r + 8, :16])
    np.testing.assert_array_equal(s, t[:, 24:].astype(np.float16))


# -- item 2: random numbers ----------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, -5, 2**40 + 3])
def test_random_bits_on_the_gpu_are_the_cpus(seed):
    from test_tile_random import streams, uniform, words

    N, B = 3000, 1024
    _, bits, u, n, _ = gpu(streams, tile.cdiv(N, B), np.int64(seed), np.zeros(N, np.uint32),
                           np.zeros(N, np.float32), np.zeros(N, np.float32), B)
    w = words(seed, np.arange(N))
    np.testing.assert_array_equal(bits, w[0])
    np.testing.assert_array_equal(u, uniform(w[0]))
    cpu_n = np.zeros(N, np.float32)
    with ox.device("cpu"):
        streams[tile.cdiv(N, B)](np.int64(seed), np.zeros(N, np.uint32), np.zeros(N, np.float32),
                                 cpu_n, B)
    np.testing.assert_allclose(n, cpu_n, rtol=4e-6, atol=4e-6)  # log/cos: libdevice vs libm


def test_random_seed_types_on_the_gpu():
    from test_tile_random import seeds_and_offsets, words

    B = 16
    _, _, o, _ = gpu(seeds_and_offsets, 1, np.int32(-3), np.uint64(2**64 - 12345),
                     np.zeros((5 * B, B), np.uint32), B)
    offs = np.arange(B)[:, None] * 1000 - np.arange(B)[None, :]
    np.testing.assert_array_equal(o[:B], words(-3, offs)[0])
    np.testing.assert_array_equal(o[B:2 * B], words(2**64 - 12345, offs)[0])
    np.testing.assert_array_equal(o[3 * B:4 * B], words(2**35 + 9, offs, 7)[0])


# -- items 4 and 5: scalars in memory, atomics -----------------------------------------------


def test_two_stage_argmax_on_the_gpu():
    from test_tile_scalars_atomics import argmax_stage1, argmax_stage2

    n, B = 100_003, 1024
    x = rng.standard_normal(n).astype(np.float32)
    g = tile.cdiv(n, B)
    _, mv, mi, _ = gpu(argmax_stage1, g, x, np.zeros(g, np.float32), np.zeros(g, np.int32), B)
    _, _, out, _ = gpu(argmax_stage2, 1, mv, mi, np.zeros(1, np.int32),
                       1 << (g - 1).bit_length())
    assert out[0] == np.argmax(x)


def test_atomics_across_blocks_on_the_gpu():
    from test_tile_scalars_atomics import reduce_across_blocks

    n, B = 100_000, 256
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    g = tile.cdiv(n, B)
    _, total, sums, extremes, hist, _ = gpu(
        reduce_across_blocks, g, x, np.zeros(B // 2, np.int32), np.zeros(1, np.int32),
        np.array([-(2**31), 2**31 - 1], np.int32), np.zeros(4, np.int32), B)
    padded = np.zeros(g * B, np.int32)
    padded[:n] = x
    blocks = padded.reshape(g, B)
    np.testing.assert_array_equal(total, blocks.sum(0)[:B // 2])
    assert sums[0] == x.sum() and list(extremes) == [blocks.max(), blocks.min()]
    np.testing.assert_array_equal(hist, np.bincount(blocks.max(1) % 4, minlength=4))


@pytest.mark.parametrize("splits", [1, 3])
def test_2d_tile_atomics_inside_and_at_the_edges_on_the_gpu(splits: int):
    from test_tile_scalars_atomics import add_2d_tiles_case

    add_2d_tiles_case(splits, gpu)


def test_a_lock_on_the_gpu():
    """Many blocks contend for the lock at once: the sum is never torn."""
    from test_tile_scalars_atomics import locked_sum

    rows, n = 2000, 50
    x = rng.integers(-8, 9, (rows, n)).astype(np.float32)
    _, acc, lock, count, _ = gpu(locked_sum, rows, x, np.full((1, n), 123.0, np.float32),
                                 np.zeros(1, np.int32), np.zeros(1, np.int32), 64)
    np.testing.assert_array_equal(acc[0], x.sum(0))
    assert lock[0] == 0 and count[0] == rows


def test_atomic_old_values_on_the_gpu():
    from test_tile_scalars_atomics import old_values

    B, n = 32, 20
    a, b = np.arange(n, dtype=np.int32), np.full(n, 3, np.uint32)
    f = np.array([0.0] * 4 + [np.nan] * 4 + [1.0] * (n - 8), np.float32)
    a, b, f, olds, fold, _ = gpu(old_values, 1, a, b, f, np.zeros((3, B), np.int32),
                                 np.zeros(B, np.float32), B)
    t = np.arange(B)
    np.testing.assert_array_equal(olds[0], np.where(t < n, t, 0))
    np.testing.assert_array_equal(olds[1], np.where(t < n, t * 10, 0))
    np.testing.assert_array_equal(a, np.where(t % 2 == 0, t + 1000, t * 10)[:n] + 5)
    np.testing.assert_array_equal(b, ((3 | (t[:n] << 4)) & 0xFF) ^ 1)


def test_a_scalar_store_converts_on_the_gpu():
    from test_tile_scalars_atomics import scalar_conversions, scalar_conversions_reference

    x = np.array([1.5, 2.25, 3.0000002, -7.75, 1e9, -1e9], np.float32)
    outs = [np.zeros(6, bf16.numpy), np.zeros(6), np.zeros(6, np.int32)]
    _, *got = gpu(scalar_conversions, 6, x, *outs)
    for g, want in zip(got, scalar_conversions_reference(x), strict=True):
        np.testing.assert_array_equal(g, want)


# -- a relaxed atomic add of an accumulator goes by TMA reduction (tile/tma_stores.py) --------

STEP = 2.0 ** -130  # partial tiles scaled by it straddle the smallest normal, 2**-126


@tile.kernel(num_warps=8, num_stages=3)
def scaled_adds(a: ox.Slice[bf16, 2], b: ox.Slice[bf16, 2], c: ox.AtomicSlice[ox.f32, 2],
                d: ox.AtomicSlice[ox.f32, 2], BM: ox.Const[int], BN: ox.Const[int],
                BK: ox.Const[int]):
    """A product scaled to straddle the subnormals, added to `c` by TMA (relaxed) and to
    `d` by each thread's atomics (acq_rel)."""
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((BM, BN), ox.f32)
    for k in range(tile.num_tiles(a, 1, BK)):
        acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)), acc)
    tile.atomic_add(c, (i, j), acc * STEP, sem="relaxed")
    tile.atomic_add(d, (i, j), acc * STEP)


def test_split_k_sums_by_tma_reduction_on_the_gpu():
    """Split K summed by relaxed tile atomics (a TMA reduction: `cp.reduce.async.bulk
    .tensor.add` in the PTX) at ragged edges, exact against NumPy. Then a product scaled
    to straddle the subnormals and added once to values that do too: by TMA, by each
    thread's atomics and on the CPU, all three flush subnormal inputs and results as
    `atom.add.f32` does on global memory (docs/language.md), bit for bit."""
    from test_tile_cpu_hopper import split_k
    from test_tile_tma_rings import V

    m, n, splits, steps = 200, 136, 3, 2
    k = 32 * steps * splits - 8
    a = (rng.integers(-4, 5, (m, k)) * 0.25).astype(bf16.numpy)
    b = (rng.integers(-4, 5, (k, n)) * 0.25).astype(bf16.numpy)
    c = np.full((m, n), 3.0, np.float32)
    grid = (tile.cdiv(m, 128), tile.cdiv(n, 64), splits)
    (_, _, got, *_) = gpu(split_k, grid, a, b, c, 128, 64, 32, steps)
    np.testing.assert_array_equal(got, 3.0 + a.astype(np.float32) @ b.astype(np.float32))

    from semantics_cases import ref_flushed_add

    a = rng.integers(-3, 4, (m, 128)).astype(bf16.numpy)
    b = rng.integers(-3, 4, (128, n)).astype(bf16.numpy)
    start = (rng.integers(-300, 301, (m, n)) * STEP).astype(np.float32)
    grid = (tile.cdiv(m, 128), tile.cdiv(n, 128))
    args = (a, b, start.copy(), start.copy(), 128, 128, 64)
    types = (ox.Slice[bf16, 2], ox.Slice[bf16, 2], ox.AtomicSlice[ox.f32, 2],
             ox.AtomicSlice[ox.f32, 2])
    ck = scaled_adds.compile(*(V(t, vectors=True) for t in types), *args[4:], arch="sm_90")
    assert "cp.reduce.async.bulk.tensor" in ck.ptx
    (_, _, by_tma, by_threads, *_) = gpu(scaled_adds, grid, *args)
    cpu = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
    ox.launch(scaled_adds, grid, *cpu, device="cpu")
    part = ((a.astype(np.float64) @ b.astype(np.float64)) * STEP).astype(np.float32)
    want = ref_flushed_add(start, part)
    exact = start + part
    assert np.count_nonzero(want != exact) > m * n // 20 and np.count_nonzero(want) > m * n // 2
    for got in (cpu[2], cpu[3], by_threads, by_tma):
        np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))


def test_split_k_into_a_view_on_the_gpu():
    from test_tile_cpu_hopper import heads_split_k, heads_split_k_case

    grid, args, want = heads_split_k_case()
    (_, _, got, *_) = gpu(heads_split_k, grid, *args)
    np.testing.assert_array_equal(got, want)
