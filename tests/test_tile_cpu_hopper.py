"""OXIDE_TILE_CPU_HOPPER=1: tile kernels compiled for the CPU as sm_90 compiles them (wgmma
products, TMA rings filled by a producer warp group, TMA-store epilogues), run on the
CPU's meaning of those instructions against NumPy. The protocol between the producer and
the consumers (mbarrier phases, releases, the persistent loop's restarts) runs here as
the GPU runs it: a deadlock there is one here (a thread waiting on a phase nothing
completes never ends, codegen/hopper_cpu.py). What the CPU cannot show is timing: its
copies land at once and its threads take turns, so a missing wait on an async copy
passes here."""

from __future__ import annotations

import numpy as np
import pytest
from test_gpu_tile_producer import _close, check_three_axes, make_gemm, make_persistent, three_axes
from test_gpu_tile_rings import make_linear_t
from test_tile_producer import two_loops
from test_tile_tma_rings import V
from test_tile_tma_stores import _sig
from tile_gemm_cases import check, draw

import oxide as ox
from oxide import AtomicSlice, Const, DisjointSlice, Slice, bf16, f8e4m3, f32, i32, tile
from oxide.codegen.abi import OperandMap
from oxide.codegen.persistent_grid import is_persistent
from oxide.codegen.warp_roles import PRODUCER_THREADS, extra_threads, marker_symbol

rng = np.random.default_rng(41)


@pytest.fixture(autouse=True)
def hopper_on_cpu(monkeypatch):
    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", "1")


def _inputs(m: int, n: int, k: int, out):
    a = rng.standard_normal((m, k)).astype(bf16.numpy)
    b = rng.standard_normal((k, n)).astype(bf16.numpy)
    return a, b, np.full((m, n), 7, out.numpy), a.astype(np.float64) @ b.astype(np.float64)


def test_the_cpu_compiles_the_producer_and_the_rings(monkeypatch) -> None:
    monkeypatch.setenv("OXIDE_TILE_TWO_BLOCKS", "0")  # (else 4 warps take two blocks)
    ck = make_gemm(f32, 4, 3).compile(*_sig(f32), 64, 64, 32, target="cpu")
    code = ck.llvm_unoptimized
    assert marker_symbol(ck.name) in code and "oxide_map" in code
    # the CPU launcher reads the marker from the object code, as the GPU's from the cubin
    assert extra_threads(ck.name, ck.host_object[0]) == PRODUCER_THREADS


@pytest.mark.parametrize("producer", ["1", "0", "cp.async"])
@pytest.mark.parametrize("out, warps, stages, m, n, k, tiles", [
    (f32, 4, 3, 130, 200, 96, (64, 64, 32)),   # ragged, three k steps, the f32 out by TMA
    (bf16, 8, 3, 260, 264, 200, (128, 128, 64)),  # two consumer warp groups
    (bf16, 4, 2, 64, 72, 16, (64, 64, 16)),    # one k step: the prologue alone
    (f32, 4, 4, 130, 72, 32, (64, 64, 16)),    # two k steps of four stages: a fill not made
    (bf16, 4, 8, 70, 136, 328, (64, 64, 16)),  # eight stages: the ring wraps twice, ragged k
    (f32, 8, 6, 130, 72, 100, (128, 64, 32)),  # six stages, four k steps: fills not made
])
def test_k_loops_against_numpy(out, warps, stages, m, n, k, tiles, producer,
                               monkeypatch) -> None:
    if producer == "cp.async":  # every thread's copies into the rings (made at once here)
        monkeypatch.setenv("OXIDE_TILE_TMA", "0")
    else:  # ("1": a producer on 4 warps too; "0": thread 0 issues, 4 warps on two blocks)
        monkeypatch.setenv("OXIDE_TILE_PRODUCER", producer)
        monkeypatch.setenv("OXIDE_TILE_TWO_BLOCKS", "0" if producer == "1" else "1")
    a, b, c, want = _inputs(m, n, k, out)
    bm, bn, _ = tiles
    make_gemm(out, warps, stages)[tile.cdiv(m, bm), tile.cdiv(n, bn)](a, b, c, *tiles)
    _close(c, want, out, k)


