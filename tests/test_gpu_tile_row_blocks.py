"""tests/test_tile_row_blocks.py's kernels on the GPU: 128-row tiles on 4 warps and
256-row tiles on 8, two m64 wgmma instructions a warp group, and 64-row tiles on 8 warps
whose warp groups split the columns (sm_90; mma.sync elsewhere), against NumPy, with a producer warp group, without one and through cp.async
rings, and a 4096^2 product against torch."""

from __future__ import annotations

import pytest
from test_gpu_tile_wgmma import _gpu
from test_tile_row_blocks import CASES, check_fp8_two_row_blocks
from test_tile_swapped import check_matmul, make_matmul
from test_tile_transposed_a import switch

from oxide import tile

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("producer", ["1", "0", "cp.async"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[2:5])))
def test_matmul(case, producer, monkeypatch) -> None:
    switch(producer, monkeypatch)
    check_matmul(case, _gpu)


@pytest.mark.parametrize("form", ["wt", "at"])
@pytest.mark.parametrize("case", [CASES[0], CASES[3]], ids=["row_blocks", "column_groups"])
def test_transposed_operands(form, case) -> None:
    check_matmul(case, _gpu, form)


def test_fp8_two_row_blocks() -> None:
    check_fp8_two_row_blocks(_gpu)


@pytest.mark.parametrize("warps, bm, bn", [(4, 128, 128), (8, 256, 128), (8, 64, 128),
                                           (8, 64, 256)])
def test_a_large_product_against_torch(warps, bm, bn) -> None:
    torch = pytest.importorskip("torch")
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(4096, device="cuda", dtype=torch.float32)
    c = torch.empty(4096, 4096, device="cuda", dtype=torch.bfloat16)
    make_matmul(warps, 4)[tile.cdiv(4096, bm), tile.cdiv(4096, bn)](a, b, bias, c, bm, bn, 64)
    want = torch.relu(a.float() @ b.float() + bias)
    torch.testing.assert_close(c.float(), want, rtol=2.0 ** -7, atol=0.5)
