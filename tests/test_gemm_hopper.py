"""examples/gemm_hopper without a GPU: the sm_90a PTX holds the recipe's instructions, the
cubin assembles (nvJitLink) with no spills and no serialized wgmma, the CPU runs the kernel
(without setmaxnreg) at small ragged sizes for each layout and option against NumPy, and
static shared arrays past 48 KiB are taken only in sm_90a kernels.

tests/test_gpu_gemm_hopper.py runs every variant on an H100/H200 against torch.
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import oxide as ox
from oxide import Const, RawSlice, f32, i32, u16, u64
from oxide.examples import gemm_hopper as g

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.ptxas_report import ptxas_report  # noqa: E402


def compiled(cfg: g.Config, arch: str = "sm_90") -> Any:
    ck = g.gemm_hopper.compile(*g.signature(cfg), arch=arch)
    assert ck.cubin and ck.arch == "sm_90a"  # wgmma and setmaxnreg pick sm_90a
    assert "llvm." not in ck.ptx  # every intrinsic resolved
    return ck


# -- the PTX and the cubin ---------------------------------------------------------------

@pytest.mark.parametrize("b_mn", [True, False], ids=["b_kxn", "b_nxk"])
def test_ptx_holds_the_recipe(b_mn: bool) -> None:
    ptx = compiled(g.replace(g.DEFAULT, b_mn=b_mn)).ptx
    mma = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n256k16\.f32\.bf16\.bf16 "
                     r"\{[^}]*\}, %rd\d+, %rd\d+, p, 1, 1, 0, (\d);", ptx)
    assert mma == ["1" if b_mn else "0"] * 4  # four k16 steps per stage; trans-b for K x N
    loads = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.tile\."
                       r"mbarrier::complete_tx::bytes \[", ptx)
    assert len(loads) == (1 + 4 if b_mn else 1 + 1)  # A, then B's 64-column slabs or one box
    for text in ("mbarrier.try_wait.parity.shared.b64", "mbarrier.arrive.expect_tx",
                 "mbarrier.init.shared.b64", "fence.mbarrier_init.release.cluster",
                 "wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned",
                 "wgmma.wait_group.sync.aligned 0", "cvt.rn.bf16.f32"):
        assert text in ptx, text
    assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+40;", ptx)
    assert re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+232;", ptx)
    assert ".maxntid 384" in ptx
    assert "call" not in ptx  # checks=False: no report calls (they serialize wgmma)
    # the ring: 4 stages of A (128 x 64) and B (256 x 64) bf16, 1024-byte aligned for TMA
    assert re.search(r"\.shared \.align 1024 \.b8 \w+\[65536\]", ptx)
    assert re.search(r"\.shared \.align 1024 \.b8 \w+\[131072\]", ptx)


def test_default_build_has_no_spills() -> None:
    report = ptxas_report(compiled(g.DEFAULT).ptx, "sm_90a")
    assert (report["spill_stores"], report["spill_loads"]) == (0, 0), report["log"]
    assert 0 < report["registers"] <= 168, report["log"]  # 384 threads in 64K registers
    assert report["smem"] >= 4 * 48 * 1024
    assert "C7509" not in report["notes"] and "C7510" not in report["notes"]  # serialized
    assert "serialized" not in report["log"]


@pytest.mark.parametrize("cfg", [
    g.replace(g.DEFAULT, consumers=1, bn=128, stages=3),
    g.replace(g.DEFAULT, setmaxnreg=False, b_mn=False),
    g.replace(g.DEFAULT, bn=192, stages=3),
], ids=lambda c: c.label().replace(" ", "-"))
def test_other_variants_assemble(cfg: g.Config) -> None:
    ck = compiled(cfg)
    report = ptxas_report(ck.ptx, ck.arch)
    assert report["spill_stores"] == 0, report["log"]
    assert f"m64n{cfg.bn}k16" in ck.ptx
    assert ("setmaxnreg" in ck.ptx) == cfg.setmaxnreg


def test_tma_store_epilogue() -> None:
    """The epilogue through shared memory: 128 bf16 stores (some paired) at a base plus a
    constant each, two named barriers per consumer group, a TMA store per 64 x 64 slab,
    bulk-group waits; no spills."""
    cfg = g.replace(g.DEFAULT, tma_store=True, stages=3)
    ck = compiled(cfg)
    ptx = ck.ptx
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.tile\."
                          r"bulk_group", ptx)) == 4
    assert len(re.findall(r"barrier\.sync\s+%r\d+, 128;", ptx)) == 2
    stores = re.findall(r"st\.shared\.(v2\.b16|b16)\s+\[(%rd\d+)", ptx)
    assert sum(2 if kind == "v2.b16" else 1 for kind, _ in stores) == 128
    assert len({base for _, base in stores}) <= 16  # 8 chunks x 2 (not one register each)
    assert "st.global" not in ptx
    for text in ("cp.async.bulk.commit_group", "cp.async.bulk.wait_group.read"):
        assert text in ptx, text
    assert re.search(r"cp\.async\.bulk\.wait_group\s+0;", ptx)
    report = ptxas_report(ptx, ck.arch)
    assert report["spill_stores"] == 0, report["log"]
    assert cfg.shared_bytes <= 227 * 1024 <= g.replace(cfg, stages=4).shared_bytes
    with pytest.raises(ox.TargetError, match="named_barrier_sync.*runs only on NVIDIA GPUs"):
        g.gemm_hopper.compile(*g.signature(g.replace(cfg, setmaxnreg=False)), target="cpu")


@pytest.mark.parametrize("b_mn", [True, False], ids=["b_kxn", "b_nxk"])
def test_cluster_variant(b_mn: bool) -> None:
    """2 x 1 clusters: block rank 0 multicasts B into both blocks, each consumer group
    releases a stage in both (mapa + remote arrive), the cluster barrier brackets the
    kernel; still no spills and no serialized wgmma (no report calls either)."""
    cfg = g.replace(g.DEFAULT, cluster=2, b_mn=b_mn)
    ck = compiled(cfg)
    multicast = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.tile\."
                           r"mbarrier::complete_tx::bytes\.multicast::cluster", ck.ptx)
    assert len(multicast) == (4 if b_mn else 1)
    assert ck.ptx.count("mapa.shared::cluster.u32") == 2 * (cfg.stages + 1)  # unrolled pre-arrivals
    assert ck.ptx.count("barrier.cluster.arrive") >= 2 and "%cluster_ctarank" in ck.ptx
    assert "call" not in ck.ptx
    report = ptxas_report(ck.ptx, ck.arch)
    assert report["spill_stores"] == 0 and "C7509" not in report["notes"], report["log"]
    lc = g.launch_config(1000, 1500, cfg, sms=132)
    assert lc.cluster == (2, 1, 1) and lc.grid[0] == 2 * 4 * 6  # 8 x 6 tiles in 4 x 6 pairs
    assert g.launch_config(8192, 8192, cfg, sms=133).grid[0] == 132  # whole clusters
    assert g.launch_config(8192, 8192, g.replace(cfg, blocks=128), sms=132).grid[0] == 128
    with pytest.raises(ox.TargetError, match="runs only on NVIDIA GPUs"):
        g.gemm_hopper.compile(*g.signature(g.replace(cfg, setmaxnreg=False)), target="cpu")


def test_sm80_is_a_target_error() -> None:
    with pytest.raises(ox.TargetError, match="needs sm_90"):
        g.gemm_hopper.compile(*g.signature(g.DEFAULT), arch="sm_80")
    assert "no cubin for sm_80" in g.check_arch("sm_80")
    assert g.check_arch("sm_90").startswith("cubin for sm_90a")


def test_setmaxnreg_is_a_target_error_on_the_cpu() -> None:
    """Why the CPU runs the variant without it (the example says so)."""
    with pytest.raises(ox.TargetError, match="setmaxnreg.*runs only on NVIDIA GPUs"):
        g.gemm_hopper.compile(*g.signature(g.DEFAULT), target="cpu")
    result = g.main(device="cpu", size=40)
    assert result.passed, str(result)
    assert "without setmaxnreg" in result.detail and "needs an sm_90 GPU" in result.detail


# -- the CPU runs it ----------------------------------------------------------------------

CPU_CASES = [
    (g.CPU, (136, 200, 95)),
    (g.replace(g.CPU, b_mn=False), (136, 200, 95)),
    (g.replace(g.CPU, consumers=1, bn=64, stages=1), (70, 130, 129)),
    (g.replace(g.CPU, bn=256, stages=3, group_m=1), (129, 300, 64)),
    (g.replace(g.CPU, persistent=False, b_mn=False, bn=192), (150, 330, 200)),
    (g.replace(g.CPU, consumers=1, stages=4, group_m=3), (200, 140, 8)),
]


@pytest.mark.parametrize("cfg, size", CPU_CASES,
                         ids=[f"{c.label().replace(' ', '-')}-{m}x{n}x{k}"
                              for c, (m, n, k) in CPU_CASES])
def test_cpu_matches_numpy(cfg: g.Config, size: tuple[int, int, int]) -> None:
    m, n, k = size
    with ox.device("cpu"):
        passed, _ = g.check("cpu", m, n, k, cfg, seed=m + n + k, repeats=1)
    assert passed


def test_cpu_result_is_exact_for_small_integers() -> None:
    """With values bf16 holds exactly and sums f32 and bf16 hold exactly, every element
    must match: a wrong tile, stage, phase or edge would show."""
    import ml_dtypes

    m, n, k = 130, 150, 136
    rng = np.random.default_rng(5)
    a = rng.integers(-2, 3, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-2, 3, (k, n)).astype(ml_dtypes.bfloat16)
    c = np.full((m, n), np.nan, ml_dtypes.bfloat16)
    with ox.device("cpu"):
        g.matmul(g.padded(a), g.padded(b), c, m, n, k, g.CPU, sms=3)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_array_equal(c.astype(np.float32), want)


def test_the_example_passes_on_the_cpu() -> None:
    result = g.main(device="cpu")
    assert result.passed, str(result)
    assert "gemm_hopper" in str(result) and "CPU" in result.device


# -- static shared memory past 48 KiB -----------------------------------------------------

@ox.kernel
def plain_big(out: RawSlice[f32]):
    s = ox.shared.array(f32, (128, 128))  # 64 KiB
    with ox.unsafe():
        s[0, 0] = 1.0
        out[0] = s[0, 0]


@ox.kernel
def big_shared_sm90a(out: RawSlice[f32]):
    """96 KiB of static shared memory in a kernel for sm_90a (wgmma_fence makes it one):
    each thread writes one column of every row, then reads back its neighbour's."""
    s = ox.shared.array(f32, (192, 128))
    t = ox.thread_idx.x
    ox.wgmma_fence()
    with ox.unsafe():
        for r in range(192):
            s[r, t] = f32(r * 128 + t)
        ox.sync_threads()
        acc = 0.0
        for r in range(192):
            acc += s[r, (t + 1) % 128]
        out[t] = acc


