"""Python the kernel language does not accept: forms, calls and statements a new user tries."""

# ruff: noqa: F841, F842, B007, B018, E731, F821, UP031, UP032 - the corpus is bad kernels on purpose

from __future__ import annotations

import oxide as ox
from oxide import DisjointSlice, Slice, f32, i32, i64, thread

from . import bad

KSE, UFE, KTE = ox.KernelSyntaxError, ox.UnsupportedFeatureError, ox.KernelTypeError


@bad(UFE, pattern=r"starred", accept_ok=True)
def starred_unpack_of_array_reads():
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        first, *rest = (x[0], x[1], x[2])  # <-
        if i in out:
            out[i] = first
    return k


@bad(UFE, KTE, pattern=r"@|matmul|matrix")
def matmul_operator_on_scalars():
    @ox.kernel
    def k(a: f32, b: f32, out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = a @ b  # <-
    return k


@bad(KSE, pattern=r"print\(\).*`sep` and `end`|file")
def print_to_file():
    @ox.kernel
    def k(a: f32):
        print(a, file=None)  # <-
    return k


@bad(UFE, pattern=r"string")
def percent_formatting_in_print():
    @ox.kernel
    def k(n: i32):
        print("n=%d" % n)  # <-
    return k


@bad(UFE, pattern=r"string|str\.format|method|attribute")
def str_format_in_print():
    @ox.kernel
    def k(n: i32):
        print("n={}".format(n))  # <-
    return k


@bad(UFE, KSE, pattern=r"loop variable must be a name")
def for_with_tuple_target():
    @ox.kernel
    def k(n: i32):
        for a, b in range(n):  # <-
            pass
    return k


@bad(UFE, pattern=r"try")
def try_finally():
    @ox.kernel
    def k(a: Slice[f32]):
        try:  # <-
            v = a[0]
        finally:
            pass
    return k


@bad(UFE, KTE, pattern=r"Ellipsis|\.\.\.")
def ellipsis_value():
    @ox.kernel
    def k(a: f32):
        x = ...  # <-
    return k


@bad(UFE, KTE, pattern=r"None")
def none_value():
    @ox.kernel
    def k(a: f32):
        x = None  # <-
    return k


@bad(UFE, pattern=r"bytes|string")
def bytes_literal():
    @ox.kernel
    def k(a: f32):
        x = b"abc"  # <-
    return k


@bad(KSE, pattern=r"no attribute `conjugate`")
def method_call_on_scalar():
    @ox.kernel
    def k(a: f32, out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = a.conjugate()  # <-
    return k


@bad(KSE, pattern=r"no attribute `fill`|`\.shape`")
def numpy_method_on_array():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        out.fill(0.0)  # <-
    return k


@bad(KSE, pattern=r"range\(\) takes 1 to 3 positional arguments")
def range_with_keyword():
    @ox.kernel
    def k(n: i32):
        for j in range(0, n, step=2):  # <-
            pass
    return k


@bad(KSE, KTE, pattern=r"index_1d|call|not a number|function")
def witness_function_not_called():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d  # <-
        if i in out:
            out[i] = 1.0
    return k


@bad(KSE, UFE, KTE, pattern=r"sync_threads.*call|call|no effect|statement")
def barrier_not_called():
    @ox.kernel
    def k(a: Slice[f32]):
        ox.sync_threads  # <-
    return k


@bad(UFE, pattern=r"`isinstance`.*not an @ox\.func|isinstance")
def isinstance_call():
    @ox.kernel
    def k(a: f32, out: DisjointSlice[f32]):
        i = thread.index_1d()
        if isinstance(a, float):  # <-
            if i in out:
                out[i] = a
    return k


@bad(UFE, pattern=r"`type`.*not an @ox\.func|type")
def type_call():
    @ox.kernel
    def k(a: f32):
        t = type(a)  # <-
    return k


@bad(KSE, pattern=r"`sep`|literal|string")
def print_sep_not_literal():
    @ox.kernel
    def k(a: f32, b: f32):
        s = a
        print(a, b, sep=s)  # <-
    return k


@bad(KSE, pattern=r"keyword|positional")
def math_with_keyword_argument():
    @ox.kernel
    def k(a: f32, out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = ox.math.sin(x=a)  # <-
    return k


@bad(KSE, pattern=r"no attribute `row`|ThreadIndex")
def row_of_1d_witness():
    @ox.kernel
    def k(out: DisjointSlice[f32, 2]):
        i = thread.index_1d()
        r = i.row  # <-
    return k


@bad(UFE, pattern=r"ox\.unsafe\(\)")
def unsafe_not_called():
    @ox.kernel
    def k(a: ox.RawSlice[f32]):
        with ox.unsafe:  # <-
            a[0] = 1.0
    return k


@bad(UFE, pattern=r"`with`|ox\.unsafe\(\)")
def with_two_contexts():
    @ox.kernel
    def k(a: ox.RawSlice[f32]):
        with ox.unsafe(), ox.unsafe():  # <-
            a[0] = 1.0
    return k


@bad(UFE, KTE, pattern=r"f-string|string literal")
def assert_with_f_string_message():
    @ox.kernel
    def k(a: f32):
        assert a > 0.0, f"a = {a}"  # <-
    return k


@bad(UFE, KSE, pattern=r"global|module|assign")
def augmented_assign_to_module_constant():
    @ox.kernel
    def k(a: f32):
        global COUNTER  # <-
        COUNTER += 1
    return k


@bad(KSE, pattern=r"`tid` is not defined")
def cuda_name_used():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = tid  # <-
    return k


@bad(KSE, pattern=r"no attribute `threadIdx`|thread_idx")
def cuda_register_spelling():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = ox.threadIdx.x  # <-
    return k


@bad(KSE, pattern=r"no attribute `syncthreads`|sync_threads")
def cuda_barrier_spelling():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        ox.syncthreads()  # <-
    return k


@bad(KSE, KTE, UFE, pattern=r"\*\*kwargs")
def func_called_with_star_star_kwargs():
    @ox.func
    def helper(a, b):
        return a + b

    @ox.kernel
    def k(a: f32, out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = helper(**{"a": a, "b": a})  # <-
    return k


@bad(KSE, KTE, pattern=r"assign|target|literal|constant")
def assign_to_literal_tuple_element():
    @ox.kernel
    def k(a: f32):
        t = (a, a)
        t[0] = 1.0  # <-
    return k


@bad(KSE, UFE, pattern=r"sep|end|keyword|flush")
def print_flush_keyword():
    @ox.kernel
    def k(a: i64):
        print(a, flush=True)  # <-
    return k
