"""f32 division in a kernel with wgmma: computed without `div.rn.f32`'s slow-path call
(which makes ptxas serialize every wgmma, note C7509), and still correctly rounded: bit
for bit NumPy's quotient over random bit patterns (subnormals, zeros, infinities, NaNs)
and over quotients near rounding boundaries."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from oxide import DisjointSlice, Slice, bf16, f32, tile

ROWS = 64


@tile.kernel(num_warps=4)
def divide_beside_a_product(x: Slice[f32, 2], y: Slice[f32, 2], out: DisjointSlice[f32, 2],
                            a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[f32, 2]):
    i = tile.bid(0)
    tile.store(out, (i, 0), tile.load(x, (i, 0), (ROWS, 64)) / tile.load(y, (i, 0), (ROWS, 64)))
    tile.store(c, (i, 0), tile.mma(tile.load(a, (0, 0), (64, 64)), tile.load(b, (0, 0), (64, 64)),
                                   tile.zeros((64, 64), f32)))


def _sig():
    v = dataclasses.replace
    return (v(Slice[f32, 2], vectors=True), v(Slice[f32, 2], vectors=True),
            v(DisjointSlice[f32, 2], vectors=True), v(Slice[bf16, 2], vectors=True),
            v(Slice[bf16, 2], vectors=True), v(DisjointSlice[f32, 2], vectors=True))


def test_the_ptx_has_no_division_call() -> None:
    ptx = divide_beside_a_product.compile(*_sig(), arch="sm_90").ptx
    assert "wgmma.mma_async" in ptx
    assert "div.rn.f32" not in ptx and "rcp.approx.ftz.f64" in ptx
    # without a wgmma in the kernel, division stays `div.rn.f32`
    plain = divide_beside_a_product.compile(*_sig(), arch="sm_80").ptx
    assert "div.rn.f32" in plain


def _operands(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    bits = rng.integers(0, 2**32, size=(2, n), dtype=np.uint64).astype(np.uint32)
    x, y = bits.view(np.float32)
    # a third of them: ordinary magnitudes, quotients near halfway cases (x = q * y with
    # q one bit past an f32 value)
    k = n // 3
    y[:k] = rng.uniform(0.5, 2.0, k).astype(np.float32)
    q = rng.uniform(1.0, 2.0, k).astype(np.float32)
    x[:k] = (q.astype(np.float64) * (1 + 2.0**-24) * y[:k]).astype(np.float32)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.17549435e-38,
                         3.4028235e38, 1.0, -1.0, 2.0**-149, 2.0**-126], np.float32)
    x[-len(specials) ** 2:] = np.repeat(specials, len(specials))
    y[-len(specials) ** 2:] = np.tile(specials, len(specials))
    return x, y


@pytest.mark.gpu
def test_gpu_division_is_correctly_rounded() -> None:
    import oxide as ox

    rng = np.random.default_rng(7)
    blocks = 512
    n = blocks * ROWS * 64
    x, y = _operands(rng, n)
    out = ox.to_device(np.zeros((blocks * ROWS, 64), np.float32))
    a = rng.standard_normal((64, 64)).astype(bf16.numpy)
    c = ox.to_device(np.zeros((blocks * 64, 64), np.float32))
    divide_beside_a_product[blocks](ox.to_device(x.reshape(-1, 64)), ox.to_device(y.reshape(-1, 64)),
                                    out, ox.to_device(a), ox.to_device(a), c)
    got = out.to_numpy().ravel()
    with np.errstate(all="ignore"):
        want = x / y
    nan = np.isnan(want)
    assert (np.isnan(got) == nan).all()
    mismatch = np.flatnonzero(got[~nan].view(np.uint32) != want[~nan].view(np.uint32))
    assert mismatch.size == 0, (x[~nan][mismatch[:5]], y[~nan][mismatch[:5]],
                                got[~nan][mismatch[:5]], want[~nan][mismatch[:5]])
    prod = a.astype(np.float64) @ a.astype(np.float64)
    np.testing.assert_allclose(c.to_numpy()[:64], prod, rtol=0, atol=1e-2)
