"""tile/producer.py without a GPU: a K loop on TMA rings gets a producer warp group (the
PTX: the block's extra warp group, setmaxnreg, the consumers' releases and the producer's
waits, no block barrier per k step), what keeps thread 0 issuing the copies, and how the
launcher learns of the extra threads (codegen/warp_roles.py)."""

from __future__ import annotations

import re

import pytest
from test_gpu_tile_rings import linear_t, make_gemm, persistent_gemm
from test_tile_tma_rings import SIG, TMA, V

from oxide import Const, DisjointSlice, Slice, bf16, f32, i32, tile
from oxide.codegen.warp_roles import PRODUCER_THREADS, extra_threads, marker_symbol


def _compile(kernel, *tiles, sig=SIG):
    return kernel.compile(*sig, *tiles, arch="sm_90")


def _body(ptx: str, start: str, end: str) -> str:
    i = ptx.index(start)
    return ptx[i:ptx.index(end, i)]


def test_the_block_gets_a_producer_warp_group() -> None:
    ck = _compile(make_gemm(bf16, 8, 3), 128, 256, 64)
    ptx = ck.ptx
    assert ".maxntid 384" in ptx  # 8 warps of consumers, then 4 of the producer
    assert extra_threads(ck.name, ptx.encode()) == PRODUCER_THREADS
    assert marker_symbol(ck.name) in ptx
    # the consumers take the registers the producer gives up
    assert "setmaxnreg.inc.sync.aligned.u32 \t232" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 \t40" in ptx
    # every ring's buffer: `full` (the producer's arrive) and `empty` (8 consumer warps)
    inits = re.findall(r"mbarrier\.init\.shared::cta\.b64 \[\$0\], (\d+)|"
                       r"mbarrier\.init\.shared::cta\.b64 \[%rd\d+\], (\d+)", ptx)
    counts = sorted(int(a or b) for a, b in inits)
    assert counts == [1] * 6 + [8] * 6


def test_the_consumers_loop_passes_no_barrier() -> None:
    ptx = _compile(make_gemm(bf16, 8, 3), 128, 256, 64).ptx
    consumers = _body(ptx, "setmaxnreg.inc", "setmaxnreg.dec")
    assert TMA not in consumers and "mbarrier.arrive.expect_tx" not in consumers
    # the entry's barrier (every thread, the mbarriers initialized) is the only bar.sync
    # up to the last product: the f32 tile's TMA store (a slab ring) has its own after it
    loop = consumers[:consumers.rindex("wgmma.")]
    assert "bar.sync" not in loop and "barrier.sync" not in loop
    assert "cp.async.bulk.wait_group.read" in consumers[len(loop):]
    # in the loop: the phases, the product, the one before it done, then the releases
    mma = consumers.rindex("wgmma.mma_async")
    assert consumers.rindex("mbarrier.try_wait.parity", 0, mma) < mma
    wait = consumers.index("wgmma.wait_group.sync.aligned 1", mma)
    assert consumers.count("mbarrier.arrive.shared.b64", wait) >= 2  # A's ring and B's


def test_buffers_go_back_when_their_products_are_done(monkeypatch) -> None:
    monkeypatch.setenv("OXIDE_TILE_PERSISTENT", "0")  # one tile per block: one K loop
    ptx = _compile(make_gemm(bf16, 8, 3), 128, 256, 64).ptx
    # the prologue's two fills of each ring and the loop's one: the producer waits for
    # each buffer's release, arms it and copies (A one slab, B four)
    assert ptx.count("mbarrier.arrive.expect_tx") == 6
    assert ptx.count(TMA) == 3 * 1 + 3 * 4
    # in the loop: once the product before is done (`wait_group 1`), its buffers go back
    wait = ptx.index("wgmma.wait_group.sync.aligned 1")
    loop_end = ptx.index("setmaxnreg.dec", wait)
    assert ptx.count("mbarrier.arrive.shared.b64", wait, loop_end) == 2  # A's and B's
    # after the loop, before the epilogue's stores (the f32 tile through shared memory
    # by TMA): the last product's buffers and the fills past the loop's end (each once
    # landed), 3 buffers x 2 rings
    settle = ptx.rindex("wgmma.wait_group.sync.aligned 0")
    epilogue = ptx.index("st.shared", settle)
    assert ptx.count("mbarrier.arrive.shared.b64", settle, epilogue) == 6
    assert ptx.count("mbarrier.try_wait.parity", settle, epilogue) == 6


