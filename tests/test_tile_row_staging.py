"""A whole row too wide for the registers waits out its reductions in shared memory
(tile/row_staging.py): which slots are staged, the PTX that stages them, that nothing
else is touched, and that the results are bit-identical with and without staging (on the
CPU compiling as sm_90 does, OXIDE_TILE_CPU_HOPPER=1)."""

from __future__ import annotations

import dataclasses
import math
import re
import warnings

import numpy as np
import pytest
from test_tile_tma_rings import V

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, tile
from oxide.examples.tile_layernorm import tile_layernorm
from oxide.examples.tile_softmax import tile_softmax
from oxide.tile import pipeline, row_staging

SOFTMAX_SIG = (V(Slice[f32, 2], vectors=True), V(DisjointSlice[f32, 2], vectors=True))


def _softmax_ptx(bn: int) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ox.PerformanceWarning)
        return tile_softmax.compile(*SOFTMAX_SIG, bn, arch="sm_90").ptx


def _stage_stores(ptx: str) -> list[str]:
    """The 32-bit stores to shared memory: a reduction's cell, or a staged slot."""
    return re.findall(r"st\.shared\.b32\s+\[%rd\d+(?:\+\d+)?\]", ptx)


def _shared_arrays(ptx: str) -> list[int]:
    """The bytes of each shared array the kernel declares."""
    return [int(n) for n in re.findall(r"\.shared \.align \d+ \.b8 \w+\[(\d+)\]", ptx)]


def test_live_budget_follows_the_block_size() -> None:
    assert row_staging.live_budget(32, None) == 64 - row_staging.RESERVED
    assert row_staging.live_budget(8, 4) == 64 - row_staging.RESERVED
    assert row_staging.live_budget(4, None) == 255 - row_staging.RESERVED


def test_a_65536_column_row_stages_a_slice_of_each_reduced_tile() -> None:
    """32 warps, 64 f32 a thread: 24 slots of the row before the maximum and 24 of the
    exponentials before the sum (96 KiB of 1024 threads); each thread's cells are
    `threads` words apart, and sm_90 takes the static shared memory past 48 KiB."""
    ptx = _softmax_ptx(65536)
    stores = _stage_stores(ptx)
    assert len(stores) == 2 + 2 * 24
    assert 24 * 1024 * 4 in _shared_arrays(ptx)  # one array, reused by both stages
    offsets = {int(m) for m in re.findall(r"st\.shared\.b32\s+\[%rd\d+\+(\d+)\]", ptx)}
    assert {k * 4096 for k in range(1, 24)} <= offsets  # slot k at k * 1024 threads * 4 bytes
    assert ".target sm_90a" in ptx  # 96 KiB of static shared memory


def test_rows_that_fit_are_not_staged(monkeypatch) -> None:
    assert len(_stage_stores(_softmax_ptx(8192))) == 2  # the reductions' own cells only
    monkeypatch.setenv("OXIDE_TILE_ROW_STAGING", "0")
    ptx = _softmax_ptx(65536)
    assert len(_stage_stores(ptx)) == 2
    assert max(_shared_arrays(ptx)) <= 128
    assert ".target sm_90\n" in ptx


def test_other_gpus_stage_within_48_kib() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ox.PerformanceWarning)
        ptx = tile_softmax.compile(*SOFTMAX_SIG, 65536, arch="sm_80").ptx
    assert len(_stage_stores(ptx)) == 2 + 2 * 8  # 32 KiB: 8 slots of 1024 threads
    assert 8 * 1024 * 4 in _shared_arrays(ptx)
    assert ".target sm_80" in ptx


def _uncontracted(k: object) -> object:
    """`k`'s body on 32 warps without FMA contraction: the bits then follow from the
    operations alone (a contracting target fuses where the code's shape lets it,
    docs/language.md), so two orders of the same operations must agree bit for bit."""
    fixed = ox.tile.kernel(num_warps=32)(k.fn)  # type: ignore[attr-defined]
    return fixed.with_options(dataclasses.replace(fixed.options, contract=False))


