"""The tile compiler's switches side by side: tile_attention and tile_matmul on one GPU,
each variant in fresh processes with its own compile cache, rounds interleaved.

A switch of codegen/switches.py (OXIDE_TILE_OVERLAP, OXIDE_TILE_PINGPONG,
OXIDE_TILE_UNIFORM_ROLE, ...) stays off until it is measured faster; this is where it is
measured. Every variant runs the same work: tile_attention bf16 B8 H16 S4096 at D 64 and
128, causal and not (checked against torch SDPA), and tile_matmul bf16 at 4096^3 and
8192^3 (checked against torch.matmul). Each row gives TFLOPS of every round (GPU time
from `simt_bench.gpu_seconds`), the max error, and the driver JIT's report of the code
that runs (registers, spill stores, ptxas's C75xx notes: serialized wgmma and the like).
The peers (SDPA flash and cuDNN, cuBLAS) are timed in the first round of the first
variant.

    python benchmarks/switch_ab.py                       # base, uniform role, overlap, both
    python benchmarks/switch_ab.py --variants base: ovl:OXIDE_TILE_OVERLAP=1 --rounds 3
    python benchmarks/switch_ab.py --parts matmul --json out.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_VARIANTS = ("base:", "role:OXIDE_TILE_UNIFORM_ROLE=1", "ovl:OXIDE_TILE_OVERLAP=1",
                    "ovl+role:OXIDE_TILE_OVERLAP=1,OXIDE_TILE_UNIFORM_ROLE=1")


def _report(ptx: str) -> dict[str, Any]:
    """The driver JIT's ptxas report of `ptx` (what a setmaxnreg kernel loads through)."""
    sys.path.insert(0, str(HERE.parent))
    from tools.ptxas_report import ptxas_report

    r = ptxas_report(ptx, "sm_90a", jit=True)
    return {"registers": r["registers"], "spills": r["spill_stores"], "notes": r["notes"]}


def _attention(peers: bool) -> list[dict[str, Any]]:
    return [_attention_case(d, causal, peers) for d in (64, 128) for causal in (True, False)]


def _attention_case(d: int, causal: bool, peers: bool) -> dict[str, Any]:
    import numpy as np
    import torch
    from simt_bench import gpu_seconds

    import oxide as ox
    from oxide import DisjointSlice, Slice, bf16
    from oxide.examples import tile_attention as ta

    v = dataclasses.replace
    sig = (v(Slice[bf16, 2], vectors=True),) * 3 + (v(DisjointSlice[bf16, 2], vectors=True),)
    b, h, s = 8, 16, 4096
    q, k, val = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
                 for _ in range(3))
    o = torch.empty_like(q)
    bm, bn = ta.gpu_block(d)
    args = (*(x.view(b * h * s, d) for x in (q, k, val, o)), s, 1 / d ** 0.5, bm, bn, d,
            causal)
    grid = b * h * s // bm
    ox.launch(ta.tile_attention, grid, *args)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, val, is_causal=causal)
    flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
    row = {"work": f"attention D{d}{' causal' if causal else ''}",
           "error": (o.float() - ref.float()).abs().max().item(),
           "tflops": flops / gpu_seconds(lambda: ox.launch(ta.tile_attention, grid, *args))
           / 1e12}
    ck = ta.tile_attention.compile(*sig, s, np.float32(0.1), bm, bn, d, causal, arch="sm_90")
    row.update(_report(ck.ptx))
    if peers:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def sdpa() -> Any:
            return torch.nn.functional.scaled_dot_product_attention(q, k, val, is_causal=causal)

        for name, backend in (("flash", SDPBackend.FLASH_ATTENTION),
                              ("cuDNN", SDPBackend.CUDNN_ATTENTION)):
            with sdpa_kernel(backend):
                row[name] = flops / gpu_seconds(sdpa) / 1e12
    return row


def _matmul(peers: bool) -> list[dict[str, Any]]:
    return [_matmul_case(n, peers) for n in (4096, 8192)]


