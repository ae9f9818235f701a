"""tile.mma and `@` without a GPU: the accumulator layout, the CPU's run of the very
lowering the GPU gets (ldmatrix fragments and mma.sync, emulated lane by lane) against
NumPy for bf16, f16, f32 and f64 with ragged edges, accumulators chained over a k loop,
epilogues that meet other layouts, the PTX (tensor-core instructions, no spills), and
the diagnostics.

tests/test_gpu_tile_mma.py runs the same kernels on the GPU.
"""

from __future__ import annotations

import inspect
import math
import re

import numpy as np
import pytest
from test_wgmma_tma import info_log

import oxide as ox
from oxide import Const, DisjointSlice, Slice, bf16, f16, f32, f64, i32, tile
from oxide.tile.layout import blocked, mma_accumulator, mma_warps

pytest.importorskip("ml_dtypes")  # NumPy's bfloat16
rng = np.random.default_rng(21)
NP = {"bf16": bf16.numpy, "f16": np.float16, "f32": np.float32, "f64": np.float64}


def cpu(kernel, grid, *args):
    with ox.device("cpu"):
        kernel[grid](*args)


# -- layouts ---------------------------------------------------------------------------


def _elements(layout, warps):
    """{coordinate: number of canonical holders}, and every thread's coordinates, from
    the layout's formula (what TileEmitter.base/owner compute)."""
    shape = layout.shape
    seen: dict[tuple[int, ...], int] = {}
    lane_free = 31 & ~layout.lane_bits()
    warp_free = (warps - 1) & ~layout.warp_bits()
    for t in range(warps * 32):
        lane, warp = t % 32, t // 32
        base, owner = [], not (lane & lane_free) and not (warp & warp_free)
        for d, m in enumerate(layout.dims):
            w = (warp >> m.warp_shift) & (m.wpc - 1)
            raw = (w * m.tpw * m.inner + ((lane >> m.lane_shift) & (m.tpw - 1))) * m.spt
            if m.span > shape[d]:
                owner &= raw < shape[d]
            base.append(raw & (shape[d] - 1))
        for offs in layout.offsets():
            coord = tuple(b + o for b, o in zip(base, offs, strict=True))
            assert all(0 <= c < n for c, n in zip(coord, shape, strict=True))
            if owner:
                seen[coord] = seen.get(coord, 0) + 1
    return seen


@pytest.mark.parametrize("shape", [(16, 8), (16, 16), (32, 64), (128, 128), (64, 256),
                                   (256, 16)])
@pytest.mark.parametrize("warps", [1, 4, 8])
def test_mma_accumulator_covers_every_element_once(shape, warps):
    layout = mma_accumulator(shape, warps)
    seen = _elements(layout, warps)
    assert len(seen) == math.prod(shape) and set(seen.values()) == {1}
    assert layout.slots * min(warps, layout.dims[0].wpc * layout.dims[1].wpc) * 32 \
        == math.prod(shape)


def test_mma_accumulator_is_mma_sync_fragment():
    """Lane l of warp 0 holds rows g + 8i, columns 2t + s + 8j (PTX's C fragment)."""
    layout = mma_accumulator((32, 16), 1)
    rows, cols = layout.dims
    assert (rows.lane_shift, rows.tpw, rows.inner, cols.spt, cols.tpw, cols.inner) == \
        (2, 8, 4, 2, 4, 2)
    assert layout.offsets()[:4] == [(0, 0), (0, 1), (0, 8), (0, 9)]
    assert not layout.is_blocked and blocked((32, 16), 1).is_blocked


def test_mma_warps_split_the_tile():
    assert mma_warps((128, 128), 8) == (4, 2)
    assert mma_warps((128, 128), 4) == (2, 2)
    assert mma_warps((16, 256), 4) == (1, 4)
    assert mma_warps((16, 8), 8) == (1, 1)  # the other warps hold replicas
    assert mma_accumulator((8, 64), 4) is None and mma_accumulator((16, 4), 4) is None


