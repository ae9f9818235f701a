"""Control flow and booleans in tile kernels (issue 28, item 3): `and`, `or`, `not` on
Const[bool] flags and on 0-d tiles (short-circuiting), `a if c else b` on scalars,
`while` loops with a 0-d condition, and scalars (numbers, `f32(...)`, reductions)
carried through `for` and `while` loops, against NumPy on the CPU; the diagnostics.
tests/test_gpu_tile_lang.py runs the same kernels on the GPU."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, i32, i64, tile

rng = np.random.default_rng(283)


def cpu(kernel, grid, *args):
    with ox.device("cpu"):
        kernel[grid](*args)


# -- Const[bool] flags --------------------------------------------------------------------


@tile.kernel(num_warps=2)
def flags(x: Slice[f32], o: DisjointSlice[f32], HAS_W: Const[bool], HAS_B: Const[bool],
          B: Const[int]):
    """Liger's cross entropy: `if HAS_WEIGHT or HAS_SMOOTHING:` on Const flags."""
    i = tile.bid(0)
    t = tile.load(x, (i,), (B,))
    if HAS_W or HAS_B:
        t = t * 2.0
    if HAS_W and not HAS_B:
        t = t + 1.0
    if not (HAS_W or HAS_B):
        t = -t
    k = 3.0 if HAS_B and HAS_W else 5.0
    tile.store(o, (i,), t * k)


@pytest.mark.parametrize("w,b", list(itertools.product((False, True), repeat=2)))
def test_const_bool_flags_combine(w: bool, b: bool) -> None:
    x = rng.standard_normal(100).astype(np.float32)
    o = np.zeros_like(x)
    cpu(flags, tile.cdiv(100, 64), x, o, w, b, 64)
    want = x.copy()
    if w or b:
        want = want * 2
    if w and not b:
        want = want + 1
    if not (w or b):
        want = -want
    np.testing.assert_array_equal(o, want * np.float32(3.0 if (b and w) else 5.0))


# -- and / or / not / if-else on 0-d tiles ------------------------------------------------