@pytest.mark.parametrize("out, whole_block, slabs", [(bf16, False, 4), (f32, False, 8),
                                                     (f32, True, 4)])
def test_a_slab_ring_epilogue_against_numpy(monkeypatch, out, whole_block, slabs) -> None:
    """Three stages of 128 x 128 x 128 rings leave 33 KB of the block's 227: a bf16 tile
    fits whole, an f32 one goes out in slabs of 32 columns through two buffers
    (tile/tma_stores.py `SlabPlan`), ragged at both edges. Within the rings' own budget
    (19 KB, what a kernel with other shared arrays gets), bf16 in slabs of 32 columns
    and f32 of 16."""
    from test_tile_tma_stores import STORE

    from oxide.frontend.parallel_calls import SM90A_STATIC_SHARED_BYTES
    from oxide.tile import tma_stores
    from oxide.tile.operand_rings import RING_BYTES

    if not whole_block:  # (and not the disk cache's kernel of the whole block's plan)
        monkeypatch.setenv("OXIDE_CACHE", "0")
        monkeypatch.setattr(tma_stores, "BARRIER_BYTES",
                            SM90A_STATIC_SHARED_BYTES - RING_BYTES)
    gemm = make_gemm(out, 8, 3)
    ptx = gemm.compile(*_sig(out), 128, 128, 128, arch="sm_90").ptx
    assert ptx.count(STORE) == slabs
    assert "cp.async.bulk.wait_group.read \t1" in ptx
    a, b, c, want = _inputs(200, 264, 136, out)
    gemm[tile.cdiv(200, 128), tile.cdiv(264, 128)](a, b, c, 128, 128, 128)
    _close(c, want, out, 136)


def test_a_slab_ring_in_a_persistent_loop() -> None:
    """Two blocks walk six tiles: each tile's store starts with the last one's copies
    complete and reuses the two slab buffers."""
    from test_tile_tma_stores import STORE

    persistent = make_persistent(f32, 8, 3)
    ptx = persistent.compile(*_sig(f32), 128, 128, 128, arch="sm_90").ptx
    assert ptx.count(STORE) == 4 and "cp.async.bulk.wait_group.read \t1" in ptx
    a, b, c, want = _inputs(300, 264, 136, f32)
    persistent[2](a, b, c, 128, 128, 128)
    _close(c, 0.5 * want, f32, 136)


@pytest.mark.parametrize("warps, stages, tiles, k", [
    (4, 2, (64, 64, 32), 160), (4, 3, (64, 64, 32), 160), (8, 3, (128, 128, 64), 160),
    (4, 4, (64, 64, 32), 32), (8, 3, (128, 128, 64), 64),  # one k step per tile
    (4, 8, (64, 64, 16), 200)])  # eight stages: a ring of 8 buffers restarted
def test_a_persistent_loop_restarts_its_rings(warps, stages, tiles, k) -> None:
    # 3 blocks walk the tiles: each K loop starts again with its buffers as the last tile
    # left them; a loop shorter than the pipeline makes none of the fills past its end
    a, b, c, want = _inputs(200, 136, k, f32)
    make_persistent(f32, warps, stages)[3](a, b, c, *tiles)
    _close(c, 0.5 * want, f32, k)


def test_branches_returns_and_two_loops() -> None:
    m, n, k, first = 150, 104, 200, 2  # rows of whole 16-byte vectors: rings for both
    a, b, c, want = _inputs(m, n, k, f32)
    c[...] = 0
    two_loops[tile.cdiv(m, 128) + 1, tile.cdiv(n, 64)](a, b, c, np.int32(first), 128, 64, 64)
    _close(c, want, f32, k)


