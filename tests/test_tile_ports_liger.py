"""Liger-Kernel's Triton kernels ported to oxide.tile from the docs (tests/tile_ports/liger_*),
run on the CPU against NumPy models at ragged sizes, in f32 and bf16.

Each port keeps Liger's math and blocking: one program per row (per token for RoPE), the
row in one tile or in BLOCK_SIZE chunks. Where Liger's form does not compile, the
faithful kernel is kept and `xfail(strict=True)`ed with the first line of the error, beside
the nearest workaround the docs lead to (a passing test).
"""

from __future__ import annotations

import numpy as np
import pytest
from tile_ports import liger_cross_entropy as ce
from tile_ports import liger_glu as glu
from tile_ports import liger_kl_div as kl
from tile_ports import liger_layer_norm as ln
from tile_ports import liger_rms_norm as rms
from tile_ports import liger_rope as rope

import oxide as ox
from oxide import DisjointSlice, Slice, bf16, f32, tile

BF16 = bf16.numpy
DTYPES = [np.float32, BF16]
DTYPE_IDS = ["f32", "bf16"]


@pytest.fixture
def cpu():
    with ox.device("cpu"):
        yield


def tolerance(dtype: type) -> float:
    return 2.0 ** -7 if dtype == BF16 else 1e-5


def assert_close(got: np.ndarray, want: np.ndarray, dtype: type, *, scale: bool = False,
                 rtol: float | None = None) -> None:
    """Elementwise relative tolerance; `scale=True` adds an absolute one of rtol times the
    largest |want| (for results that come out of sums with cancellation: dx of a norm)."""
    rtol = tolerance(dtype) if rtol is None else rtol
    want = np.asarray(want, np.float64)
    atol = rtol * float(np.abs(want).max()) if scale else 1e-30
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), want, rtol=rtol, atol=atol)


def rand(rng: np.random.Generator, shape: tuple[int, ...], dtype: type,
         scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32).astype(dtype)


# --- RMSNorm ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("casting", [rms.LLAMA, rms.GEMMA], ids=["llama", "gemma"])
@pytest.mark.parametrize("rows,cols", [(7, 300), (3, 1000), (1, 33)])
def test_rms_norm_forward(cpu, dtype, casting, rows, cols):
    rng = np.random.default_rng(rows * cols)
    x, w = rand(rng, (rows, cols), dtype, 2.0), rand(rng, (cols,), dtype)
    y, r = np.zeros_like(x), np.zeros(rows, np.float32)
    rms.rms_norm_forward[rows](x, w, y, r, np.float32(1e-6), np.float32(1.0), casting,
                               rms.block_for(cols))
    want_y, want_r = rms.forward_model(x, w, 1e-6, 1.0, casting)
    assert_close(r, want_r, np.float32)
    # the model rounds where the kernel rounds: one bf16 ulp apart at most
    assert_close(y, want_y.astype(np.float64), dtype)


