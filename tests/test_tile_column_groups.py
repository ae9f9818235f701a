"""A 64-row product tile on 8 warps on sm_90: the two warp groups split the columns, each
computing all 64 rows of its N / 2 (tile/mma_choice.py `column_groups`), one m64nN/2
instruction a k step, into wgmma's accumulator with the group bits along the columns
(`layout.wgmma_accumulator`). Before, such a product ran on mma.sync (H100, 2026-12-07: a
64 x 128 x 64 tile on 8 warps 169 TFLOPS at 4096^3 against 478 on 4 warps). Checked as
compiled for sm_90 (PTX) and run on the CPU as sm_90 runs it (OXIDE_TILE_CPU_HOPPER=1)
against NumPy (the ragged matmuls with tests/test_tile_row_blocks.py's, the other wgmma
tile splits); tests/test_gpu_tile_column_groups.py runs the same kernels on the GPU."""

from __future__ import annotations

import dataclasses
import math
import re
import warnings

import numpy as np
import pytest
from test_tile_row_blocks import check_fp8_two_row_blocks
from test_tile_swapped import Launch, _sig, make_matmul
from test_tile_transposed_a import on_cpu

import oxide as ox
from oxide import DisjointSlice, Slice, bf16
from oxide.errors import PerformanceWarning
from oxide.examples import tile_attention as ta
from oxide.tile.layout import wgmma_accumulator
from oxide.tile.mma_choice import column_groups, supports

WGMMA = re.compile(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.\w+\.\w+ ")


def _ptx(form: str, bm: int, bn: int, bk: int, warps: int = 8) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)  # no product left on mma.sync
        return make_matmul(warps, 3, form).compile(*_sig(), bm, bn, bk, arch="sm_90").ptx


def test_which_shapes_split_the_columns() -> None:
    assert column_groups(64, 128, 8) == column_groups(64, 512, 8) == 2
    # N / 2 must be whole slabs of 64 up to 256; 4 warps are one group; 128 rows are
    # one m64 instruction a group already (`row_blocks`)
    assert not any(column_groups(*shape, w) for *shape, w in
                   [(64, 64, 8), (64, 192, 8), (64, 1024, 8), (64, 128, 4), (128, 128, 8),
                    (32, 128, 8)])
    assert supports(64, 256, 64, 8) and not supports(64, 64, 64, 8)


def test_the_accumulator_puts_the_groups_side_by_side() -> None:
    """Warp w (group g = w // 4) holds rows 16 (w % 4) + lane / 4 + 8 i and columns
    N / 2 * g + 2 (lane % 4) + s + 8 j: wgmma's fragment of its group's band."""
    layout = wgmma_accumulator((64, 256), 8)
    rows, cols = layout.dims
    assert (rows.wpc, rows.warp_shift, rows.inner) == (4, 0, 2)
    assert (cols.wpc, cols.warp_shift, cols.inner, cols.spt, cols.tpw) == (2, 2, 16, 2, 4)
    assert layout.slots == 64 * 256 // 256


@pytest.mark.parametrize("bn", [128, 256])
@pytest.mark.parametrize("form, bk", [("ab", 64), ("wt", 64), ("at", 32)])
def test_each_group_issues_its_half_of_n(form, bk, bn) -> None:
    ptx = _ptx(form, 64, bn, bk)
    products = WGMMA.findall(ptx)
    assert set(products) == {str(bn // 2)}
    assert len(products) == bk // 16  # one instruction a k step (the chain is written once)
    assert "mma.sync" not in ptx.replace("wgmma", "")


def check_fp8_column_groups(launch: Launch) -> None:
    """8-bit floats too: x @ w.T of e4m3, 64 x 256 tiles on 8 warps, an m64n128k32
    instruction a warp group and k step."""
    check_fp8_two_row_blocks(launch, warps=8, bm=64, bn=256, m=100, n=300)


@pytest.mark.usefixtures("hopper_on_cpu")
def test_fp8_column_groups_against_numpy() -> None:
    check_fp8_column_groups(on_cpu)


def check_attention_of_64_rows(launch_on: str | int, heads: int = 2, seq: int = 256) -> None:
    """tile_attention (8 warps) with 64 query rows a block and D128: both products'
    columns split between the warp groups (q @ k.T's 128 keys, p @ v's 128 dimensions),
    so every row's softmax reduces over two warp groups."""
    d, causal = 128, True
    sig_v = dataclasses.replace
    sig = (sig_v(Slice[bf16, 2], vectors=True),) * 3 + (
        sig_v(DisjointSlice[bf16, 2], vectors=True),)
    ptx = ta.tile_attention.compile(*sig, seq, 0.125, 64, 128, d, causal, arch="sm_90").ptx
    assert set(WGMMA.findall(ptx)) == {"64"} and "mma.sync" not in ptx.replace("wgmma", "")
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((heads * seq, d)).astype(bf16.numpy) for _ in range(3))
    with ox.device(launch_on):
        dq, dk, dv, do = (ox.to_device(x) for x in (q, k, v, np.zeros_like(q)))
        ox.launch(ta.tile_attention, heads * seq // 64, dq, dk, dv, do, seq,
                  np.float32(1 / math.sqrt(d)), 64, 128, d, causal)
        got = do.to_numpy().astype(np.float32)
    np.testing.assert_allclose(got, ta.reference(q, k, v, heads, causal), rtol=2e-2,
                               atol=2e-2)


@pytest.mark.usefixtures("hopper_on_cpu")
def test_attention_of_64_rows_against_numpy() -> None:
    check_attention_of_64_rows("cpu", heads=1, seq=128)