@pytest.mark.parametrize("shape", [(1,), (128,), (4, 8), (64, 32), (16, 128)])
def test_blocked_layouts_keep_inner_one(shape):
    layout = blocked(shape, 4)
    assert all(m.inner == 1 for m in layout.dims)
    for d, m in enumerate(layout.dims):
        assert m.span == m.spt * m.tpw * m.wpc
        assert layout.reps(d) == max(1, shape[d] // m.span)


# -- products on the CPU ------------------------------------------------------------------


def make_matmul(dt, acc_dt, warps):
    @tile.kernel(num_warps=warps)
    def mm(a: Slice[dt, 2], b: Slice[dt, 2], c: DisjointSlice[acc_dt, 2], BM: Const[int],
           BN: Const[int], BK: Const[int]):
        i, j = tile.bid(0), tile.bid(1)
        acc = tile.zeros((BM, BN), acc_dt)
        for k in range(tile.num_tiles(a, 1, BK)):
            acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)), acc)
        tile.store(c, (i, j), acc)
    return mm


def run_matmul(dt, warps, m, n, k, bm, bn, bk, run=cpu):
    acc_dt = f64 if dt is f64 else f32
    a = rng.standard_normal((m, k)).astype(NP[dt.name])
    b = rng.standard_normal((k, n)).astype(NP[dt.name])
    c = np.zeros((m, n), NP[acc_dt.name])
    run(make_matmul(dt, acc_dt, warps), (tile.cdiv(m, bm), tile.cdiv(n, bn)), a, b, c,
        bm, bn, bk)
    return c, a.astype(np.float64) @ b.astype(np.float64)


CASES = [  # dtype, warps, M, N, K, BM, BN, BK
    (bf16, 4, 70, 50, 90, 32, 32, 32),     # ragged in every dimension, 3 k tiles
    (bf16, 8, 64, 64, 64, 64, 64, 16),     # 8 warps as 4 x 2, one k16 step per tile
    (bf16, 1, 33, 20, 40, 32, 16, 32),     # one warp, two instruction tiles each way
    (f16, 4, 40, 72, 48, 16, 64, 16),      # f16; warps 1 x 4 along N
    (bf16, 8, 20, 9, 33, 16, 8, 16),       # one instruction tile (x2 ldmatrix for B), 7 warps of replicas
    (bf16, 4, 5, 7, 3, 4, 8, 4),           # smaller than an instruction: FMA loop
    (f32, 4, 70, 50, 90, 32, 32, 32),      # f32: exact multiply-adds
    (f64, 4, 30, 20, 10, 16, 16, 8),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_mma_against_numpy(case):
    dt, *rest = case
    got, want = run_matmul(dt, *rest)
    if dt.bits == 16:
        # products of 16-bit floats are exact in f32: only the f32 sums round
        tol = 1e-5 * np.sqrt(rest[3])
    elif dt is f32:
        tol = 1e-5 * np.sqrt(rest[3])
    else:
        tol = 1e-12
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * 4)


def make_qkt(dt, warps):
    """`acc += q @ k_j.T` over j: `q` made before the loop (the layout pass keeps it in
    registers as A fragments) and the B operand a transposed load (folded into the
    product: ldmatrix without `.trans` on the untransposed tile)."""
    @tile.kernel(num_warps=warps)
    def qkt(q: Slice[dt, 2], k: Slice[dt, 2], c: DisjointSlice[f32, 2], BM: Const[int],
            BN: Const[int], D: Const[int], STEPS: Const[int]):
        i = tile.bid(0)
        qt = tile.load(q, (i, 0), (BM, D))
        acc = tile.zeros((BM, BN), f32)
        for j in range(STEPS):
            acc = tile.mma(qt, tile.load(k, (j, 0), (BN, D)).permute((1, 0)), acc)
        tile.store(c, (i, 0), acc)
    return qkt


def run_qkt(dt, warps, m, rows_k, d, bm, bn, width, steps, run=cpu):
    """(result, f64 reference) of `make_qkt` over a (m, d) q and a (rows_k, d) k, tiles of
    (bm, width) and (bn, width): rows and columns past the arrays are zero padding."""
    q = rng.standard_normal((m, d)).astype(NP[dt.name])
    k = rng.standard_normal((rows_k, d)).astype(NP[dt.name])
    c = np.zeros((m, bn), np.float32)
    run(make_qkt(dt, warps), tile.cdiv(m, bm), q, k, c, bm, bn, width, steps)
    kp = np.zeros((steps * bn, d))
    kp[:min(rows_k, steps * bn)] = k[:steps * bn].astype(np.float64)
    ksum = kp.reshape(steps, bn, d).sum(0)
    return c, q.astype(np.float64) @ ksum.T


