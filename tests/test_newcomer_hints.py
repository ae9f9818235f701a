"""The hints a newcomer met without help (issue 29, item 5): each message now says what to
write, in the user's own names (or names the kernel leaves free)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, thread, tile
from oxide.types import bf16


def compile_error(kernel: ox.Kernel, *types: object) -> ox.CompileError:
    with pytest.raises(ox.CompileError) as info:
        kernel.compile(*types, target="cpu")
    return info.value


# -- hints that named `i` whatever the kernel's `i` was --------------------------------------


def test_rebinding_a_plain_variable_suggests_a_name_the_kernel_does_not_use() -> None:
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        i = 0
        for _ in range(3):
            i = thread.index_1d()  # noqa: F841 - the error is the point

    err = compile_error(k, Slice[f32], DisjointSlice[f32])
    assert "`i` is a plain i32 variable" in err.message
    assert err.hint == "bind the ThreadIndex to a name of its own: `tid = thread.index_1d()`"


def test_a_write_at_a_loop_counter_does_not_reuse_the_counter_for_the_fix() -> None:
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        for i in range(4):
            out[i] = x[i]

    err = compile_error(k, Slice[f32], DisjointSlice[f32])
    assert err.hint.startswith("write `out[tid]` with `tid = thread.index_1d()`")
    assert "`i = " not in err.hint


def test_a_write_at_arithmetic_names_the_kernels_own_thread_index() -> None:
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        gid = thread.index_1d()
        if gid in out:
            out[gid + 1] = x[gid]

    err = compile_error(k, Slice[f32], DisjointSlice[f32])
    assert err.hint == "write `out[gid]`, or take responsibility with `with ox.unsafe():`"


def test_an_unguarded_write_is_guarded_with_the_index_the_user_wrote() -> None:
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        tid = thread.index_1d()
        out[tid] = x[tid]

    err = compile_error(k, Slice[f32], DisjointSlice[f32])
    assert "`if tid in out:`" in err.hint and "`if tid < len(out):`" in err.hint
    assert "`i " not in err.hint


def test_in_with_a_plain_integer_names_the_array_and_the_thread_index() -> None:
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        w = thread.index_1d()
        j = 3
        if j in out:
            out[w] = x[w]

    err = compile_error(k, Slice[f32], DisjointSlice[f32])
    assert err.hint == "write `if w in out:`"


def test_in_without_a_thread_index_suggests_a_free_name() -> None:
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        for i in range(3):
            if i in out:
                pass

    err = compile_error(k, Slice[f32], DisjointSlice[f32])
    assert err.hint == "write `if tid in out:` with `tid = thread.index_1d()`"


def test_reading_a_written_disjoint_slice_names_the_index_it_is_written_at() -> None:
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        t = thread.index_1d()
        if t in out:
            out[t] = x[t]
            if t > 0:
                out[t] = out[t - 1]

    err = compile_error(k, Slice[f32], DisjointSlice[f32])
    assert err.hint.startswith("read `out[t]`, at the ThreadIndex `t`")


def test_atomic_slice_hints_use_the_array_and_index_as_written() -> None:
    @ox.kernel
    def reads(acc: ox.AtomicSlice[f32], out: DisjointSlice[f32]):
        k = thread.index_1d()
        if k in out:
            out[k] = acc[k % 4]

    @ox.kernel
    def writes(acc: ox.AtomicSlice[f32], out: DisjointSlice[f32]):
        acc[0] = 1.0

    err = compile_error(reads, ox.AtomicSlice[f32], DisjointSlice[f32])
    assert err.hint == "read the current value with `ox.atomic.add(acc, k % 4, 0)`"
    err = compile_error(writes, ox.AtomicSlice[f32], DisjointSlice[f32])
    assert err.hint.startswith("use `ox.atomic.exch(acc, 0, value)`")


# -- numba's habits ---------------------------------------------------------------------------


def test_shared_array_in_numbas_argument_order_says_dtype_first() -> None:
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        s = ox.shared.array(256, f32)  # noqa: F841

    err = compile_error(k, Slice[f32], DisjointSlice[f32])
    assert err.message == "the first argument of ox.shared.array is the dtype"
    assert err.hint.startswith("the dtype comes first: `ox.shared.array(f32, 256)`")


@pytest.mark.parametrize(("rank", "hint"), [
    (1, "its length is `len(out)` (or `out.shape[0]`)"),
    (2, "its element count is `out.shape[0] * out.shape[1]`; `len(out)` is `out.shape[0]`"),
])
def test_size_of_an_array_suggests_len_and_shape(rank: int, hint: str) -> None:
    if rank == 1:
        @ox.kernel
        def k(x: Slice[f32], out: DisjointSlice[f32]):
            i = thread.index_1d()  # noqa: F841 - the error is the point
            if i < out.size:
                out[i] = x[i]
    else:
        @ox.kernel
        def k(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
            n = out.size  # noqa: F841

    err = compile_error(k, Slice[f32, rank], DisjointSlice[f32, rank])
    assert "not `.size`" in err.message
    assert err.hint == hint


def test_numba_style_launch_of_a_tile_kernel_says_tile_kernels_take_only_a_grid() -> None:
    @tile.kernel
    def tv(a: Slice[f32], out: DisjointSlice[f32], B: Const[int]):
        i = tile.bid(0)
        tile.store(out, (i,), tile.load(a, (i,), (B,)))

    a = np.ones(16, np.float32)
    with ox.device("cpu"), pytest.raises(ox.LaunchError) as info:
        tv[4, 128](a, np.zeros_like(a), 4)
    text = str(info.value)
    assert "`tv` is a tile kernel: `tv[4, 128]` is a grid of (4, 128) blocks" in text
    assert "not numba's `[blocks, threads]`" in text and "takes only its grid" in text
    assert "num_warps * 32 = 128 threads" in text


# -- messages that named no axis or no dtype --------------------------------------------------


def test_out_of_bounds_messages_word_every_axis_alike() -> None:
    @ox.kernel
    def rows(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
        ij = thread.index_2d()
        if ij in out:
            out[ij] = x[ij.row + 1, ij.col]

    @ox.kernel
    def cols(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
        ij = thread.index_2d()
        if ij in out:
            out[ij] = x[ij.row, ij.col + 1]

    @ox.kernel
    def flat(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[i + 1]

    a, b = np.ones((4, 4), np.float32), np.zeros((4, 4), np.float32)
    cfg = ox.LaunchConfig(grid=(1, 1), block=(4, 4))
    said = []
    with ox.device("cpu"):
        for kernel, args, config in ((rows, (a, b), cfg), (cols, (a, b), cfg),
                                     (flat, (a[0].copy(), b[0].copy()), (1, 4))):
            with pytest.raises(ox.KernelIndexError) as info:
                kernel[config](*args)
            said.append(str(info.value).splitlines()[0])
    assert said == [
        "index 4 is out of bounds for axis 0 of `x` (length 4) in kernel `rows`",
        "index 4 is out of bounds for axis 1 of `x` (length 4) in kernel `cols`",
        "index 4 is out of bounds for axis 0 of `x` (length 4) in kernel `flat`",
    ]


def test_missing_ml_dtypes_names_the_dtypes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # `import ml_dtypes` fails
    with pytest.raises(TypeError) as info:
        bf16.numpy  # noqa: B018 - the property is the import
    text = str(info.value)
    assert "oxide.bf16" in text and "ml_dtypes.bfloat16" in text
    assert "pip install ml-dtypes" in text
