"""Types that do not fit: operands, stores, indices, annotations, conversions."""

# ruff: noqa: F841, F842, B007, E731, F821 - the corpus is bad kernels on purpose

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import (
    Const,
    DisjointSlice,
    Slice,
    TensorMap,
    bf16,
    f16,
    f32,
    f64,
    i8,
    i32,
    i64,
    thread,
    tile,
    u8,
    u64,
)

from . import bad

KSE, UFE, KTE = ox.KernelSyntaxError, ox.UnsupportedFeatureError, ox.KernelTypeError


@bad(KTE, pattern=r"signed and unsigned")
def i64_plus_u64():
    @ox.kernel
    def k(a: i64, b: u64, out: DisjointSlice[i64]):
        i = thread.index_1d()
        if i in out:
            out[i] = a + b  # <-
    return k


@bad(KTE, pattern=r"signed and unsigned")
def witness_compared_with_unsigned():
    @ox.kernel
    def k(n: u64, out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i < n:  # <-
            pass
    return k


@bad(KTE, pattern=r"expected a number, got Slice\[f32\]")
def array_compared_with_number():
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if x > 0.0:  # <-
            if i in out:
                out[i] = 1.0
    return k


@bad(KTE, pattern=r"len\(\)|array")
def len_of_scalar():
    @ox.kernel
    def k(a: f32, out: DisjointSlice[f32]):
        n = len(a)  # <-
    return k


@bad(KTE, pattern=r"shape|rank|out of range|index")
def shape_index_beyond_rank():
    @ox.kernel
    def k(x: Slice[f32, 1], out: DisjointSlice[f32]):
        n = x.shape[2]  # <-
    return k


@bad(KTE, pattern=r"holds f32|array|number")
def store_array_into_element():
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = x  # <-
    return k


@bad(KTE, pattern=r"holds i32.*i64|i64.*i32")
def store_i64_into_i32_array():
    @ox.kernel
    def k(n: i64, out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i in out:
            out[i] = n  # <-
    return k


@bad(KTE, pattern=r"holds f16.*f32|f32.*f16")
def store_f32_into_f16_array():
    @ox.kernel
    def k(a: f32, out: DisjointSlice[f16]):
        i = thread.index_1d()
        if i in out:
            out[i] = a  # <-
    return k


@bad(KTE, pattern=r"`\*\*`|float|pow|exponent")
def int_power_negative_exponent():
    @ox.kernel
    def k(n: i32, out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i in out:
            out[i] = n ** -1  # <-
    return k


@bad(KTE, pattern=r"`\*\*`|float|pow|exponent")
def int_power_runtime_exponent():
    @ox.kernel
    def k(n: i32, m: i32, out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i in out:
            out[i] = n ** m  # <-
    return k


@bad(KTE, pattern=r"cannot unpack|tuple|not")
def unpack_a_scalar():
    @ox.kernel
    def k(a: f32):
        b, c = a  # <-
    return k


@bad(KTE, pattern=r"tuple|index|range")
def tuple_index_out_of_range():
    @ox.kernel
    def k(a: f32):
        t = (a, a)
        v = t[5]  # <-
    return k


@bad(KTE, pattern=r"tuple|constant|index")
def tuple_indexed_at_runtime():
    @ox.kernel
    def k(a: f32, n: i32):
        t = (a, a)
        v = t[n]  # <-
    return k


@bad(KTE, pattern=r"abs\(\)|numbers|Slice")
def abs_of_array():
    @ox.kernel
    def k(x: Slice[f32]):
        v = abs(x)  # <-
    return k


@bad(KTE, pattern=r"min\(\)|numbers|Slice")
def min_of_array_and_number():
    @ox.kernel
    def k(x: Slice[f32]):
        v = min(x, 1.0)  # <-
    return k


@bad(KTE, pattern=r"`n` is i32.*f32|f32.*i32")
def int_variable_gets_true_division():
    @ox.kernel
    def k(m: i32):
        n = m
        n = n / 2  # <-
    return k


@bad(KTE, pattern=r"bitwise|~|float|f32")
def invert_runtime_float():
    @ox.kernel
    def k(a: f32, out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = ~a  # <-
    return k


@bad(KTE, pattern=r"`-`|numbers|Slice")
def negate_array():
    @ox.kernel
    def k(x: Slice[f32]):
        y = -x  # <-
    return k


@bad(KTE, pattern=r"not indexable|rank 2|rank-2")
def double_indexing_2d():
    @ox.kernel
    def k(x: Slice[f32, 2], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[i][0]  # <-
    return k


@bad(KTE, UFE, pattern=r"indices must be integers|None|slices")
def none_index():
    @ox.kernel
    def k(x: Slice[f32]):
        v = x[None]  # <-
    return k


@bad(KTE, UFE, pattern=r"indices must be integers|string")
def string_index():
    @ox.kernel
    def k(x: Slice[f32]):
        v = x["a"]  # <-
    return k


@bad(KTE, pattern=r"print|number|array|Slice")
def print_an_array():
    @ox.kernel
    def k(x: Slice[f32]):
        print(x)  # <-
    return k


@bad(KTE, pattern=r"no truth value")
def assert_an_array():
    @ox.kernel
    def k(x: Slice[f32]):
        assert x  # <-
    return k


@bad(KTE, pattern=r"`x: int`|not a kernel parameter type|element type")
def slice_of_python_int():
    @ox.kernel
    def k(x: Slice[int]):  # <-
        pass
    return k


@bad(KTE, pattern=r"not a kernel parameter type|element type|float32")
def slice_of_numpy_dtype():
    @ox.kernel
    def k(x: Slice[np.float32]):  # <-
        pass
    return k


@bad(KTE, pattern=r"rank must be 0 to 4")
def slice_of_rank_five():
    @ox.kernel
    def k(x: Slice[f32, 5]):  # <-
        pass
    return k


@bad(KTE, pattern=r"not a kernel parameter type|element type|Slice")
def slice_of_slice():
    @ox.kernel
    def k(x: DisjointSlice[Slice[f32]]):  # <-
        pass
    return k


@bad(KTE, pattern=r"`x: float`|not a kernel parameter type|f32")
def python_float_parameter():
    @ox.kernel
    def k(x: float):  # <-
        pass
    return k


@bad(KTE, pattern=r"not a kernel parameter type|np\.ndarray|ndarray")
def ndarray_parameter():
    @ox.kernel
    def k(x: np.ndarray):  # <-
        pass
    return k


@bad(ox.ArgumentError, KTE, pattern=r"`n`.*Const\[int\].*float|does not fit")
def const_int_given_a_float():
    @ox.kernel
    def k(x: Slice[f32], n: Const[int]):  # <-
        pass
    return k, (Slice[f32], 2.5)


@bad(KTE, pattern=r"does not fit|i64|too (big|large)")
def const_int_given_a_huge_value():
    @ox.kernel
    def k(x: Slice[f32], n: Const[int]):  # <-
        m = n + 1  # <-
    return k, (Slice[f32], 2**100)


@bad(KTE, pattern=r"does not fit.*i8|i8")
def literal_does_not_fit_i8():
    @ox.kernel
    def k(a: i8, out: DisjointSlice[i8]):
        i = thread.index_1d()
        if i in out:
            out[i] = a + 200  # <-
    return k


@bad(KTE, pattern=r"does not fit.*u8|u8")
def negative_literal_into_u8_array():
    @ox.kernel
    def k(out: DisjointSlice[u8]):
        i = thread.index_1d()
        if i in out:
            out[i] = -1  # <-
    return k


@bad(KTE, pattern=r"`acc` is i32.*f32|f32")
def accumulator_started_as_int():
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        acc = 0
        for j in range(4):
            acc += x[j]  # <-
        if i in out:
            out[i] = acc
    return k


@bad(KTE, pattern=r"`acc` is f32.*f64|f64")
def accumulator_widened_by_f64_parameter():
    @ox.kernel
    def k(x: Slice[f32], s: f64, out: DisjointSlice[f32]):
        i = thread.index_1d()
        acc = f32(0)
        acc = acc * s  # <-
    return k


@bad(KTE, pattern=r"both sides|numbers|Slice|array")
def ifexp_array_or_number():
    @ox.kernel
    def k(x: Slice[f32], a: f32, flag: i32):
        v = x if flag else a  # <-
    return k


@bad(KTE, UFE, pattern=r"Slice|array|return")
def func_returns_an_array():
    @ox.func
    def pick(x):
        return x  # <-

    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        y = pick(x)
    return k


@bad(ox.ArgumentError, KTE, pattern=r"`n`.*(Const|list|hashable)")
def compile_with_a_list_for_const_int():
    @ox.kernel
    def k(x: Slice[f32], n: Const[int]):  # <-
        pass
    return k, (Slice[f32], [2])


@bad(ox.ArgumentError, KTE, pattern=r"`n`.*(Const|None)")
def compile_with_none_for_const_int():
    @ox.kernel
    def k(x: Slice[f32], n: Const[int]):  # <-
        pass
    return k, (Slice[f32], None)


@bad(KTE, pattern=r"f23|not a (scalar )?type|annotation")
def func_parameter_annotation_typo():
    @ox.func
    def half(v: f23):  # <-
        return v * 0.5

    @ox.kernel
    def k(a: f32, out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = half(a)  # <-
    return k


@bad(UFE, pattern=r"tile kernels do not take `tm: TensorMap\[bf16, 2\]`.*ox\.tma")
def tensor_map_parameter_of_a_tile_kernel():
    @tile.kernel
    def k(a: Slice[f32], tm: TensorMap[bf16, 2], out: DisjointSlice[f32]):  # <-
        tile.store(out, (tile.bid(0),), tile.load(a, (tile.bid(0),), (16,)))
    return k