QKT_CASES = [  # dtype, warps, M, rows of k, D, BM, BN, D tile, steps
    (bf16, 4, 64, 64, 32, 64, 32, 32, 2),    # warps 4 x 1: A rows split, B whole
    (bf16, 8, 128, 96, 64, 128, 64, 64, 2),  # 4 x 2 warps (the N warps share A), ragged k
    (f16, 4, 40, 48, 20, 32, 16, 32, 3),     # ragged q and D; one n8 tile a warp (x2)
    (bf16, 1, 16, 8, 16, 16, 8, 16, 1),      # one warp, one instruction
]


@pytest.mark.parametrize("case", QKT_CASES, ids=lambda c: "-".join(map(str, c)))
def test_loop_invariant_a_and_transposed_b_against_numpy(case):
    dt, *rest = case
    got, want = run_qkt(dt, *rest)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.sqrt(rest[2] * rest[-1]))


def test_the_layout_pass_keeps_q_in_registers_and_folds_the_transpose(monkeypatch, capfd):
    monkeypatch.setenv("OXIDE_DUMP", "tile")
    monkeypatch.setenv("OXIDE_CACHE", "0")
    # the mma.sync engine's layout pass, as sm_80 runs it (the CPU runs every product as
    # an FMA loop; sm_90 takes this product on wgmma, staging q in shared memory)
    make_qkt(bf16, 8).compile(Slice[bf16, 2], Slice[bf16, 2], DisjointSlice[f32, 2], 128,
                              64, 64, 2, arch="sm_80")
    text = capfd.readouterr().err
    assert '"tile.permute"' not in text and "b_transposed=True" in text
    # q's conversion to the A-fragment layout: once, before the loop (in the entry's
    # successor block, not the loop body)
    from oxide.ir.tile_ops import _layout_text
    from oxide.tile.layout import mma_operand_a

    wm, _ = mma_warps((128, 64), 8)  # no row reductions here: the default split
    assert text.count(f"to={_layout_text(mma_operand_a((128, 64), wm, 8))}") == 1
    ck = make_qkt(bf16, 8).compile(Slice[bf16, 2], Slice[bf16, 2], DisjointSlice[f32, 2],
                                   128, 64, 64, 2, arch="sm_80")
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ck.ptx  # B without .trans
    assert ".trans" not in ck.ptx


@tile.kernel(num_warps=4)
def matmul_operator(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[bf16, 2],
                    c32: DisjointSlice[f32, 2], w: Slice[f32, 2], cw: DisjointSlice[f32, 2]):
    """`@` promotes as `+` does and multiplies in the accumulating type: bf16 @ bf16 is
    an f32 tile (as Triton's `tl.dot`), one `.astype(bf16)` from a bf16 one; bf16 @ f32
    is f32."""
    x, y = tile.load(a, (0, 0), (32, 32)), tile.load(b, (0, 0), (32, 16))
    tile.store(c, (0, 0), (x @ y).astype(bf16))
    tile.store(c32, (0, 0), x @ y)
    tile.store(cw, (0, 0), x @ tile.load(w, (0, 0), (32, 16)))


def test_matmul_operator_of_halves_is_f32():
    a = rng.standard_normal((30, 32)).astype(bf16.numpy)
    b = rng.standard_normal((32, 13)).astype(bf16.numpy)
    w = rng.standard_normal((32, 13)).astype(np.float32)
    c, cw = np.zeros((30, 13), bf16.numpy), np.zeros((30, 13), np.float32)
    c32 = np.zeros((30, 13), np.float32)
    cpu(matmul_operator, 1, a, b, c, c32, w, cw)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c32, exact, rtol=1e-6, atol=1e-5)  # f32 sums, unrounded
    # the bf16 result is the f32 one rounded once
    np.testing.assert_array_equal(c.astype(np.float32), c32.astype(bf16.numpy).astype(np.float32))
    np.testing.assert_allclose(cw, a.astype(np.float64) @ w.astype(np.float64), atol=1e-4)


