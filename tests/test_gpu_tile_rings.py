"""Product operands staged through rings of shared buffers (tile/operand_rings.py) on an
sm_90 GPU, against NumPy: pipelined K loops of 2 to 8 stages (a wgmma left in flight,
or waited for where the accumulator is read otherwise), ragged edges in every dimension (rows of 16-byte vectors, so
the copies take them), a transposed weight, a persistent loop that starts the pipeline
again for every tile, and kernels whose loads keep the registers' path beside them."""

from __future__ import annotations

import numpy as np
import pytest
from test_gpu_tile_wgmma import _gpu

import oxide as ox
from oxide import Const, DisjointSlice, Slice, bf16, f16, f32, tile

pytestmark = pytest.mark.gpu

rng = np.random.default_rng(29)


def make_gemm(dt, warps: int, stages: int):
    @tile.kernel(num_warps=warps, num_stages=stages)
    def gemm(a: Slice[dt, 2], b: Slice[dt, 2], c: DisjointSlice[f32, 2], BM: Const[int],
             BN: Const[int], BK: Const[int]):
        i, j = tile.bid(0), tile.bid(1)
        acc = tile.zeros((BM, BN), f32)
        for k in range(tile.num_tiles(a, 1, BK)):
            acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)), acc)
        tile.store(c, (i, j), acc)
    return gemm


CASES = [  # dtype, warps, stages, M, N, K, BM, BN, BK (K a multiple of 8: 16-byte rows)
    (bf16, 8, 2, 300, 520, 200, 128, 256, 64),   # a wgmma in flight, ragged everywhere
    (bf16, 8, 3, 256, 256, 1024, 128, 256, 64),  # three stages in three buffers
    (f16, 8, 4, 200, 136, 328, 128, 128, 64),    # four stages in flight
    (bf16, 4, 2, 64, 64, 16, 64, 64, 16),        # one k step: the prologue only
    (bf16, 4, 3, 130, 200, 96, 64, 64, 32),      # 64-byte swizzle rows, three k tiles
    (bf16, 4, 1, 130, 200, 520, 64, 128, 64),    # no pipelining: copies then the product
    (bf16, 4, 8, 70, 200, 1048, 64, 64, 64),     # eight stages: rings of 8 and more buffers
    (f16, 8, 6, 200, 136, 328, 128, 128, 64),    # six stages, more than the k steps
    (bf16, 4, 3, 70, 40, 200, 64, 16, 64),       # N of 16: one slab of 32-byte rows
    (bf16, 4, 6, 130, 88, 328, 64, 32, 64),      # N of 32: 64-byte rows
    (bf16, 4, 2, 70, 45, 197, 64, 32, 64),       # rows not of 16-byte vectors: the threads
    (bf16, 8, 1, 200, 40, 96, 128, 16, 32),      # B of 64 chunks for 256 threads: replicas
    (f16, 8, 4, 200, 40, 96, 128, 16, 32),       # the same, pipelined
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(x) for x in c))
def test_ring_products_against_numpy(case) -> None:
    dt, warps, stages, m, n, k, bm, bn, bk = case
    a = rng.standard_normal((m, k)).astype(dt.numpy)
    b = rng.standard_normal((k, n)).astype(dt.numpy)
    c = np.zeros((m, n), np.float32)
    _gpu(make_gemm(dt, warps, stages), (tile.cdiv(m, bm), tile.cdiv(n, bn)), a, b, c, bm, bn,
         bk)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=0, atol=1e-4 * np.sqrt(k) * 10)


def test_a_transposed_weight_of_fewer_chunks_than_threads() -> None:
    """B's (16, 32) tile on 8 warps: three threads in four hold a replica's chunk
    (found by the tile fuzzer's K loops, tests/test_tile_cpu_hopper.py)."""
    for stages in (1, 3):
        _check(make_linear_t(bf16, 8, stages), (tile.cdiv(200, 128), tile.cdiv(37, 16)), 200,
               37, 96, (128, 16, 32), transposed=True)


def make_linear_t(dt, warps: int, stages: int, out=f32):
    @tile.kernel(num_warps=warps, num_stages=stages)
    def linear_t(x: Slice[dt, 2], w: Slice[dt, 2], y: DisjointSlice[out, 2],
                 BM: Const[int], BN: Const[int], BK: Const[int]):
        """y = x @ w.T, w (N x K) as a torch Linear keeps it."""
        i, j = tile.bid(0), tile.bid(1)
        acc = tile.zeros((BM, BN), f32)
        for k in range(tile.num_tiles(x, 1, BK)):
            acc = tile.mma(tile.load(x, (i, k), (BM, BK)),
                           tile.load(w, (j, k), (BN, BK)).permute((1, 0)), acc)
        tile.store(y, (i, j), acc.astype(out))
    return linear_t