@tile.kernel(num_warps=4, num_stages=3)
def linear_bias_gelu(x: Slice[bf16, 2], w: Slice[bf16, 2], bias: Slice[bf16],
                     y: DisjointSlice[bf16, 2], BM: Const[int], BN: Const[int],
                     BK: Const[int]):
    """An epilogue as users write one: a bias row, tanh-GELU, a cast, stored by TMA."""
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(x, 1, BK)):
        acc = tile.mma(tile.load(x, (i, k), (BM, BK)), tile.load(w, (k, j), (BK, BN)), acc)
    z = acc + tile.load(bias, (j,), (BN,)).astype(f32)[None, :]
    c = 0.7978845608028654
    tile.store(y, (i, j), (0.5 * z * (1.0 + tile.tanh(c * (z + 0.044715 * z * z * z))))
               .astype(bf16))


def test_a_fused_epilogue_goes_out_by_tma() -> None:
    sig = (*_sig(bf16)[:2], V(Slice[bf16], vectors=True), _sig(bf16)[2])
    maps = linear_bias_gelu.compile(*sig, 64, 64, 32, target="cpu").operand_maps
    assert sorted(m.param for m in maps) == [0, 1, 3]  # x's and w's rings, y's stores
    m, n, k = 130, 136, 96
    x, w, _, z = _inputs(m, n, k, bf16)
    bias = rng.standard_normal(n).astype(bf16.numpy)
    y = np.zeros((m, n), bf16.numpy)
    linear_bias_gelu[tile.cdiv(m, 64), tile.cdiv(n, 64)](x, w, bias, y, 64, 64, 32)
    z = z + bias.astype(np.float64)
    want = 0.5 * z * (1 + np.tanh(0.7978845608028654 * (z + 0.044715 * z ** 3)))
    # one bf16 rounding of the result (8 bits), tanh to a few f32 ulps
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=2.0 ** -7, atol=2e-2)


@pytest.mark.parametrize("persistent, m, depth", [("1", 200, 3), ("0", 200, 3),
                                                  ("1", 1300, 2),  # 11 x-rows: 8, then 3
                                                  # 27 blocks: by two, the last round runs
                                                  # backwards and one block has none
                                                  ("1", 300, 3)])
def test_the_logical_grid_is_walked_by_fewer_blocks(persistent, m, depth,
                                                    monkeypatch) -> None:
    # a producer warp group: the kernel walks its logical grid (tile/persistent_schedule.py),
    # its bids and num_blocks those of the logical block; OXIDE_TILE_PERSISTENT=0 turns it off
    monkeypatch.setenv("OXIDE_TILE_PERSISTENT", persistent)
    sig = (*_sig(f32)[:2], V(DisjointSlice[f32, 3], vectors=True),
           V(DisjointSlice[i32, 3], vectors=True))
    ck = three_axes.compile(*sig, 128, 64, 32, target="cpu")
    assert is_persistent(ck.name, ck.host_object[0]) == (persistent == "1")
    check_three_axes(lambda grid, *args: three_axes[grid](*args), m, 136, 64, depth)


def test_a_kernel_that_walks_its_tiles_itself_is_not_walked_again() -> None:
    # `for t in tile.tiles(n)`: the kernel chose its own schedule, which stays as written
    ck = make_persistent(f32, 8, 3).compile(*_sig(f32), 128, 64, 32, target="cpu")
    assert not is_persistent(ck.name, ck.host_object[0])
    ck = make_gemm(f32, 4, 3).compile(*_sig(f32), 64, 64, 32, target="cpu")
    assert not is_persistent(ck.name, ck.host_object[0])  # one consumer warp group
    ck = make_gemm(f32, 8, 3).compile(*_sig(f32), 128, 64, 32, target="cpu")
    assert is_persistent(ck.name, ck.host_object[0])


@pytest.mark.parametrize("seed", range(6))
def test_drawn_gemms_with_epilogues(seed) -> None:
    # tests/tile_gemm_cases.py: tiles, warps, stages, dtypes, epilogue and ragged sizes from
    # the seed (small here; tests/test_gpu_tile_gemm_cases.py draws more, and larger)
    check(draw(seed, big=False), lambda kernel, grid, *args: kernel[grid](*args))