@tile.kernel(num_warps=4)
def epilogue(a: Slice[bf16, 2], b: Slice[bf16, 2], bias: Slice[f32, 2],
             c: DisjointSlice[bf16, 2], rows: DisjointSlice[f32, 2],
             scan: DisjointSlice[f32, 2], cols: DisjointSlice[f32, 2],
             best: DisjointSlice[i32, 2], BK: Const[int]):
    """The accumulator meets a blocked tile (`+ bias`), a scalar, reductions along each
    axis (lanes and warps of the mma layout), argmax and a scan; it is carried through an
    `if` too."""
    i = tile.bid(0)
    acc = tile.zeros((32, 32), f32)
    for k in range(tile.num_tiles(a, 1, BK)):
        acc = tile.mma(tile.load(a, (i, k), (32, BK)), tile.load(b, (k, 0), (BK, 32)), acc)
    if tile.num_blocks(0) > 0:
        acc = acc * 0.5
    out = acc + tile.load(bias, (0, 0), (1, 32))
    tile.store(c, (i, 0), out.astype(bf16))
    tile.store(rows, (i, 0), tile.sum(out, 1, keepdims=True))
    tile.store(scan, (i, 0), tile.cumsum(out, 1))
    tile.store(cols, (i, 0), tile.sum(out, 0, keepdims=True))
    tile.store(best, (i, 0), tile.argmax(out, 1, keepdims=True))


def test_mma_result_meets_other_layouts():
    m, k = 64, 48
    a = rng.standard_normal((m, k)).astype(bf16.numpy)
    b = rng.standard_normal((k, 32)).astype(bf16.numpy)
    bias = rng.standard_normal((1, 32)).astype(np.float32)
    c = np.zeros((m, 32), bf16.numpy)
    rows, scan = np.zeros((m, 1), np.float32), np.zeros((m, 32), np.float32)
    cols, best = np.zeros((2, 32), np.float32), np.zeros((m, 1), np.int32)
    cpu(epilogue, 2, a, b, bias, c, rows, scan, cols, best, 16)
    check_epilogue(a, b, bias, c, rows, scan, cols, best)


