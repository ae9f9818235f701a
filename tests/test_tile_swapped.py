"""A product of few rows (BM of 8, 16 or 32) on sm_90: wgmma's M is 64 a warp group, so
the compiler computes it transposed, `acc^T = b^T a^T` (tile/mma_choice.py
`swapped_fits`): B's tile is the instruction's A (read MN-major, or K-major where B is a
folded `w.permute((1, 0))`), A's rows its narrow N, and the accumulator stays in the
transpose of wgmma's layout, so the user's epilogue and store read it as (BM, BN). Before,
such a product ran on mma.sync. Checked as compiled for sm_90 (PTX) and run on the CPU as
sm_90 runs it (OXIDE_TILE_CPU_HOPPER=1) and as sm_80 does, against NumPy;
tests/test_gpu_tile_swapped.py runs the same kernels on the GPU."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest
from test_tile_tma_rings import TMA, V
from test_tile_transposed_a import on_cpu, switch

from oxide import Const, DisjointSlice, Slice, bf16, f16, f32, tile

rng = np.random.default_rng(59)
WGMMA = re.compile(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.\w+\.\w+ "
                   r"\{[^}]*\}, %rd\d+, %rd\d+, p, 1, 1, (\d), (\d);")
Launch = Callable[..., None]


def make_matmul(warps: int, stages: int, form: str = "ab", dt=bf16):
    """c = act(a @ b + bias) in bf16, `form` the way B or A is written: "ab" (a (M, K),
    b (K, N)), "wt" (b given as the (N, K) weight, `w.permute((1, 0))`), "at" (a given
    as the (K, M) tile, `tile.load(..., order=(1, 0))`)."""
    @tile.kernel(num_warps=warps, num_stages=stages)
    def ab(a: Slice[dt, 2], b: Slice[dt, 2], bias: Slice[f32, 1], c: DisjointSlice[bf16, 2],
           BM: Const[int], BN: Const[int], BK: Const[int]):
        i, j = tile.bid(0), tile.bid(1)
        acc = tile.zeros((BM, BN), f32)
        for k in range(tile.num_tiles(a, 1, BK)):
            acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)), acc)
        out = tile.maximum(acc + tile.load(bias, (j,), (BN,))[None, :], 0.0)
        tile.store(c, (i, j), out.astype(bf16))

    @tile.kernel(num_warps=warps, num_stages=stages)
    def wt(a: Slice[dt, 2], w: Slice[dt, 2], bias: Slice[f32, 1], c: DisjointSlice[bf16, 2],
           BM: Const[int], BN: Const[int], BK: Const[int]):
        i, j = tile.bid(0), tile.bid(1)
        acc = tile.zeros((BM, BN), f32)
        for k in range(tile.num_tiles(a, 1, BK)):
            x = tile.load(a, (i, k), (BM, BK))
            acc = tile.mma(x, tile.load(w, (j, k), (BN, BK)).permute((1, 0)), acc)
        out = tile.maximum(acc + tile.load(bias, (j,), (BN,))[None, :], 0.0)
        tile.store(c, (i, j), out.astype(bf16))

    @tile.kernel(num_warps=warps, num_stages=stages)
    def at(x: Slice[dt, 2], b: Slice[dt, 2], bias: Slice[f32, 1], c: DisjointSlice[bf16, 2],
           BM: Const[int], BN: Const[int], BK: Const[int]):
        i, j = tile.bid(0), tile.bid(1)
        acc = tile.zeros((BM, BN), f32)
        for k in range(tile.num_tiles(x, 0, BK)):
            xt = tile.load(x, (i, k), (BM, BK), order=(1, 0))
            acc = tile.mma(xt, tile.load(b, (k, j), (BK, BN)), acc)
        out = tile.maximum(acc + tile.load(bias, (j,), (BN,))[None, :], 0.0)
        tile.store(c, (i, j), out.astype(bf16))
    return {"ab": ab, "wt": wt, "at": at}[form]


def make_row_sums(warps: int):
    """s = the row sums of a @ b, one K step: a reduction over the transposed
    accumulator's columns."""
    @tile.kernel(num_warps=warps)
    def row_sums(a: Slice[bf16, 2], b: Slice[bf16, 2], s: DisjointSlice[f32, 1],
                 BM: Const[int], BN: Const[int], BK: Const[int]):
        i = tile.bid(0)
        acc = tile.mma(tile.load(a, (i, 0), (BM, BK)), tile.load(b, (0, 0), (BK, BN)),
                       tile.zeros((BM, BN), f32))
        tile.store(s, (i,), tile.sum(acc, 1))
    return row_sums


def _sig(dt=bf16):
    return (V(Slice[dt, 2], vectors=True), V(Slice[dt, 2], vectors=True),
            V(Slice[f32, 1], vectors=True), V(DisjointSlice[bf16, 2], vectors=True))


def _products(ptx: str) -> set[tuple[str, str, str]]:
    return set(WGMMA.findall(ptx))


@pytest.mark.parametrize("form, bits", [("ab", ("1", "0")), ("wt", ("0", "0")),
                                        ("at", ("1", "1"))])
