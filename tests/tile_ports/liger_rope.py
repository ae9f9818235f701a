"""Liger-Kernel's RoPE (src/liger_kernel/ops/rope.py, `_triton_rope`) in oxide.tile, with a
NumPy model (HuggingFace Llama's rotate_half form).

One program per token (bsz * seq_len programs). q is (bsz * seq_len, n_q_heads, head_dim)
and k (bsz * seq_len, n_kv_heads, head_dim), rotated in place; cos and sin are
(1 or bsz, seq_len, head_dim), of which the left half is read. Liger loads all heads'
left halves as one (pad_n_heads, pad_hd // 2) tile at column 0 and the right halves at
column hd // 2:

    y1 = x1 * cos - x2 * sin,   y2 = x2 * cos + x1 * sin     (backward: sin -> -sin)

oxide's tile loads sit at tile indices, so the right half at column hd // 2 is the tile
index 1 of (., ., HD2)-wide tiles only when HD2 = hd // 2, i.e. a power-of-two head_dim
(64, 128: `rope`). For another head_dim (80, 96) the right half is not at a tile index;
`rope_halves` is the first workaround a user tries: the host passes the two halves as
separate strided views `q[..., :hd // 2]` and `q[..., hd // 2:]`, each loaded at tile
index 0; the launch refuses it (AliasingError: the check compares byte ranges, and
docs/runtime.md says interleaved views count as overlapping). `rope_pairs` is the one
that works: the host views q as (rows, 2 * n_heads, hd // 2) (a free reshape), the
kernel loads a (1, 2 * PAD_H, PAD_HD2) tile, reshapes it to (PAD_H, 2 * PAD_HD2) so
each row is one head's [left | right], splits it, rotates, and puts it back.
The math is done in f32 (Liger does it in cos's dtype) and rounded once.
"""

from __future__ import annotations

import numpy as np

from oxide import Const, DisjointSlice, Slice, TypeVar, f32, i64, tile

T = TypeVar("T")


@tile.func
def rotate(x1, x2, c, s, BACKWARD):
    """Liger's `if not BACKWARD_PASS: ... else: ...` (backward: sin -> -sin)."""
    s = -s if BACKWARD else s
    return x1 * c - x2 * s, x2 * c + x1 * s


@tile.kernel(num_warps=4)
def rope(q: DisjointSlice[T, 3], k: DisjointSlice[T, 3], cos: Slice[T, 3], sin: Slice[T, 3],
         sl: i64, PAD_QH: Const[int], PAD_KH: Const[int], HD2: Const[int],
         BACKWARD: Const[bool]):
    pid = tile.bid(0).astype(i64)
    batch = pid // sl
    pos = pid % sl
    cb = batch if cos.shape[0] > 1 else 0 * batch
    c = tile.load(cos, (cb, pos, 0), (1, 1, HD2)).astype(f32)
    s = tile.load(sin, (cb, pos, 0), (1, 1, HD2)).astype(f32)
    q1 = tile.load(q, (pid, 0, 0), (1, PAD_QH, HD2)).astype(f32)
    q2 = tile.load(q, (pid, 0, 1), (1, PAD_QH, HD2)).astype(f32)
    k1 = tile.load(k, (pid, 0, 0), (1, PAD_KH, HD2)).astype(f32)
    k2 = tile.load(k, (pid, 0, 1), (1, PAD_KH, HD2)).astype(f32)
    nq1, nq2 = rotate(q1, q2, c, s, BACKWARD)
    nk1, nk2 = rotate(k1, k2, c, s, BACKWARD)
    tile.store(q, (pid, 0, 0), nq1.astype(T))
    tile.store(q, (pid, 0, 1), nq2.astype(T))
    tile.store(k, (pid, 0, 0), nk1.astype(T))
    tile.store(k, (pid, 0, 1), nk2.astype(T))