@tile.kernel(num_warps=4)
def scalar_logic(x: Slice[f32, 2], k: i32, o: DisjointSlice[i32, 2], v: DisjointSlice[f32, 2],
                 BN: Const[int]):
    r = tile.bid(0)
    t = tile.load(x, (r, 0), (1, BN))
    s, m = tile.sum(t), tile.max(t)
    both = (s > 0) and (m < 1.5)
    either = (s > 0) or not (m < 1.5)
    chain = s > 0 and m > 0 and k > 1       # left to right, three operands
    # only the arm taken runs: no division by zero is reported for k == 0
    safe = (k != 0) and (100 // k > 3)
    q = 100 // k if k != 0 else -1
    tile.store(o, (r, 0), tile.full((1, 1), both.astype(i32)))
    tile.store(o, (r, 1), tile.full((1, 1), either.astype(i32)))
    tile.store(o, (r, 2), tile.full((1, 1), chain.astype(i32)))
    tile.store(o, (r, 3), tile.full((1, 1), safe.astype(i32)))
    tile.store(o, (r, 4), tile.full((1, 1), q))
    mag = s if s > 0 else -s                 # a scalar conditional expression
    scaled = t * 2.0 if m > 1.0 else t       # tiles: the block takes one way
    tile.store(v, (r, 0), tile.full((1, BN), mag))
    tile.store(v, (r, 1), scaled)


@pytest.mark.parametrize("k", [0, 3, 50])
def test_boolean_operators_and_conditional_expressions_on_scalars(k: int) -> None:
    M, N, BN = 9, 37, 64
    x = rng.standard_normal((M, N)).astype(np.float32)
    x[2] = np.abs(x[2]) + 1  # some rows positive, with maxima above 1.5
    o = np.zeros((M, 5), np.int32)
    v = np.zeros((M, BN * 2), np.float32)
    cpu(scalar_logic, M, x, np.int32(k), o, v, BN)  # no KernelAssertionError for k == 0
    s, m = x.sum(1, dtype=np.float32), x.max(1)
    np.testing.assert_array_equal(o[:, 0], (s > 0) & (m < 1.5))
    np.testing.assert_array_equal(o[:, 1], (s > 0) | ~(m < 1.5))
    np.testing.assert_array_equal(o[:, 2], (s > 0) & (m > 0) & (k > 1))
    np.testing.assert_array_equal(o[:, 3], np.full(M, k != 0 and 100 // k > 3))
    np.testing.assert_array_equal(o[:, 4], np.full(M, 100 // k if k else -1))
    np.testing.assert_allclose(v[:, :BN], np.repeat(np.abs(s)[:, None], BN, 1), rtol=1e-5,
                               atol=1e-5)
    scaled = np.where(m[:, None] > 1.0, x * 2, x)
    np.testing.assert_array_equal(v[:, BN:BN + N], scaled)


# -- while loops and carried scalars --------------------------------------------------------


@tile.kernel(num_warps=4)
def chunked_while(x: Slice[f32, 2], sums: DisjointSlice[f32], steps: DisjointSlice[i32],
                  limit: i64, BN: Const[int]):
    """A row summed chunk by chunk in a `while`, a Python number and an `f32(...)` carried,
    and a second `while` whose trip count depends on the data (it may run zero times)."""
    r = tile.bid(0)
    c = 0
    total = f32(0.0)
    count = 0.0
    while c < tile.num_tiles(x, 1, BN):
        total = total + tile.sum(tile.load(x, (r, c), (1, BN)))
        count += 1.0
        c += 1
    n = limit
    halvings = 0
    while n > 1:
        n = n // 2
        halvings = halvings + 1
    tile.store(sums, (r,), tile.full((1,), total / count))
    tile.store(steps, (r,), tile.full((1,), halvings))


@pytest.mark.parametrize("N,limit", [(37, 0), (300, 1), (1000, 1000), (64, 2**40 + 5)])
def test_while_loops_carry_scalars(N: int, limit: int) -> None:
    M, BN = 5, 64
    x = rng.standard_normal((M, N)).astype(np.float32)
    sums, steps = np.zeros(M, np.float32), np.zeros(M, np.int32)
    cpu(chunked_while, M, x, sums, steps, np.int64(limit), BN)
    chunks = -(-N // BN)
    np.testing.assert_allclose(sums, x.sum(1, dtype=np.float64) / chunks, rtol=1e-5, atol=1e-5)
    n, h = limit, 0
    while n > 1:
        n, h = n // 2, h + 1
    np.testing.assert_array_equal(steps, np.full(M, h))


@tile.kernel(num_warps=4)
def newton_rsqrt(x: Slice[f32], o: DisjointSlice[f32], iters: DisjointSlice[i32],
                 B: Const[int]):
    """A `while` on a reduction: Newton steps until the whole tile has converged."""
    i = tile.bid(0)
    a = tile.load(x, (i,), (B,), padding=1.0)
    y = tile.full((B,), 1.0)
    err = tile.max(tile.abs(y * y * a - 1.0))
    k = 0
    while err > 1e-6 and k < 100:
        y = y * (1.5 - 0.5 * a * y * y)
        err = tile.max(tile.abs(y * y * a - 1.0))
        k += 1
    tile.store(o, (i,), y)
    tile.store(iters, (i,), tile.full((1,), k))


def test_while_on_a_reduction_converges() -> None:
    n, B = 300, 128
    x = rng.uniform(0.5, 2.0, n).astype(np.float32)
    o, iters = np.zeros(n, np.float32), np.zeros(3, np.int32)
    cpu(newton_rsqrt, tile.cdiv(n, B), x, o, iters, B)
    np.testing.assert_allclose(o, 1 / np.sqrt(x), rtol=2e-6)
    assert (iters > 0).all() and (iters < 100).all()


@tile.kernel(num_warps=2)
def for_carries_scalars(x: Slice[f32, 2], o: DisjointSlice[f32, 2], BN: Const[int]):
    """`d = f32(0.0)` then `d = d + tile.sum(...)`, a reduction's maximum and an integer
    count carried through a `for`; an `if` inside updates one of them."""
    r = tile.bid(0)
    d = f32(0.0)
    best = -1e30
    positive = 0
    for c in range(tile.num_tiles(x, 1, BN)):
        t = tile.load(x, (r, c), (1, BN), padding=-1e30)
        d = d + tile.sum(tile.where(t > -1e30, t, 0.0))
        if tile.max(t) > best:
            best = tile.max(t)
        positive += tile.sum((t > 0).astype(i32))
    tile.store(o, (r, 0), tile.full((1, 4), d) * (tile.arange(4)[None, :] == 0).astype(f32)
               + tile.full((1, 4), best) * (tile.arange(4)[None, :] == 1).astype(f32)
               + tile.full((1, 4), positive.astype(f32))
               * (tile.arange(4)[None, :] == 2).astype(f32))


def test_for_loops_carry_numbers_and_reductions() -> None:
    M, N = 6, 200
    x = rng.standard_normal((M, N)).astype(np.float32)
    o = np.zeros((M, 4), np.float32)
    cpu(for_carries_scalars, M, x, o, 64)
    np.testing.assert_allclose(o[:, 0], x.sum(1, dtype=np.float64), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(o[:, 1], x.max(1))
    np.testing.assert_array_equal(o[:, 2], (x > 0).sum(1))


def test_control_flow_compiles_for_the_gpu() -> None:
    ck = chunked_while.compile(Slice[f32, 2], DisjointSlice[f32], DisjointSlice[i32], i64, 64,
                               arch="sm_90")
    assert ck.cubin
    ck = scalar_logic.compile(Slice[f32, 2], i32, DisjointSlice[i32, 2], DisjointSlice[f32, 2],
                              64, arch="sm_80")
    assert ck.cubin


# -- diagnostics ---------------------------------------------------------------------------

V = Slice[f32]
W = DisjointSlice[f32]


@tile.kernel
def while_true(a: Slice[f32], o: DisjointSlice[f32]):
    while True:
        tile.store(o, (0,), tile.load(a, (0,), (8,)))


@tile.kernel
def while_break(a: Slice[f32], o: DisjointSlice[f32]):
    k = 0
    while k < 4:
        k += 1
        if k == 2:
            break


@tile.kernel
def ifexp_on_a_tile(a: Slice[f32], o: DisjointSlice[f32]):
    t = tile.load(a, (0,), (8,))
    tile.store(o, (0,), t if t > 0 else -t)


@tile.kernel
def and_of_tiles(a: Slice[f32], o: DisjointSlice[f32]):
    t = tile.load(a, (0,), (8,))
    tile.store(o, (0,), tile.where((t > 0) and (t < 1), t, 0.0))


@tile.kernel
def not_of_a_tile(a: Slice[f32], o: DisjointSlice[f32]):
    t = tile.load(a, (0,), (8,))
    tile.store(o, (0,), tile.where(not (t > 0), t, 0.0))


@tile.kernel
def carried_changes_type(a: Slice[f32], o: DisjointSlice[f32]):
    acc = 0
    k = 0
    while k < 3:
        acc = acc + tile.sum(tile.load(a, (k,), (8,)))
        k += 1
    tile.store(o, (0,), tile.full((8,), acc))


@tile.kernel
def ifexp_arms_disagree(a: Slice[f32], o: DisjointSlice[f32], s: f32):
    t = tile.load(a, (0,), (8,))
    tile.store(o, (0,), t if s > 0 else t[:4 // 4] * 0.0 + tile.zeros((4,)))


@pytest.mark.parametrize("kernel,types,error,message,hint", [
    (while_true, (V, W), ox.UnsupportedFeatureError, "this `while` never ends", "scalar"),
    (while_break, (V, W), ox.UnsupportedFeatureError,
     "`break` in a tile kernel loop is not supported", "`while`"),
    (ifexp_on_a_tile, (V, W), ox.KernelTypeError,
     "`a if c else b` needs a scalar condition, not a tile of shape (8,)", "tile.where"),
    (and_of_tiles, (V, W), ox.KernelTypeError, "`and` needs a scalar condition", "tile.where"),
    (not_of_a_tile, (V, W), ox.KernelTypeError, "`not` needs a scalar, not a tile", "~x"),
    (carried_changes_type, (V, W), ox.KernelTypeError,
     "`acc` is a i32 scalar before the loop and a f32 scalar at the end", "f32(0)"),
])
def test_control_flow_misuse_is_a_diagnostic(kernel, types, error, message, hint) -> None:
    with pytest.raises(error) as info:
        kernel.compile(*types, arch="cpu")
    assert message in str(info.value)
    assert info.value.span is not None and hint in (info.value.hint or "")


# -- a loop bound reduced over a layout replicated across warps -----------------------------


@tile.kernel(num_warps=8)
def replicated_bound(x: Slice[i32, 2], o: DisjointSlice[f32, 2], BM: Const[int], BN: Const[int]):
    """Eight warps over a 2 x 16 tile: each warp holds all of it, so `tile.max(v)` is
    reduced in every warp alike (no shared memory). The loop on it is still block-uniform,
    and its body converts a layout (a barrier): found by the tile fuzzer (seed 2, program
    208), refused by the uniformity pass where the IR is verified."""
    i, j = tile.bid(0), tile.bid(1)
    v = tile.load(x, (i, j), (BM, BN), padding=0)
    h = ((v % 7) - 3).astype(ox.f16)
    rows = tile.sum(tile.mma(h, h.permute((1, 0)), tile.zeros((BM, BM), f32)), 1, keepdims=True)
    acc = tile.zeros((BM, BN), f32)
    for _ in range(tile.max(v) % 3):
        acc = acc + rows
    tile.store(o, (i, j), acc)


def replicated_bound_reference(x: np.ndarray, out_shape: tuple[int, int]) -> np.ndarray:
    """What `replicated_bound` stores on a (3, 2) grid of 2 x 16 tiles."""
    want = np.zeros(out_shape, np.float32)
    for bi, bj in itertools.product(range(3), range(2)):
        v = np.zeros((2, 16), np.int64)
        part = x[2 * bi:2 * bi + 2, 16 * bj:16 * bj + 16]
        v[:part.shape[0], :part.shape[1]] = part
        h = (v % 7 - 3).astype(np.float64)
        want[2 * bi:2 * bi + 2, 16 * bj:16 * bj + 16] = (h @ h.T).sum(1, keepdims=True) * (v.max() % 3)
    return want


def test_a_loop_bound_reduced_in_every_warp_alike_is_uniform():
    x = rng.integers(0, 50, (6, 31)).astype(np.int32)
    o = np.zeros((6, 32), np.float32)
    cpu(replicated_bound, (3, 2), x, o, 2, 16)
    np.testing.assert_array_equal(o[:, :31], replicated_bound_reference(x, o.shape)[:, :31])


# -- Triton's persistent loop as its tutorials write it --------------------------------------


@tile.kernel(num_warps=2)
def grid_stride(x: Slice[f32, 2], o: DisjointSlice[f32, 2], B: Const[int]):
    """`range(tile.bid(0), n, tile.num_blocks(0))` is `tile.tiles(n)`: `row` is a witness."""
    for row in range(tile.bid(0), x.shape[0], tile.num_blocks(0)):
        tile.store(o, (row, 0), tile.load(x, (row, 0), (1, B)) * 2.0)


@pytest.mark.parametrize("grid", [1, 3, 40])
def test_a_grid_stride_range_is_the_persistent_loop(grid):
    x = rng.standard_normal((37, 50)).astype(np.float32)
    o = np.zeros_like(x)
    cpu(grid_stride, grid, x, o, 64)
    np.testing.assert_array_equal(o, x * 2)


def _stride_kernel(start: str, step: str):
    """A kernel storing at `row` of `range(<start>, n, <step>)`, from a file (kernels need
    their source)."""
    import importlib.util
    import pathlib
    import tempfile

    text = (
        "from oxide import Const, DisjointSlice, Slice, f32, tile\n\n\n"
        "@tile.kernel\n"
        "def k(x: Slice[f32, 2], o: DisjointSlice[f32, 2], B: Const[int]):\n"
        f"    for row in range({start}, x.shape[0], {step}):\n"
        "        tile.store(o, (row, 0), tile.load(x, (row, 0), (1, B)))\n")
    path = pathlib.Path(tempfile.mkdtemp()) / "stride_kernel.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("stride_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.k


@pytest.mark.parametrize("start, step, error", [
    ("tile.bid(0) + 1", "tile.num_blocks(0)", ox.UnsupportedFeatureError),
    ("tile.bid(1)", "tile.num_blocks(0)", ox.UnsupportedFeatureError),
    ("tile.bid(0)", "tile.num_blocks(1)", ox.UnsupportedFeatureError),
    ("tile.bid(0)", "tile.num_blocks(0) // 2", ox.UnsupportedFeatureError),
])
def test_other_strides_stay_refused(start, step, error):
    x = np.zeros((8, 8), np.float32)
    with pytest.raises(error, match="the step of a tile kernel loop is a non-zero constant"):
        cpu(_stride_kernel(start, step), 2, x, np.zeros_like(x), 8)
