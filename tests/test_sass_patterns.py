"""What ptxas makes of oxide's PTX, pinned where ptxas itself was at fault: its SASS,
read by nvdisasm (tools/sass.py), with no GPU needed. Skipped where no ptxas or nvdisasm
is found (the `test` extra brings nvdisasm; ptxas comes with a CUDA toolkit)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import wrap_cases as wc

import oxide as ox
from oxide import DisjointSlice, Slice, i64

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tools.sass import sass_of_ptx  # noqa: E402


def _sass(ptx: str, arch: str) -> str:
    text = sass_of_ptx(ptx, arch)
    if text is None:
        pytest.skip("needs ptxas and nvdisasm")
    return text


def test_narrow_min_max_leave_ptxas_no_16_bit_pair_to_fuse() -> None:
    """ptxas 13.0 fused a `min.s16` and the `== 0` test of its result into a two-half
    `VIMNMX.S16x2` with predicate outputs, which read the register's upper half (GPU
    fuzzer, seed 62): 8- and 16-bit min/max now run in 32 bits."""
    sig = (Slice[ox.i16], Slice[ox.i16], Slice[i64], DisjointSlice[i64])
    text = _sass(wc.min_of_wrapped.compile(*sig, arch="sm_90").ptx, "sm_90")
    assert not re.search(r"VIMNMX[^;]*, P\d", text)
    assert "S16x2" not in text


def test_cluster_gemm_arrives_without_a_gpu_wide_fence() -> None:
    """ptxas puts MEMBAR.ALL.GPU before each cluster-scope release arrive; gemm_hopper's
    consumers arrive with scope="cta", so only the two cluster barriers (the kernel's
    start and end) keep one."""
    from oxide.kernels import hopper_gemm as hg

    cfg = hg.Config(tma_store=True, stages=3, cluster=2)
    text = _sass(hg.gemm_hopper.compile(*hg.signature(cfg), arch="sm_90").ptx, "sm_90a")
    assert text.count("MEMBAR.ALL.GPU") == 2


@ox.tile.kernel(num_warps=4)
def add_tiles_f32(x: Slice[ox.f32, 2], out: ox.AtomicSlice[ox.f32, 2], BM: ox.Const[int],
                  BN: ox.Const[int]):
    i, j = ox.tile.bid(0), ox.tile.bid(1)
    ox.tile.atomic_add(out, (i, j), ox.tile.load(x, (i, j), (BM, BN)), sem="relaxed")


def test_tile_atomics_whose_old_values_go_unused_are_reductions() -> None:
    """A tile `atomic_add` whose result nobody reads becomes REDG: its bounds test is the
    tile's own, with no second check whose out-of-range path merged a 0 into the result
    (that kept every element an ATOMG with its own branch; a split-K reduction's 128 x
    256 f32 tile then cost more than the product, docs/performance.md)."""
    sig = (Slice[ox.f32, 2], ox.AtomicSlice[ox.f32, 2])
    text = _sass(add_tiles_f32.compile(*sig, 32, 64, arch="sm_90").ptx, "sm_90")
    assert "REDG" in text
    assert "ATOMG" not in text