@tile.kernel(num_warps=4)
def fp8_staged(a: Slice[f32, 2], b: Slice[f32, 2], out: DisjointSlice[f32, 2],
               BM: Const[int], BK: Const[int]):
    """fp8 operands computed in registers (staged by the threads: A K-major, B's transpose
    element by element, as 8-bit wgmma reads only K-major operands)."""
    sa = tile.load(a, (0, 0), (BM, BK)).astype(f8e4m3)
    sb = tile.load(b, (0, 0), (BM, BK)).astype(f8e4m3).permute((1, 0))
    tile.store(out, (0, 0), tile.mma(sa, sb, tile.zeros((BM, BM), f32)))


@pytest.mark.parametrize("bk", [32, 64])
def test_fp8_wgmma_of_staged_operands(bk) -> None:
    """The CPU's meaning of an 8-bit wgmma: 32 one-byte elements of each row a step (it
    read them as 16 halves; tile fuzz seed 98, program 44)."""
    a, b = (rng.integers(-6, 7, (64, bk)).astype(np.float32) for _ in range(2))
    out = np.zeros((64, 64), np.float32)
    ck = fp8_staged.compile(Slice[f32, 2], Slice[f32, 2], DisjointSlice[f32, 2], 64, bk,
                            arch="sm_90")
    assert "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3" in ck.ptx
    fp8_staged[1](a, b, out, 64, bk)
    np.testing.assert_array_equal(out, a @ b.T)  # small integers: exact in fp8 and f32


@pytest.mark.parametrize("bn, bk", [(64, 64), (16, 128)])
def test_the_fp8_gemm_example_on_rings(bn, bk) -> None:
    """tile_fp8_gemm's kernel at GPU tiles: fp8 operands by TMA, K-major, 32 a step; and
    in narrow column tiles (wgmma m64n16k32)."""
    from oxide.examples import tile_fp8_gemm as fg

    m, n, k = 130, 200, 160
    if bn < 64:
        sig = (V(Slice[f8e4m3, 2], vectors=True),) * 2 + (f32,) + _sig(bf16)[2:]
        ptx = fg.fp8_linear.compile(*sig, 128, bn, bk, arch="sm_90").ptx
        assert f"wgmma.mma_async.sync.aligned.m64n{bn}k32.f32.e4m3.e4m3" in ptx
    xq, wq = (rng.integers(-6, 7, (r, k)).astype(np.float32).astype(f8e4m3.numpy)
              for r in (m, n))
    y = np.zeros((m, n), bf16.numpy)
    ox.launch(fg.fp8_linear, tile.cdiv(m, 128) * tile.cdiv(n, bn), xq, wq, np.float32(0.5),
              y, 128, bn, bk, device="cpu")
    want = (xq.astype(np.float64) @ wq.astype(np.float64).T * 0.5).astype(bf16.numpy)
    np.testing.assert_array_equal(y.astype(np.float32), want.astype(np.float32))


@tile.kernel(num_warps=8, num_stages=3)
def split_k(a: Slice[bf16, 2], b: Slice[bf16, 2], c: AtomicSlice[f32, 2], BM: Const[int],
            BN: Const[int], BK: Const[int], STEPS: Const[int]):
    """Split K as users write it: the K index through a name, the partial tiles summed by
    relaxed f32 atomics."""
    i, j, s = tile.bid(0), tile.bid(1), tile.bid(2)
    acc = tile.zeros((BM, BN), f32)
    for kk in range(STEPS):
        k = s * STEPS + kk
        acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)), acc)
    tile.atomic_add(c, (i, j), acc, sem="relaxed")


