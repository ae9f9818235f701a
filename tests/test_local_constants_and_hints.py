"""Issue 15, items 6, 13-16 and 19: local constants, and diagnostics that point the right way."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import oxide as ox
from oxide import AtomicSlice, DisjointSlice, Slice, f16, f32, i32, thread, u8


@pytest.fixture(autouse=True)
def on_cpu() -> Iterator[None]:
    with ox.device("cpu"):
        yield


def test_local_constants_size_local_and_shared_arrays() -> None:
    @ox.kernel
    def sized(x: Slice[i32], out: DisjointSlice[i32]):
        N = 100
        K = 4
        ones = ox.local.array(i32, N)
        grid = ox.local.array(f32, (K, K))
        i = thread.index_1d()
        for j in range(N):
            ones[j] = 1
        grid[K - 1, K - 1] = 2.0
        if i in out:
            s = 0
            for j in range(N):
                s += ones[j]
            out[i] = s + i32(grid[3, 3]) + x[i]

    x = np.arange(5, dtype=np.int32)
    out = np.zeros(5, np.int32)
    sized[1, 32](x, out)
    np.testing.assert_array_equal(out, x + 102)


def test_a_local_constant_stays_a_weak_literal() -> None:
    # CUDA's `tid & (VEC - 1)`: VEC takes the other operand's type, as the literal would
    @ox.kernel
    def lanes(x: Slice[u8], out: DisjointSlice[u8]):
        VEC = 32
        HALF = 0.5
        i = thread.index_1d()
        if i in out:
            out[i] = (x[i] & (VEC - 1)) + u8(f16(x[i]) * HALF)

    x = np.arange(0, 250, 7, dtype=np.uint8)
    out = np.zeros_like(x)
    lanes[1, 64](x, out)
    want = (x & 31) + (x.astype(np.float16) * np.float16(0.5)).astype(np.uint8)
    np.testing.assert_array_equal(out, want)
    ir = lanes.compile(Slice[u8], DisjointSlice[u8], target="cpu").ir
    assert "slot" not in ir  # no variable: VEC and HALF folded where they are used


def test_a_name_assigned_twice_is_a_typed_variable() -> None:
    @ox.kernel
    def counted(out: DisjointSlice[i32]):
        i = thread.index_1d()
        n = 7
        n += 1
        if i in out:
            out[i] = n

    ir = counted.compile(DisjointSlice[i32], target="cpu").ir
    assert "!oxide.slot<si32>" in ir


def test_unpacking_a_2d_thread_index_points_to_row_and_col() -> None:
    @ox.kernel
    def k(out: DisjointSlice[f32, 2]):
        r, c = thread.index_2d()

    with pytest.raises(ox.KernelTypeError, match="cannot unpack a 2-D ThreadIndex") as e:
        k.compile(DisjointSlice[f32, 2], target="cpu")
    assert ".row" in e.value.hint and ".col" in e.value.hint


def test_an_int_accumulator_fed_floats_suggests_a_float_start() -> None:
    @ox.kernel
    def k(img: Slice[f32, 2], out: DisjointSlice[f32]):
        i = thread.index_1d()
        acc = 0
        for r in range(3):
            acc += img[r, 0]
        if i in out:
            out[i] = acc

    with pytest.raises(ox.KernelTypeError, match="`acc` is i32") as e:
        k.compile(Slice[f32, 2], DisjointSlice[f32], target="cpu")
    assert "acc = f32(0)" in e.value.hint and "acc = 0.0" in e.value.hint


@pytest.mark.parametrize(("op", "want"), [("+=", "ox.atomic.add(out, 0, s)"),
                                          ("|=", "ox.atomic.or_(out, 0, s)"),
                                          ("*=", "ox.atomic.cas(out, 0, old, new)")])
def test_augmented_assignment_to_an_atomic_slice_names_the_atomic(op: str, want: str,
                                                                  tmp_path) -> None:
    src = tmp_path / "aug.py"
    src.write_text(
        "import oxide as ox\nfrom oxide import AtomicSlice, Slice, i32, thread\n\n"
        "@ox.kernel\ndef k(x: Slice[i32], out: AtomicSlice[i32]):\n"
        "    s = x[0]\n"
        f"    out[0] {op} s\n")
    ns: dict = {}
    exec(compile(src.read_text(), str(src), "exec"), ns)
    with pytest.raises(ox.SafetyError, match="AtomicSlice") as e:
        ns["k"].compile(Slice[i32], AtomicSlice[i32], target="cpu")
    assert want in e.value.hint


def test_an_unsupported_element_type_is_a_kernel_type_error_at_the_annotation() -> None:
    with pytest.raises(ox.KernelTypeError, match="`str` is not a dtype") as e:
        @ox.kernel
        def k(x: Slice[str], out: DisjointSlice[f32]):  # type: ignore[valid-type]
            pass
    assert e.value.span is not None and "Slice[str]" in e.value.span.text
    with pytest.raises(ox.KernelTypeError, match="rank must be 0 to 4"):
        Slice[f32, 5]


def test_bounds_guards_see_through_a_local_alias_of_the_length() -> None:
    # issue 15 item 3: `n = len(out)` (or `out.shape[0]`) then `if i < n:` guards the write
    @ox.kernel
    def copy(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        n = len(out)
        m = x.shape[0]
        if i < n:
            if i < m:
                out[i] = x[i] * 2.0

    x = np.arange(10, dtype=np.float32)
    out = np.zeros(7, np.float32)
    copy[1, 32](x, out)
    np.testing.assert_array_equal(out, x[:7] * 2)


def test_a_guard_on_a_variable_length_is_still_refused() -> None:
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        n = len(out)
        n += 1  # a variable now: no longer the length
        if i < n:
            out[i] = x[i]

    with pytest.raises(ox.SafetyError, match="not bounds-guarded"):
        k.compile(Slice[f32], DisjointSlice[f32], target="cpu")


def test_a_tuple_indexed_by_a_constant_range_variable_unrolls() -> None:
    # issue 15 item 4: weights in a tuple, read with the loop variable
    W = (0.25, 0.5, 0.25)

    @ox.kernel
    def blur(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        taps = (1.0, 2.0, 3.0, 4.0)
        if i in out:
            s = f32(0.0)
            for j in range(3):
                if i + j < len(x):
                    s += x[i + j] * W[j]
            t = f32(0.0)
            for j in range(4):  # continue and break in unrolled copies
                if j == 1:
                    continue
                if taps[j] > 3.5:
                    break
                t += taps[j]
            out[i] = s + t * 100.0 + f32(j) * 10000.0  # j keeps its last value, as in Python

    x = np.arange(8, dtype=np.float32)
    out = np.zeros(6, np.float32)
    blur[1, 32](x, out)
    want = np.array([sum(x[i + j] * W[j] for j in range(3)) for i in range(6)], np.float32)
    np.testing.assert_array_equal(out, want + 400.0 + 30000.0)
    assert blur.compile(Slice[f32], DisjointSlice[f32], arch="sm_90").cubin


def test_a_shape_indexed_by_a_loop_variable_and_a_runtime_index_still_refused() -> None:
    @ox.kernel
    def dims(a: Slice[f32, 3], out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i in out:
            n = 1
            for d in range(3):
                n *= i32(a.shape[d])
            out[i] = n

    out = np.zeros(2, np.int32)
    dims[1, 32](np.zeros((2, 3, 4), np.float32), out)
    assert out.tolist() == [24, 24]

    @ox.kernel
    def bad(x: Slice[i32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        w = (1.0, 2.0)
        if i in out:
            out[i] = w[x[i]]

    with pytest.raises(ox.KernelTypeError, match="constant integers") as e:
        bad.compile(Slice[i32], DisjointSlice[f32], target="cpu")
    assert "range" in e.value.hint


def test_a_shift_without_a_common_type_takes_the_values_type() -> None:
    from oxide import u32

    @ox.kernel
    def masks(m: Slice[u32], n: Slice[i32], out: DisjointSlice[u32]):
        i = thread.index_1d()
        if i in out:
            out[i] = (m[i] << n[i]) | (u32(1) << ox.lane_id())

    m = np.array([1, 3, 0xFFFFFFFF], np.uint32)
    n = np.array([4, 31, -1], np.int32)  # -1 reads as unsigned: shifts everything out
    out = np.zeros(3, np.uint32)
    masks[1, 32](m, n, out)
    assert out.tolist() == [0x11, 0x80000002, 0x4]


def test_a_64_bit_literal_next_to_a_narrow_operand_suggests_the_wide_type() -> None:
    @ox.kernel
    def k(x: Slice[i32], out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i in out:
            out[i] = i32(x[i] & 0xDF900294D8F554A5)

    with pytest.raises(ox.KernelTypeError, match="does not fit in i32") as e:
        k.compile(Slice[i32], DisjointSlice[i32], target="cpu")
    assert "u64(" in e.value.hint


def test_numba_names_point_to_their_oxide_spelling() -> None:
    @ox.kernel
    def k(out: DisjointSlice[f32, 2]):
        x, y = ox.grid(2)

    with pytest.raises(ox.KernelSyntaxError) as e:
        k.compile(DisjointSlice[f32, 2], target="cpu")
    assert "thread.index_2d()" in e.value.hint


def test_an_unguarded_2d_write_suggests_the_thread_index_guard() -> None:
    @ox.kernel
    def k(src: Slice[f32, 2], dst: DisjointSlice[f32, 2]):
        ij = thread.index_2d()
        n, m = src.shape
        if ij.row >= n or ij.col >= m:
            return
        dst[ij] = src[ij.row, ij.col]

    with pytest.raises(ox.SafetyError, match="not bounds-guarded") as e:
        k.compile(Slice[f32, 2], DisjointSlice[f32, 2], target="cpu")
    assert "if ij not in dst: return" in e.value.hint


@ox.kernel
def ping_pong(a: Slice[f32], b: Slice[f32], out: DisjointSlice[f32], step: i32):
    i = thread.index_1d()
    src = a if step % 2 == 0 else b  # issue 15 item 2: ping-pong buffers
    if i in out and i + 1 < len(src):
        out[i] = src[i] + src[i + 1]


def test_an_array_name_chooses_between_two_parameters() -> None:
    a = np.arange(6, dtype=np.float32)
    b = 10 * np.arange(6, dtype=np.float32)
    for step, src in ((0, a), (1, b), (2, a)):
        out = np.zeros(5, np.float32)
        ping_pong[1, 32](a, b, out, step)
        np.testing.assert_array_equal(out, src[:5] + src[1:])
    assert ping_pong.compile(Slice[f32], Slice[f32], DisjointSlice[f32], i32, arch="sm_90").cubin


def test_a_write_through_a_choice_makes_both_arrays_written() -> None:
    # dst may be `a`: reading a's neighbour while some thread writes it through dst races
    @ox.kernel
    def racy(a: DisjointSlice[f32], b: DisjointSlice[f32], step: i32):
        i = thread.index_1d()
        dst = a if step > 0 else b
        if i in dst:
            dst[i] = 1.0
        if i in a and i + 1 < len(a):
            a[i] = a[i + 1]

    with pytest.raises(ox.SafetyError, match="DisjointSlice this kernel writes"):
        racy.compile(DisjointSlice[f32], DisjointSlice[f32], i32, target="cpu")


@ox.kernel
def swap_step(a: DisjointSlice[f32], b: DisjointSlice[f32], step: i32):
    """The Jacobi swap: `src` and `dst` chosen by one computation of the step, arms
    swapped, so the neighbours read are in the array this launch does not write."""
    i = thread.index_1d()
    src = a if step % 2 == 0 else b
    dst = b if step % 2 == 0 else a
    if i in dst and i + 1 < len(src):
        dst[i] = src[i] + src[i + 1]


def test_a_swapped_choice_on_a_uniform_condition_reads_the_other_array() -> None:
    a = np.arange(6, dtype=np.float32)
    b = 10 * np.arange(6, dtype=np.float32)
    for step in (0, 1):
        x, y = a.copy(), b.copy()
        swap_step[1, 32](x, y, step)
        src, dst = (a, y) if step == 0 else (b, x)
        np.testing.assert_array_equal(dst[:5], src[:5] + src[1:])


@pytest.mark.parametrize("shape", ["same arms", "thread condition", "two conditions",
                                   "direct write"])
def test_a_choice_that_can_meet_the_written_array_is_refused(shape: str) -> None:
    """Refused where the read may be of the written array: the arms not swapped, a
    condition that differs between threads, conditions of different computations, a
    write to the parameter itself."""
    def same(a: DisjointSlice[f32], b: DisjointSlice[f32], step: i32):
        i = thread.index_1d()
        src = a if step % 2 == 0 else b
        dst = a if step % 2 == 0 else b
        if i in dst and i + 1 < len(src):
            dst[i] = src[i + 1]

    def thread_cond(a: DisjointSlice[f32], b: DisjointSlice[f32], step: i32):
        i = thread.index_1d()
        src = a if (i + step) % 2 == 0 else b
        dst = b if (i + step) % 2 == 0 else a
        if i in dst and i + 1 < len(src):
            dst[i] = src[i + 1]

    def two_conds(a: DisjointSlice[f32], b: DisjointSlice[f32], step: i32, other: i32):
        i = thread.index_1d()
        src = a if step % 2 == 0 else b
        dst = b if other % 2 == 0 else a
        if i in dst and i + 1 < len(src):
            dst[i] = src[i + 1]

    def direct(a: DisjointSlice[f32], b: DisjointSlice[f32], step: i32):
        i = thread.index_1d()
        src = a if step % 2 == 0 else b
        if i in b and i + 1 < len(src):
            b[i] = src[i + 1]
        if i in a:
            a[i] = 0.0

    fn = {"same arms": same, "thread condition": thread_cond, "two conditions": two_conds,
          "direct write": direct}[shape]
    sig = (DisjointSlice[f32], DisjointSlice[f32], i32) + ((i32,) if fn is two_conds else ())
    with pytest.raises(ox.SafetyError, match="DisjointSlice this kernel writes"):
        ox.kernel(fn).compile(*sig, target="cpu")


def test_a_choice_between_arrays_of_different_types_is_refused() -> None:
    @ox.kernel
    def mixed(a: Slice[f32], b: Slice[f32, 2], out: DisjointSlice[f32], step: i32):
        i = thread.index_1d()
        src = a if step > 0 else b  # noqa: F841 - the choice itself is refused
        if i in out:
            out[i] = 0.0

    with pytest.raises(ox.KernelTypeError, match="arrays of one type"):
        mixed.compile(Slice[f32], Slice[f32, 2], DisjointSlice[f32], i32, target="cpu")
