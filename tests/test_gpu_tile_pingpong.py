"""Ping-pong on the GPU (tile/pingpong.py, OXIDE_TILE_PINGPONG=1 and =issue): the attention example's
two consumer warp groups taking turns at the tensor cores, against torch's
scaled_dot_product_attention. Each run is a process of its own with a time limit, so a
protocol that deadlocked would fail the test rather than hang the suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

PROGRAM = '''
import sys
import torch
import oxide as ox
from oxide.examples import tile_attention as ta

d, bn, causal = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
sys.path.insert(0, sys.argv[4])
from test_tile_attention_rings import SIG
torch.manual_seed(d + bn + causal)
b, h, s = 2, 3, 1024
q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
o = torch.zeros_like(q)
flat = [x.view(b * h * s, d) for x in (q, k, v, o)]
ptx = ta.tile_attention.compile(*SIG, s, 1 / d ** 0.5, 128, bn, d, causal, arch="sm_90").ptx
assert "barrier.arrive" in ptx, "no turns were taken"
ox.launch(ta.tile_attention, b * h * s // 128, *flat, s, 1 / d ** 0.5, 128, bn, d, causal)
want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
torch.testing.assert_close(o, want, rtol=2e-2, atol=2e-2)
print("ok")
'''


@pytest.mark.parametrize("protocol", ["1", "issue"])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("d, bn", [(64, 256), (128, 128)])
def test_attention_with_turns_against_torch_sdpa(tmp_path, d, bn, causal, protocol):
    pytest.importorskip("torch")
    script = tmp_path / "turns.py"
    script.write_text(PROGRAM)
    env = {**os.environ, "OXIDE_TILE_PINGPONG": protocol, "OXIDE_CACHE": "0"}
    try:
        done = subprocess.run([sys.executable, str(script), str(d), str(bn), str(int(causal)),
                               str(Path(__file__).parent)],
                              env=env, capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail("attention with turns did not finish in 240 s: the protocol deadlocks")
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
