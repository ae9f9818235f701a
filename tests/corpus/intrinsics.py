"""Intrinsics used wrongly: warp, atomic, block, math and register calls with the wrong
arity, operand kinds or types."""

# ruff: noqa: F841, F842, B007, E731, F821 - the corpus is bad kernels on purpose

from __future__ import annotations

import oxide as ox
from oxide import AtomicSlice, DisjointSlice, RawSlice, Slice, f32, i32, thread, u32

from . import bad

KSE, UFE, KTE, SE = (ox.KernelSyntaxError, ox.UnsupportedFeatureError, ox.KernelTypeError,
                     ox.SafetyError)


@bad(KSE, pattern=r"shuffle\(\).*argument|positional")
def shuffle_without_source_lane():
    @ox.kernel
    def k(a: f32):
        v = ox.warp.shuffle(a)  # <-
    return k


@bad(KTE, pattern=r"number|Slice|array")
def shuffle_an_array():
    @ox.kernel
    def k(x: Slice[f32]):
        v = ox.warp.shuffle(x, 0)  # <-
    return k


@bad(KTE, pattern=r"mask|integer|u32|f32")
def ballot_with_float_mask():
    @ox.kernel
    def k(a: f32):
        b = ox.warp.ballot(a > 0.0, 1.5)  # <-
    return k


@bad(KTE, pattern=r"mask|integer|u32|f32")
def warp_reduce_with_float_mask():
    @ox.kernel
    def k(a: f32, m: f32):
        s = ox.warp.reduce_add(a, m)  # <-
    return k


@bad(KTE, pattern=r"number|Slice|array")
def match_any_of_array():
    @ox.kernel
    def k(x: Slice[i32]):
        m = ox.warp.match_any(x)  # <-
    return k


@bad(KTE, pattern=r"width.*power of two")
def shuffle_with_bad_width():
    @ox.kernel
    def k(a: f32):
        v = ox.warp.shuffle(a, 0, width=12)  # <-
    return k


@bad(KSE, pattern=r"atomic\.add\(\).*argument|positional|3")
def atomic_add_without_value():
    @ox.kernel
    def k(total: AtomicSlice[f32]):
        ox.atomic.add(total, 0)  # <-
    return k


@bad(KTE, pattern=r"indices must be integers|f32|float")
def atomic_add_float_index():
    @ox.kernel
    def k(total: AtomicSlice[f32]):
        ox.atomic.add(total, 0.5, 1.0)  # <-
    return k


@bad(KTE, pattern=r"number|Slice|array")
def atomic_add_array_value():
    @ox.kernel
    def k(x: Slice[f32], total: AtomicSlice[f32]):
        ox.atomic.add(total, 0, x)  # <-
    return k


@bad(KTE, pattern=r"integer|bitwise|f32|float")
def atomic_and_on_floats():
    @ox.kernel
    def k(total: AtomicSlice[f32]):
        ox.atomic.and_(total, 0, 1.0)  # <-
    return k


@bad(KSE, pattern=r"cas\(\).*argument|positional|4")
def atomic_cas_without_compare():
    @ox.kernel
    def k(total: AtomicSlice[i32]):
        ox.atomic.cas(total, 0, 1)  # <-
    return k


@bad(KTE, pattern=r"rank|integers|index")
def atomic_add_2_indices_into_1d():
    @ox.kernel
    def k(total: AtomicSlice[f32]):
        ox.atomic.add(total, (0, 0), 1.0)  # <-
    return k


@bad(SE, KTE, pattern=r"AtomicSlice")
def atomic_on_local_array():
    @ox.kernel
    def k(a: f32):
        buf = ox.local.array(f32, 4)
        ox.atomic.add(buf, 0, a)  # <-
    return k


@bad(KTE, SE, pattern=r"number|scalar|f32|value")
def atomic_exch_tuple_value():
    @ox.kernel
    def k(total: AtomicSlice[f32], a: f32):
        ox.atomic.exch(total, 0, (a, a))  # <-
    return k


@bad(KSE, pattern=r"sync_threads\(\).*0 positional|argument")
def sync_threads_with_argument():
    @ox.kernel
    def k(a: f32):
        ox.sync_threads(1)  # <-
    return k


