"""Issue 14's safety fixes on a real GPU: witness launch shapes and uniform barriers.

Run with `pytest -m gpu`; every test here skips itself where no CUDA GPU is found.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from test_trust_safety import (
    _masked_want,
    _warp_uniform_want,
    bump_1d,
    bump_2d,
    masked_under_lane_branch,
    uniform_barriers,
    warp_uniform_control,
)

import oxide as ox

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def on_gpu() -> Iterator[None]:
    with ox.device(0):
        yield
    ox.synchronize(0)


def test_index_1d_launch_with_block_y_is_refused_and_1d_launch_counts_once() -> None:
    out = ox.zeros(32)
    with pytest.raises(ox.LaunchError, match=r"thread\.index_1d\(\).*block\.y = 4"):
        bump_1d[1, (8, 4)](out)
    with pytest.raises(ox.LaunchError, match=r"grid\.y = 2"):
        bump_1d[(4, 2), 8](out)
    ox.synchronize(0)
    assert not out.to_numpy().any()  # nothing ran
    bump_1d[4, 8](out)
    np.testing.assert_array_equal(out.to_numpy(), np.ones(32, np.float32))


def test_index_2d_launch_with_z_is_refused() -> None:
    out = ox.zeros((8, 8))
    with pytest.raises(ox.LaunchError, match=r"thread\.index_2d\(\).*block\.z = 2"):
        bump_2d[(1, 1), (8, 8, 2)](out)
    bump_2d[(2, 2), (4, 4)](out)
    np.testing.assert_array_equal(out.to_numpy(), np.ones((8, 8), np.float32))


def test_uniform_barriers_run_on_the_gpu() -> None:
    """The kernel the uniformity pass accepts (uniform conditions, a reduction-driven
    loop with barriers) gives the CPU's answer on the GPU."""
    x = (np.arange(4096) % 5).astype(np.float32)
    out = ox.zeros(4096)
    uniform_barriers[16, 256](ox.to_device(x), 2, out)
    sums = x.reshape(16, 256).sum(axis=1)
    sums[2:] = 0.0  # only blocks with block_idx.x < n = 2 take the reduction
    want = np.repeat(sums, 256) + 4.0  # max 4 -> 4 rounds in every block
    np.testing.assert_array_equal(out.to_numpy(), want.astype(np.float32))


def test_full_mask_collectives_under_warp_uniform_control_run_on_the_gpu() -> None:
    """What the warp-uniformity check accepts (warp ids, votes, reductions and lane-0
    broadcasts as conditions) gives the CPU's answer with shfl/vote/redux.sync."""
    block = 64
    x = (np.arange(8 * block) * 7 % 97).astype(np.int32)
    x[::32] = 0
    out = ox.zeros(x.size, ox.i32)
    warp_uniform_control[8, block](ox.to_device(x), 5, out)
    np.testing.assert_array_equal(out.to_numpy(), _warp_uniform_want(x, 5, block))


def test_explicit_masks_under_lane_conditions_run_on_the_gpu() -> None:
    """A ballot mask (and a constant one) names the lanes of a lane-dependent branch;
    the partial last warp of a 40-thread block takes part only with the lanes it has."""
    block = 40
    x = (np.arange(6 * block) * 3 % 50 + 1).astype(np.int32)
    out = ox.zeros(x.size, ox.i32)
    masked_under_lane_branch[6, block](ox.to_device(x), out)
    np.testing.assert_array_equal(out.to_numpy(), _masked_want(x, block))