def test_a_persistent_loop_and_a_transposed_b_take_it_too(monkeypatch) -> None:
    # 4 warps walking tiles: the producer's copy walks them too (and keeps no registers
    # from the consumers); a (N, K) weight read through `permute` on 8 warps. (4 warps
    # whose rings fit half an SM take two blocks and no producer by default.)
    monkeypatch.setenv("OXIDE_TILE_TWO_BLOCKS", "0")
    persistent = _compile(persistent_gemm, 64, 128, 64).ptx
    assert ".maxntid 256" in persistent and "setmaxnreg" not in persistent
    transposed = _compile(linear_t, 128, 128, 64).ptx
    assert ".maxntid 384" in transposed and "setmaxnreg.inc" in transposed
    for ptx in (persistent, transposed):
        assert "mbarrier.arrive.shared.b64" in ptx and "bar.sync" in ptx


def test_four_consumer_warps_keep_their_registers(monkeypatch) -> None:
    monkeypatch.setenv("OXIDE_TILE_TWO_BLOCKS", "0")  # (else two blocks, no producer)
    ptx = _compile(make_gemm(bf16, 4, 3), 64, 64, 32).ptx
    assert ".maxntid 256" in ptx and "setmaxnreg" not in ptx
    assert "mbarrier.arrive.shared.b64" in ptx


@tile.kernel(num_warps=8, num_stages=3)
def counted(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[f32, 2],
            steps: Slice[i32], BM: Const[int], BN: Const[int], BK: Const[int]):
    """Its trip count is read from memory: the producer could not count alone."""
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.load(steps, (0,), ())):
        acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)), acc)
    tile.store(c, (i, j), acc)


@tile.kernel(num_warps=8, num_stages=2, occupancy=1)
def occupied(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[f32, 2],
             BM: Const[int], BN: Const[int], BK: Const[int]):
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(a, 1, BK)):
        acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)), acc)
    tile.store(c, (i, j), acc)


def test_what_keeps_thread_0_issuing_the_copies(monkeypatch) -> None:
    def plain(ck) -> bool:
        return "setmaxnreg" not in ck.ptx and not extra_threads(ck.name, ck.ptx.encode()) \
            and TMA in ck.ptx and ".maxntid 256" in ck.ptx

    # a trip count loaded from memory
    assert plain(counted.compile(*SIG, V(Slice[i32], vectors=True), 128, 256, 64,
                                 arch="sm_90"))
    # a ring that stays on cp.async (a strided A) beside B's TMA
    strided = (V(Slice[bf16, 2], vectors=True, contiguous=False), *SIG[1:])
    ck = _compile(make_gemm(bf16, 8, 2), 128, 256, 64, sig=strided)
    assert "setmaxnreg" not in ck.ptx and ".maxntid 256" in ck.ptx
    # asked for occupancy: the registers are the user's to cap
    assert plain(_compile(occupied, 128, 256, 64))
    # OXIDE_TILE_PRODUCER=0, to compare the two (a switch the compiled kernels are kept under)
    gemm = make_gemm(bf16, 8, 3)
    assert not plain(_compile(gemm, 128, 256, 64))
    monkeypatch.setenv("OXIDE_TILE_PRODUCER", "0")
    assert plain(_compile(gemm, 128, 256, 64))


def test_the_cpu_runs_the_kernel_as_written() -> None:
    ck = make_gemm(bf16, 8, 3).compile(*SIG, 64, 64, 32, target="cpu")
    assert marker_symbol(ck.name) not in ck.llvm_unoptimized


def test_the_launch_adds_the_producers_threads() -> None:
    import ctypes
    import types

    import oxide as ox
    from oxide.runtime import cuda_driver as cd
    from oxide.runtime import gpu

    fake = types.SimpleNamespace(
        packed_cfg=None, check_config=lambda cfg: None, grid_x_factor=1,
        extra_threads=PRODUCER_THREADS, cooperative=False, cooperative_attrs=None,
        cluster_attrs=None, config_buffer=ctypes.create_string_buffer(cd.LAUNCH_CONFIG.size),
        persistent=False)
    gpu.Launcher.prepare(fake, ox.LaunchConfig(grid=(8, 2), block=256), 0)
    dims = cd.LAUNCH_CONFIG.unpack(fake.config_buffer.raw[:cd.LAUNCH_CONFIG.size])[:6]
    assert list(dims) == [8, 2, 1, 256 + PRODUCER_THREADS, 1, 1]


