"""The canonical tile matmul loop at 3 and 4 stages against cuBLAS and the hand-written
SIMT GEMM, over shapes that separate the K loop's length from the number of tiles: how
much the fourth ring stage gives, and what the epilogue's store (tile/tma_stores.py)
costs.

Variants of the `tile_matmul` example (128 x 256 x 64, 8 warps, bf16, the sm_90
defaults: TMA rings, a producer warp group, the grid walked), each compiled in this
process with the disk cache off: 3 stages (the whole 64 KB result tile through shared
memory by TMA), 4 stages as shipped (the rings leave 35 KB of the block: the result goes
out in slabs of 64 columns, each consumer warp group its own 64 rows), and 4 stages as
before 2026-12-05's change (one barrier of both groups per slab, and the rings' own
budget: 19 KB, slabs of 32 columns). `gemm_hopper` (oxide/kernels/hopper_gemm.py, its
fastest config: 3 stages, per-group TMA stores) is the hand-written reference. Rounds
interleave the variants and cuBLAS; each figure is the best round's TFLOPS (GPU time from
`simt_bench.gpu_seconds`), with the driver JIT's register and spill report of each kernel
and the max |difference| from cuBLAS's result.

    python benchmarks/matmul_stages.py [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

SHAPES = [(4096, 4096, 4096), (8192, 8192, 4096), (4096, 4096, 8192), (8192, 8192, 8192),
          (4096, 4096, 2048), (4000, 4000, 4000)]
TILE = (128, 256, 64)


def make(stages: int) -> Any:
    """The `tile_matmul` example (8 warps) at `stages`: a variant of its own, with
    specializations of its own."""
    from oxide.examples.tile_matmul import tile_matmul
    from oxide.tile.kernel import tile_options

    return tile_matmul.with_options(tile_options(8, num_stages=stages))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write the rows here too")
    opts = parser.parse_args()
    os.environ["OXIDE_CACHE"] = "0"  # kernels of one source: nothing shared on disk

    import torch
    from simt_bench import gpu_seconds

    import oxide as ox
    import oxide.tile.tma_stores as stores
    from oxide import tile
    from oxide.frontend.parallel_calls import SM90A_STATIC_SHARED_BYTES
    from oxide.kernels import hopper_gemm

    shipped = {"row_bands": stores.row_bands, "BARRIER_BYTES": stores.BARRIER_BYTES}
    before = {"row_bands": lambda layout: 1,
              "BARRIER_BYTES": SM90A_STATIC_SHARED_BYTES - stores.RING_BYTES}
    variants = {"3 stages": (make(3), shipped), "4 stages": (make(4), shipped),
                "4 stages before": (make(4), before)}

    def compiled(name: str, compile_it: Any) -> Any:
        """`compile_it()` with the variant's store in place (the first launch of a
        specialization compiles it; later launches reuse it)."""
        for attr, value in variants[name][1].items():
            setattr(stores, attr, value)
        try:
            return compile_it()
        finally:
            for attr, value in shipped.items():
                setattr(stores, attr, value)

    rows: list[dict[str, Any]] = []
    try:
        import dataclasses

        from tools.ptxas_report import ptxas_report

        from oxide import DisjointSlice, Slice, bf16

        v = dataclasses.replace
        sig = (v(Slice[bf16, 2], vectors=True),) * 2 + (v(DisjointSlice[bf16, 2],
                                                          vectors=True),)
        for name, (kernel, _) in variants.items():
            ck = compiled(name, lambda k=kernel: k.compile(*sig, *TILE, arch="sm_90"))
            report = ptxas_report(ck.ptx, "sm_90a", jit=True)
            print(f"{name}: {report['registers']} registers, {report['spill_stores']} bytes "
                  f"spilled, notes {report['notes']}", flush=True)
    except Exception as exc:  # the report is a developer's tool: the timings go on
        print(f"(no ptxas report: {exc!r:.200})")
    bm, bn, bk = TILE
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        want = a @ b
        runs: dict[str, Any] = {}
        row: dict[str, Any] = {"m": m, "n": n, "k": k}
        for name, (kernel, _) in variants.items():
            c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            grid = (tile.cdiv(m, bm), tile.cdiv(n, bn))
            runs[name] = (lambda kernel=kernel, a=a, b=b, c=c, grid=grid:
                          ox.launch(kernel, grid, a, b, c, bm, bn, bk))
            compiled(name, runs[name])
            row[f"{name} max diff"] = float((c.float() - want.float()).abs().max())
        cfg = hopper_gemm.FASTEST
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        maps, config = hopper_gemm.tensor_maps(a, b, c, cfg), hopper_gemm.launch_config(m, n, cfg)
        runs["hand-written"] = (lambda maps=maps, config=config, c=c, m=m, n=n, k=k, cfg=cfg:
                                ox.launch(hopper_gemm.gemm_hopper, config, maps[0], maps[1], c,
                                          maps[2], m, n, k, *cfg.consts()))
        runs["hand-written"]()
        torch.cuda.synchronize()
        row["hand-written max diff"] = float((c.float() - want.float()).abs().max())
        runs["cuBLAS"] = lambda a=a, b=b: a @ b
        flops = 2.0 * m * n * k
        best = dict.fromkeys(runs, 0.0)
        for _ in range(opts.rounds):
            for name, fn in runs.items():
                best[name] = max(best[name], flops / gpu_seconds(fn) / 1e12)
        row.update({name: round(t, 1) for name, t in best.items()})
        rows.append(row)
        print(f"{m} x {n} x {k}: " + ", ".join(
            f"{name} {t:.1f}" + ("" if name == "cuBLAS" else f" ({t / best['cuBLAS']:.3f}x)")
            for name, t in best.items()) + " TFLOPS", flush=True)
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