@pytest.mark.parametrize("cols", [65536, 65531])
def test_staged_and_reordered_rows_are_bit_identical(cols: int, monkeypatch) -> None:
    """Softmax and layer norm of a 65536-column tile (full and ragged rows), compiled as
    sm_90 does on the CPU: with staging and without, in the lowering's order and in the
    order that holds fewer values (tile/register_order.py), the same bits (without
    contraction); and the shipped, contracting kernels agree with NumPy."""
    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", "1")
    plans: list[row_staging.StagingPlan] = []

    def recorded(*args: object) -> row_staging.StagingPlan:
        plans.append(row_staging.plan_staging(*args))
        return plans[-1]

    monkeypatch.setattr(pipeline, "plan_staging", recorded)
    rng = np.random.default_rng(cols)
    x = rng.standard_normal((2, cols), dtype=np.float32) * 3
    w, b = (rng.standard_normal(cols, dtype=np.float32) for _ in range(2))
    softmax, layernorm = _uncontracted(tile_softmax), _uncontracted(tile_layernorm)

    def run(soft_k: object = softmax, norm_k: object = layernorm
            ) -> tuple[np.ndarray, np.ndarray]:
        soft, norm = np.zeros_like(x), np.zeros_like(x)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ox.PerformanceWarning)
            ox.launch(soft_k, 2, x, soft, 65536, device="cpu")
            ox.launch(norm_k, 2, x, w, b, norm, np.float32(1e-5), 65536, device="cpu")
        return soft, norm

    staged = run()
    assert [sum(len(s.slots) for st in p.at.values() for s in st) for p in plans] == [48, 48]
    assert all(p.over_budget for p in plans)
    for staging, order in (("0", "1"), ("1", "0"), ("0", "0")):
        monkeypatch.setenv("OXIDE_TILE_ROW_STAGING", staging)
        monkeypatch.setenv("OXIDE_TILE_REGISTER_ORDER", order)
        for a, c in zip(staged, run(), strict=True):
            assert a.tobytes() == c.tobytes(), (staging, order)
    monkeypatch.delenv("OXIDE_TILE_ROW_STAGING")
    monkeypatch.delenv("OXIDE_TILE_REGISTER_ORDER")
    shipped = run(tile_softmax, tile_layernorm)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    for soft in (staged[0], shipped[0]):
        np.testing.assert_allclose(soft, e / e.sum(axis=1, keepdims=True), rtol=1e-4,
                                   atol=1e-9)
    mean = x64.mean(axis=1, keepdims=True)
    want = (x64 - mean) / np.sqrt(((x64 - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    for norm in (staged[1], shipped[1]):
        np.testing.assert_allclose(norm, want * w + b, rtol=1e-4, atol=1e-4)


@ox.tile.kernel(num_warps=32)
def _row_and_transpose(x: Slice[f32, 2], y: Slice[f32, 2], out: DisjointSlice[f32, 2],
                       out_t: DisjointSlice[f32, 2], BN: Const[int]):
    """A 65536-column softmax row beside a 64 x 128 transpose (32 KiB of shared memory
    for the layout conversion)."""
    row = tile.bid(0)
    t = tile.load(x, (row, 0), (1, BN), padding=-math.inf)
    e = tile.exp(t - tile.max(t))
    tile.store(out, (row, 0), e * (1.0 / tile.sum(e)))
    tile.store(out_t, (row, 0), tile.load(y, (0, row), (64, 128)).permute((1, 0)))


def test_staging_gives_way_to_the_kernels_own_shared_memory() -> None:
    """On sm_80 (48 KiB a block) the transpose's 32 KiB leave no room for 32 KiB of staged
    row: the kernel is lowered again without staging (its row spills) instead of being
    refused; on sm_90 both fit (the kernel is compiled for sm_90a)."""
    sig = (Slice[f32, 2], Slice[f32, 2], DisjointSlice[f32, 2], DisjointSlice[f32, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ox.PerformanceWarning)
        on80 = _row_and_transpose.compile(*sig, 65536, arch="sm_80").ptx
        on90 = _row_and_transpose.compile(*sig, 65536, arch="sm_90").ptx
    assert 8 * 1024 * 4 not in _shared_arrays(on80) and sum(_shared_arrays(on80)) <= 48 * 1024
    assert 24 * 1024 * 4 in _shared_arrays(on90) and ".target sm_90a" in on90


def test_rows_staged_in_a_branch_and_a_loop(monkeypatch) -> None:
    """tile_wide_rows' kernels on 32 warps with 65536-column chunks: the whole-row branch
    and the chunk loop each stage their rows (the cells' thread index is made in the entry
    block, which dominates both; made at the first stage, LLVM refused the other), and a
    two-chunk row agrees with NumPy and with the unstaged kernel bit for bit."""
    from oxide.examples import tile_wide_rows as wide

    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", "1")
    blocks: list[set[int]] = []  # of each plan: the blocks of its staged reductions

    def recorded(*args: object) -> row_staging.StagingPlan:
        plan = row_staging.plan_staging(*args)
        blocks.append({id(op.parent_block()) for op in plan.at})
        return plan

    monkeypatch.setattr(pipeline, "plan_staging", recorded)
    softmax = ox.tile.kernel(num_warps=32, num_stages=2)(wide.softmax_rows.fn)
    x = np.random.default_rng(5).standard_normal((2, 2 * 65536 - 3), dtype=np.float32) * 3

    def run() -> np.ndarray:
        out = np.zeros_like(x)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ox.PerformanceWarning)
            ox.launch(softmax, 2, x, out, 65536, device="cpu")
        return out

    staged = run()
    assert len(blocks) == 1 and len(blocks[0]) >= 2
    monkeypatch.setenv("OXIDE_TILE_ROW_STAGING", "0")
    assert staged.tobytes() == run().tobytes()
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    np.testing.assert_allclose(staged, e / e.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-9)
