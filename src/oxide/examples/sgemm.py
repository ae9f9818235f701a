"""SGEMM C = A @ B: 128x128 block tiles through shared memory, an 8x8 register tile per thread."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import DisjointSlice, Slice, f32, i32
from oxide.testing import RunResult, check_arch, describe_device, seconds_per_launch

BM = 128  # block tile: BM x BN of C, stepping BK along K
BN = 128
BK = 8
TM = 8  # thread tile: TM x TN of C in registers
TN = 8
THREADS = (BM // TM) * (BN // TN)  # 256
HALF = BM // 2  # a thread's rows (and columns) come in two groups of 4, HALF apart


@ox.kernel(checks=False, block=THREADS)
def sgemm(a: Slice[f32, 2], b: Slice[f32, 2], c: DisjointSlice[f32, 2]):
    """Each thread owns 64 accumulators; per step of K it reads 8 values of A and 8 of B
    from shared memory (as four 16-byte loads: the A tile is stored transposed, so both
    fragments are contiguous) and does 64 FMAs. The next K-step's tiles are loaded from
    global memory into registers while this one computes.

    Every global index is guarded and every shared/local index is in range by
    construction (constant tile sizes), so the per-access checks are off. No `unsafe`:
    with the block shape declared, oxide proves the tile accesses race-free between the
    barriers, and that each element of C is written by one thread of the launch.
    """
    m_total = i32(a.shape[0])
    k_total = i32(a.shape[1])
    n_total = i32(b.shape[1])
    a_tile = ox.shared.array(f32, (BK, BM))  # transposed: a_tile[k, m]
    b_tile = ox.shared.array(f32, (BK, BN))
    acc = ox.local.array(f32, (TM, TN))  # indexed by constants only: registers
    a_frag = ox.local.array(f32, TM)
    b_frag = ox.local.array(f32, TN)
    a_next = ox.local.array(f32, 4)
    b_next = ox.local.array(f32, 4)
    tid = ox.thread_idx.x
    tr = tid // (BN // TN)
    tc = tid % (BN // TN)
    m0 = ox.block_idx.y * BM
    n0 = ox.block_idx.x * BN
    a_row = tid // 2  # the A tile is BM x BK: 2 threads per row, 4 values each
    a_col = (tid % 2) * 4
    b_row = tid // 32  # the B tile is BK x BN: 32 threads per row, 4 values each
    b_col = (tid % 32) * 4
    for i in range(TM):
        for j in range(TN):
            acc[i, j] = 0.0
    for v in range(4):
        gm = m0 + a_row
        gk = a_col + v
        a_next[v] = a[gm, gk] if gm < m_total and gk < k_total else 0.0
        gn = n0 + b_col + v
        b_next[v] = b[b_row, gn] if b_row < k_total and gn < n_total else 0.0
    for k0 in range(0, k_total, BK):
        for v in range(4):
            a_tile[a_col + v, a_row] = a_next[v]
            b_tile[b_row, b_col + v] = b_next[v]
        ox.sync_threads()
        if k0 + BK < k_total:
            for v in range(4):
                gm = m0 + a_row
                gk = k0 + BK + a_col + v
                a_next[v] = a[gm, gk] if gm < m_total and gk < k_total else 0.0
                gk2 = k0 + BK + b_row
                gn = n0 + b_col + v
                b_next[v] = b[gk2, gn] if gk2 < k_total and gn < n_total else 0.0
        for kk in range(BK):
            for i in range(4):
                a_frag[i] = a_tile[kk, tr * 4 + i]
                a_frag[i + 4] = a_tile[kk, HALF + tr * 4 + i]
                b_frag[i] = b_tile[kk, tc * 4 + i]
                b_frag[i + 4] = b_tile[kk, HALF + tc * 4 + i]
            for i in range(TM):
                for j in range(TN):
                    acc[i, j] += a_frag[i] * b_frag[j]
        ox.sync_threads()
    for i in range(TM):
        gm = m0 + (i // 4) * HALF + tr * 4 + i % 4
        for j in range(TN):
            gn = n0 + (j // 4) * HALF + tc * 4 + j % 4
            if gm < m_total and gn < n_total:
                c[gm, gn] = acc[i, j]


def launch_config(m: int, n: int) -> ox.LaunchConfig:
    return ox.LaunchConfig(grid=(-(-n // BN), -(-m // BM)), block=THREADS)


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """Multiplies `size` x (`size`+3) by (`size`+3) x (`size`+1) f32 and checks against NumPy."""
    with ox.device(device) as dev:
        m = size or (200 if dev.is_cpu else 4096)
        k, n = m + 3, m + 1  # ragged: no dimension a multiple of its tile
        rng = np.random.default_rng(8)
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        c = np.zeros((m, n), np.float32)
        d_a, d_b, d_c = [ox.to_device(arr) for arr in (a, b, c)]
        config = launch_config(m, n)
        seconds = seconds_per_launch(lambda: ox.launch(sgemm, config, d_a, d_b, d_c), dev)
        want = a.astype(np.float64) @ b.astype(np.float64)
        passed = bool(np.allclose(d_c.to_numpy(), want, rtol=1e-3, atol=1e-3 * np.sqrt(k)))
        return RunResult("sgemm", passed, describe_device(dev), f"{m:,} x {k:,} x {n:,} f32",
                         seconds, work=2.0 * m * n * k, unit="GFLOP/s",
                         detail=check_arch(sgemm, arch, a, b, c))


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
