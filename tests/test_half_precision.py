"""f16 and bf16 on the CPU: conversions round once and subnormals survive (issue 14, round 2).

Found by the differential fuzzer (tools/fuzz.py): `f16(x)` of an f64 crashed the process
(LLVM's `fptrunc double to half` calls compiler-rt's __truncdfhf2, which the host JIT does
not resolve), and on hosts with AVX512-BF16 LLVM's own bf16 compares and `fneg` flushed
subnormal operands to zero. tests/test_gpu_semantics.py runs the same kernels on a GPU.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import oxide as ox
from oxide import (
    Const,
    DisjointSlice,
    Slice,
    TypeVar,
    bf16,
    f16,
    f32,
    f64,
    i32,
    i64,
    thread,
    u32,
    u64,
)

BF16 = ml_dtypes.bfloat16


@ox.kernel(contract=False)
def narrow_f64(a: Slice[f64], out: DisjointSlice[f16]):
    i = thread.index_1d()
    if i in out:
        out[i] = f16(a[i])


@ox.kernel(contract=False)
def bf16_reads(a: Slice[bf16], flags: DisjointSlice[i32], neg: DisjointSlice[bf16],
               mag: DisjointSlice[bf16], low: DisjointSlice[bf16], wide: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in flags and i in neg and i in mag and i in low and i in wide:
        x = a[i]
        r = 0
        if x < bf16(0.0):
            r |= 1
        if x > bf16(0.0):
            r |= 2
        if x == bf16(0.0):
            r |= 4
        if x:
            r |= 8
        flags[i] = r
        neg[i] = -x
        mag[i] = abs(x)
        low[i] = min(x, bf16(0.0))
        wide[i] = f32(-x)


@ox.func
def pick(k: i32, a: bf16, b: bf16) -> bf16:
    if k == 1:
        return a
    return b


@ox.kernel(contract=False)
def bf16_select(a: Slice[bf16], k: Slice[i32], out: DisjointSlice[bf16]):
    i = thread.index_1d()
    if i in out:
        out[i] = pick(k[i], a[i], bf16(2.0))


def bf16_select_cases() -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Subnormals chosen by a run-time condition (a `select`/`phi` of bf16), 16 lanes."""
    a = np.array([0x8001, 0x0001, 0x007F, 0x80FF] * 4, np.uint16).view(BF16)
    k = np.array([1, 1, 0, 1] * 4, np.int32)
    want = [b if c == 1 else 0x4000 for b, c in zip(a.view(np.uint16).tolist(), k.tolist(),
                                                    strict=True)]
    return a, k, want


def f64_to_f16_cases() -> np.ndarray:
    """Values a double rounding (f64 -> f32 -> f16) gets wrong, and the edges of f16."""
    third = 2.0 ** -40
    return np.array([
        1.0 + 2.0 ** -11 + third,  # just above a midpoint: up (through f32: a tie, down)
        1.0 + 2.0 ** -11 - third,  # just below: down
        1.0 + 2.0 ** -11,  # a tie: to even (1.0)
        1.0 + 3 * 2.0 ** -11,  # a tie: to even (up)
        -(2049.0 + third), 65504.0, 65519.99999, 65520.0, 1e300, -1e300,
        2.0 ** -25, 2.0 ** -25 + 2.0 ** -60, -(2.0 ** -24), 3 * 2.0 ** -26, 5e-324,
        0.1, -0.0, np.inf, -np.inf, np.nan, 1.5, 1e5,
    ])


def test_f64_to_f16_rounds_once_on_the_cpu() -> None:
    a = f64_to_f16_cases()
    out = np.zeros(a.size, np.float16)
    with ox.device("cpu"):
        narrow_f64[ox.LaunchConfig.for_num_elems(a.size)](a, out)
    assert same_f16(out, a)


def same_f16(got: np.ndarray, a: np.ndarray) -> bool:
    """`got` is `a` rounded once to f16, bit for bit (any NaN matches a NaN)."""
    with np.errstate(over="ignore"):
        want = a.astype(np.float16)  # NumPy's double -> half is direct: one rounding
    return np.where(np.isnan(got), -1, got.view(np.uint16).astype(int)).tolist() == \
        np.where(np.isnan(want), -1, want.view(np.uint16).astype(int)).tolist()


