"""tile/tma_stores.py without a GPU: an epilogue's store goes through shared memory and
TMA where it qualifies (the PTX: swizzled shared stores, the fence, one bulk tensor
store per 128-byte slab, the waits; no wgmma serialized by them), and what keeps each
thread's global stores."""

from __future__ import annotations

import pytest
from test_gpu_tile_producer import make_gemm, make_persistent
from test_tile_tma_rings import V

import oxide as ox
from oxide import AtomicSlice, Const, DisjointSlice, Slice, bf16, f32, tile
from oxide.codegen.abi import OperandMap
from oxide.frontend.parallel_calls import SM90A_STATIC_SHARED_BYTES
from oxide.tile import tma_stores
from oxide.tile.operand_rings import RING_BYTES

STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"
WAIT = "cp.async.bulk.wait_group \t0"


def _sig(out, vectors: bool = True):
    return (V(Slice[bf16, 2], vectors=True), V(Slice[bf16, 2], vectors=True),
            V(DisjointSlice[out, 2], vectors=vectors))


def test_an_epilogue_is_stored_by_tma() -> None:
    ck = make_gemm(bf16, 8, 3).compile(*_sig(bf16), 128, 256, 64, arch="sm_90")
    # the output's map: boxes of 64 rows (one consumer warp group's band) x 64 columns
    # (a 128-byte swizzled row)
    assert OperandMap(2, "bf16", (64, 64), 128) in ck.operand_maps
    ptx = ck.ptx
    assert ptx.count(STORE) == 4 and "st.global" not in ptx  # four slabs of 64 columns
    assert ptx.count("cp.async.bulk.commit_group") == 1
    # before the shared tile is written: every thread waits for its stores; at the end,
    # for the shared tile's reads
    assert WAIT in ptx and "cp.async.bulk.wait_group.read \t0" in ptx
    written = ptx.index("st.shared")
    assert ptx.rindex(WAIT, 0, written) < written
    assert written < ptx.index("fence.proxy.async", written) < ptx.index(STORE)


def test_f32_and_a_persistent_loop() -> None:
    ck = make_gemm(f32, 4, 3).compile(*_sig(f32), 64, 64, 32, arch="sm_90")
    assert OperandMap(2, "f32", (64, 32), 128) in ck.operand_maps
    assert ck.ptx.count(STORE) == 2
    ptx = make_persistent(bf16, 8, 3).compile(*_sig(bf16), 128, 256, 64, arch="sm_90").ptx
    assert ptx.count(STORE) == 4


@pytest.mark.parametrize("stages", [3, 4])  # the whole tile, a slab ring
def test_no_wgmma_waits_for_the_stores(stages: int) -> None:
    from tools.ptxas_report import ptxas_report

    ptx = make_gemm(bf16, 8, stages).compile(*_sig(bf16), 128, 256, 64, arch="sm_90").ptx
    try:
        report = ptxas_report(ptx, "sm_90a")
    except (OSError, RuntimeError) as exc:  # no nvJitLink library here
        pytest.skip(f"ptxas report unavailable: {exc}")
    assert "C7514" not in report["notes"], report["log"]


