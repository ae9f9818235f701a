"""The ports of tests/ports/ on a GPU: the CPU suite's checks (test_ports.py), with sizes
that spread over many blocks and SMs.

threadFenceReduction is where the GPU differs most: blocks really run concurrently, so
the fence, the ticket and the last block's read of the other blocks' partials are
exercised for real (on the CPU the blocks of a launch cannot overtake each other in the
same way). It is launched many times with a reused counter to give a race a chance.
"""

from __future__ import annotations

import numpy as np
import pytest
import test_ports as tp
from ports import laplace as lp
from ports import threadfence_reduction as tf
from ports import warp_aggregated_atomics as wa

import oxide as ox

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _gpu():
    with ox.device(0):
        yield


@pytest.mark.parametrize("rows,cols,steps", [(16, 16, 1), (37, 53, 25), (513, 1025, 50)])
def test_laplace_host_swap(rows: int, cols: int, steps: int) -> None:
    tp.check_laplace_host_swap(rows, cols, steps)


@pytest.mark.parametrize("rows,cols,steps", [(37, 53, 25), (300, 700, 20)])
def test_laplace_in_kernel_workarounds(rows: int, cols: int, steps: int) -> None:
    tp.check_laplace_in_kernel(rows, cols, steps)


@pytest.mark.parametrize("rows,cols,steps", [(37, 53, 5), (300, 700, 8)])
def test_laplace_natural_if_else(rows: int, cols: int, steps: int) -> None:
    # `src = a` / `src = b` in an if/else statement (issue 15 item 2)
    a0 = lp.initial_grid(rows, cols)
    got = lp.solve_in_kernel(lp.natural_if_else(), a0, steps, parity=False)
    np.testing.assert_array_equal(got, lp.reference(a0, steps))


@pytest.mark.parametrize("rows,cols,steps", [(37, 53, 5), (300, 700, 8)])
def test_laplace_natural_ternary(rows: int, cols: int, steps: int) -> None:
    # `src = a if step % 2 == 0 else b`, `dst` the other: reads of the unwritten array
    a0 = lp.initial_grid(rows, cols)
    got = lp.solve_in_kernel(lp.natural_ternary(), a0, steps, parity=False)
    np.testing.assert_array_equal(got, lp.reference(a0, steps))


@pytest.mark.parametrize("rows,cols,steps", [(20, 30, 6), (150, 250, 30)])
def test_laplace_natural_grid_sync(rows: int, cols: int, steps: int) -> None:
    # numba's one-launch form with `ox.grid.this_grid().sync()` (issue 15 item 11)
    a0 = lp.initial_grid(rows, cols)
    a, b = ox.to_device(a0), ox.to_device(a0)
    lp.natural_grid_sync()[lp._config(a0.shape)](a, b, steps)
    np.testing.assert_array_equal(a.copy_to_host(), lp.reference(a0, steps))


def test_warp_aggregated_natural_lane_masks() -> None:
    # `active & ((1 << lane) - 1)`: u32 & i32 is u32 (issue 15 item 13), as on the CPU
    out = ox.zeros(32, ox.i32)
    wa.natural_lane_mask()[1, 32](out)
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(32))


@pytest.mark.parametrize("threads,iterations,seed", [(100, 300, 12345),
                                                     (64 * 1024, 2000, 2 ** 63 + 5)])
def test_monte_carlo_pi_bit_for_bit(threads: int, iterations: int, seed: int) -> None:
    tp.check_monte_carlo(threads, iterations, seed)


def test_xoroshiro_jump() -> None:
    tp.check_jump(300, seed=3)


@pytest.mark.parametrize("n,blocks", [(1, 1), (128 * 5 + 1, 5), (300_001, 64),
                                      (1 << 24, 1024)])
def test_threadfence_reduction(n: int, blocks: int) -> None:
    tp.check_threadfence(n, blocks, seed=n)


@pytest.mark.parametrize("reuse_counter", [True, False])
def test_threadfence_natural_shared_flag(reuse_counter: bool) -> None:
    """The sample's `__shared__ bool amLast` form, barriers under the shared flag."""
    data = np.random.default_rng(2).integers(-1000, 1000, 1 << 18).astype(np.int32)
    blocks = 64
    d_partial = ox.to_device(np.zeros(blocks, np.int32))
    d_count = ox.to_device(np.zeros(1, np.uint32))
    for _ in range(3):
        tf.natural_shared_flag(reuse_counter)[blocks, tf.BLOCK](ox.to_device(data), d_partial,
                                                               d_count)
        assert int(d_partial.copy_to_host()[0]) == int(data.sum(dtype=np.int64))
        assert int(d_count.copy_to_host()[0]) == 0


def test_threadfence_reduction_repeated_launches() -> None:
    """200 launches with one counter on the device: each must give the exact sum and
    leave the counter at 0 (a missing fence or a wrong ticket shows up here)."""
    data = np.random.default_rng(1).integers(-1000, 1000, 1 << 20).astype(np.int32)
    want = int(data.sum(dtype=np.int64))
    blocks = 256
    d_data = ox.to_device(data)
    d_partial = ox.to_device(np.zeros(blocks, np.int32))
    d_count = ox.to_device(np.zeros(1, np.uint32))
    for _ in range(200):
        tf.reduce_single_pass[blocks, tf.BLOCK](d_data, d_partial, d_count)
        assert int(d_partial.copy_to_host()[0]) == want
    assert int(d_count.copy_to_host()[0]) == 0


@pytest.mark.parametrize("n", [2, 32, 256, 1024])
def test_bitonic_sort(n: int) -> None:
    tp.check_bitonic(n, seed=n)


@pytest.mark.parametrize("array_length,segments", [(64, 3), (1024, 512)])
@pytest.mark.parametrize("ascending", [True, False])
def test_bitonic_sort_shared_pairs(array_length: int, segments: int, ascending: bool) -> None:
    tp.check_bitonic_pairs(array_length, segments, ascending, seed=array_length)


@pytest.mark.parametrize("n,blocks,block", [(1000, 1, 32), (100_001, 7, 96),
                                            (1 << 22, 264, 256), (5000, 3, 50)])
def test_warp_aggregated_atomics_cg(n: int, blocks: int, block: int) -> None:
    tp.check_warp_aggregated(wa.filter_arr, n, blocks, block)


@pytest.mark.parametrize("n,blocks,block", [(1000, 1, 32), (1 << 22, 264, 256)])
def test_warp_aggregated_atomics_ballot(n: int, blocks: int, block: int) -> None:
    tp.check_warp_aggregated(wa.filter_arr_ballot, n, blocks, block)


@pytest.mark.parametrize("shape,radius", [((37, 53), 1), ((1000, 1500), 2), ((64, 48), 4)])
def test_stencil_2d(shape: tuple[int, int], radius: int) -> None:
    tp.check_stencil(shape, radius, seed=radius)