def test_a_split_k_loop_fills_its_rings_and_adds_its_tiles() -> None:
    """`k = s * STEPS + kk` then loads at k: the loads still fill TMA rings from a producer
    warp group, the kernel walks its grid, and the tiles' atomic adds (inside the arrays
    and at their ragged edges) sum to the product."""
    sig = (*_sig(f32)[:2], AtomicSlice[f32, 2])
    ck = split_k.compile(*sig, 128, 64, 32, 2, target="cpu")
    assert marker_symbol(ck.name) in ck.llvm_unoptimized and "oxide_map" in ck.llvm_unoptimized
    assert is_persistent(ck.name, ck.host_object[0])
    m, n, splits, steps = 200, 136, 3, 2
    k = 32 * steps * splits - 8  # the last split's last step runs past K: zeros
    a = (rng.integers(-4, 5, (m, k)) * 0.25).astype(bf16.numpy)  # sums exact in f32
    b = (rng.integers(-4, 5, (k, n)) * 0.25).astype(bf16.numpy)
    c = np.full((m, n), 3.0, np.float32)
    split_k[tile.cdiv(m, 128), tile.cdiv(n, 64), splits](a, b, c, 128, 64, 32, steps)
    np.testing.assert_array_equal(c, 3.0 + a.astype(np.float32) @ b.astype(np.float32))


@tile.kernel(num_warps=8, num_stages=3)
def heads_split_k(a: Slice[bf16, 3], b: Slice[bf16, 2], c: AtomicSlice[f32, 3],
                  BM: Const[int], BN: Const[int], BK: Const[int]):
    """Per head h, `a[h] @ b` with K split in two (grid axis 2 is h * 2 + split), the
    halves added into the view `c[h]`: a TMA reduction of a 3-d array's 2-d view."""
    i, j, z = tile.bid(0), tile.bid(1), tile.bid(2)
    h, s = z // 2, z % 2
    acc = tile.zeros((BM, BN), f32)
    for kk in range(2):
        k = s * 2 + kk
        acc = tile.mma(tile.load(a[h], (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)), acc)
    tile.atomic_add(c[h], (i, j), acc, sem="relaxed")


def heads_split_k_case() -> tuple[tuple, tuple, np.ndarray]:
    """(grid, arguments, the exact result) of `heads_split_k` at ragged sizes."""
    heads, m, n, k = 3, 200, 136, 256
    a = rng.integers(-3, 4, (heads, m, k)).astype(bf16.numpy)
    b = rng.integers(-3, 4, (k, n)).astype(bf16.numpy)
    c = np.ones((heads, m, n), np.float32)
    want = 1 + np.einsum("hmk,kn->hmn", a.astype(np.float64), b.astype(np.float64))
    return (tile.cdiv(m, 128), tile.cdiv(n, 128), heads * 2), (a, b, c, 128, 128, 64), want


def test_split_k_into_a_view_is_a_tma_reduction_of_its_box() -> None:
    """The view's reduction goes through a map of the 3-d array whose boxes have extent 1
    on the head's dimension (and flush f32 subnormals, as each thread's atomics do), on
    the CPU's meaning of the sm_90 code: exact sums at the ragged edges."""
    sig = (V(Slice[bf16, 3], vectors=True), V(Slice[bf16, 2], vectors=True),
           V(AtomicSlice[f32, 3], vectors=True))
    ck = heads_split_k.compile(*sig, 128, 128, 64, arch="sm_90")
    assert ck.ptx.count("cp.reduce.async.bulk.tensor.3d") == 4
    assert OperandMap(2, "f32", (1, 64, 32), 128, ftz=True) in ck.operand_maps
    grid, args, want = heads_split_k_case()
    ox.launch(heads_split_k, grid, *args, device="cpu")
    np.testing.assert_array_equal(args[2], want)