linear_t = make_linear_t(bf16, 8, 2)


def _check(kernel, grid, m: int, n: int, k: int, tiles: tuple[int, int, int],
           transposed: bool = False) -> None:
    """`kernel` on random bf16 (m, k) and (k, n) inputs ((n, k) if `transposed`), against
    the f64 product."""
    a = rng.standard_normal((m, k)).astype(bf16.numpy)
    b = rng.standard_normal((n, k) if transposed else (k, n)).astype(bf16.numpy)
    c = np.zeros((m, n), np.float32)
    _gpu(kernel, grid, a, b, c, *tiles)
    b64 = b.astype(np.float64)
    np.testing.assert_allclose(c, a.astype(np.float64) @ (b64.T if transposed else b64),
                               rtol=0, atol=1e-2)


def test_a_transposed_weight_through_rings() -> None:
    _check(linear_t, (tile.cdiv(260, 128), tile.cdiv(200, 128)), 260, 200, 392,
           (128, 128, 64), transposed=True)


@pytest.mark.parametrize("bn, stages", [(8, 3), (16, 4), (32, 8)])
def test_narrow_tiles_of_a_transposed_weight(bn: int, stages: int) -> None:
    """wgmma m64n8/16/32 reading a K-major B of that many rows, ragged everywhere."""
    n = 5 * bn - 3
    _check(make_linear_t(bf16, 4, stages), (tile.cdiv(70, 64), tile.cdiv(n, bn)), 70, n, 392,
           (64, bn, 64), transposed=True)


@tile.kernel(num_warps=4, num_stages=3)
def persistent_gemm(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[f32, 2],
                    BM: Const[int], BN: Const[int], BK: Const[int]):
    """Each block walks several output tiles; each tile's K loop starts its pipeline anew
    (the last tile's prefetched copies still landing)."""
    tiles_m, tiles_n = tile.num_tiles(c, 0, BM), tile.num_tiles(c, 1, BN)
    for t in tile.tiles(tiles_m * tiles_n):
        i, j = tile.grouped(t, tiles_m, tiles_n, 2)
        acc = tile.zeros((BM, BN), f32)
        for k in range(tile.num_tiles(a, 1, BK)):
            acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)),
                           acc)
        tile.store(c, (i, j), acc)


def test_a_persistent_loop_restarts_the_pipeline() -> None:
    _check(persistent_gemm, 3, 320, 384, 264, (64, 128, 64))


@tile.kernel(num_warps=4, num_stages=2)
def padded_gemm(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[f32, 2],
                BM: Const[int], BN: Const[int], BK: Const[int]):
    """A's padding is 1, which a copy cannot write: A keeps the registers' path, B rings."""
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(a, 1, BK)):
        acc = tile.mma(tile.load(a, (i, k), (BM, BK), padding=1.0),
                       tile.load(b, (k, j), (BK, BN)), acc)
    tile.store(c, (i, j), acc)


def test_one_operand_in_registers_one_in_a_ring() -> None:
    _check(padded_gemm, (2, 1), 100, 64, 72, (64, 64, 64))  # K ragged: A's padding 1
    # meets B's zero rows


@tile.kernel(num_warps=4, num_stages=2)
def sometimes_gemm(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[f32, 2],
                   BM: Const[int], BN: Const[int], BK: Const[int]):
    """The product under an `if` in the pipelined loop (every other k tile): not every
    step passes its barrier, so its operands keep the registers' path."""
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(a, 1, BK)):
        x = tile.load(a, (i, k), (BM, BK))
        y = tile.load(b, (k, j), (BK, BN))
        if k % 2 == 0:
            acc = tile.mma(x, y, acc)
    tile.store(c, (i, j), acc)


def test_a_product_under_an_if_in_a_pipelined_loop() -> None:
    m, n, k = 128, 64, 320
    a = rng.standard_normal((m, k)).astype(bf16.numpy)
    b = rng.standard_normal((k, n)).astype(bf16.numpy)
    c = np.zeros((m, n), np.float32)
    _gpu(sometimes_gemm, (2, 1), a, b, c, 64, 64, 32)
    even = (np.arange(k) // 32) % 2 == 0
    want = a[:, even].astype(np.float64) @ b[even].astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=0, atol=1e-2)


