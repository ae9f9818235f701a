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
would give; and what `ox.autotune` gives over tile shapes, `num_warps` and `num_stages`
(TILE_CONFIGS: the example's tile, and 64-row tiles down to 16 columns with deep rings,
or with K steps of 128 and 256 and fewer stages, which give a product of few rows more
blocks without splitting K and more bytes in flight a stage, and 16- and 32-row tiles,
which sm_90 computes transposed: the rows as wgmma's N), for `a @ b` (the
example's own kernel) and for `x @ w.T` with w (N, K) as torch's Linear keeps it
(against `torch.nn.functional.linear`).

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
# (BM, BN, BK, num_warps, num_stages) that ox.autotune chooses from
TILE_CONFIGS = [(128, 256, 64, 8, 4), (128, 128, 64, 8, 6), (64, 256, 64, 4, 4),
                (64, 128, 64, 4, 6), (64, 64, 64, 4, 8), (64, 32, 128, 4, 6),
                (64, 16, 128, 4, 8), (64, 128, 128, 4, 3), (64, 64, 128, 4, 5),
                (64, 64, 256, 4, 3), (64, 32, 256, 4, 4),
                # few rows, computed transposed on wgmma (the rows as its N, stop 59)
                (16, 64, 256, 4, 4), (32, 64, 256, 4, 4)]


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


def linear_kernel() -> Any:
    """`x @ w.T` with w (N, K), as torch's Linear keeps its weight: B K-major
    (tile_products.py's kernel)."""
    from tile_products import make_linear_t

    return make_linear_t(8, 4)


def tuned(kernel: Any) -> Any:
    """`kernel` autotuned over TILE_CONFIGS, keyed on the operands' shapes."""
    import oxide as ox

    configs = [ox.Config(BM=bm, BN=bn, BK=bk, num_warps=w, num_stages=s)
               for bm, bn, bk, w, s in TILE_CONFIGS]
    return ox.autotune(configs=configs, key=["a", "b"] if "a" in _params(kernel)
                       else ["x", "w"])(kernel)


def _params(kernel: Any) -> list[str]:
    import inspect

    return list(inspect.signature(kernel.fn).parameters)


def _config_name(config: Any) -> str:
    return f"{config.BM}x{config.BN}x{config.BK} w{config.num_warps} s{config.num_stages}"


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
    tuned_matmul, tuned_linear = tuned(tile_matmul), tuned(linear_kernel())
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows: list[dict[str, Any]] = []
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    print("| M x N x K | tiles | oxide (us) | cuBLAS (us) | oxide / cuBLAS speed | "
          "split K by hand: ways, us (f32 out) | its speed / cuBLAS | autotuned: config, us "
          "| its speed / cuBLAS | x @ w.T autotuned: config, us | torch linear (us) | "
          "its speed / torch |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        w = b.T.contiguous()  # (N, K)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        grid = (tile.cdiv(m, bm), tile.cdiv(n, bn))

        def tiles_of(config: Any, m: int = m, n: int = n) -> tuple[int, int]:
            return (tile.cdiv(m, config.BM), tile.cdiv(n, config.BN))

        def tuned_run(a: Any = a, b: Any = b, c: Any = c) -> None:
            ox.launch(tuned_matmul, tiles_of, a, b, c)

        def linear_run(a: Any = a, w: Any = w, c: Any = c) -> None:
            ox.launch(tuned_linear, tiles_of, a, w, c)

        def torch_linear_run(a: Any = a, w: Any = w, c: Any = c) -> None:
            torch.nn.functional.linear(a, w, out=c)

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
        for run in (tuned_run, linear_run):  # the first call tunes, then runs the choice
            c.zero_()
            run()
            torch.cuda.synchronize()
            error = max(error, float((c.float() - want).abs().max()))
        if error > 0.02 * float(want.abs().max()):
            print(f"| {m} x {n} x {k} | wrong result: max |difference| {error:.3g} |")
            continue
        runs = {"oxide": oxide_run, "cuBLAS": cublas_run, "split": splitk_run,
                "tuned": tuned_run, "linear": linear_run, "torch_linear": torch_linear_run}
        best = dict.fromkeys(runs, float("inf"))
        for _ in range(opts.rounds):
            for name, run in runs.items():
                best[name] = min(best[name], gpu_seconds(run))
        chosen = {"tuned": _config_name(tuned_matmul.best(a, b, c)),
                  "linear": _config_name(tuned_linear.best(a, w, c))}
        row = {"m": m, "n": n, "k": k, "tiles": grid[0] * grid[1], "splits": splits,
               "tuned_config": chosen["tuned"], "linear_config": chosen["linear"],
               **{f"{name}_us": t * 1e6 for name, t in best.items()}}
        rows.append(row)
        print(f"| {m} x {n} x {k} | {row['tiles']} | {row['oxide_us']:.1f} | "
              f"{row['cuBLAS_us']:.1f} | {best['cuBLAS'] / best['oxide']:.2f}x | "
              f"{splits}, {row['split_us']:.1f} | {best['cuBLAS'] / best['split']:.2f}x | "
              f"{chosen['tuned']}, {row['tuned_us']:.1f} | "
              f"{best['cuBLAS'] / best['tuned']:.2f}x | {chosen['linear']}, "
              f"{row['linear_us']:.1f} | {row['torch_linear_us']:.1f} | "
              f"{best['torch_linear'] / best['linear']:.2f}x |", flush=True)
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