def big_shared_want() -> np.ndarray:
    t = np.arange(128)
    return np.array([sum(r * 128 + (x + 1) % 128 for r in range(192)) for x in t], np.float32)


def test_big_static_shared_in_an_sm90a_kernel() -> None:
    ck = big_shared_sm90a.compile(RawSlice[f32], arch="sm_90")
    assert ck.arch == "sm_90a" and ck.cubin
    assert re.search(r"\.shared \.align \d+ \.b8 \w+\[98304\]", ck.ptx)
    out = np.zeros(128, np.float32)
    with ox.device("cpu"):
        ox.launch(big_shared_sm90a, (1, 128), out)
    np.testing.assert_array_equal(out, big_shared_want())


def test_big_static_shared_makes_an_sm90a_kernel() -> None:
    """Past 48 KiB of static shared memory a kernel compiles for sm_90a when asked for
    sm_90 (227 KiB there); other targets keep the 48 KiB error at the array."""
    ck = plain_big.compile(RawSlice[f32], arch="sm_90")
    assert ck.arch == "sm_90a" and re.search(r"\.shared \.align \d+ \.b8 \w+\[65536\]", ck.ptx)
    with pytest.raises(ox.KernelTypeError, match=r"may use at most 48 KiB per block \(227 KiB "
                                                 r"on sm_90, where the kernel is compiled for "
                                                 r"sm_90a") as info:
        plain_big.compile(RawSlice[f32], arch="sm_80")
    assert info.value.span is not None and "128, 128" in info.value.span.text


