"""Shared, local and dynamic memory a kernel cannot have: sizes beyond the hardware,
shapes that are not constants, ranks and dims that make no sense (issue 14 items 7, 14)."""

# ruff: noqa: F841, F842, B007, E731, F821 - the corpus is bad kernels on purpose

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import DisjointSlice, Slice, f32, f64, i32, i64, thread

from . import bad

KSE, UFE, KTE, TE = (ox.KernelSyntaxError, ox.UnsupportedFeatureError, ox.KernelTypeError,
                     ox.TargetError)
SIZE_CLASSES = (KTE, KSE, UFE, TE)  # any of these, as long as it points at the line
TOO_BIG = r"too (big|large)|exceeds|limit|at most|KiB|MiB|bytes|size"


@bad(*SIZE_CLASSES, pattern=TOO_BIG)
def huge_local_array():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d()
        buf = ox.local.array(f32, 1 << 28)  # <-
        if i in out:
            buf[0] = 1.0
            out[i] = buf[0]
    return k


@bad(*SIZE_CLASSES, pattern=TOO_BIG)
def local_array_2d_overflowing_i64():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        buf = ox.local.array(f32, (1 << 40, 1 << 40))  # <-
    return k


@bad(*SIZE_CLASSES, pattern=TOO_BIG)
def shared_array_of_2_to_93_floats():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        s = ox.shared.array(f32, (1 << 31, 1 << 31, 1 << 31))  # <-
        with ox.unsafe():
            s[0, 0, 0] = 1.0
    return k


@bad(*SIZE_CLASSES, pattern=TOO_BIG)
def shared_array_of_4_mib():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        s = ox.shared.array(f32, 1 << 20)  # <-
        with ox.unsafe():
            s[ox.thread_idx.x] = 1.0
    return k


@bad(*SIZE_CLASSES, pattern=TOO_BIG)
def shared_array_past_227_kib_static():
    """64 KiB compiles on sm_90 (as sm_90a) and runs on the CPU; 234 KiB is past every
    GPU's static shared memory."""
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        s = ox.shared.array(f64, 30000)  # <-
        with ox.unsafe():
            s[ox.thread_idx.x] = 1.0
    return k


@bad(*SIZE_CLASSES, pattern=TOO_BIG)
def two_shared_arrays_over_the_limit():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        a = ox.shared.array(f32, 32768)
        b = ox.shared.array(f32, 32768)  # <-
        with ox.unsafe():
            a[ox.thread_idx.x] = 1.0
            b[ox.thread_idx.x] = 1.0
    return k


@bad(KTE, KSE, pattern=r"constant")
def shared_array_runtime_size():
    @ox.kernel
    def k(n: i32):
        s = ox.shared.array(f32, n)  # <-
    return k


@bad(KTE, KSE, pattern=r"constant")
def local_array_runtime_size():
    @ox.kernel
    def k(x: Slice[f32]):
        buf = ox.local.array(f32, len(x))  # <-
    return k


@bad(KTE, KSE, pattern=r"positive|zero|at least 1|empty")
def shared_array_zero_length():
    @ox.kernel
    def k(x: Slice[f32]):
        s = ox.shared.array(f32, 0)  # <-
    return k


@bad(KTE, KSE, pattern=r"positive|negative|at least 1")
def local_array_negative_length():
    @ox.kernel
    def k(x: Slice[f32]):
        buf = ox.local.array(f32, -4)  # <-
    return k


@bad(KTE, KSE, UFE, pattern=r"1 to 3|rank|dimensions")
def shared_array_rank_4():
    @ox.kernel
    def k(x: Slice[f32]):
        s = ox.shared.array(f32, (2, 2, 2, 2))  # <-
    return k


@bad(KTE, KSE, pattern=r"integer|int|shape")
def shared_array_float_size():
    @ox.kernel
    def k(x: Slice[f32]):
        s = ox.shared.array(f32, 2.5)  # <-
    return k


@bad(KTE, KSE, pattern=r"dtype|scalar type|f32|type")
def local_array_python_float_dtype():
    @ox.kernel
    def k(x: Slice[f32]):
        buf = ox.local.array(float, 4)  # <-
    return k


