"""Tile softmax: one tile block per row, the whole row in one tile (ox.tile).

`num_warps="auto"`: the compiler sizes the block to the row, from 4 warps for a few
thousand columns to 32 for 32768 and more, so the row stays in registers at every width
(tile/auto_warps.py)."""

from __future__ import annotations

import math

import numpy as np

import oxide as ox
from oxide import Const, DisjointSlice, Slice, TypeVar, f32, tile
from oxide.testing import RunResult, check_arch, describe_device, seconds_per_launch

T = TypeVar("T")  # f32, or a 16-bit float (bf16, f16): the math is in f32 either way
LOG2E = math.log2(math.e)


@tile.kernel(num_warps="auto")
def tile_softmax(x: Slice[T, 2], out: DisjointSlice[T, 2], BN: Const[int]):
    """Columns past the row's end load as -inf, so they add exp(-inf) = 0 to the sum;
    subtracting the row maximum keeps exp() finite for any input. 16-bit rows are
    computed in f32 and rounded once on the way out.

    Written for speed: e^x as 2^(x log2 e) (`tile.exp2` is one `ex2.approx` on the GPU,
    where `tile.exp` is libdevice's accurate `expf`), and one division per row, then a
    multiplication per element. That is what Triton's `tl.exp` and `/` compile to; on
    bf16 rows the arithmetic, not memory, bounds the kernel otherwise (0.69x Triton with
    `exp` and `/`, 1.01x like this; H200, 2026-12-03). The results differ from the
    exact formula by a few f32 ulps."""
    row = tile.bid(0)
    t = tile.load(x, (row, 0), (1, BN), padding=-math.inf).astype(f32)
    e = tile.exp2((t - tile.max(t, 1, keepdims=True)) * LOG2E)
    tile.store(out, (row, 0), (e * (1.0 / tile.sum(e, 1, keepdims=True))).astype(T))


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """Softmax of a `size` x (`size` + 7) matrix, checked against NumPy."""
    with ox.device(device) as dev:
        rows = size or (256 if dev.is_cpu else 8192)
        cols = rows + 7
        block = 1 << (cols - 1).bit_length()  # the row in one power-of-two tile
        x = np.random.default_rng(6).standard_normal((rows, cols), dtype=np.float32) * 4
        out = np.zeros_like(x)
        d_x, d_out = [ox.to_device(arr) for arr in (x, out)]
        seconds = seconds_per_launch(lambda: ox.launch(tile_softmax, rows, d_x, d_out, block), dev)
        e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
        want = e / e.sum(axis=1, keepdims=True)
        passed = bool(np.allclose(d_out.to_numpy(), want, rtol=1e-4, atol=1e-7))
        return RunResult("tile_softmax", passed, describe_device(dev),
                         f"{rows:,} x {cols:,} f32", seconds, work=2 * 4 * rows * cols,
                         unit="GB/s", detail=check_arch(tile_softmax, arch, x, out, block))


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