@pytest.mark.parametrize("grid, blocks", [((8, 2), 16), ((64, 32), 132), ((5, 4, 3), 60)])
def test_a_persistent_launch_runs_the_blocks_that_fit(grid, blocks, monkeypatch) -> None:
    # a kernel that walks its grid (tile/persistent_schedule.py): the logical grid goes
    # to the kernel's hidden parameters, and at most one block per SM runs (here)
    import ctypes
    import struct
    import types

    import oxide as ox
    from oxide.runtime import cuda_driver as cd
    from oxide.runtime import gpu

    seen = []
    monkeypatch.setattr(gpu, "blocks_per_sm",
                        lambda function, threads, smem: seen.append(threads) or 1)
    fake = types.SimpleNamespace(
        packed_cfg=None, check_config=lambda cfg: None, grid_x_factor=1,
        extra_threads=PRODUCER_THREADS, cooperative=False, cooperative_attrs=None,
        cluster_attrs=None, config_buffer=ctypes.create_string_buffer(cd.LAUNCH_CONFIG.size),
        persistent=True, logical_grid_offsets=[8, 12, 16], grid_packer=struct.Struct("@I"),
        buffer=ctypes.create_string_buffer(24), function=None, kernel_name="walked",
        gdev=types.SimpleNamespace(attribute=lambda name: 132))
    gpu.Launcher.prepare(fake, ox.LaunchConfig(grid=grid, block=256), 0)
    dims = cd.LAUNCH_CONFIG.unpack(fake.config_buffer.raw[:cd.LAUNCH_CONFIG.size])[:6]
    assert list(dims) == [blocks, 1, 1, 256 + PRODUCER_THREADS, 1, 1]
    assert seen == [256 + PRODUCER_THREADS]  # the occupancy of the block as launched
    assert struct.unpack_from("@3I", fake.buffer, 8) == (*grid, 1, 1)[:3]


@tile.kernel(num_warps=8, num_stages=3)
def two_loops(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[f32, 2],
              n_first: i32, BM: Const[int], BN: Const[int], BK: Const[int]):
    """An early return, a loop under a branch, and two K loops after each other."""
    i, j = tile.bid(0), tile.bid(1)
    if i * BM >= c.shape[0]:
        return
    acc = tile.zeros((BM, BN), f32)
    if n_first > 0:
        for k in range(n_first):
            acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)),
                           acc)
    for k in range(n_first, tile.num_tiles(a, 1, BK)):
        acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)), acc)
    tile.store(c, (i, j), acc)


def test_branches_returns_and_two_loops_are_the_producers_too() -> None:
    # the producer's copy keeps the return's branch, the `if` and both loops' counters:
    # four rings (each loop's A and B), each filled by the producer alone
    sig = (*SIG, i32)
    ck = two_loops.compile(*sig, 128, 64, 64, arch="sm_90")
    ptx = ck.ptx
    assert extra_threads(ck.name, ptx.encode()) == PRODUCER_THREADS
    inits = ptx.count("mbarrier.init.shared::cta.b64")
    assert inits >= 2 * 3 * 4  # full and empty, 3 buffers, 4 rings (LLVM may fold none)
    assert ptx.count("mbarrier.arrive.expect_tx") == 4 * 3  # each ring: 2 ahead + 1


def test_a_walked_grid_takes_fewer_than_2_to_the_32_blocks() -> None:
    # the grid walk divides in 32 bits (tile/persistent_schedule.py): a launch over more
    # blocks is refused before anything runs
    import oxide as ox
    from oxide.codegen.persistent_grid import hardware_blocks

    assert hardware_blocks((5, 4, 3), 132, "k") == 60
    assert hardware_blocks((2 ** 16, 2 ** 15, 1), 132, "k") == 132
    with pytest.raises(ox.LaunchError, match="fewer than 2\\*\\*32 blocks"):
        hardware_blocks((2 ** 31 - 1, 4, 1), 132, "k")
