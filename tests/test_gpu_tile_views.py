"""Views of arrays (`arr[i]`, `q[b, h]`) on the GPU, against NumPy: the tiles of a
head, of a batch entry's matrix and of a (batch, head) pair of a rank-4 array; on sm_90
the products' operands by 3-d and 4-d TMA and the results by TMA stores
(tests/test_tile_views.py checks the PTX and runs the same code on the CPU)."""

from __future__ import annotations

import numpy as np
import pytest
from test_gpu_tile_wgmma import _gpu
from test_tile_views import (
    batched_product,
    check_head_products,
    count_per_row,
    per_batch_head,
    per_head,
)

import oxide as ox

pytestmark = pytest.mark.gpu


def test_a_heads_tiles_on_gpu() -> None:
    x = np.arange(3 * 10 * 7, dtype=np.float32).reshape(3, 10, 7)
    out = np.full_like(x, -1.0)
    _gpu(per_head, (3, 3), x, out, 4, 8)
    np.testing.assert_array_equal(out, x * 2 + 7 + 10 * 3)


def test_a_rank_4_array_through_views_on_gpu() -> None:
    x = np.arange(2 * 3 * 10 * 7, dtype=np.float32).reshape(2, 3, 10, 7)
    out = np.zeros_like(x)
    _gpu(per_batch_head, (3, 3, 2), x, out, 4, 8)
    np.testing.assert_array_equal(out, x + 7)


@pytest.mark.parametrize("m, n, k", [(256, 256, 128), (100, 130, 72)])
def test_a_batched_product_through_views_on_gpu(m: int, n: int, k: int) -> None:
    """3 batch entries, whole tiles and ragged ones (the TMA boxes cross each entry's
    edges, never into the next entry)."""
    rng = np.random.default_rng(m)
    a = rng.standard_normal((3, m, k)).astype(ox.bf16.numpy)
    b = rng.standard_normal((3, k, n)).astype(ox.bf16.numpy)
    c = np.zeros((3, m, n), np.float32)
    _gpu(batched_product, (-(-m // 128), -(-n // 128), 3), a, b, c, 128, 128, 64)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4,
                               atol=1e-3)


def test_rank_4_views_product_on_gpu() -> None:
    check_head_products(_gpu)


def test_atomics_through_a_view_on_gpu() -> None:
    x = np.random.default_rng(3).integers(0, 8, (3, 300)).astype(np.int32)
    counts = np.zeros((3, 8), np.int32)
    _gpu(count_per_row, (5, 3), x, counts, 64)
    np.testing.assert_array_equal(counts, np.stack([np.bincount(r, minlength=8) for r in x]))
