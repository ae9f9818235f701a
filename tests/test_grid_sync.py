"""`ox.grid.sync()` (issue 15 item 11): a barrier over every thread of the launch.

On the CPU every block runs on an OS thread of its own, so the kernels here run and are
compared against NumPy; the GPU code is checked by assembling it for sm_80 and sm_90, and
the cooperative launch and occupancy check against the fake driver (tests/fake_cuda.py).
tests/test_gpu_grid_sync.py runs the same kernels on a GPU.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator

import numpy as np
import pytest
from fake_cuda import FakeDriver, use_launch_flavor
from ports import laplace as lp
from test_array_rebinding import relax_point

import oxide as ox
from oxide import DisjointSlice, RawSlice, Slice, f32, i32, thread
from oxide.runtime import cpu as cpu_runtime


@pytest.fixture
def cpu():
    with ox.device("cpu"):
        yield


@ox.kernel
def reverse_across_blocks(a: RawSlice[i32], out: RawSlice[i32]):
    """Phase 1 writes a[i]; after the grid barrier each thread reads an element another
    block wrote (numba's grid-sync test: the mirror element, far away in the grid)."""
    i = ox.block_idx.x * ox.block_dim.x + ox.thread_idx.x
    n = len(a)
    with ox.unsafe():
        if i < n:
            a[i] = i32(i) * 3 + 1
    ox.grid.sync()
    with ox.unsafe():
        if i < n:
            out[i] = a[n - 1 - i]


@ox.kernel
def rounds(a: RawSlice[i32], steps: i32):
    """Many barriers in one launch: in round r every element adds its right neighbour's
    value from round r - 1, read before a barrier and written after the next."""
    i = ox.block_idx.x * ox.block_dim.x + ox.thread_idx.x
    n = len(a)
    grid = ox.grid.this_grid()  # numba's spelling: cuda.cg.this_grid()
    for _ in range(steps):
        v = 0
        with ox.unsafe():
            if i < n:
                v = a[i] + a[(i + 1) % n]
        grid.sync()
        with ox.unsafe():
            if i < n:
                a[i] = v
        grid.sync()


@ox.kernel
def block_sums_then_total(x: Slice[f32], partial: RawSlice[f32], total: DisjointSlice[f32]):
    """A two-phase reduction in one launch: block sums, a grid barrier, then every block
    adds up all the partial sums (each thread writes the total at its own index)."""
    i = thread.index_1d()
    v = f32(0)
    if i < len(x):
        v = x[i]
    s = ox.block.reduce_add(v)
    with ox.unsafe():
        if ox.thread_idx.x == 0:
            partial[ox.block_idx.x] = s
    ox.grid.sync()
    acc = f32(0)
    for b in range(len(partial)):
        with ox.unsafe():
            acc += partial[b]
    if i in total:
        total[i] = acc


@pytest.mark.parametrize("n,blocks,block", [(1, 1, 1), (100, 4, 32), (1000, 8, 128),
                                            (5000, 40, 128), (777, 7, 120)])
def test_reads_after_the_barrier_see_every_block_s_writes(cpu, n, blocks, block) -> None:
    a = np.zeros(n, np.int32)
    out = np.zeros(n, np.int32)
    reverse_across_blocks[blocks, block](a, out)
    np.testing.assert_array_equal(out, (np.arange(n, dtype=np.int32) * 3 + 1)[::-1])


def _rounds_reference(a: np.ndarray, steps: int) -> np.ndarray:
    a = a.copy()
    for _ in range(steps):
        a = a + np.roll(a, -1)
    return a


@pytest.mark.parametrize("n,blocks,steps", [(64, 2, 5), (300, 5, 9), (1000, 16, 3)])
def test_many_barriers_in_one_launch(cpu, n, blocks, steps) -> None:
    a0 = np.random.default_rng(n).integers(-5, 5, n).astype(np.int32)
    a = a0.copy()
    rounds[blocks, -(-n // blocks)](a, steps)
    np.testing.assert_array_equal(a, _rounds_reference(a0, steps))


def test_relaunches_reuse_the_counter(cpu) -> None:
    # each completed barrier leaves the counter's low bits where they were, and a launch
    # with another grid size follows one with an odd number of barriers
    for n, blocks, steps in [(100, 4, 1), (100, 3, 2), (64, 8, 3), (64, 1, 1), (90, 9, 2)]:
        a0 = np.arange(n, dtype=np.int32)
        a = a0.copy()
        rounds[blocks, -(-n // blocks)](a, steps)
        np.testing.assert_array_equal(a, _rounds_reference(a0, steps))


@pytest.mark.parametrize("n,blocks", [(1000, 8), (4096, 16), (10, 1)])
def test_two_phase_reduction(cpu, n, blocks) -> None:
    x = np.random.default_rng(3).integers(-8, 8, n).astype(np.float32)
    partial = np.zeros(blocks, np.float32)
    total = np.zeros(blocks * 256, np.float32)
    block_sums_then_total[blocks, 256](x, partial, total)
    np.testing.assert_array_equal(total, np.full(blocks * 256, x.sum(), np.float32))


def test_laplace_all_steps_in_one_launch(cpu) -> None:
    # numba's grid-synchronized Laplace (tests/ports/laplace.py): several blocks
    a0 = lp.initial_grid(20, 30)
    a, b = a0.copy(), a0.copy()
    lp.natural_grid_sync()[lp._config(a0.shape)](a, b, 6)
    np.testing.assert_array_equal(a, lp.reference(a0, 6))


@ox.kernel
def laplace_swap_grid(a: RawSlice[f32, 2], b: RawSlice[f32, 2], steps: i32):
    """numba's Laplace as one launch over many blocks, the buffers swapped by name in the
    loop (issue 15 items 2 and 11 together)."""
    ij = thread.index_2d()
    src, dst = a, b
    for _ in range(steps):
        relax_point(src, dst, ij.row, ij.col)
        ox.grid.sync()
        src, dst = dst, src


def solve_swap_grid(a0: np.ndarray, steps: int, device) -> np.ndarray:
    with ox.device(device):
        a, b = ox.to_device(a0), ox.to_device(a0)
        laplace_swap_grid[lp._config(a0.shape)](a, b, steps)
        return (a if steps % 2 == 0 else b).copy_to_host()


@pytest.mark.parametrize("shape,steps", [((20, 30), 7), ((45, 61), 12)])
def test_laplace_swapping_names_across_blocks(shape, steps) -> None:
    a0 = lp.initial_grid(*shape)
    np.testing.assert_array_equal(solve_swap_grid(a0, steps, "cpu"), lp.reference(a0, steps))


@ox.kernel
def grid_2d(a: RawSlice[i32, 2], out: RawSlice[i32, 2]):
    """A 2-D grid of 2-D blocks: the barrier counts every block of every dimension."""
    ij = thread.index_2d()
    r, c = ij.row, ij.col
    n, m = a.shape
    with ox.unsafe():
        if r < n and c < m:
            a[r, c] = i32(r * m + c)
    ox.grid.sync()
    with ox.unsafe():
        if r < n and c < m:
            out[r, c] = a[n - 1 - r, m - 1 - c]


def test_two_dimensional_grid(cpu) -> None:
    a = np.zeros((37, 45), np.int32)
    out = np.zeros_like(a)
    grid_2d[(3, 5), (16, 8)](a, out)
    np.testing.assert_array_equal(out, np.arange(37 * 45, dtype=np.int32).reshape(37, 45)[::-1, ::-1])


@ox.kernel
def checked_then_sync(a: Slice[i32], out: RawSlice[i32]):
    i = ox.block_idx.x * ox.block_dim.x + ox.thread_idx.x
    v = a[i]  # out of range in the last block: a KernelIndexError, not a hang
    ox.grid.sync()
    with ox.unsafe():
        if i < len(out):
            out[i] = v


def test_a_failed_check_reports_and_the_next_launch_runs(cpu) -> None:
    a = np.arange(100, dtype=np.int32)
    out = np.zeros(100, np.int32)
    with pytest.raises(ox.KernelIndexError):
        checked_then_sync[4, 32](a, out)
    out[:] = 0
    checked_then_sync[4, 25](a, out)  # the counter starts again from 0
    np.testing.assert_array_equal(out, a)


def test_too_many_blocks_for_the_cpu(cpu) -> None:
    a = np.zeros(10, np.int32)
    with pytest.raises(ox.LaunchError, match="ox.grid.sync.*at most 1024"):
        reverse_across_blocks[cpu_runtime.MAX_GRID_SYNC_BLOCKS + 1, 1](a, a.copy())


def test_kernels_without_grid_sync_have_no_counter(cpu) -> None:
    lp.jacobi_step[(1, 1), (4, 4)](np.zeros((4, 4), np.float32), np.zeros((4, 4), np.float32))
    entries = list(lp.jacobi_step.__dict__["_oxide_cpu_entries"].values())
    assert entries and all(e.grid_counter == 0 for e in entries)
    reverse_across_blocks[1, 4](np.zeros(4, np.int32), np.zeros(4, np.int32))
    (entry,) = reverse_across_blocks.__dict__["_oxide_cpu_entries"].values()
    assert entry.grid_counter != 0


def test_the_counter_is_found_in_code_from_the_disk_cache(cpu, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("OXIDE_CACHE_DIR", str(tmp_path / "cache"))
    a, out = np.zeros(100, np.int32), np.zeros(100, np.int32)
    reverse_across_blocks.__dict__.pop("_oxide_cpu_entries", None)
    reverse_across_blocks[4, 32](a, out)  # compiles and stores
    loaded: list[bool] = []
    real = cpu_runtime._from_disk_cache

    def spy(entry, kernel, plan) -> bool:
        loaded.append(real(entry, kernel, plan))
        return loaded[-1]
    monkeypatch.setattr(cpu_runtime, "_from_disk_cache", spy)
    reverse_across_blocks.__dict__.pop("_oxide_cpu_entries")
    out[:] = 0
    reverse_across_blocks[4, 32](a, out)
    assert loaded == [True]
    (entry,) = reverse_across_blocks.__dict__["_oxide_cpu_entries"].values()
    assert entry.grid_counter != 0
    np.testing.assert_array_equal(out, (np.arange(100, dtype=np.int32) * 3 + 1)[::-1])


# --- the GPU code ---------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_grid_barrier_assembles(arch: str) -> None:
    ck = reverse_across_blocks.compile(RawSlice[i32], RawSlice[i32], arch=arch)
    ptx = ck.ptx
    assert f"{ck.name}_grid_barrier" in ptx
    assert "atom.global.add.u32" in ptx
    assert "ld.volatile.global" in ptx
    assert "membar.gl" in ptx or "fence.sc.gpu" in ptx
    assert ptx.count("bar.sync") + ptx.count("barrier.sync") >= 2
    assert ck.cubin[:4] == b"\x7fELF"
    assert f"{ck.name}_grid_barrier".encode() in ck.cubin  # how the runtime tells


def test_grid_sync_kernels_are_not_coarsened() -> None:
    @ox.kernel
    def copy_then_sync(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        v = f32(0)
        if i in out:
            v = x[i]
        ox.grid.sync()
        if i in out:
            out[i] = v
    ck = copy_then_sync.compile(Slice[f32], DisjointSlice[f32], arch="sm_90")
    assert ck.grid_x_factor == 1


# --- the uniformity rule: every thread of the launch reaches the barrier -----------------

def _compile(body_kernel) -> None:
    body_kernel.compile(RawSlice[i32], i32, arch="cpu")


def test_a_barrier_under_a_block_condition_is_refused() -> None:
    @ox.kernel
    def by_block(a: RawSlice[i32], n: i32):
        if ox.block_idx.x == 0:
            ox.grid.sync()
    with pytest.raises(ox.SafetyError, match="every thread of the launch") as info:
        _compile(by_block)
    assert "block_idx.x == 0" in str(info.value)
    # a block barrier there is fine: every thread of the block agrees on block_idx
    @ox.kernel
    def block_barrier(a: RawSlice[i32], n: i32):
        if ox.block_idx.x == 0:
            ox.sync_threads()
    _compile(block_barrier)


def test_a_barrier_under_a_thread_condition_or_after_an_early_return_is_refused() -> None:
    @ox.kernel
    def by_thread(a: RawSlice[i32], n: i32):
        if ox.thread_idx.x < 5:
            ox.grid.sync()

    @ox.kernel
    def early_return(a: RawSlice[i32], n: i32):
        i = ox.block_idx.x * ox.block_dim.x + ox.thread_idx.x
        if i >= n:
            return
        ox.grid.sync()

    @ox.kernel
    def block_result(a: RawSlice[i32], n: i32):
        s = ox.block.reduce_add(ox.block_idx.x)
        if s > 3:  # the same in a block, not across blocks
            ox.grid.sync()
    for k in (by_thread, early_return, block_result):
        with pytest.raises(ox.SafetyError, match="ox.grid.sync"):
            _compile(k)


def test_a_barrier_under_uniform_conditions_compiles() -> None:
    @ox.kernel
    def uniform(a: RawSlice[i32], n: i32):
        for _ in range(n):
            if n > 2 and ox.grid_dim.x > 1 and ox.block_dim.x < 512:
                ox.grid.sync()
    _compile(uniform)


# --- diagnostics ---------------------------------------------------------------------------

def test_numba_cuda_grid_spelled_ox_grid_names_the_thread_index() -> None:
    with pytest.raises(ox.KernelSyntaxError, match="is not a function") as info:
        lp.natural_cuda_grid().compile(Slice[f32, 2], RawSlice[f32, 2], arch="cpu")
    assert "thread.index_2d()" in str(info.value)


def test_sync_takes_no_arguments() -> None:
    @ox.kernel
    def bad(a: RawSlice[i32], n: i32):
        ox.grid.sync(n)
    with pytest.raises(ox.KernelSyntaxError, match=r"ox.grid.sync\(\) takes 0"):
        _compile(bad)


def test_outside_a_kernel_it_raises() -> None:
    with pytest.raises(RuntimeError, match="only works inside"):
        ox.grid.sync()


# --- the cooperative launch (fake driver) ----------------------------------------------------

@pytest.fixture(params=["native", "ctypes"])
def fake(request, monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[FakeDriver]:
    driver = FakeDriver()
    driver.ATTRIBUTES = {**FakeDriver.ATTRIBUTES, "MULTIPROCESSOR_COUNT": 132}
    driver.install(monkeypatch)
    use_launch_flavor(monkeypatch, request.param)
    monkeypatch.setenv("OXIDE_CACHE_DIR", str(tmp_path / "cache"))
    for k in (reverse_across_blocks, lp.jacobi_step):
        k.__dict__.pop("_oxide_launchers", None)
    with ox.device(0):
        yield driver


def _record_attributes(fake: FakeDriver) -> list[tuple[int, int]]:
    """Wrap the fake's cuLaunchKernelEx: note each launch's attributes (id, int value),
    then hand it the config without them (the fake accepts none)."""
    from oxide.runtime.cuda_driver import LAUNCH_CONFIG

    seen: list[tuple[int, int]] = []
    inner = fake.launch_ex

    def launch_ex(config: int, fn: int, params: int, extra) -> int:
        fields = list(LAUNCH_CONFIG.unpack(ctypes.string_at(config, LAUNCH_CONFIG.size)))
        attrs, count = fields[8], fields[9]
        for k in range(count):
            ident, value = np.frombuffer(ctypes.string_at(attrs + 72 * k, 12), np.int32)[[0, 2]]
            seen.append((int(ident), int(value)))
        fields[8:10] = [0, 0]
        plain = ctypes.create_string_buffer(LAUNCH_CONFIG.pack(*fields))
        return inner(ctypes.addressof(plain), fn, params, extra)

    fake.launch_ex = launch_ex  # type: ignore[method-assign]
    return seen


def test_grid_sync_launches_are_cooperative(fake: FakeDriver, monkeypatch) -> None:
    from oxide.runtime import gpu

    seen = _record_attributes(fake)
    monkeypatch.setattr(gpu, "blocks_per_sm", lambda fn, threads, smem: 2)
    a, out = ox.empty(1000, ox.i32), ox.empty(1000, ox.i32)
    fake.formats = "QqQq"
    for _ in range(3):
        reverse_across_blocks[8, 128](a, out)
    assert len(fake.launches) == 3 and fake.launches[-1]["grid"] == (8, 1, 1)
    assert seen == [(2, 1)] * 3  # CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 1, on every launch
    # other kernels keep their attribute-free launch
    fake.formats = "QqqQqq"
    x, y = ox.empty((4, 4), ox.f32), ox.empty((4, 4), ox.f32)
    lp.jacobi_step[(1, 1), (4, 4)](x, y)
    assert len(seen) == 3


def test_a_grid_beyond_the_occupancy_is_a_launch_error(fake: FakeDriver, monkeypatch) -> None:
    from oxide.runtime import gpu

    _record_attributes(fake)
    asked: list[tuple[int, int]] = []

    def per_sm(fn, threads: int, smem: int) -> int:
        asked.append((threads, smem))
        return 2
    monkeypatch.setattr(gpu, "blocks_per_sm", per_sm)
    a, out = ox.empty(10, ox.i32), ox.empty(10, ox.i32)
    fake.formats = "QqQq"
    reverse_across_blocks[264, 128](a, out)  # 2 x 132 SMs: fits
    with pytest.raises(ox.LaunchError, match=r"at most 264 \(2 per SM x 132 SMs"):
        reverse_across_blocks[265, 128](a, out)
    assert asked[-1] == (128, 0)
    assert len(fake.launches) == 1
