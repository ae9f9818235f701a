"""tile.mma on 8-bit floats without a GPU: the engine each product takes (wgmma's fp8
instructions on sm_90, a (K, N) B staged transposed; multiply-adds elsewhere), the PTX of
the wgmma path (k32 steps, 128-element rows, TMA boxes of 8-bit elements), the CPU's results
against NumPy, and what the frontend refuses."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_gpu_tile_rings import make_gemm, make_linear_t

import oxide as ox
from oxide import DisjointSlice, Slice, f8e4m3, f8e5m2, f32, tile
from oxide.codegen.abi import OperandMap
from oxide.errors import KernelTypeError

V = dataclasses.replace  # an array type with rows of 16-byte vectors


def ptx_of_linear_t(dt, bm: int, bn: int, bk: int, warps: int = 8, stages: int = 3) -> str:
    sig = (V(Slice[dt, 2], vectors=True), V(Slice[dt, 2], vectors=True),
           V(DisjointSlice[f32, 2], vectors=True))
    return make_linear_t(dt, warps, stages).compile(*sig, bm, bn, bk, arch="sm_90").ptx


@pytest.mark.parametrize("dt, ptx_type", [(f8e4m3, "e4m3"), (f8e5m2, "e5m2")])
def test_a_k_major_product_takes_wgmma_fp8(dt, ptx_type) -> None:
    sig = (V(Slice[dt, 2], vectors=True), V(Slice[dt, 2], vectors=True),
           V(DisjointSlice[f32, 2], vectors=True))
    ck = make_linear_t(dt, 8, 3).compile(*sig, 128, 256, 128, arch="sm_90")
    # one k32 instruction per 32 bytes of K: 4 per 128-element step, no transpose operands
    want = f"wgmma.mma_async.sync.aligned.m64n256k32.f32.{ptx_type}.{ptx_type}"
    assert ck.ptx.count(want) == 4 and "mma.sync" not in ck.ptx
    assert ", p, 1, 1;" in ck.ptx
    # both operands by TMA in boxes of one 128-byte row (128 elements), swizzle 128 (the
    # f32 result, param 2, goes out by TMA too: tests/test_tile_tma_stores.py)
    assert tuple(m for m in ck.operand_maps if m.param < 2) == (
        OperandMap(0, dt.name, (128, 128), 128), OperandMap(1, dt.name, (256, 128), 128))


def test_narrow_rows_of_fp8() -> None:
    # K = 64: rows of 64 bytes (swizzle 64), two k32 steps
    ptx = ptx_of_linear_t(f8e4m3, 64, 128, 64, warps=4, stages=2)
    assert ptx.count("m64n128k32.f32.e4m3.e4m3") == 2


def test_an_mn_major_fp8_b_is_staged_transposed() -> None:
    # wgmma reads 8-bit operands K-major only: a @ b with b (K, N) stores b's transpose
    # into shared memory element by element (no ring), then reads it K-major
    sig = (V(Slice[f8e4m3, 2], vectors=True), V(Slice[f8e4m3, 2], vectors=True),
           V(DisjointSlice[f32, 2], vectors=True))
    ck = make_gemm(f8e4m3, 4, 1).compile(*sig, 64, 64, 32, arch="sm_90")
    assert ck.ptx.count("m64n64k32.f32.e4m3.e4m3") == 1 and "mma.sync" not in ck.ptx
    # A may come by TMA, B not (the f32 result may go out by TMA: tile/tma_stores.py)
    assert [m.param for m in ck.operand_maps if m.param != 2] in ([], [0])
    assert "st.shared.b8" in ck.ptx or "st.shared.u8" in ck.ptx


@pytest.mark.parametrize("dt", [f8e4m3, f8e5m2])
def test_fp8_products_on_the_cpu(dt) -> None:
    rng = np.random.default_rng(3)
    m, n, k = 40, 24, 72
    x = rng.standard_normal((m, k)).astype(dt.numpy)
    w = rng.standard_normal((n, k)).astype(dt.numpy)
    with ox.device("cpu"):
        y = ox.to_device(np.zeros((m, n), np.float32))
        make_linear_t(dt, 4, 2)[(tile.cdiv(m, 16), tile.cdiv(n, 16))](
            ox.to_device(x), ox.to_device(w), y, 16, 16, 32)
        got = y.to_numpy()
    # products exact in f32; the CPU adds them in k order in f32
    want = np.zeros((m, n), np.float32)
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    for kk in range(k):
        want += x32[:, kk:kk + 1] * w32[:, kk][None, :]
    np.testing.assert_array_equal(got, want)


def test_mma_of_two_fp8_formats_is_refused() -> None:
    @tile.kernel(num_warps=4)
    def mixed(a: Slice[f8e4m3, 2], b: Slice[f8e5m2, 2], c: DisjointSlice[f32, 2]):
        acc = tile.zeros((64, 64), f32)
        acc = tile.mma(tile.load(a, (0, 0), (64, 32)), tile.load(b, (0, 0), (32, 64)), acc)
        tile.store(c, (0, 0), acc)

    with pytest.raises(KernelTypeError, match="one dtype"):
        mixed.compile(Slice[f8e4m3, 2], Slice[f8e5m2, 2], DisjointSlice[f32, 2], arch="sm_90")
