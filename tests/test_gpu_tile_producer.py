"""A producer warp group (tile/producer.py) and TMA stores (tile/tma_stores.py) on an
sm_90 GPU, against NumPy: K loops of 2 to 4 stages on 4 and 8 warps, ragged edges in
every dimension, a persistent loop whose producer walks the tiles ahead of the
consumers, epilogues stored through shared memory by TMA (bf16 and f32, clipped at the
edges, a block storing several tiles in turn), and each with the producer turned off."""

from __future__ import annotations

import numpy as np
import pytest
from test_gpu_tile_wgmma import _gpu

from oxide import Const, DisjointSlice, Slice, bf16, f32, i32, tile

pytestmark = pytest.mark.gpu

rng = np.random.default_rng(32)


def make_gemm(out, warps: int, stages: int):
    @tile.kernel(num_warps=warps, num_stages=stages)
    def gemm(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[out, 2],
             BM: Const[int], BN: Const[int], BK: Const[int]):
        i, j = tile.bid(0), tile.bid(1)
        acc = tile.zeros((BM, BN), f32)
        for k in range(tile.num_tiles(a, 1, BK)):
            acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)), acc)
        tile.store(c, (i, j), acc.astype(out))
    return gemm


def make_persistent(out, warps: int, stages: int):
    @tile.kernel(num_warps=warps, num_stages=stages)
    def persistent(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[out, 2],
                   BM: Const[int], BN: Const[int], BK: Const[int]):
        tm, tn = tile.num_tiles(c, 0, BM), tile.num_tiles(c, 1, BN)
        for t in tile.tiles(tm * tn):
            i, j = tile.grouped(t, tm, tn, 4)
            acc = tile.zeros((BM, BN), f32)
            for k in range(tile.num_tiles(a, 1, BK)):
                acc = tile.mma(tile.load(a, (i, k), (BM, BK)),
                               tile.load(b, (k, j), (BK, BN)), acc)
            tile.store(c, (i, j), (acc * 0.5).astype(out))
    return persistent


@tile.kernel(num_warps=8, num_stages=3)
def three_axes(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[f32, 3],
               ids: DisjointSlice[i32, 3], BM: Const[int], BN: Const[int], BK: Const[int]):
    """A grid of three axes: (z + 1) * A @ B into c[z], and what each block sees of its
    indices and of the grid into ids[i, j, z]. Compiled with a producer warp group, it
    walks the logical grid with fewer blocks (tile/persistent_schedule.py)."""
    i, j, z = tile.bid(0), tile.bid(1), tile.bid(2)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(a, 1, BK)):
        acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)), acc)
    tile.store(c, (z, i, j), (acc * (z + 1).astype(f32))[None, :, :])
    seen = (i + 100 * j + 10000 * z + 100000 * tile.num_blocks(0)
            + 10000000 * tile.num_blocks(1) + 100000000 * tile.num_blocks(2))
    tile.store(ids, (i, j, z), tile.full((1, 1, 1), 0, i32) + seen)


def check_three_axes(run, m: int, n: int, k: int, depth: int) -> None:
    """`three_axes` over a (m/128, n/64, depth) grid through `run(grid, *args)`."""
    a = rng.standard_normal((m, k)).astype(bf16.numpy)
    b = rng.standard_normal((k, n)).astype(bf16.numpy)
    c = np.zeros((depth, m, n), np.float32)
    grid = (tile.cdiv(m, 128), tile.cdiv(n, 64), depth)
    ids = np.zeros(grid, np.int32)
    run(grid, a, b, c, ids, 128, 64, 32)
    want = _want(a, b)
    for z in range(depth):
        _close(c[z], (z + 1) * want, f32, k)
    i, j, z = np.meshgrid(*(np.arange(g) for g in grid), indexing="ij")
    gx, gy, gz = grid
    np.testing.assert_array_equal(ids, i + 100 * j + 10000 * z + 100000 * gx
                                  + 10000000 * gy + 100000000 * gz)


def test_a_grid_of_three_axes_walked_by_fewer_blocks() -> None:
    # 8 x 9 x 3 logical blocks, more than the GPU holds at once: each block walks several
    check_three_axes(lambda grid, *args: _gpu(three_axes, grid, *args), 1000, 520, 96, 3)