@bad(KTE, KSE, UFE, pattern=r"dtype|scalar type|type|string")
def shared_array_string_dtype():
    @ox.kernel
    def k(x: Slice[f32]):
        s = ox.shared.array("f32", 4)  # <-
    return k


@bad(KSE, KTE, pattern=r"ox\.shared\.dynamic\(\).*1 positional|argument")
def dynamic_shared_with_size():
    @ox.kernel
    def k(x: Slice[f32]):
        s = ox.shared.dynamic(f32, 1024)  # <-
    return k


@bad(KTE, KSE, pattern=r"rank|index|integers")
def local_array_wrong_index_count():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d()
        buf = ox.local.array(f32, (4, 4))
        buf[1] = 0.0  # <-
    return k


@bad(KTE, pattern=r"negative index")
def local_array_negative_constant_index():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        buf = ox.local.array(f32, 4)
        buf[-1] = 0.0  # <-
    return k


@bad(KTE, pattern=r"holds f32|f64")
def local_array_store_f64():
    @ox.kernel
    def k(a: f64):
        buf = ox.local.array(f32, 4)
        buf[0] = a  # <-
    return k


@bad(KTE, ox.SafetyError, pattern=r"array|rebound|cannot")
def shared_array_rebound():
    @ox.kernel
    def k(x: Slice[f32]):
        s = ox.shared.array(f32, 32)
        s = ox.shared.array(f32, 64)  # <-
    return k


# -- run time: out-of-bounds accesses of kernel-local memory are checked, never wild


@ox.kernel
def local_store(out: DisjointSlice[f32], j: i64):
    i = thread.index_1d()
    buf = ox.local.array(f32, 4)
    for q in range(4):
        buf[q] = 0.0
    buf[j] = 1.0
    if i in out:
        out[i] = buf[0]


@ox.kernel
def shared_store(j: i64):
    s = ox.shared.array(f32, 4)
    with ox.unsafe():
        s[j] = 1.0


@ox.kernel
def dynamic_store(j: i64):
    s = ox.shared.dynamic(f32)
    with ox.unsafe():
        s[j] = 1.0


@ox.kernel
def shared_atomic(j: i64):
    s = ox.shared.array(i32, 4)
    ox.atomic.add(s, j, 1)


@ox.kernel
def atomic_at(total: ox.AtomicSlice[f32], j: i64):
    ox.atomic.add(total, j, 1.0)


@bad(ox.KernelIndexError, pattern=r"index 5.*`buf`.*length 4", launch=True, isolate=True)
def local_array_write_past_the_end():
    local_store[1, 1](np.zeros(1, np.float32), 5)


@bad(ox.KernelIndexError, pattern=r"index 6.*`s`.*length 4", launch=True,
     isolate=True)
def shared_array_write_past_the_end():
    shared_store[1, 1](6)


@bad(ox.KernelIndexError, pattern=r"index 6.*`s`.*length 4", launch=True,
     isolate=True)
def dynamic_shared_write_past_the_end():
    dynamic_store[ox.LaunchConfig(1, 1, shared_mem_bytes=16)](6)


@bad(ox.KernelIndexError, pattern=r"index -2.*`s`.*length 4", launch=True,
     isolate=True)
def shared_atomic_before_the_start():
    shared_atomic[1, 1](-2)


@bad(ox.KernelIndexError, pattern=r"index 8.*`total`.*length 8", launch=True, isolate=True)
def atomic_past_the_end():
    atomic_at[1, 1](np.zeros(8, np.float32), 8)


@bad(KSE, KTE, ox.SafetyError, pattern=r"local|assign|initiali|read before", launch=True,
     accept_ok=True)
def local_array_read_before_any_write():
    """A local array element nobody wrote: today LLVM treats it as `undef` and folds it to
    the value of the write that did not happen (every output reads 1.0). Either refuse
    the kernel or give the element a defined value (zero): the launch then writes 0."""

    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        buf = ox.local.array(f32, 8)  # <-
        if x[0] > 100.0:
            buf[3] = 1.0
        if i in out:
            out[i] = buf[3] + buf[5]  # <-

    out = np.full(64, 7.0, np.float32)
    k[1, 64](np.zeros(1, np.float32), out)
    ox.synchronize()
    assert (out == 0.0).all(), f"read an element nobody wrote: {np.unique(out)}"
