"""Shared-memory kernels twice: proved race-free (no `unsafe`) and written with `unsafe`.

`simt_bench.py` times each pair in one run (issue 13: the proof is compile-time only, so
the two must run at the same speed) and checks that their PTX is the same instruction
for instruction. The safe transpose, SGEMM and histogram are the shipped examples; their
`unsafe` twins below are those examples as they were before oxide could prove them. The
tree reduction and the Blelloch scan are written here in both forms.
"""

from __future__ import annotations

import oxide as ox
from oxide import AtomicSlice, DisjointSlice, RawSlice, Slice, f32, i32, i64, thread, u8, u32
from oxide.examples.histogram import BINS
from oxide.examples.sgemm import BK, BM, BN, HALF, THREADS, TM, TN
from oxide.examples.transpose import ROWS, TILE

BLOCK = 256
SCAN = 2 * BLOCK  # elements per block of the scan


@ox.kernel(checks=False, max_threads=TILE * ROWS)  # the launch bound `block=` implies
def transpose_unsafe(a: Slice[f32, 2], out: RawSlice[f32, 2]):
    """out = a.T. A warp reads a row of the tile and writes a row of the transposed tile,
    so both global accesses are coalesced; the tile's 33rd column shifts each row by one
    bank, so reading a column of it is free of bank conflicts.

    The guards keep every index inside its array, so the per-access checks are off.
    """
    tile = ox.shared.array(f32, (TILE, TILE + 1))
    rows = i32(a.shape[0])
    cols = i32(a.shape[1])
    tx = ox.thread_idx.x
    ty = ox.thread_idx.y
    x = ox.block_idx.x * TILE + tx
    y = ox.block_idx.y * TILE + ty
    vals = ox.local.array(f32, TILE // ROWS)  # every load in flight before any store
    for k in range(TILE // ROWS):
        vals[k] = a[y + k * ROWS, x] if y + k * ROWS < rows and x < cols else 0.0
    with ox.unsafe():
        for k in range(TILE // ROWS):
            tile[ty + k * ROWS, tx] = vals[k]
    ox.sync_threads()
    x_out = ox.block_idx.y * TILE + tx
    y_out = ox.block_idx.x * TILE + ty
    for k in range(TILE // ROWS):
        if y_out + k * ROWS < cols and x_out < rows:
            with ox.unsafe():
                out[y_out + k * ROWS, x_out] = tile[tx, ty + k * ROWS]


@ox.kernel(checks=False, max_threads=THREADS)
def sgemm_unsafe(a: Slice[f32, 2], b: Slice[f32, 2], c: RawSlice[f32, 2]):
    """Each thread owns 64 accumulators; per step of K it reads 8 values of A and 8 of B
    from shared memory (as four 16-byte loads: the A tile is stored transposed, so both
    fragments are contiguous) and does 64 FMAs. The next K-step's tiles are loaded from
    global memory into registers while this one computes.

    Every global index is guarded and every shared/local index is in range by
    construction (constant tile sizes), so the per-access checks are off.
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
        with ox.unsafe():  # the barriers around the tiles order these accesses
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
            with ox.unsafe():
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
                with ox.unsafe():  # each element of C belongs to one thread
                    c[gm, gn] = acc[i, j]


@ox.kernel(max_threads=BLOCK)  # the launch bound `block=` implies
def histogram_unsafe(data: Slice[u8], bins: AtomicSlice[u32]):
    """Counting in shared memory keeps the contended atomics on the SM; only 256 per block
    reach global memory."""
    counts = ox.shared.array(u32, BINS)
    t = ox.thread_idx.x
    with ox.unsafe():
        counts[t] = u32(0)
    ox.sync_threads()
    stride = i64(ox.grid_dim.x) * i64(ox.block_dim.x)
    j = i64(ox.block_idx.x) * i64(ox.block_dim.x) + i64(t)
    while j < len(data):
        ox.atomic.add(counts, data[j], u32(1), scope="block")
        j += stride
    ox.sync_threads()
    with ox.unsafe():
        c = counts[t]
    if c > 0:
        ox.atomic.add(bins, t, c)


@ox.kernel(block=BLOCK)
def tree_sum(x: Slice[f32], out: DisjointSlice[f32]):
    """One partial sum per block: a shared-memory tree, proved race-free."""
    sh = ox.shared.array(f32, BLOCK)
    t = thread.in_block()
    i = ox.block_idx.x * BLOCK + t
    sh[t] = x[i] if i < len(x) else f32(0)
    ox.sync_threads()
    s = BLOCK // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        ox.sync_threads()
        s //= 2
    if t == 0:
        out[ox.block_idx.x] = sh[0]


@ox.kernel(max_threads=BLOCK)
def tree_sum_unsafe(x: Slice[f32], out: RawSlice[f32]):
    """`tree_sum` with every shared access and the result inside `unsafe`."""
    sh = ox.shared.array(f32, BLOCK)
    t = ox.thread_idx.x
    i = ox.block_idx.x * BLOCK + t
    with ox.unsafe():
        sh[t] = x[i] if i < len(x) else f32(0)
    ox.sync_threads()
    s = BLOCK // 2
    while s > 0:
        if t < s:
            with ox.unsafe():
                sh[t] += sh[t + s]
        ox.sync_threads()
        s //= 2
    if t == 0:
        with ox.unsafe():
            out[ox.block_idx.x] = sh[0]


@ox.kernel(block=BLOCK)
def blelloch_scan(x: Slice[i32], out: DisjointSlice[i32]):
    """Exclusive scan of each block's SCAN elements (Blelloch's up- and down-sweep)."""
    sh = ox.shared.array(i32, SCAN)
    t = thread.in_block()
    base = ox.block_idx.x * SCAN
    for h in range(2):
        j = base + t + h * BLOCK
        sh[t + h * BLOCK] = x[j] if j < len(x) else 0
    offset = 1
    d = SCAN // 2
    while d > 0:
        ox.sync_threads()
        if t < d:
            sh[offset * (2 * t + 2) - 1] += sh[offset * (2 * t + 1) - 1]
        offset *= 2
        d //= 2
    if t == 0:
        sh[SCAN - 1] = 0
    d = 1
    while d < SCAN:
        offset //= 2
        ox.sync_threads()
        if t < d:
            ai = offset * (2 * t + 1) - 1
            bi = offset * (2 * t + 2) - 1
            v = sh[ai]
            sh[ai] = sh[bi]
            sh[bi] += v
        d *= 2
    ox.sync_threads()
    for h in range(2):
        j = base + t + h * BLOCK
        if j < len(x):
            out[j] = sh[t + h * BLOCK]


@ox.kernel(max_threads=BLOCK)
def blelloch_scan_unsafe(x: Slice[i32], out: RawSlice[i32]):
    """`blelloch_scan` with every shared access and the result inside `unsafe`."""
    sh = ox.shared.array(i32, SCAN)
    t = ox.thread_idx.x
    base = ox.block_idx.x * SCAN
    for h in range(2):
        j = base + t + h * BLOCK
        with ox.unsafe():
            sh[t + h * BLOCK] = x[j] if j < len(x) else 0
    offset = 1
    d = SCAN // 2
    while d > 0:
        ox.sync_threads()
        if t < d:
            with ox.unsafe():
                sh[offset * (2 * t + 2) - 1] += sh[offset * (2 * t + 1) - 1]
        offset *= 2
        d //= 2
    if t == 0:
        with ox.unsafe():
            sh[SCAN - 1] = 0
    d = 1
    while d < SCAN:
        offset //= 2
        ox.sync_threads()
        if t < d:
            ai = offset * (2 * t + 1) - 1
            bi = offset * (2 * t + 2) - 1
            with ox.unsafe():
                v = sh[ai]
                sh[ai] = sh[bi]
                sh[bi] += v
        d *= 2
    ox.sync_threads()
    for h in range(2):
        j = base + t + h * BLOCK
        if j < len(x):
            with ox.unsafe():
                out[j] = sh[t + h * BLOCK]
