"""The overlap within a warp group (tile/overlap.py): with OXIDE_TILE_OVERLAP=1 a loop of
product -> work -> product issues step j's first product, then step j - 1's second,
and waits for the first only, so the work overlaps the second. Checked as compiled for
sm_90 (the order of the wgmma instructions), and run on the CPU as sm_90 runs it
(OXIDE_TILE_CPU_HOPPER=1), where the rotated loop must give the very bits of the loop
as written."""

from __future__ import annotations

import re

import numpy as np
import pytest
from test_tile_attention_rings import _ptx
from test_tile_pingpong import _body_order, staged_tail
from test_tile_tma_rings import V

from oxide import DisjointSlice, Slice, bf16, f32
from oxide.examples import tile_attention as ta

pytest.importorskip("ml_dtypes")

COMMIT = "wgmma.commit_group.sync.aligned"


@pytest.fixture
def rotated(monkeypatch):
    monkeypatch.setenv("OXIDE_TILE_OVERLAP", "1")



def test_attention_is_rotated(rotated) -> None:
    order = _body_order(_ptx(False))
    # the head, then the previous step's tail (its own fence, predicated), one commit
    # for it (an empty group where none was pending), a wait that leaves it in flight;
    # the wait for every group where the sum is read; after the loop, the last tail
    assert order.count(COMMIT) == 3
    first = order.index(COMMIT)
    assert order[first + 1].startswith("wgmma.fence")
    assert order[first + 2] == COMMIT
    assert order[first + 3] == "wgmma.wait_group.sync.aligned"
    waits = re.findall(r"wgmma\.wait_group\.sync\.aligned\s+(\d+)", _ptx(False))
    assert "1" in waits


def test_the_pending_tail_is_predicated_not_branched_around(rotated, monkeypatch) -> None:
    """The pending tail's wgmma are guarded by a predicate (`@g`), so its accumulators
    meet at no branch's join; with the roles told apart by a warp-uniform index
    (OXIDE_TILE_UNIFORM_ROLE), nvJitLink's ptxas reports no wgmma serialized for an
    injected warp-group arrive (C7519), which the branch and the divergent role drew."""
    from tools.ptxas_report import ptxas_report

    guarded = re.findall(r"@g wgmma\.mma_async", _ptx(False))
    assert len(guarded) == 2 * 8  # the pending tail in the loop and the last one after it
    monkeypatch.setenv("OXIDE_TILE_UNIFORM_ROLE", "1")
    ptx = _ptx(True)
    assert "shfl.sync.idx.b32" in ptx
    assert "C7519" not in ptxas_report(ptx, "sm_90a")["notes"]


def test_each_causal_loop_is_rotated(rotated) -> None:
    assert _body_order(_ptx(True)).count(COMMIT) == 2 * 3


def test_off_by_default() -> None:
    assert _body_order(_ptx(False)).count(COMMIT) == 2


def test_a_staged_tail_is_not_rotated(rotated) -> None:
    """The second product's B is computed (`v * 2`) and staged by the threads behind a
    barrier: not a ring's buffer that a later step can still read."""
    sig = (V(Slice[bf16, 2], vectors=True),) * 3 + (V(DisjointSlice[f32, 2], vectors=True),)
    ptx = staged_tail.compile(*sig, 128, 128, 64, arch="sm_90").ptx
    assert "setmaxnreg" in ptx and _body_order(ptx).count(COMMIT) == 2


def _attention_bits(causal: bool, d: int) -> np.ndarray:
    rng = np.random.default_rng(7)
    heads, seq = 2, 256
    q, k, v = (rng.standard_normal((heads * seq, d)).astype(bf16.numpy) for _ in range(3))
    o = np.zeros_like(q)
    ta.tile_attention[heads * seq // 128](q, k, v, o, seq, 1 / d ** 0.5, 128, 64, d, causal)
    want = ta.reference(*(x.astype(np.float64) for x in (q, k, v)), heads, causal)
    np.testing.assert_allclose(o.astype(np.float64), want, atol=2e-2)
    return o.view(np.uint16)


@pytest.mark.parametrize("causal", [False, True])
def test_the_rotated_loop_gives_the_same_bits_on_the_cpus_sm90(causal, monkeypatch) -> None:
    # causal: the first block's unmasked loop runs no step (nothing pending after it)
    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", "1")
    as_written = _attention_bits(causal, 64)
    monkeypatch.setenv("OXIDE_TILE_OVERLAP", "1")
    np.testing.assert_array_equal(_attention_bits(causal, 64), as_written)


@pytest.mark.parametrize("causal", [False, True])
def test_any_length_attention_rotated_on_the_cpus_sm90(rotated, causal, monkeypatch) -> None:
    """The loops are rotated; the masked tail step after them (not in a loop) reads the
    sum once the last pending product is done."""
    from test_tile_attention_any_length import _run

    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", "1")
    assert _run(2, 300, 64, causal, (128, 128), 8) < 2e-2
    ptx = ta.tile_attention_any_length.compile(
        *(V(Slice[bf16, 3], vectors=True),) * 3, V(DisjointSlice[bf16, 3], vectors=True),
        np.float32(0.1), 128, 128, 64, causal, arch="sm_90").ptx
    assert _body_order(ptx).count(COMMIT) > 3


def test_rotation_and_turns_together_leave_turns_none(rotated, monkeypatch) -> None:
    """A rotated loop has one product left in its block: ping-pong finds no pair there."""
    monkeypatch.setenv("OXIDE_TILE_PINGPONG", "1")
    assert not re.findall(r"^\s*barrier\.arrive", _ptx(False), re.M)