@tile.kernel(num_warps=4)
def rope_halves(q1v: DisjointSlice[T, 3], q2v: DisjointSlice[T, 3], k1v: DisjointSlice[T, 3],
                k2v: DisjointSlice[T, 3], cos: Slice[T, 3], sin: Slice[T, 3], sl: i64,
                PAD_QH: Const[int], PAD_KH: Const[int], PAD_HD2: Const[int],
                BACKWARD: Const[bool]):
    """Any head_dim: the halves come as four views (hd // 2 columns each)."""
    pid = tile.bid(0).astype(i64)
    batch = pid // sl
    pos = pid % sl
    cb = batch if cos.shape[0] > 1 else 0 * batch
    c = tile.load(cos, (cb, pos, 0), (1, 1, PAD_HD2)).astype(f32)
    s = tile.load(sin, (cb, pos, 0), (1, 1, PAD_HD2)).astype(f32)
    q1 = tile.load(q1v, (pid, 0, 0), (1, PAD_QH, PAD_HD2)).astype(f32)
    q2 = tile.load(q2v, (pid, 0, 0), (1, PAD_QH, PAD_HD2)).astype(f32)
    k1 = tile.load(k1v, (pid, 0, 0), (1, PAD_KH, PAD_HD2)).astype(f32)
    k2 = tile.load(k2v, (pid, 0, 0), (1, PAD_KH, PAD_HD2)).astype(f32)
    nq1, nq2 = rotate(q1, q2, c, s, BACKWARD)
    nk1, nk2 = rotate(k1, k2, c, s, BACKWARD)
    tile.store(q1v, (pid, 0, 0), nq1.astype(T))
    tile.store(q2v, (pid, 0, 0), nq2.astype(T))
    tile.store(k1v, (pid, 0, 0), nk1.astype(T))
    tile.store(k2v, (pid, 0, 0), nk2.astype(T))


@tile.func
def rotate_pairs(x, c, s, PAD, PAD_HD2, BACKWARD):
    """x: (1, 2 * PAD, PAD_HD2) rows [h0 left, h0 right, h1 left, ...]; rotated, same shape."""
    x1, x2 = tile.split(x.reshape((PAD, 2 * PAD_HD2)), 2, axis=1)
    y1, y2 = rotate(x1, x2, c.reshape((1, PAD_HD2)), s.reshape((1, PAD_HD2)), BACKWARD)
    return tile.cat((y1, y2), axis=1).reshape((1, 2 * PAD, PAD_HD2))


@tile.kernel(num_warps=4)
def rope_pairs(q: DisjointSlice[T, 3], k: DisjointSlice[T, 3], cos: Slice[T, 3],
               sin: Slice[T, 3], sl: i64, PAD_QH: Const[int], PAD_KH: Const[int],
               PAD_HD2: Const[int], BACKWARD: Const[bool]):
    """q (rows, 2 * n_q_heads, hd // 2) and k (rows, 2 * n_kv_heads, hd // 2): any even hd."""
    pid = tile.bid(0).astype(i64)
    batch = pid // sl
    pos = pid % sl
    cb = batch if cos.shape[0] > 1 else 0 * batch
    c = tile.load(cos, (cb, pos, 0), (1, 1, PAD_HD2)).astype(f32)
    s = tile.load(sin, (cb, pos, 0), (1, 1, PAD_HD2)).astype(f32)
    qt = tile.load(q, (pid, 0, 0), (1, 2 * PAD_QH, PAD_HD2)).astype(f32)
    kt = tile.load(k, (pid, 0, 0), (1, 2 * PAD_KH, PAD_HD2)).astype(f32)
    tile.store(q, (pid, 0, 0), rotate_pairs(qt, c, s, PAD_QH, PAD_HD2, BACKWARD).astype(T))
    tile.store(k, (pid, 0, 0), rotate_pairs(kt, c, s, PAD_KH, PAD_HD2, BACKWARD).astype(T))


def pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def cos_sin(cos_bs: int, seq_len: int, hd: int, dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """HF's cos/sin tables: angle pos * base^(-2i/hd), the half repeated."""
    inv = 1.0 / (10000.0 ** (np.arange(0, hd, 2) / hd))
    pos = np.arange(seq_len)[None, :, None] + np.arange(cos_bs)[:, None, None] * 3
    ang = pos * inv[None, None, :]
    ang = np.concatenate([ang, ang], axis=-1)
    return np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)


def model(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, bsz: int, seq_len: int,
          backward: bool) -> np.ndarray:
    """x (bsz * seq_len, heads, hd) rotated, in f64: x * cos + rotate_half(x) * sin."""
    hd = x.shape[2]
    x64 = x.astype(np.float64).reshape(bsz, seq_len, x.shape[1], hd)
    c = np.broadcast_to(cos.astype(np.float64), (bsz, seq_len, hd))[:, :, None, :]
    s = np.broadcast_to(sin.astype(np.float64), (bsz, seq_len, hd))[:, :, None, :]
    if backward:
        s = -s
    half = np.concatenate([-x64[..., hd // 2:], x64[..., :hd // 2]], axis=-1)
    return (x64 * c + half * s).reshape(x.shape)
