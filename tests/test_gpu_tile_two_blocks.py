"""tests/test_tile_two_blocks.py's kernels on the GPU: one warp group compiled for two
blocks an SM (sm_90), against NumPy (ragged) and a 4096^2 product against torch, with
the choice and without it."""

from __future__ import annotations

import pytest
from test_gpu_tile_wgmma import _gpu
from test_tile_swapped import check_matmul, make_matmul

from oxide import tile

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("two", ["1", "0"])
@pytest.mark.parametrize("case", [(4, 3, 200, 130, 136, (128, 64, 64)),
                                  (4, 3, 300, 260, 200, (128, 128, 64)),
                                  (4, 4, 40, 200, 264, (16, 64, 128))],
                         ids=["128x64", "128x128", "16x64"])
def test_matmul(case, two, monkeypatch) -> None:
    monkeypatch.setenv("OXIDE_TILE_TWO_BLOCKS", two)
    check_matmul(case, _gpu)


def test_a_large_product_against_torch(monkeypatch) -> None:
    monkeypatch.setenv("OXIDE_TILE_TWO_BLOCKS", "1")
    torch = pytest.importorskip("torch")
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(4096, device="cuda", dtype=torch.float32)
    c = torch.empty(4096, 4096, device="cuda", dtype=torch.bfloat16)
    make_matmul(4, 3)[tile.cdiv(4096, 128), tile.cdiv(4096, 128)](a, b, bias, c, 128, 128, 64)
    want = torch.relu(a.float() @ b.float() + bias)
    torch.testing.assert_close(c.float(), want, rtol=2.0 ** -7, atol=0.5)
