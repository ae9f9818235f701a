"""Softmax and layer norm across row widths, side by side in one run (issue 31's wide rows).

For each width and dtype: torch; Triton written for wide rows (the row in one program,
autotuned over num_warps, and the row in chunks through a loop, autotuned over the chunk
and num_warps: the peer is the faster of the two); oxide's whole-row examples
(`tile_softmax`, `tile_layernorm`) as shipped; and `tile_wide_rows`' kernels under
`ox.autotune` (`softmax_tuned`, `layernorm_tuned`: the whole row while it fits one tile,
chunks past that). GB/s count one read and one write of the matrix (a chunked kernel
reads it twice: the extra read is its to pay). Times from simt_bench.gpu_seconds; every
result checked against torch first.

    python benchmarks/wide_rows.py [--widths 256 1024 8192 32768 65536] [--rows 4096]
                                   [--dtypes f32 bf16]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simt_bench import gpu_seconds  # noqa: E402

_peers: dict[str, Any] = {}


def triton_peers() -> dict[str, Any]:
    """Triton softmax and layer norm for wide rows: `*_whole` (tile_bench.py's kernels,
    the row in one program) autotuned over num_warps, and `*_chunks` (the row in chunks:
    an online softmax; the layer-norm tutorial's three passes) autotuned over the chunk
    and num_warps. Made once per process."""
    if _peers:
        return _peers
    import triton
    import triton.language as tl
    from tile_bench import triton_kernels as row_kernels

    @triton.jit
    def softmax_chunks(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        m = tl.full((BLOCK,), -float("inf"), tl.float32)  # per column: a running max, sum
        s = tl.zeros((BLOCK,), tl.float32)
        for off in range(0, n_cols, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols,
                        other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m, x)  # -inf in a column the row never reaches: its sum stays 0
            s = tl.where(m_new > -float("inf"), s * tl.exp(m - m_new) + tl.exp(x - m_new), 0.0)
            m = m_new
        top = tl.max(m, 0)
        total = tl.sum(s * tl.exp(m - top), 0)
        for off in range(0, n_cols, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols,
                        other=-float("inf")).to(tl.float32)
            tl.store(out_ptr + row * n_cols + cols, tl.exp(x - top) / total,
                     mask=cols < n_cols)

    @triton.jit
    def layernorm_chunks(x_ptr, w_ptr, b_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        acc = tl.zeros((BLOCK,), tl.float32)
        for off in range(0, n_cols, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols,
                           other=0.0).to(tl.float32)
        mean = tl.sum(acc, 0) / n_cols
        acc = tl.zeros((BLOCK,), tl.float32)
        for off in range(0, n_cols, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols,
                        other=0.0).to(tl.float32)
            d = tl.where(cols < n_cols, x - mean, 0.0)
            acc += d * d
        rstd = 1 / tl.sqrt(tl.sum(acc, 0) / n_cols + eps)
        for off in range(0, n_cols, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            mask = cols < n_cols
            x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
            b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
            tl.store(out_ptr + row * n_cols + cols, (x - mean) * rstd * w + b, mask=mask)

    whole = [triton.Config({}, num_warps=w) for w in (4, 8, 16, 32)]
    chunked = [triton.Config({"BLOCK": c}, num_warps=w) for c in (2048, 4096, 8192)
               for w in (4, 8, 16)]
    sm, ln = row_kernels()
    _peers.update(
        softmax_whole=triton.autotune(configs=whole, key=["n_cols", "BLOCK"])(sm),
        layernorm_whole=triton.autotune(configs=whole, key=["n_cols", "BLOCK"])(ln),
        softmax_chunks=triton.autotune(configs=chunked, key=["n_cols"])(softmax_chunks),
        layernorm_chunks=triton.autotune(configs=chunked, key=["n_cols"])(layernorm_chunks))
    return _peers


def measure(rows: int, width: int, dtype: Any) -> list[tuple[str, str, Any]]:
    """(kernel, variant, seconds or the error) for softmax and layer norm at one shape,
    and the bytes one read and one write move."""
    import torch

    import oxide as ox
    from oxide.examples import tile_layernorm, tile_softmax, tile_wide_rows

    x = (torch.randn(rows, width, device="cuda") * 3 + 1).to(dtype)
    w = torch.randn(width, device="cuda").to(dtype)
    b = torch.randn(width, device="cuda").to(dtype)
    y = torch.empty_like(x)
    block = 1 << (width - 1).bit_length()
    tol = 1e-4 if dtype == torch.float32 else 2 ** -7
    eps = 1e-5
    out: list[tuple[str, str, Any]] = []
    tri = triton_peers()

    def run(kernel: str, variant: str, launch: Any, want: Any) -> None:
        """`launch` writes `y`, or returns its result (torch's functions)."""
        try:
            y.zero_()
            got = launch()
            got = got if isinstance(got, torch.Tensor) else y
            torch.testing.assert_close(got.float(), want, rtol=tol, atol=tol)
            out.append((kernel, variant, gpu_seconds(launch)))
        except Exception as exc:  # a variant that fails is reported, the rest go on
            out.append((kernel, variant, f"{type(exc).__name__}: {str(exc)[:90]}"))

    soft = torch.softmax(x.float(), 1)
    norm = torch.nn.functional.layer_norm(x.float(), (width,), w.float(), b.float(), eps)
    run("softmax", "torch", lambda: torch.softmax(x, 1), soft)
    run("softmax", "triton whole row", lambda: tri["softmax_whole"][(rows,)](
        x, y, width, BLOCK=block), soft)
    run("softmax", "triton chunks", lambda: tri["softmax_chunks"][(rows,)](x, y, width), soft)
    run("softmax", "oxide tile_softmax (as shipped)",
        lambda: ox.launch(tile_softmax.tile_softmax, rows, x, y, block), soft)
    run("softmax", "oxide softmax_tuned",
        lambda: ox.launch(tile_wide_rows.softmax_tuned, rows, x, y), soft)
    run("layernorm", "torch", lambda: torch.nn.functional.layer_norm(x, (width,), w, b, eps),
        norm)
    run("layernorm", "triton whole row", lambda: tri["layernorm_whole"][(rows,)](
        x, w, b, y, width, eps, BLOCK=block), norm)
    run("layernorm", "triton chunks", lambda: tri["layernorm_chunks"][(rows,)](
        x, w, b, y, width, eps), norm)
    run("layernorm", "oxide tile_layernorm (as shipped)",
        lambda: ox.launch(tile_layernorm.tile_layernorm, rows, x, w, b, y, eps, block), norm)
    run("layernorm", "oxide layernorm_tuned",
        lambda: ox.launch(tile_wide_rows.layernorm_tuned, rows, x, w, b, y, eps), norm)
    return out


def peer_seconds(results: list[tuple[str, str, Any]], kernel: str) -> float:
    """The faster Triton kernel's time for `kernel` (nan if neither ran)."""
    times = [s for k, v, s in results if k == kernel and v.startswith("triton")
             and isinstance(s, float)]
    return min(times) if times else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--widths", type=int, nargs="+",
                        default=[256, 1024, 8192, 32768, 65536])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--dtypes", nargs="+", choices=["f32", "bf16"], default=["f32", "bf16"])
    args = parser.parse_args()
    import torch

    print(f"{'kernel':<10} {'dtype':<5} {'width':>6}  {'variant':<36} {'GB/s':>7}  "
          "vs the faster Triton")
    for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        if name not in args.dtypes:
            continue
        for width in args.widths:
            results = measure(args.rows, width, dtype)
            nbytes = 2 * dtype.itemsize * args.rows * width
            for kernel, variant, s in results:
                if isinstance(s, str):
                    print(f"{kernel:<10} {name:<5} {width:>6}  {variant:<36} {s}")
                    continue
                ratio = peer_seconds(results, kernel) / s
                print(f"{kernel:<10} {name:<5} {width:>6}  {variant:<36} "
                      f"{nbytes / s / 1e9:>7.0f}  {ratio:.2f}x", flush=True)


if __name__ == "__main__":
    main()
