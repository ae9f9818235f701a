"""Attention on sm_90's producer rings (tile/operand_rings.py `producer_only`): K and V each
alone in its product's ring, filled by TMA from a producer warp group, and Q, loaded
outside the loop, one resident buffer the consumers give back only when it is loaded
again. Checked as compiled for sm_90 (PTX), and run on the CPU as sm_90 runs it
(OXIDE_TILE_CPU_HOPPER=1) against NumPy, with the producer and without it."""

from __future__ import annotations

import collections
import math
import re

import numpy as np
import pytest
from test_tile_tma_rings import TMA, V

import oxide as ox
from oxide import Const, DisjointSlice, Slice, bf16, f32, i32, tile
from oxide.examples import tile_attention as ta

pytest.importorskip("ml_dtypes")

SIG = (V(Slice[bf16, 2], vectors=True),) * 3 + (V(DisjointSlice[bf16, 2], vectors=True),)


def _counts(ptx: str) -> collections.Counter[str]:
    return collections.Counter(re.findall(r"^\s*([a-z][\w.:]*)", ptx, re.M))


def _ptx(causal: bool, d: int = 128, bn: int = 128) -> str:
    return ta.tile_attention.compile(*SIG, 4096, np.float32(0.1), 128, bn, d, causal,
                                     arch="sm_90").ptx


def test_k_v_and_q_come_by_tma_from_a_producer() -> None:
    ops = _counts(_ptx(False))
    assert ops["setmaxnreg.dec.sync.aligned.u32"] == 1  # the producer warp group
    # two slabs of 64 columns a tile: Q once, K and V in the pipeline's prologue and in
    # the loop; the producer's copies and nothing the threads stage: Q is read from its
    # resident buffer
    assert ops[TMA] == 2 * (1 + 2 + 2)
    assert not any(k.startswith("st.shared.v4") for k in ops)
    assert not any(k.startswith("cp.async.cg") for k in ops)
    # `p @ v` reads p from registers and V by TMA: no barrier between the products
    assert ops["wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"] == 16


@pytest.mark.parametrize("causal", [False, True])
def test_p_is_packed_before_its_products_chain(causal: bool) -> None:
    """`p @ v` takes p from registers: every bf16 pair is packed before the chain's
    `wgmma.fence`, none between its instructions, where ptxas would have to insert a
    warp-group arrive and, on a path it deems divergent, serialize every wgmma of the
    kernel (its note C7519, found on the H100 in every attention kernel of 2026-12-05)."""
    ptx = _ptx(causal, d=64, bn=128)
    chains = re.findall(r"wgmma\.fence\.sync\.aligned;(.*?)wgmma\.commit_group", ptx, re.S)
    rs = [c for c in chains if re.search(r"m64n\d+k16\.f32\.bf16\.bf16 \{[^}]*\}, \{", c)]
    assert rs and all("cvt.rn.bf16x2" not in c for c in rs)
    from tools.ptxas_report import ptxas_report
    assert "C7519" not in ptxas_report(ptx, "sm_90a")["notes"]


def test_the_causal_mask_is_computed_where_the_scores_are() -> None:
    """The mask's `arange`s and comparison are made in the scores' (wgmma accumulator)
    layout, not in the default one and moved through shared memory every step: the
    causal kernel (two loops) stores and loads no more shared memory than the plain one,
    and passes its barriers as often."""
    def moved(causal: bool) -> dict[str, int]:
        return {k: v for k, v in _counts(_ptx(causal)).items()
                if k.startswith(("st.shared", "ld.shared", "bar.sync", "barrier.sync"))}
    assert moved(True) == moved(False)


