"""The tensor-parallel MLP example (issue 30): two processes on the CPU with gloo, checked
against the whole block in one place. Skips where torch is not installed (it is not one
of oxide's dependencies); tests/test_multigpu.py runs it on two GPUs with NCCL."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import oxide as ox
from oxide import bf16, f32
from oxide.examples import tp_mlp


def test_two_processes_with_gloo_match_one_device() -> None:
    pytest.importorskip("torch.distributed")
    done = subprocess.run([sys.executable, "-m", "oxide.examples.tp_mlp", "--spawn", "2",
                           "--cpu", "--size", "48", "64", "96", "--steps", "2"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("PASS") == 2, done.stdout


def test_the_kernels_match_numpy_in_one_process() -> None:
    """The two tile kernels alone, without torch: GELU(x @ w1 + b1) @ w2."""
    rng = np.random.default_rng(3)
    m, d, hidden = 40, 48, 80
    x = rng.standard_normal((m, d)).astype(np.float32)
    w1 = rng.standard_normal((d, hidden)).astype(np.float32) / 7
    b1 = rng.standard_normal(hidden).astype(np.float32)
    w2 = rng.standard_normal((hidden, d)).astype(np.float32) / 9
    h = np.zeros((m, hidden), np.float32)
    y = np.zeros((m, d), np.float32)
    bm, bn, bk = tp_mlp.tiles(gpu=False)
    with ox.device("cpu"):
        ox.launch(tp_mlp.linear_gelu, (-(-m // bm), -(-hidden // bn)), x, w1, b1, h, bm, bn, bk)
        ox.launch(tp_mlp.linear, (-(-m // bm), -(-d // bn)), h, w2, y, bm, bn, bk)
    z = x.astype(np.float64) @ w1 + b1
    want_h = 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z ** 3)))
    np.testing.assert_allclose(h, want_h, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(y, h.astype(np.float64) @ w2, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dt", [f32, bf16])
def test_the_kernels_compile_for_the_gpu(dt) -> None:
    from oxide import DisjointSlice, Slice

    bm, bn, bk = tp_mlp.tiles(gpu=True)
    sig = (Slice[dt, 2], Slice[dt, 2], Slice[dt], DisjointSlice[dt, 2], bm, bn, bk)
    assert tp_mlp.linear_gelu.compile(*sig, arch="sm_90").cubin
