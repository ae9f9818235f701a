"""Tile products as users write them, compiled (no template), side by side in one run.

Issue 26's kernels: a bf16 GEMM with a bias + GELU epilogue (against a Triton kernel of
the same math autotuned over 3 configs, and torch), an f16 GEMM against a transposed
(N x K) weight (against cuBLAS through torch), a bf16 weight gradient dW = X^T @ dY (its A
the transpose of a loaded tile; against cuBLAS's `x.T @ dy`), an f8e4m3 GEMM with per-tensor scales
(against torch._scaled_mm, 8192^3), each oxide kernel with its products on
wgmma (the sm_90 default: a K loop's operands by TMA), on wgmma with thread 0 of the kernel's warps issuing the TMA copies
(no producer warp group: OXIDE_TILE_PRODUCER=0), on wgmma with every thread's
cp.async copies (OXIDE_TILE_TMA=0) and on mma.sync (OXIDE_TILE_WGMMA=0), over a few tile
shapes. Also tile_attention on each engine. triton.testing.do_bench medians; inputs random.

    python benchmarks/tile_products.py [--sizes 4096 8192] [--engines wgmma wgmma-cp.async]
        [--parts gelu transposed weight_grad fp8 attention]
"""

from __future__ import annotations

import argparse
import math
import os
from typing import Any

import numpy as np

os.environ.setdefault("OXIDE_CACHE", "0")  # each variant compiled afresh under its engine

import oxide as ox  # noqa: E402
from oxide import Const, DisjointSlice, Slice, TypeVar, bf16, f8e4m3, f32, tile  # noqa: E402

T = TypeVar("T")
C = math.sqrt(2.0 / math.pi)


def make_weight_grad(warps: int, stages: int) -> Any:
    """dW = X^T @ dY (X: tokens x in, dY: tokens x out), the A operand written as the
    transpose of a (BK, BM) tile: read MN-major by wgmma, no transpose in registers."""
    @tile.kernel(num_warps=warps, num_stages=stages)
    def weight_grad(x: Slice[T, 2], dy: Slice[T, 2], dw: DisjointSlice[T, 2],
                    BM: Const[int], BN: Const[int], BK: Const[int]):
        i, j = tile.bid(0), tile.bid(1)
        acc = tile.zeros((BM, BN), f32)
        for k in range(tile.num_tiles(x, 0, BK)):
            acc = tile.mma(tile.load(x, (k, i), (BK, BM)).permute((1, 0)),
                           tile.load(dy, (k, j), (BK, BN)), acc)
        tile.store(dw, (i, j), acc.astype(T))
    return weight_grad


def make_linear_gelu(warps: int, stages: int) -> Any:
    @tile.kernel(num_warps=warps, num_stages=stages)
    def linear_gelu(x: Slice[T, 2], w: Slice[T, 2], b: Slice[T], y: DisjointSlice[T, 2],
                    BM: Const[int], BN: Const[int], BK: Const[int]):
        i, j = tile.bid(0), tile.bid(1)
        acc = tile.zeros((BM, BN), f32)
        for k in range(tile.num_tiles(x, 1, BK)):
            acc = tile.mma(tile.load(x, (i, k), (BM, BK)), tile.load(w, (k, j), (BK, BN)), acc)
        z = acc + tile.load(b, (j,), (BN,)).astype(f32)[None, :]
        tile.store(y, (i, j), (0.5 * z * (1.0 + tile.tanh(C * (z + 0.044715 * z * z * z))))
                   .astype(T))
    return linear_gelu


def make_linear_t(warps: int, stages: int) -> Any:
    @tile.kernel(num_warps=warps, num_stages=stages)
    def linear_t(x: Slice[T, 2], w: Slice[T, 2], y: DisjointSlice[T, 2],
                 BM: Const[int], BN: Const[int], BK: Const[int]):
        i, j = tile.bid(0), tile.bid(1)
        acc = tile.zeros((BM, BN), f32)
        for k in range(tile.num_tiles(x, 1, BK)):
            acc = tile.mma(tile.load(x, (i, k), (BM, BK)),
                           tile.load(w, (j, k), (BN, BK)).permute((1, 0)), acc)
        tile.store(y, (i, j), acc.astype(T))
    return linear_t


def make_fp8_linear(warps: int, stages: int) -> Any:
    @tile.kernel(num_warps=warps, num_stages=stages)
    def fp8_linear(x: Slice[f8e4m3, 2], w: Slice[f8e4m3, 2], scale: f32,
                   y: DisjointSlice[bf16, 2], BM: Const[int], BN: Const[int], BK: Const[int]):
        i, j = tile.bid(0), tile.bid(1)
        acc = tile.zeros((BM, BN), f32)
        for k in range(tile.num_tiles(x, 1, BK)):
            acc = tile.mma(tile.load(x, (i, k), (BM, BK)),
                           tile.load(w, (j, k), (BN, BK)).permute((1, 0)), acc)
        tile.store(y, (i, j), (acc * scale).astype(bf16))
    return fp8_linear


