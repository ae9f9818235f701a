"""Attention over sequences of any length (issue 31's masked tail): the example's
`tile_attention_any_length` on (batch x heads, seq, D) arrays, seq not a multiple of the
blocks, causal and not, against NumPy on the CPU (as the CPU compiles it, and as sm_90
does: OXIDE_TILE_CPU_HOPPER=1) and against torch's SDPA on the GPU (`pytest -m gpu`)."""

from __future__ import annotations

import collections
import math
import re

import numpy as np
import pytest

import oxide as ox
from oxide import DisjointSlice, Slice, bf16
from oxide.examples import tile_attention as ta

pytest.importorskip("ml_dtypes")


def _run(heads: int, seq: int, d: int, causal: bool, block: tuple[int, int], seed: int
         ) -> float:
    """The largest error against the f64 reference, on the CPU."""
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((heads, seq, d)).astype(bf16.numpy) for _ in range(3))
    o = np.full_like(q, np.nan)
    bm, bn = block
    ox.launch(ta.tile_attention_any_length, (-(-seq // bm), heads), q, k, v, o,
              np.float32(1 / math.sqrt(d)), bm, bn, d, causal, device="cpu")
    flat = [x.reshape(heads * seq, d) for x in (q, k, v)]
    want = ta.reference(*flat, heads, causal)
    return float(np.abs(o.reshape(heads * seq, d).astype(np.float64) - want).max())


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq", [45, 16, 1, 33])
def test_any_length_on_the_cpu(seq: int, causal: bool) -> None:
    """45: the last query block and the last key block cross the end; 16: they do not;
    1: one row; 33: one row past two whole blocks. Every row written, none past."""
    assert _run(3, seq, 32, causal, (16, 16), seq) < 2e-2


@pytest.mark.parametrize("causal", [False, True])
def test_any_length_on_the_cpus_sm90(causal: bool, monkeypatch) -> None:
    """The code sm_90 gets, run on the CPU, with a GPU's 128 x 128 blocks at D64 over 300
    rows: Q, K and V by TMA from a producer warp group (the tail step's K and V in
    resident buffers), the last query block and the last key block crossing the end."""
    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", "1")
    assert _run(2, 300, 64, causal, (128, 128), 7) < 2e-2


@pytest.mark.parametrize("causal", [False, True])
def test_heads_come_by_tma_from_a_producer_on_sm90(causal: bool) -> None:
    """As compiled for sm_90 (128 x 128 blocks, D64): every copy a 3-d TMA copy of one
    head's box, a producer warp group, no operand staged by the threads; not causal, the
    tail step's K and V have their own (resident) buffers: 7 copies in, causal 9 (its two
    loops' prologues); the output goes out by one 3-d TMA store."""
    from test_tile_tma_rings import V

    sig = (V(Slice[bf16, 3], vectors=True),) * 3 + (V(DisjointSlice[bf16, 3], vectors=True),)
    ptx = ta.tile_attention_any_length.compile(*sig, np.float32(0.1), 128, 128, 64, causal,
                                               arch="sm_90").ptx
    ops = collections.Counter(re.findall(r"^\s*([a-z][\w.:]*)", ptx, re.M))
    copies = {k: v for k, v in ops.items() if k.startswith("cp.async.bulk.tensor")}
    assert set(copies) and all(".3d." in k for k in copies), copies
    loads = sum(v for k, v in copies.items() if ".shared::cluster.global." in k)
    stores = sum(v for k, v in copies.items() if ".global.shared::cta." in k)
    assert (loads, stores) == (9 if causal else 7, 1)
    assert ops["setmaxnreg.dec.sync.aligned.u32"] == 1
    assert not any(k.startswith(("st.shared.v4", "cp.async.cg")) for k in ops)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_any_length_against_torch_sdpa(d: int, causal: bool) -> None:
    """1000 rows a head (not a multiple of 128, 64 or 256), the example's GPU blocks."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs torch with CUDA")
    torch.manual_seed(d + causal)
    b, h, s = 2, 3, 1000
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = torch.full_like(q, float("nan"))
    flat = [x.view(b * h, s, d) for x in (q, k, v, o)]
    bm, bn = ta.gpu_block(d)
    ox.launch(ta.tile_attention_any_length, (-(-s // bm), b * h), *flat, 1 / d ** 0.5, bm, bn,
              d, causal)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(o, want, rtol=2e-2, atol=2e-2)
