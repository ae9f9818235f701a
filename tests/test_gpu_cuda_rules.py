"""The kernels CUDA defines and oxide now accepts (issue 27 items 1 and 2), on the GPU:
`if tid < 32:` shuffles, a scan whose loop counter is reused, early returns before
`barrier.sync` (the unaligned PTX barrier), checked against NumPy."""

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

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("block", [64, 256, 1024])
def test_reduce4(block: int) -> None:
    blocks = 300
    x = np.random.default_rng(block).standard_normal(blocks * 2 * block - 5).astype(np.float32)
    out = np.zeros(blocks, np.float32)
    d_out = ox.to_device(out)
    reduce4[ox.LaunchConfig(grid=blocks, block=block, shared_mem_bytes=4 * block)](
        ox.to_device(x), d_out)
    np.testing.assert_allclose(d_out.copy_to_host(), reduce4_model(np.pad(x, (0, 5)), blocks,
                                                                   block), rtol=1e-4, atol=1e-3)


def test_reduce4_refuses_partial_warp_rows() -> None:
    with pytest.raises(ox.LaunchError, match="multiple of 32"):
        reduce4[ox.LaunchConfig(grid=1, block=80, shared_mem_bytes=320)](
            ox.to_device(np.ones(160, np.float32)), ox.to_device(np.zeros(1, np.float32)))


@pytest.mark.parametrize("block", [128, 1024])
def test_shfl_scan(block: int) -> None:
    blocks = 40
    data = np.random.default_rng(block).integers(-100, 100, block * blocks).astype(np.int32)
    d = ox.to_device(data)
    sums = ox.to_device(np.zeros(blocks, np.int32))
    shfl_scan[ox.LaunchConfig(grid=blocks, block=block, shared_mem_bytes=4 * 32)](d, 32, sums)
    want = shfl_scan_model(data, block)
    np.testing.assert_array_equal(d.copy_to_host(), want)
    np.testing.assert_array_equal(sums.copy_to_host(), want.reshape(blocks, block)[:, -1])


@pytest.mark.parametrize("n", [1, 100, 128 * 1000 + 77])
def test_early_return_stencil(n: int) -> None:
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    out = ox.to_device(np.zeros(n, np.float32))
    early_return_stencil[(n + 127) // 128, 128](ox.to_device(x), out)
    np.testing.assert_array_equal(out.copy_to_host(), early_return_stencil_model(x))


def test_early_return_then_barrier_many_launches() -> None:
    """Every block ends with returned threads at the barrier; 50 launches must all finish
    and agree (a barrier waiting for exited threads would hang)."""
    n = 1 << 20
    x = ox.to_device(np.arange(n, dtype=np.float32))
    for cut in range(n - 50 * 997, n, 997):
        out = np.full(n, -1.0, np.float32)
        d_out = ox.to_device(out)
        early_return_then_barrier[(n + 255) // 256, 256](x, cut, d_out)
        got = d_out.copy_to_host()
        assert (got[:cut] == 2 * np.arange(cut, dtype=np.float32)).all()
        assert (got[cut:] == -1.0).all()