CASES = [  # out, warps, stages, M, N, K, BM, BN, BK (K a multiple of 8: 16-byte rows)
    (bf16, 8, 3, 520, 776, 648, 128, 256, 64),  # the GEMM shape, ragged everywhere
    (bf16, 8, 4, 256, 512, 1024, 128, 256, 64),  # four stages: out through a slab ring
    (bf16, 8, 4, 300, 520, 200, 128, 256, 64),   # the slab ring at ragged edges
    (bf16, 8, 2, 300, 136, 72, 128, 128, 64),    # two stages, two k steps
    (f32, 4, 3, 130, 200, 96, 64, 64, 32),       # 4 warps (no setmaxnreg), f32 out by TMA
    (bf16, 4, 2, 64, 64, 16, 64, 64, 16),        # one k step: the prologue only
    # loops shorter than the pipeline: the fills issued ahead for steps that do not run
    # are not made, and the producer and the consumers skip them alike
    (bf16, 8, 4, 136, 264, 64, 128, 256, 64),    # one k step of four stages
    (f32, 4, 4, 130, 72, 32, 64, 64, 16),        # two k steps of four stages
]


def _want(a: np.ndarray, b: np.ndarray, scale: float = 1.0) -> np.ndarray:
    return scale * (a.astype(np.float64) @ b.astype(np.float64))


def _close(got: np.ndarray, want: np.ndarray, out, k: int) -> None:
    # bf16 out: one rounding of the f32 sum (8 bits); f32 out: the sum's own error
    rtol = 2.0 ** -7 if out is bf16 else 0.0
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol,
                               atol=1e-4 * np.sqrt(k) * 10)


@pytest.mark.parametrize("producer", ["1", "0"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(x) for x in c))
def test_k_loops_with_and_without_a_producer(case, producer, monkeypatch) -> None:
    monkeypatch.setenv("OXIDE_TILE_PRODUCER", producer)
    out, warps, stages, m, n, k, bm, bn, bk = case
    a = rng.standard_normal((m, k)).astype(bf16.numpy)
    b = rng.standard_normal((k, n)).astype(bf16.numpy)
    c = np.full((m, n), 7, out.numpy)  # every element is written
    _gpu(make_gemm(out, warps, stages), (tile.cdiv(m, bm), tile.cdiv(n, bn)), a, b, c, bm,
         bn, bk)
    _close(c, _want(a, b), out, k)


@pytest.mark.parametrize("producer", ["1", "0"])
@pytest.mark.parametrize("out, warps, stages, tiles", [
    (bf16, 8, 3, (128, 256, 64)), (f32, 4, 3, (64, 128, 64)), (bf16, 8, 2, (128, 128, 64))])
@pytest.mark.parametrize("k", [392, 64])  # 64: one k step per tile, fewer than the stages
def test_a_persistent_loop_stores_each_tile_in_turn(out, warps, stages, tiles, producer, k,
                                                    monkeypatch) -> None:
    # fewer blocks than tiles: each block's producer runs ahead into its next tile while
    # the consumers store the last one through the same shared tile
    monkeypatch.setenv("OXIDE_TILE_PRODUCER", producer)
    m, n = 712, 840
    a = rng.standard_normal((m, k)).astype(bf16.numpy)
    b = rng.standard_normal((k, n)).astype(bf16.numpy)
    c = np.zeros((m, n), out.numpy)
    _gpu(make_persistent(out, warps, stages), 5, a, b, c, *tiles)
    _close(c, _want(a, b, 0.5), out, k)


def test_branches_returns_and_two_loops() -> None:
    # the producer's copy of the body takes the return's branch, the `if` and both loops
    # as the consumers do: C = A[:, :f] @ B[:f] + A[:, f:] @ B[f:] over k steps f and the rest
    from test_tile_producer import two_loops

    m, n, k, first = 300, 200, 456, 3
    a = rng.standard_normal((m, k)).astype(bf16.numpy)
    b = rng.standard_normal((k, n)).astype(bf16.numpy)
    c = np.zeros((m, n), np.float32)
    _gpu(two_loops, (tile.cdiv(m, 128) + 1, tile.cdiv(n, 64)), a, b, c, np.int32(first),
         128, 64, 64)  # one row of blocks past the end: they return at once
    _close(c, _want(a, b), f32, k)


def test_the_example_gemm_neither_spills_nor_serializes_under_the_driver_jit() -> None:
    # the tile_matmul example's sm_90 kernel as the GPU loads it (the driver's whole-program
    # JIT, which honours setmaxnreg): no spills, no wgmma run one at a time
    import sys
    from pathlib import Path

    from oxide.examples import tile_matmul as ex

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tools.ptxas_report import ptxas_report

    a = np.zeros((256, 256), bf16.numpy)
    ck = ex.tile_matmul.compile(a, a, a.copy(), *ex.GPU_TILE, arch="sm_90")
    report = ptxas_report(ck.ptx, ck.arch, jit=True)
    assert (report["spill_stores"], report["spill_loads"]) == (0, 0), report["log"]
    assert "serialized" not in report["log"], report["log"]

