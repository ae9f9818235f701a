"""Tile fp8 GEMM: y = (x @ w.T) * scale in f8e4m3 with per-tensor scales, f32 accumulate (ox.tile)."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import Const, DisjointSlice, Slice, bf16, f8e4m3, f32, tile
from oxide.testing import RunResult, check_arch, describe_device, device_arch, seconds_per_launch

E4M3_MAX = 448.0  # the largest finite f8e4m3
# Hopper's tile: 128 x 256 outputs per block of 8 warps (two warp groups, each 64 rows on
# wgmma), k by 128 (one 128-byte row of 8-bit floats), operands by TMA 2 steps ahead;
# elsewhere (older GPUs have no fp8 wgmma: multiply-adds of exact products) and on the
# CPU smaller ones
GPU_TILE = (128, 256, 128)
OTHER_GPU_TILE = (64, 64, 64)
CPU_TILE = (32, 32, 32)


def tiles_for(arch: str | None) -> tuple[int, int, int]:
    """The (BM, BN, BK) of `fp8_linear` on an architecture (None: the CPU)."""
    if arch is None:
        return CPU_TILE
    return GPU_TILE if int(arch[3:].rstrip("a")) >= 90 else OTHER_GPU_TILE


@tile.kernel(num_warps=8)
def quantize(x: Slice[f32, 2], inv_scale: f32, q: DisjointSlice[f8e4m3, 2],
             BM: Const[int], BN: Const[int]):
    """q = x / scale in f8e4m3: rounded to nearest even, saturated at +-448."""
    i, j = tile.bid(0), tile.bid(1)
    tile.store(q, (i, j), (tile.load(x, (i, j), (BM, BN)) * inv_scale).astype(f8e4m3))


@tile.kernel(num_warps=8, num_stages=3)
def fp8_linear(x: Slice[f8e4m3, 2], w: Slice[f8e4m3, 2], scale: f32,
               y: DisjointSlice[bf16, 2], BM: Const[int], BN: Const[int], BK: Const[int]):
    """y = (x @ w.T) * scale for x (M x K) and w (N x K) in f8e4m3, the weight K-major as
    fp8 tensor cores read it (torch._scaled_mm takes it the same way). The products are
    exact in f32; the sums accumulate in f32 (on Hopper's fp8 tensor cores, with fewer
    bits per step: docs/language.md); one rounding to bf16 at the end. A 1-D grid, one
    block per tile of y, in grouped order: 8 tile rows take turns on each column of
    tiles, so the blocks running at once share their w tiles in L2."""
    i, j = tile.grouped_bid(tile.num_tiles(y, 0, BM), tile.num_tiles(y, 1, BN), 8)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(x, 1, BK)):
        acc = tile.mma(tile.load(x, (i, k), (BM, BK)),
                       tile.load(w, (j, k), (BN, BK)).permute((1, 0)), acc)
    tile.store(y, (i, j), (acc * scale).astype(bf16))


def sum_error(k: int, want: np.ndarray) -> float:
    """How far an fp8 product's f32 sums may be from the exact ones: Hopper's fp8 tensor
    cores keep about 13 bits of a running sum's significand from one k32 step to the next
    (measured on the H200: a sum of 144 over K = 1024 off by 0.17), so each of the K / 32
    steps may lose up to 2**-13 of the largest sum. (The CPU's f32 sums are far closer.)
    A missing or repeated step is off by a whole sum of 32 products, far more."""
    return float(np.ceil(k / 32) * 2.0 ** -13 * np.abs(want).max() + 1e-3)


def quantized(a: np.ndarray) -> tuple[np.ndarray, float]:
    """`a` in f8e4m3 with its per-tensor scale (amax / 448), as NumPy rounds it: the
    reference for the `quantize` kernel."""
    scale = float(np.abs(a).max()) / E4M3_MAX or 1.0
    q = np.clip(a.astype(np.float32) * np.float32(1 / scale), -E4M3_MAX, E4M3_MAX)
    return q.astype(f8e4m3.numpy), scale


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """x (`size` x (`size` + 64)) and w ((`size` + 128) x (`size` + 64)) in f32, quantized
    on the device, multiplied in fp8 (timed), against NumPy's product of the same fp8
    values. No dimension is a multiple of its tile unless `size` makes it one."""
    with ox.device(device) as dev:
        m = size or (72 if dev.is_cpu else 4096)
        k, n = m + 64, m + 128
        bm, bn, bk = tiles_for(device_arch(dev))
        rng = np.random.default_rng(8)
        x = rng.standard_normal((m, k), dtype=np.float32)
        w = rng.standard_normal((n, k), dtype=np.float32) * np.float32(0.05)
        xq_want, sx = quantized(x)
        wq_want, sw = quantized(w)
        d_x, d_w = ox.to_device(x), ox.to_device(w)
        d_xq, d_wq = ox.to_device(np.zeros((m, k), f8e4m3.numpy)), ox.to_device(
            np.zeros((n, k), f8e4m3.numpy))
        d_y = ox.to_device(np.zeros((m, n), bf16.numpy))
        qb = CPU_TILE[:2] if dev.is_cpu else (64, 256)
        for src, inv, dst, rows in ((d_x, 1 / sx, d_xq, m), (d_w, 1 / sw, d_wq, n)):
            ox.launch(quantize, (tile.cdiv(rows, qb[0]), tile.cdiv(k, qb[1])), src,
                      np.float32(inv), dst, *qb)
        g = tile.cdiv(m, bm) * tile.cdiv(n, bn)
        seconds = seconds_per_launch(lambda: ox.launch(
            fp8_linear, g, d_xq, d_wq, np.float32(sx * sw), d_y, bm, bn, bk), dev)
        same_q = all(np.array_equal(got.to_numpy().view(np.uint8), want.view(np.uint8))
                     for got, want in ((d_xq, xq_want), (d_wq, wq_want)))
        # the fp8 values' products are exact, so the reference sums them in f64; the
        # kernel's sums (sum_error) and the result's rounding to bf16 differ from it
        sums = xq_want.astype(np.float64) @ wq_want.astype(np.float64).T
        want = sums * (sx * sw)
        got = d_y.to_numpy().astype(np.float64)
        ok = bool(np.all(np.abs(got - want) <= sum_error(k, sums) * (sx * sw)
                         + 2.0 ** -8 * np.abs(want)))
        built = check_arch(fp8_linear, arch, xq_want, wq_want, np.float32(1), np.zeros(
            (m, n), bf16.numpy), *tiles_for(arch))
        detail = "; ".join(filter(None, (built, "" if same_q else
                                         "the quantized inputs differ from NumPy's rounding")))
        return RunResult("tile_fp8_gemm", ok and same_q, describe_device(dev),
                         f"{m:,} x {k:,} x {n:,} f8e4m3 -> f32 accumulate -> bf16", seconds,
                         work=2.0 * m * n * k, unit="GFLOP/s", detail=detail)


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