@bad(KSE, pattern=r"threadfence\(\).*0 positional|argument")
def threadfence_with_argument():
    @ox.kernel
    def k(a: f32):
        ox.threadfence(1)  # <-
    return k


@bad(KSE, pattern=r"lane_id\(\).*0 positional|argument")
def lane_id_with_argument():
    @ox.kernel
    def k(a: f32):
        lane = ox.lane_id(3)  # <-
    return k


@bad(KTE, pattern=r"number|Slice|array")
def block_reduce_of_array():
    @ox.kernel
    def k(x: Slice[f32]):
        s = ox.block.reduce_add(x)  # <-
    return k


@bad(KSE, pattern=r"reduce_add\(\).*1 positional|argument")
def block_reduce_without_value():
    @ox.kernel
    def k(x: Slice[f32]):
        s = ox.block.reduce_add()  # <-
    return k


@bad(KSE, pattern=r"no attribute `sum`|reduce_add")
def block_sum_misspelled():
    @ox.kernel
    def k(a: f32):
        s = ox.block.sum(a)  # <-
    return k


@bad(KSE, pattern=r"fma\(\).*3 positional|argument")
def fma_with_two_arguments():
    @ox.kernel
    def k(a: f32):
        v = ox.math.fma(a, a)  # <-
    return k


@bad(KSE, pattern=r"pow\(\).*2 positional|argument")
def pow_with_one_argument():
    @ox.kernel
    def k(a: f32):
        v = ox.math.pow(a)  # <-
    return k


@bad(KTE, pattern=r"isnan\(\)|numbers|Slice")
def isnan_of_array():
    @ox.kernel
    def k(x: Slice[f32]):
        v = ox.math.isnan(x)  # <-
    return k


@bad(KSE, pattern=r"`ox\.math`.*no attribute `abs`|fabs")
def math_abs_instead_of_fabs():
    @ox.kernel
    def k(a: f32):
        v = ox.math.abs(a)  # <-
    return k


@bad(KSE, pattern=r"no attribute `index_1D`|index_1d")
def witness_wrong_case():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = thread.index_1D()  # <-
    return k


@bad(KSE, pattern=r"`warp`.*no attribute `sync`|sync_warp|no attribute")
def warp_sync_misspelled():
    @ox.kernel
    def k(a: f32):
        ox.warp.sync()  # <-
    return k


@bad(KTE, KSE, pattern=r"register|not a number|\.x|needs numbers")
def register_group_without_axis():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        n = ox.block_dim * 2  # <-
    return k


@bad(KTE, pattern=r"signed and unsigned|u32|i32")
def ballot_compared_with_negative():
    @ox.kernel
    def k(a: f32, m: i32):
        b = ox.warp.ballot(a > 0.0)
        if b == m:  # <-
            pass
    return k


@bad(KTE, SE, pattern=r"mask|lane")
def warp_reduce_with_empty_constant_mask():
    @ox.kernel
    def k(a: i32, out: DisjointSlice[i32]):
        i = thread.index_1d()
        s = ox.warp.reduce_add(a, 0)  # <-
        if i in out:
            out[i] = s
    return k


# -- issue 27: tensor-core and warp-group instructions need whole warps


@bad(SE, pattern=r"ox\.mma_sync.*32 threads of a warp.*block=16 has 16 threads")
def mma_sync_in_a_declared_block_of_16():
    @ox.kernel(block=16)
    def k(a: Slice[u32], out: RawSlice[f32]):
        d = ox.mma_sync((a[0], a[1], a[2], a[3]), (a[4], a[5]), (0.0, 0.0, 0.0, 0.0))  # <-
        with ox.unsafe():
            out[ox.thread_idx.x] = d[0]
    return k


@bad(SE, pattern=r"ox\.setmaxnreg.*warp group.*96 threads")
def setmaxnreg_in_a_declared_block_of_3_warps():
    @ox.kernel(block=96)
    def k(out: RawSlice[u32]):
        with ox.unsafe():
            ox.setmaxnreg(232)  # <-
            out[ox.thread_idx.x] = u32(1)
    return k
