"""Array names rebound in the body (issue 15 item 2): `if c: src = a` / `else: src = b`,
`src = a` then `if c: src = b`, and the ping-pong swap `src, dst = dst, src` in a loop.

Such a name is a slot saying which of its candidate arrays it holds; each read selects
through `oxide.array_select`, so every safety rule sees every array it may be.
"""

from __future__ import annotations

import numpy as np
import pytest
from ports import laplace as lp

import oxide as ox
from oxide import DisjointSlice, RawSlice, Slice, f32, i32, thread


@pytest.fixture
def cpu():
    with ox.device("cpu"):
        yield


@ox.func
def relax_point(src, dst, i, j):
    """One Jacobi point from `src` into `dst` (RawSlices: the caller vouches)."""
    n, m = src.shape
    if i < n and j < m:
        with ox.unsafe():
            if i == 0 or j == 0 or i == n - 1 or j == m - 1:
                dst[i, j] = src[i, j]
            else:
                dst[i, j] = 0.25 * (src[i - 1, j] + src[i + 1, j] + src[i, j - 1]
                                    + src[i, j + 1])


@ox.kernel
def laplace_swap_locals(a: RawSlice[f32, 2], b: RawSlice[f32, 2], steps: i32):
    """All steps in one block: the names swap in the loop, a block barrier between steps."""
    ij = thread.index_2d()
    src = a
    dst = b
    for _ in range(steps):
        relax_point(src, dst, ij.row, ij.col)
        ox.sync_threads()
        src, dst = dst, src


@ox.kernel
def laplace_swap_params(a: RawSlice[f32, 2], b: RawSlice[f32, 2], steps: i32):
    """The parameters themselves swap: reads before the swap select too."""
    ij = thread.index_2d()
    for _ in range(steps):
        relax_point(a, b, ij.row, ij.col)
        ox.sync_threads()
        a, b = b, a


@ox.kernel
def laplace_while_break(a: RawSlice[f32, 2], b: RawSlice[f32, 2], steps: i32):
    """A `while` with a `break` and a `continue` around the swap."""
    ij = thread.index_2d()
    src, dst = a, b
    t = 0
    while True:
        if t >= steps:
            break
        relax_point(src, dst, ij.row, ij.col)
        ox.sync_threads()
        src, dst = dst, src
        t += 1
        if t % 2 == 1:
            continue
        ox.sync_threads()


@ox.func
def relax_steps(src, dst, ij, steps):
    """An @ox.func that swaps the arrays it received."""
    for _ in range(steps):
        relax_point(src, dst, ij.row, ij.col)
        ox.sync_threads()
        src, dst = dst, src


@ox.kernel
def laplace_func_swap(a: RawSlice[f32, 2], b: RawSlice[f32, 2], steps: i32):
    relax_steps(a, b, thread.index_2d(), steps)


def _solve(kernel: ox.Kernel, a0: np.ndarray, steps: int) -> np.ndarray:
    rows, cols = a0.shape
    a, b = a0.copy(), a0.copy()
    kernel[(1, 1), (cols, rows)](a, b, steps)
    return a if steps % 2 == 0 else b


@pytest.mark.parametrize("kernel", [laplace_swap_locals, laplace_swap_params,
                                    laplace_while_break, laplace_func_swap])
@pytest.mark.parametrize("shape,steps", [((3, 3), 1), ((12, 20), 7), ((20, 30), 24)])
def test_laplace_swapping_in_the_kernel_loop_matches_numpy(cpu, kernel, shape, steps) -> None:
    a0 = lp.initial_grid(*shape)
    np.testing.assert_array_equal(_solve(kernel, a0, steps), lp.reference(a0, steps))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_swap_assembles_for_the_gpu(arch: str) -> None:
    ck = laplace_swap_locals.compile(RawSlice[f32, 2], RawSlice[f32, 2], i32, arch=arch)
    assert "bar.sync" in ck.ptx or "barrier.sync" in ck.ptx
    assert "selp.b64" in ck.ptx  # the pointer chosen per step
    assert ck.cubin[:4] == b"\x7fELF"


# --- statement forms over Slices: src = a / else src = b; src = a then if c: src = b ------

@ox.kernel
def pick_if_else(a: Slice[f32], b: Slice[f32], out: DisjointSlice[f32], c: i32):
    i = thread.index_1d()
    if c > 0:
        src = a
    else:
        src = b
    if i in out:
        out[i] = src[i] + src[len(src) - 1 - i]


