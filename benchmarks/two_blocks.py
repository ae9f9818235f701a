"""One warp group (4 warps) on sm_90: one block an SM with a producer warp group, or two
blocks an SM without one (OXIDE_TILE_TWO_BLOCKS=1, tile/frontend.py `_may_take_two_blocks`),
side by side with Triton's tutorial kernel at the same configs and with cuBLAS.

Why: Triton's 128 x 128 x 64 tiles on 4 warps at 3 stages take 96 KB of shared memory,
so two blocks share an SM; oxide's took 128 KB (the whole result tile staged for its TMA
store beside the rings) and ran one, at 0.67x Triton's speed (H100, 2026-12-07). The
variants, each compiled in this process with the disk cache off:

- `one block`: the sm_90 default before the switch (a producer warp group, the rings and
  the store's buffers take the whole block's shared memory);
- `one block, no producer`: the same with OXIDE_TILE_PRODUCER=0;
- `two blocks`: OXIDE_TILE_TWO_BLOCKS=1 (no producer; rings and store buffers within
  half the SM's shared memory; where the rings do not fit, the kernel is `one block`);
- `two blocks, stores from registers`: as `two blocks`, the TMA store left out (each
  thread stores its own elements), to see what the store's buffers cost.

Square bf16 products (`--sizes`), and decode steps (16 and 32 rows against a 4096 x 4096
weight, few rows computed transposed). Each figure is the best of `--rounds` GPU-timed
rounds (`simt_bench.gpu_seconds`); every result is checked against torch first.

    python benchmarks/two_blocks.py [--sizes 4096 8192] [--rounds 5] [--quick] [--no-decode]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from compiler_variants import check_product, switched, timed  # noqa: E402

# (label, OXIDE_TILE_TWO_BLOCKS, OXIDE_TILE_PRODUCER, TMA stores)
VARIANTS = [("one block", "0", "1", True), ("one block, no producer", "0", "0", True),
            ("two blocks", "1", "1", True), ("two blocks, stores from registers", "1", "1", False)]
SQUARE_CONFIGS = [(128, 128, 64, 3), (128, 128, 64, 4), (128, 64, 64, 4), (128, 64, 64, 5)]
DECODE_CONFIGS = [(64, 128, 4), (128, 64, 4), (128, 128, 3)]  # (BN, BK, stages), BM = rows


def triton_matmul() -> Any:
    """Triton's tutorial matmul (pointer loads, masks), or None without Triton."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def matmul(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rm = tl.program_id(0) * BM + tl.arange(0, BM)
        rn = tl.program_id(1) * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            ks = k * BK + rk
            x = tl.load(a + rm[:, None] * K + ks[None, :],
                        mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.)
            y = tl.load(b + ks[:, None] * N + rn[None, :],
                        mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.)
            acc = tl.dot(x, y, acc)
        tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))

    return matmul


def oxide_call(m: int, n: int, k: int, tiles: tuple[int, int, int], stages: int,
               a: Any, b: Any, c: Any) -> Callable[[], Any]:
    from oxide import tile
    from oxide.examples.tile_matmul import tile_matmul
    from oxide.tile.kernel import tile_options

    kernel = tile_matmul.with_options(tile_options(4, num_stages=stages))
    grid = (tile.cdiv(m, tiles[0]), tile.cdiv(n, tiles[1]))
    return lambda: kernel[grid](a, b, c, *tiles)


def run_shape(m: int, n: int, k: int, configs: list[tuple[tuple[int, int, int], int]],
              rounds: int, matmul: Any) -> list[tuple[str, float]]:
    """[(row label, seconds)] for cuBLAS, each variant at each config, and Triton."""
    import torch

    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    want = a.float() @ b.float()
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    rows = [("cuBLAS", timed(lambda: torch.matmul(a, b, out=c), rounds))]
    for tiles, stages in configs:
        config = f"{'x'.join(map(str, tiles))} s{stages}"
        for label, two, producer, stores in VARIANTS:
            with switched({"OXIDE_TILE_TWO_BLOCKS": two, "OXIDE_TILE_PRODUCER": producer},
                          stores):
                call = oxide_call(m, n, k, tiles, stages, a, b, c)
                c.zero_()
                call()
            torch.cuda.synchronize()
            check_product(c, want, k, f"{label} {config}")
            rows.append((f"oxide {label}, {config}", timed(call, rounds)))
        if matmul is not None and m >= tiles[0]:
            grid = (-(-m // tiles[0]), -(-n // tiles[1]))
            rows.append((f"Triton {config}", timed(
                lambda tiles=tiles, stages=stages, grid=grid: matmul[grid](
                    a, b, c, m, n, k, *tiles, num_warps=4, num_stages=stages), rounds)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-decode", action="store_true", help="square products only")
    parser.add_argument("--quick", action="store_true",
                        help="128 x 128 x 64 at 3 and 4 stages, and 16-row decode steps")
    opts = parser.parse_args()
    os.environ["OXIDE_CACHE"] = "0"  # variants of one source: nothing shared on disk
    import warnings

    import torch

    from oxide.errors import PerformanceWarning

    warnings.simplefilter("ignore", PerformanceWarning)
    print(torch.cuda.get_device_name(), flush=True)
    matmul = triton_matmul()
    for s in opts.sizes:
        configs = [((bm, bn, bk), st) for bm, bn, bk, st in SQUARE_CONFIGS[:2 if opts.quick else None]]
        rows = run_shape(s, s, s, configs, opts.rounds, matmul)
        for label, t in rows:
            print(f"{s}^3 {label:52s} {t * 1e6:9.1f} us {2 * s ** 3 / t / 1e12:6.0f} TFLOPS "
                  f"{rows[0][1] / t:5.2f}x cuBLAS", flush=True)
    if not opts.no_decode:
        for rows_ in (16,) if opts.quick else (16, 32):
            configs = [((rows_, bn, bk), st) for bn, bk, st in DECODE_CONFIGS]
            rows = run_shape(rows_, 4096, 4096, configs, opts.rounds, None)
            for label, t in rows:
                print(f"{rows_}x4096x4096 {label:52s} {t * 1e6:9.1f} us "
                      f"{rows[0][1] / t:5.2f}x cuBLAS", flush=True)


if __name__ == "__main__":
    main()
