"""Issue 27: tensor-core and warp-group instructions need whole warps (and warp groups).

`ox.mma_sync`, `ox.ldmatrix`, `ox.stmatrix` and `ox.elect_sync` are executed by a warp's
32 lanes together, `ox.wgmma` and `ox.setmaxnreg` by a warp group's 128 threads; in a
block of 16 threads the warp is partial and the instruction undefined. A kernel that
declares its block is refused at compile time (passes/whole_warps.py); one that does not
records a launch rule (runtime/witness_rules.py), and a launch whose block's thread count
is not a multiple of the group is an `ox.LaunchError` before anything runs, on the CPU
and (through the fake driver here, tests/test_gpu_robustness.py on a real one) the GPU.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from fake_cuda import FakeDriver, use_launch_flavor

import oxide as ox
from oxide import RawSlice, Slice, f32, u32
from oxide.runtime.witness_rules import WHOLE_WARP_GROUPS, WHOLE_WARPS, check_witness_config


@ox.kernel
def mma_any_block(a: Slice[u32], out: RawSlice[f32]):
    lane = ox.lane_id()
    d = ox.mma_sync((a[0], a[1], a[2], a[3]), (a[4], a[5]), (0.0, 0.0, 0.0, 0.0))
    with ox.unsafe():
        out[ox.thread_idx.x + ox.thread_idx.y * ox.block_dim.x] = d[0] + f32(lane * 0)


@ox.kernel(max_threads=256)
def setmaxnreg_any_block(out: RawSlice[u32]):
    with ox.unsafe():
        ox.setmaxnreg(232)
        out[ox.thread_idx.x] = u32(1)


def test_a_declared_block_of_16_threads_is_refused_at_compile_time() -> None:
    @ox.kernel(block=16)
    def k(a: Slice[u32], out: RawSlice[f32]):
        d = ox.mma_sync((a[0], a[1], a[2], a[3]), (a[4], a[5]), (0.0, 0.0, 0.0, 0.0))
        with ox.unsafe():
            out[ox.thread_idx.x] = d[0]

    for arch in ("sm_90", "cpu"):
        with pytest.raises(ox.SafetyError, match="`ox.mma_sync` is executed by the 32 "
                           "threads of a warp together.*block=16 has 16 threads") as info:
            if arch == "cpu":
                k.compile(Slice[u32], RawSlice[f32], target="cpu")
            else:
                k.compile(Slice[u32], RawSlice[f32], arch=arch)
        assert info.value.span is not None and "ox.mma_sync(" in info.value.span.text
        assert "block=32" in info.value.hint


def test_whole_warps_in_a_declared_block_compile() -> None:
    @ox.kernel(block=(16, 2))
    def k(a: Slice[u32], out: RawSlice[f32]):
        d = ox.mma_sync((a[0], a[1], a[2], a[3]), (a[4], a[5]), (0.0, 0.0, 0.0, 0.0))
        with ox.unsafe():
            out[ox.thread_idx.x] = d[0]

    ck = k.compile(Slice[u32], RawSlice[f32], arch="sm_90")
    assert not {WHOLE_WARPS, WHOLE_WARP_GROUPS} & set(ck.thread_index_ranks)


def test_warp_group_instructions_need_128_threads_in_a_declared_block() -> None:
    @ox.kernel(block=64)
    def k(out: RawSlice[u32]):
        with ox.unsafe():
            ox.setmaxnreg(232)
            if ox.elect_sync():
                out[ox.thread_idx.x] = u32(1)

    with pytest.raises(ox.SafetyError, match="`ox.setmaxnreg`.*warp group.*64 threads"):
        k.compile(RawSlice[u32], arch="sm_90")


def test_undeclared_blocks_record_the_launch_rule() -> None:
    ck = mma_any_block.compile(Slice[u32], RawSlice[f32], arch="sm_90")
    assert WHOLE_WARPS in ck.thread_index_ranks
    ck = setmaxnreg_any_block.compile(RawSlice[u32], arch="sm_90")
    assert WHOLE_WARP_GROUPS in ck.thread_index_ranks
    for ok in (128, 256, (64, 2), (32, 2, 2)):
        check_witness_config("k", (WHOLE_WARP_GROUPS,), ox.LaunchConfig(1, ok))
    for bad in (32, 96, 160, (64, 1, 1)):
        with pytest.raises(ox.LaunchError, match="warp group is partial.*multiple of 128"):
            check_witness_config("k", (WHOLE_WARP_GROUPS,), ox.LaunchConfig(1, bad))


@pytest.mark.parametrize("block", [16, 48, (8, 2), (4, 4, 3)])
def test_a_partial_warp_launch_is_refused_on_the_cpu(block: object) -> None:
    a = np.zeros(8, np.uint32)
    out = np.full(64, 5.0, np.float32)
    with ox.device("cpu"), pytest.raises(ox.LaunchError, match="ox.mma_sync.*last warp is "
                                                               "partial"):
        mma_any_block[1, block](a, out)
    assert (out == 5.0).all()  # nothing ran


@pytest.mark.parametrize("block", [32, (16, 2), 64])
def test_whole_warp_launches_run_on_the_cpu(block: object) -> None:
    a = np.zeros(8, np.uint32)
    out = np.full(64, 5.0, np.float32)
    with ox.device("cpu"):
        mma_any_block[1, block](a, out)
    cfg = ox.LaunchConfig(1, block)
    assert (out[:cfg.threads_per_block] == 0.0).all()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[FakeDriver]:
    driver = FakeDriver()
    driver.install(monkeypatch)
    use_launch_flavor(monkeypatch, "native")
    monkeypatch.setenv("OXIDE_CACHE_DIR", str(tmp_path / "cache"))
    mma_any_block.__dict__.pop("_oxide_launchers", None)
    with ox.device(0):
        yield driver


def test_a_partial_warp_launch_is_refused_on_the_gpu_side(fake: FakeDriver) -> None:
    a, out = ox.zeros(8, ox.u32), ox.zeros(64)
    fake.formats = "QqQq"
    mma_any_block[1, 32](a, out)
    with pytest.raises(ox.LaunchError, match="last warp is partial"):
        mma_any_block[1, 16](a, out)
    with pytest.raises(ox.LaunchError, match="last warp is partial"):
        mma_any_block[1, (8, 2)](a, out)
    mma_any_block[1, (16, 2)](a, out)
    assert [launch["block"] for launch in fake.launches] == [(32, 1, 1), (16, 2, 1)]