# -- ox.mbarrier.arrive_cluster (the cluster variant's remote release) ----------------------

@ox.kernel
def arrive_on_peer(out: RawSlice[i32]):
    """Two threads of each block arrive on the other block's barrier (count 2), so each
    block's phase completes only through its peer's arrivals."""
    bars = ox.shared.array(u64, 1)
    t = ox.thread_idx.x
    with ox.unsafe():
        if t == 0:
            ox.mbarrier.init(bars[0], 2)
            ox.fence_mbarrier_init()
    ox.cluster.sync()
    if t < 2:
        ox.mbarrier.arrive_cluster(bars[0], ox.cluster.rank() ^ (ox.cluster.size() - 1))
    ox.mbarrier.wait_parity(bars[0], 0)
    if t == 0:
        with ox.unsafe():
            out[ox.block_idx.x] = 1
    ox.cluster.sync()


@ox.kernel
def arrive_on_rank0(out: RawSlice[i32], CTA: Const[bool]):
    bars = ox.shared.array(u64, 1)
    t = ox.thread_idx.x
    with ox.unsafe():
        if t == 0:
            ox.mbarrier.init(bars[0], 32)
    ox.sync_threads()
    if CTA:
        ox.mbarrier.arrive_cluster(bars[0], 0, scope="cta")
    else:
        ox.mbarrier.arrive_cluster(bars[0], 0)
    ox.sync_threads()  # all 32 arrived
    done = ox.mbarrier.try_wait_parity(bars[0], 0)
    with ox.unsafe():
        out[t] = i32(done)


