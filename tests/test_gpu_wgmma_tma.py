"""On an H100/H200: wgmma (SS and RS forms, K-major and MN-major operands, swizzled
shared-memory descriptors) against NumPy.

tests/test_wgmma_tma.py proves these kernels compile for sm_90a and assemble without a
GPU. The layouts (docs/language.md, "wgmma"): thread t of the warp group (w = t // 32,
lane l = t % 32, g = l // 4, q = l % 4) holds accumulator element e at row
16w + g + 8 * ((e // 2) % 2), column 8 * (e // 4) + 2q + e % 2. A 128-byte-swizzled row r
of a shared operand keeps its 16-byte chunk c at chunk c ^ (r % 8).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import oxide as ox
from oxide import Const, RawSlice, bf16, f16, f32

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _gpu() -> Iterator[None]:
    with ox.device(0):
        yield


def run(kernel: Any, config: Any, *arrays: Any) -> list[np.ndarray]:
    """Launches on the current device; returns every NumPy argument's contents after."""
    dev = [ox.to_device(a) if isinstance(a, np.ndarray) else a for a in arrays]
    ox.launch(kernel, config, *dev)
    return [d.to_numpy() for d, a in zip(dev, arrays, strict=True) if isinstance(a, np.ndarray)]


def small_values(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Values bf16 and f16 hold exactly; sums of their products stay exact in f32."""
    return (rng.integers(-8, 9, shape) * 0.25).astype(np.float32)


# -- SS form: A (64 x 64) and B (N x 64) K-major, 128-byte swizzle -------------------------

@ox.kernel(checks=False)
def wgmma_ss(a: RawSlice[bf16], b: RawSlice[bf16], out: RawSlice[f32], G: Const[int]):
    """out (64 x N, N = 64 G) = A @ B.T, four k16 steps over K = 64."""
    t = ox.thread_idx.x
    n = 64 * G
    sa = ox.shared.array(bf16, (64, 64))
    sb = ox.shared.array(bf16, (256, 64))
    with ox.unsafe():
        for e in range(t, 64 * 64, 128):
            r = e // 64
            k = e % 64
            sa[r, ((k // 8) ^ (r % 8)) * 8 + k % 8] = a[e]
        for e in range(t, n * 64, 128):
            r = e // 64
            k = e % 64
            sb[r, ((k // 8) ^ (r % 8)) * 8 + k % 8] = b[e]
    ox.fence_proxy_async()
    ox.sync_threads()
    acc = ((0.0,) * 32,) * G
    ox.wgmma_fence()
    for kk in range(4):
        acc = ox.wgmma(acc, ox.wgmma_desc(sa[0, kk * 16]), ox.wgmma_desc(sb[0, kk * 16]),
                       scale_d=kk > 0)
    ox.wgmma_commit()
    acc = ox.wgmma_wait(0, acc)
    lane = t % 32
    r0 = 16 * (t // 32) + lane // 4
    for g in range(G):
        for e in range(32):
            row = r0 + 8 * ((e // 2) % 2)
            col = 64 * g + 8 * (e // 4) + 2 * (lane % 4) + e % 2
            with ox.unsafe():
                out[row * n + col] = acc[g][e]


# -- RS form: A (64 x 32) from registers, B (32 x 128) MN-major (as `a @ b` has it) -------

@ox.kernel(checks=False)
def wgmma_rs_mn(a: RawSlice[f16], b: RawSlice[f16], out: RawSlice[f32]):
    """out (64 x 128) = A @ B with B row-major K x N: two 64-column slabs of 128-byte rows,
    swizzled by K row; A's fragments straight from global memory (the RS form)."""
    t = ox.thread_idx.x
    sb = ox.shared.array(f16, (2, 32, 64))
    with ox.unsafe():
        for e in range(t, 32 * 128, 128):
            k = e // 128
            c = e % 128
            j = c % 64
            sb[c // 64, k, ((j // 8) ^ (k % 8)) * 8 + j % 8] = b[e]
    ox.fence_proxy_async()
    ox.sync_threads()
    lane = t % 32
    r0 = 16 * (t // 32) + lane // 4
    q2 = 2 * (lane % 4)
    acc = ((0.0,) * 32,) * 2
    ox.wgmma_fence()
    for kk in range(2):
        k0 = 16 * kk + q2
        with ox.unsafe():
            fa = (a[r0 * 32 + k0], a[r0 * 32 + k0 + 1], a[(r0 + 8) * 32 + k0],
                  a[(r0 + 8) * 32 + k0 + 1], a[r0 * 32 + k0 + 8], a[r0 * 32 + k0 + 9],
                  a[(r0 + 8) * 32 + k0 + 8], a[(r0 + 8) * 32 + k0 + 9])
        acc = ox.wgmma(acc, fa, ox.wgmma_desc(sb[0, 16 * kk, 0], major="mn"), dtype=f16,
                       trans_b=True)
    ox.wgmma_commit()
    acc = ox.wgmma_wait(0, acc)
    for g in range(2):
        for e in range(32):
            row = r0 + 8 * ((e // 2) % 2)
            col = 64 * g + 8 * (e // 4) + q2 + e % 2
            with ox.unsafe():
                out[row * 128 + col] = acc[g][e]


# -- a 64-byte swizzle, and scale_d=False ignoring the accumulators ------------------------

@ox.kernel(checks=False)
def wgmma_swizzle64(a: RawSlice[bf16], b: RawSlice[bf16], out: RawSlice[f32]):
    """out (64 x 64) = A @ B.T over K = 32, rows of 64 bytes (32 bf16): the 16-byte chunk
    c of row r sits at c ^ ((r // 2) % 4)."""
    t = ox.thread_idx.x
    sa = ox.shared.array(bf16, (64, 32))
    sb = ox.shared.array(bf16, (64, 32))
    with ox.unsafe():
        for e in range(t, 64 * 32, 128):
            r = e // 32
            k = e % 32
            sa[r, ((k // 8) ^ ((r // 2) % 4)) * 8 + k % 8] = a[e]
            sb[r, ((k // 8) ^ ((r // 2) % 4)) * 8 + k % 8] = b[e]
    ox.fence_proxy_async()
    ox.sync_threads()
    acc = (1000.0,) * 32  # dropped: the first step has scale_d=False
    ox.wgmma_fence()
    acc = ox.wgmma(acc, ox.wgmma_desc(sa[0, 0], swizzle=64),
                   ox.wgmma_desc(sb[0, 0], swizzle=64), scale_d=False)
    acc = ox.wgmma(acc, ox.wgmma_desc(sa[0, 16], swizzle=64),
                   ox.wgmma_desc(sb[0, 16], swizzle=64))
    ox.wgmma_commit()
    acc = ox.wgmma_wait(0, acc)
    lane = t % 32
    r0 = 16 * (t // 32) + lane // 4
    for e in range(32):
        row = r0 + 8 * ((e // 2) % 2)
        col = 8 * (e // 4) + 2 * (lane % 4) + e % 2
        with ox.unsafe():
            out[row * 64 + col] = acc[e]


@pytest.mark.parametrize("groups", [1, 2, 3, 4])
def test_wgmma_ss_k_major(groups: int) -> None:
    import ml_dtypes

    rng = np.random.default_rng(groups)
    n = 64 * groups
    a, b = small_values(rng, (64, 64)), small_values(rng, (n, 64))
    out = np.zeros(64 * n, np.float32)
    (got,) = run(wgmma_ss, (1, 128), a.astype(ml_dtypes.bfloat16).ravel(),
                 b.astype(ml_dtypes.bfloat16).ravel(), out, groups)[2:]
    np.testing.assert_array_equal(got.reshape(64, n), a @ b.T)


def test_wgmma_rs_with_mn_major_b() -> None:
    rng = np.random.default_rng(7)
    a, b = small_values(rng, (64, 32)), small_values(rng, (32, 128))
    out = np.zeros(64 * 128, np.float32)
    (got,) = run(wgmma_rs_mn, (1, 128), a.astype(np.float16).ravel(),
                 b.astype(np.float16).ravel(), out)[2:]
    np.testing.assert_array_equal(got.reshape(64, 128), a @ b)


def test_wgmma_swizzle64_and_scale_d() -> None:
    import ml_dtypes

    rng = np.random.default_rng(9)
    a, b = small_values(rng, (64, 32)), small_values(rng, (64, 32))
    out = np.zeros(64 * 64, np.float32)
    (got,) = run(wgmma_swizzle64, (1, 128), a.astype(ml_dtypes.bfloat16).ravel(),
                 b.astype(ml_dtypes.bfloat16).ravel(), out)[2:]
    np.testing.assert_array_equal(got.reshape(64, 64), a @ b.T)
