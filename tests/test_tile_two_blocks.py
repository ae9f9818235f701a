"""Two blocks an SM for a kernel of one warp group (tile/frontend.py `_may_take_two_blocks`)
and the shared memory an `occupancy` leaves a block (frontend/parallel_calls.py
`sm90_block_shared_bytes`), without a GPU: the PTX's launch bounds and shared arrays,
and the kernels run on the CPU as sm_90 compiles them."""

from __future__ import annotations

import re

import numpy as np
import pytest
from test_tile_swapped import check_matmul
from test_tile_tma_rings import V
from test_tile_transposed_a import on_cpu
from tools.ptxas_report import ptxas_report

import oxide as ox
from oxide import DisjointSlice, Slice, bf16
from oxide.examples.tile_matmul import tile_matmul
from oxide.frontend.parallel_calls import SM90A_STATIC_SHARED_BYTES, sm90_block_shared_bytes
from oxide.tile.kernel import tile_options


@pytest.fixture(autouse=True)
def two_blocks(monkeypatch):
    monkeypatch.setenv("OXIDE_TILE_TWO_BLOCKS", "1")


HALF_SM = 113 * 1024  # 228 KB an SM, halved, less the driver's 1 KB a block
SIG = (V(Slice[bf16, 2], vectors=True), V(Slice[bf16, 2], vectors=True),
       V(DisjointSlice[bf16, 2], vectors=True))


def shared_bytes(ptx: str) -> int:
    return sum(int(n) for n in re.findall(r"\.shared \.align \d+ \.b8 \w+\[(\d+)\]", ptx))


def matmul_ptx(warps: int, stages: int, tiles: tuple[int, int, int],
               occupancy: int | None = None) -> str:
    kernel = tile_matmul.with_options(tile_options(warps, occupancy, False, num_stages=stages))
    return kernel.compile(*SIG, *tiles, arch="sm_90").ptx


def test_the_shared_memory_of_a_block() -> None:
    assert sm90_block_shared_bytes(None) == sm90_block_shared_bytes(1) == \
        SM90A_STATIC_SHARED_BYTES
    assert sm90_block_shared_bytes(2) == HALF_SM
    assert sm90_block_shared_bytes(3) == 75 * 1024


@pytest.mark.parametrize("stages, tiles", [(3, (128, 128, 64)), (4, (64, 128, 64)),
                                           (4, (128, 64, 64))])
def test_one_warp_group_takes_two_blocks_where_its_rings_fit(stages, tiles) -> None:
    """4 warps and a pipeline whose rings fit half the SM: `.minnctapersm 2`, no
    producer warp group (128 threads), the rings and the TMA store's buffers within
    half the SM's shared memory."""
    ptx = matmul_ptx(4, stages, tiles)
    assert ".maxntid 128" in ptx and ".minnctapersm 2" in ptx
    assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor.2d.shared" in ptx
    if tiles[0] >= 64:  # (few rows: a transposed accumulator, each thread's stores)
        assert "cp.async.bulk.tensor.2d.global.shared" in ptx  # the store, by TMA
    assert shared_bytes(ptx) <= HALF_SM


@pytest.mark.parametrize("stages, tiles", [(3, (128, 128, 64)), (4, (64, 128, 64)),
                                           (4, (128, 64, 64))])
def test_ptxas_keeps_the_products_in_flight(stages, tiles) -> None:
    """A two-block kernel stores its result in several TMA slabs; waiting on the rings'
    mbarriers after them made ptxas serialize every wgmma (its note C7514): the rings
    are drained where the loop's product settles, before the epilogue."""
    ptx = matmul_ptx(4, stages, tiles)
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared") >= 4  # slabs
    after_stores = ptx[ptx.rindex("cp.async.bulk.tensor.2d.global.shared"):]
    assert "mbarrier.try_wait" not in after_stores
    report = ptxas_report(ptx, "sm_90a")
    assert report["spill_stores"] == 0 and not {"C7514", "C7515", "C7510"} & set(
        report["notes"])


@pytest.mark.parametrize("warps, stages, tiles", [
    (4, 4, (128, 128, 64)),  # 128 KB of rings: one block, with a producer
    (8, 3, (128, 256, 64)),  # two consumer warp groups
    (4, 1, (128, 128, 64)),  # no pipeline
    (4, 4, (16, 64, 128)),  # few rows computed transposed: slower on two blocks
])
def test_where_it_does_not(warps, stages, tiles) -> None:
    ptx = matmul_ptx(warps, stages, tiles)
    assert ".minnctapersm" not in ptx
    if stages > 1:  # a producer warp group past the consumers
        assert f".maxntid {warps * 32 + 128}" in ptx


def test_without_the_switch_one_block(monkeypatch) -> None:
    monkeypatch.setenv("OXIDE_TILE_TWO_BLOCKS", "0")
    ptx = matmul_ptx(4, 3, (128, 128, 64))
    assert ".minnctapersm" not in ptx and ".maxntid 256" in ptx
    assert shared_bytes(ptx) > HALF_SM  # the whole tile staged beside three stages