@ox.kernel
def pick_then_override(a: Slice[f32], b: Slice[f32], out: DisjointSlice[f32], c: i32):
    i = thread.index_1d()
    src = a
    if c == int(i % 3):
        src = b
    if i in out:
        out[i] = src[i]


def test_if_else_statement_chooses_per_launch(cpu) -> None:
    a = np.arange(50, dtype=np.float32)
    b = np.arange(50, dtype=np.float32) * -3
    for c, src in ((1, a), (0, b)):
        out = np.zeros(50, np.float32)
        pick_if_else[1, 64](a, b, out, c)
        np.testing.assert_array_equal(out, src + src[::-1])


def test_override_in_an_if_chooses_per_thread(cpu) -> None:
    a = np.arange(50, dtype=np.float32)
    b = -a - 1
    out = np.zeros(50, np.float32)
    pick_then_override[1, 64](a, b, out, 2)
    np.testing.assert_array_equal(out, np.where(np.arange(50) % 3 == 2, b, a))


@ox.kernel
def write_through_choice(a: DisjointSlice[f32], b: DisjointSlice[f32], c: i32):
    """The bounds guard and the write see one array: the guard proves the write."""
    i = thread.index_1d()
    dst = a
    if c > 0:
        dst = b
    if i in dst:
        dst[i] = f32(i)


def test_guarded_write_through_a_rebound_name(cpu) -> None:
    for c in (0, 1):
        a, b = np.zeros(40, np.float32), np.zeros(30, np.float32)
        write_through_choice[1, 64](a, b, c)
        np.testing.assert_array_equal(b if c else a, np.arange(30 if c else 40,
                                                                dtype=np.float32))
        assert not (a if c else b).any()


def test_aliasing_is_still_checked_at_launch(cpu) -> None:
    a = np.zeros(40, np.float32)
    with pytest.raises(ox.AliasingError):
        write_through_choice[1, 64](a, a, 1)


# --- the safety rules see every array a name may be ---------------------------------------

def test_a_write_through_the_name_counts_in_each_array_it_may_be() -> None:
    @ox.kernel
    def reads_other(a: DisjointSlice[f32], b: DisjointSlice[f32], c: i32):
        i = thread.index_1d()
        dst = a
        if c > 0:
            dst = b
        if i in dst:
            dst[i] = 1.0
        if i + 1 < len(b):
            x = b[i + 1]  # noqa: F841 -- b may be the array written above
    with pytest.raises(ox.SafetyError, match="`b` is a DisjointSlice this kernel writes"):
        reads_other.compile(DisjointSlice[f32], DisjointSlice[f32], i32, arch="cpu")


def test_an_unguarded_write_through_the_name_is_refused() -> None:
    @ox.kernel
    def unguarded(a: DisjointSlice[f32], b: DisjointSlice[f32], c: i32):
        i = thread.index_1d()
        if c > 0:
            dst = a
        else:
            dst = b
        dst[i] = 1.0
    with pytest.raises(ox.SafetyError, match="not bounds-guarded"):
        unguarded.compile(DisjointSlice[f32], DisjointSlice[f32], i32, arch="cpu")


def test_the_ping_pong_on_disjoint_slices_is_still_refused() -> None:
    # neighbour reads of an array another thread may be writing: the rule holds
    @ox.kernel
    def pingpong(a: DisjointSlice[f32], b: DisjointSlice[f32], steps: i32):
        i = thread.index_1d()
        src, dst = a, b
        for _ in range(steps):
            if i in dst and i + 1 < len(src):
                dst[i] = src[i + 1]
            src, dst = dst, src
    with pytest.raises(ox.SafetyError, match="is a DisjointSlice this kernel writes"):
        pingpong.compile(DisjointSlice[f32], DisjointSlice[f32], i32, arch="cpu")


def test_a_constant_branch_keeps_the_name_one_array(cpu) -> None:
    # Const parity: only one arm is compiled, so `src` is read-only `b` (was the workaround)
    a0 = lp.initial_grid(20, 30)
    got = lp.solve_in_kernel(lp.jacobi_step_parity, a0, 5, parity=True)
    np.testing.assert_array_equal(got, lp.reference(a0, 5))
    ir = lp.jacobi_step_parity.compile(DisjointSlice[f32, 2], DisjointSlice[f32, 2], 1,
                                       arch="cpu").ir
    assert "array_select" not in ir


# --- diagnostics ---------------------------------------------------------------------------

