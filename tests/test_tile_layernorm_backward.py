"""The layer-norm backward example (issue 31, item 3): dx, dw and db against NumPy on the
CPU at ragged sizes (fewer rows than blocks, rows not a multiple of them, a row shorter
than its tile) and with bf16 inputs; `oxide run` and the GPU run are test_examples.py's."""

from __future__ import annotations

import numpy as np
import pytest

import oxide as ox
from oxide import bf16
from oxide.examples import tile_layernorm_backward as lnb


@pytest.mark.parametrize("rows, cols", [(1, 5), (7, 33), (300, 130)])
@pytest.mark.parametrize("dtype", [np.float32, bf16.numpy])
def test_gradients_match_numpy(rows: int, cols: int, dtype: object) -> None:
    rng = np.random.default_rng(rows * cols)
    x, dy = (rng.standard_normal((rows, cols), dtype=np.float32).astype(dtype)
             for _ in range(2))
    w = rng.standard_normal(cols, dtype=np.float32).astype(dtype)
    mean, rstd, want_dx, want_dw, want_db = lnb.reference(x, w, dy)
    dx, dw, db = np.zeros_like(x), np.zeros_like(w), np.zeros_like(w)
    parts = [np.zeros((lnb.BLOCKS, cols), np.float32) for _ in range(2)]
    with ox.device("cpu"):
        lnb.backward(x, w, dy, mean, rstd, dx, dw, db, *parts, cols)
    tol = 1e-4 if dtype == np.float32 else 2 ** -6
    np.testing.assert_allclose(dx.astype(np.float64), want_dx, rtol=tol, atol=tol)
    np.testing.assert_allclose(dw.astype(np.float64), want_dw, rtol=tol, atol=tol * rows)
    np.testing.assert_allclose(db.astype(np.float64), want_db, rtol=tol, atol=tol * rows)