def make_fp8_linear_grouped(warps: int, stages: int) -> Any:
    """The same on a 1-D grid in grouped order (`tile.grouped_bid`, Triton's L2 swizzle:
    GROUP tile rows take turns on each column of tiles)."""
    @tile.kernel(num_warps=warps, num_stages=stages)
    def fp8_linear_grouped(x: Slice[f8e4m3, 2], w: Slice[f8e4m3, 2], scale: f32,
                           y: DisjointSlice[bf16, 2], BM: Const[int], BN: Const[int],
                           BK: Const[int], GROUP: Const[int]):
        i, j = tile.grouped_bid(tile.num_tiles(y, 0, BM), tile.num_tiles(y, 1, BN), GROUP)
        acc = tile.zeros((BM, BN), f32)
        for k in range(tile.num_tiles(x, 1, BK)):
            acc = tile.mma(tile.load(x, (i, k), (BM, BK)),
                           tile.load(w, (j, k), (BN, BK)).permute((1, 0)), acc)
        tile.store(y, (i, j), (acc * scale).astype(bf16))
    return fp8_linear_grouped


FP8_SHAPES = [(128, 256, 128, 8, 3), (128, 256, 128, 8, 4), (128, 128, 128, 8, 4),
              (128, 256, 64, 8, 4)]
FP8_GROUPS = (8, 16)  # the grouped kernel's GROUP, at its best shape
# (BM, BN, BK, num_warps, num_stages): num_stages >= 2 issues each step's loads that many
# steps ahead (on wgmma into rings of shared buffers, tile/operand_rings.py; on mma.sync
# into registers)
SHAPES = [(128, 128, 64, 8, 1), (128, 128, 64, 8, 3), (128, 128, 64, 8, 4),
          (128, 256, 64, 8, 2), (128, 256, 64, 8, 3), (128, 256, 64, 8, 4),
          (128, 256, 32, 8, 4), (64, 256, 64, 4, 4)]
# each engine's settings: wgmma with a K loop's operands by TMA (the sm_90 default: a
# producer warp group, the grid walked by the blocks that fit), the same with one block
# per logical block, without the producer, by every thread's cp.async copies, and mma.sync
ENGINES = {"wgmma": {"OXIDE_TILE_WGMMA": "1", "OXIDE_TILE_TMA": "1",
                     "OXIDE_TILE_PRODUCER": "1", "OXIDE_TILE_PERSISTENT": "1"},
           "wgmma-block-per-tile": {"OXIDE_TILE_WGMMA": "1", "OXIDE_TILE_TMA": "1",
                                    "OXIDE_TILE_PRODUCER": "1", "OXIDE_TILE_PERSISTENT": "0"},
           "wgmma-no-producer": {"OXIDE_TILE_WGMMA": "1", "OXIDE_TILE_TMA": "1",
                                 "OXIDE_TILE_PRODUCER": "0"},
           "wgmma-cp.async": {"OXIDE_TILE_WGMMA": "1", "OXIDE_TILE_TMA": "0"},
           "mma.sync": {"OXIDE_TILE_WGMMA": "0", "OXIDE_TILE_TMA": "1"}}
ENGINE_CHOICE = list(ENGINES)  # --engines


