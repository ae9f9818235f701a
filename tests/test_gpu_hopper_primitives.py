"""On an H100/H200: each tensor-core and Hopper primitive against a NumPy reference.

tests/test_hopper_primitives.py proves these compile and assemble without a GPU; here
they run. Fragment layouts are PTX's (docs/language.md, "Inline PTX and tensor-core
primitives"): with g = lane // 4 and t = lane % 4,

- m16n8k16 A (16x16, row-major): register r holds the pair (row, col), (row, col + 1) with
  row = g + 8 * (r % 2), col = 2t + 8 * (r // 2); B (16x8): register r holds (k, n),
  (k + 1, n) with k = 2t + 8r, n = g; C/D: element e is (g + 8 * (e // 2), 2t + e % 2).
- m16n8k8 tf32 A (16x8): element e is (g + 8 * (e % 2), t + 4 * (e // 2)); B (8x8):
  element e is (t + 4e, g).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import oxide as ox
from oxide import AtomicSlice, RawSlice, Slice, f16, f32, f64, i32, u16, u32, u64

pytestmark = pytest.mark.gpu

LANES = np.arange(32)
G, T4 = LANES // 4, LANES % 4


@pytest.fixture(autouse=True)
def _gpu() -> Iterator[None]:
    with ox.device(0):
        yield


def run(kernel: Any, config: Any, *arrays: Any) -> list[np.ndarray]:
    """Launches on the current device; returns every NumPy argument's contents after, in
    order (tests/test_hopper_primitives.py runs the mma/ldmatrix/stmatrix checks on the CPU)."""
    from oxide.runtime.device import current_device

    if current_device().is_cpu:
        ox.launch(kernel, config, *arrays)
        return [a for a in arrays if isinstance(a, np.ndarray)]
    dev = [ox.to_device(a) if isinstance(a, np.ndarray) else a for a in arrays]
    ox.launch(kernel, config, *dev)
    return [d.to_numpy() for d, a in zip(dev, arrays, strict=True) if isinstance(a, np.ndarray)]


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """The bf16 bits of f32 values that bf16 holds exactly."""
    bits = x.astype(np.float32).view(np.uint32)
    assert np.all(bits & 0xFFFF == 0), "test values must be exact in bf16"
    return (bits >> 16).astype(np.uint32)


def small_values(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Values every tested format holds exactly (products and sums of 16 stay exact in f32)."""
    return (rng.integers(-8, 9, shape) * 0.25).astype(np.float32)


