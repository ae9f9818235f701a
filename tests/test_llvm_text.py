"""The LLVM IR text a GPU compile hands to LLVM: wgmma's many results under a named struct
type (codegen/emit.py `struct_type`), and the optimized IR made only on request
(codegen/llvm.py `optimized_ir`)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from oxide import DisjointSlice, Slice, bf16
from oxide.codegen.llvm import optimized_ir, to_ptx
from oxide.examples import tile_matmul as tm

pytest.importorskip("ml_dtypes")

V = dataclasses.replace  # an array type with rows of 16-byte vectors: V(t, vectors=True)
SIG = (V(Slice[bf16, 2], vectors=True), V(Slice[bf16, 2], vectors=True),
       V(DisjointSlice[bf16, 2], vectors=True))


@pytest.fixture(scope="module")
def wgmma_gemm() -> object:
    return tm.tile_matmul.compile(*SIG, 128, 256, 64, arch="sm_90")


def test_wgmma_results_take_a_named_struct_type(wgmma_gemm: object) -> None:
    text = wgmma_gemm.llvm_unoptimized  # type: ignore[attr-defined]
    # each consumer warp group's m64n256 accumulator: 128 floats a thread
    assert re.search(r"^%oxide\.floatx128 = type \{ float(, float){127} \}$", text, re.M)
    extracts = re.findall(r"= extractvalue (%\S+|\{[^}]*\}) ", text)
    assert "%oxide.floatx128" in extracts
    assert all(t.count(",") < 7 for t in extracts if t.startswith("{"))  # short ones only
    assert "wgmma.mma_async" in wgmma_gemm.ptx  # type: ignore[attr-defined]


def test_short_structs_stay_spelled_out() -> None:
    from oxide.codegen.emit import Emitter

    em = Emitter.__new__(Emitter)
    em.declares = set()
    assert em.struct_type(["i32", "i1"]) == "{ i32, i1 }"
    assert em.struct_type(["float"] * 4) == "{ float, float, float, float }"
    assert em.struct_type(["float", "i32"] * 8).startswith("{ float, i32")
    assert em.struct_type(["i32"] * 64) == "%oxide.i32x64"
    assert em.declares == {"%oxide.i32x64 = type { " + ", ".join(["i32"] * 64) + " }"}


def test_optimized_ir_is_what_the_ptx_comes_from(wgmma_gemm: object) -> None:
    ck = wgmma_gemm
    text = ck.llvm_unoptimized  # type: ignore[attr-defined]
    optimized = ck.llvm  # type: ignore[attr-defined]
    assert optimized == optimized_ir(text, "sm_90a", False)
    assert optimized != text and "define" in optimized
    assert to_ptx(text, "sm_90a", False) == ck.ptx  # type: ignore[attr-defined]
