"""`ox.autotune` and `@ox.tile.kernel(occupancy=N)` on the GPU: a row softmax tuned over
`num_warps` (timed with CUDA events) gives NumPy's answer and is chosen once per key; an
atomic sum on device arrays stays right under `reset_to_zero`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import oxide as ox
import oxide.testing
from oxide import AtomicSlice, Const, DisjointSlice, Slice, f32, i32, thread, tile

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("OXIDE_CACHE_DIR", str(root))
    return root


@tile.kernel
def softmax_rows(x: Slice[f32, 2], out: DisjointSlice[f32, 2], BN: Const[int]):
    row = tile.bid(0)
    t = tile.load(x, (row, 0), (1, BN), padding=-math.inf)
    e = tile.exp(t - tile.max(t, 1, keepdims=True))
    tile.store(out, (row, 0), e / tile.sum(e, 1, keepdims=True))


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_softmax_tuned_over_num_warps_on_gpu(own_cache, monkeypatch):
    timed: list[object] = []
    real = oxide.testing.do_bench

    def counted(fn, *args, **kwargs):
        timed.append(fn)
        return real(fn, *args, **kwargs)

    monkeypatch.setattr(oxide.testing, "do_bench", counted)
    configs = [ox.Config(num_warps=w) for w in (1, 2, 4, 8, 16)]
    tuned = ox.autotune(configs=configs, key=["x"], warmup=5, rep=20)(softmax_rows)
    rows, cols = 4096, 1000
    x = np.random.default_rng(1).standard_normal((rows, cols), dtype=np.float32) * 4
    d_x, d_out = ox.to_device(x), ox.zeros((rows, cols), f32)
    tuned[rows](d_x, d_out, 1024)
    np.testing.assert_allclose(d_out.to_numpy(), softmax(x), rtol=1e-4, atol=1e-7)
    (result,) = tuned.results.values()
    assert not result.failures, result.failures
    assert set(result.times_ms) == set(configs) and len(timed) == len(configs)
    assert result.best == min(result.times_ms, key=result.times_ms.__getitem__)
    (file,) = (own_cache / "autotune").glob("*.json")
    assert "sm_" in json.loads(file.read_text())["device"]

    d_out2 = ox.zeros((rows, cols), f32)
    tuned[rows](d_x, d_out2, 1024)  # the same key: launched at once
    assert len(timed) == len(configs)
    np.testing.assert_allclose(d_out2.to_numpy(), softmax(x), rtol=1e-4, atol=1e-7)
    # another process (here: another tuner) takes the choice from the disk
    again = ox.autotune(configs=configs, key=["x"], warmup=5, rep=20)(softmax_rows)
    assert again.best(d_x, d_out2, 1024) == result.best


def test_atomic_sum_with_reset_to_zero_on_gpu():
    @ox.autotune(configs=[ox.Config(block=64), ox.Config(block=512)], key=["n"],
                 reset_to_zero=["total"], warmup=2, rep=5)
    @ox.kernel
    def add_up(x: Slice[f32], total: AtomicSlice[f32], n: i32):
        i = thread.index_1d()
        if i < n:
            ox.atomic.add(total, 0, x[i])

    n = 1 << 16
    d_x, total = ox.to_device(np.ones(n, np.float32)), ox.zeros(1, f32)
    add_up[lambda c: tile.cdiv(n, c.block)](d_x, total, n)
    assert total.to_numpy()[0] == n


def test_tile_kernel_with_occupancy_runs_on_gpu():
    k = tile.kernel(num_warps=4, occupancy=2)(softmax_rows.fn)
    x = np.random.default_rng(2).standard_normal((33, 100), dtype=np.float32)
    d_out = ox.zeros((33, 100), f32)
    k[33](ox.to_device(x), d_out, 128)
    np.testing.assert_allclose(d_out.to_numpy(), softmax(x), rtol=1e-4, atol=1e-7)


def test_torch_bf16_tensors_are_tuned():
    """A torch bf16 tensor's CUDA array interface says "<V2": the key takes the tensor's
    own dtype (the tuner raised TypeError before)."""
    torch = pytest.importorskip("torch")
    from oxide.examples import tile_softmax

    configs = [ox.Config(num_warps=w) for w in (4, 8)]
    tuned = ox.autotune(configs=configs, key=["x"], warmup=2, rep=5)(tile_softmax.tile_softmax)
    x = torch.randn(256, 1000, device="cuda").to(torch.bfloat16)
    y = torch.empty_like(x)
    ox.launch(tuned, 256, x, y, 1024)
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), 1), rtol=2 ** -7, atol=1e-3)
    assert tuned.best(x, y, 1024) in configs