@pytest.mark.parametrize("bn, out, stages", [(8, f32, 3), (16, bf16, 4), (32, f32, 8)])
def test_narrow_tiles_of_a_transposed_weight_run_on_wgmma(bn, out, stages) -> None:
    """N tiles of 8, 16 or 32 columns (more blocks for a product of few rows): a K-major
    B holds N rows, so wgmma m64nN reads it as it reads a wide one; ragged in every
    dimension."""
    import re

    kernel = make_linear_t(bf16, 4, stages, out)
    ptx = kernel.compile(*_sig(out), 64, bn, 64, arch="sm_90").ptx
    assert set(re.findall(r"wgmma\.mma_async\S+", ptx)) == {
        f"wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.bf16.bf16"}
    assert "mma.sync" not in ptx
    m, n, k = 70, 3 * bn - 4, 200
    a = rng.standard_normal((m, k)).astype(bf16.numpy)
    w = rng.standard_normal((n, k)).astype(bf16.numpy)
    c = np.full((m, n), 7, out.numpy)
    kernel[tile.cdiv(m, 64), tile.cdiv(n, bn)](a, w, c, 64, bn, 64)
    _close(c, a.astype(np.float64) @ w.astype(np.float64).T, out, k)


@pytest.mark.parametrize("path", ["producer", "cp.async", "threads"])
@pytest.mark.parametrize("bn, out, stages", [(16, f32, 3), (32, bf16, 6)])
def test_narrow_tiles_of_an_mn_major_b_run_on_wgmma(bn, out, stages, path,
                                                    monkeypatch) -> None:
    """`a @ b` with b (K, N) and N tiles of 16 or 32: B's one slab has rows of N columns
    (32 or 64 bytes, that swizzle), filled by TMA, by cp.async, or stored by the threads
    (rows of A and B not of whole 16-byte vectors). A tile of 8 columns, which no
    swizzle takes, keeps mma.sync."""
    import re

    if path == "cp.async":
        monkeypatch.setenv("OXIDE_TILE_TMA", "0")
    threads = path == "threads"  # rows not of whole 16-byte vectors: no ring takes them
    kernel = make_gemm(out, 4, stages)
    sig = (V(Slice[bf16, 2], vectors=not threads),) * 2 + _sig(out)[2:]
    ptx = kernel.compile(*sig, 64, bn, 64, arch="sm_90").ptx
    assert set(re.findall(r"wgmma\.mma_async\S+", ptx)) == {
        f"wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.bf16.bf16"}
    copied = "cp.async.bulk.tensor.2d.shared::cluster.global" in ptx or "cp.async.cg" in ptx
    assert copied != threads
    m, n, k = (70, 3 * bn - 9, 197) if threads else (70, 3 * bn - 8, 200)
    a, b, c, want = _inputs(m, n, k, out)
    kernel[tile.cdiv(m, 64), tile.cdiv(n, bn)](a, b, c, 64, bn, 64)
    _close(c, want, out, k)
    eight = make_gemm(f32, 4, 3).compile(*_sig(f32), 64, 8, 64, arch="sm_90").ptx
    assert "wgmma.mma_async" not in eight and "mma.sync" in eight


@pytest.mark.parametrize("path", ["producer", "cp.async"])
@pytest.mark.parametrize("transposed, stages", [(True, 1), (False, 1), (True, 3), (False, 4)])
def test_an_operand_of_fewer_chunks_than_threads(path, transposed, stages,
                                                 monkeypatch) -> None:
    """A ring's B tile of 16 x 32 (or 32 x 16) halves on 8 warps: 64 16-byte chunks for
    256 threads, so three threads in four copy a replica's chunk, which their `owner`
    test leaves out (the tile fuzzer's K loops found the copy's layout assuming a chunk a
    thread: an assertion at compile time)."""
    if path == "cp.async":
        monkeypatch.setenv("OXIDE_TILE_TMA", "0")
    kernel = make_linear_t(bf16, 8, stages) if transposed else make_gemm(f32, 8, stages)
    ptx = kernel.compile(*_sig(f32), 128, 16, 32, arch="sm_90").ptx
    assert "wgmma.mma_async.sync.aligned.m64n16k16" in ptx
    assert ("cp.async.cg" in ptx) == (path == "cp.async" or stages == 1)
    m, n, k = 200, 37, 96
    a, b, c, want = _inputs(m, n, k, f32)
    if transposed:
        b = np.ascontiguousarray(b.T)
    kernel[tile.cdiv(m, 128), tile.cdiv(n, 16)](a, b, c, 128, 16, 32)
    _close(c, want, f32, k)
