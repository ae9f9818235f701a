"""FlagGems pointwise ops (the bodies of their `@pointwise_dynamic` functions, in a 1-d
tile kernel): gelu (erf and tanh forms), silu in f32 (`x / (1 + exp(-x))`), gelu's
backward, and a `tl.where` activation (elu)."""

from __future__ import annotations

import numpy as np

from oxide import Const, DisjointSlice, Slice, TypeVar, f32, tile

T = TypeVar("T")


@tile.func
def gelu_none(x):
    return 0.5 * x * (1 + tile.erf(x * 0.7071067811))


@tile.func
def gelu_tanh(x):
    return 0.5 * x * (1 + tile.tanh(x * 0.79788456 * (1 + 0.044715 * tile.pow(x, 2))))


@tile.func
def silu(x):
    return x / (1.0 + tile.exp(-x))


@tile.func
def gelu_backward_none(x, dy):
    scale1 = 0.7071067811
    scale2 = 0.3989422803
    x_sq = x * x
    pdf = tile.exp(-0.5 * x_sq)
    dydx = scale2 * x * pdf + 0.5 * tile.erf(scale1 * x) + 0.5
    return dydx * dy


@tile.func
def elu(x, alpha):
    return tile.where(x > 0, x, alpha * (tile.exp(x) - 1))


@tile.kernel(num_warps=4)
def activations_kernel(x: Slice[T], out: DisjointSlice[T, 2], BLOCK: Const[int]):
    pid = tile.bid(0)
    t = tile.load(x, (pid,), (BLOCK,)).astype(f32)
    tile.store(out, (0, pid), gelu_none(t).astype(T)[None, :])
    tile.store(out, (1, pid), gelu_tanh(t).astype(T)[None, :])
    tile.store(out, (2, pid), silu(t).astype(T)[None, :])
    tile.store(out, (3, pid), elu(t, 1.0).astype(T)[None, :])


@tile.kernel(num_warps=4)
def gelu_backward_kernel(x: Slice[T], dy: Slice[T], dx: DisjointSlice[T], BLOCK: Const[int]):
    pid = tile.bid(0)
    t = tile.load(x, (pid,), (BLOCK,)).astype(f32)
    g = tile.load(dy, (pid,), (BLOCK,)).astype(f32)
    tile.store(dx, (pid,), gelu_backward_none(t, g).astype(T))


def reference(x: np.ndarray) -> np.ndarray:
    """The four activations of f32(x), in f64, as rows."""
    import math
    x64 = x.astype(np.float32).astype(np.float64)
    erf = np.vectorize(math.erf)
    return np.stack([
        0.5 * x64 * (1 + erf(x64 * 0.7071067811)),
        0.5 * x64 * (1 + np.tanh(x64 * 0.79788456 * (1 + 0.044715 * x64 ** 2))),
        x64 / (1 + np.exp(-x64)),
        np.where(x64 > 0, x64, np.expm1(x64)),
    ])


def reference_gelu_backward(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    import math
    x64 = x.astype(np.float32).astype(np.float64)
    erf = np.vectorize(math.erf)
    dydx = 0.3989422803 * x64 * np.exp(-0.5 * x64 * x64) + 0.5 * erf(0.7071067811 * x64) + 0.5
    return dydx * dy.astype(np.float64)
