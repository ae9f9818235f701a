"""Triton tutorial 06, fused attention forward: q, k, v as (Z*H, N_CTX, HEAD_DIM), a grid
of (N_CTX / BLOCK_M, Z*H), the online softmax in base 2 (`qk_scale = sm_scale * log2 e`),
the inner loop an `@triton.jit` helper called once (non-causal: every key block) or twice
(causal: the blocks left of the diagonal unmasked, then the diagonal block masked), and
the row's log-sum-exp (base 2) stored in M. Keys past N_CTX are masked too (the tutorial
takes N_CTX a multiple of the blocks; the tests use ragged lengths)."""

from __future__ import annotations

import math

import numpy as np

from oxide import Const, DisjointSlice, Slice, TypeVar, f32, tile

T = TypeVar("T")
LOG2E = 1.44269504


@tile.func
def attn_fwd_inner(acc, l_i, m_i, q, k, v, off_hz, start_m, qk_scale, n_ctx,
                   BM, BN, D, STAGE):
    if STAGE == 1:
        lo, hi = 0, start_m * BM
    elif STAGE == 2:
        lo, hi = start_m * BM, (start_m + 1) * BM
    else:
        lo, hi = 0, n_ctx
    offs_m = start_m * BM + tile.arange(BM)[:, None]
    for start_n in range(lo, hi, BN):
        kt = tile.load(k, (off_hz, start_n // BN, 0), (1, BN, D)).reshape((BN, D))
        qk = q @ kt.permute((1, 0))
        offs_n = start_n + tile.arange(BN)[None, :]
        if STAGE == 2:
            mask = (offs_m >= offs_n) & (offs_n < n_ctx)
        else:
            mask = offs_n < n_ctx
        qk = qk * qk_scale + tile.where(mask, 0.0, -1.0e6)
        m_ij = tile.maximum(m_i, tile.max(qk, 1, keepdims=True))
        qk = qk - m_ij
        p = tile.exp2(qk)
        alpha = tile.exp2(m_i - m_ij)
        l_ij = tile.sum(p, 1, keepdims=True)
        acc = acc * alpha
        vt = tile.load(v, (off_hz, start_n // BN, 0), (1, BN, D)).reshape((BN, D))
        acc = tile.mma(p.astype(vt.dtype), vt, acc)
        l_i = l_i * alpha + l_ij
        m_i = m_ij
    return acc, l_i, m_i


@tile.kernel(num_warps=4)
def attn_fwd(q: Slice[T, 3], k: Slice[T, 3], v: Slice[T, 3], sm_scale: f32,
             m_out: DisjointSlice[f32, 2], out: DisjointSlice[T, 3], BM: Const[int],
             BN: Const[int], D: Const[int], STAGE: Const[int]):
    start_m = tile.bid(0)
    off_hz = tile.bid(1)
    n_ctx = q.shape[1]
    m_i = tile.full((BM, 1), -math.inf, f32)
    l_i = tile.full((BM, 1), 1.0, f32)
    acc = tile.zeros((BM, D), f32)
    qk_scale = sm_scale * LOG2E
    qt = tile.load(q, (off_hz, start_m, 0), (1, BM, D)).reshape((BM, D))
    if STAGE & 1:
        acc, l_i, m_i = attn_fwd_inner(acc, l_i, m_i, qt, k, v, off_hz, start_m, qk_scale,
                                       n_ctx, BM, BN, D, 4 - STAGE)
    if STAGE & 2:
        acc, l_i, m_i = attn_fwd_inner(acc, l_i, m_i, qt, k, v, off_hz, start_m, qk_scale,
                                       n_ctx, BM, BN, D, 2)
    m_i = m_i + tile.log2(l_i)
    acc = acc / l_i
    tile.store(m_out, (off_hz, start_m), m_i.reshape((1, BM)))
    tile.store(out, (off_hz, start_m, 0), acc.astype(T).reshape((1, BM, D)))


def reference(q, k, v, sm_scale, causal):
    """softmax(q k^T * sm_scale) v per (z, h), in f64, and the base-2 log-sum-exp."""
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    s = q64 @ k64.transpose(0, 2, 1) * sm_scale
    if causal:
        n = q.shape[1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    mx = s.max(-1, keepdims=True)
    e = np.exp(s - mx)
    lse2 = ((mx[..., 0] + np.log(e.sum(-1))) / math.log(2))
    return (e / e.sum(-1, keepdims=True)) @ v64, lse2


