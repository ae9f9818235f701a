"""Softmax and layer norm across row widths, side by side in one run (issue 31's wide rows).

For each width (4096 rows) and dtype: torch, Triton (the row in one program, autotuned
over num_warps), oxide's whole-row examples (`tile_softmax`, `tile_layernorm`) as shipped
and autotuned over num_warps, and oxide's chunked kernels (`tile_wide_rows`) autotuned
over the chunk and num_warps. GB/s count one read and one write of the matrix (the
chunked kernels read it two or three times: the extra reads are theirs to pay).
Times from simt_bench.gpu_seconds; every result checked against torch first.

    python benchmarks/wide_rows.py [--widths 1024 8192 32768 65536] [--rows 4096]
                                   [--dtypes f32 bf16]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simt_bench import gpu_seconds  # noqa: E402

WHOLE_ROW_WARPS = ((4, 8), (8, 4), (16, 2), (32, 1))  # (num_warps, occupancy): 2048 threads
CHUNKS = (2048, 4096)
CHUNK_WARPS = (4, 8, 16)


def triton_kernels() -> tuple[Any, Any]:
    """tile_bench.py's Triton softmax and layer norm (the row in one program), tuned over
    num_warps."""
    import triton
    from tile_bench import triton_kernels as row_kernels

    configs = [triton.Config({}, num_warps=w) for w in (4, 8, 16, 32)]
    return tuple(triton.autotune(configs=configs, key=["n_cols", "BLOCK"])(k)  # type: ignore[return-value]
                 for k in row_kernels())


def tuned(kernel: Any, configs: list[Any]) -> Any:
    import oxide as ox

    return ox.autotune(configs=configs, key=["x"], warmup=5, rep=20)(kernel)


def measure(rows: int, width: int, dtype: Any, kernels: dict[str, Any]) -> list[tuple]:
    """(kernel, variant, GB/s) for softmax and layer norm at one width and dtype."""
    import torch

    import oxide as ox
    from oxide.examples import tile_layernorm, tile_softmax

    x = (torch.randn(rows, width, device="cuda") * 3 + 1).to(dtype)
    w = torch.randn(width, device="cuda").to(dtype)
    b = torch.randn(width, device="cuda").to(dtype)
    y = torch.empty_like(x)
    block = 1 << (width - 1).bit_length()
    gbs = 2 * x.element_size() * rows * width / 1e9
    tol = 1e-4 if dtype == torch.float32 else 2 ** -7
    out = []

    def run(kernel: str, variant: str, launch: Any, want: Any) -> None:
        """`launch` writes `y`, or returns its result (torch's functions)."""
        try:
            got = launch()
            got = got if isinstance(got, torch.Tensor) else y
            torch.testing.assert_close(got.float(), want, rtol=tol, atol=tol)
            out.append((kernel, variant, gbs / gpu_seconds(launch)))
        except Exception as exc:  # a variant that fails is reported, the rest go on
            out.append((kernel, variant, f"{type(exc).__name__}: {str(exc)[:90]}"))

    eps = 1e-5
    soft = torch.softmax(x.float(), 1)
    norm = torch.nn.functional.layer_norm(x.float(), (width,), w.float(), b.float(), eps)
    sm, ln = kernels["triton"]
    run("softmax", "torch", lambda: torch.softmax(x, 1), soft)
    run("softmax", "triton (num_warps tuned)", lambda: sm[(rows,)](x, y, width, BLOCK=block),
        soft)
    run("softmax", "oxide tile_softmax (8 warps)",
        lambda: ox.launch(tile_softmax.tile_softmax, rows, x, y, block), soft)
    run("softmax", "oxide tile_softmax (num_warps tuned)",
        lambda: ox.launch(kernels["softmax_whole"], rows, x, y, block), soft)
    run("softmax", "oxide softmax_chunks (chunk, num_warps tuned)",
        lambda: ox.launch(kernels["softmax_chunks"], rows, x, y), soft)
    run("layernorm", "torch", lambda: torch.nn.functional.layer_norm(x, (width,), w, b, eps),
        norm)
    run("layernorm", "triton (num_warps tuned)",
        lambda: ln[(rows,)](x, w, b, y, width, eps, BLOCK=block), norm)
    run("layernorm", "oxide tile_layernorm (8 warps)",
        lambda: ox.launch(tile_layernorm.tile_layernorm, rows, x, w, b, y, eps, block), norm)
    run("layernorm", "oxide tile_layernorm (num_warps tuned)",
        lambda: ox.launch(kernels["layernorm_whole"], rows, x, w, b, y, eps, block), norm)
    run("layernorm", "oxide layernorm_chunks (chunk, num_warps tuned)",
        lambda: ox.launch(kernels["layernorm_chunks"], rows, x, w, b, y, eps), norm)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--widths", type=int, nargs="+", default=[1024, 8192, 32768, 65536])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--dtypes", nargs="+", choices=["f32", "bf16"], default=["f32", "bf16"])
    args = parser.parse_args()
    import torch

    import oxide as ox
    from oxide.examples import tile_layernorm, tile_softmax, tile_wide_rows

    whole = [ox.Config(num_warps=w, occupancy=o) for w, o in WHOLE_ROW_WARPS]
    chunked = [ox.Config(BN=c, num_warps=w) for c in CHUNKS for w in CHUNK_WARPS]
    kernels = {"triton": triton_kernels(),
               "softmax_whole": tuned(tile_softmax.tile_softmax, whole),
               "layernorm_whole": tuned(tile_layernorm.tile_layernorm, whole),
               "softmax_chunks": tuned(tile_wide_rows.softmax_chunks, chunked),
               "layernorm_chunks": tuned(tile_wide_rows.layernorm_chunks, chunked)}
    print(f"{'kernel':<10} {'dtype':<5} {'width':>6}  {'variant':<48} {'GB/s':>7}  vs triton")
    for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        if name not in args.dtypes:
            continue
        for width in args.widths:
            results = measure(args.rows, width, dtype, kernels)
            peer = {k: v for k, variant, v in results if variant.startswith("triton")}
            for kernel, variant, v in results:
                if isinstance(v, str):
                    print(f"{kernel:<10} {name:<5} {width:>6}  {variant:<48} {v}")
                    continue
                ratio = v / peer[kernel] if isinstance(peer.get(kernel), float) else float("nan")
                print(f"{kernel:<10} {name:<5} {width:>6}  {variant:<48} {v:>7.0f}  "
                      f"{ratio:.2f}x", flush=True)


if __name__ == "__main__":
    main()