def test_the_causal_loops_share_their_rings() -> None:
    """The unmasked steps' loop and the diagonal's load K and V alike: one ring each for
    both loops (and Q one resident buffer for both products), so the causal kernel's
    shared memory is the plain one's, not two loops' worth."""
    def smem(causal: bool) -> int:
        ck = ta.tile_attention.compile(*SIG, 4096, np.float32(0.1), 128, 128, 128, causal,
                                       arch="sm_90")
        return sum(int(n) for n in re.findall(r"\.shared \.align \d+ \.b8 \w+\[(\d+)\]", ck.ptx))
    assert smem(True) == smem(False) > 128 * 128 * 2 * 5


@tile.kernel(num_warps=4)
def masked_product(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[f32, 2],
                   BM: Const[int], BN: Const[int], K: Const[int]):
    """A product's result masked above its diagonal (on mma.sync: sm_80)."""
    i, j = tile.bid(0), tile.bid(1)
    s = tile.load(a, (i, 0), (BM, K)) @ tile.load(b, (0, j), (K, BN))
    rows = i * BM + tile.arange(BM)[:, None]
    cols = j * BN + tile.arange(BN)[None, :]
    tile.store(c, (i, j), tile.where(cols <= rows, s, 0.0))


@tile.kernel(num_warps=4)
def plain_product(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[f32, 2],
                  BM: Const[int], BN: Const[int], K: Const[int]):
    i, j = tile.bid(0), tile.bid(1)
    tile.store(c, (i, j), tile.load(a, (i, 0), (BM, K)) @ tile.load(b, (0, j), (K, BN)))


def test_a_mask_is_remade_in_the_accumulator_layout_on_mma_sync() -> None:
    sig = (Slice[bf16, 2], Slice[bf16, 2], DisjointSlice[f32, 2], 64, 64, 32)

    def shared(kernel) -> dict[str, int]:
        ops = _counts(kernel.compile(*sig, arch="sm_80").ptx)
        return {k: v for k, v in ops.items() if "shared" in k or k.startswith("bar")}
    assert shared(masked_product) == shared(plain_product)


def test_a_remade_mask_means_what_it_meant() -> None:
    rng = np.random.default_rng(5)
    a = rng.standard_normal((128, 32)).astype(bf16.numpy)
    b = rng.standard_normal((32, 128)).astype(bf16.numpy)
    c = np.zeros((128, 128), np.float32)
    with ox.device("cpu"):
        d_c = ox.to_device(c)
        ox.launch(masked_product, (2, 2), ox.to_device(a), ox.to_device(b), d_c, 64, 64, 32)
        got = d_c.to_numpy()
    want = np.tril(a.astype(np.float64) @ b.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@tile.kernel(num_warps=8, num_stages=2)
def stepped_b(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[f32, 2], BM: Const[int],
              BN: Const[int], BK: Const[int]):
    """B's tile index is a name the loop's body changes: that load is not pipelined."""
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((BM, BN), f32)
    kb = i32(0)
    for k in range(tile.num_tiles(a, 1, BK)):
        acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (kb, j), (BK, BN)), acc)
        kb = kb + 1
    tile.store(c, (i, j), acc)


def test_a_loops_load_that_is_not_pipelined_gets_no_resident_ring() -> None:
    """Only a load in none of the kernel's loops (a masked last step's) is made resident
    for a producer: this loop's B load keeps its plain ring, with which the producer is
    refused, as before lone loads had resident rings (no TMA copies in, no setmaxnreg);
    the any-length attention's tail step is the resident case
    (test_tile_attention_any_length.py)."""
    sig = (V(Slice[bf16, 2], vectors=True),) * 2 + (V(DisjointSlice[f32, 2], vectors=True),)
    ops = _counts(stepped_b.compile(*sig, 128, 128, 64, arch="sm_90").ptx)
    assert not any(k.startswith("setmaxnreg") for k in ops)
    assert not any(k.startswith("cp.async.bulk.tensor") and ".shared::cluster.global." in k
                   for k in ops)


