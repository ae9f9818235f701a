"""A product tile of 128 rows a warp group on sm_90 (Triton's 128 x N tiles on 4 warps,
256 x N on 8): each warp group issues two m64 instructions a k step, one for each block
of 16 * num_warps rows (tile/mma_choice.py `row_blocks`), into wgmma's accumulator of
those blocks (`layout.wgmma_accumulator`: warp w's rows `16 w + g + 8 i` of each block).
Before, such a product ran on mma.sync. Checked as compiled for sm_90 (PTX) and run on
the CPU as sm_90 runs it (OXIDE_TILE_CPU_HOPPER=1) against NumPy;
tests/test_gpu_tile_row_blocks.py runs the same kernels on the GPU."""

from __future__ import annotations

import re
import warnings

import pytest
from test_tile_swapped import Launch, _sig, check_matmul, make_matmul
from test_tile_tma_rings import TMA
from test_tile_transposed_a import on_cpu, switch

from oxide import bf16, f32, tile

WGMMA = re.compile(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.\w+\.\w+ "
                   r"\{[^}]*\}, %rd\d+, %rd\d+, p, 1, 1, (\d), (\d);")


def _ptx(warps: int, stages: int, form: str, bm: int, bn: int, bk: int) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a 128 x 256 tile on 4 warps warns of spills
        return make_matmul(warps, stages, form).compile(*_sig(), bm, bn, bk,
                                                        arch="sm_90").ptx


@pytest.mark.parametrize("warps, bm, bn, bk", [(4, 128, 128, 64), (4, 128, 64, 32),
                                               (8, 256, 128, 64)])
@pytest.mark.parametrize("form, bits", [("ab", ("0", "1")), ("wt", ("0", "0")),
                                        ("at", ("1", "1"))])
def test_two_row_blocks_a_warp_group(warps, bm, bn, bk, form, bits) -> None:
    ptx = _ptx(warps, 3, form, bm, bn, bk)
    products = WGMMA.findall(ptx)
    assert set(products) == {(str(bn), *bits)}
    # two instructions a k step for each warp group (the chain is written once)
    assert len(products) == 2 * bk // 16
    assert "mma.sync" not in ptx and ptx.count(TMA) >= 2


def test_four_blocks_stay_on_mma_sync() -> None:
    ptx = _ptx(4, 2, "ab", 256, 64, 32)
    assert "wgmma" not in ptx and "mma.sync" in ptx


@pytest.mark.parametrize("warps, tiles", [(4, (128, 64, 32)), (8, (64, 128, 32))],
                         ids=["row_blocks", "column_groups"])
def test_a_product_of_the_same_shape_on_mma_sync_keeps_both_there(warps, tiles) -> None:
    """Two products of one result shape share its accumulator layout: where one cannot
    take wgmma (f32 operands: a multiply-add loop), the other's two row blocks (or its
    warp groups' column bands) stay on mma.sync."""
    from oxide import Const, DisjointSlice, Slice

    @tile.kernel(num_warps=warps)
    def mixed(a: Slice[bf16, 2], b: Slice[bf16, 2], x: Slice[f32, 2], y: Slice[f32, 2],
              c: DisjointSlice[f32, 2], BM: Const[int], BN: Const[int], BK: Const[int]):
        acc = tile.mma(tile.load(a, (0, 0), (BM, BK)), tile.load(b, (0, 0), (BK, BN)),
                       tile.zeros((BM, BN), f32))
        acc = tile.mma(tile.load(x, (0, 0), (BM, BK)), tile.load(y, (0, 0), (BK, BN)), acc)
        tile.store(c, (0, 0), acc)

    from test_tile_tma_rings import V
    sig = (V(Slice[bf16, 2], vectors=True), V(Slice[bf16, 2], vectors=True),
           V(Slice[f32, 2], vectors=True), V(Slice[f32, 2], vectors=True),
           V(DisjointSlice[f32, 2], vectors=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the product kept on mma.sync says so
        ptx = mixed.compile(*sig, *tiles, arch="sm_90").ptx
    assert "wgmma.mma_async" not in ptx and "mma.sync" in ptx


# (warps, stages, M, N, K, tiles): ragged in every dimension; the last two are 64-row
# tiles on 8 warps, whose two warp groups split the columns (tests/test_tile_column_groups.py)
CASES = [(4, 3, 200, 130, 136, (128, 64, 64)), (4, 4, 130, 260, 96, (128, 128, 32)),
         (8, 3, 300, 140, 128, (256, 128, 64)),
         (8, 3, 100, 200, 136, (64, 128, 64)), (8, 2, 70, 300, 64, (64, 256, 32))]


@pytest.mark.usefixtures("hopper_on_cpu")
@pytest.mark.parametrize("producer", ["1", "0", "cp.async"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[2:5])))
def test_matmul_against_numpy(case, producer, monkeypatch) -> None:
    switch(producer, monkeypatch)
    check_matmul(case, on_cpu)


@pytest.mark.usefixtures("hopper_on_cpu")
@pytest.mark.parametrize("form", ["wt", "at"])
@pytest.mark.parametrize("case", [CASES[0], CASES[3]], ids=["row_blocks", "column_groups"])
def test_transposed_operands_against_numpy(form, case) -> None:
    check_matmul(case, on_cpu, form)


def check_fp8_two_row_blocks(launch: Launch, warps: int = 4, bm: int = 128, bn: int = 64,
                             m: int = 200, n: int = 100) -> None:
    """8-bit floats too: x @ w.T of e4m3, 128 rows on 4 warps, two m64nNk32 instructions
    a warp group and k step; or another split of a (bm, bn) tile on `warps`, as
    tests/test_tile_column_groups.py asks (the warp groups splitting the columns)."""
    import dataclasses

    import numpy as np
    from test_gpu_tile_rings import make_linear_t

    from oxide import DisjointSlice, Slice, f8e4m3
    from oxide.tile.mma_choice import column_groups

    vec = dataclasses.replace
    sig = (vec(Slice[f8e4m3, 2], vectors=True), vec(Slice[f8e4m3, 2], vectors=True),
           vec(DisjointSlice[f32, 2], vectors=True))
    kernel = make_linear_t(f8e4m3, warps, 3)
    ptx = kernel.compile(*sig, bm, bn, 128, arch="sm_90").ptx
    groups_n = column_groups(bm, bn, warps) or 1
    blocks = bm * groups_n // (16 * warps)  # m64 instructions a warp group and k step
    assert ptx.count(f"m64n{bn // groups_n}k32.f32.e4m3.e4m3") == blocks * 128 // 32
    assert "mma.sync" not in ptx.replace("wgmma", "")
    rng = np.random.default_rng(11)
    k = 256
    x = rng.standard_normal((m, k)).astype(f8e4m3.numpy)
    w = rng.standard_normal((n, k)).astype(f8e4m3.numpy)
    y = np.full((m, n), 7, np.float32)
    launch(kernel, (tile.cdiv(m, bm), tile.cdiv(n, bn)), x, w, y, bm, bn, 128)
    want = x.astype(np.float64) @ w.astype(np.float64).T
    # Hopper keeps about 13 bits of a running fp8 sum between k32 steps (language.md)
    np.testing.assert_allclose(y, want, rtol=2e-3, atol=2e-3 * np.sqrt(k))


@pytest.mark.usefixtures("hopper_on_cpu")
def test_fp8_two_row_blocks_against_numpy() -> None:
    check_fp8_two_row_blocks(on_cpu)
