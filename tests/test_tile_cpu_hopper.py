"""OXIDE_TILE_CPU_HOPPER=1: tile kernels compiled for the CPU as sm_90 compiles them (wgmma
products, TMA rings filled by a producer warp group, TMA-store epilogues), run on the
CPU's meaning of those instructions against NumPy. The protocol between the producer and
the consumers (mbarrier phases, releases, the persistent loop's restarts) runs here as
the GPU runs it: a deadlock there is one here (a thread waiting on a phase nothing
completes never ends, codegen/hopper_cpu.py). What the CPU cannot show is timing: its
copies land at once and its threads take turns, so a missing wait on an async copy
passes here."""

from __future__ import annotations

import numpy as np
import pytest
from test_gpu_tile_producer import _close, make_gemm, make_persistent
from test_tile_producer import two_loops
from test_tile_tma_stores import _sig

from oxide import bf16, f32, tile
from oxide.codegen.warp_roles import PRODUCER_THREADS, extra_threads, marker_symbol

rng = np.random.default_rng(41)


@pytest.fixture(autouse=True)
def hopper_on_cpu(monkeypatch):
    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", "1")


def _inputs(m: int, n: int, k: int, out):
    a = rng.standard_normal((m, k)).astype(bf16.numpy)
    b = rng.standard_normal((k, n)).astype(bf16.numpy)
    return a, b, np.full((m, n), 7, out.numpy), a.astype(np.float64) @ b.astype(np.float64)


def test_the_cpu_compiles_the_producer_and_the_rings() -> None:
    ck = make_gemm(f32, 4, 3).compile(*_sig(f32), 64, 64, 32, target="cpu")
    code = ck.llvm_unoptimized
    assert marker_symbol(ck.name) in code and "oxide_map" in code
    assert extra_threads(ck.name, marker_symbol(ck.name).encode()) == PRODUCER_THREADS


@pytest.mark.parametrize("producer", ["1", "0", "cp.async"])
@pytest.mark.parametrize("out, warps, stages, m, n, k, tiles", [
    (f32, 4, 3, 130, 200, 96, (64, 64, 32)),   # ragged, three k steps, the f32 out by TMA
    (bf16, 4, 2, 64, 72, 16, (64, 64, 16)),    # one k step: the prologue alone
])
def test_k_loops_against_numpy(out, warps, stages, m, n, k, tiles, producer,
                               monkeypatch) -> None:
    if producer == "cp.async":  # every thread's copies into the rings (made at once here)
        monkeypatch.setenv("OXIDE_TILE_TMA", "0")
    else:
        monkeypatch.setenv("OXIDE_TILE_PRODUCER", producer)
    a, b, c, want = _inputs(m, n, k, out)
    bm, bn, _ = tiles
    make_gemm(out, warps, stages)[tile.cdiv(m, bm), tile.cdiv(n, bn)](a, b, c, *tiles)
    _close(c, want, out, k)


@pytest.mark.parametrize("stages", [2, 3])
def test_a_persistent_loop_restarts_its_rings(stages) -> None:
    # 3 blocks walk 12 tiles: each K loop of 5 steps starts again with its buffers as
    # the last tile left them (and the fills the last loop made past its end)
    a, b, c, want = _inputs(200, 136, 160, f32)
    make_persistent(f32, 4, stages)[3](a, b, c, 64, 64, 32)
    _close(c, 0.5 * want, f32, 160)


def test_branches_returns_and_two_loops() -> None:
    m, n, k, first = 150, 104, 200, 2  # rows of whole 16-byte vectors: rings for both
    a, b, c, want = _inputs(m, n, k, f32)
    c[...] = 0
    two_loops[tile.cdiv(m, 128) + 1, tile.cdiv(n, 64)](a, b, c, np.int32(first), 128, 64, 64)
    _close(c, want, f32, k)
