"""Scalars in memory and atomics in tile kernels (issue 28, items 4 and 5): 0-d loads and
stores (`tile.load(arr, index, ())`, `tile.store(arr, index, scalar)`) under the
DisjointSlice rules, as FlagGems' two-stage argmax and Liger's layer norm backward use
them; `tile.atomic_add/max/min/xchg/cas/and/or/xor` on AtomicSlice tiles and scalars,
with their old values, ragged edges, and a lock taken with atomic_cas and given back
with atomic_xchg; against NumPy on the CPU, and the diagnostics.
tests/test_gpu_tile_lang.py runs the same kernels on the GPU."""

from __future__ import annotations

import numpy as np
import pytest

import oxide as ox
from oxide import AtomicSlice, Const, DisjointSlice, RawSlice, Slice, f32, i32, tile, u32

rng = np.random.default_rng(2845)


def cpu(kernel, grid, *args):
    with ox.device("cpu"):
        kernel[grid](*args)


# -- scalars in memory -----------------------------------------------------------------------


@tile.kernel(num_warps=4)
def argmax_stage1(x: Slice[f32], mid_v: DisjointSlice[f32], mid_i: DisjointSlice[i32],
                  B: Const[int]):
    """FlagGems' argmax, first stage: each block's maximum and its index, as scalars."""
    p = tile.bid(0)
    t = tile.load(x, (p,), (B,), padding=-float("inf"))
    tile.store(mid_v, (p,), tile.max(t))
    tile.store(mid_i, (p,), tile.argmax(t, 0) + p * B)


@tile.kernel(num_warps=4)
def argmax_stage2(mid_v: Slice[f32], mid_i: Slice[i32], out: DisjointSlice[i32],
                  M: Const[int]):
    """The second stage reads the partial results back, one scalar at a time too."""
    v = tile.load(mid_v, (0,), (M,), padding=-float("inf"))
    i = tile.load(mid_i, (0,), (M,))
    best = tile.argmax(v, 0)
    first = tile.load(mid_i, (0,), ())                      # a scalar load
    pick = tile.sum(tile.where(tile.arange(M) == best, i, 0))
    tile.store(out, (0,), pick if tile.load(mid_v, (0,), ()) < tile.max(v) else first)


@pytest.mark.parametrize("n,B", [(5000, 256), (1, 64), (777, 128)])
def test_two_stage_argmax_with_scalar_stores_and_loads(n: int, B: int) -> None:
    x = rng.standard_normal(n).astype(np.float32)
    g = tile.cdiv(n, B)
    mv, mi, out = np.zeros(g, np.float32), np.zeros(g, np.int32), np.zeros(1, np.int32)
    cpu(argmax_stage1, g, x, mv, mi, B)
    cpu(argmax_stage2, 1, mv, mi, out, 1 << (g - 1).bit_length())
    np.testing.assert_array_equal(mv, [x[k * B:(k + 1) * B].max() for k in range(g)])
    assert out[0] == np.argmax(x)


@tile.kernel(num_warps=2)
def scalar_io(x: Slice[f32, 2], mean: Slice[f32], rows: DisjointSlice[f32, 2],
              flag: DisjointSlice[i32], edge: DisjointSlice[f32], spill: RawSlice[i32],
              BN: Const[int]):
    """Liger's layer norm backward reads each row's mean as a scalar; scalar stores of
    numbers and of 0-d tiles; loads and stores past the array's edge."""
    r = tile.bid(0)
    m = tile.load(mean, (r,), ())
    past = tile.load(mean, (r + 1000,), (), padding=-3.0)   # outside: the padding
    tile.store(rows, (r, 0), tile.load(x, (r, 0), (1, BN)) - m + past * 0.0)
    tile.store(flag, (r,), 7)                                # a number
    tile.store(edge, (r,), tile.load(x, (r, 1), ()))         # x[r, 1]: a 2-d index
    with ox.unsafe():
        tile.store(spill, (r * 3,), r)                       # outside from r = 1: dropped


def test_scalar_loads_and_stores() -> None:
    M, N = 5, 50
    x = rng.standard_normal((M, N)).astype(np.float32)
    mean = x.mean(1).astype(np.float32)
    rows = np.zeros((M, N), np.float32)
    flag, edge = np.zeros(M, np.int32), np.zeros(M, np.float32)
    buffer = np.full(4, -1, np.int32)
    spill = buffer[:2]  # a view: element 3 of the buffer lies past it
    cpu(scalar_io, M, x, mean, rows, flag, edge, spill, 64)
    np.testing.assert_array_equal(buffer, [0, -1, -1, -1])
    np.testing.assert_array_equal(rows, x - mean[:, None])
    np.testing.assert_array_equal(flag, np.full(M, 7))
    np.testing.assert_array_equal(edge, x[:, 1])


