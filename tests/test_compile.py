"""Compiling without a GPU: every stage (oxide IR, LLVM IR, PTX, cubin) for sm_80 and sm_90a.

nvJitLink needs no GPU, so these tests prove the PTX assembles. They also pin the
literal and promotion rules of DESIGN.md, observed through the compiled IR.
"""

from __future__ import annotations

import re

import pytest

import oxide as ox
from oxide import (
    Const,
    DisjointSlice,
    Slice,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    thread,
    u8,
    u16,
    u32,
    u64,
)
from oxide.frontend.promote import (
    PromotionError,
    literal_dtype,
    literal_fits,
    literal_with,
    promote,
)

ARCHES = ("sm_80", "sm_90a")
ELF_MAGIC = b"\x7fELF"


def assert_assembles(ck: ox.compiler.CompiledKernel) -> str:
    """The PTX has the kernel's entry, and nvJitLink turns it into a cubin (ELF)."""
    ptx = ck.ptx
    assert f".entry {ck.name}(" in ptx
    assert f".target {ck.arch}" in ptx
    cubin = ck.cubin
    assert isinstance(cubin, bytes) and len(cubin) > 64
    assert cubin.startswith(ELF_MAGIC)
    return ptx


# -------------------------------------------------------------------------------------
# kernels


