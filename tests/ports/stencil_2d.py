"""A 2-D stencil (a blur with clamped edges) through a shared-memory tile with a halo.

The pattern of numba's and CUDA's shared-memory stencil examples: each block of
TILE x TILE threads loads its tile plus a halo of `radius` cells on each side into
shared memory (threads load several cells each, the source index clamped at the
array's edges), waits at a barrier, then each thread sums its weighted neighbourhood
from shared memory. Inputs are integers in 0..255 and weights multiples of 1/16 (or
small integers), so every product and partial sum is exact in f32: the result must
equal NumPy's, whatever the order of the additions and whether they are fused.

Two ports: `blur3` with a module-level NumPy array of weights (captured as a constant,
as numba does), and `blur` with the weights as an argument and the radius a `Const`
parameter (the shared tile's shape follows it).

Friction met while porting:

- Weights as a module-level tuple of tuples, `WT[dy][dx]` in two nested constant
  loops, is refused at `dx`: "tuples are indexed with constant integers", with the hint
  "a constant, or the variable of a `for` over a constant range (that loop is
  unrolled)" — which `dx` is. One level (`w[j]`) works; the nested form does not.
- `W[dy][dx]` on the captured 2-D NumPy array (numba takes it: `W[dy]` is a row view)
  is "`W` has rank 2; index it with 2 integers, not 1": clear, `W[dy, dx]` works.
- The tile's shape from the block (`ox.block_dim.y + 2 * R`) is refused with a clear
  message (shapes are compile-time); CUDA code uses a template constant the same way.
"""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, thread

TILE = 16
HALO = 1
W3 = np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]], np.float32) / 16  # captured by blur3
WT = ((0.0625, 0.125, 0.0625), (0.125, 0.25, 0.125), (0.0625, 0.125, 0.0625))
MAX_RADIUS = 4


@ox.kernel
def blur3(src: Slice[f32, 2], dst: DisjointSlice[f32, 2]):
    """The 3x3 binomial blur of `src` (edges clamped); blocks of TILE x TILE threads."""
    tile = ox.shared.array(f32, (TILE + 2 * HALO, TILE + 2 * HALO))
    tx = ox.thread_idx.x
    ty = ox.thread_idx.y
    ij = thread.index_2d()
    n, m = src.shape
    for dy in range(0, TILE + 2 * HALO, TILE):
        for dx in range(0, TILE + 2 * HALO, TILE):
            if ty + dy < TILE + 2 * HALO and tx + dx < TILE + 2 * HALO:
                r = min(max(ox.block_idx.y * TILE + ty + dy - HALO, 0), n - 1)
                c = min(max(ox.block_idx.x * TILE + tx + dx - HALO, 0), m - 1)
                with ox.unsafe():
                    tile[ty + dy, tx + dx] = src[r, c]
    ox.sync_threads()
    if ij in dst:
        acc = 0.0
        for dy in range(2 * HALO + 1):
            for dx in range(2 * HALO + 1):
                with ox.unsafe():
                    acc += W3[dy, dx] * tile[ty + dy, tx + dx]
        dst[ij] = acc


@ox.kernel
def blur(src: Slice[f32, 2], weights: Slice[f32, 2], dst: DisjointSlice[f32, 2],
         radius: Const[int]):
    """`src` convolved with the (2 radius + 1)^2 `weights` (edges clamped)."""
    side = TILE + 2 * radius
    tile = ox.shared.array(f32, (TILE + 2 * radius, TILE + 2 * radius))
    tx = ox.thread_idx.x
    ty = ox.thread_idx.y
    ij = thread.index_2d()
    n, m = src.shape
    dy = 0
    while dy < side:
        dx = 0
        while dx < side:
            if ty + dy < side and tx + dx < side:
                r = min(max(ox.block_idx.y * TILE + ty + dy - radius, 0), n - 1)
                c = min(max(ox.block_idx.x * TILE + tx + dx - radius, 0), m - 1)
                with ox.unsafe():
                    tile[ty + dy, tx + dx] = src[r, c]
            dx += TILE
        dy += TILE
    ox.sync_threads()
    if ij in dst:
        acc = 0.0
        for ky in range(2 * radius + 1):
            for kx in range(2 * radius + 1):
                with ox.unsafe():
                    acc += weights[ky, kx] * tile[ty + ky, tx + kx]
        dst[ij] = acc


def natural_nested_tuple() -> ox.Kernel:
    """The 3x3 weights as a tuple of tuples, read `WT[dy][dx]`."""

    @ox.kernel
    def blur3_tuple(src: Slice[f32, 2], dst: DisjointSlice[f32, 2]):
        tile = ox.shared.array(f32, (TILE + 2 * HALO, TILE + 2 * HALO))
        tx = ox.thread_idx.x
        ty = ox.thread_idx.y
        ij = thread.index_2d()
        n, m = src.shape
        for dy in range(0, TILE + 2 * HALO, TILE):
            for dx in range(0, TILE + 2 * HALO, TILE):
                if ty + dy < TILE + 2 * HALO and tx + dx < TILE + 2 * HALO:
                    r = min(max(ox.block_idx.y * TILE + ty + dy - HALO, 0), n - 1)
                    c = min(max(ox.block_idx.x * TILE + tx + dx - HALO, 0), m - 1)
                    with ox.unsafe():
                        tile[ty + dy, tx + dx] = src[r, c]
        ox.sync_threads()
        if ij in dst:
            acc = 0.0
            for dy in range(3):
                for dx in range(3):
                    with ox.unsafe():
                        acc += WT[dy][dx] * tile[ty + dy, tx + dx]
            dst[ij] = acc

    return blur3_tuple


def reference(src: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The same convolution in NumPy, edges clamped (np.pad's "edge")."""
    radius = weights.shape[0] // 2
    padded = np.pad(src, radius, mode="edge")
    out = np.zeros_like(src)
    for ky in range(weights.shape[0]):
        for kx in range(weights.shape[1]):
            out += weights[ky, kx] * padded[ky:ky + src.shape[0], kx:kx + src.shape[1]]
    return out


def _config(shape: tuple[int, int]) -> ox.LaunchConfig:
    rows, cols = shape
    return ox.LaunchConfig(grid=(-(-cols // TILE), -(-rows // TILE)), block=(TILE, TILE))


def run_blur3(src: np.ndarray, kernel: ox.Kernel = blur3) -> np.ndarray:
    dst = np.zeros_like(src)
    kernel[_config(src.shape)](src, dst)
    return dst


def run_blur(src: np.ndarray, weights: np.ndarray) -> np.ndarray:
    radius = weights.shape[0] // 2
    assert weights.shape == (2 * radius + 1, 2 * radius + 1) and radius <= MAX_RADIUS
    dst = np.zeros_like(src)
    blur[_config(src.shape)](src, weights, dst, radius)
    return dst
