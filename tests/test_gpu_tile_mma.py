"""tile.mma and `@` on the GPU: tests/test_tile_mma.py's kernels against NumPy, the
tile_matmul example at its GPU size (4096^3 bf16, and f32), and a 4096^3 bf16 product
of values whose sums are exact in f32 (so the tensor cores' summation order cannot
matter: the result must equal NumPy's bit for bit)."""

from __future__ import annotations

import numpy as np
import pytest
import test_tile_mma as tm

import oxide as ox
from oxide import bf16, examples, f32, tile

pytestmark = pytest.mark.gpu


def gpu(kernel, grid, *args):
    """Launch on GPU 0 with copies of the NumPy arrays; the results copied back."""
    dev = [ox.to_device(x) if isinstance(x, np.ndarray) else x for x in args]
    kernel[grid](*dev)
    for x, d in zip(args, dev, strict=True):
        if isinstance(x, np.ndarray):
            x[...] = d.to_numpy()


def test_tile_matmul_example_on_gpu():
    result = examples.load("tile_matmul").main(device=0)
    assert result.passed, str(result)


@pytest.mark.parametrize("size", [1, 100, 1000])
def test_tile_matmul_example_ragged_on_gpu(size):
    result = examples.load("tile_matmul").main(device=0, size=size)
    assert result.passed, str(result)


@pytest.mark.parametrize("case", tm.CASES, ids=lambda c: "-".join(map(str, c)))
def test_mma_against_numpy_on_gpu(case):
    dt, *rest = case
    got, want = tm.run_matmul(dt, *rest, run=gpu)
    tol = 1e-12 if dt.name == "f64" else 1e-4 * np.sqrt(rest[3])
    np.testing.assert_allclose(got, want, rtol=0, atol=tol)


@pytest.mark.parametrize("case", tm.QKT_CASES, ids=lambda c: "-".join(map(str, c)))
def test_loop_invariant_a_and_transposed_b_on_gpu(case):
    dt, *rest = case
    got, want = tm.run_qkt(dt, *rest, run=gpu)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.sqrt(rest[2] * rest[-1]))


def test_matmul_4096_bf16_exact_on_gpu():
    rng = np.random.default_rng(31)
    n = 4096
    a = (rng.integers(-8, 9, (n, n)) * 0.25).astype(bf16.numpy)
    b = (rng.integers(-8, 9, (n, n)) * 0.25).astype(bf16.numpy)
    c = ox.to_device(np.zeros((n, n), np.float32))
    from oxide.examples.tile_matmul import GPU_TILE

    bm, bn, bk = GPU_TILE
    kernel = tm.make_matmul(bf16, f32, 8)
    kernel[(tile.cdiv(n, bm), tile.cdiv(n, bn))](ox.to_device(a), ox.to_device(b), c, bm, bn, bk)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_array_equal(c.to_numpy(), want)


def test_matmul_operator_and_epilogue_on_gpu():
    rng = np.random.default_rng(32)
    a = rng.standard_normal((30, 32)).astype(bf16.numpy)
    b = rng.standard_normal((32, 13)).astype(bf16.numpy)
    w = rng.standard_normal((32, 13)).astype(np.float32)
    c, cw = np.zeros((30, 13), bf16.numpy), np.zeros((30, 13), np.float32)
    c32 = np.zeros((30, 13), np.float32)
    gpu(tm.matmul_operator, 1, a, b, c, c32, w, cw)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c32, exact, rtol=1e-6, atol=1e-5)  # f32 sums, unrounded
    # the bf16 result is the f32 one rounded once
    np.testing.assert_array_equal(c.astype(np.float32), c32.astype(bf16.numpy).astype(np.float32))
    np.testing.assert_allclose(cw, a.astype(np.float64) @ w.astype(np.float64), atol=1e-4)
    m, k = 64, 48
    a = rng.standard_normal((m, k)).astype(bf16.numpy)
    b = rng.standard_normal((k, 32)).astype(bf16.numpy)
    bias = rng.standard_normal((1, 32)).astype(np.float32)
    c = np.zeros((m, 32), bf16.numpy)
    rows, scan = np.zeros((m, 1), np.float32), np.zeros((m, 32), np.float32)
    cols, best = np.zeros((2, 32), np.float32), np.zeros((m, 1), np.int32)
    gpu(tm.epilogue, 2, a, b, bias, c, rows, scan, cols, best, 16)
    tm.check_epilogue(a, b, bias, c, rows, scan, cols, best)


