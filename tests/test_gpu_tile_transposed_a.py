"""tests/test_tile_transposed_a.py's kernels on the GPU: an A written as `x.permute((1,
0))` read by wgmma as an MN-major A (sm_90), or through mma.sync elsewhere, against
NumPy, with a producer warp group, without one, and through cp.async rings; the same
transposes spelled `tile.load(..., order=(1, 0))`."""

from __future__ import annotations

import pytest
from test_gpu_tile_wgmma import _gpu
from test_tile_transposed_a import (
    ROWS_AS_N,
    XT_Y,
    check_computed_transposed_a,
    check_rows_as_n,
    check_xt_y,
    make_xt_y,
    switch,
)

from oxide import tile

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("producer", ["1", "0", "cp.async"])
@pytest.mark.parametrize("case", XT_Y, ids=lambda c: "x".join(map(str, c[2:5])))
def test_xt_y(case, producer, monkeypatch) -> None:
    switch(producer, monkeypatch)
    check_xt_y(case, _gpu)


@pytest.mark.parametrize("producer", ["1", "cp.async"])
@pytest.mark.parametrize("case", ROWS_AS_N, ids=lambda c: "x".join(map(str, c[2:5])))
def test_rows_as_n(case, producer, monkeypatch) -> None:
    switch(producer, monkeypatch)
    check_rows_as_n(case, _gpu)


@pytest.mark.parametrize("producer", ["1", "cp.async"])
@pytest.mark.parametrize("case", [XT_Y[0], ROWS_AS_N[0]], ids=["xt_y", "rows_as_n"])
def test_order_loads(case, producer, monkeypatch) -> None:
    """The transposes spelled `tile.load(..., order=(1, 0))`."""
    switch(producer, monkeypatch)
    (check_xt_y if case is XT_Y[0] else check_rows_as_n)(case, _gpu, order=True)


def test_a_computed_transposed_a() -> None:
    check_computed_transposed_a(_gpu)


def test_a_large_weight_gradient_against_torch() -> None:
    """dW = X^T @ dY at a training step's size (4096 tokens), bf16 in, f32 out."""
    torch = pytest.importorskip("torch")
    x = torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn(4096, 768, device="cuda", dtype=torch.bfloat16)
    dw = torch.empty(1024, 768, device="cuda", dtype=torch.float32)
    make_xt_y(8, 4)[tile.cdiv(1024, 128), tile.cdiv(768, 128)](x, dy, dw, 128, 128, 64)
    want = x.double().T @ dy.double()
    torch.testing.assert_close(dw.double(), want, rtol=1e-5, atol=1e-2)
