"""Issue 14, items 8-13: the arithmetic and warp semantics of docs/language.md, on the CPU.

The cases and their expected values live in `semantics_cases.py`;
`test_gpu_semantics.py` runs the same kernels on a GPU against the same values.
Where a bug lived only in the GPU code generation (64-bit shifts, float `%`,
masked warp reductions), a test here also checks the PTX for the construct that
fixes it, and every new construct is assembled for sm_80 and sm_90.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import semantics_cases as sc
import wrap_cases as wc

import oxide as ox
from oxide import DisjointSlice, Slice, f16, f32, f64, i32, i64, thread, u32, u64


@pytest.fixture(autouse=True)
def on_cpu() -> Iterator[None]:
    with ox.device("cpu"):
        yield


def launch(kernel: Any, n: int, *args: Any, block: int = 128) -> None:
    kernel[ox.LaunchConfig(grid=(n + block - 1) // block, block=block)](*args)


def run_binary(case: sc.BinaryCase) -> np.ndarray:
    out = np.zeros_like(case.want)
    launch(case.kernel, out.size, case.a, case.b, out)
    return out


# -- items 8 and 13: integer operators ----------------------------------------------------


@pytest.mark.parametrize("dt", sc.INTS, ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "floordiv", "mod", "shl", "shr"])
def test_integer_operators_follow_the_contract(op: str, dt: Any) -> None:
    case = sc.int_case(op, dt)
    sc.assert_same(run_binary(case), case.want, case.a, case.b)


def test_64_bit_shifts_by_2_to_the_32_give_0() -> None:
    a = np.array([5, 1 << 40, -1, 5], np.int64)
    b = np.array([1 << 32, 1 << 32, (1 << 32) + 1, -1], np.int64)
    out = np.zeros_like(a)
    launch(sc.shl, 4, a, b, out)
    assert out.tolist() == [0, 0, 0, 0]
    ua, ub = a.view(np.uint64), b.view(np.uint64)
    uout = np.zeros_like(ua)
    launch(sc.shr, 4, ua, ub, uout)
    assert uout.tolist() == [0, 0, 0, 0]
    launch(sc.shr, 4, a, b, out)  # signed: the sign fills
    assert out.tolist() == [0, 0, -1, 0]


def _ptx(kernel: Any, *sig: Any) -> list[str]:
    out = []
    for arch in ("sm_80", "sm_90"):
        ck = kernel.compile(*sig, arch=arch)
        assert ck.cubin  # nvJitLink assembles it
        out.append(ck.ptx)
    return out


@pytest.mark.parametrize("dt", [i64, u64], ids=lambda d: d.name)
def test_64_bit_shift_amount_is_not_cut_to_32_bits_in_ptx(dt: Any) -> None:
    # NVPTX folded `select(b < 64, shl(a, b), 0)` into a bare shl.b64 of b's low 32 bits.
    # The value is now zeroed by a 64-bit compare before the shift.
    for kernel in (sc.shl, sc.shr) if not dt.is_signed else (sc.shl,):
        for ptx in _ptx(kernel, Slice[dt], Slice[dt], DisjointSlice[dt]):
            assert re.search(r"setp\.\w+\.u64\s+%p\d+, %rd\d+, 6[34];", ptx), ptx
            assert re.search(r"selp\.b64\s+%rd\d+, %rd\d+, 0, %p\d+;", ptx), ptx


def test_narrow_integers_wrap_after_arithmetic() -> None:
    a = np.array([100, -128, 127, -1], np.int8)
    b = np.array([100, -1, 1, -128], np.int8)
    out = np.zeros_like(a)
    launch(sc.add, 4, a, b, out)
    assert out.tolist() == [-56, 127, -128, 127]
    launch(sc.mul, 4, a, b, out)
    assert out.tolist() == [16, -128, 127, -128]
    launch(sc.cube, 4, a, out)  # `**` with a constant exponent wraps like `*`
    assert out.tolist() == [sc.wrap(v**3, ox.i8) for v in a.tolist()]
    ua = np.array([250, 0, 255], np.uint16)
    uout = np.zeros_like(ua)
    launch(sc.negate, 3, ua, uout)
    assert uout.tolist() == [65286, 0, 65281]


@pytest.mark.parametrize("dt", [ox.i8, ox.i16, i32, i64], ids=lambda d: d.name)
def test_int_min_floordiv_minus_one_wraps_and_mod_is_zero(dt: Any) -> None:
    lo = -(1 << (dt.bits - 1))
    a = np.array([lo, lo, 7], dt.numpy)
    b = np.array([-1, -1, -1], dt.numpy)
    out = np.zeros_like(a)
    launch(sc.floordiv, 3, a, b, out)
    assert out.tolist() == [lo, lo, -7]
    launch(sc.mod, 3, a, b, out)
    assert out.tolist() == [0, 0, 0]


@pytest.mark.parametrize("op", ["floordiv", "mod"])
def test_integer_division_by_zero_gives_0_and_is_reported(op: str) -> None:
    a = np.array([7, -7, 3], np.int32)
    b = np.array([2, 0, 1], np.int32)
    out = np.full(3, 99, np.int32)
    with pytest.raises(ox.KernelAssertionError, match="division by zero"):
        launch(getattr(sc, op), 3, a, b, out)
    assert out[1] == 0


# -- items 9 and 10: float // and % -----------------------------------------------------


@pytest.mark.parametrize("dt", sc.FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["floordiv", "mod"])
def test_float_floordiv_and_mod_match_numpy_bit_for_bit(op: str, dt: Any) -> None:
    case = sc.float_case(op, dt)
    sc.assert_same(run_binary(case), case.want, case.a, case.b)


@pytest.mark.parametrize("op", ["floordiv", "mod"])
def test_bf16_floordiv_and_mod_round_the_f32_result(op: str) -> None:
    case = sc.bf16_case(op)
    sc.assert_same(run_binary(case), case.want, case.a, case.b)


def test_the_issue_examples_of_float_floordiv_and_mod() -> None:
    a = np.array([1.0, np.inf, 1.0, 0.0, 1e30, 2.5e38, 1.0], np.float64)
    b = np.array([0.1, 1.0, -np.inf, -127.0, 3.0, 4.19, 1e-40], np.float64)
    out = np.zeros_like(a)
    launch(sc.floordiv, a.size, a, b, out)
    assert out[0] == 9.0 and np.isnan(out[1]) and out[2] == -1.0
    launch(sc.mod, a.size, a, b, out)
    assert out[3] == 0.0 and np.signbit(out[3])  # Python: 0.0 % -127.0 == -0.0
    assert out[4] == 1e30 % 3.0 and out[5] == 2.5e38 % 4.19 and out[6] == 1.0 % 1e-40
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    out32 = np.zeros_like(a32)
    launch(sc.mod, a.size, a32, b32, out32)
    assert out32[5] == np.remainder(a32[5], b32[5])  # 3.74..., not 9.7e30
    assert np.isfinite(out32[6]) and out32[6] == np.remainder(a32[6], b32[6])


@ox.kernel
def _nan_mod_in_loop_condition(x: Slice[f32], flag: Slice[i32], out: DisjointSlice[i32]) -> None:
    i = thread.index_1d()
    if i in out:
        nan = f32(0.0) / f32(0.0)  # a constant to LLVM
        y = (nan if flag[i] < 2 else x[i]) % (f32(100.0) if flag[i] != 0 else f32(31.0))
        c = 0
        while c < 2 and y == y:
            c += 1
        out[i] = c + 10


def test_nan_mod_over_a_select_is_nan_not_poison_on_the_cpu() -> None:
    # Found by the fuzzer (seed 14): InstCombine folded libm's `fmodf(nan, select(c,
    # 100, 31))` to poison, and the loop branching on it never ended. CPU `fmod` is
    # `frem` now, which LLVM folds to nan and lowers to the same libm call.
    x = np.array([5.0, 5.0, 7.0], np.float32)
    flag = np.array([0, 1, 2], np.int32)
    out = np.zeros(3, np.int32)
    launch(_nan_mod_in_loop_condition, 3, x, flag, out)
    assert out.tolist() == [10, 10, 12]
    ck = _nan_mod_in_loop_condition.compile(Slice[f32], Slice[i32], DisjointSlice[i32],
                                            target="cpu")
    assert "frem float" in ck.llvm_unoptimized and "@fmodf" not in ck.llvm_unoptimized


@pytest.mark.parametrize("name", list(wc.KERNELS))
def test_16_bit_wrap_and_abs_at_the_minimum(name: str) -> None:
    a, b, c = wc.inputs()
    out = np.zeros(a.size, np.int64)
    launch(wc.KERNELS[name], a.size, a, b, c, out)
    np.testing.assert_array_equal(out, wc.expected(name))


def test_ptx_leaves_16_bit_wrap_and_abs_to_no_ptxas_folding() -> None:
    # ptxas lost the wrap of 16-bit ops it folded into a widening, and took `abs.sN`
    # to be non-negative (fuzzer, seed 14, on the H200): both are spelled out now.
    sig = (Slice[ox.i16], Slice[ox.i16], Slice[i64], DisjointSlice[i64])
    for name in ("neg_floordiv", "mul_mod", "add_sub_shl"):
        for ptx in _ptx(wc.KERNELS[name], *sig):  # computed in 32 bits, cut in inline PTX
            assert "cvt.u16.u32" in ptx and not re.search(r"\bneg\.s16\b", ptx), name
    for ptx in _ptx(wc.abs_at_minimum, *sig):  # i8's abs.s16 sees no INT16_MIN: kept
        assert not re.search(r"\babs\.s(32|64)\b", ptx)
        assert all(f"selp.b{n}" in ptx for n in (16, 32, 64))
    # 8- and 16-bit min/max run in 32 bits: ptxas fused a `min.s16` and a test of its
    # result into a two-half VIMNMX whose predicate read the upper half (seed 62, H100)
    for ptx in _ptx(wc.min_of_wrapped, *sig):
        assert re.search(r"\bmin\.s32\b", ptx) and re.search(r"\bmax\.s32\b", ptx)
        assert not re.search(r"\b(min|max)\.[su]16\b", ptx)
    # bf16 -> f32 is a shift, so LLVM cannot shrink `f16(f32(x) / f32(x))` to half math
    ck = wc.bf16_to_f16.compile(*sig, arch="sm_90")
    assert "fdiv half" not in ck.llvm and "fpext bfloat" not in ck.llvm


@pytest.mark.parametrize("dt", [f16, f32, f64], ids=lambda d: d.name)
def test_float_mod_uses_an_exact_fmod_on_the_gpu(dt: Any) -> None:
    # LLVM lowers `frem` on NVPTX to a - trunc(a / b) * b; libdevice's fmod is exact.
    ck = sc.mod.compile(Slice[dt], Slice[dt], DisjointSlice[dt], arch="sm_90")
    assert "@__nv_fmod" in ck.llvm_unoptimized and "frem" not in ck.llvm_unoptimized
    for kernel in (sc.mod, sc.floordiv):
        _ptx(kernel, Slice[dt], Slice[dt], DisjointSlice[dt])
    _ptx(sc.bf16_mod, Slice[f32], Slice[f32], DisjointSlice[f32])


@pytest.mark.parametrize("dt", sc.FLOATS, ids=lambda d: d.name)
def test_float_min_max_order_negative_zero_first_and_drop_nan(dt: Any) -> None:
    # x86 gave either zero for min(0.0, -0.0); PTX's min.f32 gives -0.0
    vals = [0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 1e-40]
    a = np.array([x for x in vals for _ in vals], dt.numpy)
    b = np.array([y for _ in vals for y in vals], dt.numpy)
    low, high = np.zeros_like(a), np.zeros_like(a)
    launch(sc.min_max, a.size, a, b, low, high)
    for kind, got in (("min", low), ("max", high)):
        want = np.array([sc.ref_min_max(kind, x, y) for x, y in zip(a, b, strict=True)], dt.numpy)
        sc.assert_same(got, want, a, b)
    _ptx(sc.min_max, Slice[dt], Slice[dt], DisjointSlice[dt], DisjointSlice[dt])


@pytest.mark.parametrize("dt", sc.FLOATS, ids=lambda d: d.name)
def test_ordered_compares_of_squares_are_false_for_nan(dt: Any) -> None:
    """`x * x > -1.0` is false for NaN x. On the GPU an explicit NaN test joins such a
    comparison with a negative constant (codegen/nvptx.py `nan_guarded_compare`): ptxas
    13.0 folded it to true."""
    a = np.array([0.0, -0.0, 1.0, -3.0, np.nan, np.inf, -np.inf, 1e-40], dt.numpy)
    out = np.zeros(a.size, np.int32)
    launch(sc.nonnegative_compares, a.size, a, out)
    np.testing.assert_array_equal(out, [sc.ref_nonnegative_compares(x) for x in a])
    for ptx in _ptx(sc.nonnegative_compares, Slice[dt], DisjointSlice[i32]):
        assert ptx.count("setp.num") >= 5


def test_min_max_of_a_negated_operand() -> None:
    """`min(min(a, -b), c)` and the max: on the GPU, LLVM's `neg.s32` is spelled
    `not` + `add 1` in the PTX (codegen/ptx_rewrite.py), because ptxas 13.0 fused the
    negation into a min chain and dropped it."""
    a, b, c = sc.min_max_of_negated_inputs()
    low, high = np.zeros_like(a), np.zeros_like(a)
    launch(sc.min_max_of_negated, a.size, a, b, c, low, high)
    want_low, want_high = sc.ref_min_max_of_negated(a, b, c)
    np.testing.assert_array_equal(low, want_low)
    np.testing.assert_array_equal(high, want_high)
    for ptx in _ptx(sc.min_max_of_negated, Slice[i32], Slice[i32], Slice[i32],
                    DisjointSlice[i32], DisjointSlice[i32]):
        assert "neg.s32" not in ptx and "not.b32" in ptx


def test_f16_products_beside_a_select_chain() -> None:
    """The fuzzer's kernel that ptxas 13.0 miscompiled (semantics_cases): right on the
    CPU, and its PTX holds no f16 arithmetic for ptxas to pair (codegen/ptx_rewrite.py
    `halves_in_f32`): only conversions around f32 operations."""
    x0, x1, x2 = sc.halves_beside_a_select_chain_inputs()
    out = np.zeros(48, np.float32)
    sc.halves_beside_a_select_chain[3](x0, x1, x2, out, 16)
    np.testing.assert_array_equal(out, sc.ref_halves_beside_a_select_chain(x0, x1, x2))
    for arch in ("sm_80", "sm_90"):
        ptx = sc.halves_beside_a_select_chain.compile(x0, x1, x2, out, 16, arch=arch).ptx
        assert not re.search(r"^\s*(add|sub|mul|fma|min|max)[.a-zA-Z]*\.f16", ptx, re.M)
        assert "mul.rn.f32" in ptx and "cvt.rn.f16.f32" in ptx


def test_f32_atomic_adds_to_global_memory_flush_subnormals() -> None:
    """The GPU's `atom.add.f32` on global memory flushes subnormal inputs and results to
    zeros of their sign (the PTX ISA; measured on an H100), on shared memory it does not:
    the CPU does the same (codegen/atomics.py `flush_f32`), bit for bit."""
    start, x = sc.f32_atomic_add_inputs()
    glob, old, shared, shared_old = (np.zeros(64, np.float32) for _ in range(4))
    glob[:] = start
    launch(sc.f32_atomic_adds, 64, start, x, glob, old, shared, shared_old, block=64)
    sc.check_f32_atomic_adds(start, x, glob, old, shared, shared_old)


# -- item 13: conversions and range ------------------------------------------------------


@pytest.mark.parametrize("src", [f16, f32, f64], ids=lambda d: d.name)
@pytest.mark.parametrize("dst", sc.INTS, ids=lambda d: d.name)
def test_float_to_int_saturates_and_nan_is_0(src: Any, dst: Any) -> None:
    x = sc.conversion_inputs(src)
    out = np.zeros(x.size, dst.numpy)
    launch(sc.converter(dst), x.size, x, out)
    want = np.array([sc.ref_convert(float(v), dst) for v in x], dst.numpy)
    sc.assert_same(out, want, x)


@pytest.mark.parametrize("src", sc.INTS, ids=lambda d: d.name)
def test_int_to_bf16_rounds_once(src: Any) -> None:
    # NVPTX went through f32 on sm_80 (rounding twice); the CPU flushed through x86's
    # vcvtneps2bf16. Both now round once, to nearest even.
    x = sc.int_to_bf16_inputs(src)
    out = np.zeros(x.size, np.float32)
    launch(sc.int_to_bf16, x.size, x, out)
    sc.assert_same(out, np.array([sc.bf16_of_int(int(v)) for v in x], np.float32), x)
    _ptx(sc.int_to_bf16, Slice[src], DisjointSlice[f32])


def test_range_step_zero_is_reported_and_runs_no_iteration() -> None:
    out = np.full(4, 7, np.int32)
    with pytest.raises(ox.KernelAssertionError, match=r"range\(\) step must not be zero"):
        launch(sc.stepped, 4, 0, 10, 0, out)  # looped forever before
    assert out.tolist() == [0, 0, 0, 0]
    for start, stop, step in ((0, 10, 3), (10, 0, -3), (0, 10, -1), (3, 3, 5)):
        launch(sc.stepped, 4, start, stop, step, out)
        assert out.tolist() == [len(range(start, stop, step))] * 4


# -- item 11: masked warp collectives ------------------------------------------------------


@pytest.mark.parametrize("dt", [i32, u32, i64, u64, f32, f64], ids=lambda d: d.name)
@pytest.mark.parametrize("n", [64, 48])
def test_masked_warp_reductions_reduce_over_the_mask(dt: Any, n: int) -> None:
    x = (sc.rng.standard_normal(n) * 1000).astype(dt.numpy)
    for masks in (sc.member_masks(n), np.full(n, 0xFFFFFFFF, np.uint32)):
        outs = [np.zeros(n, dt.numpy) for _ in range(3)]
        launch(sc.warp_reduce, n, x, masks, *outs, block=n)
        for got, want in zip(outs, sc.warp_reduce_want(x, masks, n), strict=True):
            sc.assert_same(got, want, x, masks)


@pytest.mark.parametrize("dt", [i32, f64], ids=lambda d: d.name)
def test_shuffles_read_only_member_lanes(dt: Any) -> None:
    n = 48  # a partial last warp
    x = (np.arange(n) * 10 + 1).astype(dt.numpy)
    arg = sc.rng.integers(-3, 40, n).astype(np.int32)
    masks = sc.member_masks(n)
    outs = [np.zeros(n, dt.numpy) for _ in range(4)]
    launch(sc.warp_shuffles, n, x, arg, masks, *outs, block=n)
    for got, want in zip(outs, sc.shuffle_want(x, arg, masks, n), strict=True):
        sc.assert_same(got, want, x, arg, masks)


def test_per_bucket_maximum_over_match_any_groups() -> None:
    n = 64
    key = sc.rng.integers(0, 4, n).astype(np.int32)
    x = sc.rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    launch(sc.bucket_max, n, key, x, out, block=n)
    for i in range(n):
        w = i - i % 32
        assert out[i] == x[w:w + 32][key[w:w + 32] == key[i]].max()


def test_masked_warp_reduction_ptx() -> None:
    # 32-bit ints reduce with redux.sync over the mask; floats and 64-bit values take the
    # butterfly only when all 32 lanes are members, else a loop of shfl.sync.idx reads.
    for dt in (i32, u32):
        for ptx in _ptx(sc.warp_reduce, Slice[dt], Slice[u32], *[DisjointSlice[dt]] * 3):
            assert ptx.count("redux.sync") == 3 and "shfl.sync" not in ptx
    for dt in (i64, u64, f32, f64):
        for ptx in _ptx(sc.warp_reduce, Slice[dt], Slice[u32], *[DisjointSlice[dt]] * 3):
            assert "shfl.sync.idx" in ptx and "shfl.sync.bfly" in ptx
    for dt in (i32, u64, f32):
        _ptx(sc.warp_shuffles, Slice[dt], Slice[i32], Slice[u32], *[DisjointSlice[dt]] * 4)
    _ptx(sc.bucket_max, Slice[i32], Slice[f32], DisjointSlice[f32])
    _ptx(sc.warp_votes, Slice[i32], Slice[u32], DisjointSlice[u32], DisjointSlice[i32],
         DisjointSlice[i32])


def test_votes_over_partial_masks() -> None:
    n = 48
    p = sc.rng.integers(0, 2, n).astype(np.int32)
    masks = sc.member_masks(n)
    ballot = np.zeros(n, np.uint32)
    anyv, allv = np.zeros(n, np.int32), np.zeros(n, np.int32)
    launch(sc.warp_votes, n, p, masks, ballot, anyv, allv, block=n)
    for i in range(n):
        w = i - i % 32
        lanes = [k for k in range(32) if masks[i] >> k & 1 and w + k < n]
        want = sum(1 << k for k in lanes if p[w + k])
        assert ballot[i] == want
        assert anyv[i] == int(want != 0) and allv[i] == int(all(p[w + k] for k in lanes))


# -- item 12: division by zero is reported from every kind of kernel ---------------------


@ox.kernel(coarsen=False)
def divide_plain(a: Slice[i32], b: Slice[i32], out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] // b[i]


@ox.kernel
def divide_by_scalar(a: Slice[i64], b: i64, out: DisjointSlice[i64]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] % b


@ox.kernel
def divide_in_loop(a: Slice[u32], b: Slice[u32], out: DisjointSlice[u32]):
    i = thread.index_1d()
    if i in out:
        acc = u32(0)
        for k in range(len(b)):
            acc += a[i] // b[k]
        out[i] = acc


@ox.kernel
def divide_unused(a: Slice[i32], b: Slice[i32], out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i in out:
        q = a[i] // b[i]  # noqa: F841
        out[i] = 1


@ox.kernel
def divide_by_shifted(a: Slice[i64], s: Slice[i64], out: DisjointSlice[i64]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] // (i64(1) << s[i])  # 1 << 2**32 is 0: a division by zero


@ox.kernel
def divide_in_warp(a: Slice[i32], b: Slice[i32], out: DisjointSlice[i32]):
    i = thread.index_1d()
    q = i32(0)
    if i in out:
        q = a[i] // b[i]
    s = ox.warp.reduce_add(q)  # full mask: every lane of the warp, outside the `if`
    if i in out:
        out[i] = s


DIVISION_KERNELS = {
    "plain": (divide_plain, lambda n: (np.arange(n, dtype=np.int32),
                                       np.where(np.arange(n) == 37, 0, 3).astype(np.int32))),
    "coarsened": (sc.floordiv, lambda n: (np.arange(n, dtype=np.int32),
                                          np.where(np.arange(n) == n - 1, 0, 3).astype(np.int32))),
    "scalar": (divide_by_scalar, lambda n: (np.arange(n, dtype=np.int64), 0)),
    "loop": (divide_in_loop, lambda n: (np.arange(n, dtype=np.uint32),
                                        np.array([2, 0, 1], np.uint32))),
    "unused": (divide_unused, lambda n: (np.arange(n, dtype=np.int32),
                                         np.where(np.arange(n) == 5, 0, 1).astype(np.int32))),
    "shifted": (divide_by_shifted, lambda n: (np.arange(n, dtype=np.int64),
                                              np.where(np.arange(n) == 9, 1 << 32, 1))),
    "warp": (divide_in_warp, lambda n: (np.arange(n, dtype=np.int32),
                                        np.where(np.arange(n) == 40, 0, 2).astype(np.int32))),
}


def division_args(name: str, n: int) -> tuple[Any, list[Any], np.ndarray]:
    kernel, make = DIVISION_KERNELS[name]
    a, b = make(n)
    out = np.zeros(n, a.dtype)
    if isinstance(b, np.ndarray) and b.dtype != a.dtype:
        b = b.astype(a.dtype)
    return kernel, [a, b, out], out


@pytest.mark.parametrize("name", sorted(DIVISION_KERNELS))
def test_division_by_zero_is_reported_from_every_kind_of_kernel(name: str) -> None:
    kernel, args, _ = division_args(name, 1000)
    with pytest.raises(ox.KernelAssertionError, match="division by zero"):
        launch(kernel, 1000, *args)
    args_sig = [Slice[ox.types.dtype_of(a.dtype)] if isinstance(a, np.ndarray) else i64
                for a in args[:-1]]
    _ptx(kernel, *args_sig, DisjointSlice[ox.types.dtype_of(args[-1].dtype)])


@ox.kernel
def divide_by_shared(a: Slice[i32], out: DisjointSlice[i32]):
    i = thread.index_1d()
    s = ox.shared.array(i32, 32)
    ox.sync_threads()
    if i in out:
        with ox.unsafe():
            d = s[ox.thread_idx.x % 32]  # never written: whatever the memory holds
        out[i] = a[i] // d


def test_a_check_on_unwritten_shared_memory_stays_in_the_gpu_code() -> None:
    # An internal shared global with an undef initializer let LLVM fold the read to undef
    # and delete the division-by-zero report; the CPU, reading real memory, reported it.
    for arch in ("sm_80", "sm_90"):
        ck = divide_by_shared.compile(Slice[i32], DisjointSlice[i32], arch=arch)
        assert re.search(r"call [^\n]*report[^\n]*\(ptr %oxide\.err, i32 3,", ck.llvm), ck.llvm
        assert ck.cubin
