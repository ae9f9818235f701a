"""Tile attention: flash-attention forward (online softmax), causal and not, bf16 (ox.tile)."""

from __future__ import annotations

import math

import numpy as np

import oxide as ox
from oxide import Const, DisjointSlice, Slice, bf16, f32, i32, tile
from oxide.testing import RunResult, check_arch, describe_device, seconds_per_launch

LOG2E = math.log2(math.e)
CPU_BLOCK = (16, 16)  # small: the CPU's compile time grows with a thread's products


def gpu_block(d: int) -> tuple[int, int]:
    """(query rows a block, key rows a step) on a GPU for head dim `d`. Each block reads
    every key and value of its head once, so taller blocks read less: 128 rows, two warp
    groups of 64 (8 warps). `num_stages=2` pipelines the loops: on sm_90, K and V come in
    rings filled by TMA from a producer warp group (the causal kernel's two loops share
    them) and Q in one resident buffer (H200, B8 H16 S4096, 2026-12-04: D128 443-451 /
    522-532 TFLOPS causal / not, against 240 / 337 with one loop and no pipeline). With
    D64 a step of 256 keys gave 352 / 399 against 328 / 336 for 128 (H200, 2026-12-05);
    with D256 a step of 64 keeps the rings and Q within shared memory."""
    return (128, 256) if d <= 64 else (128, 128) if d <= 128 else (128, 64)


@tile.func
def _step(qt, kt, vt, m, l_sum, acc, scale2, first_key, first_query, MASKED, key_end,
          TAIL):
    """One step of the online softmax over a block of keys `kt` and values `vt` (its first
    key `first_key` of the head); MASKED: only keys up to the query count (causal); TAIL:
    only keys before `key_end` (the block crosses the end of the sequence).

    The scores stay unscaled: the row maximum is scaled once (a positive `scale2` keeps
    it the maximum), and each score's `s * scale2 - m_new` is one fused multiply-add, as
    FlashAttention and Triton's tutorial write it: a multiply a score fewer than scaling
    the scores first (H100, 2026-12-05: D64 +12% / +6% non-causal / causal, D128 within
    1%; docs/performance.md)."""
    s = tile.mma(qt, kt.permute((1, 0)), tile.zeros((qt.shape[0], kt.shape[0]), f32))
    if MASKED:  # a Python bool: decided at compile time
        keys = first_key + tile.arange(kt.shape[0])[None, :]
        s = tile.where(keys <= first_query + tile.arange(qt.shape[0])[:, None], s, -math.inf)
    if TAIL:
        s = tile.where(first_key + tile.arange(kt.shape[0])[None, :] < key_end, s, -math.inf)
    m_new = tile.maximum(m, tile.max(s, 1, keepdims=True) * scale2)
    p = tile.exp2(s * scale2 - m_new)
    alpha = tile.exp2(m - m_new)
    l_sum = l_sum * alpha + tile.sum(p, 1, keepdims=True)
    acc = tile.mma(p.astype(bf16), vt, acc * alpha)  # the rescaled sum accumulates p @ v
    return m_new, l_sum, acc


