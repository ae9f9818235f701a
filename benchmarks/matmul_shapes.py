"""The `tile_matmul` example against cuBLAS over the shapes users run, not only the square
ones issue 26's bar names: few output tiles with a long K (an LLM's decode and small
batches: 16-512 rows against a 4096 x 4096 weight), one wave of tiles, and the fixed cost
of a launch (one 128 x 256 tile, K = 64).

Why: with one block per 128 x 256 output tile, a product with fewer tiles than the GPU
has SMs leaves the rest idle for the whole K loop, where cuBLAS splits K across blocks.
The table says how far that costs, next to the square sizes where the two are level,
and what a user gets today by splitting K by hand (`splitk_matmul` below: a third grid
axis takes a share of the K loop each, and the partial tiles meet by relaxed f32 atomic
adds into a zeroed f32 result, on sm_90 one TMA reduction a slab, tile/tma_stores.py;
the time includes that zeroing), as a measure of what a split-K schedule in the compiler
would give.

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
SPLIT_MIN_STEPS = 4  # K steps (of BK) each split keeps at least


def splitk_matmul_kernel() -> Any:
    """A bf16 tile matmul whose grid's third axis splits the K loop: block (i, j, s) runs
    K steps s * STEPS ... (s + 1) * STEPS - 1 of tile (i, j) and adds its partial tile to
    `c` (f32, zeroed first) with relaxed atomics. On sm_90 its operands fill TMA rings
    from a producer warp group, as `tile_matmul`'s do."""
    from oxide import AtomicSlice, Const, Slice, bf16, f32, tile

    @tile.kernel(num_warps=8, num_stages=4)
    def splitk_matmul(a: Slice[bf16, 2], b: Slice[bf16, 2], c: AtomicSlice[f32, 2],
                      BM: Const[int], BN: Const[int], BK: Const[int], STEPS: Const[int]):
        i, j, s = tile.bid(0), tile.bid(1), tile.bid(2)
        acc = tile.zeros((BM, BN), f32)
        for kk in range(STEPS):
            k = s * STEPS + kk
            acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)), acc)
        tile.atomic_add(c, (i, j), acc, sem="relaxed")

    return splitk_matmul


def splits_for(tiles: int, k_steps: int, sms: int) -> int:
    """How many ways to split K: enough blocks to fill the SMs once, each split keeping
    at least SPLIT_MIN_STEPS steps of the loop."""
    return max(1, min(sms // tiles, k_steps // SPLIT_MIN_STEPS))


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
    splitk = splitk_matmul_kernel()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows: list[dict[str, Any]] = []
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    print("| M x N x K | tiles | oxide (us) | cuBLAS (us) | oxide / cuBLAS speed | "
          "split K by hand: ways, us (f32 out) | its speed / cuBLAS |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        grid = (tile.cdiv(m, bm), tile.cdiv(n, bn))

        def oxide_run(a: Any = a, b: Any = b, c: Any = c, grid: Any = grid) -> None:
            ox.launch(tile_matmul, grid, a, b, c, bm, bn, bk)

        def cublas_run(a: Any = a, b: Any = b, c: Any = c) -> None:
            torch.matmul(a, b, out=c)

        k_steps = tile.cdiv(k, bk)
        splits = splits_for(grid[0] * grid[1], k_steps, sms)
        steps = tile.cdiv(k_steps, splits)
        c32 = torch.empty(m, n, device="cuda", dtype=torch.float32)

        def splitk_run(a: Any = a, b: Any = b, c32: Any = c32, grid: Any = grid,
                       splits: int = splits, steps: int = steps) -> None:
            c32.zero_()
            ox.launch(splitk, (*grid, splits), a, b, c32, bm, bn, bk, steps)

        oxide_run()
        torch.cuda.synchronize()
        want = a.float() @ b.float()
        error = float((c.float() - want).abs().max())
        splitk_run()
        torch.cuda.synchronize()
        error = max(error, float((c32 - want).abs().max()))
        if error > 0.02 * float(want.abs().max()):
            print(f"| {m} x {n} x {k} | wrong result: max |difference| {error:.3g} | | | | | |")
            continue
        runs = {"oxide": oxide_run, "cuBLAS": cublas_run, "split": splitk_run}
        best = dict.fromkeys(runs, float("inf"))
        for _ in range(opts.rounds):
            for name, run in runs.items():
                best[name] = min(best[name], gpu_seconds(run))
        row = {"m": m, "n": n, "k": k, "tiles": grid[0] * grid[1], "splits": splits,
               **{f"{name}_us": t * 1e6 for name, t in best.items()}}
        rows.append(row)
        print(f"| {m} x {n} x {k} | {row['tiles']} | {row['oxide_us']:.1f} | "
              f"{row['cuBLAS_us']:.1f} | {best['cuBLAS'] / best['oxide']:.2f}x | "
              f"{splits}, {row['split_us']:.1f} | {best['cuBLAS'] / best['split']:.2f}x |",
              flush=True)
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