def check_epilogue(a, b, bias, c, rows, scan, cols, best):
    want = (a.astype(np.float64) @ b.astype(np.float64)) * 0.5 + bias
    np.testing.assert_allclose(c.astype(np.float32), want, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(rows[:, 0], want.sum(1), atol=1e-3)
    np.testing.assert_allclose(scan, np.cumsum(want, 1), atol=1e-3)
    np.testing.assert_allclose(cols, want.reshape(2, 32, 32).sum(1), atol=1e-3)
    np.testing.assert_array_equal(best[:, 0], want.argmax(1))


# -- the GPU code, without a GPU ----------------------------------------------------------


@pytest.mark.parametrize("dt", [bf16, f16])
def test_k_loop_keeps_the_accumulator_in_registers(dt):
    """The loop's only barriers are the operands' two: the accumulator is carried in the
    mma layout, not converted through shared memory each iteration."""
    a = np.zeros((64, 64), NP[dt.name])
    ck = make_matmul(dt, f32, 4).compile(a, a, np.zeros((64, 64), np.float32), 64, 64, 32,
                                         arch="sm_80")
    ptx = ck.ptx
    name = dt.name
    assert ptx.count(f"mma.sync.aligned.m16n8k16.row.col.f32.{name}.{name}.f32") == 2 * 2 * 4
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 2 * 2
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == 2 * 2
    assert ptx.count("bar.sync") == 2


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_example_tile_compiles_without_spills(arch):
    from oxide.examples import tile_matmul as ex

    a = np.zeros((256, 256), bf16.numpy)
    ck = ex.tile_matmul.compile(a, a, a.copy(), *ex.tiles_for(arch), arch=arch)
    log = info_log(ck.ptx, ck.arch)
    if arch == "sm_90":  # a warp group per 64 rows: the wgmma engine
        assert "wgmma.mma_async" in ck.ptx and "mma.sync" not in ck.ptx
        # nothing runs the wgmma one at a time (C7509: a call, a 64-bit division is one)
        assert "serialized" not in log, log
        # its producer warp group's setmaxnreg: loaded through the driver's whole-program
        # JIT, which honours it; nvJitLink's relocatable code ignores it (C7504) and caps
        # the consumers at 168 registers, so their spills are checked on a GPU
        # (tests/test_gpu_tile_producer.py)
        assert "setmaxnreg" in ck.ptx
        # four stages of rings: the 128 x 256 result goes out by TMA in 4 slabs of 64
        # columns through two buffers, each warp group its own 64 rows
        # (tile/tma_stores.py), not by each thread's stores
        assert ck.ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == 4
        assert "st.global" not in ck.ptx
        return
    assert "mma.sync.aligned.m16n8k16" in ck.ptx and "ldmatrix.sync.aligned" in ck.ptx
    assert "0 bytes spill stores, 0 bytes spill loads" in log, log
    assert "0 bytes lmem" in log or "lmem" not in log, log


def test_f32_product_is_not_tf32():
    a = np.zeros((64, 64), np.float32)
    ck = make_matmul(f32, f32, 4).compile(a, a, a.copy(), 32, 32, 16, arch="sm_80")
    assert "mma" not in ck.ptx and "fma.rn.f32" in ck.ptx


# -- diagnostics ---------------------------------------------------------------------------

M8 = np.zeros((8, 8), np.float32)
MB = np.zeros((8, 8), bf16.numpy)


@tile.kernel
def inner_mismatch(a: Slice[f32, 2], o: DisjointSlice[f32, 2]):
    x = tile.load(a, (0, 0), (16, 8))
    tile.store(o, (0, 0), x @ x)


@tile.kernel
def dtype_mismatch(a: Slice[f32, 2], b: Slice[bf16, 2], o: DisjointSlice[f32, 2]):
    x, y = tile.load(a, (0, 0), (16, 16)), tile.load(b, (0, 0), (16, 16))
    tile.store(o, (0, 0), tile.mma(x, y, tile.zeros((16, 16))))


@tile.kernel
def acc_shape(a: Slice[f32, 2], o: DisjointSlice[f32, 2]):
    x = tile.load(a, (0, 0), (16, 16))
    tile.store(o, (0, 0), tile.mma(x, x, tile.zeros((16, 8))))


@tile.kernel
def acc_dtype(a: Slice[bf16, 2], o: DisjointSlice[bf16, 2]):
    x = tile.load(a, (0, 0), (16, 16))
    tile.store(o, (0, 0), tile.mma(x, x, tile.zeros((16, 16), bf16)))


@tile.kernel
def rank_one(a: Slice[f32, 2], o: DisjointSlice[f32, 2]):
    x = tile.load(a, (0, 0), (16, 16))
    tile.store(o, (0, 0), tile.sum(x, 1) @ x)


@tile.kernel
def integer_mma(a: Slice[f32, 2], o: DisjointSlice[f32, 2]):
    x = tile.load(a, (0, 0), (16, 16)).astype(ox.i8)
    tile.store(o, (0, 0), (x @ x).astype(f32))


@tile.kernel
def literal_operand(a: Slice[f32, 2], o: DisjointSlice[f32, 2]):
    x = tile.load(a, (0, 0), (16, 16))
    tile.store(o, (0, 0), tile.mma(x, 2.0, tile.zeros((16, 16))))


DIAGNOSTICS = [
    (inner_mismatch, (M8, M8), ox.KernelTypeError,
     r"the inner dimensions differ: `a` is \(16, 8\) and `b` is \(16, 8\)"),
    (dtype_mismatch, (M8, MB, M8), ox.KernelTypeError,
     r"tile.mma multiplies tiles of one dtype: `a` is f32 and `b` is bf16"),
    (acc_shape, (M8, M8), ox.KernelTypeError,
     r"accumulator of tile.mma is \(M, N\) = \(16, 16\) .* not \(16, 8\)"),
    (acc_dtype, (MB, MB), ox.KernelTypeError, r"bf16 tiles accumulate in f32; the "
                                              r"accumulator is bf16"),
    (rank_one, (M8, M8), ox.KernelTypeError, r"`@` multiplies 2-d tiles; `a` is a tile of "
                                             r"shape \(16,\)"),
    (integer_mma, (M8, M8), ox.UnsupportedFeatureError, r"on integers .* not built yet"),
    (literal_operand, (M8, M8), ox.KernelTypeError, r"tile.mma multiplies tiles; `b` is "
                                                    r"the constant 2.0"),
]


@pytest.mark.parametrize("kernel,args,cls,pattern", DIAGNOSTICS,
                         ids=[d[0].__name__ for d in DIAGNOSTICS])
def test_mma_diagnostics(kernel, args, cls, pattern):
    with pytest.raises(cls, match=pattern) as info:
        kernel.compile(*args, arch="cpu")
    err = info.value
    lines, first = inspect.getsourcelines(kernel.fn)
    # every kernel above writes its product on its last line
    assert err.span is not None and err.span.line == first + len(lines) - 1
    assert err.span.file.endswith("test_tile_mma.py") and "-->" in str(err)


# -- attention (two products, online softmax) ----------------------------------------------


@pytest.mark.parametrize("causal", [True, False])
def test_attention_against_numpy(causal):
    """Blocks of 32 queries by 16 keys: several key steps per query block, and the causal
    diagonal crossing the middle of a query block."""
    from oxide.examples import tile_attention as ta

    heads, seq, d = 2, 64, 16
    q, k, v = (rng.standard_normal((heads * seq, d)).astype(bf16.numpy) for _ in range(3))
    o = np.zeros_like(q)
    cpu(ta.tile_attention, heads * seq // 32, q, k, v, o, seq, np.float32(1 / math.sqrt(d)),
        32, 16, d, causal)
    want = ta.reference(q, k, v, heads, causal)
    np.testing.assert_allclose(o.astype(np.float32), want, rtol=2e-2, atol=2e-2)


@tile.kernel(num_warps=2)
def wide_product(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[bf16, 2]):
    i, j = tile.bid(0), tile.bid(1)
    tile.store(c, (i, j), (tile.load(a, (i, 0), (128, 64)) @ tile.load(b, (0, j), (64, 128)))
               .astype(bf16))


def test_the_cpu_runs_products_as_fma_loops_and_the_gpu_on_tensor_cores() -> None:
    """Issue 29: the CPU target lowers `tile.mma` as a loop over k per thread (what LLVM
    vectorizes), not the lane-by-lane mma.sync emulation, which took minutes to compile
    for a (128, 64) @ (64, 128) product on 2 warps. Same bits: products of halves are
    exact, and both add them to the accumulator in k order."""
    import ml_dtypes

    sig = (Slice[bf16, 2], Slice[bf16, 2], DisjointSlice[bf16, 2])
    assert "mma.m16n8k16" not in wide_product.compile(*sig, arch="cpu").ir
    assert "mma.m16n8k16" in wide_product.compile(*sig, arch="sm_90").ir
    rng = np.random.default_rng(7)
    a = rng.standard_normal((200, 64)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((64, 300)).astype(ml_dtypes.bfloat16)
    c = np.zeros((200, 300), ml_dtypes.bfloat16)
    cpu(wide_product, (2, 3), a, b, c)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), want, rtol=1e-2, atol=1e-2)


