"""tests/test_tile_column_groups.py's kernels on the GPU: 64-row tiles on 8 warps, the
two warp groups splitting the columns (sm_90; mma.sync elsewhere), against NumPy, with a
producer warp group, without one and through cp.async rings, attention of 64-row blocks
against NumPy, and a 4096^2 product against torch."""

from __future__ import annotations

import pytest
from test_gpu_tile_wgmma import _gpu
from test_tile_column_groups import CASES, check_attention_of_64_rows, check_fp8_column_groups
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
def test_transposed_operands(form) -> None:
    check_matmul(CASES[0], _gpu, form)


def test_fp8_column_groups() -> None:
    check_fp8_column_groups(_gpu)


def test_attention_of_64_rows() -> None:
    check_attention_of_64_rows(0, heads=4, seq=512)


@pytest.mark.parametrize("bn", [128, 256])
def test_a_large_product_against_torch(bn) -> None:
    torch = pytest.importorskip("torch")
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(4096, device="cuda", dtype=torch.float32)
    c = torch.empty(4096, 4096, device="cuda", dtype=torch.bfloat16)
    make_matmul(8, 4)[tile.cdiv(4096, 64), tile.cdiv(4096, bn)](a, b, bias, c, 64, bn, 64)
    want = torch.relu(a.float() @ b.float() + bias)
    torch.testing.assert_close(c.float(), want, rtol=2.0 ** -7, atol=0.5)