@pytest.mark.parametrize("other,word", [(Slice[i32, 2], "i32"), (Slice[f32, 1], "Slice[f32]"),
                                        (DisjointSlice[f32, 2], "DisjointSlice")])
def test_rebinding_to_another_type_is_an_error(other, word) -> None:
    @ox.kernel
    def mixed(a: Slice[f32, 2], c: other, out: DisjointSlice[f32], k: i32):
        src = a
        if k > 0:
            src = c
        i = thread.index_1d()
        if i in out:
            out[i] = f32(len(src))
    with pytest.raises(ox.KernelTypeError, match="cannot be rebound to") as info:
        mixed.compile(Slice[f32, 2], other, DisjointSlice[f32], i32, arch="cpu")
    assert word in str(info.value)
    assert "arrays of one type" in str(info.value)


def test_rebinding_a_shared_array_is_an_error() -> None:
    @ox.kernel
    def shared_swap(out: DisjointSlice[f32]):
        s = ox.shared.array(f32, 32)
        t = ox.shared.array(f32, 32)
        s, t = t, s
        i = thread.index_1d()
        if i in out:
            out[i] = s[0]
    with pytest.raises(ox.KernelTypeError, match="cannot be rebound") as info:
        shared_swap.compile(DisjointSlice[f32], arch="cpu")
    assert "bound once" in str(info.value)


def test_rebinding_an_array_name_to_a_number_is_an_error() -> None:
    @ox.kernel
    def to_number(a: Slice[f32], out: DisjointSlice[f32], k: i32):
        src = a
        if k > 0:
            src = 1.0
        i = thread.index_1d()
        if i in out:
            out[i] = src[i]
    with pytest.raises(ox.KernelTypeError, match="cannot be rebound to a float literal"):
        to_number.compile(Slice[f32], DisjointSlice[f32], i32, arch="cpu")


def test_a_per_thread_choice_makes_reads_through_it_thread_dependent() -> None:
    # `src` differs between threads, so a value read through it does too: a barrier under
    # a condition on it is refused, as under any per-thread value
    @ox.kernel
    def per_thread(a: Slice[i32], b: Slice[i32], out: DisjointSlice[i32]):
        src = a
        if ox.thread_idx.x < 5:
            src = b
        if src[0] > 0:
            ox.sync_threads()
        i = thread.index_1d()
        if i in out:
            out[i] = src[0]
    with pytest.raises(ox.SafetyError, match="sync_threads"):
        per_thread.compile(Slice[i32], Slice[i32], DisjointSlice[i32], arch="cpu")

    @ox.kernel
    def per_launch(a: Slice[i32], b: Slice[i32], out: DisjointSlice[i32], c: i32):
        src = a
        if c < 5:
            src = b
        if src[0] > 0:
            ox.sync_threads()
        i = thread.index_1d()
        if i in out:
            out[i] = src[0]
    per_launch.compile(Slice[i32], Slice[i32], DisjointSlice[i32], i32, arch="cpu")


W3 = (1.0, 2.0, 3.0)


@ox.kernel
def unrolled_swaps(a: RawSlice[f32], b: RawSlice[f32], skip: i32):
    """A loop the frontend unrolls (a tuple indexed by its variable), with a `continue`
    between a swap and the next copy: each copy must see the swapped names."""
    i = ox.thread_idx.x
    src, dst = a, b
    for k in range(3):
        with ox.unsafe():
            if i < len(dst):
                dst[i] = src[i] * W3[k]
        src, dst = dst, src
        if k == skip:
            continue
        with ox.unsafe():
            if i < len(dst):
                dst[i] = dst[i] + 1.0


def _unrolled_reference(a0: np.ndarray, skip: int) -> tuple[np.ndarray, np.ndarray]:
    bufs = [a0.copy(), np.zeros_like(a0)]
    s, d = 0, 1
    for k in range(3):
        bufs[d] = bufs[s] * np.float32(W3[k])
        s, d = d, s
        if k == skip:
            continue
        bufs[d] = bufs[d] + np.float32(1.0)
    return bufs[0], bufs[1]


@pytest.mark.parametrize("skip", [-1, 0, 1, 2])
def test_swaps_in_an_unrolled_loop_with_continue(cpu, skip) -> None:
    a0 = np.arange(1, 33, dtype=np.float32)
    a, b = a0.copy(), np.zeros_like(a0)
    unrolled_swaps[1, 32](a, b, skip)
    want_a, want_b = _unrolled_reference(a0, skip)
    np.testing.assert_array_equal(a, want_a)
    np.testing.assert_array_equal(b, want_b)
