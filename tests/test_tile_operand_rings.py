"""tile/operand_rings.py without a GPU: which product operands take a ring of shared
buffers, what the PTX then holds (cp.async copies, commit groups, their waits, a wgmma
left in flight where a buffer is spare), and where the registers' path stays."""

from __future__ import annotations

import dataclasses
import re

import pytest
from test_gpu_tile_rings import (
    decaying_gemm,
    linear_t,
    make_gemm,
    padded_gemm,
    persistent_gemm,
    sometimes_gemm,
)

from oxide import Const, DisjointSlice, Slice, bf16, f32, tile


def _vectors(t):
    """The array type a launch gives rows of 16-byte vectors (`ArrayType.vectors`)."""
    return dataclasses.replace(t, vectors=True)


SIG = (_vectors(Slice[bf16, 2]), _vectors(Slice[bf16, 2]), _vectors(DisjointSlice[f32, 2]))


@pytest.fixture
def cp_async(monkeypatch) -> None:
    """Rings filled by every thread's cp.async copies, as where TMA cannot map the array
    (a K loop's rings take TMA by default: tests/test_tile_tma_rings.py)."""
    monkeypatch.setenv("OXIDE_TILE_TMA", "0")


def _shared_arrays(ptx: str) -> list[int]:
    return sorted(int(n) for n in re.findall(r"\.shared \.align \d+ \.b8 \w+\[(\d+)\]", ptx))


def test_a_pipelined_loop_copies_into_rings(cp_async) -> None:
    ptx = make_gemm(bf16, 8, 4).compile(*SIG, 128, 256, 64, arch="sm_90").ptx
    # each k step: A 128 x 64 (4 chunks a thread), B 64 x 256 (8); the prologue 3 times
    assert ptx.count("cp.async.cg.shared.global") == 4 * (4 + 8)
    assert ptx.count("cp.async.commit_group") == 4 * 2
    assert "st.shared" not in ptx  # no operand goes through the registers
    # ahead + 1 = 4 buffers of A (16 KiB each) and of B (32 KiB)
    assert _shared_arrays(ptx) == [4 * 16384, 4 * 32768]


def test_a_k_loop_leaves_its_product_in_flight(cp_async) -> None:
    for stages in (2, 3, 4):  # ahead + 1 buffers
        ptx = make_gemm(bf16, 8, stages).compile(*SIG, 128, 256, 64, arch="sm_90").ptx
        assert _shared_arrays(ptx) == [stages * 16384, stages * 32768]
        assert ptx.count("wgmma.wait_group.sync.aligned 1") == 1  # in the loop
        # and the epilogue's read waits for it: after the loop, before the store
        last_wait = ptx.rindex("wgmma.wait_group.sync.aligned 0")
        assert last_wait > ptx.index("wgmma.wait_group.sync.aligned 1")
        assert last_wait < ptx.rindex("st.global")


def _loop_step(ptx: str, waited: str) -> None:
    """In the loop: the copies' wait, a barrier, the wgmma, the wait for a product
    (`waited`), a barrier, then the loop's own copies (the last in the PTX)."""
    loop_copy = ptx.rindex("cp.async.cg.shared.global")
    second = ptx.rindex("bar.sync", 0, loop_copy)
    wait = ptx.rindex("wgmma.wait_group", 0, second)
    assert ptx[wait:].startswith(waited)
    mma = ptx.rindex("wgmma.mma_async", 0, wait)
    first = ptx.rindex("bar.sync", 0, mma)
    assert ptx.rindex("cp.async.wait_group", 0, mma) < first < mma


def test_the_loop_copies_after_the_last_reader_of_their_buffers(cp_async) -> None:
    # the copies overwrite the buffers product k - 1 read: every thread is done with it
    # (wgmma.wait_group 1 leaves only this step's running) at the barrier before them
    ptx = make_gemm(bf16, 8, 3).compile(*SIG, 128, 256, 64, arch="sm_90").ptx
    _loop_step(ptx, "wgmma.wait_group.sync.aligned 1")
    # a result read besides the next product (`* 0.5`): the product is waited for
    ptx = decaying_gemm.compile(*SIG, 128, 256, 64, arch="sm_90").ptx
    assert "wgmma.wait_group.sync.aligned 1" not in ptx
    assert _shared_arrays(ptx) == [3 * 16384, 3 * 32768]
    _loop_step(ptx, "wgmma.wait_group.sync.aligned 0")


