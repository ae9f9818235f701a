"""tile/tma_rings.py and runtime/operand_maps.py without a GPU: a K loop's product
operands copied by TMA through hidden tensor-map parameters (the PTX: mbarriers, TMA
copies by one thread, parity waits, no barrier before the wgmma), what keeps cp.async,
and how the hidden maps travel (the ABI, the disk cache, bundles, the launch's values)."""

from __future__ import annotations

import dataclasses
import re

import pytest
from test_gpu_tile_rings import linear_t, make_gemm, persistent_gemm

from oxide import DisjointSlice, Slice, bf16, f32
from oxide.codegen.abi import OperandMap
from oxide.runtime import cache_entry
from oxide.runtime.bundle import _operand_maps
from oxide.runtime.operand_maps import value_starts

V = dataclasses.replace  # an array type with rows of 16-byte vectors: V(t, vectors=True)
SIG = (V(Slice[bf16, 2], vectors=True), V(Slice[bf16, 2], vectors=True),
       V(DisjointSlice[f32, 2], vectors=True))
TMA = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"


def test_a_k_loop_takes_its_operands_by_tma() -> None:
    ck = make_gemm(bf16, 8, 3).compile(*SIG, 128, 256, 64, arch="sm_90")
    # A (128 x 64): one box of 64 columns; B (64 x 256): four slabs of 64 columns (the
    # f32 result's map, param 2, goes out by TMA: tests/test_tile_tma_stores.py)
    rings = (OperandMap(0, "bf16", (128, 64), 128), OperandMap(1, "bf16", (64, 64), 128))
    assert tuple(m for m in ck.operand_maps if m.param < 2) == rings
    names = [p.name for p in ck.abi]
    assert "oxide_map0_128x64" in names and "oxide_map1_64x64" in names
    ptx = ck.ptx
    assert len(re.findall(r"\.param \.align 64 \.b8 \w+\[128\]", ptx)) == 3
    assert ptx.count(TMA) == 3 * 1 + 3 * 4  # the prologue's two loads and the loop's
    # no thread stages an operand: its shared stores are the epilogue's, after the products
    assert "cp.async.cg" not in ptx and "st.shared" not in ptx[:ptx.rindex("wgmma.")]
    # three buffers a ring, a `full` and an `empty` mbarrier each (a producer warp group
    # fills them: tests/test_tile_producer.py), each fill armed once
    assert ptx.count("mbarrier.init.shared::cta.b64") == 12
    assert ptx.count("mbarrier.arrive.expect_tx") == 6


def test_the_loop_waits_for_phases_not_a_barrier(monkeypatch) -> None:
    # without a producer warp group (OXIDE_TILE_PRODUCER=0), thread 0 issues the copies
    monkeypatch.setenv("OXIDE_TILE_PRODUCER", "0")
    ptx = make_gemm(bf16, 8, 3).compile(*SIG, 128, 256, 64, arch="sm_90").ptx
    assert ptx.count("mbarrier.init.shared::cta.b64") == 6 and "setmaxnreg" not in ptx
    loop_copy = ptx.rindex(TMA)
    mma = ptx.rindex("wgmma.mma_async", 0, loop_copy)
    # before the wgmma: both operands' phases, and no barrier since the last copies
    assert ptx.rindex("bar.sync", 0, mma) < ptx.rindex("mbarrier.try_wait.parity", 0, mma)
    assert "fence.proxy.async" not in ptx[ptx.rindex("bar.sync", 0, mma):mma]
    # after it: the wgmma before it done, a barrier, then thread 0 refills its buffer
    wait = ptx.index("wgmma.wait_group.sync.aligned 1", mma)
    barrier = ptx.index("bar.sync", wait)
    assert barrier < ptx.index("mbarrier.arrive.expect_tx", barrier) < loop_copy


def test_no_copy_outlives_the_block(monkeypatch) -> None:
    monkeypatch.setenv("OXIDE_TILE_PERSISTENT", "0")  # one tile per block: one loop's end
    ptx = make_gemm(bf16, 8, 3).compile(*SIG, 128, 256, 64, arch="sm_90").ptx
    # the loop's copies past its end: waited for before the kernel returns (after the
    # result's last TMA store)
    ends = ptx[ptx.rindex("cp.async.bulk.tensor.2d.global.shared"):]
    assert ends.count("mbarrier.try_wait.parity") == 6  # every buffer of both rings


@pytest.mark.parametrize("kernel, tiles, maps", [
    (linear_t, (128, 128, 64), ((128, 64), (128, 64))),       # B as (N, K): K-major too
    (make_gemm(bf16, 4, 3), (64, 64, 32), ((64, 32), (32, 64))),  # 64-byte rows of A
    (persistent_gemm, (64, 128, 64), ((64, 64), (64, 64))),    # the loop restarts per tile
])
def test_boxes_follow_the_staged_layout(kernel, tiles, maps) -> None:
    ck = kernel.compile(*SIG, *tiles, arch="sm_90")
    # (the f32 result's map, param 2, where it goes out by TMA: tests/test_tile_tma_stores.py)
    assert tuple(m.box for m in ck.operand_maps if m.param < 2) == maps
    assert all(m.swizzle == 2 * m.box[1] for m in ck.operand_maps if m.param < 2)
    assert TMA in ck.ptx and "cp.async.cg" not in ck.ptx


