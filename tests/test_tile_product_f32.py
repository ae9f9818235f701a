"""`@` on 16-bit floats is an f32 tile, as Triton's `tl.dot` (issue 28, item 7): exact
products, f32 sums, one rounding where the kernel casts. `acc += a @ b` (and `acc = acc +
a @ b`, `acc = a @ b + acc`) is `acc = tile.mma(a, b, acc)`, bit for bit.

Before, bf16 @ bf16 was a bf16 tile, so each K step's product was rounded to bf16 before
the f32 add: a 100 x 72 x 90 linear layer was off by 0.077. tests/test_gpu_tile_lang.py
runs the same kernels on the GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, Slice, bf16, f16, f32, tile

pytest.importorskip("ml_dtypes")
rng = np.random.default_rng(28)


@tile.kernel(num_warps=4)
def linear_aug(x: Slice[bf16, 2], w: Slice[bf16, 2], y: DisjointSlice[f32, 2],
               BM: Const[int], BN: Const[int], BK: Const[int]):
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(x, 1, BK)):
        acc += tile.load(x, (i, k), (BM, BK)) @ tile.load(w, (k, j), (BK, BN))
    tile.store(y, (i, j), acc)


@tile.kernel(num_warps=4)
def linear_mma(x: Slice[bf16, 2], w: Slice[bf16, 2], y: DisjointSlice[f32, 2],
               BM: Const[int], BN: Const[int], BK: Const[int]):
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(x, 1, BK)):
        acc = tile.mma(tile.load(x, (i, k), (BM, BK)), tile.load(w, (k, j), (BK, BN)), acc)
    tile.store(y, (i, j), acc)


@tile.kernel(num_warps=4)
def linear_spelled(x: Slice[bf16, 2], w: Slice[bf16, 2], y: DisjointSlice[f32, 2],
                   y2: DisjointSlice[f32, 2], out16: DisjointSlice[bf16, 2],
                   BM: Const[int], BN: Const[int], BK: Const[int]):
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((BM, BN), f32)
    acc2 = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(x, 1, BK)):
        a = tile.load(x, (i, k), (BM, BK))
        b = tile.load(w, (k, j), (BK, BN))
        acc = acc + a @ b
        acc2 = a @ b + acc2
    tile.store(y, (i, j), acc)
    tile.store(y2, (i, j), acc2)
    tile.store(out16, (i, j), acc.astype(bf16))


def _layer(m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = rng.standard_normal((m, k)).astype(bf16.numpy)
    w = rng.standard_normal((k, n)).astype(bf16.numpy)
    return x, w, x.astype(np.float64) @ w.astype(np.float64)


def test_a_bf16_linear_layer_accumulates_unrounded_products():
    """The issue's layer: 100 x 72 x 90, no dimension a multiple of its tile."""
    x, w, want = _layer(100, 72, 90)
    y = np.zeros((100, 90), np.float32)
    grid = (tile.cdiv(100, 32), tile.cdiv(90, 32))
    with ox.device("cpu"):
        linear_aug[grid](x, w, y, 32, 32, 16)
    assert np.abs(y - want).max() < 1e-4  # f32 sums of exact products (was 0.077)


def test_every_spelling_is_the_explicit_mma_bit_for_bit():
    x, w, _ = _layer(70, 40, 50)
    grid = (tile.cdiv(70, 32), tile.cdiv(50, 32))
    outs = [np.zeros((70, 50), np.float32) for _ in range(4)]
    out16 = np.zeros((70, 50), bf16.numpy)
    with ox.device("cpu"):
        linear_mma[grid](x, w, outs[0], 32, 32, 16)
        linear_aug[grid](x, w, outs[1], 32, 32, 16)
        linear_spelled[grid](x, w, outs[2], outs[3], out16, 32, 32, 16)
    for got in outs[1:]:
        np.testing.assert_array_equal(got, outs[0])
    # a bf16 result is one cast away, rounded once from the f32 sums
    np.testing.assert_array_equal(out16, outs[0].astype(bf16.numpy))


@tile.kernel(num_warps=4)
def product_dtypes(a: Slice[f16, 2], b: Slice[bf16, 2], o: DisjointSlice[f32, 2]):
    x, y = tile.load(a, (0, 0), (16, 16)), tile.load(b, (0, 0), (16, 16))
    p = x @ x + y @ y          # f16 @ f16 and bf16 @ bf16: f32 tiles
    q = x @ y                  # f16 @ bf16 promotes to f32, as `+` does
    tile.store(o, (0, 0), p + q)


def test_products_of_halves_and_mixed_halves_are_f32():
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 16)).astype(bf16.numpy)
    o = np.zeros((16, 16), np.float32)
    with ox.device("cpu"):
        product_dtypes[1](a, b, o)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    np.testing.assert_allclose(o, a64 @ a64 + b64 @ b64 + a64 @ b64, rtol=1e-5, atol=1e-4)


def test_the_fused_product_compiles_for_the_gpu():
    """One product a K step, none rounded to bf16: no `cvt.rn.bf16` inside the loop."""
    ck = linear_aug.compile(Slice[bf16, 2], Slice[bf16, 2], DisjointSlice[f32, 2], 64, 64, 32,
                            arch="sm_80")
    assert "mma.sync.aligned.m16n8k16" in ck.ptx
    assert "cvt.rn.bf16" not in ck.ptx
    assert ck.cubin
