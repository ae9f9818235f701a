"""What one small GEMM launch costs beyond its work: `tile_matmul` on one tile (and one
wave) with each piece of its sm_90 code switched off in turn, beside cuBLAS and the
launch floors of a trivial kernel (torch's, oxide's tile and SIMT ones).

Why: one 128 x 256 x 64 tile took 5.5 us against cuBLAS's 3.1 (H100, 2026-12-06,
docs/performance.md "Where `tile_matmul` still trails cuBLAS"), and at 4096^3 the
kernel ends ~7k cycles later after its busiest SM's last warp than cuBLAS's does: a
fixed cost of ~2.4 us a launch, about the 2% by which the 4096^3 product trails. A
`prefetch.tensormap` at entry did not change it. Each row here is the same launch
with one thing different, so the table says which piece holds the cost:

- `as shipped`: a producer warp group (loaded as PTX for its `setmaxnreg`), TMA stores,
  the persistent walk of the grid;
- `no producer` (OXIDE_TILE_PRODUCER=0: no `setmaxnreg`, a cubin from nvJitLink);
- `no TMA store` (each thread stores its own elements);
- `no grid walk` (OXIDE_TILE_PERSISTENT=0: one block per tile);
- `no TMA` (OXIDE_TILE_TMA=0: cp.async rings filled by the threads);
- trivial kernels: torch's `zero_()` of the output; an oxide tile kernel storing a
  (128, 256) tile of zeros (by TMA, or each thread its elements) or an (8, 64) one; an
  oxide SIMT kernel of one warp storing one element, or of 256 threads one each.

Times are GPU-timed back-to-back launches (`simt_bench.gpu_seconds`: queued behind a
sleep, so the CPU's launch cost is hidden), best of `--rounds`.

    python benchmarks/fixed_cost.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compiler_variants import check_product, switched, timed  # noqa: E402

TILE = (128, 256, 64)
SHAPES = [(128, 256, 64), (128, 256, 4096), (1536, 2816, 64)]  # one tile; long K; a wave
# (label, environment, TMA stores)
VARIANTS = [("as shipped", {}, True), ("no producer", {"OXIDE_TILE_PRODUCER": "0"}, True),
            ("no TMA store", {}, False), ("no grid walk", {"OXIDE_TILE_PERSISTENT": "0"}, True),
            ("no TMA", {"OXIDE_TILE_TMA": "0"}, True)]


def trivial_kernels() -> tuple[Any, Any]:
    """(a tile kernel storing a tile of zeros, a SIMT kernel storing one element)."""
    import oxide as ox
    from oxide import Const, DisjointSlice, bf16, f32, tile

    @tile.kernel(num_warps=8)
    def zeros(c: DisjointSlice[bf16, 2], BM: Const[int], BN: Const[int]):
        tile.store(c, (tile.bid(0), tile.bid(1)), tile.zeros((BM, BN), bf16))

    @ox.kernel
    def one(out: ox.DisjointSlice[f32]):
        i = ox.thread.index_1d()
        if i in out:
            out[i] = 1.0

    return zeros, one


def shape_rows(m: int, n: int, k: int, rounds: int) -> list[tuple[str, float]]:
    """[(row label, seconds)] of one shape: cuBLAS, each variant, the trivial kernels."""
    import torch

    import oxide as ox
    from oxide import tile
    from oxide.examples.tile_matmul import tile_matmul

    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    want = a.float() @ b.float()
    rows = [("cuBLAS", timed(lambda: torch.matmul(a, b, out=c), rounds))]
    grid = (tile.cdiv(m, TILE[0]), tile.cdiv(n, TILE[1]))
    for label, env, stores in VARIANTS:
        # a fresh kernel object a variant: launches keep their compiled code
        kernel = tile_matmul.with_options(tile_matmul.tile_options)
        with switched(env, stores):
            c.zero_()
            kernel[grid](a, b, c, *TILE)
        torch.cuda.synchronize()
        check_product(c, want, k, label)
        rows.append((f"oxide tile_matmul, {label}",
                     timed(lambda kernel=kernel: kernel[grid](a, b, c, *TILE), rounds)))
    zeros, one = trivial_kernels()
    by_threads = zeros.with_options(zeros.tile_options)
    with switched({}, tma_stores=False):
        by_threads[grid](c, *TILE[:2])
    flat = torch.empty(1, device="cuda")  # (one thread of the warp in bounds)
    wide = torch.empty(256, device="cuda")
    rows += [("torch c.zero_()", timed(c.zero_, rounds)),
             ("oxide tile kernel: a tile of zeros a block",
              timed(lambda: zeros[grid](c, *TILE[:2]), rounds)),
             ("oxide tile kernel: the same, stored by each thread",
              timed(lambda: by_threads[grid](c, *TILE[:2]), rounds)),
             ("oxide tile kernel: an 8 x 64 tile of zeros",
              timed(lambda: zeros[1, 1](c, 8, 64), rounds)),
             ("oxide SIMT kernel: one element",
              timed(lambda: ox.launch(one, ox.LaunchConfig(1, 32), flat), rounds)),
             ("oxide SIMT kernel: 256 threads, one element each",
              timed(lambda: ox.launch(one, ox.LaunchConfig(1, 256), wide), rounds))]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    opts = parser.parse_args()
    os.environ["OXIDE_CACHE"] = "0"  # variants of one source: nothing shared on disk
    import warnings

    import torch

    from oxide.errors import PerformanceWarning

    warnings.simplefilter("ignore", PerformanceWarning)
    print(torch.cuda.get_device_name(), flush=True)
    for m, n, k in SHAPES:
        rows = shape_rows(m, n, k, opts.rounds)
        for label, t in rows:
            print(f"{m}x{n}x{k} {label:46s} {t * 1e6:8.2f} us  {t / rows[0][1]:5.2f}x cuBLAS",
                  flush=True)


if __name__ == "__main__":
    main()