@pytest.mark.parametrize("whole_block, width, swizzle", [(True, 64, 128), (False, 32, 64)])
def test_a_tile_too_large_for_what_the_rings_leave_goes_through_a_slab_ring(
        monkeypatch, whole_block: bool, width: int, swizzle: int) -> None:
    """Four stages of 128 x 256 x 64 rings leave 35 KB of the block's 227: the 64 KB bf16
    tile goes out in four slabs of 64 columns through two 16 KB buffers, each written
    again only after the copy before the last has read it. Within the rings' own budget
    (what a kernel with other shared arrays is lowered again with), 19 KB: eight slabs
    of 32 columns (64-byte rows, that swizzle) through two 8 KB buffers."""
    if not whole_block:  # (and not the disk cache's kernel of the whole block's plan)
        monkeypatch.setenv("OXIDE_CACHE", "0")
        monkeypatch.setattr(tma_stores, "BARRIER_BYTES",
                            SM90A_STATIC_SHARED_BYTES - RING_BYTES)
    ck = make_gemm(bf16, 8, 4).compile(*_sig(bf16), 128, 256, 64, arch="sm_90")
    assert OperandMap(2, "bf16", (64, width), swizzle) in ck.operand_maps
    slabs = 256 // width
    ptx = ck.ptx
    assert ptx.count(STORE) == slabs and "st.global" not in ptx
    assert ptx.count("cp.async.bulk.commit_group") == slabs
    assert ptx.count("cp.async.bulk.wait_group.read \t1") == slabs - 2  # from slab 2 on
    stores = [i for i in range(len(ptx)) if ptx.startswith(STORE, i)]
    for n, at in enumerate(stores):
        fence = ptx.rindex("fence.proxy.async", 0, at)
        assert n == 0 or fence > stores[n - 1]  # each slab fenced after the copy before
    buffers = {ptx[at:ptx.index("\n", at)].rsplit("[", 1)[1] for at in stores}
    assert len(buffers) == 2, buffers  # (each a warp group's band of one of them)


def test_each_consumer_warp_group_stores_its_own_rows() -> None:
    """wgmma's accumulator of 8 warps: each consumer warp group holds 64 rows and stores
    them alone, behind its own named barrier (4 or 5, of 128 threads), its first thread
    issuing the copies; the consumers' barrier of 256 threads is not met in the epilogue.
    A blocked layout, or one warp group, stores as one."""
    from oxide.tile.layout import blocked, mma_accumulator
    from oxide.tile.tma_stores import row_bands

    assert row_bands(mma_accumulator((128, 256), 8, True)) == 2
    assert row_bands(mma_accumulator((64, 256), 4, True)) == 1
    assert row_bands(blocked((128, 256), 8, 4)) == 1
    ptx = make_gemm(bf16, 8, 3).compile(*_sig(bf16), 128, 256, 64, arch="sm_90").ptx
    named = [line.strip() for line in ptx.splitlines() if "barrier.sync" in line
             and "bar.sync" not in line]  # (bar.sync 0: the block's, after the mbarrier init)
    # the wait for the last copies, the shared tile written: two syncs of the group's own
    assert len(named) == 2 and all(line.endswith(", 128;") for line in named), named


def test_the_plan_of_a_store() -> None:
    from oxide.tile.layout import mma_accumulator
    from oxide.tile.tma_stores import SlabPlan, plan_slabs, slab_of_slots

    acc = mma_accumulator((128, 256), 8, True)  # wgmma's: the warps split the rows
    assert plan_slabs(128, 256, bf16, acc, 64 * 1024) == SlabPlan(64, 4)  # whole
    assert plan_slabs(128, 256, bf16, acc, 19 * 1024) == SlabPlan(32, 2)
    assert plan_slabs(128, 256, bf16, acc, 8 * 1024) == SlabPlan(16, 2)
    assert plan_slabs(128, 256, bf16, acc, 4 * 1024) is None  # 32-byte rows the narrowest
    assert plan_slabs(128, 256, f32, acc, 19 * 1024) == SlabPlan(16, 2)
    # a thread's columns come in groups of 8: every slot in one slab of 16 or more
    assert slab_of_slots(acc, 16) is not None and slab_of_slots(acc, 4) is None
    # mma.sync's accumulator on 8 warps splits the columns too: a slot's column is far
    # apart from warp to warp, so only the whole tile goes
    split = mma_accumulator((128, 256), 8, False)
    assert slab_of_slots(split, 32) is None
    assert plan_slabs(128, 256, bf16, split, 19 * 1024) is None


@tile.kernel(num_warps=8, num_stages=2)
def stored_twice(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[bf16, 2],
                 BM: Const[int], BN: Const[int], BK: Const[int]):
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(a, 1, BK)):
        acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)), acc)
    tile.store(c, (i, j), acc.astype(bf16))
    tile.store(c, (i, j), (acc * 2.0).astype(bf16))


