"""Safety that knows what CUDA guarantees (issue 27, items 1, 2 and 9), on the CPU.

Accepted, as CUDA defines them: conditions whole warps take alike (`thread_idx.x < 32`
in blocks whose x extent is a multiple of 32), variables reused after a divergent
region, a shared flag read after a barrier, an early `return` before a barrier.
Refused, with the rewrite in the hint: barriers live threads skip, block collectives
after an early return, reads of cells only a returned thread would have written.
"""

from __future__ import annotations

import numpy as np
import pytest
from cuda_rules_kernels import (
    early_return_stencil,
    early_return_stencil_model,
    early_return_then_barrier,
    reduce4,
    reduce4_model,
    shfl_scan,
    shfl_scan_model,
)

import oxide as ox
from oxide import DisjointSlice, RawSlice, Slice, f32, i32, thread
from oxide.runtime.witness_rules import WHOLE_WARP_ROWS


@pytest.fixture
def cpu():
    with ox.device("cpu"):
        yield


def refusal(kernel: ox.Kernel, *sig: object) -> ox.SafetyError:
    with pytest.raises(ox.SafetyError) as info:
        kernel.compile(*sig, arch="cpu")
    return info.value


# --- warps that take a condition whole ----------------------------------------------------

@pytest.mark.parametrize("block", [64, 128, 256])
def test_reduce4_runs_with_whole_warp_rows(cpu, block: int) -> None:
    blocks = 5
    x = np.random.default_rng(block).standard_normal(blocks * 2 * block - 37).astype(np.float32)
    out = np.zeros(blocks, np.float32)
    reduce4[ox.LaunchConfig(grid=blocks, block=block, shared_mem_bytes=4 * block)](x, out)
    np.testing.assert_allclose(out, reduce4_model(np.pad(x, (0, 37)), blocks, block),
                               rtol=1e-5, atol=1e-4)


def test_reduce4_records_the_launch_rule_and_refuses_partial_warp_rows(cpu) -> None:
    ck = reduce4.compile(Slice[f32], RawSlice[f32], arch="cpu")
    assert WHOLE_WARP_ROWS in ck.thread_index_ranks
    x = np.ones(96, np.float32)
    out = np.zeros(1, np.float32)
    with pytest.raises(ox.LaunchError, match=r"multiple of 32 \(e\.g\. 64\)"):
        reduce4[ox.LaunchConfig(grid=1, block=48, shared_mem_bytes=4 * 48)](x, out)


def test_a_kernel_that_needs_no_whole_warps_records_no_rule() -> None:
    ck = early_return_then_barrier.compile(Slice[f32], i32, DisjointSlice[f32], arch="cpu")
    assert WHOLE_WARP_ROWS not in ck.thread_index_ranks


@pytest.mark.parametrize("cond", ["t // 32 == 1", "t < 64", "t >= 32", "t <= 31", "t > 95",
                                  "ox.thread_idx.y == 0", "(t >> 5) == 2",
                                  "(t & ~31) == 32", "t + 32 < 64"])
def test_warp_granular_conditions_are_warp_uniform(cond: str) -> None:
    k = _shuffle_under(cond)
    assert WHOLE_WARP_ROWS in k.compile(Slice[f32], RawSlice[f32], arch="cpu").thread_index_ranks


@pytest.mark.parametrize("cond", ["t < 33", "t % 32 == 0", "t == 5", "t <= 32", "t + 1 < 64",
                                  "t * 2 < 64", "ox.lane_id() < 16"])
def test_conditions_that_split_a_warp_are_refused(cond: str) -> None:
    e = refusal(_shuffle_under(cond), Slice[f32], RawSlice[f32])
    assert "needs every lane of the warp" in e.message
    assert "ox.warp.activemask()" in e.hint


def _shuffle_under(cond: str) -> ox.Kernel:
    """A kernel with a full-mask shuffle under `cond` (t is thread_idx.x)."""
    namespace: dict[str, object] = {}
    source = (
        "import oxide as ox\n"
        "from oxide import f32, Slice, RawSlice\n"
        "@ox.kernel\n"
        "def k(x: Slice[f32], out: RawSlice[f32]):\n"
        "    t = ox.thread_idx.x\n"
        "    v = x[t]\n"
        f"    if {cond}:\n"
        "        v += ox.warp.shuffle_down(v, 1)\n"
        "    with ox.unsafe():\n"
        "        out[t] = v\n")
    path = _write_module(source, f"shuffle_{abs(hash(cond))}")
    exec(compile(source, path, "exec"), namespace)  # noqa: S102 - a test's own module
    return namespace["k"]  # type: ignore[return-value]


