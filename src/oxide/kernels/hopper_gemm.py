"""The Hopper GEMM C = A @ B in bf16 (f32 accumulation): TMA, an mbarrier ring, wgmma, warp specialization.

The recipe of the fastest hand-written Hopper GEMMs (shared/research/tile-and-hopper.md
section 4), each step a compile-time option of one kernel so a benchmark can time them:

- A (M x K, row-major) and B arrive by TMA with a 128-byte swizzle into a ring of
  `stages` shared buffers; `full[s]` / `empty[s]` mbarriers with parity waits hand each
  stage from the producer to the consumers and back (the consumers pre-arrive on every
  `empty[s]`, so the producer's first pass finds them free).
- One producer warp group (one thread issues the TMA copies) and `consumers` (1 or 2)
  consumer warp groups, each owning 64 rows x BN columns of the C tile with
  m64nBNk16 wgmma (scale_d=False on a tile's first k-step: no zeroing); `setmaxnreg`
  gives the producer's registers to the consumers (40 / 232).
- A persistent grid: each block walks tiles `block, block + grid, ...` in a grouped order
  (`group_m` tile rows per group share their B tiles in L2); a grid of one block per tile
  is the non-persistent kernel.
- B as `a @ b` has it (K x N row-major: MN-major operand, 64-column slabs, trans_b) or
  K-major (N x K, B transposed, as fast.cu has it).
- 2 x 1 clusters (`cluster=2`): the two blocks of a cluster own M-adjacent tiles with the
  same B tile, which block rank 0 loads once for both (TMA multicast); each consumer group
  then releases a stage in both blocks (`ox.mbarrier.arrive_cluster`), since the peer
  writes into this block's ring too; `scope="cta"`, since the consumers only read the
  stage (the cluster scope put a GPU-wide fence before every arrive: 0.31x-0.38x of
  cuBLAS on an H100; without it 0.96x-0.98x, level with the kernel without clusters,
  2026-12-06).
- Epilogue: f32 -> bf16 stores straight to global memory, clipped at the ragged edge
  (TMA loads read zeros past the edge, so the accumulators there are zero anyway); or
  (`tma_store`) into swizzled shared slabs per consumer, written out by TMA stores that
  clip at the edge and overlap the next tile's main loop (GPU only: it orders each
  consumer group with a named barrier, which the CPU lacks).

It lives in the library (not only in examples/gemm_hopper.py, which runs and checks it)
as the hand-written reference the tile compiler's products are measured against
(benchmarks/gemm_bench.py): the same tile K loop compiled from tile code reaches it.
The kernel body spells the device API `ox.*` as kernels do: here `ox` is `oxide.lang`,
the intrinsics' own package (importing `oxide` itself would close an import cycle
through `ox.tile`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from oxide import lang as ox
from oxide.kernel import func, kernel
from oxide.runtime.config import LaunchConfig
from oxide.runtime.launch import launch
from oxide.runtime.tensormap import TensorMap
from oxide.types import Const, RawSlice, bf16, i32, u64

BK = 64  # one 128-byte swizzle row of bf16 per tile row: the K step of one stage


@dataclass(frozen=True)
class Config:
    """One variant of the kernel: every field is a `Const` of `gemm_hopper`.

    `bn` 64..256 (a multiple of 64), `consumers` 1 or 2 (BM = 64 x consumers), `stages`
    shared buffers in the ring, `b_mn`: B is K x N row-major (True) or N x K (False),
    `setmaxnreg` moves registers from the producer to the consumers, `group_m` tile rows
    per group of the tile order, `persistent`: one block per SM (else one per tile),
    `tma_store`: the epilogue goes through shared memory and TMA stores, `cluster` 1 or
    2 blocks per cluster (2: B multicast), `blocks` the persistent grid's size (0: one
    block per SM, rounded down to whole clusters; not a Const).
    """

    bn: int = 256
    consumers: int = 2
    stages: int = 4
    b_mn: bool = True
    setmaxnreg: bool = True
    group_m: int = 8
    persistent: bool = True
    tma_store: bool = False
    cluster: int = 1
    blocks: int = 0

    @property
    def bm(self) -> int:
        return 64 * self.consumers

    @property
    def threads(self) -> int:
        return 128 * (self.consumers + 1)

    @property
    def shared_bytes(self) -> int:
        tile_c = self.bm * self.bn * 2 if self.tma_store else 0
        return self.stages * (self.bm + self.bn) * BK * 2 + tile_c + 16 * self.stages

    def consts(self) -> tuple[int, int, int, bool, bool, int, bool, int]:
        return (self.bn, self.stages, self.consumers, self.b_mn, self.setmaxnreg, self.group_m,
                self.tma_store, self.cluster)

    def label(self) -> str:
        return (f"{self.bm}x{self.bn}x{BK} s{self.stages} {'B=KxN' if self.b_mn else 'B=NxK'}"
                f"{' maxnreg' if self.setmaxnreg else ''}"
                f"{' persistent' if self.persistent else ''} g{self.group_m}"
                f"{' tma-store' if self.tma_store else ''}"
                f"{f' cluster{self.cluster}' if self.cluster > 1 else ''}"
                f"{f' {self.blocks} blocks' if self.blocks else ''}")


DEFAULT = Config()
# the fastest measured (H200, 2026-12-03, benchmarks/gemm_bench.py, setmaxnreg honoured
# through the driver JIT): the TMA-store epilogue with 3 stages, 792 TFLOPS at 4096^3 and
# 797 at 8192^3 (0.98x cuBLAS at both); 128x192 with 4 stages: 700 / 787
FASTEST = Config(tma_store=True, stages=3)
# what the CPU target runs: it has no setmaxnreg (a TargetError there), and a small tile
CPU = Config(bn=128, stages=2, setmaxnreg=False, group_m=2)


@func
def tile_origin(tile, per_group, group_m, tiles_mc, cluster, rank, bm, bn):
    """(first row, first column) of C for walk tile `tile` in grouped order: `group_m`
    cluster-tile rows take turns on each column (their B tiles stay in L2); within a
    cluster, block `rank` takes the rank-th of its M-adjacent tiles. The producer and the
    consumers walk the same tiles."""
    first = (tile // per_group) * group_m
    rows = min(tiles_mc - first, group_m)
    return (((first + (tile % per_group) % rows) * cluster + rank) * bm,
            ((tile % per_group) // rows) * bn)


@kernel(checks=False, max_threads=384)
def gemm_hopper(a: TensorMap[bf16, 2], b: TensorMap[bf16, 2], c: RawSlice[bf16, 2],
                cm: TensorMap[bf16, 2], m: i32, n: i32, k: i32, BN: Const[int],
                STAGES: Const[int], CONSUMERS: Const[int], B_MN: Const[bool],
                SETMAXNREG: Const[bool], GROUP_M: Const[int], TMA_STORE: Const[bool],
                CLUSTER: Const[int]):
    """C (m x n) = A (m x k) @ B, one BM x BN tile of C at a time per block; `cm` maps C in
    64 x 64 boxes, 128-byte swizzled, for the TMA-store epilogue (any map when TMA_STORE is
    off).

    checks=False: every index here is in range by construction (TMA clips loads, the
    epilogue tests each store against m and n), so the checks would only cost registers
    and branches (their reports are inlined in wgmma kernels, so they no longer serialize
    the wgmma: docs/language.md).
    """
    BM = 64 * CONSUMERS
    G = BN // 64  # 64-column slabs of the B tile (and accumulator groups per thread)
    # the ring: stage s holds A rows sa[s*BM : (s+1)*BM] and B slabs sb[s*G : (s+1)*G];
    # a K-major B slab j is rows 64j..64j+63 of the N x 64 tile, an MN-major one is the
    # 64 x 64 block of K rows x columns 64j..64j+63 (the layout wgmma's MN-major reads)
    sa = ox.shared.array(bf16, (STAGES * BM, BK))
    sb = ox.shared.array(bf16, (STAGES * G, BK, 64))
    if TMA_STORE:
        sc = ox.shared.array(bf16, BM * BN)  # consumer w's 64 x BN as 64 x 64 swizzled slabs
    full = ox.shared.array(u64, STAGES)
    empty = ox.shared.array(u64, STAGES)
    t = ox.thread_idx.x
    wg = ox.warp_id() // 4  # warp-uniform, as wgmma and setmaxnreg need
    with ox.unsafe():
        if t == 0:
            for i in range(STAGES):
                ox.mbarrier.init(full[i], 1)  # the producer's arrive + the TMA bytes
                # one arrive per consumer group of every block in the cluster
                ox.mbarrier.init(empty[i], CONSUMERS * CLUSTER)
            ox.fence_mbarrier_init()
    if CLUSTER > 1:
        ox.cluster.sync()  # the peer's barriers are ready before anything arrives on them
    else:
        ox.sync_threads()
    rank = ox.cluster.rank() if CLUSTER > 1 else 0
    tiles_m = (m + BM - 1) // BM
    tiles_n = (n + BN - 1) // BN
    # the walk is over cluster tiles: CLUSTER M-adjacent tiles that share their B tile
    tiles_mc = (tiles_m + CLUSTER - 1) // CLUSTER
    tiles = tiles_mc * tiles_n
    walk_start = ox.block_idx.x // CLUSTER
    walk_step = max(ox.grid_dim.x // CLUSTER, 1)  # (no range-step-zero report call)
    k_tiles = (k + BK - 1) // BK
    per_group = GROUP_M * tiles_n
    stage_bytes = (BM + BN) * BK * 2
    if wg == 0:
        # -- producer: one thread keeps the ring full --------------------------------------
        if SETMAXNREG:
            with ox.unsafe():
                ox.setmaxnreg(40, inc=False)
        if t == 0:
            s = 0
            phase = 0
            for tile in range(walk_start, tiles, walk_step):
                m0, n0 = tile_origin(tile, per_group, GROUP_M, tiles_mc, CLUSTER, rank, BM, BN)
                for kt in range(k_tiles):
                    with ox.unsafe():
                        ox.mbarrier.wait_parity(empty[s], phase)
                        ox.mbarrier.arrive_expect_tx(full[s], stage_bytes)
                        ox.tma.load(a, sa[s * BM, 0], m0, kt * BK, full[s])
                        if CLUSTER > 1:
                            if rank == 0:  # B once, into both blocks (each one's full[s])
                                if B_MN:
                                    for j in range(G):
                                        ox.tma.load(b, sb[s * G + j, 0, 0], kt * BK,
                                                    n0 + 64 * j, full[s], multicast=3)
                                else:
                                    ox.tma.load(b, sb[s * G, 0, 0], n0, kt * BK, full[s],
                                                multicast=3)
                        elif B_MN:
                            for j in range(G):
                                ox.tma.load(b, sb[s * G + j, 0, 0], kt * BK, n0 + 64 * j,
                                            full[s])
                        else:
                            ox.tma.load(b, sb[s * G, 0, 0], n0, kt * BK, full[s])
                    s += 1
                    if s == STAGES:
                        s = 0
                        phase ^= 1
    else:
        # -- consumers: warp group w owns rows 64(w-1)..64(w-1)+63 of the tile --------------
        if SETMAXNREG:
            with ox.unsafe():
                ox.setmaxnreg(232)
        cw = wg - 1
        lane = t & 31  # (bit operations: the offsets' low bits stay visible to LLVM, which
        # then pairs the epilogue's stores)
        row_in_tile = 64 * cw + 16 * (ox.warp_id() & 3) + (lane >> 2)
        col_in_tile = 2 * (lane & 3)
        leader = t % 128 == 0
        swz_row = (16 * (ox.warp_id() & 3) + (lane >> 2)) * 64  # the row's start in a slab
        if leader:
            for i in range(STAGES):  # every stage starts free
                if CLUSTER > 1:
                    for r in range(CLUSTER):
                        ox.mbarrier.arrive_cluster(empty[i], r, scope="cta")
                else:
                    with ox.unsafe():
                        ox.mbarrier.arrive(empty[i])
        s = 0
        phase = 0
        for tile in range(walk_start, tiles, walk_step):
            m0, n0 = tile_origin(tile, per_group, GROUP_M, tiles_mc, CLUSTER, rank, BM, BN)
            acc = ((0.0,) * 32,) * G
            for kt in range(k_tiles):
                with ox.unsafe():
                    ox.mbarrier.wait_parity(full[s], phase)
                ox.wgmma_fence()
                for kk in range(BK // 16):
                    if B_MN:
                        acc = ox.wgmma(acc, ox.wgmma_desc(sa[s * BM + 64 * cw, 16 * kk]),
                                       ox.wgmma_desc(sb[s * G, 16 * kk, 0], major="mn"),
                                       scale_d=kt > 0 or kk > 0, trans_b=True)
                    else:
                        acc = ox.wgmma(acc, ox.wgmma_desc(sa[s * BM + 64 * cw, 16 * kk]),
                                       ox.wgmma_desc(sb[s * G, 0, 16 * kk]),
                                       scale_d=kt > 0 or kk > 0)
                ox.wgmma_commit()
                acc = ox.wgmma_wait(0, acc)
                if leader:  # the stage is free again, in every block it was loaded into
                    if CLUSTER > 1:
                        for r in range(CLUSTER):
                            ox.mbarrier.arrive_cluster(empty[s], r, scope="cta")
                    else:
                        with ox.unsafe():
                            ox.mbarrier.arrive(empty[s])
                s += 1
                if s == STAGES:
                    s = 0
                    phase ^= 1
            if TMA_STORE:
                # -- epilogue: the group's 64 x BN in shared memory, then TMA stores ---------
                # 64 x 64 slabs with the 128-byte swizzle, so a warp's stores hit 32 banks
                # (row r keeps chunk q at q ^ (r % 8), and r % 8 is lane >> 2 here); written
                # as one expression per store so LLVM makes each address one of 8 per-thread
                # bases plus a constant (a 3-D index kept 64 addresses live and spilled)
                if leader:
                    ox.tma.wait_group_read(0)  # the previous tile's store has read the tile
                ox.named_barrier_sync(1 + cw, 128)
                with ox.unsafe():
                    for g in range(G):
                        for e in range(32):
                            # chunk e // 4 of the row lies at (e // 4) ^ (row % 8); the rest
                            # of the offset is a constant
                            sc[swz_row + ((e // 4) ^ (lane >> 2)) * 8 + col_in_tile
                               + (cw * G + g) * 4096 + ((e // 2) % 2) * 512 + e % 2] = bf16(
                                acc[g][e])
                ox.fence_proxy_async()
                ox.named_barrier_sync(1 + cw, 128)
                if leader:
                    with ox.unsafe():
                        for g in range(G):
                            ox.tma.store(cm, sc[(cw * G + g) * 4096], m0 + 64 * cw, n0 + 64 * g)
                    ox.tma.commit_group()
            else:
                # -- epilogue: bf16 straight to global memory, clipped at the edge --------
                r0 = m0 + row_in_tile
                for g in range(G):
                    for e in range(32):
                        row = r0 + 8 * ((e // 2) % 2)
                        col = n0 + 64 * g + 8 * (e // 4) + col_in_tile + e % 2
                        if row < m and col < n:
                            with ox.unsafe():
                                c[row, col] = bf16(acc[g][e])
        if TMA_STORE and leader:
            ox.tma.wait_group(0)  # the block's shared memory must outlive the last stores
    if CLUSTER > 1:
        ox.cluster.sync()  # nor may a block leave while its peer still arrives on its barriers


def signature(cfg: Config) -> tuple[Any, ...]:
    """The compile signature of a variant (for `gemm_hopper.compile(*signature(cfg))`)."""
    tm = TensorMap[bf16, 2]
    return (tm, tm, RawSlice[bf16, 2], tm, i32, i32, i32, *cfg.consts())


def boxes(cfg: Config) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """The TMA boxes of A, B and C: BM x 64 of A; 64 x 64 slabs of a K x N B, or BN x 64
    of an N x K B; 64 x 64 of C (all 128-byte swizzled)."""
    return (cfg.bm, BK), (BK, 64) if cfg.b_mn else (cfg.bn, BK), (64, 64)


def tensor_maps(a: Any, b: Any, c: Any, cfg: Config) -> tuple[TensorMap, ...]:
    """The maps of A, B and C for `cfg` (`boxes`); C's only for the TMA-store epilogue
    (else A's map stands in, unused)."""
    box_a, box_b, box_c = boxes(cfg)
    ta = TensorMap(a, box_a, swizzle=128)
    tc = TensorMap(c, box_c, swizzle=128) if cfg.tma_store else ta
    return ta, TensorMap(b, box_b, swizzle=128), tc


def launch_config(m: int, n: int, cfg: Config, sms: int = 132) -> LaunchConfig:
    """One block per tile, or (persistent) at most one per SM (`cfg.blocks` if set), in
    whole clusters."""
    cl = cfg.cluster
    blocks = -(-m // (cfg.bm * cl)) * -(-n // cfg.bn) * cl
    if cfg.persistent:
        blocks = min(blocks, ((cfg.blocks or sms) // cl) * cl)
    if cl > 1:
        return LaunchConfig(grid=blocks, block=cfg.threads, cluster=(cl, 1, 1))
    return LaunchConfig(grid=blocks, block=cfg.threads)


def matmul(a: Any, b: Any, c: Any, m: int, n: int, k: int, cfg: Config = FASTEST,
           sms: int = 132) -> None:
    """c (m x n bf16) = a (m x k) @ b, b being k x n (`cfg.b_mn`) or n x k; arrays on the
    launch's device (NumPy on the CPU, device arrays or torch tensors on a GPU)."""
    ta, tb, tc = tensor_maps(a, b, c, cfg)
    launch(gemm_hopper, launch_config(m, n, cfg, sms), ta, tb, c, tc, m, n, k,
              *cfg.consts())


__all__ = ["BK", "Config", "DEFAULT", "FASTEST", "CPU", "tile_origin", "gemm_hopper",
           "signature", "boxes", "tensor_maps", "launch_config", "matmul", "replace"]


def __dir__() -> list[str]:
    """`dir()` lists the API (`__all__`), not the modules and typing names it is built from."""
    return sorted({*__all__, *(n for n in globals() if n.startswith("__"))})