@pytest.mark.parametrize("bm", [16, 32])
def test_few_rows_are_wgmma_n(form, bits, bm) -> None:
    """The rows are the instruction's N; B's tile its A: MN-major as `a @ b` has it (the
    first transpose bit), K-major as a weight's (N, K) tile; A's tile its B: K-major, or
    MN-major where A is written transposed (the second bit)."""
    ptx = make_matmul(4, 4, form).compile(*_sig(), bm, 64, 128, arch="sm_90").ptx
    assert _products(ptx) == {(str(bm), *bits)}
    assert "mma.sync" not in ptx and ptx.count(TMA) >= 2  # both operands by TMA


def test_eight_rows_and_eight_warps() -> None:
    ptx = make_matmul(8, 3, "ab").compile(*_sig(), 8, 128, 64, arch="sm_90").ptx
    assert _products(ptx) == {("8", "1", "0")}


def test_f16_operands() -> None:
    ptx = make_matmul(4, 3, "ab", f16).compile(*_sig(f16), 16, 64, 64, arch="sm_90").ptx
    assert WGMMA.search(ptx) and "f32.f16.f16" in ptx


def test_sm80_keeps_mma_sync() -> None:
    ptx = make_matmul(4, 3, "ab").compile(*_sig(), 16, 64, 64, arch="sm_80").ptx
    assert "wgmma" not in ptx and "mma.sync.aligned.m16n8k16" in ptx


def test_two_row_blocks_of_columns() -> None:
    """128 columns on 4 warps: each warp group issues two m64 instructions a k step,
    one for each 64 of B's columns (tests/test_tile_row_blocks.py)."""
    ptx = make_matmul(4, 3, "ab").compile(*_sig(), 16, 128, 64, arch="sm_90").ptx
    products = WGMMA.findall(ptx)
    assert set(products) == {("16", "1", "0")} and len(products) == 2 * 64 // 16


def test_not_when_it_does_not_fit() -> None:
    """B's columns must be one or two blocks of a warp group's 64 rows a group (16 *
    num_warps): 256 columns on 4 warps stay on mma.sync, as do 16 rows on 8 warps over
    64 columns."""
    for warps, bn in ((4, 256), (8, 64)):
        ptx = make_matmul(warps, 3, "ab").compile(*_sig(), 16, bn, 64, arch="sm_90").ptx
        assert "wgmma" not in ptx and "mma.sync" in ptx


def check_matmul(case, launch: Launch, form: str = "ab") -> None:
    warps, stages, m, n, k, (bm, bn, bk) = case
    a = rng.standard_normal((k, m) if form == "at" else (m, k)).astype(bf16.numpy)
    b = rng.standard_normal((n, k) if form == "wt" else (k, n)).astype(bf16.numpy)
    bias = rng.standard_normal(n).astype(np.float32)
    c = np.full((m, n), 7, bf16.numpy)
    launch(make_matmul(warps, stages, form), (tile.cdiv(m, bm), tile.cdiv(n, bn)), a, b,
           bias, c, bm, bn, bk)
    a64 = a.astype(np.float64).T if form == "at" else a.astype(np.float64)
    b64 = b.astype(np.float64).T if form == "wt" else b.astype(np.float64)
    want = np.maximum(a64 @ b64 + bias, 0.0)
    np.testing.assert_allclose(c.astype(np.float64), want, rtol=2.0 ** -7,
                               atol=2e-3 * np.sqrt(k))


def check_row_sums(launch: Launch) -> None:
    a = rng.standard_normal((48, 64)).astype(bf16.numpy)
    b = rng.standard_normal((64, 64)).astype(bf16.numpy)
    s = np.full(48, 7, np.float32)
    launch(make_row_sums(4), (3,), a, b, s, 16, 64, 64)
    want = (a.astype(np.float64) @ b.astype(np.float64)).sum(1)
    np.testing.assert_allclose(s, want, rtol=1e-5, atol=1e-3)


# (warps, stages, M, N, K, tiles): ragged in every dimension
CASES = [(4, 4, 16, 200, 264, (16, 64, 128)), (4, 3, 40, 130, 96, (32, 64, 32)),
         (8, 3, 8, 260, 128, (8, 128, 64)), (4, 3, 24, 300, 128, (32, 128, 64))]


@pytest.mark.usefixtures("hopper_on_cpu")
@pytest.mark.parametrize("producer", ["1", "cp.async"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[2:5])))
def test_matmul_against_numpy(case, producer, monkeypatch) -> None:
    switch(producer, monkeypatch)
    check_matmul(case, on_cpu)


@pytest.mark.usefixtures("hopper_on_cpu")
@pytest.mark.parametrize("form", ["wt", "at"])
def test_transposed_operands_against_numpy(form) -> None:
    check_matmul(CASES[0] if form == "wt" else CASES[1], on_cpu, form)


@pytest.mark.parametrize("hopper", ["1", "0"], ids=["sm90", "sm80"])
def test_row_sums_against_numpy(hopper, monkeypatch) -> None:
    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", hopper)
    check_row_sums(on_cpu)
