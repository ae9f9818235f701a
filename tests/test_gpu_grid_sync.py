"""`ox.grid.sync()` on a GPU: cooperative launches, the occupancy limit, and kernels whose
second phase reads what every block wrote in the first (numba's grid-sync examples,
written from what they test). The CPU suite (test_grid_sync.py) has the same kernels.
"""

from __future__ import annotations

import numpy as np
import pytest
import test_grid_sync as tg
from ports import laplace as lp

import oxide as ox
from oxide import DisjointSlice, RawSlice, i32, thread

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _gpu():
    with ox.device(0):
        yield


def _most_blocks(kernel: ox.Kernel, sig: tuple, threads: int) -> int:
    """The largest grid of `threads`-thread blocks that is resident at once."""
    from oxide.runtime import cuda_driver as cd
    from oxide.runtime import gpu

    ck = kernel.compile(*sig, arch=gpu.gpu_device(0).arch)
    gdev = gpu.gpu_device(0)
    gdev.enter()
    module = cd.load_module(ck.cubin)
    fn = cd.get_function(module, ck.name)
    return gpu.blocks_per_sm(fn, threads, 0) * gdev.attribute("MULTIPROCESSOR_COUNT")


@pytest.mark.parametrize("n,threads", [(1000, 128), (1 << 20, 256), (3_000_001, 1024)])
def test_every_block_s_writes_are_seen_after_the_barrier(n: int, threads: int) -> None:
    blocks = min(-(-n // threads), _most_blocks(tg.reverse_across_blocks,
                                                (RawSlice[i32], RawSlice[i32]), threads))
    # a grid-stride version would cover more; these sizes fit the resident grid or are
    # cut to it, so check the part the launch covers
    covered = min(n, blocks * threads)
    a = ox.zeros(covered, ox.i32)
    out = ox.zeros(covered, ox.i32)
    tg.reverse_across_blocks[blocks, threads](a, out)
    np.testing.assert_array_equal(out.to_numpy(),
                                  (np.arange(covered, dtype=np.int32) * 3 + 1)[::-1])


@pytest.mark.parametrize("n,blocks,steps", [(4096, 32, 50), (100_000, 264, 20)])
def test_many_barriers_in_one_launch(n: int, blocks: int, steps: int) -> None:
    a0 = np.random.default_rng(n).integers(-3, 3, n).astype(np.int32)
    a = ox.to_device(a0)
    tg.rounds[blocks, -(-n // blocks)](a, steps)
    np.testing.assert_array_equal(a.to_numpy(), tg._rounds_reference(a0, steps))


def test_relaunches_many_times() -> None:
    # the counter is reused launch after launch; a miscount would hang or mix rounds
    n, blocks = 20_000, 132
    a0 = np.arange(n, dtype=np.int32) % 7
    for steps in (1, 2, 3, 1, 4):
        for _ in range(20):
            a = ox.to_device(a0)
            tg.rounds[blocks, -(-n // blocks)](a, steps)
        np.testing.assert_array_equal(a.to_numpy(), tg._rounds_reference(a0, steps))


@pytest.mark.parametrize("n,blocks", [(1 << 16, 64), (1 << 20, 264)])
def test_two_phase_reduction(n: int, blocks: int) -> None:
    x = np.random.default_rng(5).integers(-8, 8, n).astype(np.float32)
    partial = ox.zeros(blocks, ox.f32)
    total = ox.zeros(blocks * 256, ox.f32)
    tg.block_sums_then_total[blocks, 256](ox.to_device(x), partial, total)
    # the threads cover x[:blocks * 256]; small integers add exactly in f32
    want = np.full(blocks * 256, x[:blocks * 256].sum(dtype=np.float64), np.float32)
    np.testing.assert_array_equal(total.to_numpy(), want)


@pytest.mark.parametrize("rows,cols,steps", [(20, 30, 6), (200, 300, 40)])
def test_laplace_all_steps_in_one_launch(rows: int, cols: int, steps: int) -> None:
    a0 = lp.initial_grid(rows, cols)
    a, b = ox.to_device(a0), ox.to_device(a0)
    lp.natural_grid_sync()[lp._config(a0.shape)](a, b, steps)
    np.testing.assert_array_equal(a.to_numpy(), lp.reference(a0, steps))


@pytest.mark.parametrize("rows,cols,steps", [(20, 30, 7), (200, 300, 41)])
def test_laplace_swapping_names_across_blocks(rows: int, cols: int, steps: int) -> None:
    a0 = lp.initial_grid(rows, cols)
    np.testing.assert_array_equal(tg.solve_swap_grid(a0, steps, 0), lp.reference(a0, steps))


def test_two_dimensional_grid() -> None:
    a = ox.zeros((190, 300), ox.i32)  # 19 x 24 blocks: resident at once on any H100/H200
    out = ox.zeros((190, 300), ox.i32)
    tg.grid_2d[(19, 24), (16, 8)](a, out)
    want = np.arange(190 * 300, dtype=np.int32).reshape(190, 300)[::-1, ::-1]
    np.testing.assert_array_equal(out.to_numpy(), want)


def test_a_grid_beyond_the_occupancy_is_a_launch_error() -> None:
    most = _most_blocks(tg.reverse_across_blocks, (RawSlice[i32], RawSlice[i32]), 1024)
    a = ox.zeros(10, ox.i32)
    with pytest.raises(ox.LaunchError, match=f"at most {most} "):
        tg.reverse_across_blocks[most + 1, 1024](a, ox.zeros(10, ox.i32))
    tg.reverse_across_blocks[most, 1024](a, ox.zeros(10, ox.i32))  # the limit itself runs
    ox.synchronize()


@ox.kernel
def count_blocks(count: ox.AtomicSlice[i32], seen: DisjointSlice[i32]):
    """Each block adds one, then after the barrier every thread reads the full count."""
    i = thread.index_1d()
    if ox.thread_idx.x == 0:
        ox.atomic.add(count, 0, 1)
    ox.grid.sync()
    c = ox.atomic.add(count, 0, 0)
    if i in seen:
        seen[i] = c


def test_atomics_before_the_barrier_are_complete_after_it() -> None:
    blocks = 132 * 2
    count = ox.zeros(1, ox.i32)
    seen = ox.zeros(blocks * 64, ox.i32)
    count_blocks[blocks, 64](count, seen)
    np.testing.assert_array_equal(seen.to_numpy(), np.full(blocks * 64, blocks, np.int32))


def test_f32_results_match_the_cpu() -> None:
    x = np.random.default_rng(9).random(50_000).astype(np.float32)
    cpu_total = np.zeros(64 * 256, np.float32)
    with ox.device("cpu"):
        tg.block_sums_then_total[64, 256](x, np.zeros(64, np.float32), cpu_total)
    total = ox.zeros(64 * 256, ox.f32)
    tg.block_sums_then_total[64, 256](ox.to_device(x), ox.zeros(64, ox.f32), total)
    # block sums are a fixed tree on both targets; the second phase adds them in order
    np.testing.assert_allclose(total.to_numpy(), cpu_total, rtol=1e-6)
