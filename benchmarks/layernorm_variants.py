"""Layer norm written several ways, side by side with tile_bench's Triton kernel, on one GPU.

What it is for: locating what layernorm's speed depends on (it found issue 11's bf16 gap:
the shuffles' register mask and the blocks an SM; docs/performance.md). Each variant
changes one thing against 8 warps at `occupancy=4` (what the example,
`oxide.examples.tile_layernorm`, had by hand, and what its `num_warps="auto"` chooses at
8192 columns):

- occupancy None / 3, and 4 or 16 warps: how many blocks share an SM, and registers;
- "no mask": the variance without `tile.where(arange < n, ...)` (right only when the row
  fills the tile, as here): what the mask costs;
- "no w, b": the output without the weight and bias (a different result, timed only):
  what their loads and registers cost.

    python benchmarks/layernorm_variants.py [--rows 8192] [--cols 8192] [--reps 2]

Prints a table of GB/s (bytes read and written by the row data, as tile_bench counts)
and each variant's ratio to Triton in the same run, for f32 and bf16. Variants that
compute the real layer norm are checked against torch first.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simt_bench import gpu_seconds  # noqa: E402
from tile_bench import triton_kernels  # noqa: E402


def variant(occupancy: int | None, warps: int = 8, mask: bool = True, affine: bool = True
            ) -> Any:
    """The example's body as a fresh kernel with these options and simplifications."""
    from oxide import Const, DisjointSlice, Slice, TypeVar, f32, tile

    T = TypeVar("T")

    @tile.kernel(num_warps=warps, occupancy=occupancy)
    def layernorm(x: Slice[T, 2], w: Slice[T], b: Slice[T], out: DisjointSlice[T, 2],
                  eps: f32, BN: Const[int]):
        row = tile.bid(0)
        n = x.shape[1]
        t = tile.load(x, (row, 0), (1, BN)).astype(f32)
        mean = tile.sum(t, 1, keepdims=True) / n
        if mask:
            d = tile.where(tile.arange(BN)[None, :] < n, t - mean, 0.0)
        else:
            d = t - mean
        y = d * tile.rsqrt(tile.sum(d * d, 1, keepdims=True) / n + eps)
        if affine:
            y = y * tile.load(w, (0,), (BN,)).astype(f32) + tile.load(b, (0,), (BN,)).astype(f32)
        tile.store(out, (row, 0), y.astype(T))

    return layernorm


def table_for(dtype: Any, m: int, n: int, reps: int, variants: list[tuple[str, Any, bool]],
              triton_ln: Any) -> None:
    """Print the rows of one dtype: Triton, then each variant, `reps` times."""
    import torch

    import oxide as ox

    block = 1 << (n - 1).bit_length()
    x = (torch.randn(m, n, device="cuda") * 3 + 1).to(dtype)
    w = torch.randn(n, device="cuda").to(dtype)
    b = torch.randn(n, device="cuda").to(dtype)
    y = torch.empty_like(x)
    want = torch.nn.functional.layer_norm(x.float(), (n,), w.float(), b.float(), 1e-5)
    moved = 2 * x.element_size() * m * n
    name_of = str(dtype).removeprefix("torch.")
    for _ in range(reps):
        ref = gpu_seconds(lambda: triton_ln[(m,)](x, w, b, y, n, 1e-5, BLOCK=block,
                                                  num_warps=8))
        print(f"| {name_of} | Triton (8 warps) | {moved / ref / 1e9:,.0f} | 1.00 |")
        for name, kernel, checked in variants:
            ox.launch(kernel, m, x, w, b, y, 1e-5, block)
            torch.cuda.synchronize()
            if checked:
                err = (y.float() - want).abs().max().item()
                tol = 1e-4 if dtype == torch.float32 else 0.1
                if not err <= tol:
                    raise AssertionError(f"{name} {name_of}: max error {err}")
            t = gpu_seconds(lambda k=kernel: ox.launch(k, m, x, w, b, y, 1e-5, block))
            print(f"| {name_of} | {name} | {moved / t / 1e9:,.0f} | {ref / t:.2f} |",
                  flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--cols", type=int, default=8192)
    parser.add_argument("--reps", type=int, default=2, help="times each table is measured")
    args = parser.parse_args()
    import torch

    from oxide.examples.tile_layernorm import tile_layernorm

    full = (1 << (args.cols - 1).bit_length()) == args.cols  # the row fills its tile
    variants = [("example (num_warps=\"auto\")", tile_layernorm, True),
                ("occupancy None", variant(None), True),
                ("occupancy 3", variant(3), True),
                ("4 warps, occupancy 8", variant(8, warps=4), True),
                ("16 warps, occupancy 2", variant(2, warps=16), True),
                ("occupancy 4, no mask", variant(4, mask=False), full),
                ("occupancy 4, no w, b", variant(4, affine=False), False)]
    _, triton_ln = triton_kernels()
    print("| dtype | variant | GB/s | / Triton |\n| --- | --- | ---: | ---: |")
    for dtype in (torch.float32, torch.bfloat16):
        table_for(dtype, args.rows, args.cols, args.reps, variants, triton_ln)


if __name__ == "__main__":
    main()
