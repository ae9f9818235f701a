"""Triton tutorial 04, low-memory dropout: the plain kernel (a keep-mask array) and the
seeded one (the mask remade from a seed with `tl.rand(seed, offsets)`)."""

from __future__ import annotations

import numpy as np

from oxide import Const, DisjointSlice, Slice, TypeVar, f32, i8, i32, tile

T = TypeVar("T")


@tile.kernel(num_warps=4)
def dropout_kernel(x: Slice[T], x_keep: Slice[i8], out: DisjointSlice[T], p: f32,
                   BLOCK: Const[int]):
    pid = tile.bid(0)
    x_t = tile.load(x, (pid,), (BLOCK,))
    keep = tile.load(x_keep, (pid,), (BLOCK,))
    tile.store(out, (pid,), tile.where(keep != 0, x_t / (1 - p), 0.0).astype(T))


@tile.kernel(num_warps=4)
def seeded_dropout_kernel(x: Slice[T], out: DisjointSlice[T], p: f32, seed: i32,
                          BLOCK: Const[int]):
    pid = tile.bid(0)
    offsets = pid * BLOCK + tile.arange(BLOCK)
    x_t = tile.load(x, (pid,), (BLOCK,))
    keep = tile.rand(seed, offsets) > p
    tile.store(out, (pid,), tile.where(keep, x_t / (1 - p), 0.0).astype(T))


def philox_uniform(seed: int, n: int) -> np.ndarray:
    """Triton's tl.rand(seed, arange(n)): Philox4x32-10, counter (offset, 0, 0, 0), key the
    seed as a u64 (low word first), the first word to [0, 1) as uint_to_uniform_float."""
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
    v = c0.astype(np.uint32).view(np.int32)
    v = np.where(v < 0, ~v, v)
    return v.astype(np.float32) * np.float32(4.6566127342e-10)


def reference(x: np.ndarray, keep: np.ndarray, p: float) -> np.ndarray:
    x32 = x.astype(np.float32)
    return np.where(keep, x32 / (np.float32(1) - np.float32(p)), np.float32(0))
