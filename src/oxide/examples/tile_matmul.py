"""Tile matmul: C = A @ B with bf16 tensor cores (f32 accumulate), and exactly in f32 (ox.tile)."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import Const, DisjointSlice, Slice, bf16, f32, tile
from oxide.testing import (
    RunResult,
    check_arch,
    describe_device,
    device_arch,
    seconds_per_launch,
)

# the tiles: on an H100/H200 128 x 256 outputs per block of 8 warps (two warp groups of
# 64 x 256, k by 64: wgmma fed by TMA, docs/performance.md); on other GPUs 128 x 128, k by
# 32 (mma.sync, each warp 32 x 64); on the CPU a smaller one (each thread runs a loop of
# multiply-adds for its own elements: 64 x 64 compiles in 0.7 s on a 2-core VM, 128 x 256
# in 4.4 s, and the example's matrices are small there). A product of few rows (an LLM's
# decode) fills the GPU better with 64-row tiles of 32 or 64 columns, K steps of 128 or
# 256 and 4 or 5 stages: `ox.autotune` over tile shapes, num_warps and num_stages, as
# benchmarks/matmul_shapes.py does, runs 16-128 rows against a 4096 x 4096 weight 2.2-3.4
# times as fast as this tile (H100, docs/performance.md)
GPU_TILE = (128, 256, 64)
OTHER_GPU_TILE = (128, 128, 32)
CPU_TILE = (64, 64, 32)


def tiles_for(arch: str | None) -> tuple[int, int, int]:
    """The (BM, BN, BK) of `tile_matmul` on an architecture (None: the CPU)."""
    if arch is None:
        return CPU_TILE
    return GPU_TILE if int(arch[3:].rstrip("a")) >= 90 else OTHER_GPU_TILE


@tile.kernel(num_warps=8, num_stages=4)
def tile_matmul(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[bf16, 2],
                BM: Const[int], BN: Const[int], BK: Const[int]):
    """Each block owns one BM x BN tile of C. Rows and columns past the edges load as 0,
    so they add nothing, and the store drops them.

    On an H100/H200 the compiler makes it a warp-specialized wgmma GEMM: the loads of
    A and B become TMA copies into a ring of 4 shared buffers (`num_stages=4`) that a
    producer warp group fills, two consumer warp groups multiply on wgmma, the result
    goes out through shared memory by TMA (each warp group its own 64 rows, in slabs of
    64 columns: the rings leave 35 KB), and the
    blocks that fit walk the grid of tiles (docs/architecture.md). Elsewhere the
    accumulator stays in registers across the loop (the mma.sync layout), and the next
    three steps' tiles load while this one multiplies."""
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(a, 1, BK)):
        x = tile.load(a, (i, k), (BM, BK))
        y = tile.load(b, (k, j), (BK, BN))
        acc = tile.mma(x, y, acc)
    tile.store(c, (i, j), acc.astype(bf16))


@tile.kernel(num_warps=8)
def tile_matmul_f32(a: Slice[f32, 2], b: Slice[f32, 2], c: DisjointSlice[f32, 2],
                    BM: Const[int], BN: Const[int], BK: Const[int]):
    """The same loop in f32 with `@`: computed in f32 (multiply-adds, no TF32)."""
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(a, 1, BK)):
        acc = acc + tile.load(a, (i, k), (BM, BK)) @ tile.load(b, (k, j), (BK, BN))
    tile.store(c, (i, j), acc)


def grid(m: int, n: int, bm: int, bn: int) -> tuple[int, int]:
    return tile.cdiv(m, bm), tile.cdiv(n, bn)


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """`size` x (`size` + 24) x (`size` + 8) in bf16 (timed) and in f32, against NumPy.
    No dimension is a multiple of its tile unless `size` makes it one."""
    with ox.device(device) as dev:
        m = size or (136 if dev.is_cpu else 4096)
        k, n = m + 24, m + 8
        bm, bn, bk = tiles_for(device_arch(dev))
        rng = np.random.default_rng(12)
        a32 = rng.standard_normal((m, k), dtype=np.float32)
        b32 = rng.standard_normal((k, n), dtype=np.float32)
        a, b = a32.astype(bf16.numpy), b32.astype(bf16.numpy)
        c = np.zeros((m, n), bf16.numpy)
        c32 = np.zeros((m, n), np.float32)
        d_a, d_b, d_c, d_a32, d_b32, d_c32 = [ox.to_device(arr) for arr in (a, b, c, a32, b32, c32)]
        g = grid(m, n, bm, bn)
        seconds = seconds_per_launch(lambda: ox.launch(tile_matmul, g, d_a, d_b, d_c,
                                                       bm, bn, bk), dev)
        # f32 multiply-adds hold no wgmma accumulator: the mma.sync-sized tile
        fm, fn, fk = CPU_TILE if dev.is_cpu else OTHER_GPU_TILE
        ox.launch(tile_matmul_f32, grid(m, n, fm, fn), d_a32, d_b32, d_c32, fm, fn, fk)
        # the inputs are bf16 exactly, their products exact in f32: the reference is
        # the f32 product of the same values, the result rounded once to bf16
        want = a.astype(np.float32) @ b.astype(np.float32)
        got = d_c.to_numpy().astype(np.float32)
        scale = np.sqrt(k)
        ok_bf16 = np.allclose(got, want, rtol=1e-2, atol=1e-3 * scale)
        want32 = a32.astype(np.float64) @ b32.astype(np.float64)
        ok_f32 = np.allclose(d_c32.to_numpy(), want32, rtol=1e-4, atol=1e-5 * scale)
        detail = "; ".join(filter(None, (check_arch(tile_matmul, arch, a, b, c,
                                                    *tiles_for(arch)),
                                         "" if ok_f32 else "the f32 product differs from NumPy's")))
        return RunResult("tile_matmul", bool(ok_bf16 and ok_f32), describe_device(dev),
                         f"{m:,} x {k:,} x {n:,} bf16 -> f32 accumulate", seconds,
                         work=2.0 * m * n * k, unit="GFLOP/s", detail=detail)


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