def test_what_keeps_each_threads_stores(monkeypatch) -> None:
    def by_tma(ck) -> bool:
        return STORE in ck.ptx

    # rows the launch does not check for 16-byte vectors
    assert not by_tma(make_gemm(bf16, 8, 3).compile(*_sig(bf16, vectors=False), 128, 256,
                                                    64, arch="sm_90"))
    # an array stored twice: the ordering pass keeps its say
    assert not by_tma(stored_twice.compile(*_sig(bf16), 128, 128, 64, arch="sm_90"))
    # sm_80, the CPU, OXIDE_TILE_TMA=0
    gemm = make_gemm(bf16, 8, 3)
    assert not by_tma(gemm.compile(*_sig(bf16), 128, 128, 32, arch="sm_80"))
    assert "bulk" not in gemm.compile(*_sig(bf16), 64, 64, 32, target="cpu").llvm_unoptimized
    monkeypatch.setenv("OXIDE_TILE_TMA", "0")
    assert not by_tma(gemm.compile(*_sig(bf16), 128, 256, 64, arch="sm_90"))


def test_stores_past_the_block_lower_again_within_the_rings_budget(monkeypatch) -> None:
    """Where the store's buffers, planned on the whole block, leave the kernel's other
    shared arrays no room (here: told the block is 40 KB larger than it is, so the whole
    64 KB tile is planned beside four stages of rings), the kernel is lowered again
    with the rings' own budget (tile/pipeline.py `StoresRefused`): 32-column slabs."""
    monkeypatch.setenv("OXIDE_CACHE", "0")
    monkeypatch.setattr(tma_stores, "BARRIER_BYTES", -40 * 1024)
    ck = make_gemm(bf16, 8, 4).compile(*_sig(bf16), 128, 256, 64, arch="sm_90")
    assert OperandMap(2, "bf16", (64, 32), 64) in ck.operand_maps
    assert ck.ptx.count(STORE) == 8


def test_where_the_tiles_crowd_the_registers_a_slab_ring_is_stored_together() -> None:
    """A bias + GELU epilogue keeps about 384 registers of tiles live a thread: stored
    by each warp group alone, its slab ring spilled (H100, 2026-12-05), so the groups
    store it together (boxes of all 128 rows). The same GEMM without the epilogue's
    temporaries stores each group's 64 rows alone."""
    @tile.kernel(num_warps=8, num_stages=4)
    def linear_gelu(x: Slice[bf16, 2], w: Slice[bf16, 2], bias: Slice[bf16],
                    y: DisjointSlice[bf16, 2], BM: Const[int], BN: Const[int], BK: Const[int]):
        i, j = tile.bid(0), tile.bid(1)
        acc = tile.zeros((BM, BN), f32)
        for k in range(tile.num_tiles(x, 1, BK)):
            acc = tile.mma(tile.load(x, (i, k), (BM, BK)), tile.load(w, (k, j), (BK, BN)), acc)
        z = acc + tile.load(bias, (j,), (BN,)).astype(f32)[None, :]
        tile.store(y, (i, j), (0.5 * z * (1.0 + tile.tanh(0.8 * (z + 0.044715 * z * z * z))))
                   .astype(bf16))

    sig = (*_sig(bf16)[:2], V(Slice[bf16, 1], vectors=True), _sig(bf16)[2])
    with pytest.warns(ox.PerformanceWarning):  # the register budget's warning, as well
        ck = linear_gelu.compile(*sig, 128, 256, 64, arch="sm_90")
    assert OperandMap(3, "bf16", (128, 64), 128) in ck.operand_maps
    named = {line.strip() for line in ck.ptx.splitlines() if "barrier.sync" in line
             and "bar.sync" not in line}
    assert named == {"barrier.sync \t1, 256;"}, named
    plain = make_gemm(bf16, 8, 4).compile(*_sig(bf16), 128, 256, 64, arch="sm_90")
    assert OperandMap(2, "bf16", (64, 64), 128) in plain.operand_maps


REDUCE = "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group"


