"""Rows of any width (issue 31): the softmax and layer norm of the tile_wide_rows example
(the whole row in one tile while it fits, chunks past that) against NumPy on the CPU,
ragged widths and 16-bit rows included; on the GPU (`pytest -m gpu`) they, their tuned
forms and the whole-row examples against torch from 256 to 65536 columns."""

from __future__ import annotations

import numpy as np
import pytest

import oxide as ox
from oxide import bf16, tile
from oxide.examples import tile_layernorm, tile_softmax, tile_wide_rows
from oxide.ir.tile_ops import kind_of
from oxide.specialize import ConstValue
from oxide.tile.frontend import evaluate_body
from oxide.tile.register_budget import free_ops

EPS = np.float32(1e-5)


def softmax_ref(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layernorm_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=1, keepdims=True)
    return (x64 - mean) / np.sqrt(var + EPS) * w.astype(np.float64) + b.astype(np.float64)


def inputs(rows: int, cols: int, dtype: object, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols), dtype=np.float32) * 3 + 1).astype(dtype)
    w = rng.standard_normal(cols, dtype=np.float32).astype(dtype)
    b = rng.standard_normal(cols, dtype=np.float32).astype(dtype)
    return x, w, b


@pytest.mark.parametrize("cols", [1, 100, 256, 257, 1000, 2048])
@pytest.mark.parametrize("dtype", [np.float32, bf16.numpy])
def test_chunked_rows_match_numpy_on_the_cpu(cols: int, dtype: object) -> None:
    """BN = 256: up to 256 columns the row is one tile (one partial, one exact); past
    that, chunks (one partial chunk, exact multiples, many chunks)."""
    x, w, b = inputs(5, cols, dtype, cols)
    soft, norm = np.zeros_like(x), np.zeros_like(x)
    tol = 1e-5 if dtype == np.float32 else 2 ** -7
    with ox.device("cpu"):
        tile_wide_rows.softmax_rows[5](x, soft, 256)
        tile_wide_rows.layernorm_rows[5](x, w, b, norm, EPS, 256)
    np.testing.assert_allclose(soft.astype(np.float64), softmax_ref(x), rtol=tol, atol=1e-7)
    np.testing.assert_allclose(norm.astype(np.float64), layernorm_ref(x, w, b), rtol=tol,
                               atol=tol * 8)


def test_a_row_whose_large_values_come_last() -> None:
    """The running maximum rises chunk by chunk: the sum is rescaled each time."""
    x = np.linspace(-50.0, 80.0, 3 * 256 + 7, dtype=np.float32)[None, :].repeat(2, 0)
    soft = np.zeros_like(x)
    with ox.device("cpu"):
        tile_wide_rows.softmax_rows[2](x, soft, 256)
    np.testing.assert_allclose(soft, softmax_ref(x), rtol=1e-5, atol=1e-30)


