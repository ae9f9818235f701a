"""The Tile model's examples on one GPU, beside torch and a Triton kernel written here.

Run on a machine with an NVIDIA GPU, torch and triton:

    python benchmarks/tile_bench.py            # prints the table, updates docs/performance.md
    python benchmarks/tile_bench.py --no-docs
    python benchmarks/tile_bench.py --only wide_rows attention   # some sections, docs untouched

Issue 11's bars (same run): tile_vecadd >= 0.97x torch.add (2^28 f32); tile_softmax and
tile_layernorm >= 1.0x Triton (8192x8192, f32 and bf16; rows of 8,000 columns, where every tile
crosses the edge, reported beside them); tile_transpose >= 0.85x a copy (16384^2 f32);
tile_matmul bf16 >= 0.90x cuBLAS at 4096^3 and 8192^3 (compiled to wgmma on sm_90; the
mma.sync path reported beside it); tile_attention bf16 (B8 H16 S4096, D 128 and 64) >= 1.2x SDPA's flash (issue 31), cuDNN beside it; D256 reported without a bar.
Issue 31's wide rows: tile_wide_rows' tuned softmax and layer norm >= 0.95x the faster of
Triton's whole-row and chunked kernels (4096x32768 and 2048x65536, f32 and bf16).
GPU times come from simt_bench.gpu_seconds (CUDA events around back-to-back launches
queued behind a sleep). Each result is checked against torch first; a failing section
prints its error and leaves the others.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simt_bench import environment, gpu_seconds, update_docs  # noqa: E402

START, END = "<!-- tile_bench:start -->", "<!-- tile_bench:end -->"


def triton_kernels() -> Any:
    """Triton softmax and layernorm over rows, one program per row (the row in one block),
    computed in f32 whatever the dtype (as oxide's examples do); the store rounds to the
    output's dtype."""
    import triton
    import triton.language as tl

    @triton.jit
    def softmax_rows(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)

    @triton.jit
    def layernorm_rows(x_ptr, w_ptr, b_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / n_cols
        d = tl.where(mask, x - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * n_cols + cols, d * rstd * w + b, mask=mask)

    return softmax_rows, layernorm_rows


def rows(only: list[str] | None = None
         ) -> list[tuple[str, str, str, float, float, int, float | None]]:
    """(kernel, problem, reference, oxide s, reference s, bytes moved, bar), of the
    sections named in `only` (all when None)."""
    import torch

    import oxide as ox
    from oxide.examples import (
        tile_attention,
        tile_layernorm,
        tile_matmul,
        tile_softmax,
        tile_transpose,
        tile_vecadd,
    )

    out: list[tuple[str, str, str, float, float, int, float | None]] = []
    def vecadd() -> None:
        n = 1 << 28
        a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
        c = torch.empty_like(a)
        tile = tile_vecadd.TILE
        grid = -(-n // tile)
        ox.launch(tile_vecadd.tile_vecadd, grid, a, b, c, tile)
        torch.testing.assert_close(c, a + b)
        t = gpu_seconds(lambda: ox.launch(tile_vecadd.tile_vecadd, grid, a, b, c, tile))
        r = gpu_seconds(lambda: torch.add(a, b, out=c))
        out.append(("tile_vecadd", "2^28 f32", "torch.add", t, r, 12 * n, 0.97))

    def add_rows(kernel: str, m: int, n: int, name: str, t: float, triton_s: float,
                 nbytes: int, torch_label: str, torch_run: Any) -> None:
        """Triton's row (with the bar where a row fills its power-of-two tile), then
        torch's, timed only there; rows of other lengths are reported without a bar."""
        full = n == 1 << (n - 1).bit_length()
        problem = f"{m}^2 {name}" if m == n else f"{m}x{n} (ragged) {name}"
        out.append((kernel, problem, "Triton", t, triton_s, nbytes, 1.0 if full else None))
        if full:
            out.append((kernel, problem, torch_label, t, gpu_seconds(torch_run), nbytes, None))

    def softmax_of(dtype: Any, name: str, tol: float, n: int = 8192) -> None:
        """8192 rows of `n` columns, each row one tile of the next power of two: at
        n = 8000 every tile crosses the array's edge (bars only at 8192)."""
        sm, _ = triton_kernels()
        m, block = 8192, 1 << (n - 1).bit_length()
        x = torch.randn(m, n, device="cuda").to(dtype)
        y = torch.empty_like(x)
        ox.launch(tile_softmax.tile_softmax, m, x, y, block)
        want = torch.softmax(x.float(), 1)
        torch.testing.assert_close(y.float(), want, rtol=tol, atol=1e-6)
        t = gpu_seconds(lambda: ox.launch(tile_softmax.tile_softmax, m, x, y, block))
        r = gpu_seconds(lambda: sm[(m,)](x, y, n, BLOCK=block, num_warps=8))
        add_rows("tile_softmax", m, n, name, t, r, 2 * x.element_size() * m * n,
                 "torch.softmax", lambda: torch.softmax(x, 1))

    def softmax() -> None:
        softmax_of(torch.float32, "f32", 1e-4)
        softmax_of(torch.bfloat16, "bf16", 2 ** -7)
        softmax_of(torch.float32, "f32", 1e-4, n=8000)
        softmax_of(torch.bfloat16, "bf16", 2 ** -7, n=8000)

    def layernorm_of(dtype: Any, name: str, tol: float, n: int = 8192) -> None:
        """As `softmax_of`: 8192 rows of `n` columns (bars only at 8192)."""
        _, ln = triton_kernels()
        m, block = 8192, 1 << (n - 1).bit_length()
        x = torch.randn(m, n, device="cuda").to(dtype)
        w, b = torch.randn(n, device="cuda").to(dtype), torch.randn(n, device="cuda").to(dtype)
        y = torch.empty_like(x)
        args = (x, w, b, y, 1e-5, block)
        ox.launch(tile_layernorm.tile_layernorm, m, *args)
        want = torch.nn.functional.layer_norm(x.float(), (n,), w.float(), b.float(), 1e-5)
        torch.testing.assert_close(y.float(), want, rtol=tol, atol=tol)
        t = gpu_seconds(lambda: ox.launch(tile_layernorm.tile_layernorm, m, *args))
        r = gpu_seconds(lambda: ln[(m,)](x, w, b, y, n, 1e-5, BLOCK=block, num_warps=8))
        add_rows("tile_layernorm", m, n, name, t, r, 2 * x.element_size() * m * n,
                 "torch layer_norm",
                 lambda: torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5))

    def layernorm() -> None:
        layernorm_of(torch.float32, "f32", 1e-3)
        layernorm_of(torch.bfloat16, "bf16", 2 ** -6)
        layernorm_of(torch.float32, "f32", 1e-3, n=8000)
        layernorm_of(torch.bfloat16, "bf16", 2 ** -6, n=8000)

    def transpose() -> None:
        n = 16384
        x = torch.randn(n, n, device="cuda")
        y = torch.empty_like(x)
        copy = torch.empty_like(x)
        tile = tile_transpose.TILE
        grid = (n // tile, n // tile)
        ox.launch(tile_transpose.tile_transpose, grid, x, y, tile)
        torch.testing.assert_close(y, x.t(), rtol=0, atol=0)
        t = gpu_seconds(lambda: ox.launch(tile_transpose.tile_transpose, grid, x, y, tile))
        r = gpu_seconds(lambda: copy.copy_(x))
        out.append(("tile_transpose", "16384^2 f32", "b.copy_(a)", t, r, 8 * n * n, 0.85))

    def matmul_at(n: int, wgmma: bool) -> None:
        """tile_matmul as it runs on this GPU: on sm_90 compiled to wgmma (TMA rings, a
        producer warp group, the grid walked by the blocks that fit: its 128 x 256 x 64
        tile); with OXIDE_TILE_WGMMA=0 on mma.sync (the tile other GPUs take)."""
        import os

        os.environ["OXIDE_TILE_WGMMA"] = "1" if wgmma else "0"
        try:
            a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
            c, ref = torch.empty_like(a), torch.empty_like(a)
            bm, bn, bk = tile_matmul.GPU_TILE if wgmma else tile_matmul.OTHER_GPU_TILE
            grid = tile_matmul.grid(n, n, bm, bn)
            c.fill_(float("nan"))
            ox.launch(tile_matmul.tile_matmul, grid, a, b, c, bm, bn, bk)
            torch.matmul(a, b, out=ref)
            torch.testing.assert_close(c, ref, rtol=2e-2, atol=2e-1)
            t = gpu_seconds(lambda: ox.launch(tile_matmul.tile_matmul, grid, a, b, c, bm, bn,
                                              bk))
            r = gpu_seconds(lambda: torch.matmul(a, b, out=ref))
        finally:
            os.environ.pop("OXIDE_TILE_WGMMA", None)
        flops = 2.0 * n ** 3
        path = "wgmma" if wgmma else "mma.sync"
        out.append(("tile_matmul", f"{n}^3 bf16, {path} ({flops / t / 1e12:.0f} vs "
                    f"{flops / r / 1e12:.0f} TFLOPS)", "torch.matmul (cuBLAS)", t, r,
                    6 * n * n, 0.90 if wgmma else None))

    def matmul() -> None:
        """bf16 in and out, f32 accumulate; the bar (0.90x cuBLAS) is judged on the path a
        Hopper GPU takes, the mma.sync path is reported beside it; the TFLOPS are in the
        problem."""
        for n in (4096, 8192):
            matmul_at(n, True)
            matmul_at(n, False)

    def attention_at(causal: bool, d: int, bar: float | None = 1.2) -> None:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        b, h, s = 8, 16, 4096
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        o = torch.empty_like(q)
        flat = [x.view(b * h * s, d) for x in (q, k, v, o)]
        bm, bn = tile_attention.gpu_block(d)
        args = (*flat, s, 1 / d ** 0.5, bm, bn, d, causal)
        grid = b * h * s // bm
        ox.launch(tile_attention.tile_attention, grid, *args)
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.testing.assert_close(o, ref, rtol=2e-2, atol=2e-2)
        t = gpu_seconds(lambda: ox.launch(tile_attention.tile_attention, grid, *args))
        flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
        # the engine its products take (tile/mma_choice.py): wgmma on sm_90 unless turned off
        engine = ("wgmma" if torch.cuda.get_device_capability() == (9, 0)
                  and os.environ.get("OXIDE_TILE_WGMMA", "1") != "0" else "mma.sync")
        for name, backend in (("flash", SDPBackend.FLASH_ATTENTION),
                              ("cuDNN", SDPBackend.CUDNN_ATTENTION)):
            try:
                with sdpa_kernel(backend):
                    r = gpu_seconds(lambda: torch.nn.functional.scaled_dot_product_attention(
                        q, k, v, is_causal=causal))
            except RuntimeError as exc:  # a backend without kernels for this head dim
                print(f"(SDPA {name} at D{d}: {str(exc).splitlines()[0][:120]})")
                continue
            out.append(("tile_attention", f"B8 H16 S4096 D{d} bf16{' causal' if causal else ''}"
                        f", {engine} ({flops / t / 1e12:.0f} vs {flops / r / 1e12:.0f} "
                        "TFLOPS)", f"SDPA {name}", t, r, 8 * b * h * s * d,
                        bar if name == "flash" else None))

    def attention() -> None:
        """Issue 11: correct against torch SDPA, TFLOPS beside the flash and cuDNN backends;
        issue 31's bar: 1.2x flash at D128 and D64 (cuDNN reported beside it); D256, which
        issue 31 asks to run but sets no bar for, reported beside them."""
        for d in (128, 64):
            attention_at(True, d)
            attention_at(False, d)
        attention_at(True, 256, bar=None)
        attention_at(False, 256, bar=None)

    def wide_rows() -> None:
        """Issue 31: tile_wide_rows' tuned softmax and layer norm (the whole row while it
        fits a tile, chunks past that) against the faster of Triton's whole-row and chunked
        kernels, each autotuned (benchmarks/wide_rows.py), at 4096 x 32768 and 2048 x 65536."""
        from wide_rows import measure, peer_seconds

        for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
            for m, n in ((4096, 32768), (2048, 65536)):
                results = measure(m, n, dtype)
                for kernel, variant, t in results:
                    if variant.startswith("oxide") and "tuned" in variant:
                        if isinstance(t, str):
                            raise RuntimeError(f"{kernel} {name} {m}x{n}: {t}")
                        out.append((f"tile_wide_rows {kernel}", f"{m}x{n} {name}",
                                    "Triton (whole row or chunks, tuned)", t,
                                    peer_seconds(results, kernel),
                                    2 * dtype.itemsize * m * n, 0.95))

    sections = [vecadd, softmax, layernorm, transpose, matmul, attention, wide_rows]
    for section in sections:
        if only is not None and section.__name__ not in only:
            continue
        try:
            section()
            print(f"{section.__name__}: done", flush=True)
        except Exception:  # noqa: BLE001 - a failing section must not hide the others
            traceback.print_exc()
            out.append((section.__name__, "", "", float("nan"), float("nan"), 0, None))
    return out


def table(results: list[tuple[str, str, str, float, float, int, float | None]]) -> str:
    lines = ["| kernel | problem | reference | oxide | reference | oxide / reference speed | "
             "bar |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, problem, ref, t, r, nbytes, bar in results:
        if t != t:  # nan: the section failed
            lines.append(f"| {name} | | | failed | | | |")
            continue
        rate = nbytes / 1e9
        ratio = r / t
        verdict = "" if bar is None else f"{'PASS' if ratio >= bar else 'FAIL'} (bar {bar:.2f})"
        lines.append(f"| {name} | {problem} | {ref} | {t * 1e3:.3f} ms ({rate / t:,.0f} GB/s) "
                     f"| {r * 1e3:.3f} ms ({rate / r:,.0f} GB/s) | {ratio:.2f} | {verdict} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-docs", action="store_true", help="do not touch docs/performance.md")
    parser.add_argument("--only", nargs="+", metavar="SECTION",
                        choices=["vecadd", "softmax", "layernorm", "transpose", "matmul",
                                 "attention", "wide_rows"],
                        help="run these sections alone (the docs are then left as they are)")
    args = parser.parse_args()
    section = ("## Tile model vs torch and Triton (`benchmarks/tile_bench.py`)\n\n"
               f"{environment()}. GPU time per run; ratio = reference time / oxide time.\n\n"
               + table(rows(args.only)))
    print(section)
    if not args.no_docs and args.only is None:
        update_docs(section, START, END)


if __name__ == "__main__":
    main()
