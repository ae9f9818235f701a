"""16-bit wrap-around and integer `abs` at the type minimum, with a Python reference.

The GPU got these wrong before codegen/nvptx.py's `wrapping_16` and `int_abs` (ptxas
lost the 16-bit wrap of `-x`, `x * y`, `x << n` when it folded them into a widening,
and took `abs` to be non-negative), and bf16 values turned to f16 went through half
arithmetic (LLVM). test_trust_semantics.py runs them on the CPU and
test_gpu_semantics.py on a GPU, both against `expected`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

import oxide as ox
from oxide import DisjointSlice, Slice, bf16, f16, f32, i8, i16, i32, i64, thread, u16

EDGES16 = [-32768, 32767, -16384, 16384, -1, 1, 0, 255, -255, 181, 182, -182, -32767, 2, 128]
EDGES64 = [-(2**63), 2**63 - 1, -1, 0, 5, -5, -(2**31), 2**31 - 1, 3 * 2**40, -7]


def inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair of 16-bit edges, and 64-bit edges cycled beside them."""
    pairs = list(itertools.product(EDGES16, EDGES16))
    a = np.array([p[0] for p in pairs], np.int16)
    b = np.array([p[1] for p in pairs], np.int16)
    c = np.array([EDGES64[k % len(EDGES64)] for k in range(len(pairs))], np.int64)
    return a, b, c


def wrap(v: int, bits: int, signed: bool = True) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v


@ox.kernel
def neg_floordiv(a: Slice[i16], b: Slice[i16], c: Slice[i64], o: DisjointSlice[i64]) -> None:
    i = thread.index_1d()
    if i in o:
        o[i] = i64((-a[i]) // (b[i] | 1)) + i64(i32(-a[i])) * 100000 + i64(f32(-a[i])) * 10**10


@ox.kernel
def mul_mod(a: Slice[i16], b: Slice[i16], c: Slice[i64], o: DisjointSlice[i64]) -> None:
    i = thread.index_1d()
    if i in o:
        o[i] = i64((i16(-2) * a[i]) % (b[i] | 5)) + i64(f32(a[i] * b[i])) * 100000


@ox.kernel
def add_sub_shl(a: Slice[i16], b: Slice[i16], c: Slice[i64], o: DisjointSlice[i64]) -> None:
    i = thread.index_1d()
    if i in o:
        o[i] = (i64((a[i] + b[i]) // 3) + i64(i32(a[i] - b[i])) * 1000
                + i64(f32(a[i] << 1)) * 10**8 + i64((u16(a[i]) * u16(b[i])) // 3) * 10**13)


@ox.kernel
def abs_at_minimum(a: Slice[i16], b: Slice[i16], c: Slice[i64], o: DisjointSlice[i64]) -> None:
    i = thread.index_1d()
    if i in o:
        x = abs(a[i])
        y = abs(i32(c[i]))
        z = abs(c[i])
        signs = (i64(1) if x < 0 else i64(0)) + (i64(2) if y < 0 else i64(0)) \
            + (i64(4) if z < 0 else i64(0)) + (i64(8) if bf16(z) > bf16(1.0) else i64(0)) \
            + (i64(16) if abs(i8(a[i])) < 0 else i64(0))
        o[i] = signs + i64(f32(x)) * 100 + i64(f32(y) / f32(1024.0)) * 10**9


@ox.kernel
def bf16_to_f16(a: Slice[i16], b: Slice[i16], c: Slice[i64], o: DisjointSlice[i64]) -> None:
    i = thread.index_1d()
    if i in o:
        x = bf16(f32(c[i]) * f32(1e19))  # past f16's range, within bf16's
        o[i] = i64(f16(f32(x) / f32(x)) == f16(1.0))


@ox.kernel
def min_of_wrapped(a: Slice[i16], b: Slice[i16], c: Slice[i64], o: DisjointSlice[i64]) -> None:
    """The fuzzer's seed 62 (H100): ptxas fused `min.s16` and the `== 0` test of its
    result into a VIMNMX.S16x2 whose predicate read the register's upper half, so
    `min(x, 0) == 0` held for negative x; 8- and 16-bit min/max now run in 32 bits."""
    i = thread.index_1d()
    if i in o:
        x = a[i]
        v = f16(2.0) - f16(b[i] - b[i])
        x = min(i16(255), min(i16(v), x) + (-x), (x // (x | 5)) * (x - x))
        m = max(i8(a[i]), i8(b[i]) - i8(a[i]))
        o[i] = (i64(8) // i64(x) if x != 0 else i64(77)) + i64(m) * 1000


def _f32_int(v: int) -> int:
    """int(f32(v)) for the values these cases produce (saturating float -> int)."""
    return int(np.float32(v))


def _min_of_wrapped(a: int, b: int) -> int:
    x = min(255, wrap(min(2, a) - a, 16), 0)  # f16(2.0) - 0 converts to 2
    first = 8 // x if x != 0 else 77
    return first + max(wrap(a, 8), wrap(wrap(b, 8) - wrap(a, 8), 8)) * 1000


REFERENCE: dict[str, Callable[[int, int, int], int]] = {
    "neg_floordiv": lambda a, b, c: wrap(wrap(-a, 16) // wrap(b | 1, 16), 16) + wrap(-a, 16) * 100000
    + _f32_int(wrap(-a, 16)) * 10**10,
    "mul_mod": lambda a, b, c: (wrap(-2 * a, 16) % wrap(b | 5, 16))
    + _f32_int(wrap(a * b, 16)) * 100000,
    "add_sub_shl": lambda a, b, c: (wrap(a + b, 16) // 3) + wrap(a - b, 16) * 1000
    + wrap(a << 1, 16) * 10**8 + (wrap((a & 0xFFFF) * (b & 0xFFFF), 16, False) // 3) * 10**13,
    "abs_at_minimum": lambda a, b, c: (
        (1 if wrap(abs(a), 16) < 0 else 0) + (2 if wrap(abs(wrap(c, 32)), 32) < 0 else 0)
        + (4 if wrap(abs(c), 64) < 0 else 0) + (8 if wrap(abs(c), 64) > 1 else 0)
        + (16 if wrap(abs(wrap(a, 8)), 8) < 0 else 0)
        + wrap(abs(a), 16) * 100 + int(np.float32(wrap(abs(wrap(c, 32)), 32)) / 1024) * 10**9),
    "bf16_to_f16": lambda a, b, c: 1 if c != 0 else 0,
    "min_of_wrapped": lambda a, b, c: _min_of_wrapped(a, b),
}

KERNELS = {"neg_floordiv": neg_floordiv, "mul_mod": mul_mod, "add_sub_shl": add_sub_shl,
           "abs_at_minimum": abs_at_minimum, "bf16_to_f16": bf16_to_f16,
           "min_of_wrapped": min_of_wrapped}


def expected(name: str) -> np.ndarray:
    a, b, c = inputs()
    ref = REFERENCE[name]
    return np.array([ref(int(x), int(y), int(z)) for x, y, z in zip(a, b, c, strict=True)],
                    np.int64)
