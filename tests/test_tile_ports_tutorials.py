"""Triton tutorials, cuTile samples and FlagGems kernels ported to oxide.tile
(tests/tile_ports/tutorial_*, cutile_*, flaggems_*), run on the CPU against NumPy at
ragged sizes (not multiples of the tiles)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from tile_ports import (
    cutile_layernorm,
    cutile_matmul,
    flaggems_elementwise,
    flaggems_reduce,
    tutorial_attention,
    tutorial_dropout,
    tutorial_layernorm,
    tutorial_matmul,
    tutorial_softmax,
)

import oxide as ox
from oxide import bf16, tile

BF16 = bf16.numpy
F32_TOL = dict(rtol=1e-5, atol=1e-6)


@pytest.fixture(autouse=True)
def _cpu():
    with ox.device("cpu"):
        yield


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def half_close(got: np.ndarray, want: np.ndarray, eps: float) -> bool:
    """Within a few roundings of a 16-bit result (eps: the format's 2**-mantissa)."""
    got64 = got.astype(np.float64)
    return bool(np.allclose(got64, want, rtol=eps, atol=eps * np.abs(want).max() * 0.01))


# ---------------------------------------------------------------- 02 fused softmax

@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_softmax_persistent(dtype):
    x = (rng(1).standard_normal((203, 781)) * 3).astype(dtype)
    out = np.zeros_like(x)
    tutorial_softmax.softmax_kernel[7](x, out, 1024)  # 7 programs stride over 203 rows
    want = tutorial_softmax.reference(x)
    if dtype is np.float32:
        assert np.allclose(out, want, **F32_TOL)
    else:
        assert half_close(out, want, 2.0 ** -8)


@pytest.mark.parametrize("grid", [1, 7, 64])
def test_softmax_range_over_num_programs(grid):
    """The tutorial's `range(pid, n_rows, num_programs)` loop, written literally: the
    persistent loop, as `tile.tiles` (it was refused: a loop's step was a constant)."""
    x = rng(2).standard_normal((50, 100)).astype(np.float32)
    out = np.zeros_like(x)
    tutorial_softmax.softmax_kernel_range[grid](x, out, 128)
    assert np.allclose(out, tutorial_softmax.reference(x), **F32_TOL)


# ---------------------------------------------------- 03 matmul, grouped ordering

MM = (150, 130, 170)


def mm_inputs(dtype, seed=3):
    m, k, n = MM
    r = rng(seed)
    return (r.standard_normal((m, k)).astype(dtype), r.standard_normal((k, n)).astype(dtype))


@pytest.mark.xfail(strict=True, raises=ox.SafetyError, reason="SafetyError: `c` is a DisjointSlice: it is written "
                   "only at a tile index built from this block's TileIndex witnesses")
def test_matmul_pid_arithmetic():
    a, b = mm_inputs(np.float16)
    c = np.zeros((MM[0], MM[2]), np.float16)
    tutorial_matmul.matmul_kernel[tile.cdiv(MM[0], 32) * tile.cdiv(MM[2], 32)](
        a, b, c, 32, 32, 32, 4, True)
    assert half_close(c, tutorial_matmul.reference(a, b, True), 2.0 ** -10)


@pytest.mark.parametrize("kernel", ["matmul_kernel_raw", "matmul_kernel_grouped"])
@pytest.mark.parametrize("dtype,leaky", [(np.float16, True), (np.float16, False),
                                         (BF16, True), (np.float32, True)])
def test_matmul_grouped(kernel, dtype, leaky):
    a, b = mm_inputs(dtype)
    c = np.zeros((MM[0], MM[2]), dtype)
    grid = tile.cdiv(MM[0], 32) * tile.cdiv(MM[2], 64)
    getattr(tutorial_matmul, kernel)[grid](a, b, c, 32, 64, 32, 3, leaky)
    want = tutorial_matmul.reference(a, b, leaky)
    if dtype is np.float32:
        assert np.allclose(c, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    else:
        assert half_close(c, want, 2.0 ** -10 if dtype is np.float16 else 2.0 ** -7)


def test_matmul_grouped_order_is_the_tutorials():
    m_tiles, n_tiles, group = 5, 6, 4
    order = np.full((m_tiles, n_tiles), -1, np.int32)
    tutorial_matmul.grouped_order_kernel[m_tiles * n_tiles](order, group)
    want = np.full_like(order, -1)
    for pid, (i, j) in enumerate(tutorial_matmul.grouped_order(m_tiles, n_tiles, group)):
        want[i, j] = pid
    assert np.array_equal(order, want)


# ------------------------------------------------------------ 04 low-memory dropout

N_DROP = 3001


def test_dropout_with_mask():
    x = rng(4).standard_normal(N_DROP).astype(np.float32)
    keep = (rng(5).random(N_DROP) > 0.5).astype(np.int8)
    out = np.zeros_like(x)
    tutorial_dropout.dropout_kernel[tile.cdiv(N_DROP, 1024)](x, keep, out, np.float32(0.5), 1024)
    assert np.array_equal(out, tutorial_dropout.reference(x, keep != 0, 0.5))


@pytest.mark.parametrize("seed", [123, -7])
def test_seeded_dropout(seed):
    x = rng(6).standard_normal(N_DROP).astype(np.float32)
    p = np.float32(0.5)
    grid = tile.cdiv(N_DROP, 1024)
    out, again, other = (np.zeros_like(x) for _ in range(3))
    tutorial_dropout.seeded_dropout_kernel[grid](x, out, p, np.int32(seed), 1024)
    tutorial_dropout.seeded_dropout_kernel[grid](x, again, p, np.int32(seed), 1024)
    tutorial_dropout.seeded_dropout_kernel[grid](x, other, p, np.int32(seed + 1), 1024)
    keep = tutorial_dropout.philox_uniform(seed, N_DROP) > p
    assert np.array_equal(out, tutorial_dropout.reference(x, keep, 0.5))
    assert np.array_equal(out, again) and not np.array_equal(out, other)


def test_seeded_dropout_bf16():
    x = rng(7).standard_normal(N_DROP).astype(BF16)
    out = np.zeros_like(x)
    tutorial_dropout.seeded_dropout_kernel[tile.cdiv(N_DROP, 512)](x, out, np.float32(0.25),
                                                                   np.int32(9), 512)
    keep = tutorial_dropout.philox_uniform(9, N_DROP) > np.float32(0.25)
    want = tutorial_dropout.reference(x, keep, 0.25).astype(BF16)
    assert np.array_equal(out.astype(np.float32), want.astype(np.float32))


# --------------------------------------------------------------- 05 layer norm

LN = (203, 300)


def ln_inputs(dtype, seed=8):
    r = rng(seed)
    m, n = LN
    x = (r.standard_normal((m, n)) * 2 + 0.5).astype(dtype)
    w, b = (r.standard_normal(n).astype(dtype) for _ in range(2))
    return x, w, b, r.standard_normal((m, n)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_layer_norm_forward(dtype):
    x, w, b, _ = ln_inputs(dtype)
    m = LN[0]
    y, mean, rstd = np.zeros_like(x), np.zeros(m, np.float32), np.zeros(m, np.float32)
    tutorial_layernorm.layer_norm_fwd[m](x, y, w, b, mean, rstd, np.float32(1e-5), 128)
    want_y, want_mean, want_rstd = tutorial_layernorm.reference_fwd(x, w, b, 1e-5)
    assert np.allclose(mean, want_mean, rtol=1e-5, atol=1e-6)
    assert np.allclose(rstd, want_rstd, rtol=1e-5)
    if dtype is np.float32:
        assert np.allclose(y, want_y, rtol=1e-5, atol=1e-5)
    else:
        assert half_close(y, want_y, 2.0 ** -10)


def run_ln_backward(kernel, dtype, group=16):
    x, w, _, dy = ln_inputs(dtype)
    m, n = LN
    _, mean64, rstd64 = tutorial_layernorm.reference_fwd(x, w, w, 1e-5)
    mean, rstd = mean64.astype(np.float32), rstd64.astype(np.float32)
    dx = np.zeros_like(x)
    dw_buf, db_buf = np.zeros((group, n), np.float32), np.zeros((group, n), np.float32)
    locks = np.zeros(2 * group, np.int32)
    kernel[m](dx, dy, dw_buf, db_buf, x, w, mean, rstd, locks, group, 512)
    dw, db = np.zeros(n, dtype), np.zeros(n, dtype)
    tutorial_layernorm.layer_norm_bwd_dwdb[tile.cdiv(n, 64)](dw_buf, db_buf, dw, db, 8, 64)
    want_dx, want_dw, want_db = tutorial_layernorm.reference_bwd(x, w, dy, mean, rstd)
    assert np.array_equal(locks, np.r_[np.zeros(group), np.ones(group)].astype(np.int32))
    if dtype is np.float32:
        assert np.allclose(dx, want_dx, rtol=1e-5, atol=1e-5)
        # dw, db: sums of 203 rows in f32, in lock order
        assert np.allclose(dw, want_dw, rtol=1e-5, atol=1e-5 * np.sqrt(m))
        assert np.allclose(db, want_db, rtol=1e-5, atol=1e-5 * np.sqrt(m))
    else:
        assert half_close(dx, want_dx, 2.0 ** -10)
        assert half_close(dw, want_dw, 2.0 ** -10)
        assert half_close(db, want_db, 2.0 ** -10)


@pytest.mark.xfail(strict=True, raises=ox.SafetyError, reason="SafetyError: `locks` is an AtomicSlice: it is read "
                   "and written only through atomics")
def test_layer_norm_backward_as_written():
    """The tutorial reads the count with a plain `tl.load(Count)` under the lock."""
    run_ln_backward(tutorial_layernorm.layer_norm_bwd_dx_fused, np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_layer_norm_backward_lock_and_atomics(dtype):
    run_ln_backward(tutorial_layernorm.layer_norm_bwd_dx_fused_atomic, dtype)


# ---------------------------------------------------------- 06 fused attention

@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype,bm,bn", [(np.float16, 16, 16), (BF16, 32, 16),
                                         (np.float32, 16, 16)])
def test_attention_forward(causal, dtype, bm, bn):
    zh, n_ctx, d = 3, 45, 32
    r = rng(9)
    q, k, v = (r.standard_normal((zh, n_ctx, d)).astype(dtype) for _ in range(3))
    sm_scale = np.float32(1 / math.sqrt(d))
    out, lse = np.zeros_like(q), np.zeros((zh, n_ctx), np.float32)
    tutorial_attention.attn_fwd[(tile.cdiv(n_ctx, bm), zh)](q, k, v, sm_scale, lse, out,
                                                             bm, bn, d, 3 if causal else 1)
    want, want_lse = tutorial_attention.reference(q, k, v, sm_scale, causal)
    # the online softmax runs in base 2 with ex2 (2 ulps); p is rounded to the operand
    # dtype before p @ v, as in the tutorial
    eps = {np.float16: 2.0 ** -10, BF16: 2.0 ** -7}.get(dtype, 1e-5)
    assert np.allclose(out.astype(np.float64), want, rtol=eps, atol=2 * eps)
    assert np.allclose(lse, want_lse, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------- cuTile samples

BMM = (3, 70, 90, 100)


@pytest.mark.parametrize("dtype", [BF16, np.float16, np.float32])
def test_cutile_batch_matmul(dtype):
    nb, m, k, n = BMM
    r = rng(10)
    a, b = r.standard_normal((nb, m, k)).astype(dtype), r.standard_normal((nb, k, n)).astype(dtype)
    want = cutile_matmul.reference(a, b)
    c = np.zeros((nb, m, n), dtype)
    cutile_matmul.batch_matmul_kernel[(nb, tile.cdiv(m, 32), tile.cdiv(n, 32))](a, b, c, 32, 32, 32)
    c3 = np.zeros((nb, m, n), dtype)
    cutile_matmul.batch_matmul_rank3[(tile.cdiv(nb, 2), tile.cdiv(m, 32), tile.cdiv(n, 32))](
        a, b, c3, 2, 32, 32, 32)
    for got in (c, c3):
        if dtype is np.float32:
            assert np.allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
        else:
            assert half_close(got, want, 2.0 ** -7 if dtype is BF16 else 2.0 ** -10)


@pytest.mark.parametrize("kernel", ["persistent_matmul_raw", "persistent_matmul"])
@pytest.mark.parametrize("dtype", [BF16, np.float32])
def test_cutile_persistent_matmul(kernel, dtype):
    r = rng(11)
    a, b = r.standard_normal((130, 90)).astype(dtype), r.standard_normal((90, 110)).astype(dtype)
    c = np.zeros((130, 110), dtype)
    getattr(cutile_matmul, kernel)[3](a, b, c, 32, 32, 32, 2)  # 3 blocks for 20 tiles
    want = cutile_matmul.reference(a, b)
    if dtype is np.float32:
        assert np.allclose(c, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    else:
        assert half_close(c, want, 2.0 ** -7)


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_cutile_layer_norm(dtype):
    x, w, b, _ = ln_inputs(dtype, seed=12)
    m = LN[0]
    y, mean, rstd = np.zeros_like(x), np.zeros(m, np.float32), np.zeros(m, np.float32)
    cutile_layernorm.layer_norm_fwd[m](x, w, b, y, mean, rstd, np.float32(1e-5), 128)
    want_y, want_mean, want_rstd = cutile_layernorm.reference(x, w, b, 1e-5)
    assert np.allclose(mean, want_mean, rtol=1e-5, atol=1e-6)
    assert np.allclose(rstd, want_rstd, rtol=1e-5)
    if dtype is np.float32:
        assert np.allclose(y, want_y, rtol=1e-5, atol=1e-5)
    else:
        assert half_close(y, want_y, 2.0 ** -7)


# ------------------------------------------------------------------- FlagGems

N_RED = 5003


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_flaggems_argmax_two_stage(dtype):
    x = rng(13).standard_normal(N_RED).astype(dtype)
    grid = tile.cdiv(N_RED, 256)
    mid_value, mid_index = np.zeros(grid, np.float32), np.zeros(grid, np.int64)
    flaggems_reduce.argmax_kernel_1[grid](x, mid_value, mid_index, 256)
    out = np.zeros(1, np.int64)
    flaggems_reduce.argmax_kernel_2[1](mid_value, mid_index, out, 32)
    assert out[0] == np.argmax(x.astype(np.float32))


def test_flaggems_argmax_0d_output():
    x = rng(13).standard_normal(N_RED).astype(np.float32)
    grid = tile.cdiv(N_RED, 256)
    mid_value, mid_index = np.zeros(grid, np.float32), np.zeros(grid, np.int64)
    flaggems_reduce.argmax_kernel_1[grid](x, mid_value, mid_index, 256)
    out = np.zeros((), np.int64)
    flaggems_reduce.make_argmax_kernel_2_0d()[1](mid_value, mid_index, out, 32)
    assert out == np.argmax(x)


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_flaggems_sum_two_stage(dtype):
    x = rng(14).standard_normal(N_RED).astype(dtype)
    grid = tile.cdiv(N_RED, 256)
    mid = np.zeros(grid, np.float32)
    flaggems_reduce.sum_kernel_1[grid](x, mid, 256)
    out = np.zeros(1, dtype)
    flaggems_reduce.sum_kernel_2_1d[1](mid, out, 32)
    want = x.astype(np.float64).sum()
    if dtype is np.float32:
        assert np.isclose(out[0], want, rtol=1e-5, atol=1e-5 * np.sqrt(N_RED))
    else:
        assert np.isclose(float(out[0]), want, rtol=2.0 ** -7, atol=1e-4 * np.sqrt(N_RED))


def test_flaggems_sum_0d_output():
    mid = rng(14).standard_normal(20).astype(np.float32)
    out = np.zeros((), np.float32)
    flaggems_reduce.make_sum_kernel_2_0d()[1](mid, out, 32)
    assert np.isclose(out, mid.astype(np.float64).sum(), rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_flaggems_argmax_dim1(dtype):
    x = rng(15).standard_normal((37, 300)).astype(dtype)
    out = np.zeros(37, np.int64)
    flaggems_reduce.argmax_dim1_kernel[tile.cdiv(37, 8)](x, out, 8, 64)
    assert np.array_equal(out, x.astype(np.float32).argmax(1))


@pytest.mark.parametrize("dtype", [np.float32, BF16, np.float16])
def test_flaggems_activations(dtype):
    n = 1001
    x = (rng(16).standard_normal(n) * 3).astype(dtype)
    out = np.zeros((4, n), dtype)
    flaggems_elementwise.activations_kernel[tile.cdiv(n, 256)](x, out, 256)
    want = flaggems_elementwise.reference(x)
    if dtype is np.float32:
        # erf, tanh, exp: a few f32 ulps
        assert np.allclose(out, want, rtol=1e-5, atol=1e-6)
    else:
        assert half_close(out, want, 2.0 ** -7 if dtype is BF16 else 2.0 ** -10)


def test_flaggems_gelu_backward():
    n = 1001
    x = (rng(17).standard_normal(n) * 3).astype(np.float32)
    dy = rng(18).standard_normal(n).astype(np.float32)
    dx = np.zeros_like(x)
    flaggems_elementwise.gelu_backward_kernel[tile.cdiv(n, 256)](x, dy, dx, 256)
    assert np.allclose(dx, flaggems_elementwise.reference_gelu_backward(x, dy), rtol=1e-5,
                       atol=1e-6)
