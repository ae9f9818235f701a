"""Issue 13's must-prove shared-memory kernels on a GPU, against NumPy: the same kernels,
sizes and references as the CPU suite (test_shared_safety.py), launched on GPU 0, plus
the launch rules, which the GPU runtime checks as the CPU's does."""

from __future__ import annotations

import numpy as np
import pytest
import test_shared_safety as ts

import oxide as ox

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _gpu():
    with ox.device(0):
        yield


@pytest.mark.parametrize(("name", "size"), ts.RUNS)
def test_must_prove_kernel_runs_on_the_gpu(name: str, size: tuple[int, ...]) -> None:
    ts.check_run(name, size)


@pytest.mark.parametrize("seed", range(3))
def test_results_are_stable_across_launches(seed: int) -> None:
    """A race would show as launch-to-launch differences: the scans and the SGEMM give
    the same bits every time (large enough for many blocks in flight)."""
    x = np.random.default_rng(seed).integers(-100, 100, 1 << 18).astype(np.int32)
    outs = []
    for _ in range(3):
        out = np.zeros_like(x)
        ts.blelloch[-(-len(x) // (2 * ts.B)), ts.B](x, out)
        outs.append(out)
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])
    want = np.concatenate([np.cumsum(x[i:i + 2 * ts.B]) - x[i:i + 2 * ts.B]
                           for i in range(0, len(x), 2 * ts.B)])
    np.testing.assert_array_equal(outs[0], want)


def test_large_transpose_and_sgemm() -> None:
    got, want = ts.run_transpose(2049, 1031)
    np.testing.assert_array_equal(got, want)
    got, want = ts.run_sgemm(300, 257, 130)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)


def test_launch_rules_on_the_gpu() -> None:
    x = np.ones(512, np.float32)
    out = np.zeros(4, np.float32)
    with pytest.raises(ox.ArgumentError, match=r"declared with block=256.*block \(128, 1, 1\)"):
        ts.block_sums[2, 128](x, out)
    with pytest.raises(ox.LaunchError, match=r"block_idx\.x; this launch has grid\.y = 2"):
        ts.block_sums[ox.LaunchConfig(grid=(2, 2), block=ts.B)](x, out)
    ts.block_sums[2, ts.B](x, out[:2])
    np.testing.assert_array_equal(out[:2], [256.0, 256.0])


def test_bitonic_sort_on_the_gpu() -> None:
    x = np.random.default_rng(7).standard_normal(300 * 128).astype(np.float32)
    out = np.zeros_like(x)
    ts.bitonic_sort[300, 128](x, out)
    np.testing.assert_array_equal(out, np.sort(x.reshape(300, 128), axis=1).ravel())