def _adds(sem: str = "relaxed", scope: str = "device", kind: str = "add", used: bool = False):
    """A K split of a product whose partial tiles are summed by a tile atomic: `sem`,
    `scope`, `kind` and whether the old values are read (stored to `d`) vary."""
    @tile.kernel(num_warps=8, num_stages=3)
    def split(a: Slice[bf16, 2], b: Slice[bf16, 2], c: AtomicSlice[f32, 2],
              d: DisjointSlice[f32, 2], BM: Const[int], BN: Const[int], BK: Const[int]):
        i, j, s = tile.bid(0), tile.bid(1), tile.bid(2)
        acc = tile.zeros((BM, BN), f32)
        for kk in range(2):
            k = s * 2 + kk
            acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)), acc)
        if kind == "max":
            tile.atomic_max(c, (i, j), acc, sem=sem, scope=scope)
        elif used:
            tile.store(d, (i, j), tile.atomic_add(c, (i, j), acc, sem=sem, scope=scope))
        else:
            tile.atomic_add(c, (i, j), acc, sem=sem, scope=scope)
    return split


def _split_sig(vectors: bool = True):
    return (V(Slice[bf16, 2], vectors=True), V(Slice[bf16, 2], vectors=True),
            V(AtomicSlice[f32, 2], vectors=vectors), V(DisjointSlice[f32, 2], vectors=True))


def test_a_relaxed_add_of_an_accumulator_is_a_tma_reduction() -> None:
    """Split K's partial tiles, summed by `tile.atomic_add(c, (i, j), acc, sem="relaxed")`:
    staged in shared memory as a store is, then added by TMA (`cp.reduce.async.bulk.tensor
    .add`, each element a relaxed device-scope atomic in L2): no per-element atomics.
    Block scope takes it too (the copy's atomics are device-scope: at least as strong).
    Its tensor map flushes f32 subnormals (FLOAT32_FTZ), as each thread's atomics do."""
    for scope in ("device", "block"):
        ck = _adds(scope=scope).compile(*_split_sig(), 128, 256, 64, arch="sm_90")
        # flushing subnormals as each thread's atom.add.f32 on global memory does
        assert OperandMap(2, "f32", (64, 32), 128, ftz=True) in ck.operand_maps
        ptx = ck.ptx
        assert ptx.count(REDUCE) == 8 and STORE not in ptx  # slabs of 32 f32 columns
        assert "red.global" not in ptx and "atom.global" not in ptx


def test_what_keeps_the_atomics() -> None:
    """An ordering (release, acquire: fences and barriers around the atomic), system
    scope, old values read, another operation, and rows not known to take 16-byte
    vectors keep each thread's atomics."""
    def reduced(kernel, sig=None) -> bool:
        ptx = kernel.compile(*(sig or _split_sig()), 128, 256, 64, arch="sm_90").ptx
        return REDUCE in ptx

    assert reduced(_adds())
    assert not reduced(_adds(sem="acq_rel"))
    assert not reduced(_adds(sem="release"))
    assert not reduced(_adds(scope="system"))
    assert not reduced(_adds(used=True))
    assert not reduced(_adds(kind="max"))
    assert not reduced(_adds(), _split_sig(vectors=False))


def test_a_tensor_maps_flush_survives_the_cache_and_bundles() -> None:
    """`OperandMap.ftz` goes through JSON (the disk cache, bundles); an entry written
    before it (no key) reads as a plain map."""
    for m in (OperandMap(2, "f32", (64, 32), 128, ftz=True),
              OperandMap(0, "bf16", (128, 64), 128)):
        assert OperandMap.from_json(m.to_json()) == m
    assert "ftz" not in OperandMap(0, "bf16", (128, 64), 128).to_json()
    assert OperandMap(2, "f32", (64, 32), 128, ftz=True).abi.name.endswith("_ftz")
    old = {"param": 1, "dtype": "f32", "box": [64, 32], "swizzle": 128}
    assert OperandMap.from_json(old) == OperandMap(1, "f32", (64, 32), 128)