def _matmul_case(n: int, peers: bool) -> dict[str, Any]:
    import ml_dtypes
    import numpy as np
    import torch
    from simt_bench import gpu_seconds

    import oxide as ox
    from oxide.examples import tile_matmul as tm

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c, ref = torch.empty_like(a), torch.empty_like(a)
    bm, bn, bk = tm.GPU_TILE
    grid = tm.grid(n, n, bm, bn)
    ox.launch(tm.tile_matmul, grid, a, b, c, bm, bn, bk)
    torch.matmul(a, b, out=ref)
    flops = 2.0 * n ** 3
    row = {"work": f"matmul {n}^3", "error": (c.float() - ref.float()).abs().max().item(),
           "tflops": flops / gpu_seconds(lambda: ox.launch(tm.tile_matmul, grid, a, b, c, bm,
                                                           bn, bk)) / 1e12}
    host = np.zeros((n, n), dtype=ml_dtypes.bfloat16)  # compiled as a launch sees it
    row.update(_report(tm.tile_matmul.compile(host, host, host.copy(), bm, bn, bk,
                                              arch="sm_90").ptx))
    if peers:
        row["cuBLAS"] = flops / gpu_seconds(lambda: torch.matmul(a, b, out=ref)) / 1e12
    return row


def child(parts: list[str], peers: bool) -> None:
    """One process of one variant: its rows as JSON lines on stdout."""
    sys.path.insert(0, str(HERE))
    for part in parts:
        for row in {"attention": _attention, "matmul": _matmul}[part](peers):
            print("ROW " + json.dumps(row), flush=True)


def _variant(spec: str) -> tuple[str, dict[str, str]]:
    name, _, settings = spec.partition(":")
    env = dict(item.split("=", 1) for item in settings.split(",") if item)
    return name, env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS),
                        metavar="NAME:VAR=VALUE,...")
    parser.add_argument("--parts", nargs="+", default=["attention", "matmul"],
                        choices=["attention", "matmul"])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a process")
    parser.add_argument("--json", help="write every row there too")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--peers", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.parts, args.peers)
        return
    variants = [_variant(v) for v in args.variants]
    caches = {name: tempfile.mkdtemp(prefix=f"oxide-ab-{name}-") for name, _ in variants}
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for round_ in range(args.rounds):
        for k, (name, env) in enumerate(variants):
            cmd = [sys.executable, __file__, "--child", "--parts", *args.parts]
            if round_ == 0 and k == 0:
                cmd.append("--peers")
            full_env = {**os.environ, **env, "OXIDE_CACHE_DIR": caches[name]}
            try:
                done = subprocess.run(cmd, env=full_env, capture_output=True, text=True,
                                      timeout=args.timeout)
                out, failure = done.stdout, done.stderr[-400:] if done.returncode else ""
            except subprocess.TimeoutExpired:
                out, failure = "", f"timed out after {args.timeout:.0f} s"
            if failure:
                print(f"{name} round {round_}: {failure}", file=sys.stderr)
            for line in out.splitlines():
                if line.startswith("ROW "):
                    row = json.loads(line[4:])
                    results.setdefault((row["work"], name), []).append(row)
                    print(f"round {round_} {name}: {row['work']} {row['tflops']:.0f} TFLOPS "
                          f"(registers {row['registers']}, spills {row['spills']})", flush=True)
    print(table(results, [name for name, _ in variants]))
    if args.json:
        Path(args.json).write_text(json.dumps(
            [{"variant": name, **row} for (_, name), rows in results.items() for row in rows],
            indent=1))


def table(results: dict[tuple[str, str], list[dict[str, Any]]], names: list[str]) -> str:
    """One line per work and variant: TFLOPS each round, max error, the report, peers."""
    lines = ["| work | variant | TFLOPS (rounds) | max error | registers | spill stores "
             "| notes | peers |", "| --- | --- | --- | ---: | ---: | ---: | --- | --- |"]
    for work in dict.fromkeys(w for w, _ in results):
        for name in names:
            rows = results.get((work, name), [])
            if not rows:
                lines.append(f"| {work} | {name} | failed | | | | | |")
                continue
            last = rows[-1]
            peers = ", ".join(f"{k} {r[k]:.0f}" for r in rows for k in ("flash", "cuDNN",
                                                                        "cuBLAS") if k in r)
            rates = " / ".join(f"{r['tflops']:.0f}" for r in rows)
            lines.append(
                f"| {work} | {name} | {rates} "
                f"| {max(r['error'] for r in rows):.4f} | {last['registers']} "
                f"| {last['spills']} | {' '.join(last['notes'])} | {peers} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