def bf16_cases() -> np.ndarray:
    return np.array([0x8001, 0x0001, 0x807F, 0x0040, 0x0000, 0x8000, 0x3F80],
                    np.uint16).view(BF16)


def bf16_expected(a: np.ndarray) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray,
                                           np.ndarray]:
    """What the language page says, computed on the values themselves (no bf16 hardware)."""
    x = a.astype(np.float32)  # exact
    flags = [(v < 0) | (v > 0) << 1 | (v == 0) << 2 | (v != 0) << 3 for v in x.tolist()]
    bits = a.view(np.uint16)
    neg = (bits ^ 0x8000).view(BF16)
    mag = (bits & 0x7FFF).view(BF16)
    low = np.array([b if v < 0 or (v == 0 and b & 0x8000) else 0 for v, b in
                    zip(x.tolist(), bits.tolist(), strict=True)], np.uint16).view(BF16)
    return flags, neg, mag, low, -x


def run_bf16_reads(a: np.ndarray) -> list[np.ndarray]:
    n = a.size
    outs = [np.zeros(n, np.int32), np.zeros(n, BF16), np.zeros(n, BF16), np.zeros(n, BF16),
            np.zeros(n, np.float32)]
    with ox.device("cpu"):
        bf16_reads[ox.LaunchConfig.for_num_elems(n)](a, *outs)
    return outs


def assert_bf16_reads(got: list[np.ndarray], a: np.ndarray) -> None:
    flags, neg, mag, low, wide = bf16_expected(a)
    assert got[0].tolist() == flags
    for g, w in zip(got[1:4], (neg, mag, low), strict=True):
        assert g.view(np.uint16).tolist() == w.view(np.uint16).tolist()
    assert got[4].view(np.uint32).tolist() == wide.view(np.uint32).tolist()


def test_bf16_subnormals_survive_compares_and_sign_ops_on_the_cpu() -> None:
    a = bf16_cases()
    assert_bf16_reads(run_bf16_reads(a), a)


def test_bf16_subnormals_pass_through_a_select_on_the_cpu() -> None:
    """x86 moved a chosen bf16 through f32 and back with AVX512-BF16's flushing conversion."""
    a, k, want = bf16_select_cases()
    out = np.zeros(a.size, BF16)
    with ox.device("cpu"):
        bf16_select[ox.LaunchConfig.for_num_elems(a.size)](a, k, out)
    assert out.view(np.uint16).tolist() == want


Int = TypeVar("Int")


@ox.kernel
def ints_through_f16(a: Slice[Int], out: DisjointSlice[f32], S: Const[int]):
    """f32(f16((a & 2047) << S)): at most 11 significant bits, which LLVM took as making
    the f16 step exact (`fpext(sitofp)` folded into one `sitofp`) even where the value
    is past f16's range (S = 6: 2047 << 6 = 131008 is inf in f16). Found by the tile
    fuzzer (tools/tile_fuzz.py)."""
    i = thread.index_1d()
    if i in out:
        out[i] = f32(f16((a[i] & 2047) << S))


@pytest.mark.parametrize("shift", [5, 6])
@pytest.mark.parametrize("dt", [i32, u32, i64, u64], ids=lambda d: d.name)
def test_int_to_f16_overflows_before_widening_on_the_cpu(dt, shift: int) -> None:
    a = np.array([0, 1, 3, 255, 1023, 1024, 1025, 2046, 2047, 4095, 6000], np.int64)
    a = a.astype(dt.numpy)
    out = np.zeros(a.size, np.float32)
    with ox.device("cpu"):
        ints_through_f16[ox.LaunchConfig.for_num_elems(a.size)](a, out, shift)
    with np.errstate(over="ignore"):
        want = ((a.astype(np.int64) & 2047) << shift).astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(out, want)
    assert np.isinf(want).any() == (shift == 6) and (want == 65504).any() == (shift == 5)
