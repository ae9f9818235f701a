"""Ping-pong (tile/pingpong.py): with OXIDE_TILE_PINGPONG=1 the two consumer warp groups of
a loop whose body is product -> work -> product take turns at the tensor cores. Checked
as compiled for sm_90 (where the named barriers stand in the PTX, and which loops get
none), and run on the CPU as sm_90 runs it (OXIDE_TILE_CPU_HOPPER=1: the barriers are
counted mbarriers there, so an unbalanced protocol would hang) against NumPy: here, and
the attention example's runs in tests/test_tile_attention_rings.py."""

from __future__ import annotations

import re

import numpy as np
import pytest
from test_tile_attention_rings import _ptx
from test_tile_tma_rings import V

import oxide as ox
from oxide import Const, DisjointSlice, Slice, bf16, f32, tile
from oxide.examples import tile_attention as ta

pytest.importorskip("ml_dtypes")

ARRIVE = re.compile(r"^\s*barrier\.arrive\s+(\S+), 256;", re.M)
TURN_SYNC = re.compile(r"^\s*barrier\.sync\s+(%r\d+), 256;", re.M)  # the ids are computed


@pytest.fixture(params=["1", "issue"])
def turns(request, monkeypatch):
    """Both protocols: a turn held from the second product through the next step's first
    (`1`), or over each product's issue alone (`issue`, FlashAttention-3's)."""
    monkeypatch.setenv("OXIDE_TILE_PINGPONG", request.param)
    return request.param


def _body_order(ptx: str) -> list[str]:
    """The wgmma and turn instructions in the order the PTX lists them."""
    marks = re.findall(r"^\s*(wgmma\.(?:fence|commit_group|wait_group)\S*|barrier\.arrive"
                       r"\s+\S+|barrier\.sync\s+%r\d+)", ptx, re.M)
    return [m.split()[0].rstrip(";") if m.startswith("wgmma") else m for m in marks]


def test_attention_takes_turns(monkeypatch) -> None:
    monkeypatch.setenv("OXIDE_TILE_PINGPONG", "1")
    ptx = _ptx(False)
    arrives, syncs = ARRIVE.findall(ptx), TURN_SYNC.findall(ptx)
    # warp group 1's opening arrive on barrier 2; then per loop: the head's pass and the
    # leave's (the other's barrier, computed); the enter's wait and the tail's (its own)
    assert arrives.count("2") == 1 and len(arrives) == 3 and len(syncs) == 2
    order = _body_order(ptx)
    head_commit = order.index("wgmma.commit_group.sync.aligned")
    # the head passes the turn once issued, before waiting for its result
    assert order[head_commit + 1].startswith("barrier.arrive")
    assert order[head_commit + 2].startswith("wgmma.wait_group")
    # the tail waits for the turn just before it is issued
    second_fence = [i for i, m in enumerate(order) if m.startswith("wgmma.fence")][1]
    assert order[second_fence - 1].startswith("barrier.sync")


def test_each_product_takes_its_own_turn(monkeypatch) -> None:
    """OXIDE_TILE_PINGPONG=issue: each product waits for the turn just before its
    `wgmma.fence` and passes it just after its commit, before waiting for its result;
    warp group 1's opening arrive comes once, and nothing waits or passes around the
    loops."""
    monkeypatch.setenv("OXIDE_TILE_PINGPONG", "issue")
    for causal in (False, True):
        ptx = _ptx(causal)
        order = _body_order(ptx)
        fences = [i for i, m in enumerate(order) if m.startswith("wgmma.fence")]
        commits = [i for i, m in enumerate(order) if m.startswith("wgmma.commit")]
        assert len(fences) == len(commits) == (4 if causal else 2)
        assert all(order[i - 1].startswith("barrier.sync") for i in fences)
        assert all(order[i + 1].startswith("barrier.arrive")
                   and order[i + 2].startswith("wgmma.wait_group") for i in commits)
        arrives, syncs = ARRIVE.findall(ptx), TURN_SYNC.findall(ptx)
        assert arrives.count("2") == 1 and len(arrives) == 1 + len(commits)
        assert len(syncs) == len(fences)


def test_each_causal_loop_takes_turns(monkeypatch) -> None:
    """The causal kernel's two loops (the unmasked steps, the diagonal's): each enters and
    leaves; warp group 1 opens once per block."""
    monkeypatch.setenv("OXIDE_TILE_PINGPONG", "1")
    arrives, syncs = ARRIVE.findall(_ptx(True)), TURN_SYNC.findall(_ptx(True))
    assert arrives.count("2") == 1 and len(arrives) == 1 + 2 * 2 and len(syncs) == 2 * 2