def test_an_occupancy_leaves_room_for_its_blocks() -> None:
    """`occupancy=2` asked: the same budget. A pipeline deeper than half the SM holds
    is made shallower, and the warning says why."""
    ptx = matmul_ptx(4, 3, (128, 128, 64), occupancy=2)
    assert ".minnctapersm 2" in ptx and 96 * 1024 < shared_bytes(ptx) <= HALF_SM
    with pytest.warns(ox.PerformanceWarning, match="97 KB .* at occupancy=2; compiled with "
                                                   "num_stages=3"):
        ptx = matmul_ptx(4, 4, (128, 128, 64), occupancy=2)
    assert shared_bytes(ptx) <= HALF_SM


def test_an_occupancy_too_high_for_the_accumulator_is_refused_at_its_line() -> None:
    """8 warps at `occupancy=2` leave a thread 128 registers, a 128 x 256 accumulator
    takes 128: ptxas would stop at "Insufficient registers" with no line of the
    kernel's; the compiler names the product and the ways out."""
    with pytest.raises(ox.KernelTypeError, match=r"128 x 256 f32 accumulator takes 128 "
                       r"registers .* `occupancy=2` leaves a thread 128") as caught:
        matmul_ptx(8, 2, (128, 256, 64), occupancy=2)
    assert caught.value.span is not None and "tile.mma" in caught.value.render()
    assert ".minnctapersm 2" in matmul_ptx(8, 2, (128, 128, 64), occupancy=2)  # 64 fit


@pytest.mark.usefixtures("hopper_on_cpu")
@pytest.mark.parametrize("case", [(4, 3, 200, 130, 136, (128, 64, 64)),
                                  (4, 4, 40, 200, 264, (16, 64, 128))],
                         ids=["128x64", "16x64"])
def test_two_blocks_against_numpy(case) -> None:
    check_matmul(case, on_cpu)


def test_the_cpu_computes_what_it_did() -> None:
    """The same kernel on the CPU as sm_90 with and without the choice: the same bits."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((130, 96)).astype(bf16.numpy)
    b = rng.standard_normal((96, 70)).astype(bf16.numpy)
    out = []
    for two in ("1", "0"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("OXIDE_TILE_CPU_HOPPER", "1")
            mp.setenv("OXIDE_TILE_TWO_BLOCKS", two)
            c = np.zeros((130, 70), bf16.numpy)
            kernel = tile_matmul.with_options(tile_options(4, None, False, num_stages=3))
            kernel[ox.tile.cdiv(130, 64), ox.tile.cdiv(70, 64)](a, b, c, 64, 64, 32)
            out.append(c.view(np.uint16).copy())
    np.testing.assert_array_equal(out[0], out[1])


@ox.tile.kernel(num_warps=4, num_stages=3)
def squares(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[ox.f32, 2],
            BM: ox.Const[int], BN: ox.Const[int], BK: ox.Const[int]):
    """A 4-warp K loop whose epilogue keeps 128 + 128 registers a thread live (the
    register budget's warning)."""
    i, j = ox.tile.bid(0), ox.tile.bid(1)
    acc = ox.tile.zeros((BM, BN), ox.f32)
    for t in range(ox.tile.num_tiles(a, 1, BK)):
        acc = ox.tile.mma(ox.tile.load(a, (i, t), (BM, BK)), ox.tile.load(b, (t, j), (BK, BN)),
                          acc)
    ox.tile.store(c, (i, j), acc * acc + acc)


@ox.tile.kernel(num_warps=4, num_stages=3)
def squares_of_a_sum(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[ox.f32, 2],
                     BM: ox.Const[int], BN: ox.Const[int], BK: ox.Const[int]):
    """`squares` with A plus one: a product whose A comes from registers (no two blocks)."""
    i, j = ox.tile.bid(0), ox.tile.bid(1)
    acc = ox.tile.zeros((BM, BN), ox.f32)
    for t in range(ox.tile.num_tiles(a, 1, BK)):
        at = (ox.tile.load(a, (i, t), (BM, BK)).astype(ox.f32) + 1.0).astype(bf16)
        acc = ox.tile.mma(at, ox.tile.load(b, (t, j), (BK, BN)), acc)
    ox.tile.store(c, (i, j), acc * acc + acc)


@pytest.mark.parametrize("kernel, two", [(squares, True), (squares_of_a_sum, False)],
                         ids=["kept", "dropped"])
def test_a_trial_warns_once_and_of_no_occupancy(kernel, two) -> None:
    """The register warning of a kernel compiled for two blocks (or tried and compiled
    for one) comes once, and names no `occupancy`: the kernel asked none, and at 4
    warps two blocks cap a thread at 255 registers as one does."""
    sig = (V(Slice[bf16, 2], vectors=True), V(Slice[bf16, 2], vectors=True),
           V(DisjointSlice[ox.f32, 2], vectors=True))
    with pytest.warns(ox.PerformanceWarning) as said:
        ptx = kernel.compile(*sig, 128, 128, 64, arch="sm_90").ptx
    spills = [str(w.message) for w in said if "registers in each" in str(w.message)]
    assert len(spills) == 1 and "occupancy" not in spills[0]
    assert (".minnctapersm 2" in ptx) is two
