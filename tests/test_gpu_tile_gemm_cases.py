"""Randomized tile GEMMs with fused epilogues on an sm_90 GPU (tests/tile_gemm_cases.py):
the rings, the producer warp group, the walked grid and the TMA-store epilogue in
combinations drawn from a seed, against NumPy."""

from __future__ import annotations

import pytest
from test_gpu_tile_wgmma import _gpu
from tile_gemm_cases import check, draw

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("seed", range(100, 140))
def test_drawn_gemms_with_epilogues(seed) -> None:
    check(draw(seed, big=True), _gpu)
