"""A `num_stages` deeper than shared memory holds rings for: the kernel is lowered at the
deepest `num_stages` whose operand rings fit (tile/pipeline.py `RingsTooDeep`), with a
PerformanceWarning naming that depth, rather than keeping the loop's tiles in
registers `num_stages` deep, where they spill. Checked as compiled for sm_90 (PTX: TMA
copies, no spill warning) and run on the CPU as sm_90 runs it, against NumPy; on the GPU
in tests/test_gpu_tile_ring_depth.py."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from test_gpu_tile_producer import _close, make_gemm
from test_tile_tma_rings import TMA
from test_tile_transposed_a import _sig, check_rows_as_n, make_rows_as_n, on_cpu

import oxide as ox
from oxide import bf16, f32, tile

rng = np.random.default_rng(7)


def _compiled(kernel, *args) -> tuple[str, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ptx = kernel.compile(*args, arch="sm_90").ptx
    return ptx, [str(w.message) for w in caught if w.category is ox.PerformanceWarning]


@pytest.mark.parametrize("stages, fits", [(8, 4), (6, 4)])
def test_a_gemm_too_deep_for_its_rings_runs_at_the_depth_that_fits(stages, fits) -> None:
    # 128 x 256 x 64 bf16: 48 KB of A and B a stage; four stages fit the rings' 211 KB
    ptx, said = _compiled(make_gemm(f32, 8, stages), *_sig(bf16), 128, 256, 64)
    assert ptx.count(TMA) >= 2 and "setmaxnreg" in ptx  # rings filled by a producer
    assert len(said) == 1, said  # no spill warning: no tile kept in registers
    assert f"num_stages={stages} needs operand rings" in said[0]
    assert f"compiled with num_stages={fits}" in said[0]
    # a block's ring of A holds `fits` buffers of 128 x 64 halves (16 KB each)
    assert re.search(rf"\.shared \.align \d+ \.b8 \w+\[{fits * 16384}\]", ptx)


def test_a_pipeline_that_fits_is_left_alone() -> None:
    ptx, said = _compiled(make_gemm(f32, 8, 4), *_sig(bf16), 128, 256, 64)
    assert said == [] and ptx.count(TMA) >= 2


def test_transposed_operands_too_deep() -> None:
    # 128 rows as wgmma's N, (64 x 128) + (128 x 128) halves a stage: 6 asked, 4 fit
    _, said = _compiled(make_rows_as_n(4, 6), *_sig(bf16, bf16), 128, 64, 128)
    assert len(said) == 1 and "compiled with num_stages=4" in said[0]


@pytest.mark.usefixtures("hopper_on_cpu")
def test_the_shallower_pipeline_against_numpy() -> None:
    m, n, k = 130, 264, 200  # rows of whole 16-byte vectors: both operands take rings
    a = rng.standard_normal((m, k)).astype(bf16.numpy)
    b = rng.standard_normal((k, n)).astype(bf16.numpy)
    c = np.full((m, n), 7, np.float32)
    with pytest.warns(ox.PerformanceWarning, match="compiled with num_stages=4"):
        make_gemm(f32, 8, 8)[tile.cdiv(m, 128), tile.cdiv(n, 256)](a, b, c, 128, 256, 64)
    _close(c, a.astype(np.float64) @ b.astype(np.float64), f32, k)
    with pytest.warns(ox.PerformanceWarning, match="compiled with num_stages=4"):
        check_rows_as_n((4, 6, 130, 72, 256, (128, 64, 128)), on_cpu)
