"""Barriers, shared memory, warp collectives and atomics on the CPU backend.

Threads of a block run as coroutines that suspend at barriers and warp
collectives; these tests check GPU semantics against NumPy, exactly for ints.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import oxide as ox
from oxide import AtomicSlice, DisjointSlice, Slice, f32, f64, i32, i64, thread, u32
from oxide.runtime.device import device

rng = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def on_cpu() -> Iterator[None]:
    with device("cpu"):
        yield


@ox.kernel
def block_sum(x: Slice[i64], out: DisjointSlice[i64]):
    buf = ox.shared.array(i64, 1024)
    t = ox.thread_idx.x
    i = thread.index_1d()
    v = i64(0)
    if i < len(x):
        v = x[i]
    with ox.unsafe():
        buf[t] = v
    ox.sync_threads()
    s = 512
    while s > 0:
        if t < s:
            with ox.unsafe():
                buf[t] = buf[t] + buf[t + s]
        ox.sync_threads()
        s = s // 2
    if t == 0:
        with ox.unsafe():
            out[ox.block_idx.x] = buf[0]


def test_block_tree_reduction_1024_threads() -> None:
    blocks = 7
    x = rng.integers(-1000, 1000, blocks * 1024 - 100)
    out = np.zeros(blocks, np.int64)
    block_sum[blocks, 1024](x, out)
    want = np.add.reduceat(x, np.arange(0, x.size, 1024))
    np.testing.assert_array_equal(out, want)
    assert block_sum.compile(x, out, target="cpu").uses_barriers


def test_many_blocks_with_barriers_split_across_os_threads() -> None:
    blocks = 96
    x = rng.integers(-1000, 1000, blocks * 1024)
    out = np.zeros(blocks, np.int64)
    block_sum[blocks, 1024](x, out)
    np.testing.assert_array_equal(out, x.reshape(blocks, 1024).sum(axis=1))


@ox.kernel
def reverse_tile(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
    tile = ox.shared.array(f32, (8, 16))
    w = thread.index_2d()
    ty = ox.thread_idx.y
    tx = ox.thread_idx.x
    with ox.unsafe():
        tile[ty, tx] = x[w]
    ox.sync_threads()
    if w in out:
        with ox.unsafe():
            out[w] = tile[7 - ty, 15 - tx]


def test_2d_block_shared_tile() -> None:
    x = rng.standard_normal((16, 64)).astype(np.float32)
    out = np.zeros_like(x)
    reverse_tile[(4, 2), (16, 8)](x, out)
    want = x.reshape(2, 8, 4, 16)[:, ::-1, :, ::-1].reshape(16, 64)
    np.testing.assert_array_equal(out, want)


@ox.kernel
def warp_ops(x: Slice[i32], out: DisjointSlice[i32, 2]):
    i = thread.index_1d()
    v = x[i]
    lane = ox.lane_id()
    row = ox.warp_id()
    with ox.unsafe():
        out[i, 0] = ox.warp.shuffle(v, 31 - lane)
        out[i, 1] = ox.warp.shuffle_up(v, 3)
        out[i, 2] = ox.warp.shuffle_down(v, 5)
        out[i, 3] = ox.warp.shuffle_xor(v, 6)
        out[i, 4] = i32(ox.warp.ballot(v % 3 == 0))
        out[i, 5] = i32(ox.warp.any(v == 7)) + 2 * i32(ox.warp.all(v < 1 << 20))
        out[i, 6] = ox.warp.reduce_add(v)
        out[i, 7] = ox.warp.reduce_min(v)
        out[i, 8] = ox.warp.reduce_max(v)
        out[i, 9] = i32(ox.warp.match_any(v % 4))
        out[i, 10] = lane + 100 * row


def _warp_reference(x: np.ndarray, block: int) -> np.ndarray:
    out = np.zeros((x.size, 11), np.int64)
    for w0 in range(0, x.size, 32):
        v = x[w0:w0 + 32]
        lanes = np.arange(32)
        out[w0:w0 + 32, 0] = v[31 - lanes]
        out[w0:w0 + 32, 1] = np.where(lanes >= 3, v[np.maximum(lanes - 3, 0)], v)
        out[w0:w0 + 32, 2] = np.where(lanes + 5 < 32, v[np.minimum(lanes + 5, 31)], v)
        out[w0:w0 + 32, 3] = v[lanes ^ 6]
        out[w0:w0 + 32, 4] = sum(1 << k for k in range(32) if v[k] % 3 == 0)
        out[w0:w0 + 32, 5] = int((v == 7).any()) + 2 * int((v < 1 << 20).all())
        out[w0:w0 + 32, 6] = v.sum()
        out[w0:w0 + 32, 7] = v.min()
        out[w0:w0 + 32, 8] = v.max()
        for k in range(32):
            out[w0 + k, 9] = sum(1 << j for j in range(32) if v[j] % 4 == v[k] % 4)
        out[w0:w0 + 32, 10] = lanes + 100 * ((w0 % block) // 32)
    return out.astype(np.uint32).view(np.int32)


def test_warp_collectives() -> None:
    block = 128
    x = rng.integers(0, 50, 2 * block).astype(np.int32)
    x[5] = 7
    out = np.zeros((x.size, 11), np.int32)
    warp_ops[2, block](x, out)
    np.testing.assert_array_equal(out, _warp_reference(x, block))


@ox.kernel
def warp_sum_f64(x: Slice[f64], out: DisjointSlice[f64]):
    i = thread.index_1d()
    s = ox.warp.reduce_add(x[i])
    t = ox.warp.shuffle_xor(s, 1)
    if ox.lane_id() == 0:
        with ox.unsafe():
            out[i // 32] = s + t


def test_warp_reduce_f64() -> None:
    x = rng.standard_normal(32 * 6)
    out = np.zeros(6)
    warp_sum_f64[3, 64](x, out)
    np.testing.assert_allclose(out, 2 * x.reshape(6, 32).sum(axis=1), rtol=1e-12)


@ox.kernel
def partial_warp(x: Slice[i32], out: DisjointSlice[i32]):
    i = thread.index_1d()
    s = ox.warp.reduce_add(x[i])
    ox.sync_warp()
    if i in out:
        out[i] = s


def test_partial_last_warp() -> None:
    x = np.arange(1, 41, dtype=np.int32)
    out = np.zeros(40, np.int32)
    partial_warp[1, 40](x, out)
    np.testing.assert_array_equal(out, [x[:32].sum()] * 32 + [x[32:].sum()] * 8)


@ox.kernel
def divergent_collectives(x: Slice[i32], out: DisjointSlice[i32]):
    buf = ox.shared.array(i32, 8)
    i = thread.index_1d()
    v = x[i]
    t = ox.thread_idx.x
    if ox.warp_id() % 2 == 0:
        v = ox.warp.reduce_max(v)
    if ox.lane_id() == 0:
        with ox.unsafe():
            buf[ox.warp_id()] = v
    ox.sync_threads()
    if t < 8:
        with ox.unsafe():
            w = buf[t]
        total = ox.warp.reduce_add(w, 0xFF)
        if t == 0:
            with ox.unsafe():
                out[ox.block_idx.x] = total


def test_collectives_in_divergent_code() -> None:
    x = rng.integers(0, 1000, 2 * 256).astype(np.int32)
    out = np.zeros(2, np.int32)
    divergent_collectives[2, 256](x, out)
    want = []
    for b in range(2):
        warps = x[b * 256:(b + 1) * 256].reshape(8, 32)
        want.append(sum(w.max() if k % 2 == 0 else w[0] for k, w in enumerate(warps)))
    np.testing.assert_array_equal(out, want)


@ox.kernel
def histogram(x: Slice[i32], bins: AtomicSlice[u32]):
    i = thread.index_1d()
    if i < len(x):
        ox.atomic.add(bins, x[i], u32(1))


def test_atomic_histogram() -> None:
    x = rng.integers(0, 16, 100_003).astype(np.int32)
    bins = np.zeros(16, np.uint32)
    histogram[(x.size + 255) // 256, 256](x, bins)
    np.testing.assert_array_equal(bins, np.bincount(x, minlength=16))


@ox.kernel
def shared_histogram(x: Slice[i32], bins: AtomicSlice[i32], fmax: AtomicSlice[f32],
                     y: Slice[f32]):
    local = ox.shared.array(i32, 8)
    t = ox.thread_idx.x
    i = thread.index_1d()
    if t < 8:
        with ox.unsafe():
            local[t] = 0
    ox.sync_threads()
    if i < len(x):
        ox.atomic.add(local, x[i], 1)
        ox.atomic.max(fmax, 0, y[i])
    ox.sync_threads()
    if t < 8:
        with ox.unsafe():
            ox.atomic.add(bins, t, local[t])


def test_shared_memory_atomics_and_float_max() -> None:
    x = rng.integers(0, 8, 5000).astype(np.int32)
    y = rng.standard_normal(5000).astype(np.float32)
    bins = np.zeros(8, np.int32)
    fmax = np.full(1, -np.inf, np.float32)
    shared_histogram[(x.size + 127) // 128, 128](x, bins, fmax, y)
    np.testing.assert_array_equal(bins, np.bincount(x, minlength=8))
    assert fmax[0] == y.max()


@ox.kernel
def barrier_then_fail(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    ox.sync_threads()
    if i in out:
        out[i] = x[i + 2]


def test_index_error_in_barrier_kernel() -> None:
    x = np.ones(64, np.float32)
    with pytest.raises(ox.KernelIndexError, match="index 64 is out of bounds"):
        barrier_then_fail[2, 32](x, np.zeros(64, np.float32))
    out = np.zeros(62, np.float32)
    barrier_then_fail[2, 32](x, out)
    assert out.all()


COEFFS = ox.ConstantArray(f32, 4)


@ox.kernel
def dynamic_reverse(x: Slice[f32], out: DisjointSlice[f32]):
    buf = ox.shared.dynamic(f32)
    fixed = ox.shared.array(f32, 3)
    t = ox.thread_idx.x
    i = thread.index_1d()
    with ox.unsafe():
        buf[t] = x[i]
        fixed[t % 3] = f32(1)
    ox.sync_threads()
    if i in out:
        with ox.unsafe():
            out[i] = buf[ox.block_dim.x - 1 - t] * COEFFS[t % 4] + fixed[0]


def test_dynamic_shared_memory_and_constant_array() -> None:
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    COEFFS.set([1, 2, 3, 4])
    dynamic_reverse[2, 32, None, 32 * 4](x, out)
    want = x.reshape(2, 32)[:, ::-1].ravel() * np.tile([1, 2, 3, 4], 16) + 1
    np.testing.assert_array_equal(out, want)
    COEFFS.set([0, 0, 0, 0])
    dynamic_reverse[2, 32, None, 32 * 4](x, out)
    np.testing.assert_array_equal(out, np.ones(64, np.float32))
    with pytest.raises(ox.KernelIndexError, match="index 16 is out of bounds"):
        dynamic_reverse[2, 32, None, 16 * 4](x, out)


W = ox.TypeVar("W")


@ox.kernel
def warp_minmax(x: Slice[W], out: DisjointSlice[W, 2]):
    i = thread.index_1d()
    lo = ox.warp.reduce_min(x[i])
    hi = ox.warp.reduce_max(x[i])
    up = ox.warp.shuffle_up(x[i], 1)
    with ox.unsafe():
        out[i, 0] = lo
        out[i, 1] = hi
        out[i, 2] = up


@pytest.mark.parametrize("dtype", [np.float32, np.uint32, np.int64, np.uint64])
def test_warp_min_max_types(dtype: type) -> None:
    x = (rng.standard_normal(64) * 1000).astype(dtype) if np.dtype(dtype).kind == "f" else \
        rng.integers(0, 2**31, 64).astype(dtype)
    out = np.zeros((64, 3), dtype)
    warp_minmax[1, 64](x, out)
    w = x.reshape(2, 32)
    np.testing.assert_array_equal(out[:, 0], np.repeat(w.min(axis=1), 32))
    np.testing.assert_array_equal(out[:, 1], np.repeat(w.max(axis=1), 32))
    np.testing.assert_array_equal(out[:, 2], np.concatenate([[x[0]], x[:31], [x[32]], x[32:63]]))