def _write_module(source: str, name: str) -> str:
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp()) / f"{name}.py"
    path.write_text(source)
    import linecache

    linecache.updatecache(str(path))
    return str(path)


# --- variables followed write by write ----------------------------------------------------

def test_shfl_scan_as_the_sample_writes_it(cpu) -> None:
    block, blocks = 128, 3
    data = np.random.default_rng(3).integers(-100, 100, block * blocks).astype(np.int32)
    want = shfl_scan_model(data, block)
    sums = np.zeros(blocks, np.int32)
    got = data.copy()
    shfl_scan[ox.LaunchConfig(grid=blocks, block=block, shared_mem_bytes=4 * 32)](got, 32, sums)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(sums, want.reshape(blocks, block)[:, -1])


def test_a_name_reused_under_a_thread_condition_stays_uniform_before_it(cpu) -> None:
    @ox.kernel
    def reuse(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        s = 4
        while s > 0:  # uniform: the write below cannot reach this loop
            ox.sync_threads()
            s //= 2
        if ox.thread_idx.x == 0:
            s = 7
        if i in out:
            out[i] = x[i] + f32(s)

    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    reuse[2, 32](x, out)
    np.testing.assert_array_equal(out, x + np.where(np.arange(64) % 32 == 0, 7, 0))


def test_a_name_written_under_a_thread_condition_is_thread_dependent_after_it() -> None:
    @ox.kernel
    def after(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        s = 4
        if ox.thread_idx.x == 0:
            s = 7
        while s > 0:  # threads disagree on s here
            ox.sync_threads()  # barrier
            s //= 2
        if i in out:
            out[i] = x[i]

    e = refusal(after, Slice[f32], DisjointSlice[f32])
    assert "every thread must run the loop the same number of times" in e.hint


# --- a shared flag read after a barrier ---------------------------------------------------

def test_a_flag_written_in_the_reading_phase_is_thread_dependent() -> None:
    @ox.kernel
    def racy_flag(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        flag = ox.shared.array(i32, 1)
        ox.sync_threads()
        with ox.unsafe():
            f = flag[0]
            if ox.thread_idx.x == 3:
                flag[0] = 1  # written in the phase that reads it: threads may disagree
        if f > 0:
            ox.sync_threads()
        if i in out:
            out[i] = x[i]

    e = refusal(racy_flag, Slice[f32], DisjointSlice[f32])
    assert "depends on `f > 0`" in e.label


def test_a_flag_written_before_the_barrier_guards_barriers(cpu) -> None:
    @ox.kernel
    def flagged(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        flag = ox.shared.array(i32, 1)
        with ox.unsafe():
            if ox.thread_idx.x == 0:
                flag[0] = 1 if x[ox.block_idx.x] > 0.0 else 0
        ox.sync_threads()
        with ox.unsafe():
            f = flag[0]
        v = f32(0)
        if f > 0:
            v = ox.block.reduce_add(x[i] if i in x else f32(0))
        if i in out:
            out[i] = v

    x = np.array([1.0, -1.0] + [1.0] * 62, np.float32)
    out = np.zeros(64, np.float32)
    flagged[2, 32](x, out)
    np.testing.assert_array_equal(out, np.r_[np.full(32, x[:32].sum()), np.zeros(32)])


# --- early exit ---------------------------------------------------------------------------

def test_early_return_before_a_barrier_runs(cpu) -> None:
    x = np.arange(100, dtype=np.float32)
    out = np.full(100, -1.0, np.float32)
    early_return_then_barrier[4, 32](x, 70, out)
    np.testing.assert_array_equal(out, np.where(np.arange(100) < 70, 2 * x, -1.0))


@pytest.mark.parametrize("n", [1, 127, 128, 300])
def test_early_return_stencil_reads_only_live_neighbours(cpu, n: int) -> None:
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    early_return_stencil[(n + 127) // 128, 128](x, out)
    np.testing.assert_array_equal(out, early_return_stencil_model(x))


def test_a_barrier_after_an_early_return_is_the_unaligned_ptx_barrier() -> None:
    ptx = early_return_then_barrier.compile(Slice[f32], i32, DisjointSlice[f32],
                                            arch="sm_90").ptx
    assert "barrier.sync" in ptx and "bar.sync" not in ptx
    plain = reduce4.compile(Slice[f32], RawSlice[f32], arch="sm_90").ptx
    assert "bar.sync" in plain and "barrier.sync" not in plain


def test_a_read_of_what_a_returned_thread_never_wrote_names_both_lines() -> None:
    @ox.kernel(block=128)
    def tree(x: Slice[f32], out: RawSlice[f32]):
        sh = ox.shared.array(f32, 128)
        i = ox.block_idx.x * 128 + ox.thread_idx.x
        t = thread.in_block()
        if i >= len(x):
            return
        sh[t] = x[i]  # write
        ox.sync_threads()
        s = 64
        while s > 0:
            if t < s:
                sh[t] += sh[t + s]  # read
            ox.sync_threads()
            s //= 2
        if t == 0:
            with ox.unsafe():
                out[ox.block_idx.x] = sh[0]

    e = refusal(tree, Slice[f32], RawSlice[f32])
    assert e.span.line == _line(tree, "# read")
    assert "thread 0 may read `sh[64]`" in e.message
    assert f"(line {_line(tree, '# write')})" in e.message
    assert "thread 64 return early" in e.message
    assert "neutral value" in e.hint


def test_a_definite_early_return_then_a_read_of_its_cell_is_refused() -> None:
    @ox.kernel(block=128)
    def definite(x: Slice[f32], out: DisjointSlice[f32]):
        sh = ox.shared.array(f32, 128)
        i = thread.index_1d()
        t = thread.in_block()
        if t >= 100:
            return
        sh[t] = x[t]
        ox.sync_threads()
        v = sh[t + 1]
        if i in out:
            out[i] = v

    e = refusal(definite, Slice[f32], DisjointSlice[f32])
    assert "thread 99 may read `sh[100]`" in e.message


def test_a_block_collective_after_an_early_return_is_refused() -> None:
    @ox.kernel(block=64)
    def declared(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i >= len(out):
            return
        out[i] = ox.block.reduce_add(x[i])

    e = refusal(declared, Slice[f32], DisjointSlice[f32])
    assert "may have returned before it" in e.message
    assert "neutral value" in e.hint

    @ox.kernel
    def undeclared(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i >= len(out):
            return
        out[i] = ox.block.reduce_add(x[i])

    e = refusal(undeclared, Slice[f32], DisjointSlice[f32])
    assert "depends on `i >= len(out)`" in e.label
    assert "neutral value" in e.hint


def test_a_warp_collective_after_an_early_return_is_refused() -> None:
    @ox.kernel
    def lanes_gone(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i >= len(out):
            return
        out[i] = ox.warp.reduce_add(x[i])

    e = refusal(lanes_gone, Slice[f32], DisjointSlice[f32])
    assert "needs every lane of the warp" in e.message


def test_a_grid_barrier_after_an_early_return_is_refused() -> None:
    @ox.kernel
    def grid_after_exit(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i >= len(out):
            return
        ox.grid.sync()
        out[i] = x[i]

    e = refusal(grid_after_exit, Slice[f32], DisjointSlice[f32])
    assert "waits for every thread of the launch" in e.message


def test_a_barrier_live_threads_skip_shows_the_hoisted_rewrite() -> None:
    @ox.kernel
    def skipping(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i < len(out):
            ox.sync_threads()
            out[i] = x[i]

    e = refusal(skipping, Slice[f32], DisjointSlice[f32])
    assert e.hint.startswith("move `ox.sync_threads()` out of the `if`")
    assert "\n    if i < len(out):\n        ...\n    ox.sync_threads()\n" in e.hint


def _line(kernel: ox.Kernel, marker: str) -> int:
    import inspect

    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(k for k, text in enumerate(lines) if marker in text)