def test_the_waits_count_the_groups_committed_since(cp_async) -> None:
    ptx = make_gemm(bf16, 8, 3).compile(*SIG, 128, 256, 64, arch="sm_90").ptx
    waits = {int(n) for n in re.findall(r"cp\.async\.wait_group\s+(\d+);", ptx)}
    assert waits == set(range(8))  # chosen at run time, up to MAX_WAIT


def test_a_transposed_weight_and_a_persistent_loop_take_rings(cp_async) -> None:
    ptx = linear_t.compile(*SIG, 128, 128, 64, arch="sm_90").ptx
    assert ptx.count("cp.async.cg.shared.global") > 0 and "st.shared" not in ptx
    ptx = persistent_gemm.compile(*SIG, 64, 128, 64, arch="sm_90").ptx
    assert ptx.count("cp.async.cg.shared.global") > 0 and "st.shared" not in ptx


def test_what_keeps_the_registers_path(monkeypatch) -> None:
    # padding 1: a copy writes zeros outside the array, so A is staged by the threads;
    # B alone in its ring is filled by TMA from a producer warp group
    ptx = padded_gemm.compile(*SIG, 64, 64, 64, arch="sm_90").ptx
    assert "st.shared" in ptx and "cp.async.bulk.tensor.2d.shared::cluster.global" in ptx
    assert "cp.async.cg.shared.global" not in ptx
    # without TMA, B's ring is filled by each thread's copies
    monkeypatch.setenv("OXIDE_TILE_TMA", "0")
    ptx = padded_gemm.compile(*SIG, 64, 64, 64, arch="sm_90").ptx
    assert "cp.async.cg.shared.global" in ptx and "st.shared" in ptx
    monkeypatch.delenv("OXIDE_TILE_TMA")
    # a product under an `if` in a pipelined loop: some steps pass no product barrier
    ptx = sometimes_gemm.compile(*SIG, 64, 64, 32, arch="sm_90").ptx
    assert "cp.async" not in ptx and "wgmma.mma_async" in ptx
    # rows of unknown alignment (compiled from plain types): no copies at all
    plain = (Slice[bf16, 2], Slice[bf16, 2], DisjointSlice[f32, 2])
    ptx = make_gemm(bf16, 8, 2).compile(*plain, 128, 256, 64, arch="sm_90").ptx
    assert "cp.async" not in ptx and "st.shared" in ptx
    # mma.sync (sm_80) and the CPU keep their own staging
    ptx = make_gemm(bf16, 8, 2).compile(*SIG, 128, 128, 64, arch="sm_80").ptx
    assert "cp.async" not in ptx


@pytest.mark.parametrize("stages", [1, 2, 4])
def test_the_cpu_runs_the_same_kernels(stages) -> None:
    import numpy as np

    rng = np.random.default_rng(stages)
    a = rng.standard_normal((70, 48)).astype(bf16.numpy)
    b = rng.standard_normal((48, 40)).astype(bf16.numpy)
    c = np.zeros((70, 40), np.float32)
    make_gemm(bf16, 4, stages)[(2, 1)](a, b, c, 64, 64, 16)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), atol=1e-3)


@tile.kernel(num_warps=8, num_stages=3)
def gemm_transposed_out(a: Slice[bf16, 2], b: Slice[bf16, 2], ct: DisjointSlice[f32, 2],
                        BM: Const[int], BN: Const[int], BK: Const[int]):
    """C^T: the accumulator permuted through 128 KiB of shared memory after the loop."""
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(a, 1, BK)):
        acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)), acc)
    tile.store(ct, (j, i), acc.permute((1, 0)))


def test_rings_give_way_where_shared_memory_runs_out() -> None:
    # 144 KiB of rings and the permute's 128 KiB do not fit in 227 KiB; the threads'
    # staging (48 KiB) does: the kernel compiles as it did before rings
    ptx = gemm_transposed_out.compile(*SIG, 128, 256, 64, arch="sm_90").ptx
    assert "cp.async" not in ptx and "wgmma.mma_async" in ptx