def d_positions() -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) of D's 4 elements in each lane, shape (32, 4)."""
    e = np.arange(4)
    return G[:, None] + 8 * (e // 2)[None, :], 2 * T4[:, None] + (e % 2)[None, :]


# -- ox.asm ------------------------------------------------------------------------------

@ox.kernel
def asm_ops(x: RawSlice[u32], a: RawSlice[f32], b: RawSlice[f64]):
    i = ox.thread_idx.x
    with ox.unsafe():
        x[i] = ox.asm("add.u32 %0, %1, %2;", u32, x[i], u32(7))
        two, sq = ox.asm("{ add.f32 $0, $2, $2; mul.f64 $1, $3, $3; }", (f32, f64), a[i], b[i])
        a[i] = two
        b[i] = sq


def test_asm_computes_what_the_ptx_says() -> None:
    x = np.arange(64, dtype=np.uint32)
    a = np.linspace(-3, 3, 64).astype(np.float32)
    b = np.linspace(-2, 5, 64)
    rx, ra, rb = run(asm_ops, (1, 64), x, a, b)
    np.testing.assert_array_equal(rx, x + 7)
    np.testing.assert_array_equal(ra, a + a)
    np.testing.assert_array_equal(rb, b * b)


# -- mma.sync ------------------------------------------------------------------------------

@ox.kernel
def mma_bf16(a: Slice[u32], b: Slice[u32], out: RawSlice[f32]):
    lane = ox.lane_id()
    fa = (a[lane * 4], a[lane * 4 + 1], a[lane * 4 + 2], a[lane * 4 + 3])
    d = ox.mma_sync(fa, (b[lane * 2], b[lane * 2 + 1]), (0.0, 0.0, 0.0, 0.0), dtype=ox.bf16)
    with ox.unsafe():
        for j in range(4):
            out[lane * 4 + j] = d[j]


def test_mma_sync_bf16_matches_a_matmul() -> None:
    rng = np.random.default_rng(1)
    A, B = small_values(rng, (16, 16)), small_values(rng, (16, 8))
    ab, bb = bf16_bits(A), bf16_bits(B)
    fa = np.zeros((32, 4), np.uint32)
    for r in range(4):
        row, col = G + 8 * (r % 2), 2 * T4 + 8 * (r // 2)
        fa[:, r] = ab[row, col] | (ab[row, col + 1] << 16)
    fb = np.zeros((32, 2), np.uint32)
    for r in range(2):
        k = 2 * T4 + 8 * r
        fb[:, r] = bb[k, G] | (bb[k + 1, G] << 16)
    *_, out = run(mma_bf16, (1, 32), fa.ravel(), fb.ravel(), np.zeros(128, np.float32))
    rows, cols = d_positions()
    np.testing.assert_array_equal(out.reshape(32, 4), (A @ B)[rows, cols])


@ox.kernel
def mma_f16(a: Slice[f16], b: Slice[f16], c: Slice[f32], out: RawSlice[f32]):
    lane = ox.lane_id()
    fa = (a[lane * 8], a[lane * 8 + 1], a[lane * 8 + 2], a[lane * 8 + 3], a[lane * 8 + 4],
          a[lane * 8 + 5], a[lane * 8 + 6], a[lane * 8 + 7])
    fb = (b[lane * 4], b[lane * 4 + 1], b[lane * 4 + 2], b[lane * 4 + 3])
    acc = (c[lane * 4], c[lane * 4 + 1], c[lane * 4 + 2], c[lane * 4 + 3])
    for _ in range(3):
        acc = ox.mma_sync(fa, fb, acc, dtype=f16)
    with ox.unsafe():
        for j in range(4):
            out[lane * 4 + j] = acc[j]


def test_mma_sync_f16_halves_accumulate() -> None:
    rng = np.random.default_rng(2)
    A, B, C = small_values(rng, (16, 16)), small_values(rng, (16, 8)), small_values(rng, (16, 8))
    fa = np.zeros((32, 8), np.float16)
    for e in range(8):  # element e of A: register e // 2, half e % 2
        r = e // 2
        fa[:, e] = A[G + 8 * (r % 2), 2 * T4 + 8 * (r // 2) + e % 2]
    fb = np.zeros((32, 4), np.float16)
    for e in range(4):
        fb[:, e] = B[2 * T4 + 8 * (e // 2) + e % 2, G]
    rows, cols = d_positions()
    *_, out = run(mma_f16, (1, 32), fa.ravel(), fb.ravel(), C[rows, cols].ravel(),
                 np.zeros(128, np.float32))
    np.testing.assert_array_equal(out.reshape(32, 4), (C + 3 * (A @ B))[rows, cols])


@ox.kernel
def mma_tf32(a: Slice[f32], b: Slice[f32], out: RawSlice[f32]):
    lane = ox.lane_id()
    fa = (a[lane * 4], a[lane * 4 + 1], a[lane * 4 + 2], a[lane * 4 + 3])
    d = ox.mma_sync(fa, (b[lane * 2], b[lane * 2 + 1]), (0.0, 0.0, 0.0, 0.0), dtype=f32)
    with ox.unsafe():
        for j in range(4):
            out[lane * 4 + j] = d[j]


def test_mma_sync_tf32_matches_a_matmul() -> None:
    rng = np.random.default_rng(3)
    A, B = small_values(rng, (16, 8)), small_values(rng, (8, 8))
    e = np.arange(4)
    fa = A[G[:, None] + 8 * (e % 2)[None, :], T4[:, None] + 4 * (e // 2)[None, :]]
    fb = B[T4[:, None] + 4 * np.arange(2)[None, :], G[:, None]]
    *_, out = run(mma_tf32, (1, 32), fa.ravel().copy(), fb.ravel().copy(),
                 np.zeros(128, np.float32))
    rows, cols = d_positions()
    np.testing.assert_array_equal(out.reshape(32, 4), (A @ B)[rows, cols])


# -- ldmatrix / stmatrix -------------------------------------------------------------------

@ox.kernel
def ld_x4(src: Slice[u16], out: RawSlice[u32], plain: RawSlice[u32]):
    tile = ox.shared.array(u16, (16, 16))
    lane = ox.lane_id()
    with ox.unsafe():
        for k in range(8):
            tile[lane // 2, (lane % 2) * 8 + k] = src[(lane // 2) * 16 + (lane % 2) * 8 + k]
        ox.sync_threads()
        t0, t1, t2, t3 = ox.ldmatrix(tile[lane % 16, (lane // 16) * 8], trans=True)
        p0, p1, p2, p3 = ox.ldmatrix(tile[lane % 16, (lane // 16) * 8], 4)
        out[lane * 4] = t0
        out[lane * 4 + 1] = t1
        out[lane * 4 + 2] = t2
        out[lane * 4 + 3] = t3
        plain[lane * 4] = p0
        plain[lane * 4 + 1] = p1
        plain[lane * 4 + 2] = p2
        plain[lane * 4 + 3] = p3


def fragments(M: np.ndarray, trans: bool) -> np.ndarray:
    """The (32, 4) u32 registers ldmatrix.x4 gives for lanes addressing
    M[lane % 16, (lane // 16) * 8]: matrix j = rows 8(j%2).., cols 8(j//2).."""
    out = np.zeros((32, 4), np.uint32)
    for j in range(4):
        sub = M[8 * (j % 2):8 * (j % 2) + 8, 8 * (j // 2):8 * (j // 2) + 8].astype(np.uint32)
        if trans:
            sub = sub.T
        out[:, j] = sub[G, 2 * T4] | (sub[G, 2 * T4 + 1] << 16)
    return out


def test_ldmatrix_x4_and_trans() -> None:
    M = np.arange(256, dtype=np.uint16).reshape(16, 16) * 3 + 1
    _, out, plain = run(ld_x4, (1, 32), M.ravel(), np.zeros(128, np.uint32),
                     np.zeros(128, np.uint32))
    np.testing.assert_array_equal(plain.reshape(32, 4), fragments(M, False))
    np.testing.assert_array_equal(out.reshape(32, 4), fragments(M, True))


@ox.kernel
def st_x4(frags: Slice[u32], out: RawSlice[u16], trans: i32):
    tile = ox.shared.array(u16, (16, 16))
    lane = ox.lane_id()
    f = (frags[lane * 4], frags[lane * 4 + 1], frags[lane * 4 + 2], frags[lane * 4 + 3])
    with ox.unsafe():
        if trans:
            ox.stmatrix(tile[lane % 16, (lane // 16) * 8], f, trans=True)
        else:
            ox.stmatrix(tile[lane % 16, (lane // 16) * 8], f)
        ox.sync_threads()
        for k in range(8):
            out[lane * 8 + k] = tile[lane // 2, (lane % 2) * 8 + k]


def test_stmatrix_inverts_ldmatrix() -> None:
    M = (np.arange(256, dtype=np.uint16).reshape(16, 16) * 7 + 5).astype(np.uint16)
    for trans in (0, 1):
        frags = fragments(M, bool(trans))
        _, out = run(st_x4, (1, 32), frags.ravel(), np.zeros(256, np.uint16), np.int32(trans))
        np.testing.assert_array_equal(out.reshape(16, 16), M)


# -- mbarrier --------------------------------------------------------------------------------

ROUNDS = 6


@ox.kernel
def ping_pong(out: RawSlice[u32]):
    """Warp 0 produces ROUNDS slots, warp 1 consumes them: `full` and `empty` mbarriers of
    32 arrivals each, waited on with phase parity."""
    bars = ox.shared.array(u64, 2)
    slot = ox.shared.array(u32, 32)
    lane = ox.lane_id()
    warp = ox.warp_id()
    with ox.unsafe():
        if ox.thread_idx.x == 0:
            ox.mbarrier.init(bars[0], 32)
            ox.mbarrier.init(bars[1], 32)
            ox.fence_mbarrier_init()
        ox.sync_threads()
        for it in range(ROUNDS):
            if warp == 0:
                if it > 0:
                    ox.mbarrier.wait_parity(bars[1], u32((it - 1) % 2))
                slot[lane] = u32(it * 100) + u32(lane)
                ox.mbarrier.arrive(bars[0])
            else:
                ox.mbarrier.wait_parity(bars[0], u32(it % 2))
                out[it * 32 + lane] = slot[lane]
                ox.mbarrier.arrive(bars[1])


def test_mbarrier_ping_pong_between_two_warps() -> None:
    (out,) = run(ping_pong, (1, 64), np.zeros(ROUNDS * 32, np.uint32))
    want = (np.arange(ROUNDS)[:, None] * 100 + np.arange(32)[None, :]).astype(np.uint32)
    np.testing.assert_array_equal(out.reshape(ROUNDS, 32), want)


@ox.kernel
def try_wait(out: RawSlice[u32]):
    bars = ox.shared.array(u64, 1)
    t = ox.thread_idx.x
    with ox.unsafe():
        if t == 0:
            ox.mbarrier.init(bars[0], 64)
        ox.sync_threads()
        before = ox.mbarrier.try_wait_parity(bars[0], 1)  # the phase before the first
        ox.mbarrier.arrive_expect_tx(bars[0], 0)
        done = ox.mbarrier.try_wait_parity(bars[0], 0)
        while not done:
            done = ox.mbarrier.try_wait_parity(bars[0], 0)
        out[t] = u32(before) * 10 + u32(done)


def test_try_wait_parity_sees_the_phase_complete() -> None:
    (out,) = run(try_wait, (1, 64), np.zeros(64, np.uint32))
    np.testing.assert_array_equal(out, np.full(64, 11, np.uint32))


# -- elect, setmaxnreg, named barriers, clusters -----------------------------------------------

@ox.kernel
def elect(counts: AtomicSlice[u32]):
    if ox.elect_sync():
        ox.atomic.add(counts, ox.warp_id(), u32(1))


def test_elect_sync_picks_one_lane_per_warp() -> None:
    (counts,) = run(elect, (1, 256), np.zeros(8, np.uint32))
    np.testing.assert_array_equal(counts, np.ones(8, np.uint32))


@ox.kernel(max_threads=384)
def warp_groups(out: RawSlice[u32]):
    """Three warp groups, as a producer/consumer GEMM has them: the first gives registers
    up (40), the others take them (232); each group then meets at its own barrier."""
    t = ox.thread_idx.x
    s = ox.shared.array(u32, 384)
    with ox.unsafe():
        if ox.warp_id() < 4:  # warp group 0 (a warp-uniform condition)
            ox.setmaxnreg(40, inc=False)
        else:
            ox.setmaxnreg(232)
        s[t] = u32(t * 3)
        group = t // 128
        ox.named_barrier_sync(1 + group, 128)
        out[t] = s[group * 128 + (t + 1) % 128]


def test_setmaxnreg_and_named_barriers_per_warp_group() -> None:
    ck = warp_groups.compile(RawSlice[u32], arch="sm_90")
    assert ck.arch == "sm_90a"
    (out,) = run(warp_groups, (4, 384), np.zeros(384, np.uint32))
    t = np.arange(384)
    np.testing.assert_array_equal(out, ((t // 128) * 128 + (t + 1) % 128) * 3)


@ox.kernel
def cluster_regs(out: RawSlice[i32]):
    b = ox.block_idx.x
    with ox.unsafe():
        if ox.thread_idx.x == 0:
            out[b * 6] = ox.cluster.rank()
            out[b * 6 + 1] = ox.cluster.size()
            out[b * 6 + 2] = ox.cluster.block_idx("x")
            out[b * 6 + 3] = ox.cluster.block_dim("x")
            out[b * 6 + 4] = ox.cluster.cluster_idx("x")
            out[b * 6 + 5] = ox.cluster.grid_dim("x")
    ox.cluster.sync()
    ox.fence_proxy_async()


def test_cluster_registers_without_clusters() -> None:
    """A launch without clusters runs each block as a cluster of one."""
    (out,) = run(cluster_regs, (5, 64), np.full(30, -1, np.int32))
    want = np.array([[0, 1, 0, 1, b, 5] for b in range(5)], np.int32)
    np.testing.assert_array_equal(out.reshape(5, 6), want)


def test_an_ldmatrix_row_past_the_array_is_an_index_error() -> None:
    """The GPU reports a row running past the shared array as the CPU does, and the
    collective still completes (the bad lane reads element 0 instead)."""
    from test_hopper_primitives import ld_row

    # rows 8-15, columns 0-7 (the kernel writes every element of its tile)
    (out,) = run(ld_row, (1, 32), np.zeros(32, np.uint32), np.int32(8), np.int32(0))
    assert out.any()
    for row, col in ((9, 0), (0, 9), (-1, 0)):
        with pytest.raises(ox.KernelIndexError, match="ldmatrix"):
            run(ld_row, (1, 32), np.zeros(32, np.uint32), np.int32(row), np.int32(col))
            ox.synchronize()