def test_chunked_layernorm_keeps_its_precision_far_from_zero() -> None:
    """Rows of mean 1000 and spread 1: E[x^2] - E[x]^2 in f32 would lose the variance to
    cancellation (an ulp of 10^6 is 0.06); Welford's running deviations keep it."""
    x, w, b = inputs(3, 1000, np.float32, 5)
    x = (x - 1) / 3 + np.float32(1000)
    norm = np.zeros_like(x)
    with ox.device("cpu"):
        tile_wide_rows.layernorm_rows[3](x, w, b, norm, EPS, 256)
    np.testing.assert_allclose(norm, layernorm_ref(x, w, b), rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("cols", [256, 1000, 4096, 32768, 65536])
def test_rows_of_every_width_on_the_gpu(cols: int) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs torch with CUDA")
    rows, block = 64, 1 << (cols - 1).bit_length()
    x = torch.randn(rows, cols, device="cuda") * 3 + 1
    w, b = torch.randn(cols, device="cuda"), torch.randn(cols, device="cuda")
    soft = torch.softmax(x.double(), 1)
    norm = torch.nn.functional.layer_norm(x.double(), (cols,), w.double(), b.double(), 1e-5)
    y = torch.empty_like(x)
    for launch, want in (
            (lambda: ox.launch(tile_softmax.tile_softmax, rows, x, y, block), soft),
            (lambda: ox.launch(tile_wide_rows.softmax_rows, rows, x, y, 4096), soft),
            (lambda: ox.launch(tile_layernorm.tile_layernorm, rows, x, w, b, y, EPS, block),
             norm),
            (lambda: ox.launch(tile_wide_rows.layernorm_rows, rows, x, w, b, y, EPS, 4096),
             norm)):
        y.zero_()
        launch()
        torch.testing.assert_close(y.double(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("cols", [3000, 65536 + 7])
def test_tuned_rows_on_the_gpu(cols: int) -> None:
    """softmax_tuned and layernorm_tuned: every config they time must be right, and the
    one chosen is, on a row that fits one tile and on one that takes chunks."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs torch with CUDA")
    rows = 128
    x = (torch.randn(rows, cols, device="cuda") * 3 + 1).to(torch.bfloat16)
    w, b = (torch.randn(cols, device="cuda").to(torch.bfloat16) for _ in range(2))
    soft = torch.softmax(x.double(), 1)
    norm = torch.nn.functional.layer_norm(x.double(), (cols,), w.double(), b.double(), 1e-5)
    y = torch.empty_like(x)
    for bn, warps, stages, occupancy in tile_wide_rows.ROW_CONFIGS:
        options = ox.Config(BN=bn, num_warps=warps, num_stages=stages, occupancy=occupancy)
        softmax = ox.autotune(configs=[options], key=["x"])(tile_wide_rows.softmax_rows)
        ox.launch(softmax, rows, x, y)
        torch.testing.assert_close(y.double(), soft, rtol=2 ** -7, atol=1e-6)
    ox.launch(tile_wide_rows.softmax_tuned, rows, x, y)
    torch.testing.assert_close(y.double(), soft, rtol=2 ** -7, atol=1e-6)
    ox.launch(tile_wide_rows.layernorm_tuned, rows, x, w, b, y, EPS)
    torch.testing.assert_close(y.double(), norm, rtol=2 ** -6, atol=2 ** -6)


def _warnings_of(compile_it) -> list[str]:
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compile_it()
    return [str(w.message) for w in caught if issubclass(w.category, ox.PerformanceWarning)]


def _fixed(kernel, **options):
    """A shipped `num_warps="auto"` example on fixed warps, as it was before it chose."""
    return ox.tile.kernel(**options)(kernel.fn)


def test_a_row_too_wide_for_the_registers_is_warned_of_with_the_way_out() -> None:
    """65536 f32 columns on 8 warps: 256 registers a thread for the row alone. The warning
    points at the load, and shows the chunk loop; chunks, more warps, the warps the
    compiler chooses and the CPU: none."""
    sig = (ox.Slice[ox.f32, 2], ox.DisjointSlice[ox.f32, 2])
    on8 = _fixed(tile_softmax.tile_softmax, num_warps=8)
    found = _warnings_of(lambda: on8.compile(*sig, 65536, arch="sm_90"))
    assert len(found) == 1
    assert "1 x 65536 f32 tile takes 256 registers" in found[0]
    assert "num_warps=16" in found[0] and "for c in range(tile.num_tiles(x, 1, BN))" in found[0]
    assert _warnings_of(lambda: on8.compile(*sig, 32768, arch="sm_90")) == []
    assert _warnings_of(lambda: tile_wide_rows.softmax_rows.compile(*sig, 4096,
                                                                      arch="sm_90")) == []
    assert _warnings_of(lambda: on8.compile(*sig, 65536, arch="cpu")) == []
    assert _warnings_of(lambda: tile_softmax.tile_softmax.compile(*sig, 65536,
                                                                  arch="sm_90")) == []
    # 262144 columns: 256 registers a thread on 32 warps, and no more warps to give
    (found,) = _warnings_of(lambda: tile_softmax.tile_softmax.compile(*sig, 1 << 18,
                                                                      arch="sm_90"))
    assert "help: walk the row in chunks through a loop" in found and "num_warps=" not in found


def test_tiles_live_at_once_past_the_occupancy_cap_are_warned_of() -> None:
    """tile_layernorm on 8 warps at occupancy=4 (64 registers a thread): the row centred,
    the weight and the bias are live together. At 32768 f32 columns they take 256
    registers (ptxas spills 4.7 KB, 0.2x Triton on the H200); at 8192, 64 (256 bytes,
    full speed). The warps the compiler chooses warn at neither."""
    sig = (ox.Slice[ox.f32, 2], ox.Slice[ox.f32], ox.Slice[ox.f32], ox.DisjointSlice[ox.f32, 2],
           ox.f32)
    norm = _fixed(tile_layernorm.tile_layernorm, num_warps=8, occupancy=4)
    (found,) = _warnings_of(lambda: norm.compile(*sig, 32768, arch="sm_90"))
    assert "take 256 registers" in found and "`occupancy=4` caps a thread at 64" in found
    assert "a lower `occupancy` than 4" in found
    assert _warnings_of(lambda: norm.compile(*sig, 8192, arch="sm_90")) == []
    assert _warnings_of(lambda: norm.compile(*sig, 32768, arch="cpu")) == []
    auto = tile_layernorm.tile_layernorm
    assert _warnings_of(lambda: [auto.compile(*sig, cols, arch="sm_90")
                                 for cols in (8192, 32768, 65536)]) == []


def test_index_arithmetic_takes_no_registers_in_the_estimate() -> None:
    """Attention's causal mask (`first_key + tile.arange(BN)[None, :] <= rows`) is index
    arithmetic LLVM folds into each slot's offset and predicate: counted as 96 registers
    a thread, it made the shipped kernel warn at every head dim, where ptxas gave it 168
    registers and no spills (H100, 2026-12-05). Float arithmetic on an arange still
    counts."""
    from test_tile_tma_rings import V

    from oxide.examples import tile_attention as ta

    bf = ox.bf16
    sig = (V(ox.Slice[bf, 2], vectors=True),) * 3 + (V(ox.DisjointSlice[bf, 2], vectors=True),)
    def attention(d: int) -> None:
        bm, bn = ta.gpu_block(d)
        ta.tile_attention.compile(*sig, 4096, np.float32(0.1), bm, bn, d, True, arch="sm_90")

    assert _warnings_of(lambda: [attention(d) for d in (64, 128, 256)]) == []

    @ox.tile.kernel(num_warps=4)
    def ramps(out: ox.DisjointSlice[ox.f32, 2], BN: ox.Const[int]):
        idx = tile.bid(0) * BN + tile.arange(BN)[None, :]
        tile.store(out, (tile.bid(0), 0), tile.where(idx < 7, idx.astype(ox.f32) * 0.5, 1.0))

    b, _, _ = evaluate_body(ramps, (ox.DisjointSlice[ox.f32, 2], ConstValue(256)), "ramps")
    counted = [kind_of(op) for op in b.tile_ops if id(op) not in free_ops(b.tile_ops)]
    assert counted.count("binary") == 1  # the f32 product; the index sum is free
    assert "compare" not in counted and "cast" in counted  # i32 -> f32 is a float tile
