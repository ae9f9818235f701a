"""Device-side names for inline PTX, tensor cores (mma.sync) and the Hopper primitives.

These are the SIMT building blocks the fastest hand-written kernels (and, later, the
Tile model's lowering) are made of: `ox.asm` inline PTX with typed operands; Ampere's
warp-level `ox.mma_sync` with `ox.ldmatrix` / `ox.stmatrix`; Hopper's `ox.mbarrier`,
async-proxy fences, `ox.elect_sync`, `ox.setmaxnreg`, named barriers, `ox.cluster`, and
the warp-group tensor cores (`ox.wgmma` with its descriptors, fence, commit and wait);
TMA box copies (`ox.tma`, with `ox.TensorMap` parameters).
The CPU runs mma_sync, ldmatrix, stmatrix and wgmma exactly, mbarriers as counters and
TMA as copies; a CPU compile of a kernel that uses one of the others is a `TargetError`,
and one that needs a newer GPU than the target is a `TargetError` too, raised before
LLVM runs.
docs/language.md ("Inline PTX and tensor-core primitives") gives the fragment layouts.
"""

from __future__ import annotations

from oxide.lang.intrinsic import Intrinsic, Namespace

asm = Intrinsic("asm", "asm(template, returns, *inputs, constraints=None, volatile=True): "
                "inline PTX. `returns` is None, a dtype or a tuple of dtypes; inputs are "
                "scalars whose dtypes pick the registers (r, l, f, d, h); `$0`/`%0`... name "
                "outputs, then inputs. Needs `with ox.unsafe():`; GPU only.")
mma_sync = Intrinsic("mma_sync", "mma_sync(a, b, c, dtype=bf16): one warp-wide "
                     "mma.sync: m16n8k16 for bf16/f16 (a: 4 u32 or 8 halves, b: 2 u32 or 4 "
                     "halves), m16n8k8 tf32 for dtype=f32 (a: 4, b: 2 f32 or u32); c is 4 "
                     "f32; returns the 4 f32 of D = A @ B + C (PTX fragment layouts).")
ldmatrix = Intrinsic("ldmatrix", "ldmatrix(s[i, j], num=4, trans=False): num 8x8 matrices "
                     "of 16-bit elements from shared memory, one row address per lane "
                     "(lanes 8m..8m+7 give matrix m's rows); returns num u32. Needs "
                     "`with ox.unsafe():`.")
stmatrix = Intrinsic("stmatrix", "stmatrix(s[i, j], frags, trans=False): the inverse of "
                     "ldmatrix (sm_90): `frags` is a tuple of 1, 2 or 4 u32. Needs "
                     "`with ox.unsafe():`.")
mbarrier = Namespace("mbarrier", {
    "init": "init(bars[i], count): initialize the mbarrier in a shared u64 element for "
            "`count` arrivals per phase (needs `with ox.unsafe():`).",
    "arrive": "arrive(bars[i]): arrive once; returns the phase's state token (u64).",
    "arrive_expect_tx": "arrive_expect_tx(bars[i], nbytes): arrive and expect `nbytes` of "
                        "asynchronous (TMA) transfers in this phase; returns the token (sm_90).",
    "try_wait_parity": "try_wait_parity(bars[i], parity): whether the phase with this parity "
                       "(0 or 1) has completed; waits a bounded time (sm_90).",
    "wait_parity": "wait_parity(bars[i], parity): wait until the phase with this parity "
                   "has completed (a loop around try_wait_parity, sm_90).",
    "arrive_cluster": "arrive_cluster(bars[i], rank): arrive once on the same mbarrier in "
                      "the shared memory of cluster block `rank` (mapa + mbarrier.arrive."
                      "release.cluster.shared::cluster, sm_90); scope=\"cta\" releases only "
                      "within this block (no GPU-wide fence: for a buffer it only read); the "
                      "CPU's clusters of one have rank 0 only.",
}, doc="Shared-memory barriers (PTX mbarrier) in elements of `ox.shared.array(u64, n)`: "
       "phases complete when `count` threads have arrived and the expected transaction "
       "bytes have landed.")
fence_proxy_async = Intrinsic("fence_proxy_async", "fence_proxy_async(): order this thread's "
                              "shared-memory writes before later async-proxy (TMA, wgmma) "
                              "accesses (fence.proxy.async.shared::cta, sm_90).")
fence_mbarrier_init = Intrinsic("fence_mbarrier_init", "fence_mbarrier_init(): make mbarrier "
                                "inits visible to the cluster (fence.mbarrier_init.release."
                                "cluster, sm_90).")
elect_sync = Intrinsic("elect_sync", "elect_sync(): True in exactly one lane of the warp "
                       "(elect.sync over the full warp, sm_90).")
setmaxnreg = Intrinsic("setmaxnreg", "setmaxnreg(n, inc=True): raise (inc) or lower the "
                       "warp group's register budget to n (24..256, a multiple of 8; "
                       "sm_90a: the kernel is compiled for sm_90a). Needs `with ox.unsafe():`.")
named_barrier_sync = Intrinsic("named_barrier_sync", "named_barrier_sync(id, nthreads): "
                               "barrier `id` (1..15; 0 is sync_threads') for `nthreads` "
                               "threads, a multiple of 32 (bar.sync id, nthreads).")