def triton_linear_gelu() -> Any:
    import triton
    import triton.language as tl

    configs = [triton.Config({"BM": bm, "BN": bn, "BK": 64}, num_warps=w, num_stages=s)
               for bm, bn, w, s in ((128, 128, 8, 3), (128, 256, 8, 3), (64, 256, 4, 4))]

    @triton.autotune(configs=configs, key=["M", "N", "K"])
    @triton.jit
    def kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
               BK: tl.constexpr):
        pid_m, pid_n = tl.program_id(0), tl.program_id(1)
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            a = tl.load(x_ptr + rm[:, None] * K + (k + rk)[None, :],
                        mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
            b = tl.load(w_ptr + (k + rk)[:, None] * N + rn[None, :],
                        mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc += tl.dot(a, b)
        z = acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
        inner = 0.7978845608028654 * (z + 0.044715 * z * z * z)
        t = 2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0  # tanh
        y = 0.5 * z * (1.0 + t)
        tl.store(y_ptr + rm[:, None] * N + rn[None, :], y.to(tl.bfloat16),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))

    def run(x: Any, w: Any, b: Any, y: Any) -> None:
        m, k = x.shape
        n = w.shape[1]
        grid = lambda meta: (triton.cdiv(m, meta["BM"]), triton.cdiv(n, meta["BN"]))  # noqa: E731
        kernel[grid](x, w, b, y, m, n, k)

    return run


def attention_rows(do_bench: Any) -> list[tuple[str, float, str]]:
    """tile_attention (B8 H16 S4096 D128 bf16, its GPU block) on each engine, against
    torch SDPA's flash backend; the example module is loaded anew per engine."""
    import importlib

    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    b, h, s, d = 8, 16, 4096, 128
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = torch.empty_like(q)
    flat = [x.view(b * h * s, d) for x in (q, k, v, o)]
    rows = []
    for causal in (False, True):
        flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            flash = do_bench(lambda c=causal: torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=c), return_mode="median")
        rows.append((f"attention S4096 D128{' causal' if causal else ''}  SDPA flash",
                     flops / flash / 1e9, ""))
        for name in ENGINE_CHOICE:
            os.environ.update(ENGINES[name])
            m = importlib.reload(importlib.import_module("oxide.examples.tile_attention"))
            bm, bn = m.gpu_block(d)
            args = (*flat, s, 1 / d ** 0.5, bm, bn, d, causal)
            grid = b * h * s // bm
            ox.launch(m.tile_attention, grid, *args)
            err = float((o - ref).abs().max())
            ms = do_bench(lambda m=m, args=args, grid=grid: ox.launch(m.tile_attention, grid,
                                                                        *args),
                          return_mode="median")
            rows.append((f"attention S4096 D128{' causal' if causal else ''}  oxide {name}",
                         flops / ms / 1e9, f"{flash / ms:.2f}x flash, max err {err:.3f}"))
    return rows


def gelu_rows(n: int, tri: Any, do_bench: Any) -> list[tuple[str, float, str]]:
    """The bf16 GEMM + bias + GELU at n^3: Triton, torch, oxide on both engines."""
    import torch

    x = torch.randn(n, n, device="cuda", dtype=torch.bfloat16) / 8
    w = torch.randn(n, n, device="cuda", dtype=torch.bfloat16) / 8
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    want = torch.nn.functional.gelu(x.float() @ w.float() + b.float(), approximate="tanh")
    y = torch.empty_like(x)
    tri(x, w, b, y)
    triton_ms = do_bench(lambda: tri(x, w, b, y), return_mode="median")
    torch_ms = do_bench(lambda: torch.nn.functional.gelu(torch.addmm(b, x, w),
                                                         approximate="tanh"),
                        return_mode="median")
    rows = [(f"bf16 GEMM+bias+GELU {n}^3  triton (autotuned, 3 configs)",
             tflops(n, triton_ms), ""),
            (f"bf16 GEMM+bias+GELU {n}^3  torch addmm + gelu", tflops(n, torch_ms), "")]
    rows += engine_rows(f"bf16 GEMM+bias+GELU {n}^3", make_linear_gelu, (x, w, b), y, want, n,
                        triton_ms, "triton", do_bench)
    return rows


def transposed_rows(n: int, do_bench: Any) -> list[tuple[str, float, str]]:
    """The f16 GEMM against a transposed (N x K) weight: cuBLAS, oxide on both engines."""
    import torch

    x = torch.randn(n, n, device="cuda", dtype=torch.float16) / 8
    w = torch.randn(n, n, device="cuda", dtype=torch.float16) / 8  # N x K, a Linear's weight
    y = torch.empty_like(x)
    cublas_ms = do_bench(lambda: torch.nn.functional.linear(x, w), return_mode="median")
    rows = [(f"f16 GEMM x @ w.T {n}^3  cuBLAS", tflops(n, cublas_ms), "")]
    want = x.float() @ w.float().T
    return rows + engine_rows(f"f16 GEMM x @ w.T {n}^3", make_linear_t, (x, w), y, want, n,
                              cublas_ms, "cuBLAS", do_bench)


def weight_grad_rows(n: int, do_bench: Any) -> list[tuple[str, float, str]]:
    """The bf16 weight gradient dW = X^T @ dY at n^3: cuBLAS (`x.T @ dy`), oxide on each
    engine."""
    import torch

    x = torch.randn(n, n, device="cuda", dtype=torch.bfloat16) / 8
    dy = torch.randn(n, n, device="cuda", dtype=torch.bfloat16) / 8
    dw = torch.empty_like(x)
    cublas_ms = do_bench(lambda: torch.matmul(x.T, dy, out=dw), return_mode="median")
    rows = [(f"bf16 dW = X^T @ dY {n}^3  cuBLAS", tflops(n, cublas_ms), "")]
    want = x.float().T @ dy.float()
    return rows + engine_rows(f"bf16 dW = X^T @ dY {n}^3", make_weight_grad, (x, dy), dw,
                              want, n, cublas_ms, "cuBLAS", do_bench)


