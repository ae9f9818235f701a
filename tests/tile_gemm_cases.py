"""Randomized tile GEMMs with fused epilogues, for the Hopper paths' tests: ragged sizes,
tiles, warps, stages, input and output dtypes and epilogues drawn from a seed, so that
the rings, the producer warp group, the walked grid and the TMA-store epilogue meet in
combinations no hand-written case names. Each case is checked against NumPy in f64.

Used by tests/test_tile_cpu_hopper.py (the CPU's sm_90 code, OXIDE_TILE_CPU_HOPPER=1) and
tests/test_gpu_tile_gemm_cases.py (an sm_90 GPU)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from oxide import Const, DisjointSlice, Slice, bf16, f16, f32, tile

EPILOGUES = ("plain", "bias_relu", "scale_residual")
# (BM, BN, BK, warps): 4 warps are one consumer warp group (64 rows), 8 are two
TILES = ((64, 64, 32, 4), (64, 128, 64, 4), (128, 64, 32, 8), (128, 128, 64, 8))


def make_kernel(in_dt: Any, out_dt: Any, warps: int, stages: int) -> Any:
    """A K loop of products and one of EPILOGUES on the accumulator (its `EPILOGUE`, a
    compile-time choice); "bias_relu" writes its product as `acc += a @ b`, the others
    `tile.mma`."""

    @tile.kernel(num_warps=warps, num_stages=stages)
    def gemm(a: Slice[in_dt, 2], b: Slice[in_dt, 2], bias: Slice[f32], r: Slice[f32, 2],
             c: DisjointSlice[out_dt, 2], BM: Const[int], BN: Const[int], BK: Const[int],
             EPILOGUE: Const[str]):
        i, j = tile.bid(0), tile.bid(1)
        acc = tile.zeros((BM, BN), f32)
        if EPILOGUE == "bias_relu":  # (outside the loop: its loads stay pipelined)
            for k in range(tile.num_tiles(a, 1, BK)):
                acc += tile.load(a, (i, k), (BM, BK)) @ tile.load(b, (k, j), (BK, BN))
        else:
            for k in range(tile.num_tiles(a, 1, BK)):
                acc = tile.mma(tile.load(a, (i, k), (BM, BK)),
                               tile.load(b, (k, j), (BK, BN)), acc)
        if EPILOGUE == "bias_relu":
            acc = tile.maximum(acc + tile.load(bias, (j,), (BN,))[None, :], 0.0)
        elif EPILOGUE == "scale_residual":
            acc = 0.5 * acc + tile.load(r, (i, j), (BM, BN))
        tile.store(c, (i, j), acc.astype(out_dt))
    return gemm


@dataclass(frozen=True)
class Case:
    """One drawn GEMM: C (m x n) = epilogue(A (m x k) @ B (k x n))."""

    seed: int
    epilogue: str
    in_dt: Any
    out_dt: Any
    tiles: tuple[int, int, int]
    warps: int
    stages: int
    m: int
    n: int
    k: int

    def __str__(self) -> str:
        bm, bn, bk = self.tiles
        return (f"seed{self.seed}-{self.epilogue}-{self.in_dt.name}-{self.out_dt.name}-"
                f"{bm}x{bn}x{bk}w{self.warps}s{self.stages}-{self.m}x{self.n}x{self.k}")


def draw(seed: int, big: bool) -> Case:
    """Case `seed`: sizes ragged against the tile (K a multiple of 8: rows of whole 16-byte
    vectors, as TMA needs); `big` allows up to 12 tiles a side (the GPU), else 3."""
    rng = random.Random(seed)
    bm, bn, bk, warps = rng.choice(TILES)
    side = 12 if big else 3
    m = rng.randint(1, side * bm)
    n = 8 * rng.randint(1, side * bn // 8)
    k = 8 * rng.randint(1, (side + 3) * bk // 8)
    return Case(seed, rng.choice(EPILOGUES), rng.choice((bf16, f16)), rng.choice((bf16, f32)),
                (bm, bn, bk), warps, rng.randint(2, 4), m, n, k)


def check(case: Case, run: Any) -> None:
    """Run `case` through `run(kernel, grid, *args)` (it writes the arrays back) and
    compare with NumPy: products of 16-bit floats are exact in f32, so the f32 result
    differs from the f64 sum by its additions' rounding; a bf16 result by one more
    rounding (8 bits)."""
    rng = np.random.default_rng(case.seed)
    bm, bn, bk = case.tiles
    a = rng.standard_normal((case.m, case.k)).astype(case.in_dt.numpy)
    b = rng.standard_normal((case.k, case.n)).astype(case.in_dt.numpy)
    bias = rng.standard_normal(case.n).astype(np.float32)
    r = rng.standard_normal((case.m, case.n)).astype(np.float32)
    c = np.full((case.m, case.n), 7, case.out_dt.numpy)  # every element is written
    kernel = make_kernel(case.in_dt, case.out_dt, case.warps, case.stages)
    run(kernel, (tile.cdiv(case.m, bm), tile.cdiv(case.n, bn)), a, b, bias, r, c, bm, bn, bk,
        case.epilogue)
    acc = a.astype(np.float64) @ b.astype(np.float64)
    if case.epilogue == "bias_relu":
        want = np.maximum(acc + bias.astype(np.float64), 0.0)
    elif case.epilogue == "scale_residual":
        want = 0.5 * acc + r.astype(np.float64)
    else:
        want = acc
    rtol = 2.0 ** -7 if case.out_dt is bf16 else 1e-5
    np.testing.assert_allclose(c.astype(np.float64), want, rtol=rtol,
                               atol=1e-4 * np.sqrt(case.k) * 10, err_msg=str(case))
