"""tests/test_tile_ring_depth.py on the GPU: kernels asking for more stages than their
operand rings fit run at the depth that fits, with the right results."""

from __future__ import annotations

import numpy as np
import pytest
from test_gpu_tile_producer import _close, make_gemm
from test_gpu_tile_wgmma import _gpu
from test_tile_transposed_a import check_rows_as_n

import oxide as ox
from oxide import bf16, f32, tile

pytestmark = pytest.mark.gpu
rng = np.random.default_rng(8)


def test_a_gemm_of_eight_stages_runs_at_four() -> None:
    m, n, k = 260, 520, 1000
    a = rng.standard_normal((m, k)).astype(bf16.numpy)
    b = rng.standard_normal((k, n)).astype(bf16.numpy)
    c = np.full((m, n), 7, np.float32)
    with pytest.warns(ox.PerformanceWarning, match="compiled with num_stages=4"):
        _gpu(make_gemm(f32, 8, 8), (tile.cdiv(m, 128), tile.cdiv(n, 256)), a, b, c, 128, 256,
             64)
    _close(c, a.astype(np.float64) @ b.astype(np.float64), f32, k)


def test_transposed_operands_of_six_stages_run_at_four() -> None:
    with pytest.warns(ox.PerformanceWarning, match="compiled with num_stages=4"):
        check_rows_as_n((4, 6, 130, 200, 1024, (128, 64, 128)), _gpu)