@tile.kernel(num_warps=4)
def store_then_load(out: DisjointSlice[f32], B: Const[int]):
    """A scalar stored by one thread and loaded by all: the block barrier between them."""
    i = tile.bid(0)
    tile.store(out, (i,), tile.full((), 2.5) * (i + 1).astype(f32))
    tile.store(out, (i,), tile.load(out, (i,), ()) + 1.0)


@tile.kernel
def scalar_conversions(x: Slice[f32], half: DisjointSlice[ox.bf16], wide: DisjointSlice[ox.f64],
                       count: DisjointSlice[i32]):
    """A 0-d tile stored into an array of another dtype is converted, as a number is
    (docs/language.md: Liger stores f32 sums into bf16 outputs this way)."""
    i = tile.bid(0)
    v = tile.load(x, (i,), ()) * 2.0
    tile.store(half, (i,), v)
    tile.store(wide, (i,), v)
    tile.store(count, (i,), v)


def scalar_conversions_reference(x: np.ndarray) -> tuple[np.ndarray, ...]:
    v = x * np.float32(2)
    return v.astype(ox.bf16.numpy), v.astype(np.float64), v.astype(np.int32)


def test_a_scalar_store_converts_to_the_arrays_dtype() -> None:
    x = np.array([1.5, 2.25, 3.0000002, -7.75, 1e9, -1e9], np.float32)  # i32 in range
    outs = [np.zeros(6, ox.bf16.numpy), np.zeros(6), np.zeros(6, np.int32)]
    cpu(scalar_conversions, 6, x, *outs)
    for got, want in zip(outs, scalar_conversions_reference(x), strict=True):
        np.testing.assert_array_equal(got, want)


def test_a_block_sees_its_own_scalar_store() -> None:
    out = np.zeros(6, np.float32)
    cpu(store_then_load, 6, out, 4)
    np.testing.assert_array_equal(out, 2.5 * np.arange(1, 7) + 1)


# -- atomics ---------------------------------------------------------------------------------


@tile.kernel(num_warps=4)
def reduce_across_blocks(x: Slice[i32], total: AtomicSlice[i32], sums: AtomicSlice[i32],
                         extremes: AtomicSlice[i32], hist: AtomicSlice[i32], B: Const[int]):
    """Every block adds its tile into one (split-K's reduction), its sum into a scalar,
    its extremes, and counts itself in a histogram bin chosen from its data."""
    i = tile.bid(0)
    t = tile.load(x, (i,), (B,))
    tile.atomic_add(total, (0,), t)
    tile.atomic_add(sums, (0,), tile.sum(t), sem="relaxed")
    tile.atomic_max(extremes, (0,), tile.max(t))
    tile.atomic_min(extremes, (1,), tile.min(t), scope="device")
    tile.atomic_add(hist, (tile.max(t) % 4,), 1)


