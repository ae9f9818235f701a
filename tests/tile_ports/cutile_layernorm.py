"""cuTile's layer norm forward (cutile-python test/kernels/layer_norm.py style): the row
in TILE_N chunks, the mean, then the variance with `(x - mean) ** 2` masked by
`ct.where` past N, Mean and Rstd stored as scalars, then `y = (x - mean) * rstd * w + b`."""

from __future__ import annotations

import numpy as np

from oxide import Const, DisjointSlice, Slice, TypeVar, f32, tile

T = TypeVar("T")


@tile.kernel(num_warps=4)
def layer_norm_fwd(x: Slice[T, 2], w: Slice[T], b: Slice[T], y: DisjointSlice[T, 2],
                   mean_out: DisjointSlice[f32], rstd_out: DisjointSlice[f32], eps: f32,
                   TILE_N: Const[int]):
    bid_m = tile.bid(0)
    num_tiles = tile.num_tiles(x, 1, TILE_N)
    n = x.shape[1]
    mean = tile.full((1, TILE_N), 0, f32)
    for j in range(num_tiles):
        tx = tile.load(x, (bid_m, j), (1, TILE_N), padding=0)
        mean += tx.astype(f32)
    mean = tile.sum(mean, axis=1) / n
    var = tile.full((1, TILE_N), 0, f32)
    for j in range(num_tiles):
        tx = tile.load(x, (bid_m, j), (1, TILE_N), padding=0).astype(f32)
        mask = (j * TILE_N + tile.arange(TILE_N, dtype=f32)) < n
        centered = tile.where(mask, tx - mean, 0)
        var += centered ** 2
    var = tile.sum(var, axis=1) / n
    rstd = 1 / tile.sqrt(var + eps)
    tile.store(mean_out, (bid_m,), mean.reshape(()))
    tile.store(rstd_out, (bid_m,), rstd.reshape(()))
    for j in range(num_tiles):
        tx = tile.load(x, (bid_m, j), (1, TILE_N), padding=0).astype(f32)
        tw = tile.load(w, (j,), (TILE_N,), padding=0).astype(f32)
        tb = tile.load(b, (j,), (TILE_N,), padding=0).astype(f32)
        ty = (tx - mean) * rstd
        ty = ty * tw + tb
        tile.store(y, (bid_m, j), ty.astype(T))


def reference(x, w, b, eps):
    x64 = x.astype(np.float64)
    mean = x64.mean(1)
    var = ((x64 - mean[:, None]) ** 2).mean(1)
    rstd = 1 / np.sqrt(var + eps)
    y = (x64 - mean[:, None]) * rstd[:, None] * w.astype(np.float64) + b.astype(np.float64)
    return y, mean, rstd