def test_online_softmax_statistics_stay_in_their_reduction_layout(monkeypatch, capsys):
    """tile_attention's running maximum and sum are loop variables computed from a row
    reduction of `q @ k.T`: they take that reduction's layout (their first value, a
    constant, made in it), so no step converts them through shared memory."""
    import dataclasses

    from oxide.examples.tile_attention import tile_attention

    v = dataclasses.replace
    monkeypatch.setenv("OXIDE_DUMP", "tile")
    # compiled here (not found on disk or in memory from another test), so dumped
    monkeypatch.setenv("OXIDE_CACHE", "0")
    monkeypatch.setattr(tile_attention, "_specializations", {})
    tile_attention.compile(v(Slice[bf16, 2], vectors=True), v(Slice[bf16, 2], vectors=True),
                           v(Slice[bf16, 2], vectors=True), v(DisjointSlice[bf16, 2], vectors=True),
                           i32, f32, 128, 128, 128, False, arch="sm_90")
    dump = capsys.readouterr().err
    # every op on the (128, 1) statistics (`tile.maximum(m, tile.max(s, 1))`, `l * alpha
    # + tile.sum(p, 1)`) sees them in one layout: broadcasting moves nothing
    stats = [line for line in dump.splitlines()
             if '"tile.broadcast"' in line and "-> !tile.tile<128x1xf32" in line]
    assert stats
    for line in stats:
        layouts = set(re.findall(r"tile<128x1xf32, (<[^>]*>)>", line))
        assert len(layouts) == 1, line
