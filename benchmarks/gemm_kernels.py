"""Register-blocked SIMT fp32 GEMMs in oxide (C = A @ B), for benchmarks/gpu_bench.py.

Two versions: `sgemm_shared` stages 128x8 / 8x128 tiles of A and B in shared memory
(barrier-ordered, so its shared accesses sit in `with ox.unsafe():`); `sgemm_regs`
reads A and B straight from global memory (through L1), the fallback if the shared
version misbehaves. Each thread accumulates an 8x8 tile of C in registers (a local
array indexed by unrolled constants). Sizes must be multiples of 128 (M, N) and 8 (K).
"""

from __future__ import annotations

import oxide as ox
from oxide import RawSlice, Slice, f32

BM, BN, BK = 128, 128, 8  # block tile
TM, TN = 8, 8  # thread tile: 16 x 16 threads per block
HALF = 64  # a thread owns rows {ty*4 + i, 64 + ty*4 + i} (likewise columns): fewer conflicts


def config(m: int, n: int) -> ox.LaunchConfig:
    return ox.LaunchConfig(grid=(n // BN, m // BM), block=(16, 16))


@ox.kernel(checks=False)
def sgemm_shared(a: Slice[f32, 2], b: Slice[f32, 2], c: RawSlice[f32, 2]):
    tx = ox.thread_idx.x
    ty = ox.thread_idx.y
    tid = ty * 16 + tx
    bm = ox.block_idx.y * BM
    bn = ox.block_idx.x * BN
    a_tile = ox.shared.array(f32, (BK, BM))  # transposed: a_tile[k, m]
    b_tile = ox.shared.array(f32, (BK, BN))
    acc = ox.local.array(f32, (TM, TN))
    av = ox.local.array(f32, TM)
    bv = ox.local.array(f32, TN)
    for i in range(TM):
        for j in range(TN):
            acc[i, j] = 0.0
    a_row = tid // 2  # each thread stages 4 elements of A and 4 of B per k-step
    a_col = (tid % 2) * 4
    b_row = tid // 32
    b_col = (tid % 32) * 4
    k_total = a.shape[1]
    for k0 in range(0, k_total, BK):
        with ox.unsafe():
            for q in range(4):
                a_tile[a_col + q, a_row] = a[bm + a_row, k0 + a_col + q]
                b_tile[b_row, b_col + q] = b[k0 + b_row, bn + b_col + q]
        ox.sync_threads()
        for kk in range(BK):
            with ox.unsafe():
                for i in range(4):
                    av[i] = a_tile[kk, ty * 4 + i]
                    av[i + 4] = a_tile[kk, HALF + ty * 4 + i]
                for j in range(4):
                    bv[j] = b_tile[kk, tx * 4 + j]
                    bv[j + 4] = b_tile[kk, HALF + tx * 4 + j]
            for i in range(TM):
                for j in range(TN):
                    acc[i, j] += av[i] * bv[j]
        ox.sync_threads()
    with ox.unsafe():
        for i in range(TM):
            row = bm + (i // 4) * HALF + ty * 4 + i % 4
            for j in range(TN):
                c[row, bn + (j // 4) * HALF + tx * 4 + j % 4] = acc[i, j]


@ox.kernel(checks=False)
def sgemm_regs(a: Slice[f32, 2], b: Slice[f32, 2], c: RawSlice[f32, 2]):
    row0 = (ox.block_idx.y * 16 + ox.thread_idx.y) * TM
    col0 = (ox.block_idx.x * 16 + ox.thread_idx.x) * TN
    acc = ox.local.array(f32, (TM, TN))
    av = ox.local.array(f32, TM)
    bv = ox.local.array(f32, TN)
    for i in range(TM):
        for j in range(TN):
            acc[i, j] = 0.0
    for k in range(a.shape[1]):
        for i in range(TM):
            av[i] = a[row0 + i, k]
        for j in range(TN):
            bv[j] = b[k, col0 + j]
        for i in range(TM):
            for j in range(TN):
                acc[i, j] += av[i] * bv[j]
    with ox.unsafe():
        for i in range(TM):
            for j in range(TN):
                c[row0 + i, col0 + j] = acc[i, j]