def rms_backward_inputs(rows: int, cols: int, dtype: type):
    rng = np.random.default_rng(rows + cols)
    x, w, dy = (rand(rng, (rows, cols), dtype), rand(rng, (cols,), dtype),
                rand(rng, (rows, cols), dtype))
    _, r = rms.forward_model(x, w, 1e-6, 0.5, rms.GEMMA)
    return x, w, dy, r


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("rows,cols,programs", [(37, 300, 8), (5, 129, 7)])
def test_rms_norm_backward_persistent(cpu, dtype, rows, cols, programs):
    """Workaround for the contiguous-run form: rows handed out by `tile.tiles`."""
    x, w, dy, r = rms_backward_inputs(rows, cols, dtype)
    dx, part = np.zeros_like(x), np.zeros((programs, cols), np.float32)
    rms.rms_norm_backward[programs](dy, x, w, r, dx, part, np.float32(0.5),
                                    rms.block_for(cols))
    want_dx, want_dw = rms.backward_model(dy, x, w, r, 0.5)
    assert_close(dx, want_dx, dtype, scale=True)
    assert_close(part.sum(axis=0), want_dw, np.float32, scale=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_rms_norm_backward_raw(cpu, dtype):
    """Workaround 2: Liger's contiguous runs, dx a RawSlice under `ox.unsafe()`."""
    rows, cols, programs, per = 37, 300, 8, 5
    x, w, dy, r = rms_backward_inputs(rows, cols, dtype)
    dx, part = np.zeros_like(x), np.zeros((programs, cols), np.float32)
    rms.rms_norm_backward_raw[programs](dy, x, w, r, dx, part, np.float32(0.5), per,
                                        rms.block_for(cols))
    want_dx, want_dw = rms.backward_model(dy, x, w, r, 0.5)
    assert_close(dx, want_dx, dtype, scale=True)
    assert_close(part.sum(axis=0), want_dw, np.float32, scale=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_rms_norm_backward_contiguous_runs(cpu, dtype):
    """Liger's form as written: program pid takes rows [pid * rows_per_program, ...), and
    `row` is a witness of that run (tile/run_witness.py): dx stays a DisjointSlice."""
    rows, cols, programs, per = 37, 300, 8, 5
    x, w, dy, r = rms_backward_inputs(rows, cols, dtype)
    dx, part = np.zeros_like(x), np.zeros((programs, cols), np.float32)
    rms.rms_norm_backward_contiguous[programs](dy, x, w, r, dx, part, np.float32(0.5), per,
                                               rms.block_for(cols))
    want_dx, want_dw = rms.backward_model(dy, x, w, r, 0.5)
    assert_close(dx, want_dx, dtype, scale=True)
    assert_close(part.sum(axis=0), want_dw, np.float32, scale=True)


# --- SwiGLU / GEGLU --------------------------------------------------------------------

GLU_SIZES = [(5, 300), (2, 1000), (3, 17)]


def glu_inputs(rows: int, cols: int, dtype: type):
    """The backward formulas cancel where the derivative of act(a) crosses 0 (f32 in the
    kernel, f64 in the model), so the gradients are compared with an absolute tolerance of
    rtol times their largest magnitude too."""
    rng = np.random.default_rng(rows * 7 + cols)
    return (rand(rng, (rows, cols), dtype, 2.0), rand(rng, (rows, cols), dtype),
            rand(rng, (rows, cols), dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("rows,cols", GLU_SIZES)
def test_swiglu_forward(cpu, dtype, rows, cols):
    a, b, _ = glu_inputs(rows, cols, dtype)
    c = np.zeros_like(a)
    glu.swiglu_forward[rows](a, b, c, glu.block_for(cols))
    assert_close(c, glu.swiglu_model(a, b).astype(np.float64), dtype)


def test_swiglu_forward_implicit_f32(cpu):
    """Liger's store of an f32 tile: fine where the array is f32."""
    a, b, _ = glu_inputs(5, 300, np.float32)
    c = np.zeros_like(a)
    glu.swiglu_forward_implicit[5](a, b, c, 512)
    assert_close(c, glu.swiglu_model(a, b), np.float32)


@pytest.mark.xfail(strict=True, raises=ox.KernelTypeError, reason=(
    "`c` holds bf16; cannot store a tile of shape (1, 512) and dtype f32"))
def test_swiglu_forward_implicit_bf16(cpu):
    """Triton's tl.store converts to the pointer's dtype; tile.store refuses (the help
    says `.astype(bf16)`, which swiglu_forward does)."""
    a, b, _ = glu_inputs(5, 300, BF16)
    glu.swiglu_forward_implicit[5](a, b, np.zeros_like(a), 512)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("rows,cols", GLU_SIZES)
def test_swiglu_backward_in_place(cpu, dtype, rows, cols):
    a, b, dc = glu_inputs(rows, cols, dtype)
    da, db = a.copy(), b.copy()
    glu.swiglu_backward[rows](dc, da, db, glu.block_for(cols))
    want_da, want_db = glu.swiglu_backward_model(dc, a, b)
    assert_close(da, want_da, dtype, scale=True)
    assert_close(db, want_db, dtype, scale=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("rows,cols", GLU_SIZES)
def test_geglu_forward(cpu, dtype, rows, cols):
    a, b, _ = glu_inputs(rows, cols, dtype)
    c = np.zeros_like(a)
    glu.geglu_forward[rows](a, b, c, glu.block_for(cols))
    # 1 + tanh(z) cancels for negative a (Liger's formula): absolute error at small c
    assert_close(c, glu.geglu_model(a, b), dtype, scale=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("rows,cols", GLU_SIZES)
def test_geglu_backward_in_place(cpu, dtype, rows, cols):
    a, b, dc = glu_inputs(rows, cols, dtype)
    da, db = a.copy(), b.copy()
    glu.geglu_backward[rows](dc, da, db, glu.block_for(cols))
    want_da, want_db = glu.geglu_backward_model(dc, a, b)
    assert_close(da, want_da, dtype, scale=True)
    assert_close(db, want_db, dtype, scale=True)


# --- Cross entropy ---------------------------------------------------------------------

CE_FLAGS = [(0.0, 0.0, False), (0.1, 0.0, False), (0.1, 1e-4, True)]
CE_FLAG_IDS = ["plain", "smoothing", "smoothing+zloss"]


def ce_inputs(rows: int, vocab: int, dtype: type):
    rng = np.random.default_rng(rows * vocab)
    x = rand(rng, (rows, vocab), dtype, 3.0)
    y = rng.integers(0, vocab, rows).astype(np.int64)
    y[1::3] = -100  # ignored rows
    y[0] = vocab - 1  # a target in the last, partial chunk
    return x, y


def run_ce(kernel, dtype, flags, rows=9, vocab=1000, block=256):
    x, y = ce_inputs(rows, vocab, dtype)
    ls, zs, rz = flags
    n_non_ignore = int((y != -100).sum())
    grad, loss, z = x.copy(), np.zeros(rows, np.float32), np.zeros(rows, np.float32)
    kernel[rows](grad, y, loss, z, np.int32(n_non_ignore), np.int64(-100), ls, zs, rz, block)
    want_loss, want_z, want_grad = ce.model(x, y, -100, ls, zs)
    # the loss is f32 math on the (rounded) inputs whatever the dtype
    assert_close(loss, want_loss, np.float32, rtol=1e-5, scale=True)
    if rz:
        assert_close(z, want_z, np.float32, scale=True)
    assert_close(grad, want_grad, dtype, scale=dtype == np.float32)
    assert np.all(grad[y == -100] == 0)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("flags", CE_FLAGS, ids=CE_FLAG_IDS)
def test_cross_entropy_where_workaround(cpu, dtype, flags):
    """if/else instead of the early return; the target logit picked out of each chunk
    with tile.where (X only sees (1, BN) tiles)."""
    run_ce(ce.cross_entropy, dtype, flags)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("flags", CE_FLAGS, ids=CE_FLAG_IDS)
def test_cross_entropy_raw_workaround(cpu, dtype, flags):
    """Liger's element reads/writes at (row, y) kept, X a RawSlice under ox.unsafe():
    program order between the tile stores and the element load holds."""
    run_ce(ce.cross_entropy_raw, dtype, flags)


def test_cross_entropy_one_chunk(cpu):
    """BLOCK_SIZE covering the whole vocabulary (Liger's usual case below 32K)."""
    run_ce(ce.cross_entropy, np.float32, CE_FLAGS[2], rows=5, vocab=300, block=512)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("flags", CE_FLAGS, ids=CE_FLAG_IDS)
def test_cross_entropy_faithful(cpu, dtype, flags):
    """Liger's kernel as written: `return` after zeroing an ignored row's gradient
    (tile/early_return.py), the target logit read as a (1, 1) tile of the row."""
    run_ce(ce.cross_entropy_faithful, dtype, flags)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_cross_entropy_target_element_access(cpu, dtype):
    """Without the return: `tl.load(X_ptr + y)` as a (1, 1) tile beside the (1, BN)
    chunks of one row; the tiles agree along the row, which the TileIndex indexes."""
    run_ce(ce.cross_entropy_no_return, dtype, CE_FLAGS[0])


# --- RoPE ------------------------------------------------------------------------------

ROPE_SHAPES = [  # bsz, seq_len, n_q_heads, n_kv_heads, head_dim, cos batch
    (2, 7, 5, 3, 64, 1),
    (3, 5, 6, 2, 128, 3),
]


def rope_inputs(bsz, sl, nq, nk, hd, cbs, dtype):
    rng = np.random.default_rng(bsz * sl * nq + hd)
    q, k = rand(rng, (bsz * sl, nq, hd), dtype), rand(rng, (bsz * sl, nk, hd), dtype)
    cos, sin = rope.cos_sin(cbs, sl, hd, dtype)
    return q, k, cos, sin


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "bwd"])
@pytest.mark.parametrize("shape", ROPE_SHAPES, ids=["hd64", "hd128"])
def test_rope_power_of_two_head_dim(cpu, dtype, backward, shape):
    """Liger's halves at tile indices 0 and 1 of HD2 = hd // 2 wide tiles."""
    bsz, sl, nq, nk, hd, cbs = shape
    q, k, cos, sin = rope_inputs(*shape, dtype)
    qq, kk = q.copy(), k.copy()
    rope.rope[bsz * sl](qq, kk, cos, sin, np.int64(sl), rope.pow2(nq), rope.pow2(nk),
                        hd // 2, backward)
    assert_close(qq, rope.model(q, cos, sin, bsz, sl, backward), dtype, scale=True)
    assert_close(kk, rope.model(k, cos, sin, bsz, sl, backward), dtype, scale=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "bwd"])
@pytest.mark.parametrize("shape", ROPE_SHAPES + [(2, 7, 5, 3, 96, 2), (1, 3, 3, 1, 80, 1)],
                         ids=["hd64", "hd128", "hd96", "hd80"])
def test_rope_pairs_any_head_dim(cpu, dtype, backward, shape):
    """Workaround for a head_dim that is not a power of two: q viewed as
    (rows, 2 * heads, hd // 2), each head's halves split out of one tile."""
    bsz, sl, nq, nk, hd, cbs = shape
    q, k, cos, sin = rope_inputs(*shape, dtype)
    qq, kk = q.copy(), k.copy()
    h = hd // 2
    rope.rope_pairs[bsz * sl](qq.reshape(bsz * sl, 2 * nq, h), kk.reshape(bsz * sl, 2 * nk, h),
                              cos, sin, np.int64(sl), rope.pow2(nq), rope.pow2(nk),
                              rope.pow2(h), backward)
    assert_close(qq, rope.model(q, cos, sin, bsz, sl, backward), dtype, scale=True)
    assert_close(kk, rope.model(k, cos, sin, bsz, sl, backward), dtype, scale=True)


def test_rope_half_views_are_refused(cpu):
    """The first workaround for hd = 96 (q[..., :48] and q[..., 48:] as two arrays) is an
    AliasingError by design: the check compares byte ranges (docs/runtime.md)."""
    bsz, sl, nq, nk, hd, cbs = 2, 7, 5, 3, 96, 2
    q, k, cos, sin = rope_inputs(bsz, sl, nq, nk, hd, cbs, np.float32)
    h = hd // 2
    with pytest.raises(ox.AliasingError, match="overlaps"):
        rope.rope_halves[bsz * sl](q[..., :h], q[..., h:], k[..., :h], k[..., h:], cos, sin,
                                   np.int64(sl), rope.pow2(nq), rope.pow2(nk), rope.pow2(h),
                                   False)


# --- LayerNorm -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("rows,cols", [(7, 300), (3, 1000), (2, 33)])
def test_layer_norm_forward(cpu, dtype, rows, cols):
    rng = np.random.default_rng(rows + 3 * cols)
    x = (rand(rng, (rows, cols), np.float32, 3.0) + 1).astype(dtype)
    w, b = rand(rng, (cols,), dtype), rand(rng, (cols,), dtype)
    y, mean, rstd = np.zeros_like(x), np.zeros(rows, np.float32), np.zeros(rows, np.float32)
    ln.layer_norm_forward[rows](x, w, b, y, mean, rstd, np.float32(1e-5), ln.block_for(cols))
    want_y, want_mean, want_rstd = ln.forward_model(x, w, b, 1e-5)
    assert_close(mean, want_mean, np.float32, scale=True)
    assert_close(rstd, want_rstd, np.float32)
    assert_close(y, want_y, dtype, scale=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("rows,cols,programs", [(37, 300, 8), (4, 129, 6)])
def test_layer_norm_backward(cpu, dtype, rows, cols, programs):
    rng = np.random.default_rng(rows * cols)
    x = (rand(rng, (rows, cols), np.float32, 2.0) + 0.5).astype(dtype)
    w, dy = rand(rng, (cols,), dtype), rand(rng, (rows, cols), dtype)
    _, mean, rstd = ln.forward_model(x, w, w, 1e-5)
    mean, rstd = mean.astype(np.float32), rstd.astype(np.float32)
    dx = np.zeros_like(x)
    dw_part, db_part = (np.zeros((programs, cols), np.float32) for _ in range(2))
    ln.layer_norm_backward[programs](x, w, mean, rstd, dy, dx, dw_part, db_part,
                                     ln.block_for(cols))
    want_dx, want_dw, want_db = ln.backward_model(x, w, mean, rstd, dy)
    assert_close(dx, want_dx, dtype, scale=True)
    assert_close(dw_part.sum(axis=0), want_dw, np.float32, scale=True)
    assert_close(db_part.sum(axis=0), want_db, np.float32, scale=True)


# --- KL divergence ---------------------------------------------------------------------

def kl_inputs(rows: int, vocab: int, dtype: type, log_target: bool):
    rng = np.random.default_rng(rows + vocab)
    logits = rng.standard_normal((2, rows, vocab))
    logp = logits - np.log(np.exp(logits).sum(axis=2, keepdims=True))
    y = logp[0].astype(np.float32).astype(dtype)
    gt = (logp[1] if log_target else np.exp(logp[1])).astype(np.float32).astype(dtype)
    return y, gt


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("log_target", [False, True], ids=["prob", "logtarget"])
@pytest.mark.parametrize("reduction", [kl.NONE, kl.BATCHMEAN], ids=["none", "batchmean"])
@pytest.mark.parametrize("rows,vocab,block", [(5, 1000, 256), (3, 77, 128)])
def test_kl_div_forward(cpu, dtype, log_target, reduction, rows, vocab, block):
    y, gt = kl_inputs(rows, vocab, dtype, log_target)
    out = np.zeros((rows, vocab if reduction == kl.NONE else 1), np.float32)
    kl.kldiv_forward[rows](y, gt, out, np.float32(1e-10), log_target, reduction, block)
    want = kl.model(y, gt, 1e-10, log_target)
    if reduction == kl.NONE:
        # f32 math on the rounded inputs; log/exp within a few ulps
        assert_close(out, want, np.float32, rtol=1e-5, scale=True)
    else:
        assert_close(out[:, 0], want.sum(axis=1), np.float32, rtol=1e-5, scale=True)
        batchmean = out.sum() / rows
        assert abs(batchmean - want.sum() / rows) <= 1e-5 * np.abs(want).sum() / rows


# --- What the ports ran into, reduced to a few lines -----------------------------------

@tile.kernel(num_warps=4)
def store_f32_scalar_into_bf16(x: Slice[f32], out: DisjointSlice[bf16]):
    i = tile.bid(0)
    tile.store(out, (i,), tile.load(x, (i,), ()) * 2.0)


def test_scalar_store_converts_to_the_array_dtype(cpu):
    """language.md: `tile.store(arr, index, s)` with a scalar `s` (a 0-d tile or a number,
    converted to the array's dtype). A 0-d f32 tile into a bf16 array was refused (met in
    the RawSlice cross entropy: `tile.store(x, (row, y), x_y - ...)`); fixed."""
    x = np.arange(3, dtype=np.float32)
    out = np.zeros(3, BF16)
    store_f32_scalar_into_bf16[3](x, out)
    assert out.astype(np.float32).tolist() == [0.0, 2.0, 4.0]


@tile.func
def _sign_flip(v, FLIP):
    if FLIP:
        return -v
    return v


@tile.kernel(num_warps=4)
def early_return_in_func(x: Slice[f32], out: DisjointSlice[f32]):
    i = tile.bid(0)
    tile.store(out, (i,), _sign_flip(tile.load(x, (i,), (4,)), True))


def test_tile_func_return_error_points_at_the_return(cpu):
    """A documented limit (`@ox.tile.func` returns with its last statement); the diagnostic
    showed a line of the caller instead of the helper's `return -v` (fixed)."""
    with pytest.raises(ox.UnsupportedFeatureError) as info:
        early_return_in_func[1](np.zeros(4, np.float32), np.zeros(4, np.float32))
    assert "return -v" in str(info.value)
