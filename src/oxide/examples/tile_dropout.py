"""Tile dropout: Triton's seeded dropout, its mask made from the seed by Philox (ox.tile)."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, i64, tile
from oxide.testing import RunResult, check_arch, describe_device, seconds_per_launch

TILE = 1024


@tile.kernel
def tile_dropout(x: Slice[f32], out: DisjointSlice[f32], p: f32, seed: i64, B: Const[int]):
    """Triton's "low-memory dropout" tutorial: no mask is stored, since `tile.rand(seed,
    offsets)` gives every element the same number on every run, on the CPU and the GPU
    (Philox4x32-10 with Triton's seed, offset and float conventions), so the backward
    pass remakes the mask from the seed alone. An element is kept where its number is
    above `p`, and scaled by 1 / (1 - p)."""
    i = tile.bid(0)
    offsets = i * B + tile.arange(B)
    t = tile.load(x, (i,), (B,))
    keep = tile.rand(seed, offsets) > p
    tile.store(out, (i,), tile.where(keep, t / (1 - p), 0.0))


def philox_uniform(seed: int, n: int) -> np.ndarray:
    """The numbers `tile.rand(seed, arange(n))` gives, in NumPy: Philox4x32-10 with the
    counter (offset, 0, 0, 0) and the key (seed's low word, seed's high word), the first
    word mapped to [0, 1) as Triton's `uint_to_uniform_float`."""
    mask = np.uint64(0xFFFFFFFF)
    c0 = np.arange(n, dtype=np.uint64)
    c1 = c2 = c3 = np.zeros(n, np.uint64)
    bits = seed % 2**64
    k0, k1 = np.uint64(bits & 0xFFFFFFFF), np.uint64(bits >> 32)
    for _ in range(10):
        p0, p1 = np.uint64(0xD2511F53) * c0, np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & mask,
                          (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & mask)
        k0, k1 = (k0 + np.uint64(0x9E3779B9)) & mask, (k1 + np.uint64(0xBB67AE85)) & mask
    x = c0.astype(np.uint32).view(np.int32)
    x = np.where(x < 0, ~x, x)
    return x.astype(np.float32) * np.float32(4.6566127342e-10)


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """Dropout (p = 0.3) of `size` floats (not a multiple of the tile): the mask is NumPy's
    Philox with the same seed, the kept elements are scaled exactly, a second run with
    the seed gives the same bits, and another seed another mask."""
    with ox.device(device) as dev:
        n = size or ((1 << 20) + 5 if dev.is_cpu else (1 << 24) + 5)
        p, seed = np.float32(0.3), 20240515
        x = np.random.default_rng(8).standard_normal(n, dtype=np.float32)
        d_x = ox.to_device(x)
        d_out, d_again, d_other = (ox.to_device(np.zeros(n, np.float32)) for _ in range(3))
        grid = tile.cdiv(n, TILE)
        seconds = seconds_per_launch(
            lambda: ox.launch(tile_dropout, grid, d_x, d_out, p, np.int64(seed), TILE), dev)
        ox.launch(tile_dropout, grid, d_x, d_again, p, np.int64(seed), TILE)
        ox.launch(tile_dropout, grid, d_x, d_other, p, np.int64(seed + 1), TILE)
        out = d_out.to_numpy()
        keep = philox_uniform(seed, n) > p
        want = np.where(keep, x / (np.float32(1) - p), np.float32(0))
        passed = (np.array_equal(out, want) and np.array_equal(out, d_again.to_numpy())
                  and not np.array_equal(out, d_other.to_numpy())
                  and (n < 10_000 or abs(keep.mean() - (1 - p)) < 0.01))
        return RunResult("tile_dropout", bool(passed), describe_device(dev),
                         f"n = {n:,} f32, p = {float(p):g}", seconds, work=2 * 4 * n, unit="GB/s",
                         detail=check_arch(tile_dropout, arch, x, out, p, np.int64(seed),
                                           TILE))


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