wgmma = Intrinsic("wgmma", "wgmma(acc, a, b, dtype=bf16, scale_d=True, trans_a=False, "
                  "trans_b=False): one warp group's asynchronous m64nNk16 multiply-add "
                  "(wgmma.mma_async, sm_90a): acc is N/2 f32 per thread (N = 8..256, a "
                  "multiple of 8), a an ox.wgmma_desc() (SS form) or 4 packed u32 / 8 "
                  "halves (RS form), b an ox.wgmma_desc(); returns the new accumulators, "
                  "to be read only after ox.wgmma_wait().")
wgmma_desc = Intrinsic("wgmma_desc", "wgmma_desc(s[i, j], swizzle=128, major='k'): the "
                       "64-bit shared-memory matrix descriptor of the operand starting at "
                       "s[i, j], an array whose last dimension is one swizzle row (128, 64 "
                       "or 32 bytes) laid out as TMA writes it with that swizzle; 'k' for a "
                       "K-major operand, 'mn' for an MN-major one (then pass trans_a/trans_b=True).")
wgmma_fence = Intrinsic("wgmma_fence", "wgmma_fence(): order earlier register and shared-"
                        "memory accesses before the next wgmma (wgmma.fence, sm_90a).")
wgmma_commit = Intrinsic("wgmma_commit", "wgmma_commit(): close the group of wgmma issued "
                         "since the last commit (wgmma.commit_group, sm_90a).")
wgmma_wait = Intrinsic("wgmma_wait", "wgmma_wait(n, acc=()): wait until at most n groups "
                       "are pending (wgmma.wait_group n, sm_90a); returns `acc` carried "
                       "through the wait, so its reads cannot move above it.")
cluster = Namespace("cluster", {
    "rank": "rank(): this block's rank in its cluster (%cluster_ctarank), i32.",
    "size": "size(): the number of blocks in the cluster (%cluster_nctarank), i32.",
    "block_idx": "block_idx(axis): this block's index in the cluster along 'x', 'y' or 'z' "
                 "(%cluster_ctaid).",
    "block_dim": "block_dim(axis): the cluster's shape in blocks (%cluster_nctaid).",
    "cluster_idx": "cluster_idx(axis): this cluster's index in the grid (%clusterid).",
    "grid_dim": "grid_dim(axis): the grid's shape in clusters (%nclusterid).",
    "arrive": "arrive(): arrive at the cluster barrier (barrier.cluster.arrive).",
    "wait": "wait(): wait for every thread of the cluster to arrive (barrier.cluster.wait).",
    "sync": "sync(): arrive, then wait: a barrier for every thread of the cluster.",
}, doc="Thread-block clusters (sm_90): ranks, shapes and the cluster-wide barrier. A "
       "kernel launched without clusters runs each block as a cluster of one.")

tma = Namespace("tma", {
    "load": "load(tmap, s, *coords, barrier, multicast=None): copy the box of `tmap` at "
            "element coordinates `coords` (one per dimension, outermost first, as the "
            "array's indices) into the shared array `s`, completing `barrier` (an "
            "`bars[i]` of ox.shared.array(u64, n)) by the box's bytes; elements past the "
            "array's edge read as zero. `multicast=` a 16-bit mask of the cluster's blocks "
            "that all receive the box (.multicast::cluster). Needs `with ox.unsafe():` (sm_90).",
    "store": "store(tmap, s, *coords): copy the shared array `s` into the box of `tmap` at "
             "`coords` (elements past the array's edge are dropped); a bulk group: "
             "ox.tma.commit_group(), then ox.tma.wait_group(0) before `s` is reused. Needs "
             "`with ox.unsafe():` (sm_90).",
    "commit_group": "commit_group(): close the bulk group of TMA stores issued since the "
                    "last commit (cp.async.bulk.commit_group, sm_90).",
    "wait_group": "wait_group(n): wait until at most n bulk groups are pending, their writes "
                  "done (cp.async.bulk.wait_group n, sm_90).",
    "wait_group_read": "wait_group_read(n): wait until at most n bulk groups still read "
                       "their shared memory (cp.async.bulk.wait_group.read n, sm_90).",
    "prefetch": "prefetch(tmap, *coords): prefetch the box at `coords` into L2 "
                "(cp.async.bulk.prefetch.tensor, sm_90).",
    "prefetch_descriptor": "prefetch_descriptor(tmap): bring the tensor map itself into the "
                           "cache (prefetch.tensormap, sm_90).",
}, doc="TMA, the tensor memory accelerator (sm_90): asynchronous box copies between global "
       "memory, described by an ox.TensorMap parameter, and shared memory. A shared array "
       "that TMA writes is aligned to 128 bytes (1024 with a 128-byte swizzle).")

__all__ = ["asm", "mma_sync", "ldmatrix", "stmatrix", "mbarrier", "fence_proxy_async",
           "fence_mbarrier_init", "elect_sync", "setmaxnreg", "named_barrier_sync", "cluster",
           "wgmma", "wgmma_desc", "wgmma_fence", "wgmma_commit", "wgmma_wait", "tma"]
