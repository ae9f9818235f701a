"""Issue 14's safety holes: witness uniqueness over the launch, DisjointSlice reads at
another thread's index, barriers under thread-dependent control flow, variables that
may be unassigned, functions named without a call, @ox.func annotation typos, and
full-warp collectives under lane-dependent control flow. Each test fails without its fix."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from fake_cuda import FakeDriver, use_launch_flavor

import oxide as ox
from oxide import DisjointSlice, Slice, f32, i32, thread, u32

# ---------------------------------------------------------------------------
# 1. A witness must be unique over the whole launch


@ox.kernel
def bump_1d(out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = out[i] + 1.0


@ox.kernel
def bump_2d(out: DisjointSlice[f32, 2]):
    ij = thread.index_2d()
    if ij in out:
        out[ij] = out[ij] + 1.0


@ox.kernel
def no_witness(x: Slice[f32], out: ox.RawSlice[f32]):
    t = ox.thread_idx.x + ox.block_dim.x * ox.thread_idx.y
    if t < len(out):
        with ox.unsafe():
            out[t] = x[t]


def test_index_1d_refuses_a_launch_with_y_dimensions_on_the_cpu() -> None:
    out = np.zeros(32, np.float32)
    with ox.device("cpu"):
        with pytest.raises(ox.LaunchError, match=r"thread\.index_1d\(\).*block\.y = 4"):
            bump_1d[1, (8, 4)](out)
        with pytest.raises(ox.LaunchError, match=r"grid\.y = 2"):
            bump_1d[(4, 2), 8](out)
        with pytest.raises(ox.LaunchError, match=r"grid\.z = 3"):
            bump_1d[(4, 1, 3), 8](out)
        assert not out.any()  # refused before anything ran
        bump_1d[4, 8](out)
    assert np.array_equal(out, np.ones(32, np.float32))  # each element exactly once


def test_index_2d_refuses_a_launch_with_z_dimensions_on_the_cpu() -> None:
    out = np.zeros((8, 8), np.float32)
    with ox.device("cpu"):
        with pytest.raises(ox.LaunchError, match=r"thread\.index_2d\(\).*block\.z = 2"):
            bump_2d[(1, 1), (8, 8, 2)](out)
        with pytest.raises(ox.LaunchError, match=r"grid\.z = 2"):
            bump_2d[(1, 1, 2), (8, 8)](out)
        assert not out.any()
        bump_2d[(2, 2), (4, 4)](out)
    assert np.array_equal(out, np.ones((8, 8), np.float32))


def test_a_kernel_without_witnesses_takes_any_launch_shape() -> None:
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    with ox.device("cpu"):
        no_witness[1, (8, 4)](x, out)
    assert np.array_equal(out, x)


def test_compiled_kernel_records_its_witness_ranks() -> None:
    assert bump_1d.compile(DisjointSlice[f32], target="cpu").thread_index_ranks == (1,)
    assert bump_2d.compile(DisjointSlice[f32, 2], target="cpu").thread_index_ranks == (2,)
    assert no_witness.compile(Slice[f32], ox.RawSlice[f32],
                              target="cpu").thread_index_ranks == ()


@pytest.fixture(params=["native", "ctypes"])
def fake(request, monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[FakeDriver]:
    """The fake driver (tests/fake_cuda.py): the GPU launch path without a GPU."""
    driver = FakeDriver()
    driver.install(monkeypatch)
    use_launch_flavor(monkeypatch, request.param)
    monkeypatch.setenv("OXIDE_CACHE_DIR", str(tmp_path / "cache"))
    for k in (bump_1d, bump_2d):
        k.__dict__.pop("_oxide_launchers", None)
    with ox.device(0):
        yield driver


def test_gpu_launch_refuses_a_config_that_repeats_witnesses(fake: FakeDriver) -> None:
    out = ox.zeros(32)
    fake.formats = "Qq"
    bad = ox.LaunchConfig(grid=1, block=(8, 4))
    for _ in range(2):  # the binder of a refused config checks it again
        with pytest.raises(ox.LaunchError, match=r"thread\.index_1d\(\).*block\.y = 4"):
            bump_1d[bad](out)
    with pytest.raises(ox.LaunchError, match=r"grid\.y = 2"):
        bump_1d[(4, 2), 8](out)
    assert fake.launches == []
    good = ox.LaunchConfig(grid=4, block=8)
    bump_1d[good](out)
    bump_1d[good](out)  # the fast path's binder
    with pytest.raises(ox.LaunchError, match=r"block\.y = 4"):
        bump_1d[bad](out)  # after a good launch, through the binder
    assert len(fake.launches) == 2


def test_gpu_launch_checks_index_2d_configs(fake: FakeDriver) -> None:
    out = ox.zeros((8, 8))
    fake.formats = "Qqq"
    with pytest.raises(ox.LaunchError, match=r"thread\.index_2d\(\).*block\.z = 2"):
        bump_2d[(1, 1), (8, 8, 2)](out)
    assert fake.launches == []
    bump_2d[(2, 2), (4, 4)](out)
    assert len(fake.launches) == 1


def test_disk_cache_keeps_the_witness_ranks(fake: FakeDriver, tmp_path) -> None:
    from oxide.runtime import cache
    from oxide.runtime.gpu import KernelImage

    ck = bump_1d.compile(DisjointSlice[f32], arch="sm_90")
    image = KernelImage.from_compiled(ck)
    key = "0" * 64
    cache.store(key, image, ck)
    loaded = cache.load(key, image.arg_sizes)
    assert loaded is not None and loaded.thread_index_ranks == (1,)


# ---------------------------------------------------------------------------
# 2. A written DisjointSlice is read only at this thread's ThreadIndex


def _compile_error(kernel, *sig) -> ox.CompileError:
    with pytest.raises(ox.CompileError) as info:
        kernel.compile(*sig, target="cpu")
    return info.value


def test_disjoint_read_at_another_threads_index_is_rejected() -> None:
    @ox.kernel
    def shift(out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            if i + 1 < len(out):
                out[i] = out[i + 1] + 1.0

    err = _compile_error(shift, DisjointSlice[f32])
    assert isinstance(err, ox.SafetyError)
    assert "DisjointSlice this kernel writes" in err.message
    assert err.span is not None and err.span.text.strip() == "out[i] = out[i + 1] + 1.0"
    assert err.span.text[err.span.col:err.span.end_col] == "out[i + 1]"
    assert "separate Slice" in err.hint


def test_disjoint_read_at_a_constant_index_is_rejected_even_before_the_write() -> None:
    @ox.kernel
    def first(out: DisjointSlice[f32]):
        i = thread.index_1d()
        v = out[0]
        if i in out:
            out[i] = v

    err = _compile_error(first, DisjointSlice[f32])
    assert isinstance(err, ox.SafetyError)
    assert err.span.text[err.span.col:err.span.end_col] == "out[0]"


def test_disjoint_read_at_the_witness_and_unwritten_disjoint_reads_are_fine() -> None:
    @ox.kernel
    def own(src: DisjointSlice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = out[i] * 2.0 + src[len(src) - 1 - i]  # src is never written: read-only

    a = np.arange(8, dtype=np.float32)
    b = np.ones(8, np.float32)
    with ox.device("cpu"):
        own[1, 8](a, b)
    assert np.array_equal(b, 2.0 + a[::-1])


def test_disjoint_read_inside_unsafe_is_the_users_responsibility() -> None:
    @ox.kernel
    def shifted(out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            with ox.unsafe():
                v = out[len(out) - 1]
            out[i] = v

    shifted.compile(DisjointSlice[f32], target="cpu")


# ---------------------------------------------------------------------------
# 5. A local is read only where every path has assigned it


def _syntax_error(kernel, *sig) -> ox.KernelSyntaxError:
    err = _compile_error(kernel, *sig)
    assert isinstance(err, ox.KernelSyntaxError), err
    return err


def test_variable_assigned_in_one_branch_is_rejected() -> None:
    @ox.kernel
    def half(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            if x[i] > 0.0:
                y = x[i]
            out[i] = y

    err = _syntax_error(half, Slice[f32], DisjointSlice[f32])
    assert err.message == "`y` may be read before it is assigned"
    assert err.span.text.strip() == "out[i] = y"
    assert err.span.text[err.span.col:err.span.end_col] == "y"


def test_a_tuple_item_assigned_in_one_branch_is_rejected() -> None:
    # `t[0]` reads one slot of the tuple (frontend/subscripts.py), still only where every
    # path assigned `t`
    @ox.kernel
    def half(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            if x[i] > 0.0:
                t = (x[i], 2.0 * x[i])
            out[i] = t[0]

    err = _syntax_error(half, Slice[f32], DisjointSlice[f32])
    assert err.message == "`t` may be read before it is assigned"


def test_loop_variable_after_a_run_time_range_is_rejected() -> None:
    @ox.kernel
    def last(n: i32, out: DisjointSlice[i32]):
        i = thread.index_1d()
        for k in range(n):  # noqa: B007
            pass
        if i in out:
            out[i] = k

    err = _syntax_error(last, i32, DisjointSlice[i32])
    assert "`k` may be read before it is assigned" in err.message
    assert "may run zero times" in err.hint


def test_variable_set_only_in_a_while_body_is_rejected() -> None:
    @ox.kernel
    def w(n: i32, out: DisjointSlice[i32]):
        i = thread.index_1d()
        j = 0
        while j < n:
            v = j
            j += 1
        if i in out:
            out[i] = v

    _syntax_error(w, i32, DisjointSlice[i32])


def test_read_before_the_first_assignment_in_a_loop_is_rejected() -> None:
    @ox.kernel
    def carried(n: i32, out: DisjointSlice[i32]):
        i = thread.index_1d()
        acc = 0
        for k in range(n):
            if k > 0:
                acc += prev  # noqa: F821
            prev = k  # noqa: F841
        if i in out:
            out[i] = acc

    err = _syntax_error(carried, i32, DisjointSlice[i32])
    assert err.span.text.strip().startswith("acc += prev")


def test_early_exits_do_not_count_as_assignments() -> None:
    @ox.kernel
    def brk(n: i32, out: DisjointSlice[i32]):
        i = thread.index_1d()
        for k in range(4):
            if k == n:
                break
            v = k
        if i in out:
            out[i] = v  # a break before the first `v = k` leaves it unassigned

    _syntax_error(brk, i32, DisjointSlice[i32])


def test_definitely_assigned_variables_compile_and_run() -> None:
    @ox.kernel
    def fine(x: Slice[f32], n: i32, out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i not in out:
            return
        if x[i] > 2.0:  # both arms assign
            y = x[i]
        elif x[i] > 1.0:
            y = x[i] * 2.0
        else:
            y = f32(0)
        for k in range(3):  # a constant range of at least one iteration
            z = f32(k)
        while True:  # leaves only through the break, after assigning w
            w = y + z
            break
        for _ in range(n):
            if n > 100:
                return  # a path that returns assigns nothing after it
        if n > 5:
            u = 1.0
        else:
            return
        out[i] = w + u

    x = np.array([0.5, 1.5, 3.0, 0.0], np.float32)
    out = np.zeros(4, np.float32)
    with ox.device("cpu"):
        fine[1, 4](x, 10, out)
    assert np.array_equal(out, np.array([0, 3, 3, 0], np.float32) + 2.0 + 1.0)


# ---------------------------------------------------------------------------
# 4. Block barriers are reached by every thread of the block


def _barrier_error(kernel, *sig) -> ox.SafetyError:
    err = _compile_error(kernel, *sig)
    assert isinstance(err, ox.SafetyError), err
    assert "waits for every thread of the block" in err.message
    return err


def _caret(err: ox.CompileError) -> str:
    return err.span.text[err.span.col:err.span.end_col]


def test_block_collective_under_a_thread_condition_is_rejected() -> None:
    @ox.kernel
    def partial(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        s = f32(0)
        if i < 3:
            s = ox.block.reduce_add(x[i])
        if i in out:
            out[i] = s

    err = _barrier_error(partial, Slice[f32], DisjointSlice[f32])
    assert _caret(err) == "ox.block.reduce_add(x[i])"  # the user's call, not collectives.py
    assert "`i < 3`" in err.label
    assert err.span.file.endswith("test_trust_safety.py")


def test_barrier_after_a_thread_dependent_early_return_is_accepted() -> None:
    """CUDA's barriers wait for the threads that have not exited (PTX `exit`: exiting
    threads release a barrier they hold up), so `if i >= n: return` before
    `ox.sync_threads()` is defined; the barrier is then PTX's unaligned `barrier.sync`."""

    @ox.kernel
    def early(x: Slice[f32], n: i32, out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i >= n:
            return
        ox.sync_threads()
        if i in out:
            out[i] = x[i]

    sig = (Slice[f32], i32, DisjointSlice[f32])
    ptx = early.compile(*sig, arch="sm_90").ptx
    assert "barrier.sync" in ptx and "bar.sync" not in ptx
    x = np.arange(70, dtype=np.float32)
    out = np.full(70, -1.0, np.float32)
    with ox.device("cpu"):
        early[3, 32](x, 50, out)
    np.testing.assert_array_equal(out, np.where(np.arange(70) < 50, x, -1.0))


def test_barrier_skipped_by_threads_that_run_on_is_rejected() -> None:
    """Threads that skip the barrier without returning are live: an error, as before."""

    @ox.kernel
    def skipping(x: Slice[f32], n: i32, out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i < n:
            ox.sync_threads()
        if i in out:
            out[i] = x[i]

    err = _barrier_error(skipping, Slice[f32], i32, DisjointSlice[f32])
    assert _caret(err) == "ox.sync_threads()"
    assert "`i < n`" in err.label


SHAPES = ["loop_bound", "break", "flag", "shared_value", "unsafe", "lane", "func", "ternary",
          "witness_guard"]


@pytest.mark.parametrize("shape", SHAPES)
def test_thread_dependent_control_around_barriers_is_rejected(shape: str) -> None:
    case = SHAPES.index(shape)  # a closure constant: only that branch compiles

    @ox.func
    def sync_if(c):
        if c > 0:
            ox.sync_threads()

    @ox.kernel
    def k(x: Slice[f32], n: i32, out: DisjointSlice[f32]):
        i = thread.index_1d()
        t = ox.thread_idx.x
        s = ox.shared.array(f32, 256)
        if case == 0:  # loop_bound
            for _ in range(t, n, ox.block_dim.x):
                ox.sync_threads()
        elif case == 1:  # break
            for r in range(4):
                if x[t] > f32(r):
                    break
                ox.sync_threads()
        elif case == 2:  # flag
            flag = 0
            if t < 3:
                flag = 1
            if flag == 1:
                ox.sync_threads()
        elif case == 3:  # shared_value (written by some thread in the same phase)
            with ox.unsafe():
                s[t] = x[t]
                v = s[0]
            if v > 0.0:
                ox.sync_threads()
        elif case == 4:  # unsafe
            with ox.unsafe():
                if t < 3:
                    ox.sync_threads()
        elif case == 5:  # lane
            if ox.lane_id() == 0:
                ox.block.reduce_max(x[0])
        elif case == 6:  # func
            sync_if(x[t])
        elif case == 7:  # ternary
            y = ox.block.reduce_add(x[0]) if t < 3 else 0.0
            if i in out:
                out[i] = y
        elif case == 8:  # witness_guard
            if i in x:
                ox.block.exclusive_scan(x[i])
        if i in out:
            out[i] = x[i]

    _barrier_error(k, Slice[f32], i32, DisjointSlice[f32])


@ox.kernel
def uniform_barriers(x: Slice[f32], n: i32, out: DisjointSlice[f32]):
    """Barriers under uniform control only: block_idx, parameters, lengths, Slice values
    at uniform indices, block reductions, and thread-dependent branches that rejoin."""
    i = thread.index_1d()
    t = ox.thread_idx.x
    v = x[i] if i in x else f32(0)
    if t < 3:  # thread-dependent, but it rejoins before the barrier
        v = v * 1.0
    for _ in range(t, n):  # a thread-dependent loop, also left before the barrier
        pass
    total = f32(0)
    if ox.block_idx.x < n and len(x) > 0 and x[0] >= 0.0:
        total = ox.block.reduce_add(v)
    rounds = 0
    left = ox.block.reduce_max(v)  # the same in every thread of the block
    while left > 0.0:  # so this loop is uniform, barriers inside and all
        left = ox.block.reduce_max(left - 1.0)
        rounds += 1
    for _ in range(n):  # a parameter-bounded loop
        ox.sync_threads()
    ox.sync_warp()
    if ox.warp_id() < 3:
        ox.sync_warp()  # every lane of a warp agrees on its warp id
    if i in out:
        out[i] = total + f32(rounds)


def test_uniform_control_around_barriers_compiles_and_runs() -> None:
    x = np.arange(64, dtype=np.float32) % 5
    out = np.zeros(64, np.float32)
    with ox.device("cpu"):
        uniform_barriers[2, 32](x, 2, out)
    want = np.repeat([x[:32].sum(), x[32:].sum()], 32) + 4.0  # max 4 -> 4 rounds
    assert np.array_equal(out, want.astype(np.float32))
    assert uniform_barriers.compile(Slice[f32], i32, DisjointSlice[f32], arch="sm_90").cubin


def test_shipped_examples_keep_compiling() -> None:
    from oxide.examples import histogram, reduction, scan, sgemm, softmax, transpose
    from oxide.types import AtomicSlice, u8, u32

    reduction.partial_sums.compile(Slice[f32], AtomicSlice[f32], target="cpu")
    scan.scan_blocks.compile(Slice[i32], DisjointSlice[i32], AtomicSlice[i32], target="cpu")
    softmax.softmax.compile(Slice[f32, 2], DisjointSlice[f32, 2], target="cpu")
    sgemm.sgemm.compile(Slice[f32, 2], Slice[f32, 2], DisjointSlice[f32, 2], target="cpu")
    transpose.transpose.compile(Slice[f32, 2], DisjointSlice[f32, 2], target="cpu")
    histogram.histogram.compile(Slice[u8], AtomicSlice[u32], target="cpu")


def test_bundles_keep_the_witness_ranks(tmp_path) -> None:
    from oxide.aot import Job, build_bundle

    build_bundle([Job("bump_2d", bump_2d, (DisjointSlice[f32, 2],))], ["sm_90"], tmp_path)
    code = ox.load_bundle(tmp_path).bump_2d.compile(np.zeros((2, 2), np.float32), arch="sm_90")
    assert code.thread_index_ranks == (2,)


# ---------------------------------------------------------------------------
# 5. Names without a call; @ox.func annotations


def test_a_function_named_without_a_call_is_rejected() -> None:
    @ox.func
    def helper(v: f32) -> f32:
        return v

    def kernel_with(which: int):
        @ox.kernel
        def k(a: Slice[f32]):
            if which == 0:
                ox.sync_threads  # noqa: B018 - the slip under test
            elif which == 1:
                ox.warp.reduce_add  # noqa: B018 - the slip under test
            elif which == 2:
                helper  # noqa: B018 - the slip under test
            elif which == 3:
                f32  # noqa: B018 - the slip under test
            else:
                a[0] + 1.0  # an expression without effect, as Python allows
                ox.warp  # noqa: B018 - a namespace is not a function
        return k

    for which, text in enumerate(("ox.sync_threads", "ox.warp.reduce_add", "helper", "f32")):
        err = _compile_error(kernel_with(which), Slice[f32])
        assert isinstance(err, ox.KernelSyntaxError), err
        assert err.message == f"`{text}` is not called; write `{text}()`"
        assert _caret(err) == text
    assert kernel_with(4).compile(Slice[f32], target="cpu")


def test_func_annotation_that_names_nothing_is_rejected_at_decoration() -> None:
    with pytest.raises(ox.KernelTypeError) as info:
        @ox.func
        def half(v: f23):  # noqa: F821 - the typo under test
            return v * 0.5
    err = info.value
    assert "`v: f23` is not an @ox.func parameter type" in err.message
    assert _caret(err) == "v: f23" and err.span.file.endswith("test_trust_safety.py")
    assert "names nothing" in err.hint

    with pytest.raises(ox.KernelTypeError, match=r"`n: int` is not an @ox.func parameter"):
        @ox.func
        def count(n: int):
            return n
    with pytest.raises(ox.KernelTypeError, match=r"`-> float` is not a return type") as ret:
        @ox.func
        def third(v: f32) -> float:
            return v / 3.0
    assert _caret(ret.value) == "float"


def test_typo_in_one_kernel_annotation_is_reported_on_that_parameter() -> None:
    with pytest.raises(ox.KernelTypeError) as info:
        @ox.kernel
        def k(a: f32, b: f23, out: DisjointSlice[f32]):  # noqa: F821 - the typo under test
            pass
    assert "`b: f23`" in info.value.message and _caret(info.value) == "b: f23"


def test_valid_func_annotations_are_accepted() -> None:
    T = ox.TypeVar("T")

    @ox.func
    def pair(v: f32, w: T, x: Slice[f32]) -> tuple[f32, f32]:
        return v, v + x[0]

    @ox.func
    def nothing(v: i32) -> None:
        pass

    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        nothing(i32(1))
        a, b = pair(f32(1), i32(2), x)
        if i in out:
            out[i] = a + b

    out = np.zeros(4, np.float32)
    with ox.device("cpu"):
        k[1, 4](np.full(4, 2, np.float32), out)
    np.testing.assert_array_equal(out, np.full(4, 4, np.float32))


# ---------------------------------------------------------------------------
# 6. Full-warp collectives are reached by every lane of the warp; masks are integers


def _warp_error(kernel, *sig) -> ox.SafetyError:
    err = _compile_error(kernel, *sig)
    assert isinstance(err, ox.SafetyError), err
    assert "needs every lane of the warp" in err.message
    return err


WARP_SHAPES = ["lane_branch", "sync_warp", "early_return", "loop_bound", "break", "guard",
               "explicit_full_mask", "match_any", "loaded_value", "func", "shuffle_result"]


@ox.func
def _warp_sum_if(v: i32, c: ox.bool_):
    s = i32(0)
    if c:
        s = ox.warp.reduce_add(v)
    return s


@pytest.mark.parametrize("shape", WARP_SHAPES)
def test_full_mask_warp_collective_under_a_lane_condition_is_rejected(shape: str) -> None:
    """CUDA leaves a full-mask shfl/vote/redux/bar.warp undefined when a lane of the
    warp does not execute it: each shape puts one under a lane-dependent condition."""
    case = WARP_SHAPES.index(shape)
    carets = {0: "ox.warp.reduce_add(i32(1))", 1: "ox.sync_warp()", 2: "ox.warp.ballot(v > 0)",
              3: "ox.warp.shuffle_xor(v, 1)", 4: "ox.warp.any(v > 2)",
              5: "ox.warp.reduce_max(x[i])", 6: "ox.warp.reduce_add(v, 0xFFFFFFFF)",
              7: "ox.warp.match_any(v)", 8: "ox.warp.all(v > 0)", 9: "ox.warp.reduce_add(v)",
              10: "ox.warp.reduce_min(v)"}

    @ox.kernel
    def k(x: Slice[i32], n: i32, out: DisjointSlice[i32]):
        i = thread.index_1d()
        v = x[0] + n
        r = i32(0)
        if case == 0:
            if ox.lane_id() < 16:
                r = ox.warp.reduce_add(i32(1))
        elif case == 1:
            if ox.lane_id() % 2 == 0:
                ox.sync_warp()
        elif case == 2:
            if i >= n:
                return
            r = i32(ox.warp.ballot(v > 0))
        elif case == 3:
            for _ in range(ox.lane_id()):
                v = ox.warp.shuffle_xor(v, 1)
        elif case == 4:
            while v < 10:
                if ox.thread_idx.x == 3:
                    break
                r = i32(ox.warp.any(v > 2))
                v += 1
        elif case == 5:
            if i in x:
                r = ox.warp.reduce_max(x[i])
        elif case == 6:
            if ox.lane_id() < 16:
                r = ox.warp.reduce_add(v, 0xFFFFFFFF)
        elif case == 7:
            if ox.thread_idx.x < 8:
                r = i32(ox.warp.match_any(v))
        elif case == 8:
            if x[i] > 0:  # a value loaded at this thread's index differs between lanes
                r = i32(ox.warp.all(v > 0))
        elif case == 9:
            r = _warp_sum_if(v, ox.lane_id() == 0)
        elif case == 10:
            if ox.warp.shuffle_xor(v, 1) > 0:  # each lane reads another lane
                r = ox.warp.reduce_min(v)
        if i in out:
            out[i] = r

    err = _warp_error(k, Slice[i32], i32, DisjointSlice[i32])
    assert _caret(err) == carets[case]
    assert err.span.file.endswith("test_trust_safety.py")
    assert "lane" in err.label and "ballot" in err.hint + "sync_warp"


def test_warp_error_names_the_condition() -> None:
    @ox.kernel
    def k(out: DisjointSlice[i32]):
        i = thread.index_1d()
        s = i32(0)
        if ox.lane_id() < 16:
            s = ox.warp.reduce_add(i32(1))
        if i in out:
            out[i] = s

    err = _warp_error(k, DisjointSlice[i32])
    assert "`ox.lane_id() < 16`" in err.label
    assert "m = ox.warp.ballot(cond)" in err.hint


@ox.kernel
def warp_uniform_control(x: Slice[i32], n: i32, out: DisjointSlice[i32]):
    """Full-mask collectives under warp-uniform control only: warp ids, block ids,
    parameters, full-mask votes, reductions and lane-0 broadcasts, and lane-dependent
    branches that rejoin before the collective."""
    i = thread.index_1d()
    v = x[i] if i in x else i32(0)
    if ox.lane_id() < 3:  # lane-dependent, but it rejoins before the collectives
        v = v + 0
    r = i32(0)
    if ox.warp_id() % 2 == 0:
        r += ox.warp.reduce_add(v)
    if ox.block_idx.x < n and ox.warp.any(v > 60):
        r += 1000 * i32(ox.warp.ballot(v % 2 == 0) != u32(0))
    left = ox.warp.reduce_max(v)  # the same in every lane: the loop is warp-uniform
    while left > 0:
        left = ox.warp.reduce_max(left - 7)
        r += 100000
    if ox.warp.shuffle(v, 0) == 0:  # every lane reads lane 0
        ox.sync_warp()
        r += 10 * ox.warp.reduce_min(v)
    if i in out:
        out[i] = r


def _warp_uniform_want(x: np.ndarray, n: int, block: int) -> np.ndarray:
    out = np.zeros(x.size, np.int64)
    for w0 in range(0, x.size, 32):
        v = x[w0:w0 + 32].astype(np.int64)
        r = 0
        if ((w0 % block) // 32) % 2 == 0:
            r += v.sum()
        if w0 // block < n and (v > 60).any():
            r += 1000 * int((v % 2 == 0).any())
        left = v.max()
        while left > 0:
            left -= 7
            r += 100000
        if v[0] == 0:
            r += 10 * v.min()
        out[w0:w0 + 32] = r
    return out.astype(np.int32)


def test_warp_uniform_control_compiles_and_runs() -> None:
    block = 64
    x = (np.arange(4 * block) * 7 % 97).astype(np.int32)
    x[::32] = 0  # lane 0 of each warp: the broadcast branch runs
    out = np.zeros_like(x)
    with ox.device("cpu"):
        warp_uniform_control[4, block](x, 2, out)
    np.testing.assert_array_equal(out, _warp_uniform_want(x, 2, block))
    assert warp_uniform_control.compile(Slice[i32], i32, DisjointSlice[i32], arch="sm_90").cubin


@ox.kernel
def masked_under_lane_branch(x: Slice[i32], out: DisjointSlice[i32]):
    """Explicit masks say who takes part: the ballot of the condition, or a constant."""
    i = thread.index_1d()
    v = x[i] if i in x else i32(0)
    low = ox.lane_id() < 12
    m = ox.warp.ballot(low)
    r = i32(0)
    if low:
        r = ox.warp.reduce_add(v, m) + 1000 * ox.warp.reduce_max(v, 0xFFF)
    else:
        r = -ox.warp.reduce_add(v, ~m)
    if i in out:
        out[i] = r


def _masked_want(x: np.ndarray, block: int) -> np.ndarray:
    out = np.zeros(x.size, np.int64)
    for b0 in range(0, x.size, block):
        for w0 in range(b0, min(b0 + block, x.size), 32):
            v = x[w0:min(w0 + 32, b0 + block)].astype(np.int64)
            for lane in range(v.size):
                if lane < 12:
                    out[w0 + lane] = v[:12].sum() + 1000 * v[:12].max()
                else:
                    out[w0 + lane] = -v[12:].sum()
    return out.astype(np.int32)


def test_explicit_masks_under_lane_conditions_run_on_the_cpu() -> None:
    block = 40  # a partial last warp of 8 lanes: ~m names lanes 12..31, only 12..7 exist
    x = (np.arange(2 * block) * 3 % 50 + 1).astype(np.int32)
    out = np.zeros_like(x)
    with ox.device("cpu"):
        masked_under_lane_branch[2, block](x, out)
    np.testing.assert_array_equal(out, _masked_want(x, block))
    assert masked_under_lane_branch.compile(Slice[i32], DisjointSlice[i32], arch="sm_90").cubin


def test_warp_mask_is_a_nonzero_integer() -> None:
    def kernel_with(mask_kind: int):
        @ox.kernel
        def k(a: i32, mf: f32, mb: ox.bool_, m64: ox.i64, mu: ox.u32, mi: i32,
              out: DisjointSlice[i32]):
            i = thread.index_1d()
            s = i32(0)
            if mask_kind == 0:
                s = ox.warp.reduce_add(a, 0)
            elif mask_kind == 1:
                s = ox.warp.reduce_add(a, mf)
            elif mask_kind == 2:
                s = i32(ox.warp.ballot(a > 0, 1.5))
            elif mask_kind == 3:
                s = ox.warp.shuffle(a, 0, mb)
            elif mask_kind == 4:
                s = ox.warp.reduce_min(a, True)
            elif mask_kind == 5:
                s = ox.warp.reduce_max(a, m64)
            else:
                s = ox.warp.reduce_add(a, mu) + ox.warp.reduce_add(a, mi)
            if i in out:
                out[i] = s
        return k

    sig = (i32, f32, ox.bool_, ox.i64, ox.u32, i32, DisjointSlice[i32])
    zero = _compile_error(kernel_with(0), *sig)
    assert isinstance(zero, ox.SafetyError) and "names no lane" in zero.message
    assert _caret(zero) == "0"
    for kind, caret in ((1, "mf"), (2, "1.5"), (3, "mb"), (4, "True")):
        err = _compile_error(kernel_with(kind), *sig)
        assert isinstance(err, ox.KernelTypeError), (kind, err)
        assert "must be an integer" in err.message and _caret(err) == caret
    wide = _compile_error(kernel_with(5), *sig)
    assert isinstance(wide, ox.KernelTypeError) and "`u32(m64)`" in wide.hint
    assert kernel_with(6).compile(*sig, target="cpu")  # u32 and i32 masks are fine