@pytest.mark.parametrize("n,B", [(1000, 128), (128, 128), (70, 32)])
def test_atomics_reduce_tiles_and_scalars_across_blocks(n: int, B: int) -> None:
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    total, sums = np.zeros(B // 2, np.int32), np.zeros(1, np.int32)  # total: ragged
    extremes = np.array([-(2**31), 2**31 - 1], np.int32)
    hist = np.zeros(4, np.int32)
    g = tile.cdiv(n, B)
    cpu(reduce_across_blocks, g, x, total, sums, extremes, hist, B)
    padded = np.zeros(g * B, np.int32)
    padded[:n] = x
    blocks = padded.reshape(g, B)
    np.testing.assert_array_equal(total, blocks.sum(0)[:B // 2])   # past the end: skipped
    assert sums[0] == x.sum()
    assert list(extremes) == [blocks.max(), blocks.min()]
    np.testing.assert_array_equal(hist, np.bincount(blocks.max(1) % 4, minlength=4))


@tile.kernel(num_warps=2)
def old_values(a: AtomicSlice[i32], b: AtomicSlice[u32], f: AtomicSlice[f32],
               olds: DisjointSlice[i32, 2], fold: DisjointSlice[f32], B: Const[int]):
    t = tile.arange(B)
    tile.store(olds, (0, 0), tile.atomic_xchg(a, (0,), t * 10)[None, :])
    tile.store(olds, (1, 0), tile.atomic_cas(a, (0,), tile.where(t % 2 == 0, t * 10, -1),
                                             t + 1000)[None, :])
    tile.store(olds, (2, 0), tile.atomic_add(a, (0,), tile.full((B,), 5))[None, :] * 0
               + tile.atomic_or(b, (0,), t.astype(u32) << 4).astype(i32)[None, :])
    tile.atomic_and(b, (0,), tile.full((B,), 0xFF, u32))
    tile.atomic_xor(b, (0,), tile.full((B,), 1, u32))
    tile.store(fold, (0,), tile.atomic_max(f, (0,), tile.where(t < 8, -0.0, t.astype(f32))))


def test_atomics_return_the_old_values() -> None:
    B, n = 32, 20  # the tile runs past the arrays: those elements are skipped
    a, b = np.arange(n, dtype=np.int32), np.full(n, 3, np.uint32)
    f = np.array([0.0] * 4 + [np.nan] * 4 + [1.0] * (n - 8), np.float32)
    olds, fold = np.zeros((3, B), np.int32), np.zeros(B, np.float32)
    cpu(old_values, 1, a, b, f, olds, fold, B)
    t = np.arange(B)
    np.testing.assert_array_equal(olds[0], np.where(t < n, t, 0))          # xchg
    np.testing.assert_array_equal(olds[1], np.where(t < n, t * 10, 0))     # cas
    np.testing.assert_array_equal(olds[2], np.where(t < n, 3, 0))          # or
    swapped = np.where(t % 2 == 0, t + 1000, t * 10)[:n]
    np.testing.assert_array_equal(a, swapped + 5)
    np.testing.assert_array_equal(b, ((3 | (t[:n] << 4)) & 0xFF) ^ 1)
    want = np.maximum(f, np.where(t[:n] < 8, -0.0, t[:n]).astype(np.float32))
    want[4:8] = np.where(t[4:8] < 8, -0.0, t[4:8])  # NaN loses (maximumNumber)
    np.testing.assert_array_equal(f, want)
    assert not np.signbit(f[:4]).any()  # max(0.0, -0.0) is 0.0
    np.testing.assert_array_equal(fold[:4], 0.0)


@tile.kernel(num_warps=4)
def locked_sum(x: Slice[f32, 2], acc: RawSlice[f32, 2], lock: AtomicSlice[i32],
               count: AtomicSlice[i32], BN: Const[int]):
    """Triton's layer norm backward: a block takes the lock with atomic_cas, adds its
    row into the shared partial sum (a RawSlice), counts itself and gives the lock back
    with atomic_xchg (acquire and release: the sum is never torn)."""
    r = tile.bid(0)
    t = tile.load(x, (r, 0), (1, BN))
    while tile.atomic_cas(lock, (0,), 0, 1) == 1:
        pass
    if tile.atomic_add(count, (0,), 1, sem="relaxed") == 0:
        with ox.unsafe():
            tile.store(acc, (0, 0), t)                 # the first block starts the sum
    else:
        with ox.unsafe():
            tile.store(acc, (0, 0), tile.load(acc, (0, 0), (1, BN)) + t)
    tile.atomic_xchg(lock, (0,), 0)


def test_a_lock_taken_with_cas_and_given_back_with_xchg() -> None:
    rows, n = 40, 50
    x = rng.integers(-8, 9, (rows, n)).astype(np.float32)  # sums exact in any order
    acc = np.full((1, n), 123.0, np.float32)
    lock, count = np.zeros(1, np.int32), np.zeros(1, np.int32)
    cpu(locked_sum, rows, x, acc, lock, count, 64)
    np.testing.assert_array_equal(acc[0], x.sum(0))
    assert lock[0] == 0 and count[0] == rows


def test_atomics_compile_with_their_fences_for_the_gpu() -> None:
    ck = locked_sum.compile(Slice[f32, 2], RawSlice[f32, 2], AtomicSlice[i32],
                            AtomicSlice[i32], 64, arch="sm_90")
    assert "atom.relaxed.gpu.global.cas.b32" in ck.ptx or "atom.global.cas.b32" in ck.ptx
    assert "atom.global.exch.b32" in ck.ptx and "fence.sc.gpu" in ck.ptx
    assert ck.cubin


@tile.kernel(num_warps=4)
def add_2d_tiles(x: Slice[i32, 3], out: AtomicSlice[i32, 2], olds: DisjointSlice[i32, 3],
                 BM: Const[int], BN: Const[int]):
    """Split-K's reduction in 2-d: block (i, j, s) adds slice s's tile (i, j) into `out`
    and keeps the old values; each thread holds several elements, so a tile inside the
    array takes the one-test path and a tile at the ragged edge the per-element one."""
    i, j, s = tile.bid(0), tile.bid(1), tile.bid(2)
    tile.store(olds[s], (i, j), tile.atomic_add(out, (i, j), tile.load(x[s], (i, j), (BM, BN)),
                                                sem="relaxed"))


def add_2d_tiles_case(splits: int, run) -> None:
    """`add_2d_tiles` over a 70 x 100 array in 32 x 64 tiles (edges along both axes),
    through `run(kernel, grid, *arrays)` (which returns the arrays after the launch)."""
    m, n, bm, bn = 70, 100, 32, 64
    x = rng.integers(-1000, 1000, (splits, m, n)).astype(np.int32)
    start = rng.integers(-1000, 1000, (m, n)).astype(np.int32)
    grid = (tile.cdiv(m, bm), tile.cdiv(n, bn), splits)
    _, out, olds, *_ = run(add_2d_tiles, grid, x, start.copy(),
                           np.full((splits, m, n), 7, np.int32), bm, bn)
    np.testing.assert_array_equal(out, start + x.sum(0))
    if splits == 1:  # one update per element: its old value is the start
        np.testing.assert_array_equal(olds[0], start)
    else:  # the updates of an element in some order: each old value is the one before
        # plus that one's addend, so {old + addend} and the start are {old} and the end
        after = np.sort(np.concatenate([olds + x, start[None]]), 0)
        np.testing.assert_array_equal(after, np.sort(np.concatenate([olds, out[None]]), 0))


def _run_on_cpu(kernel, grid, *args):
    cpu(kernel, grid, *args)
    return list(args)


@pytest.mark.parametrize("splits", [1, 3])
def test_2d_tile_atomics_inside_and_at_the_edges(splits: int) -> None:
    add_2d_tiles_case(splits, _run_on_cpu)


def test_tile_atomics_check_their_bounds_once() -> None:
    """The tile's own bounds test guards each update: no second check with a report path
    (its `cas` on the error word) around each atomic; on the GPU a tile wholly inside the
    array updates without a branch per element (pinned as SASS in test_sass_patterns)."""
    ck = add_2d_tiles.compile(Slice[i32, 3], AtomicSlice[i32, 2], DisjointSlice[i32, 3],
                              32, 64, arch="sm_90")
    assert "atom.global.add.u32" in ck.ptx or "atom.global.add.s32" in ck.ptx
    assert ".cas." not in ck.ptx


# -- diagnostics ---------------------------------------------------------------------------------


@tile.kernel
def atomic_on_a_slice(a: Slice[i32]):
    tile.atomic_add(a, (0,), 1)


@tile.kernel
def atomic_wrong_dtype(a: AtomicSlice[i32], x: Slice[f32]):
    tile.atomic_add(a, (0,), tile.load(x, (0,), (8,)))


@tile.kernel
def float_and(a: AtomicSlice[f32]):
    tile.atomic_and(a, (0,), 1.0)


@tile.kernel
def bad_sem(a: AtomicSlice[i32]):
    tile.atomic_add(a, (0,), 1, sem="seq_cst")


@tile.kernel
def triton_scope(a: AtomicSlice[i32]):
    tile.atomic_add(a, (0,), 1, scope="gpu")


@tile.kernel
def load_an_atomic_slice(a: AtomicSlice[i32], o: DisjointSlice[i32]):
    tile.store(o, (0,), tile.load(a, (0,), (8,)))


@tile.kernel
def scalar_store_unwitnessed(o: DisjointSlice[f32], k: i32):
    tile.store(o, (k,), 1.0)


@tile.kernel
def scalar_store_to_a_slice(o: Slice[f32]):
    tile.store(o, (0,), 1.0)


@tile.kernel
def scalar_and_tile_of_one_array(o: DisjointSlice[f32]):
    i = tile.bid(0)
    tile.store(o, (i,), 1.0)
    tile.store(o, (i,), tile.zeros((8,)))


@pytest.mark.parametrize("kernel,types,error,message", [
    (atomic_on_a_slice, (Slice[i32],), ox.SafetyError, "atomics need an AtomicSlice"),
    (atomic_wrong_dtype, (AtomicSlice[i32], Slice[f32]), ox.KernelTypeError,
     "the array holds i32; the value is a tile of shape (8,) and dtype f32"),
    (float_and, (AtomicSlice[f32],), ox.KernelTypeError, "tile.atomic_and does not support f32"),
    (bad_sem, (AtomicSlice[i32],), ox.KernelTypeError, "sem= is one of"),
    (triton_scope, (AtomicSlice[i32],), ox.KernelTypeError, "scope= is one of"),
    (load_an_atomic_slice, (AtomicSlice[i32], DisjointSlice[i32]), ox.SafetyError,
     "is read and written only through atomics"),
    (scalar_store_unwitnessed, (DisjointSlice[f32], i32), ox.SafetyError, "DisjointSlice"),
    (scalar_store_to_a_slice, (Slice[f32],), ox.SafetyError, "is a Slice"),
    (scalar_and_tile_of_one_array, (DisjointSlice[f32],), ox.SafetyError, "shape"),
])
def test_scalar_and_atomic_misuse_is_a_diagnostic(kernel, types, error, message) -> None:
    with pytest.raises(error) as info:
        kernel.compile(*types, arch="cpu")
    assert message in str(info.value)
    assert info.value.span is not None and info.value.hint