def test_arrive_cluster_ptx() -> None:
    ck = arrive_on_peer.compile(RawSlice[i32], arch="sm_90")
    assert ck.cubin and ck.arch == "sm_90"
    assert re.search(r"mapa\.shared::cluster\.u32 ra, %r\d+, %r\d+; mbarrier\.arrive\.release"
                     r"\.cluster\.shared::cluster\.b64 _, \[ra\];", ck.ptx)
    with pytest.raises(ox.TargetError, match=r"ox.mbarrier.arrive_cluster\(\)` needs sm_90"):
        arrive_on_rank0.compile(RawSlice[i32], False, arch="sm_80")


def test_arrive_cluster_at_cta_scope_has_no_cluster_release() -> None:
    """scope="cta" is the arrive without `.release.cluster`, which ptxas precedes by a
    GPU-wide fence; on the CPU it is the same local arrive."""
    ck = arrive_on_rank0.compile(RawSlice[i32], True, arch="sm_90")
    assert re.search(r"mapa\.shared::cluster\.u32 ra, %r\d+, %r\d+; "
                     r"mbarrier\.arrive\.shared::cluster\.b64 _, \[ra\];", ck.ptx)
    assert ".release.cluster" not in ck.ptx.split("mbarrier.init")[-1]
    out = np.zeros(32, np.int32)
    with ox.device("cpu"):
        ox.launch(arrive_on_rank0, (1, 32), out, True)
    np.testing.assert_array_equal(out, np.ones(32, np.int32))


def test_arrive_cluster_scope_is_checked() -> None:
    @ox.kernel
    def bad_scope(out: RawSlice[i32]):
        bars = ox.shared.array(u64, 1)
        ox.mbarrier.arrive_cluster(bars[0], 0, scope="gpu")

    with pytest.raises(ox.KernelTypeError, match=r'scope= of ox.mbarrier.arrive_cluster\(\) is '
                                                 r'the string "cluster" or "cta"'):
        bad_scope.compile(RawSlice[i32], arch="sm_90")


def test_arrive_cluster_on_the_cpu_is_a_local_arrive() -> None:
    """A CPU launch's clusters have one block, rank 0: 32 arrivals complete phase 0."""
    out = np.zeros(32, np.int32)
    with ox.device("cpu"):
        ox.launch(arrive_on_rank0, (1, 32), out, False)
    np.testing.assert_array_equal(out, np.ones(32, np.int32))


# -- the TMA-store epilogue's shared layout (the CPU cannot run that variant: it orders each
# consumer group with a named barrier) ---------------------------------------------------

@ox.kernel
def epilogue_layout(cm: ox.TensorMap[u16, 2], G: Const[int]):
    """One consumer group's 64 x 64G tile, each element (row, col) = 256 row + col, written
    from the wgmma accumulator layout into 128-byte-swizzled 64 x 64 slabs with exactly
    gemm_hopper's index expression, then TMA-stored slab by slab."""
    sc = ox.shared.array(u16, 64 * 64 * G)
    t = ox.thread_idx.x
    lane = t & 31
    swz_row = (16 * (ox.warp_id() & 3) + (lane >> 2)) * 64
    row_in_tile = 16 * (ox.warp_id() & 3) + (lane >> 2)
    col_in_tile = 2 * (lane & 3)
    with ox.unsafe():
        for g in range(G):
            for e in range(32):
                row = row_in_tile + 8 * ((e // 2) % 2)
                col = 64 * g + 8 * (e // 4) + col_in_tile + e % 2
                sc[swz_row + ((e // 4) ^ (lane >> 2)) * 8 + col_in_tile
                   + g * 4096 + ((e // 2) % 2) * 512 + e % 2] = u16(256 * row + col)
        ox.sync_threads()
        if t == 0:
            for g in range(G):
                ox.tma.store(cm, sc[g * 4096], 0, 64 * g)
            ox.tma.commit_group()
            ox.tma.wait_group(0)


@pytest.mark.parametrize("groups", [1, 4])
def test_tma_store_epilogue_layout_on_the_cpu(groups: int) -> None:
    c = np.zeros((64, 64 * groups), np.uint16)
    with ox.device("cpu"):
        ox.launch(epilogue_layout, (1, 128), ox.TensorMap(c, (64, 64), swizzle=128), groups)
    rows, cols = np.indices(c.shape)
    np.testing.assert_array_equal(c, (256 * rows + cols).astype(np.uint16))
    src = inspect.getsource(g.gemm_hopper.fn)
    # the test mirrors the example's expression: keep the two in step
    assert "swz_row + ((e // 4) ^ (lane >> 2)) * 8 + col_in_tile" in src
    assert "+ (cw * G + g) * 4096 + ((e // 2) % 2) * 512 + e % 2] = bf16(" in src