@pytest.mark.parametrize("size", [100, 1024])
def test_tile_attention_example_on_gpu(size):
    result = examples.load("tile_attention").main(device=0, size=size)
    assert result.passed, str(result)


@pytest.mark.parametrize("causal", [True, False])
def test_attention_against_numpy_on_gpu(causal):
    from oxide.examples import tile_attention as ta

    rng = np.random.default_rng(33)
    heads, seq, d = 3, 256, 64
    q, k, v = (rng.standard_normal((heads * seq, d)).astype(bf16.numpy) for _ in range(3))
    o = np.zeros_like(q)
    gpu(ta.tile_attention, heads * seq // 32, q, k, v, o, seq, np.float32(1 / np.sqrt(d)),
        32, 16, d, causal)
    want = ta.reference(q, k, v, heads, causal)
    np.testing.assert_allclose(o.astype(np.float32), want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("causal", [True, False])
def test_attention_with_pipelined_rings_on_gpu(causal):
    """The example's 128 x 128 blocks with `num_stages=2`: each step's K and V copied a
    step ahead into rings while `p @ v` takes p from registers (wgmma's rs form)."""
    import oxide as ox
    from oxide.examples import tile_attention as ta

    rng = np.random.default_rng(34)
    heads, seq, d = 2, 512, 128
    q, k, v = (rng.standard_normal((heads * seq, d)).astype(bf16.numpy) for _ in range(3))
    o = np.zeros_like(q)
    staged = ox.autotune(configs=[ox.Config(num_stages=2)])(ta.tile_attention)
    gpu(staged, heads * seq // 128, q, k, v, o, seq, np.float32(1 / np.sqrt(d)), 128, 128, d,
        causal)
    want = ta.reference(q, k, v, heads, causal)
    np.testing.assert_allclose(o.astype(np.float32), want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("d, bn", [(64, 128), (64, 256), (128, 128), (256, 64)])
def test_attention_against_torch_sdpa(d, bn, causal):
    """The example as shipped (128 query rows a block, `num_stages=2`: K and V by TMA from a
    producer warp group on sm_90) at head dims 64, 128 and 256, from torch tensors, against
    torch's scaled_dot_product_attention."""
    torch = pytest.importorskip("torch")
    from oxide.examples import tile_attention as ta

    torch.manual_seed(d + bn + causal)
    b, h, s = 2, 3, 1024
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = torch.zeros_like(q)
    flat = [x.view(b * h * s, d) for x in (q, k, v, o)]
    ox.launch(ta.tile_attention, b * h * s // 128, *flat, s, 1 / d ** 0.5, 128, bn, d, causal)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(o, want, rtol=2e-2, atol=2e-2)


def test_a_resident_operand_outlives_its_loop_on_gpu():
    """test_tile_attention_rings.reused_a on the GPU: A's one buffer stays until A is
    loaded again, though the loop's other rings are given back when it settles."""
    from test_tile_attention_rings import reused_a

    rng = np.random.default_rng(10)
    a = rng.standard_normal((1024, 64)).astype(bf16.numpy)
    b = rng.standard_normal((64, 256)).astype(bf16.numpy)
    c = np.zeros((1024, 256), np.float32)
    gpu(reused_a, (8, 4), a, b, c, 128, 64, 64)
    prods = a.astype(np.float64) @ b.astype(np.float64)
    sums = sum(prods[:, 64 * t:64 * t + 64] for t in range(4))
    np.testing.assert_allclose(c, np.tile(sums, (1, 4)) + prods, rtol=1e-4, atol=1e-3)


def test_nested_pipelined_loops_on_gpu():
    """test_tile_attention_rings.nested_loops on the GPU: two pipelined loops over the same
    tiles, one inside the other, each on its own ring."""
    from test_tile_attention_rings import nested_loops

    rng = np.random.default_rng(13)
    a = rng.standard_normal((256, 64)).astype(bf16.numpy)
    b = rng.standard_normal((64, 320)).astype(bf16.numpy)
    c = np.zeros((256, 128), np.float32)
    gpu(nested_loops, (4, 2), a, b, c, 64, 64, 64)
    tiles = [a.astype(np.float64) @ b[:, 64 * t:64 * t + 64].astype(np.float64)
             for t in range(5)]
    want = sum(tiles) + sum(tiles[s] for t in range(5) for s in range(t + 1))
    np.testing.assert_allclose(c, np.tile(want, (1, 2)), rtol=1e-4, atol=2e-3)
