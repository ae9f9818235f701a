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


# five PTX instructions of the fault: min(min(a, -b), c) of three loaded i32
_MIN_OF_NEGATED = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p)
{
	.reg .b32 %r<8>;
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [p];
	cvta.to.global.u64 %rd2, %rd1;
	ld.global.u32 %r1, [%rd2];
	ld.global.u32 %r2, [%rd2+4];
	ld.global.u32 %r3, [%rd2+8];
	neg.s32 %r4, %r2;
	min.s32 %r5, %r1, %r4;
	min.s32 %r6, %r5, %r3;
	st.global.u32 [%rd2+12], %r6;
	ret;
}
"""


def _negating(sass: str) -> int:
    """Instructions that negate or invert a register: `IADD3 Rd, -Rs, ...`,
    `IMAD.MOV ..., -Rs` or `LOP3.LUT ..., 0x33` (bitwise not)."""
    return sum(1 for line in sass.splitlines()
               if re.search(r"(IADD3|IMAD\.MOV)[^;]*, -R\d+", line) or
               ("LOP3.LUT" in line and "0x33" in line))


def test_a_negated_operand_of_a_min_chain_keeps_its_negation() -> None:
    """ptxas 13.0 fused `min(min(a, -b), c)` into `VIMNMX3 a, b, c`, without the
    negation (tile fuzzer seed 81 program 122 on an H100). Spelled `not` + `add 1`
    (codegen/ptx_rewrite.py), the negation is an instruction of its own in the SASS:
    the five-instruction fault, and a SIMT kernel's min and max chains."""
    from oxide.codegen.ptx_rewrite import keep_negations

    assert _negating(_sass(_MIN_OF_NEGATED, "sm_90")) == 0  # ptxas's fault, pinned
    assert _negating(_sass(keep_negations(_MIN_OF_NEGATED), "sm_90")) == 1
    import semantics_cases as sc

    from oxide import i32

    ptx = sc.min_max_of_negated.compile(Slice[i32], Slice[i32], Slice[i32],
                                        DisjointSlice[i32], DisjointSlice[i32],
                                        arch="sm_90").ptx
    negations = ptx.count("not.b32")
    assert negations >= 2 and _negating(_sass(ptx, "sm_90")) >= negations


def test_keep_negations_spells_each_neg_s32_with_its_guard() -> None:
    from oxide.codegen.ptx_rewrite import keep_negations

    ptx = "\tneg.s32 \t%r4, %r2;\n\t@%p3 neg.s32 \t%r9, %r9;\n\tneg.s64 \t%rd1, %rd2;\n"
    assert keep_negations(ptx) == (
        "\tnot.b32 \t%r4, %r2;\n\tadd.s32 \t%r4, %r4, 1;\n"
        "\t@%p3 not.b32 \t%r9, %r9;\n\t@%p3 add.s32 \t%r9, %r9, 1;\n"
        "\tneg.s64 \t%rd1, %rd2;\n")