def test_turns_are_off_by_default() -> None:
    assert not ARRIVE.findall(_ptx(False))


def test_a_k_loop_takes_no_turns(turns) -> None:
    """A GEMM's K loop has one product a step: nothing to take turns over."""
    from oxide.examples import tile_matmul as tm

    sig = (V(Slice[bf16, 2], vectors=True),) * 2 + (V(DisjointSlice[bf16, 2], vectors=True),)
    ptx = tm.tile_matmul.compile(*sig, 128, 256, 64, arch="sm_90").ptx
    assert "wgmma.mma_async" in ptx and not ARRIVE.findall(ptx)


@tile.kernel(num_warps=8, num_stages=2)
def staged_tail(q: Slice[bf16, 2], k: Slice[bf16, 2], v: Slice[bf16, 2],
                out: DisjointSlice[f32, 2], BM: Const[int], BN: Const[int], D: Const[int]):
    """product -> work -> product, whose second product's B is computed (`v * 2`), so it
    is staged through shared memory behind a barrier of the consumers."""
    i = tile.bid(0)
    qt = tile.load(q, (i, 0), (BM, D))
    acc = tile.zeros((BM, D), f32)
    for j in range(tile.num_tiles(k, 0, BN)):
        s = qt @ tile.load(k, (j, 0), (BN, D)).permute((1, 0))
        p = tile.exp(s - tile.max(s, axis=1, keepdims=True)).astype(bf16)
        acc = tile.mma(p, tile.load(v, (j, 0), (BN, D)) * 2, acc)
    tile.store(out, (i, 0), acc)


def _staged_inputs():
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((256, 64)).astype(bf16.numpy) for _ in range(3))
    return q, k, v


def _staged_reference(q, k, v) -> np.ndarray:
    out = np.zeros((256, 64))
    for i in range(2):
        qt = q[128 * i:128 * i + 128].astype(np.float64)
        for j in range(2):
            s = qt @ k[128 * j:128 * j + 128].astype(np.float64).T
            p = np.exp(s - s.max(1, keepdims=True)).astype(bf16.numpy).astype(np.float64)
            out[128 * i:128 * i + 128] += p @ (2 * v[128 * j:128 * j + 128].astype(np.float64))
    return out


def test_a_loop_with_a_barrier_of_the_consumers_takes_no_turns(turns) -> None:
    """A warp group holding the turn would wait at the barrier for the other, which waits
    for the turn: the kernel is lowered again without turns."""
    sig = (V(Slice[bf16, 2], vectors=True),) * 3 + (V(DisjointSlice[f32, 2], vectors=True),)
    ptx = staged_tail.compile(*sig, 128, 128, 64, arch="sm_90").ptx
    assert "setmaxnreg" in ptx  # a producer warp group, two consumer warp groups
    assert not ARRIVE.findall(ptx) and not TURN_SYNC.findall(ptx)


def test_a_loop_with_a_barrier_runs_on_the_cpus_sm90(turns, monkeypatch) -> None:
    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", "1")
    q, k, v = _staged_inputs()
    out = np.zeros((256, 64), np.float32)
    with ox.device("cpu"):
        d = [ox.to_device(x) for x in (q, k, v, out)]
        ox.launch(staged_tail, 2, *d, 128, 128, 64)
        got = d[3].to_numpy()
    want = _staged_reference(q, k, v)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2 * np.abs(want).max())


@pytest.mark.parametrize("causal", [False, True])
def test_any_length_attention_with_turns_on_the_cpus_sm90(turns, causal, monkeypatch) -> None:
    """The loops take turns; the masked tail step after them (not in a loop) does not,
    and the turns stay balanced across it (the CPU's barriers would hang otherwise)."""
    from test_tile_attention_any_length import _run

    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", "1")
    assert _run(2, 300, 64, causal, (128, 128), 8) < 2e-2
    ptx = ta.tile_attention_any_length.compile(
        *(V(Slice[bf16, 3], vectors=True),) * 3, V(DisjointSlice[bf16, 3], vectors=True),
        np.float32(0.1), 128, 128, 64, causal, arch="sm_90").ptx
    assert ARRIVE.findall(ptx)
