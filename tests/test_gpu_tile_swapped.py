"""tests/test_tile_swapped.py's kernels on the GPU: products of 8 to 32 rows computed
transposed on wgmma (sm_90; mma.sync elsewhere), against NumPy, with a producer warp
group and through cp.async rings, and a decode step's size against torch."""

from __future__ import annotations

import pytest
from test_gpu_tile_wgmma import _gpu
from test_tile_swapped import CASES, check_matmul, check_row_sums, make_matmul
from test_tile_transposed_a import switch

from oxide import tile

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("producer", ["1", "cp.async"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[2:5])))
def test_matmul(case, producer, monkeypatch) -> None:
    switch(producer, monkeypatch)
    check_matmul(case, _gpu)


@pytest.mark.parametrize("form", ["wt", "at"])
def test_transposed_operands(form) -> None:
    check_matmul(CASES[0] if form == "wt" else CASES[1], _gpu, form)


def test_row_sums() -> None:
    check_row_sums(_gpu)


@pytest.mark.parametrize("rows, bm", [(16, 16), (30, 32), (5, 8)])
def test_a_decode_step_against_torch(rows, bm) -> None:
    """A few tokens against a 4096 x 4096 weight, bf16, as an LLM's decode step."""
    torch = pytest.importorskip("torch")
    x = torch.randn(rows, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(4096, device="cuda", dtype=torch.float32)
    c = torch.empty(rows, 4096, device="cuda", dtype=torch.bfloat16)
    make_matmul(4, 4)[tile.cdiv(rows, bm), tile.cdiv(4096, 64)](x, w, bias, c, bm, 64, 128)
    want = torch.relu(x.double() @ w.double() + bias.double())
    torch.testing.assert_close(c.double(), want, rtol=2.0 ** -7, atol=0.25)