def fp8_rows(n: int, do_bench: Any) -> list[tuple[str, float, str]]:
    """The f8e4m3 GEMM y = (x @ w.T) * scale -> bf16 with per-tensor scales:
    torch._scaled_mm (cuBLAS) and oxide on wgmma (fp8 has no mma.sync engine here)."""
    import torch

    x = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    w = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)  # N x K, K-major
    sx, sw = torch.tensor(0.5, device="cuda"), torch.tensor(0.25, device="cuda")
    scaled = lambda: torch._scaled_mm(x, w.t(), scale_a=sx, scale_b=sw,  # noqa: E731
                                      out_dtype=torch.bfloat16)
    want = scaled().float()
    peer_ms = do_bench(scaled, return_mode="median")
    rows = [(f"fp8 e4m3 GEMM x @ w.T {n}^3  torch._scaled_mm", tflops(n, peer_ms), "")]
    y = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    scale = np.float32(0.125)  # sx * sw
    what = f"fp8 e4m3 GEMM x @ w.T {n}^3"
    rows += engine_rows(what, make_fp8_linear, (x, w, scale), y, want, n, peer_ms,
                        "_scaled_mm", do_bench, FP8_SHAPES,
                        [e for e in ENGINE_CHOICE if e != "mma.sync"])
    bm, bn, bk, warps, stages = FP8_SHAPES[0]
    os.environ.update(ENGINES["wgmma"])
    k = make_fp8_linear_grouped(warps, stages)
    for group in FP8_GROUPS:
        args = (x, w, scale, y, bm, bn, bk, group)
        grid = tile.cdiv(n, bm) * tile.cdiv(n, bn)
        ox.launch(k, grid, *args)
        err = float((y.float() - want).abs().max())
        ms = do_bench(lambda args=args, grid=grid: ox.launch(k, grid, *args),
                      return_mode="median")
        rows.append((f"{what}  oxide grouped {group} {bm}x{bn}x{bk} {warps}w {stages}s",
                     tflops(n, ms), f"{peer_ms / ms:.2f}x _scaled_mm, max err {err:.3f}"))
    return rows


def engine_rows(what: str, make: Any, inputs: tuple[Any, ...], y: Any, want: Any, n: int,
                peer_ms: float, peer: str, do_bench: Any, shapes: list[Any] | None = None,
                engines: list[str] | None = None) -> list[tuple[str, float, str]]:
    """`make(warps)`'s kernel over each tile shape (SHAPES unless given), on each engine
    (ENGINE_CHOICE unless given): checked against `want`, timed, and set beside the
    peer's time."""
    rows = []
    for name in ENGINE_CHOICE if engines is None else engines:
        os.environ.update(ENGINES[name])
        for bm, bn, bk, warps, stages in SHAPES if shapes is None else shapes:
            k = make(warps, stages)
            grid = (tile.cdiv(n, bm), tile.cdiv(n, bn))
            args = (*inputs, y, bm, bn, bk)
            ox.launch(k, grid, *args)
            err = float((y.float() - want).abs().max())
            ms = do_bench(lambda k=k, grid=grid, args=args: ox.launch(k, grid, *args),
                          return_mode="median")
            rows.append((f"{what}  oxide {name} {bm}x{bn}x{bk} {warps}w {stages}s",
                         tflops(n, ms), f"{peer_ms / ms:.2f}x {peer}, max err {err:.3f}"))
    return rows


def tflops(n: int, ms: float) -> float:
    return 2 * n ** 3 / ms / 1e9


PARTS = ("gelu", "transposed", "weight_grad", "fp8", "attention")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--engines", nargs="+", choices=list(ENGINES), default=list(ENGINES))
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    args = parser.parse_args()
    ENGINE_CHOICE[:] = args.engines
    from triton.testing import do_bench

    rows: list[tuple[str, float, str]] = []
    if "gelu" in args.parts:
        tri = triton_linear_gelu()
        for n in args.sizes:
            rows += gelu_rows(n, tri, do_bench)
    if "transposed" in args.parts:
        rows += transposed_rows(4096, do_bench)
    if "weight_grad" in args.parts:
        for n in args.sizes:
            rows += weight_grad_rows(n, do_bench)
    if "fp8" in args.parts:
        rows += fp8_rows(8192, do_bench)
    if "attention" in args.parts:
        rows += attention_rows(do_bench)
    print(f"{'kernel':<62} {'TFLOPS':>8}  notes")
    for name, t, note in rows:
        print(f"{name:<62} {t:>8.1f}  {note}")


if __name__ == "__main__":
    main()