@ox.kernel
def scale(input: Slice[f32], factor: f32, out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = input[i] * factor


T = ox.TypeVar("T")


@ox.kernel(max_threads=256)
def axpy(a: T, x: Slice[T], y: Slice[T], out: DisjointSlice[T]):
    i = thread.index_1d()
    if i < len(out):
        out[i] = a * x[i] + y[i]


@ox.kernel(contract=False)
def axpy_no_fma(a: f32, x: Slice[f32], y: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = a * x[i] + y[i]


@ox.kernel
def transpose_scale(a: Slice[f32, 2], s: f32, out: DisjointSlice[f32, 2]):
    w = thread.index_2d()
    if w in out:
        out[w] = a[w.col, w.row] * s


@ox.func
def collatz_steps(n: i64) -> i64:
    steps = i64(0)
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
        if steps > 1000:
            break
    return steps


@ox.func
def clamp(v: i64, lo: i64, hi: i64) -> i64:
    if v < lo:
        return lo
    elif v > hi:
        return hi
    return v


@ox.kernel
def collatz(start: Slice[i64], out: DisjointSlice[i64]):
    i = thread.index_1d()
    if i in out:
        total = i64(0)
        for k in range(3):
            total += collatz_steps(start[i] + k)
        out[i] = clamp(total, 0, 500)


@ox.kernel
def mathy(x: Slice[T], out: DisjointSlice[T]):
    i = thread.index_1d()
    if i in out:
        v = x[i]
        r = ox.math.sin(v) + ox.math.exp(v) * ox.math.log(v + 2.0)
        r += ox.math.sqrt(ox.math.fabs(v)) + ox.math.atan2(v, 1.5)
        r += ox.math.pow(ox.math.fabs(v), 0.25) + ox.math.tanh(v) - ox.math.erf(v)
        out[i] = r


@ox.kernel
def unrolled_sum(x: Slice[f32], n: Const[int], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        acc = 0.0
        for k in range(n):
            acc += x[i] * k
        out[i] = acc


# -------------------------------------------------------------------------------------
# PTX and cubin


@pytest.mark.parametrize("arch", ARCHES)
def test_scale(arch: str) -> None:
    ck = scale.compile(Slice[f32], f32, DisjointSlice[f32], arch=arch)
    ptx = assert_assembles(ck)
    assert "ld.global" in ptx and "st.global" in ptx
    assert "mul.f32" in ptx or "mul.rn.f32" in ptx
    for reg in ("%tid.x", "%ctaid.x", "%ntid.x"):
        assert reg in ptx
    # One specialization per (signature, target): compiling again is the same object.
    assert scale.compile(Slice[f32], f32, DisjointSlice[f32], arch=arch) is ck


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("dt", [f32, f64], ids=["f32", "f64"])
def test_generic_axpy(arch: str, dt: ox.DType) -> None:
    ck = axpy.compile(dt, Slice[dt], Slice[dt], DisjointSlice[dt], arch=arch)
    ptx = assert_assembles(ck)
    assert f"fma.rn.{dt.name}" in ptx
    assert ".maxntid 256" in ptx
    assert "ld.global" in ptx


def test_generic_axpy_specializes_per_type() -> None:
    a = axpy.compile(f32, Slice[f32], Slice[f32], DisjointSlice[f32], arch="sm_80")
    b = axpy.compile(f64, Slice[f64], Slice[f64], DisjointSlice[f64], arch="sm_80")
    assert a is not b and a.name != b.name
    assert "f32" in a.ir and "f64" in b.ir and "f64" not in a.ir


@pytest.mark.parametrize("arch", ARCHES)
def test_contract_false_turns_fma_off(arch: str) -> None:
    ck = axpy_no_fma.compile(f32, Slice[f32], Slice[f32], DisjointSlice[f32], arch=arch)
    ptx = assert_assembles(ck)
    assert "fma.rn" not in ptx
    assert "mul.rn.f32" in ptx and "add.rn.f32" in ptx


def test_no_max_threads_no_maxntid() -> None:
    ptx = scale.compile(Slice[f32], f32, DisjointSlice[f32], arch="sm_80").ptx
    assert ".maxntid" not in ptx


@pytest.mark.parametrize("arch", ARCHES)
def test_2d_kernel(arch: str) -> None:
    ck = transpose_scale.compile(Slice[f32, 2], f32, DisjointSlice[f32, 2], arch=arch)
    ptx = assert_assembles(ck)
    for reg in ("%tid.x", "%tid.y", "%ctaid.x", "%ctaid.y"):
        assert reg in ptx
    assert "ld.global" in ptx and "st.global" in ptx
    assert "oxide.thread_index" in ck.ir


@pytest.mark.parametrize("arch", ARCHES)
def test_func_with_loops_and_branches(arch: str) -> None:
    ck = collatz.compile(Slice[i64], DisjointSlice[i64], arch=arch)
    ptx = assert_assembles(ck)
    assert "ld.global" in ptx and "st.global" in ptx
    assert re.search(r"@%p\d+ bra", ptx)  # the loops and branches survive as branches
    # @ox.func is inlined: one entry, no call to the device functions.
    assert ptx.count(".entry") == 1
    assert "collatz_steps" not in ptx and "clamp" not in ptx


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("dt", [f32, f64], ids=["f32", "f64"])
def test_math_links_libdevice(arch: str, dt: ox.DType) -> None:
    ck = mathy.compile(Slice[dt], DisjointSlice[dt], arch=arch)
    assert "@__nv_" in ck.llvm_unoptimized  # math lowers to libdevice calls ...
    ptx = assert_assembles(ck)
    assert "__nv_" not in ptx  # ... which got linked and inlined: nothing left unresolved
    assert ptx.count(".entry") == 1
    if dt == f64:
        assert "sqrt.rn.f64" in ptx and "fma.rn.f64" in ptx
    else:
        assert "sqrt." in ptx and ".f32" in ptx


def test_f32_sqrt_is_ieee() -> None:
    ck = mathy.compile(Slice[f32], DisjointSlice[f32], arch="sm_80")
    assert "sqrt.rn.f32" in ck.ptx and "sqrt.approx" not in ck.ptx


@pytest.mark.parametrize("dt", [i64, f64], ids=["i64", "f64"])
def test_64bit_accesses_are_not_split(dt: ox.DType) -> None:
    """With NVPTX's datalayout, 64-bit elements are 8-byte aligned: one access each."""
    ck = axpy.compile(dt, Slice[dt], Slice[dt], DisjointSlice[dt], arch="sm_80") if (
        dt.is_float) else collatz.compile(Slice[i64], DisjointSlice[i64], arch="sm_80")
    body = ck.ptx.split(".func oxide_$_report(")[0]
    assert "ld.global.b32" not in body and "st.global.b32" not in body
    assert "ld.global" in body and "st.global" in body


@pytest.mark.parametrize("arch", ARCHES)
def test_const_loop_bound_specializes(arch: str) -> None:
    a = unrolled_sum.compile(Slice[f32], 4, DisjointSlice[f32], arch=arch)
    b = unrolled_sum.compile(Slice[f32], 9, DisjointSlice[f32], arch=arch)
    assert a is not b and a.name != b.name
    assert unrolled_sum.compile(Slice[f32], 4, DisjointSlice[f32], arch=arch) is a
    assemble_a, assemble_b = assert_assembles(a), assert_assembles(b)
    assert assemble_a != assemble_b
    # The Const value is a compile-time literal in the IR: a constant loop bound.
    assert re.search(r'"oxide.constant"\(\) <\{value = 4 : si32\}>', a.ir)
    assert re.search(r'"oxide.constant"\(\) <\{value = 9 : si32\}>', b.ir)
    assert "value = 9" not in a.ir
    # Const parameters are not machine parameters.
    assert [p.name for p in a.abi] == ["x", "out"]


def test_ir_is_xdsl_text_with_oxide_ops() -> None:
    ck = scale.compile(Slice[f32], f32, DisjointSlice[f32], arch="sm_90")
    ir = ck.ir
    assert ir.startswith('"oxide.func"()') or "oxide.func" in ir.splitlines()[0]
    for op in ("oxide.thread_index", "oxide.in_bounds", "oxide.load", "oxide.store",
               "oxide.binary", "oxide.return"):
        assert f'"{op}"' in ir
    assert "!oxide.array<f32" in ir and "!oxide.thread_index<" in ir
    # xDSL's generic op syntax: quoted op names, properties in <{...}>, typed signatures.
    assert re.search(r'"oxide.binary"\(%\d+, %\d+\) <\{kind = "mul"\}> : \(f32, f32\) -> f32',
                     ir)


def test_llvm_stage() -> None:
    ck = scale.compile(Slice[f32], f32, DisjointSlice[f32], arch="sm_90")
    assert "target triple" in ck.llvm or "nvptx64" in ck.llvm
    assert f"define void @{ck.name}(" in ck.llvm_unoptimized or ck.name in ck.llvm


def test_dump_prints_the_stages(monkeypatch: pytest.MonkeyPatch,
                                capfd: pytest.CaptureFixture[str]) -> None:
    @ox.kernel
    def dumped(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[i] + 1.0

    monkeypatch.setenv("OXIDE_DUMP", "ir,llvm,ptx")
    ck = dumped.compile(Slice[f32], DisjointSlice[f32], arch="sm_80")
    err = capfd.readouterr().err
    for stage in ("ir", "llvm", "ptx"):
        assert f"// ---- oxide {stage}: {ck.name} ----" in err
    assert '"oxide.func"' in err
    assert "define" in err
    assert f".entry {ck.name}(" in err


def test_dump_only_selected_stage(monkeypatch: pytest.MonkeyPatch,
                                  capfd: pytest.CaptureFixture[str]) -> None:
    @ox.kernel
    def dumped_ir(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[i]

    monkeypatch.setenv("OXIDE_DUMP", "ir")
    dumped_ir.compile(Slice[f32], DisjointSlice[f32], arch="sm_80")
    err = capfd.readouterr().err
    assert "// ---- oxide ir:" in err
    assert "// ---- oxide ptx:" not in err and ".entry" not in err


@pytest.mark.parametrize("arch", ["sm_42", "sm_90b", "compute_90", "SM_90"])
def test_unknown_arch(arch: str) -> None:
    with pytest.raises(ox.TargetError, match="unknown GPU architecture"):
        scale.compile(Slice[f32], f32, DisjointSlice[f32], arch=arch)


def test_example_values_instead_of_types() -> None:
    np = pytest.importorskip("numpy")
    x = np.zeros(16, np.float32)
    ck = scale.compile(x, np.float32(2.0), x, arch="sm_80")
    assert ck is scale.compile(Slice[f32], f32, DisjointSlice[f32], arch="sm_80")


# -------------------------------------------------------------------------------------
# Promotion and literal rules: unit tests of oxide/frontend/promote.py


def test_literal_alone() -> None:
    assert literal_dtype(1) == i32
    assert literal_dtype(-(2**31)) == i32
    assert literal_dtype(2**31) == i64
    assert literal_dtype(1.5) == f32
    assert literal_dtype(True) == ox.bool_


def test_weak_literals_take_the_typed_side() -> None:
    assert literal_with(0.5, f32) == f32
    assert literal_with(0.5, f64) == f64
    assert literal_with(1, u32) == u32
    assert literal_with(1, i8) == i8
    assert literal_with(1, f32) == f32
    assert literal_with(0.5, i32) == f32  # an int variable times a float literal is float
    assert literal_with(0.5, i64) == f64


def test_literal_fits() -> None:
    assert literal_fits(255, u8) and not literal_fits(300, u8)
    assert not literal_fits(-1, u32) and literal_fits(-1, i32)
    assert literal_fits(2**63 - 1, i64) and not literal_fits(2**63, i64)
    assert literal_fits(1e38, f32) and not literal_fits(1e39, f32)
    assert not literal_fits(2**2000, f64)
    assert not literal_fits(1.5, i32)
    assert literal_fits(float("inf"), f32)


@pytest.mark.parametrize("a, b, want", [
    (i32, i64, i64), (f32, f64, f64), (i8, u16, i32), (u8, i32, i32), (u16, i32, i32),
    (u32, i64, i64), (i32, f32, f32), (i64, f32, f32), (f16 := ox.f16, ox.bf16, f32),
    (ox.bool_, i32, i32), (u8, u64, u64), (i16, i16, i16),
])
def test_promote(a: ox.DType, b: ox.DType, want: ox.DType) -> None:
    assert promote(a, b) == want
    assert promote(b, a) == want


@pytest.mark.parametrize("a, b", [(u32, i32), (u64, i64), (u8, i8), (u64, i32), (u64, i8)])
def test_signed_unsigned_mix_is_an_error(a: ox.DType, b: ox.DType) -> None:
    with pytest.raises(PromotionError, match="signed and unsigned"):
        promote(a, b)


# Observed through compiled IR: the type each expression gets.


def _binary_result_types(ir: str) -> list[str]:
    """The result type of each `oxide.binary` (xDSL spells i32 as si32, u32 as ui32)."""
    return re.findall(r'"oxide.binary".*-> (\w+)', ir)


def test_f32_times_float_literal_stays_f32() -> None:
    @ox.kernel
    def half(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[i] * 0.5

    ir = half.compile(Slice[f32], DisjointSlice[f32], arch="sm_80").ir
    assert _binary_result_types(ir) == ["f32"]
    assert "f64" not in ir


def test_u32_plus_int_literal_stays_u32() -> None:
    @ox.kernel
    def bump(n: u32, out: DisjointSlice[u32]):
        i = thread.index_1d()
        if i in out:
            out[i] = n + 1

    ck = bump.compile(u32, DisjointSlice[u32], arch="sm_80")
    assert _binary_result_types(ck.ir) == ["ui32"]
    assert_assembles(ck)


def test_i32_plus_i64_is_i64() -> None:
    @ox.kernel
    def widen(a: i32, b: i64, out: DisjointSlice[i64]):
        i = thread.index_1d()
        if i in out:
            out[i] = a + b

    ir = widen.compile(i32, i64, DisjointSlice[i64], arch="sm_80").ir
    assert _binary_result_types(ir) == ["si64"]
    assert '"oxide.cast"' in ir  # a is widened, explicitly in the IR


def test_f32_plus_f64_is_f64() -> None:
    @ox.kernel
    def mixed(a: f32, b: f64, out: DisjointSlice[f64]):
        i = thread.index_1d()
        if i in out:
            out[i] = a + b

    ir = mixed.compile(f32, f64, DisjointSlice[f64], arch="sm_80").ir
    assert _binary_result_types(ir) == ["f64"]


def test_f32_plus_f64_does_not_fit_f32_output() -> None:
    @ox.kernel
    def narrowing(a: f32, b: f64, out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = a + b

    with pytest.raises(ox.KernelTypeError, match="holds f32; cannot store an? f64"):
        narrowing.compile(f32, f64, DisjointSlice[f32], arch="sm_80")


def test_int_literal_alone_is_i32_and_big_one_i64() -> None:
    @ox.kernel
    def lits(out: DisjointSlice[i64]):
        i = thread.index_1d()
        small = 7  # variables (assigned twice): typed by their first value
        big = 2**40
        small += 1
        big += 1
        if i in out:
            out[i] = i64(small) + big

    ir = lits.compile(DisjointSlice[i64], arch="sm_80").ir
    assert "!oxide.slot<si32>" in ir and "!oxide.slot<si64>" in ir


def test_float_literal_alone_is_f32() -> None:
    @ox.kernel
    def flit(out: DisjointSlice[f32]):
        i = thread.index_1d()
        v = 1.5
        v *= 2.0  # a variable, not a local constant
        if i in out:
            out[i] = v

    ir = flit.compile(DisjointSlice[f32], arch="sm_80").ir
    assert "!oxide.slot<f32>" in ir and "f64" not in ir


def test_u32_plus_i32_is_a_diagnostic() -> None:
    @ox.kernel
    def bad(a: u32, b: i32, out: DisjointSlice[i64]):
        i = thread.index_1d()
        if i in out:
            out[i] = i64(a + b)

    with pytest.raises(ox.KernelTypeError, match="mixing u32 and i32"):
        bad.compile(u32, i32, DisjointSlice[i64], arch="sm_80")


def test_explicit_conversion_resolves_a_mix() -> None:
    @ox.kernel
    def good(a: u32, b: i32, out: DisjointSlice[i64]):
        i = thread.index_1d()
        if i in out:
            out[i] = i64(a) + i64(b)

    assert_assembles(good.compile(u32, i32, DisjointSlice[i64], arch="sm_80"))


def test_numpy_scalar_constant_keeps_its_dtype() -> None:
    np = pytest.importorskip("numpy")
    half = np.float64(0.5)

    @ox.kernel
    def scaled(x: Slice[f64], out: DisjointSlice[f64]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[i] * half

    ir = scaled.compile(Slice[f64], DisjointSlice[f64], arch="sm_80").ir
    assert _binary_result_types(ir) == ["f64"]


def test_closure_constants_fold() -> None:
    factor = 3
    offset = 0.25

    @ox.kernel
    def folded(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[i] * (factor * 2) + offset

    ir = folded.compile(Slice[f32], DisjointSlice[f32], arch="sm_80").ir
    assert "6.000000e+00 : f32" in ir and "2.500000e-01 : f32" in ir
    assert _binary_result_types(ir) == ["f32", "f32"]


def test_chained_comparison_guard() -> None:
    @ox.kernel
    def chained(out: DisjointSlice[f32]):
        i = thread.index_1d()
        if 0 <= i < len(out):
            out[i] = 1.0

    assert_assembles(chained.compile(DisjointSlice[f32], arch="sm_80"))


def _warp_xor(block: tuple[int, int, int] | None) -> str:
    """The PTX of a SIMT kernel whose lanes swap values over the full mask."""

    @ox.kernel(block=block)
    def swap(x: Slice[f32], out: DisjointSlice[f32]):
        i = ox.thread.index_1d()
        v = ox.warp.shuffle_xor(f32(i), 1, u32(0xFFFFFFFF))
        if i in out:
            out[i] = v

    return swap.compile(Slice[f32], DisjointSlice[f32], arch="sm_90").ptx


@pytest.mark.parametrize("block,whole", [((64, 1, 1), True), ((32, 4, 1), True),
                                         ((48, 1, 1), False), (None, False)])
def test_whole_warps_take_the_mask_as_it_is(block, whole) -> None:
    """Where every block is a whole number of warps (a declared block shape), a warp
    collective's member mask is its own mask: a constant full mask reaches `shfl.sync` as
    an immediate; otherwise the lanes past a partial last warp are taken out at run time,
    and the mask is a register."""
    ptx = _warp_xor(block)
    assert bool(re.search(r"shfl\.sync\.bfly\.b32\s+%r\d+, %r\d+, 1, 31, -1;", ptx)) == whole


def test_tile_reductions_shuffle_over_the_full_mask() -> None:
    """A tile kernel's block is `num_warps` whole warps: its row reductions' shuffles take
    the immediate full mask."""
    from oxide.examples.tile_softmax import tile_softmax

    ptx = tile_softmax.compile(Slice[f32, 2], DisjointSlice[f32, 2], 1024, arch="sm_90").ptx
    shuffles = re.findall(r"shfl\.sync\.\w+\.b32[^;]*;", ptx)
    assert shuffles and all(s.endswith(", -1;") for s in shuffles), shuffles
    assert "%ntid" not in ptx
