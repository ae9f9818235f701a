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


def _writes_what_a_pair_reads(sass: str) -> bool:
    """Whether a predicated SEL writes a register that a later PRMT packs for a two-half
    instruction: ptxas 13.0's fault of the kernel below, where the pair wanted the
    register's value from before the SEL."""
    lines = sass.splitlines()
    for k, line in enumerate(lines):
        m = re.search(r"@!?P\d+ SEL (R\d+),", line)
        if m and any(re.search(rf"PRMT R\d+, {m[1]}\b", later) for later in lines[k + 1:]):
            return True
    return False


def test_f16_products_beside_a_select_chain_reach_ptxas_in_f32() -> None:
    """The tile fuzzer's kernel (seed 124 program 58, semantics_cases): from LLVM's PTX,
    ptxas pairs `v6 * v6` and `v9 * v9` into one HFMA2 after a predicated SEL has put
    `where(c, v9, v6)` in v6's register. From oxide's (codegen/ptx_rewrite.py
    `halves_in_f32`), no two-half arithmetic is left to pair."""
    import semantics_cases as sc

    from oxide.codegen.llvm import llvm_ptx

    sig = (Slice[ox.f32, 1], Slice[ox.f16, 1], Slice[ox.i32, 1], DisjointSlice[ox.f32, 1], 16)
    ck = sc.halves_beside_a_select_chain.compile(*sig, arch="sm_90")
    text = ck.llvm_unoptimized
    assert _writes_what_a_pair_reads(_sass(llvm_ptx(text, ck.arch, "@__nv_" in text),
                                           "sm_90"))  # ptxas's fault, pinned
    fixed = _sass(ck.ptx, "sm_90")
    assert not _writes_what_a_pair_reads(fixed)
    assert not re.search(r"\b(HFMA2|HMUL2|HMNMX2|HADD2)(\.MMA|\.BF16_V2)*\s", fixed)


def test_halves_in_f32_spells_each_16_bit_float_operation_in_f32() -> None:
    from oxide.codegen.ptx_rewrite import halves_in_f32

    ptx = ("\tmul.rn.f16 \t%rs3, %rs1, %rs2;\n"
           "\t@%p2 fma.rn.bf16 \t%rs4, %rs1, %rs2, %rs3;\n"
           "\tmin.NaN.bf16x2 \t%r3, %r1, %r2;\n"
           "\tneg.f16x2 \t%r4, %r3;\n\tabs.bf16 \t%rs5, %rs4;\n"
           "\t@!%p1 setp.ltu.f16 \t%p3, %rs1, %rs5;\n"
           "\tsetp.eq.f16x2 \t%p4|%p5, %r1, %r4;\n"
           "\tcvt.f32.f16 \t%f1, %rs1;\n")
    assert halves_in_f32(ptx).splitlines() == [
        "\t{ .reg .f32 %oxw<3>; cvt.f32.f16 %oxw0, %rs1; cvt.f32.f16 %oxw1, %rs2; "
        "mul.rn.f32 %oxw2, %oxw0, %oxw1; cvt.rn.f16.f32 %rs3, %oxw2; }",
        "\t{ .reg .f32 %oxw<4>; cvt.f32.bf16 %oxw0, %rs1; cvt.f32.bf16 %oxw1, %rs2; "
        "cvt.f32.bf16 %oxw2, %rs3; fma.rn.f32 %oxw3, %oxw0, %oxw1, %oxw2; "
        "@%p2 cvt.rn.bf16.f32 %rs4, %oxw3; }",
        "\t{ .reg .f32 %oxw<3>; .reg .b16 %oxh<4>, %oxd<2>; mov.b32 {%oxh0, %oxh1}, %r1; "
        "mov.b32 {%oxh2, %oxh3}, %r2; cvt.f32.bf16 %oxw0, %oxh0; cvt.f32.bf16 %oxw1, %oxh2; "
        "min.NaN.f32 %oxw2, %oxw0, %oxw1; cvt.rn.bf16.f32 %oxd0, %oxw2; "
        "cvt.f32.bf16 %oxw0, %oxh1; cvt.f32.bf16 %oxw1, %oxh3; min.NaN.f32 %oxw2, %oxw0, "
        "%oxw1; cvt.rn.bf16.f32 %oxd1, %oxw2; mov.b32 %r3, {%oxd0, %oxd1}; }",
        "\txor.b32 \t%r4, %r3, 0x80008000;",
        "\tand.b16 \t%rs5, %rs4, 0x7FFF;",
        "\t{ .reg .f32 %oxw<2>; cvt.f32.f16 %oxw0, %rs1; cvt.f32.f16 %oxw1, %rs5; "
        "@!%p1 setp.ltu.f32 %p3, %oxw0, %oxw1; }",
        "\t{ .reg .f32 %oxw<2>; .reg .b16 %oxh<4>; mov.b32 {%oxh0, %oxh1}, %r1; "
        "mov.b32 {%oxh2, %oxh3}, %r4; cvt.f32.f16 %oxw0, %oxh0; cvt.f32.f16 %oxw1, %oxh2; "
        "setp.eq.f32 %p4, %oxw0, %oxw1; cvt.f32.f16 %oxw0, %oxh1; cvt.f32.f16 %oxw1, "
        "%oxh3; setp.eq.f32 %p5, %oxw0, %oxw1; }",
        "\tcvt.f32.f16 \t%f1, %rs1;"]
    with pytest.raises(ox.InternalCompilerError, match="max.xorsign.abs.f16"):
        halves_in_f32("\tmax.xorsign.abs.f16 \t%rs3, %rs1, %rs2;\n")