def test_what_keeps_cp_async(monkeypatch) -> None:
    # a strided A (the launch would have to map any strides: zero, negative) keeps
    # cp.async, beside B's TMA
    strided = (V(Slice[bf16, 2], vectors=True, contiguous=False), *SIG[1:])
    ck = make_gemm(bf16, 8, 2).compile(*strided, 128, 256, 64, arch="sm_90")
    assert "cp.async.cg" in ck.ptx and TMA in ck.ptx
    assert [m.param for m in ck.operand_maps if m.param < 2] == [1]
    # OXIDE_TILE_TMA=0: every thread's copies, to compare the two (the same kernel object
    # compiles anew: the switch is part of what its specializations are kept under)
    gemm = make_gemm(bf16, 8, 2)
    assert gemm.compile(*SIG, 128, 256, 64, arch="sm_90").operand_maps
    monkeypatch.setenv("OXIDE_TILE_TMA", "0")
    ck = gemm.compile(*SIG, 128, 256, 64, arch="sm_90")
    assert "cp.async.cg" in ck.ptx and TMA not in ck.ptx and not ck.operand_maps


def test_a_cache_entry_keeps_its_maps() -> None:
    maps = (OperandMap(0, "bf16", (128, 64), 128).to_json(),)
    launch = (8, 8, 8, 8)  # what the launch packs: its values, then the record
    entry = cache_entry.EntryData("k", (8, 8, 8, 128, 8), 1, (), (), b"\x7fELF k\0", maps)
    data = cache_entry.encode("key", entry)
    assert cache_entry.decode(data, "key", launch).operand_maps == maps
    with pytest.raises(cache_entry.CorruptEntry, match="packs arguments"):
        cache_entry.decode(data, "key", launch[1:])  # another signature
    bad = dataclasses.replace(entry, operand_maps=({**maps[0], "swizzle": 96},))
    with pytest.raises(cache_entry.CorruptEntry, match="operand_maps"):
        cache_entry.decode(cache_entry.encode("key", bad), "key", launch)


def test_bundles_name_each_archs_maps() -> None:
    parsed = _operand_maps({"sm_90a": [{"param": 1, "dtype": "f16", "box": [64, 64],
                                        "swizzle": 128}]})
    assert parsed == {"sm_90a": (OperandMap(1, "f16", (64, 64), 128),)}
    with pytest.raises(ValueError, match="operand_maps"):
        _operand_maps({"sm_90a": [{"param": 1, "dtype": "f16", "box": [512, 64],
                                   "swizzle": 128}]})


def test_a_launch_finds_each_arrays_values() -> None:
    class P:  # a ParamPlan's kind, spec (rank) and strided
        def __init__(self, kind: str, rank: int = 0, strided: bool = False) -> None:
            self.kind, self.strided = kind, strided
            self.spec = type("S", (), {"rank": rank})()

    params = [P("array", 2), P("const"), P("scalar"), P("array", 2, strided=True),
              P("array", 1)]
    # (ptr, 2 extents), a scalar, (ptr, 2 extents, 2 strides), then the last array
    assert value_starts(params) == [0, 3, 4, 9]


def test_a_bundle_keeps_each_archs_maps(tmp_path) -> None:
    import oxide as ox
    from oxide.aot import Job, build_bundle

    gemm = make_gemm(bf16, 8, 3)
    tiles = (128, 128, 32)  # small enough for sm_80's 48 KiB too
    build_bundle([Job("gemm", gemm, (*SIG, *tiles))], ["sm_80", "sm_90"], tmp_path)
    b = ox.load_bundle(tmp_path)
    hopper = b.gemm.compile(*SIG, *tiles, arch="sm_90")
    assert hopper.operand_maps == gemm.compile(*SIG, *tiles, arch="sm_90").operand_maps
    # A's and B's boxes, and the f32 result's (stored by TMA: 128-byte rows of 32, each
    # consumer warp group its own 64 rows)
    assert sorted((m.param, m.box) for m in hopper.operand_maps) == [
        (0, (128, 32)), (1, (32, 64)), (2, (64, 32))]
    # the logical grid (the kernel walks it: tile/persistent_schedule.py), then the maps
    assert [p.name for p in hopper.abi[3:6]] == ["oxide_grid_x", "oxide_grid_y", "oxide_grid_z"]
    assert sorted(p.name for p in hopper.abi[6:]) == [
        "oxide_map0_128x32", "oxide_map1_32x64", "oxide_map2_64x32"]
    ampere = b.gemm.compile(*SIG, *tiles, arch="sm_86")  # mma.sync: no maps
    assert ampere.operand_maps == () and len(ampere.abi) == 3
