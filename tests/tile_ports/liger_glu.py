"""Liger-Kernel's SwiGLU and GEGLU (src/liger_kernel/ops/swiglu.py, geglu.py) in oxide.tile,
with NumPy models.

One program per row, the whole row in one tile. Forward: c = act(a) * b with `a` in f32
(Liger: "sigmoid requires type float32"); backward recomputes act(a) and writes da into
`a` and db into `b` in place, as Liger does.

Triton's `tl.store` converts the value to the pointer's element type; the `_implicit`
kernels rely on that (an f32 tile stored into a bf16 array). The others convert with
`.astype(T)` before the store.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from oxide import Const, DisjointSlice, Slice, TypeVar, f32, tile

T = TypeVar("T")
SQRT_2_OVER_PI = 0.7978845608028654


@tile.kernel(num_warps=4)
def swiglu_forward_implicit(a: Slice[T, 2], b: Slice[T, 2], c: DisjointSlice[T, 2],
                            BN: Const[int]):
    """Liger's form: silu(a_f32) * b_row is f32 and `tl.store` rounds it to c's dtype."""
    row = tile.bid(0)
    ar = tile.load(a, (row, 0), (1, BN)).astype(f32)
    br = tile.load(b, (row, 0), (1, BN))
    tile.store(c, (row, 0), ar * tile.sigmoid(ar) * br)


@tile.kernel(num_warps=4)
def swiglu_forward(a: Slice[T, 2], b: Slice[T, 2], c: DisjointSlice[T, 2], BN: Const[int]):
    row = tile.bid(0)
    ar = tile.load(a, (row, 0), (1, BN)).astype(f32)
    br = tile.load(b, (row, 0), (1, BN))
    tile.store(c, (row, 0), (ar * tile.sigmoid(ar) * br).astype(T))


@tile.kernel(num_warps=4)
def swiglu_backward(dc: Slice[T, 2], a: DisjointSlice[T, 2], b: DisjointSlice[T, 2],
                    BN: Const[int]):
    """da = dc * (silu(a) * (1 - sigmoid(a)) + sigmoid(a)) * b and db = dc * silu(a),
    stored over a and b."""
    row = tile.bid(0)
    g = tile.load(dc, (row, 0), (1, BN))
    ar = tile.load(a, (row, 0), (1, BN)).astype(f32)
    br = tile.load(b, (row, 0), (1, BN))
    sig = tile.sigmoid(ar)
    silu = ar * sig
    db = g * silu
    da = g * (silu * (1 - sig) + sig) * br
    tile.store(a, (row, 0), da.astype(T))
    tile.store(b, (row, 0), db.astype(T))


@tile.func
def gelu_tanh(ar):
    """0.5 * a * (1 + tanh(sqrt(2 / pi) * (a + 0.044715 * a^3))), and the tanh."""
    th = tile.tanh(SQRT_2_OVER_PI * (ar + 0.044715 * (ar * ar * ar)))
    return 0.5 * ar * (1 + th), th


@tile.kernel(num_warps=4)
def geglu_forward(a: Slice[T, 2], b: Slice[T, 2], c: DisjointSlice[T, 2], BN: Const[int]):
    """Liger: geglu_a.cast(b.dtype) * b_row."""
    row = tile.bid(0)
    ar = tile.load(a, (row, 0), (1, BN)).astype(f32)
    br = tile.load(b, (row, 0), (1, BN))
    ga, _ = gelu_tanh(ar)
    tile.store(c, (row, 0), ga.astype(T) * br)


@tile.kernel(num_warps=4)
def geglu_backward(dc: Slice[T, 2], a: DisjointSlice[T, 2], b: DisjointSlice[T, 2],
                   BN: Const[int]):
    row = tile.bid(0)
    g = tile.load(dc, (row, 0), (1, BN))
    ar = tile.load(a, (row, 0), (1, BN)).astype(f32)
    br = tile.load(b, (row, 0), (1, BN))
    ga, th = gelu_tanh(ar)
    ga = ga.astype(T).astype(f32)
    db = g.astype(f32) * ga
    term1 = 0.5 * (1 + th)
    term2 = 0.5 * ar * (1 - th * th) * (SQRT_2_OVER_PI * (1 + 3 * 0.044715 * ar * ar))
    da = g * br * (term1 + term2)
    tile.store(a, (row, 0), da.astype(T))
    tile.store(b, (row, 0), db.astype(T))


def block_for(n: int) -> int:
    return 1 << (n - 1).bit_length()


def _f32(v: np.ndarray) -> np.ndarray:
    return v.astype(np.float32)


def swiglu_model(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a32 = _f32(a)
    return (a32 / (1 + np.exp(-a32)) * _f32(b)).astype(a.dtype)


def swiglu_backward_model(dc: np.ndarray, a: np.ndarray, b: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray]:
    """(da, db) in f64."""
    a64, b64, g = (v.astype(np.float64) for v in (a, b, dc))
    sig = 1 / (1 + np.exp(-a64))
    silu = a64 * sig
    return g * (silu * (1 - sig) + sig) * b64, g * silu


def _gelu_tanh(a64: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    th = np.tanh(math.sqrt(2 / math.pi) * (a64 + 0.044715 * a64 ** 3))
    return 0.5 * a64 * (1 + th), th


def geglu_model(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """c in f64, with gelu(a) rounded to b's dtype first as Liger does."""
    ga, _ = _gelu_tanh(a.astype(np.float64))
    if b.dtype == ml_dtypes.bfloat16:
        ga = ga.astype(np.float32).astype(b.dtype).astype(np.float64)
    return ga * b.astype(np.float64)


def geglu_backward_model(dc: np.ndarray, a: np.ndarray, b: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray]:
    a64, b64, g = (v.astype(np.float64) for v in (a, b, dc))
    ga, th = _gelu_tanh(a64)
    term1 = 0.5 * (1 + th)
    term2 = 0.5 * a64 * (1 - th * th) * (math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * a64 ** 2))
    return g * b64 * (term1 + term2), g * ga
