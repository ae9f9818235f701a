"""A product's A written as `x.permute((1, 0))` of a (K, M) tile of 16-bit floats: on
sm_90 the layout pass folds the permute into the product (`a_transposed`), so x reaches
shared memory as it is (TMA or cp.async rings, or the threads' staging) and wgmma reads
it as an MN-major A (its transpose bit), with no transpose through registers. Users
write it for a weight's gradient (`dW = X^T @ dY`) and for a product of few rows written
transposed (`C^T = W^T X^T`, so that the rows are wgmma's N). Checked as compiled for
sm_90 (PTX) and run on the CPU as sm_90 runs it (OXIDE_TILE_CPU_HOPPER=1) against NumPy;
tests/test_gpu_tile_transposed_a.py runs the same kernels on the GPU."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest
from test_tile_tma_rings import TMA, V

from oxide import Const, DisjointSlice, Slice, bf16, f16, f32, tile

rng = np.random.default_rng(58)
WGMMA = re.compile(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.(\w+)\.\w+ "
                   r"\{[^}]*\}, %rd\d+, %rd\d+, p, 1, 1, (\d), (\d);")


def make_xt_y(warps: int, stages: int, dt=bf16, order: bool = False):
    """c = x^T @ y, x (K, M) and y (K, N): A transposed, B as `a @ b` has it. With
    `order`, the transpose is spelled `tile.load(..., order=(1, 0))`."""
    @tile.kernel(num_warps=warps, num_stages=stages)
    def xt_y(x: Slice[dt, 2], y: Slice[dt, 2], c: DisjointSlice[f32, 2],
             BM: Const[int], BN: Const[int], BK: Const[int]):
        i, j = tile.bid(0), tile.bid(1)
        acc = tile.zeros((BM, BN), f32)
        for k in range(tile.num_tiles(x, 0, BK)):
            xt = tile.load(x, (k, i), (BK, BM)).permute((1, 0))
            acc = tile.mma(xt, tile.load(y, (k, j), (BK, BN)), acc)
        tile.store(c, (i, j), acc)

    @tile.kernel(num_warps=warps, num_stages=stages)
    def xt_y_order(x: Slice[dt, 2], y: Slice[dt, 2], c: DisjointSlice[f32, 2],
                   BM: Const[int], BN: Const[int], BK: Const[int]):
        i, j = tile.bid(0), tile.bid(1)
        acc = tile.zeros((BM, BN), f32)
        for k in range(tile.num_tiles(x, 0, BK)):
            xt = tile.load(x, (i, k), (BM, BK), order=(1, 0))
            acc = tile.mma(xt, tile.load(y, (k, j), (BK, BN)), acc)
        tile.store(c, (i, j), acc)
    return xt_y_order if order else xt_y


def make_rows_as_n(warps: int, stages: int, order: bool = False):
    """c = a @ w computed as c^T = w^T a^T: the weight's columns are wgmma's M, the few
    rows of `a` its N (both operands transposed: A MN-major, B K-major). With `order`,
    both transposes are `order=(1, 0)` loads, the second one nested in the product."""
    @tile.kernel(num_warps=warps, num_stages=stages)
    def rows_as_n(a: Slice[bf16, 2], w: Slice[bf16, 2], c: DisjointSlice[bf16, 2],
                  BM: Const[int], BN: Const[int], BK: Const[int]):
        i, j = tile.bid(0), tile.bid(1)
        acc = tile.zeros((BN, BM), f32)
        for k in range(tile.num_tiles(a, 1, BK)):
            wt = tile.load(w, (k, j), (BK, BN)).permute((1, 0))
            at = tile.load(a, (i, k), (BM, BK)).permute((1, 0))
            acc = tile.mma(wt, at, acc)
        tile.store(c, (i, j), acc.permute((1, 0)).astype(bf16))

    @tile.kernel(num_warps=warps, num_stages=stages)
    def rows_as_n_order(a: Slice[bf16, 2], w: Slice[bf16, 2], c: DisjointSlice[bf16, 2],
                        BM: Const[int], BN: Const[int], BK: Const[int]):
        i, j = tile.bid(0), tile.bid(1)
        acc = tile.zeros((BN, BM), f32)
        for k in range(tile.num_tiles(a, 1, BK)):
            wt = tile.load(w, (j, k), (BN, BK), order=(1, 0))
            acc = tile.mma(wt, tile.load(a, (k, i), (BK, BM), order=(1, 0)), acc)
        tile.store(c, (i, j), acc.permute((1, 0)).astype(bf16))
    return rows_as_n_order if order else rows_as_n


def make_scaled_xt_y(warps: int):
    """The transpose of a computed tile (x * 2, exact), one product, no K loop: A staged by
    the threads in the MN-major layout, not a ring."""
    @tile.kernel(num_warps=warps)
    def scaled_xt_y(x: Slice[f16, 2], y: Slice[f16, 2], c: DisjointSlice[f32, 2],
                    BM: Const[int], BN: Const[int], BK: Const[int]):
        i, j = tile.bid(0), tile.bid(1)
        x2 = tile.load(x, (0, i), (BK, BM))
        x2 = x2 + x2
        acc = tile.mma(x2.permute((1, 0)), tile.load(y, (0, j), (BK, BN)),
                       tile.zeros((BM, BN), f32))
        tile.store(c, (i, j), acc)
    return scaled_xt_y


def _sig(dt, out=f32):
    return (V(Slice[dt, 2], vectors=True), V(Slice[dt, 2], vectors=True),
            V(DisjointSlice[out, 2], vectors=True))


def _products(ptx: str) -> list[tuple[str, str, str, str]]:
    return WGMMA.findall(ptx)


@pytest.mark.parametrize("dt", [bf16, f16])
def test_a_transposed_a_is_read_mn_major_from_tma_rings(dt) -> None:
    ptx = make_xt_y(8, 3, dt).compile(*_sig(dt), 128, 128, 64, arch="sm_90").ptx
    products = _products(ptx)
    assert products and {p[2:] for p in products} == {("1", "1")}  # A and B MN-major
    assert {p[0] for p in products} == {"128"}
    assert "setmaxnreg" in ptx and ptx.count(TMA) >= 2  # a producer's TMA rings
    # nothing of x passes through registers: no staging stores of halves, no permute
    assert not re.search(r"st\.shared\.(b16|u16|v\d\.b16)", ptx)


def test_a_loaded_with_order_is_read_mn_major_from_tma_rings() -> None:
    """`tile.load(x, ..., order=(1, 0))` in a pipelined loop: the loop carries the tile
    as x lays it out and permutes it at its use, so the product folds it as it folds
    `.permute((1, 0))`; the two spellings compile to the same products."""
    ptx = make_xt_y(8, 3, order=True).compile(*_sig(bf16), 128, 128, 64, arch="sm_90").ptx
    assert {p[2:] for p in _products(ptx)} == {("1", "1")}
    assert "setmaxnreg" in ptx and ptx.count(TMA) >= 2
    assert not re.search(r"st\.shared\.(b16|u16|v\d\.b16)", ptx)
    spelled = make_xt_y(8, 3).compile(*_sig(bf16), 128, 128, 64, arch="sm_90").ptx
    assert sorted(_products(ptx)) == sorted(_products(spelled))


@pytest.mark.parametrize("order", [False, True], ids=["permute", "order"])
def test_both_operands_transposed_rows_as_wgmma_n(order) -> None:
    ptx = make_rows_as_n(4, 6, order).compile(*_sig(bf16, bf16), 16, 64, 128,
                                              arch="sm_90").ptx
    products = _products(ptx)
    # A (the weight's transpose) MN-major, B (the rows' transpose) K-major, N = 16 rows
    assert products and {p[0] for p in products} == {"16"}
    assert {p[2:] for p in products} == {("1", "0")}
    assert not re.search(r"ld\.shared\.(b16|u16)", ptx)


def test_a_computed_transposed_a_is_staged_as_it_is() -> None:
    ptx = make_scaled_xt_y(4).compile(*_sig(f16), 64, 64, 64, arch="sm_90").ptx
    products = _products(ptx)
    assert products and {p[2:] for p in products} == {("1", "1")}
    # the threads store x2 in slabs of 64 columns, vectors of a row's neighbours
    assert re.search(r"st\.shared\.v\d\.b32", ptx)


def test_sm80_keeps_the_permute_on_mma_sync() -> None:
    ptx = make_xt_y(4, 2).compile(*_sig(bf16), 64, 64, 32, arch="sm_80").ptx
    assert "wgmma" not in ptx and "mma.sync.aligned.m16n8k16" in ptx


def close(got: np.ndarray, want: np.ndarray, out, k: int) -> None:
    rtol = 2.0 ** -7 if out is bf16 else 1e-6
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol,
                               atol=1e-4 * np.sqrt(k) * 10)


# (warps, stages, M, N, K, tiles): ragged in every dimension; M = 100 has rows of x that
# are not whole 16-byte vectors, so x takes the threads' staging rather than a ring
XT_Y = [(8, 3, 260, 200, 136, (128, 128, 64)), (4, 4, 130, 72, 80, (64, 64, 16)),
        (4, 2, 100, 64, 64, (64, 64, 32))]
ROWS_AS_N = [(4, 6, 16, 200, 264, (16, 64, 128)), (4, 3, 24, 130, 96, (32, 64, 32)),
             (8, 4, 16, 260, 128, (16, 128, 64))]
Launch = Callable[..., None]  # (kernel, grid, *args): on the CPU, or the GPU's `_gpu`


def on_cpu(kernel, grid, *args) -> None:
    kernel[grid](*args)


def check_xt_y(case, launch: Launch, order: bool = False) -> None:
    warps, stages, m, n, k, (bm, bn, bk) = case
    x = rng.standard_normal((k, m)).astype(bf16.numpy)
    y = rng.standard_normal((k, n)).astype(bf16.numpy)
    c = np.full((m, n), 7, np.float32)
    launch(make_xt_y(warps, stages, order=order), (tile.cdiv(m, bm), tile.cdiv(n, bn)), x,
           y, c, bm, bn, bk)
    close(c, x.astype(np.float64).T @ y.astype(np.float64), f32, k)


def check_rows_as_n(case, launch: Launch, order: bool = False) -> None:
    warps, stages, m, n, k, (bm, bn, bk) = case
    a = rng.standard_normal((m, k)).astype(bf16.numpy)
    w = rng.standard_normal((k, n)).astype(bf16.numpy)
    c = np.full((m, n), 7, bf16.numpy)
    launch(make_rows_as_n(warps, stages, order), (tile.cdiv(m, bm), tile.cdiv(n, bn)), a, w,
           c, bm, bn, bk)
    close(c, a.astype(np.float64) @ w.astype(np.float64), bf16, k)


def check_computed_transposed_a(launch: Launch) -> None:
    x = rng.standard_normal((64, 130)).astype(f16.numpy)
    y = rng.standard_normal((64, 100)).astype(f16.numpy)
    c = np.full((130, 100), 7, np.float32)
    launch(make_scaled_xt_y(4), (tile.cdiv(130, 64), tile.cdiv(100, 64)), x, y, c, 64, 64, 64)
    close(c, 2 * x.astype(np.float64).T @ y.astype(np.float64), f32, 64)


@pytest.mark.usefixtures("hopper_on_cpu")
@pytest.mark.parametrize("producer", ["1", "0", "cp.async"])
@pytest.mark.parametrize("case", XT_Y, ids=lambda c: "x".join(map(str, c[2:5])))
def test_xt_y_against_numpy(case, producer, monkeypatch) -> None:
    switch(producer, monkeypatch)
    check_xt_y(case, on_cpu)


@pytest.mark.usefixtures("hopper_on_cpu")
@pytest.mark.parametrize("producer", ["1", "cp.async"])
@pytest.mark.parametrize("case", ROWS_AS_N, ids=lambda c: "x".join(map(str, c[2:5])))
def test_rows_as_n_against_numpy(case, producer, monkeypatch) -> None:
    switch(producer, monkeypatch)
    check_rows_as_n(case, on_cpu)


@pytest.mark.parametrize("hopper", ["1", "0"], ids=["sm90", "sm80"])
@pytest.mark.parametrize("case", [XT_Y[0], ROWS_AS_N[0]], ids=["xt_y", "rows_as_n"])
def test_order_loads_against_numpy(case, hopper, monkeypatch) -> None:
    """The `order=(1, 0)` spellings, as sm_90 runs them (folded into wgmma) and as sm_80
    does (the permute at the use, on mma.sync)."""
    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", hopper)
    (check_xt_y if case is XT_Y[0] else check_rows_as_n)(case, on_cpu, order=True)


@pytest.mark.usefixtures("hopper_on_cpu")
def test_a_computed_transposed_a_against_numpy() -> None:
    check_computed_transposed_a(on_cpu)


def switch(producer: str, monkeypatch) -> None:
    if producer == "cp.async":  # every thread's copies into the rings
        monkeypatch.setenv("OXIDE_TILE_TMA", "0")
    else:
        monkeypatch.setenv("OXIDE_TILE_PRODUCER", producer)