@tile.kernel(num_warps=8, num_stages=3)
def decaying_gemm(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[f32, 2],
                  BM: Const[int], BN: Const[int], BK: Const[int]):
    """acc_k = (acc_k-1 + a_k @ b_k) / 2: the product's result feeds more than the next
    product, so each step waits for its wgmma before its copies."""
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(a, 1, BK)):
        acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)),
                       acc) * 0.5
    tile.store(c, (i, j), acc)


def test_a_product_waited_for_before_its_copies() -> None:
    m, n, k, bk = 200, 256, 320, 64
    a = rng.standard_normal((m, k)).astype(bf16.numpy)
    b = rng.standard_normal((k, n)).astype(bf16.numpy)
    c = np.zeros((m, n), np.float32)
    _gpu(decaying_gemm, (tile.cdiv(m, 128), 1), a, b, c, 128, 256, bk)
    want = np.zeros((m, n))
    for s in range(0, k, bk):
        want = (want + a[:, s:s + bk].astype(np.float64) @ b[s:s + bk].astype(np.float64)) / 2
    np.testing.assert_allclose(c, want, rtol=0, atol=1e-2)


def test_a_strided_operand_beside_a_tma_one() -> None:
    torch = pytest.importorskip("torch")
    m, n, k = 200, 256, 200
    gen = torch.Generator(device="cuda").manual_seed(31)
    wide = torch.randn(m, k + 56, dtype=torch.bfloat16, device="cuda", generator=gen)
    a = wide[:, :k]  # rows 512 bytes apart: every thread's cp.async copies; B by TMA
    b = torch.randn(k, n, dtype=torch.bfloat16, device="cuda", generator=gen)
    c = torch.zeros(m, n, dtype=torch.float32, device="cuda")
    with ox.device(0):
        make_gemm(bf16, 8, 3)[(tile.cdiv(m, 128), tile.cdiv(n, 256))](a, b, c, 128, 256, 64)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=0, atol=1e-2)


def test_an_empty_k_reads_nothing() -> None:
    a = np.zeros((70, 0), bf16.numpy)
    b = np.zeros((0, 64), bf16.numpy)
    c = np.full((70, 64), 7.0, np.float32)
    with ox.device(0):
        _gpu(make_gemm(bf16, 4, 3), (2, 1), a, b, c, 64, 64, 64)  # maps of a stand-in
    assert (c == 0).all()


def test_each_launch_maps_its_own_arrays() -> None:
    """Launches after the first take the fast path (runtime/fastpath.py): its binder must
    encode the tensor maps of this launch's arrays, not keep the last ones."""
    gemm = make_gemm(bf16, 8, 3)
    with ox.device(0):
        for seed in range(3):
            gen = np.random.default_rng(seed)
            a = gen.standard_normal((128, 192)).astype(bf16.numpy)
            b = gen.standard_normal((192, 256)).astype(bf16.numpy)
            c = ox.to_device(np.zeros((128, 256), np.float32))
            gemm[(1, 1)](ox.to_device(a), ox.to_device(b), c, 128, 256, 64)
            want = a.astype(np.float64) @ b.astype(np.float64)
            np.testing.assert_allclose(c.to_numpy(), want, rtol=0, atol=1e-2)


CACHED = '''
import sys
import numpy as np
import oxide as ox
from oxide import Const, DisjointSlice, Slice, bf16, f32, tile


@tile.kernel(num_warps=8, num_stages=3)
def gemm(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[f32, 2], BM: Const[int],
         BN: Const[int], BK: Const[int]):
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(a, 1, BK)):
        acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)), acc)
    tile.store(c, (i, j), acc)


rng = np.random.default_rng(5)
a = rng.standard_normal((256, 320)).astype(bf16.numpy)
b = rng.standard_normal((320, 512)).astype(bf16.numpy)
c = ox.to_device(np.zeros((256, 512), np.float32))
gemm[(2, 2)](ox.to_device(a), ox.to_device(b), c, 128, 256, 64)
want = a.astype(np.float64) @ b.astype(np.float64)
print(bool(np.abs(c.to_numpy() - want).max() < 1e-2), "xdsl" in sys.modules)
'''


def test_the_disk_cache_keeps_the_hidden_maps(tmp_path) -> None:
    import os
    import subprocess
    import sys

    script = tmp_path / "gemm.py"
    script.write_text(CACHED)
    # standalone (a test module would import the compiler): the second run must not
    env = {**os.environ, "OXIDE_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("OXIDE_CACHE", None)
    runs = [subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                           text=True, timeout=300) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    assert runs[0].stdout.split() == ["True", "True"]  # compiled
    assert runs[1].stdout.split() == ["True", "False"]  # from the cache, maps and all
