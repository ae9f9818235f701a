"""Constants that must fold cleanly or be refused with a span: NaN and infinity converted
to ints, 2**2000, huge shifts and powers (without hanging), kernel options out of range,
`@ox.kernel` on things that are not functions (issue 14 item 14)."""

# ruff: noqa: F841, F842, B007, E731, F821 - the corpus is bad kernels on purpose

from __future__ import annotations

import math

import numpy as np

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f16, f32, f64, i32, i64, thread, tile

from . import bad

KSE, UFE, KTE = ox.KernelSyntaxError, ox.UnsupportedFeatureError, ox.KernelTypeError
CONST_CLASSES = (KTE, KSE, UFE)

NAN = float("nan")
INF = math.inf
HUGE = 2**2000
TOO_BIG_FOR_I64 = 2**64
SCALE_TEXT = "2"
COMPLEX_TABLE = np.zeros(4, np.complex64)
NOTHING = None
SETTINGS = {"scale": 2.0}


@bad(*CONST_CLASSES, pattern=r"NaN is no integer.*ValueError")
def i32_of_nan_constant():
    @ox.kernel
    def k(out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i in out:
            out[i] = i32(NAN)  # <-
    return k


@bad(*CONST_CLASSES, pattern=r"infinity is no integer.*OverflowError")
def i64_of_inf_constant():
    @ox.kernel
    def k(out: DisjointSlice[i64]):
        i = thread.index_1d()
        if i in out:
            out[i] = i64(INF)  # <-
    return k


@bad(*CONST_CLASSES, pattern=r"does not fit|f32|too (big|large)|overflow", accept_ok=True)
def f32_of_2_to_2000():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = f32(HUGE)  # <-
    return k


@bad(*CONST_CLASSES, pattern=r"shift|does not fit|too large", accept_ok=True, isolate=True)
def shift_by_2_to_40():
    @ox.kernel
    def k(out: DisjointSlice[i64]):
        i = thread.index_1d()
        if i in out:
            out[i] = 1 << 2**40  # <-
    return k


@bad(*CONST_CLASSES, pattern=r"\*\*|does not fit|exponent|too (big|large)", isolate=True)
def power_tower_2_2_40():
    @ox.kernel
    def k(out: DisjointSlice[i64]):
        i = thread.index_1d()
        if i in out:
            out[i] = 2 ** 2 ** 40  # <-
    return k


@bad(*CONST_CLASSES, pattern=r"\*\*|does not fit|exponent|too (big|large)|overflow",
     accept_ok=True, isolate=True)
def float_power_overflow():
    @ox.kernel
    def k(out: DisjointSlice[f64]):
        i = thread.index_1d()
        if i in out:
            out[i] = 2.0 ** 10000  # <-
    return k


@bad(*CONST_CLASSES, pattern=r"negative shift count")
def shift_by_negative_constant():
    @ox.kernel
    def k(out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i in out:
            out[i] = 1 << -1  # <-
    return k


@bad(*CONST_CLASSES, pattern=r"does not fit|i64")
def module_int_beyond_i64():
    @ox.kernel
    def k(out: DisjointSlice[i64]):
        i = thread.index_1d()
        n = TOO_BIG_FOR_I64  # <-
        if i in out:
            out[i] = n
    return k


@bad(*CONST_CLASSES, pattern=r"\*\*|does not fit|exponent")
def ten_to_the_twenty():
    @ox.kernel
    def k(out: DisjointSlice[i64]):
        i = thread.index_1d()
        if i in out:
            out[i] = 10 ** 20  # <-
    return k


@bad(*CONST_CLASSES, pattern=r"does not fit|i64|range")
def range_beyond_i64():
    @ox.kernel
    def k(x: Slice[f32]):
        for j in range(10 ** 15 * 10 ** 5):  # <-
            pass
    return k


@bad(*CONST_CLASSES, pattern=r"division by zero")
def float_constant_divided_by_zero():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = 1.0 / 0.0  # <-
    return k


@bad(*CONST_CLASSES, pattern=r"f16|does not fit|inf", accept_ok=True)
def f16_of_70000():
    @ox.kernel
    def k(out: DisjointSlice[f16]):
        i = thread.index_1d()
        if i in out:
            out[i] = f16(70000.0)  # <-
    return k


@bad(*CONST_CLASSES, pattern=r"does not fit in i32")
def i32_of_2_to_40_constant():
    @ox.kernel
    def k(out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i in out:
            out[i] = i32(2**40)  # <-
    return k


@bad(UFE, KTE, pattern=r"`str`|string")
def module_string_constant_in_arithmetic():
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[i] * SCALE_TEXT  # <-
    return k


@bad(KTE, UFE, pattern=r"cannot capture.*complex64")
def module_numpy_array_indexed():  # float tables are captured (issue 15 item 5); complex not
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = COMPLEX_TABLE[1]  # <-
    return k


@bad(KTE, UFE, pattern=r"None")
def module_none_constant():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = NOTHING  # <-
    return k


@bad(KTE, UFE, pattern=r"dict|not indexable|string")
def module_dict_constant():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = SETTINGS["scale"]  # <-
    return k


@bad(UFE, pattern=r"starred", accept_ok=True)
def starred_unpack_of_constants():
    @ox.kernel
    def k(out: DisjointSlice[i32]):
        a, *b = (1, 2, 3)  # <-
    return k


@bad(KSE, KTE, UFE, pattern=r"max_threads.*(1024|1 to)")
def max_threads_4096():
    @ox.kernel(max_threads=4096)  # <-
    def k(x: Slice[f32]):
        pass
    return k


@bad(KSE, KTE, UFE, pattern=r"max_threads")
def max_threads_zero():
    @ox.kernel(max_threads=0)  # <-
    def k(x: Slice[f32]):
        pass
    return k


@bad(KSE, KTE, UFE, pattern=r"max_threads")
def max_threads_float():
    @ox.kernel(max_threads=256.0)  # <-
    def k(x: Slice[f32]):
        pass
    return k


@bad(KSE, KTE, UFE, pattern=r"checks.*bool|True or False|bool")
def checks_option_a_string():
    @ox.kernel(checks="no")  # <-
    def k(x: Slice[f32]):
        pass
    return k


@bad(KSE, KTE, UFE, pattern=r"class")
def kernel_on_a_class():
    @ox.kernel  # <-
    class K:  # <-
        def run(self, x: Slice[f32]):
            pass
    return K


@bad(KSE, KTE, UFE, pattern=r"class")
def func_on_a_class():
    @ox.func  # <-
    class Helper:  # <-
        pass

    @ox.kernel
    def k(x: Slice[f32]):
        pass
    return k


@bad(*CONST_CLASSES, pattern=r"does not fit|too (big|large)|i64|u64")
def index_literal_beyond_u64():
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[1 << 64]  # <-
    return k


# -- issue 27: constants Python refuses, in SIMT and tile kernels alike ------------------

@bad(*CONST_CLASSES, pattern=r"does not fit in i32.*OverflowError")
def i32_of_float_beyond_its_range():
    @ox.kernel
    def k(out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i in out:
            out[i] = i32(3e10)  # <-
    return k


@bad(KTE, pattern=r"negative constant.*negative shift count")
def run_time_value_shifted_by_negative_constant():
    @ox.kernel
    def k(n: i32, out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i in out:
            out[i] = n << -1  # <-
    return k


@bad(KTE, pattern=r"negative constant.*negative shift count")
def augmented_shift_by_negative_constant():
    @ox.kernel
    def k(n: i64, out: DisjointSlice[i64]):
        i = thread.index_1d()
        v = n
        v >>= -3  # <-
        if i in out:
            out[i] = v
    return k


@bad(KTE, pattern=r"NaN is no integer.*ValueError")
def tile_i32_of_nan_constant():
    @tile.kernel
    def k(out: DisjointSlice[i32]):
        tile.store(out, (tile.bid(0),), tile.full((16,), i32(NAN)))  # <-
    return k


@bad(KTE, pattern=r"negative constant.*negative shift count")
def tile_shifted_by_negative_constant():
    @tile.kernel
    def k(x: Slice[i32], out: DisjointSlice[i32]):
        t = tile.load(x, (tile.bid(0),), (16,))
        tile.store(out, (tile.bid(0),), t << -1)  # <-
    return k


@bad(KTE, pattern=r"\*\*.*too large", isolate=True)
def tile_power_tower_2_2_40():
    @tile.kernel
    def k(out: DisjointSlice[i64]):
        tile.store(out, (tile.bid(0),), tile.full((16,), 2 ** 2 ** 40, i64))  # <-
    return k


@bad(KTE, pattern=r"too large", isolate=True)
def tile_power_of_a_huge_const_exponent():
    @tile.kernel
    def k(out: DisjointSlice[i64], B: Const[int]):
        tile.store(out, (tile.bid(0),), tile.full((16,), 3 ** B, i64))  # <-
    return k, (DisjointSlice[i64], 2**40)


@bad(KTE, pattern=r"<<.*too large", isolate=True)
def tile_shift_by_a_huge_const():
    @tile.kernel
    def k(out: DisjointSlice[i64], B: Const[int]):
        tile.store(out, (tile.bid(0),), tile.full((16,), 1 << B, i64))  # <-
    return k, (DisjointSlice[i64], 2**40)


@bad(KTE, pattern=r"too long.*items", isolate=True)
def tile_tuple_repeated_2_to_40_times():
    @tile.kernel
    def k(out: DisjointSlice[i64]):
        shape = (16,) * 2**40  # <-
        tile.store(out, (tile.bid(0),), tile.zeros(shape, i64))
    return k