@tile.kernel(num_warps=8, num_stages=2)
def tile_attention(q: Slice[bf16, 2], k: Slice[bf16, 2], v: Slice[bf16, 2],
                   o: DisjointSlice[bf16, 2], seq: i32, scale: f32, BM: Const[int],
                   BN: Const[int], D: Const[int], CAUSAL: Const[bool]):
    """`q`, `k`, `v` and `o` hold the heads one after another, `seq` rows each (a multiple
    of BM and BN): block `b` owns query rows `b * BM ...` of head `b // (seq / BM)`. Each
    step scores BN keys (`q @ k.T`, tensor cores), keeps the running row maximum `m` and
    sum `l` of exp(score - m), rescales the output accumulator by exp(m_old - m_new) and
    adds `p @ v`. Causal: blocks of keys past the diagonal are not visited, and only the
    steps that cross it mask the keys after each query (-inf), in a loop of their own
    after the unmasked one, as Triton's tutorial does. The exponentials are taken in base 2
    (the scores scaled by `scale * log2 e`, which must be positive: the softmax's
    temperature), so each is one `exp2` (one `ex2.approx` on the GPU) rather than
    libdevice's accurate `exp`; the ratio acc / l is the same either way, as in
    FlashAttention."""
    b = tile.bid(0)
    q_blocks = seq // BM
    head = b // q_blocks
    first = (b - head * q_blocks) * BM  # the block's first query row within its head
    qt = tile.load(q, (b, 0), (BM, D))
    m = tile.full((BM, 1), -math.inf, f32)
    l_sum = tile.zeros((BM, 1), f32)
    acc = tile.zeros((BM, D), f32)
    kv0 = head * (seq // BN)
    scale2 = scale * LOG2E
    if CAUSAL:
        # the steps whose keys all come before the block's first query need no mask
        clear = first // BN
        for j in range(clear):
            m, l_sum, acc = _step(qt, tile.load(k, (kv0 + j, 0), (BN, D)),
                                  tile.load(v, (kv0 + j, 0), (BN, D)), m, l_sum, acc, scale2,
                                  j * BN, first, False, seq, False)
        for j in range(clear, (first + BM + BN - 1) // BN):  # the diagonal's blocks
            m, l_sum, acc = _step(qt, tile.load(k, (kv0 + j, 0), (BN, D)),
                                  tile.load(v, (kv0 + j, 0), (BN, D)), m, l_sum, acc, scale2,
                                  j * BN, first, True, seq, False)
    else:
        for j in range(seq // BN):
            m, l_sum, acc = _step(qt, tile.load(k, (kv0 + j, 0), (BN, D)),
                                  tile.load(v, (kv0 + j, 0), (BN, D)), m, l_sum, acc, scale2,
                                  j * BN, first, False, seq, False)
    tile.store(o, (b, 0), (acc / l_sum).astype(bf16))


@tile.kernel(num_warps=8, num_stages=2)
def tile_attention_any_length(q: Slice[bf16, 3], k: Slice[bf16, 3], v: Slice[bf16, 3],
                              o: DisjointSlice[bf16, 3], scale: f32, BM: Const[int],
                              BN: Const[int], D: Const[int], CAUSAL: Const[bool]):
    """`tile_attention` for sequences of any length: `q`, `k`, `v` and `o` are (batch x
    heads, seq, D), and block (i, h) owns query rows `i * BM ...` of head `h` (grid
    (cdiv(seq, BM), batch x heads)). `k[h]` is head h's (seq, D) matrix (a view, as in
    NumPy); rows past its end read 0 and are not written. Not causal, the last block of
    keys crosses the end when BN does not divide seq, and is masked (keys past the end
    -inf); causal, the diagonal's mask already hides them from every row that exists.

    On sm_90 the views' tiles come by TMA from a producer warp group as the 2-d kernel's
    do (the tail step's K and V in buffers of their own); its speed on the GPU is not
    measured yet (docs/performance.md)."""
    i, h = tile.bid(0), tile.bid(1)
    qh, kh, vh = q[h], k[h], v[h]
    first = i * BM  # the block's first query row within its head
    seq = qh.shape[0]
    qt = tile.load(qh, (i, 0), (BM, D))
    m = tile.full((BM, 1), -math.inf, f32)
    l_sum = tile.zeros((BM, 1), f32)
    acc = tile.zeros((BM, D), f32)
    scale2 = scale * LOG2E
    if CAUSAL:
        clear = first // BN
        for j in range(clear):
            m, l_sum, acc = _step(qt, tile.load(kh, (j, 0), (BN, D)),
                                  tile.load(vh, (j, 0), (BN, D)), m, l_sum, acc, scale2,
                                  j * BN, first, False, seq, False)
        for j in range(clear, (tile.minimum(first + BM, seq) + BN - 1) // BN):
            m, l_sum, acc = _step(qt, tile.load(kh, (j, 0), (BN, D)),
                                  tile.load(vh, (j, 0), (BN, D)), m, l_sum, acc, scale2,
                                  j * BN, first, True, seq, False)
    else:
        whole = seq // BN
        for j in range(whole):
            m, l_sum, acc = _step(qt, tile.load(kh, (j, 0), (BN, D)),
                                  tile.load(vh, (j, 0), (BN, D)), m, l_sum, acc, scale2,
                                  j * BN, first, False, seq, False)
        if whole * BN < seq:
            m, l_sum, acc = _step(qt, tile.load(kh, (whole, 0), (BN, D)),
                                  tile.load(vh, (whole, 0), (BN, D)), m, l_sum, acc, scale2,
                                  whole * BN, first, False, seq, True)
    tile.store(o[h], (i, 0), (acc / l_sum).astype(bf16))


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, heads: int, causal: bool
              ) -> np.ndarray:
    """softmax(q k^T / sqrt(D)) v per head, in f64."""
    seq, d = q.shape[0] // heads, q.shape[1]
    out = np.zeros(q.shape, np.float64)
    for hd in range(heads):
        rows = slice(hd * seq, (hd + 1) * seq)
        s = q[rows].astype(np.float64) @ k[rows].astype(np.float64).T / math.sqrt(d)
        if causal:
            s = np.where(np.tril(np.ones((seq, seq), bool)), s, -np.inf)
        e = np.exp(s - s.max(1, keepdims=True))
        out[rows] = (e / e.sum(1, keepdims=True)) @ v[rows].astype(np.float64)
    return out


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """Two heads of `size` rows (rounded up to the block), D = 32 on the CPU and 64 on a
    GPU, causal (timed) and not; and `tile_attention_any_length` on heads 5 rows short of
    the blocks."""
    with ox.device(device) as dev:
        heads, d = (2, 32) if dev.is_cpu else (16, 64)
        bm, bn = CPU_BLOCK if dev.is_cpu else gpu_block(d)
        seq = size or (64 if dev.is_cpu else 4096)
        seq = -(-seq // max(bm, bn)) * max(bm, bn)
        rng = np.random.default_rng(13)
        q, k, v = (rng.standard_normal((heads * seq, d)).astype(bf16.numpy) for _ in range(3))
        o, o_full = np.zeros_like(q), np.zeros_like(q)
        d_q, d_k, d_v, d_o, d_full = [ox.to_device(arr) for arr in (q, k, v, o, o_full)]
        scale = np.float32(1 / math.sqrt(d))
        grid = heads * seq // bm
        args = (seq, scale, bm, bn, d)
        seconds = seconds_per_launch(lambda: ox.launch(tile_attention, grid, d_q, d_k, d_v,
                                                       d_o, *args, True), dev)
        ox.launch(tile_attention, grid, d_q, d_k, d_v, d_full, *args, False)
        passed = True
        for got, causal in ((d_o, True), (d_full, False)):
            want = reference(q, k, v, heads, causal)
            passed &= bool(np.allclose(got.to_numpy().astype(np.float32), want, rtol=2e-2,
                                       atol=2e-2))
        # the heads as (heads, rows, D) views, 5 rows short of the blocks: the ends masked
        short = seq - 5
        q3, k3, v3 = (x.reshape(heads, seq, d)[:, :short].copy() for x in (q, k, v))
        o3 = ox.to_device(np.zeros_like(q3))
        ox.launch(tile_attention_any_length, (-(-short // bm), heads),
                  *[ox.to_device(x) for x in (q3, k3, v3)], o3, scale, bm, bn, d, False)
        flat = [x.reshape(heads * short, d) for x in (q3, k3, v3)]
        passed &= bool(np.allclose(o3.to_numpy().reshape(heads * short, d).astype(np.float32),
                                   reference(*flat, heads, False), rtol=2e-2, atol=2e-2))
        flops = 4.0 * heads * seq * seq * d / 2  # causal: half the score matrix
        return RunResult("tile_attention", passed, describe_device(dev),
                         f"{heads} heads x {seq:,} rows x D={d} bf16, causal", seconds,
                         work=flops, unit="GFLOP/s",
                         detail=check_arch(tile_attention, arch, q, k, v, o, seq,
                                           scale, bm, bn, d, True))


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