@tile.kernel(num_warps=1)
def remade_across_a_loop(x: Slice[i32, 3], y: Slice[f32, 3], out: DisjointSlice[f32, 3],
                         BL: Const[int], BM: Const[int], BN: Const[int]):
    """`rows` (from scalars alone) is remade in the loaded tiles' layout where the loop's
    product reads it, and again after the loop: the loop's copy does not dominate there
    (a tile-fuzz find, seed 55: invalid LLVM IR before copies were shared per block)."""
    i, j, k = tile.bid(0), tile.bid(1), tile.bid(2)
    a = tile.load(x, (i, j, k), (BL, BM, BN))
    b = tile.load(y, (i, j, k), (BL, BM, BN))
    rows = tile.arange(BM)[None, :, None] + j * BM
    for _ in range(1):
        a = a * rows
    tile.store(out, (i, j, k), (rows >> 1).astype(f32) - b + a.astype(f32))


def test_a_value_remade_in_a_loop_is_made_again_after_it() -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(-5, 5, (4, 8, 32)).astype(np.int32)
    y = rng.standard_normal((4, 8, 32)).astype(np.float32)
    out = np.zeros_like(y)
    with ox.device("cpu"):
        remade_across_a_loop[(2, 1, 1)](x, y, out, 2, 8, 32)
    rows = np.arange(8)[None, :, None]
    np.testing.assert_allclose(out, (rows >> 1) - y + x * rows, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("causal, d, env", [
    (True, 64, {}),
    (False, 64, {}),
    (True, 64, {"OXIDE_TILE_PRODUCER": "0"}),  # the same kernel on cp.async rings
    (True, 128, {"OXIDE_TILE_PERSISTENT": "0"}),  # one block per query block
    # the consumer warp groups taking turns (tile/pingpong.py): from one block's loops to
    # the next's, and from the causal kernel's first loop to its second
    (False, 64, {"OXIDE_TILE_PINGPONG": "1"}),
    (True, 64, {"OXIDE_TILE_PINGPONG": "1"}),
    (True, 128, {"OXIDE_TILE_PINGPONG": "1", "OXIDE_TILE_PERSISTENT": "0"}),
    # a turn for each product's issue alone (FlashAttention-3's protocol)
    (False, 128, {"OXIDE_TILE_PINGPONG": "issue"}),
    (True, 64, {"OXIDE_TILE_PINGPONG": "issue"}),
    (True, 128, {"OXIDE_TILE_PINGPONG": "issue", "OXIDE_TILE_PERSISTENT": "0"}),
])
def test_attention_on_the_cpus_sm90(causal, d, env, monkeypatch) -> None:
    """Three query blocks a head, so a causal block runs 1, 2 or 3 steps; the launch
    walks the 6 blocks with fewer, so Q's resident buffer and the rings are reused (and
    with turns, the second warp group's rows are stored only once it wrote them)."""
    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", "1")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    heads, seq = 2, 384
    rng = np.random.default_rng(d + causal)
    q, k, v = (rng.standard_normal((heads * seq, d)).astype(bf16.numpy) for _ in range(3))
    with ox.device("cpu"):
        dq, dk, dv, do = (ox.to_device(x) for x in (q, k, v, np.zeros_like(q)))
        ox.launch(ta.tile_attention, heads * seq // 128, dq, dk, dv, do, seq,
                  np.float32(1 / math.sqrt(d)), 128, 128, d, causal)
        got = do.to_numpy().astype(np.float32)
    np.testing.assert_allclose(got, ta.reference(q, k, v, heads, causal), rtol=2e-2, atol=2e-2)


def test_rings_are_shared_only_by_loops_that_do_not_nest() -> None:
    from oxide.tile.operand_rings import _nested

    assert not _nested((0,), (2,))  # one loop after another
    assert not _nested((0, 1), (0, 3))  # two loops in one outer loop, one after another
    assert _nested((0,), (0, 1))  # a loop and one inside it: fills of both interleave
    assert _nested((4,), (4,))  # the same loop


def _run_ab(kernel, grid, a_shape, b_shape, c_shape, seed: int, bm: int):
    """Random bf16 `a` and `b`, `kernel(a, b, c, bm, 64, 64)` run on the CPU (as sm_90
    runs it, where OXIDE_TILE_CPU_HOPPER is set): a, b and c."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(a_shape).astype(bf16.numpy)
    b = rng.standard_normal(b_shape).astype(bf16.numpy)
    with ox.device("cpu"):
        d_c = ox.to_device(np.zeros(c_shape, np.float32))
        ox.launch(kernel, grid, ox.to_device(a), ox.to_device(b), d_c, bm, 64, 64)
        return a, b, d_c.to_numpy()


@tile.kernel(num_warps=8, num_stages=2)
def reused_a(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[f32, 2],
             BM: Const[int], BN: Const[int], K: Const[int]):
    """A loaded once (a resident ring) feeds a loop's products, left in flight (settled
    after the loop), and one more product after the loop."""
    i, j = tile.bid(0), tile.bid(1)
    at = tile.load(a, (i, 0), (BM, K))
    acc = tile.zeros((BM, BN), f32)
    for t in range(tile.num_tiles(b, 1, BN)):
        acc = tile.mma(at, tile.load(b, (0, t), (K, BN)), acc)
    # padding 1 (never read here): staged by the threads, not a ring of its own
    tile.store(c, (i, j), acc + at @ tile.load(b, (0, j), (K, BN), padding=1.0))


def test_a_resident_operand_outlives_its_loop(monkeypatch) -> None:
    """The loop's last product is settled after the loop (its rings' fills given back),
    but A's fill is still read after it: it goes back only when A is loaded again (the
    next logical block's A, on the CPU's walk of 8 blocks by fewer)."""
    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", "1")
    ck = reused_a.compile(*SIG[:2], V(DisjointSlice[f32, 2], vectors=True), 128, 64, 64,
                          arch="sm_90")
    assert _counts(ck.ptx)["setmaxnreg.dec.sync.aligned.u32"] == 1
    a, b, got = _run_ab(reused_a, (4, 2), (512, 64), (64, 128), (512, 128), 9, 128)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    prods = a64 @ b64
    want = np.tile(prods[:, :64] + prods[:, 64:], (1, 2)) + prods  # the column tiles' sum
    # in every tile, plus the tile's own product
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


@tile.kernel(num_warps=4, num_stages=2)
def nested_loops(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[f32, 2],
                 BM: Const[int], BN: Const[int], K: Const[int]):
    """Two pipelined loops over the same tiles of `b`, one inside the other: their fills
    interleave, so their rings must not be one."""
    i, j = tile.bid(0), tile.bid(1)
    at = tile.load(a, (i, 0), (BM, K))
    acc = tile.zeros((BM, BN), f32)
    for t in range(tile.num_tiles(b, 1, BN)):
        bt = tile.load(b, (0, t), (K, BN))
        acc = tile.mma(at, bt, acc)
        for s in range(t + 1):
            acc = tile.mma(at, tile.load(b, (0, s), (K, BN)), acc)
    tile.store(c, (i, j), acc)


def test_nested_loops_keep_their_own_rings(monkeypatch) -> None:
    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", "1")
    sig = (*SIG[:2], V(DisjointSlice[f32, 2], vectors=True), 64, 64, 64)
    ptx = nested_loops.compile(*sig, arch="sm_90").ptx
    assert TMA in ptx  # a producer fills them
    rings = re.findall(r"\.shared \.align 1024 \.b8 \w+\[(\d+)\]", ptx)
    # A resident (8 KiB) and two rings of two 8 KiB buffers of B: not one shared ring
    assert sorted(int(n) for n in rings) == [8192, 16384, 16384]
    a, b, got = _run_ab(nested_loops, (2, 1), (128, 64), (64, 192), (128, 64), 12, 64)
    tiles = [a.astype(np.float64) @ b[:, 64 * t:64 * t + 64].astype(np.float64)
             for t in range(3)]
    want = sum(tiles) + sum(tiles[s] for t in range(3) for s in range(t + 1))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
