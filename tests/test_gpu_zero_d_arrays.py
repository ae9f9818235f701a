"""0-d arrays on the GPU: tests/test_zero_d_arrays.py's kernels from NumPy arrays, device
arrays and torch's 0-d tensors (passed without a copy)."""

from __future__ import annotations

import numpy as np
import pytest
from test_zero_d_arrays import simt_scale, simt_total, tile_max, tile_total, tile_views

import oxide as ox

pytestmark = pytest.mark.gpu


def test_0d_atomics_and_reads_on_gpu() -> None:
    x = np.arange(1000, dtype=np.float32)
    with ox.device(0):
        out = ox.to_device(np.zeros((), np.float32))
        assert out.shape == ()
        simt_total[8, 128](x, out)
        assert out.to_numpy() == x.sum()
        out = ox.to_device(np.zeros((), np.float32))
        tile_total[8](x, out, 128)
        assert out.to_numpy() == x.sum()
        scaled = np.zeros_like(x)
        simt_scale[8, 128](np.array(0.5, np.float32), x, scaled)
        np.testing.assert_array_equal(scaled, x * 0.5)
        views = np.zeros(6, np.float32)
        tile_views[6](x[:6], views)
        np.testing.assert_array_equal(views, 3 * x[:6])


def test_torch_0d_tensors_on_gpu() -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(300, device="cuda")
    out = torch.zeros((), device="cuda")
    tile_max[1](x, out, 512)
    assert out.item() == x.max().item()
    total = torch.zeros((), device="cuda")
    tile_total[3](x, total, 128)
    torch.testing.assert_close(total, x.sum(), rtol=1e-5, atol=1e-4)
