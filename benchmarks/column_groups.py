"""64-row product tiles on 8 warps on sm_90: the two warp groups split the columns
(tile/mma_choice.py `column_groups`; before, such a product ran on mma.sync), side by
side with the same tile on 4 warps, Triton's tutorial kernel at the same configs on 8 and
4 warps, and cuBLAS.

bf16 `a @ b` (tile_matmul, its canonical loop), square sizes (`--sizes`). Each figure is
the best of `--rounds` GPU-timed rounds (`simt_bench.gpu_seconds`), TFLOPS; every result
is checked against torch first. `--mma-sync` adds the 8-warp tile with the column split
off (OXIDE_TILE_COLUMN_GROUPS=0), the engine it had before.

    python benchmarks/column_groups.py [--sizes 4096 8192] [--rounds 3] [--mma-sync]
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from compiler_variants import check_product, timed  # noqa: E402
from two_blocks import triton_matmul  # noqa: E402

CONFIGS = [(64, 128, 64, 4), (64, 256, 64, 3), (64, 256, 64, 4)]  # (BM, BN, BK, stages)


def bench_size(s: int, variants: list[tuple[str, int, str]], rounds: int, mm: Any) -> None:
    """Every config at s^3: oxide's variants, then Triton on 8 and 4 warps."""
    import torch

    from oxide import tile
    from oxide.examples.tile_matmul import tile_matmul
    from oxide.tile.kernel import tile_options

    a = torch.randn(s, s, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(s, s, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(s, s, device="cuda", dtype=torch.bfloat16)
    want = a.float() @ b.float()

    def tflops(fn: Callable[[], Any]) -> str:
        return f"{2 * s ** 3 / timed(fn, rounds) / 1e12:5.0f}"

    print(f"\n{s}^3 bf16, TFLOPS; cuBLAS {tflops(lambda: torch.matmul(a, b, out=c))}")
    for bm, bn, bk, stages in CONFIGS:
        grid = (tile.cdiv(s, bm), tile.cdiv(s, bn))
        row = []
        for label, warps, split in variants:
            os.environ["OXIDE_TILE_COLUMN_GROUPS"] = split
            k = tile_matmul.with_options(tile_options(warps, None, num_stages=stages))
            c.zero_()
            k[grid](a, b, c, bm, bn, bk)
            torch.cuda.synchronize()
            check_product(c, want, s, label)
            row.append(f"{label} {tflops(lambda k=k, g=grid, t=(bm, bn, bk): k[g](a, b, c, *t))}")
        os.environ.pop("OXIDE_TILE_COLUMN_GROUPS")
        for warps in (8, 4) if mm is not None else ():
            row.append(f"Triton {warps} warps " + tflops(
                lambda w=warps, g=grid, t=(bm, bn, bk), st=stages: mm[g](
                    a, b, c, s, s, s, *t, num_warps=w, num_stages=st)))
        print(f"  {bm}x{bn}x{bk} s{stages}: " + " | ".join(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mma-sync", action="store_true",
                        help="also the 8-warp tile with the column split off")
    args = parser.parse_args()
    os.environ["OXIDE_CACHE"] = "0"  # every variant compiled here
    import torch

    from oxide.errors import PerformanceWarning

    warnings.simplefilter("ignore", PerformanceWarning)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    variants = [("oxide 8 warps", 8, "1"), ("oxide 4 warps", 4, "1")]
    if args.mma_sync:
        variants.insert(1, ("oxide 8 warps, no split (mma.sync)", 8, "0"))
    mm = triton_matmul()
    for s in args.sizes:
        bench_size(s, variants, args.rounds, mm)


if __name__ == "__main__":
    main()
