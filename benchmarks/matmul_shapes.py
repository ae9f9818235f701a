"""The `tile_matmul` example against cuBLAS over the shapes users run, not only the square
ones issue 26's bar names: few output tiles with a long K (an LLM's decode and small
batches: 16-512 rows against a 4096 x 4096 weight), one wave of tiles, and the fixed cost
of a launch (one 128 x 256 tile, K = 64).

Why: with one block per 128 x 256 output tile, a product with fewer tiles than the GPU
has SMs leaves the rest idle for the whole K loop, where cuBLAS splits K across blocks.
The table says how far that costs, next to the square sizes where the two are level.

Each shape: bf16 in and out, f32 accumulation, inputs random, the result checked against
an f32 product first; GPU time from `simt_bench.gpu_seconds` (CUDA events around launches
queued behind a sleep), the best of `--rounds` measurements of each, oxide and cuBLAS
interleaved. Needs an sm_90 GPU (the example's 128 x 256 x 64 tile runs on wgmma there).

    python benchmarks/matmul_shapes.py [--rounds 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

# (M, N, K): decode-like rows against a 4096 x 4096 weight, an MLP's wide weight, a wave
# of tiles with a short K, the single-tile launch, and the square sizes of issue 26
SHAPES = [(16, 4096, 4096), (64, 4096, 4096), (128, 4096, 4096), (128, 14336, 4096),
          (512, 4096, 4096), (1024, 4096, 4096), (2048, 4096, 4096), (128, 256, 64),
          (128, 256, 4096), (1536, 2816, 64), (1536, 2816, 512), (4096, 4096, 4096)]
TILE = (128, 256, 64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="write the rows here too")
    opts = parser.parse_args()
    os.environ.setdefault("OXIDE_CACHE", "0")

    import torch
    from simt_bench import gpu_seconds

    import oxide as ox
    from oxide import tile
    from oxide.examples.tile_matmul import tile_matmul

    bm, bn, bk = TILE
    rows: list[dict[str, Any]] = []
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    print("| M x N x K | tiles | oxide (us) | cuBLAS (us) | oxide / cuBLAS speed |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        grid = (tile.cdiv(m, bm), tile.cdiv(n, bn))

        def oxide_run(a: Any = a, b: Any = b, c: Any = c, grid: Any = grid) -> None:
            ox.launch(tile_matmul, grid, a, b, c, bm, bn, bk)

        def cublas_run(a: Any = a, b: Any = b, c: Any = c) -> None:
            torch.matmul(a, b, out=c)

        oxide_run()
        torch.cuda.synchronize()
        want = a.float() @ b.float()
        error = float((c.float() - want).abs().max())
        if error > 0.02 * float(want.abs().max()):
            print(f"| {m} x {n} x {k} | wrong result: max |difference| {error:.3g} | | | |")
            continue
        best = {"oxide": float("inf"), "cuBLAS": float("inf")}
        for _ in range(opts.rounds):
            best["oxide"] = min(best["oxide"], gpu_seconds(oxide_run))
            best["cuBLAS"] = min(best["cuBLAS"], gpu_seconds(cublas_run))
        row = {"m": m, "n": n, "k": k, "tiles": grid[0] * grid[1],
               "oxide_us": best["oxide"] * 1e6, "cublas_us": best["cuBLAS"] * 1e6}
        rows.append(row)
        print(f"| {m} x {n} x {k} | {row['tiles']} | {row['oxide_us']:.1f} | "
              f"{row['cublas_us']:.1f} | {best['cuBLAS'] / best['oxide']:.2f}x |", flush=True)
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
