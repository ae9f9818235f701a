"""tests/test_tile_column_groups.py's kernels on the GPU: 64-row tiles on 8 warps, the
two warp groups splitting the columns (sm_90; mma.sync elsewhere), fp8 and attention of
64-row blocks against NumPy (the matmuls run with tests/test_gpu_tile_row_blocks.py's)."""

from __future__ import annotations

import pytest
from test_gpu_tile_wgmma import _gpu
from test_tile_column_groups import check_attention_of_64_rows, check_fp8_column_groups

pytestmark = pytest.mark.gpu


def test_fp8_column_groups() -> None:
    check_fp8_column_groups(_gpu)


def test_attention_of_64_rows() -> None:
    check_attention_of_64_rows(0, heads=4, seq=512)
