"""`@ox.tile.kernel(num_stages=S)`: tile loads of a `for` loop issued S - 1 iterations
ahead, with the same results as S = 1, on the CPU; which loads are pipelined; the option's
checks."""

from __future__ import annotations

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, tile

rng = np.random.default_rng(17)


def row_sums(stages: int):
    @tile.kernel(num_warps=2, num_stages=stages)
    def k(x: Slice[f32, 2], out: DisjointSlice[f32, 2], BM: Const[int], BK: Const[int]):
        """out[i] = the sum of row block i of x, walking its columns BK at a time."""
        i = tile.bid(0)
        acc = tile.zeros((BM, 1))
        for kk in range(tile.cdiv(x.shape[1], BK)):
            t = tile.load(x, (i, kk), (BM, BK))
            acc = acc + tile.sum(t, 1, keepdims=True)
        tile.store(out, (i, 0), acc)
    return k


def matmul(stages: int):
    @tile.kernel(num_warps=4, num_stages=stages)
    def mm(a: Slice[f32, 2], b: Slice[f32, 2], c: DisjointSlice[f32, 2], B: Const[int]):
        i, j = tile.bid(0), tile.bid(1)
        acc = tile.zeros((B, B))
        for kk in range(0, tile.cdiv(a.shape[1], B)):
            x = tile.load(a, (i, kk), (B, B))
            y = tile.load(b, (kk, j), (B, B))
            acc = tile.mma(x, y, acc)
        tile.store(c, (i, j), acc)
    return mm


def cpu(kernel, grid, *args):
    with ox.device("cpu"):
        kernel[grid](*args)


@pytest.mark.parametrize("stages", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("cols", [64, 70, 8, 0])
def test_row_sums_match_for_every_depth(stages: int, cols: int) -> None:
    x = (rng.integers(-8, 9, (24, cols)) * 0.5).astype(np.float32)
    out = np.full((24, 1), -1.0, np.float32)
    cpu(row_sums(stages), 3, x, out, 8, 16)
    np.testing.assert_array_equal(out[:, 0], x.sum(axis=1))


@pytest.mark.parametrize("stages", [1, 2, 3, 6])
def test_matmul_pipelines_both_operands(stages: int) -> None:
    a = (rng.integers(-4, 5, (40, 72)) * 0.25).astype(np.float32)
    b = (rng.integers(-4, 5, (72, 24)) * 0.25).astype(np.float32)
    c = np.zeros((40, 24), np.float32)
    cpu(matmul(stages), (3, 2), a, b, c, 16)
    np.testing.assert_array_equal(c, a @ b)


def test_loads_are_issued_ahead() -> None:
    """With 2 stages the body's load is issued before the previous tile is summed: the
    IR holds one load before the loop and one in it, and `t` is never loaded at the
    point the statement stood (the pipelined names are loop-carried)."""
    x = np.zeros((8, 64), np.float32)
    ir1 = row_sums(1).compile(x, np.zeros((8, 1), np.float32), 8, 16, arch="sm_90").ir
    ir2 = row_sums(2).compile(x, np.zeros((8, 1), np.float32), 8, 16, arch="sm_90").ir
    assert ir2.count("oxide.vload") == 2 * ir1.count("oxide.vload")


def test_a_load_that_reads_the_body_is_not_pipelined() -> None:
    @tile.kernel(num_stages=2)
    def dependent(x: Slice[f32], out: DisjointSlice[f32], B: Const[int]):
        i = tile.bid(0)
        acc = tile.zeros((B,))
        j = i * 0
        for kk in range(4):
            t = tile.load(x, (j + kk,), (B,))  # reads `j`, which the body rebinds
            acc = acc + t
            j = j + 0
        tile.store(out, (i,), acc)

    x = rng.standard_normal(64).astype(np.float32)
    out = np.zeros(16, np.float32)
    cpu(dependent, 1, x, out, 16)
    np.testing.assert_allclose(out, x[:64].reshape(4, 16).sum(0), rtol=1e-6)


@pytest.mark.parametrize("bad", [0, 9, 2.0, True])
def test_num_stages_is_checked(bad) -> None:
    with pytest.raises(ox.KernelTypeError, match="num_stages"):
        tile.kernel(num_stages=bad)


def test_a_load_of_an_array_the_loop_stores_to_is_not_pipelined() -> None:
    """Each iteration reads the tile the previous one wrote: read early, it would be stale."""
    from oxide import RawSlice

    @tile.kernel(num_stages=3)
    def chain(x: RawSlice[f32], B: Const[int]):
        for kk in range(1, 6):
            t = tile.load(x, (kk - 1,), (B,))
            with ox.unsafe():
                tile.store(x, (kk,), t + 1.0)

    x = np.zeros(6 * 8, np.float32)
    cpu(chain, 1, x, 8)
    np.testing.assert_array_equal(x.reshape(6, 8)[:, 0], np.arange(6, dtype=np.float32))


def rebinding_row_sums(stages: int, SCALE: bool):
    @tile.kernel(num_warps=2, num_stages=stages)
    def k(x: Slice[f32, 2], out: DisjointSlice[f32, 2], BM: Const[int], BK: Const[int]):
        """`row_sums` whose body rebinds the loaded name after the load (Triton's
        `a = a.to(...)` idiom, and a compile-time `if`)."""
        i = tile.bid(0)
        acc = tile.zeros((BM, 1))
        for kk in range(tile.cdiv(x.shape[1], BK)):
            t = tile.load(x, (i, kk), (BM, BK))
            t = t * 2.0
            if SCALE:
                t = t + 1.0
            acc = acc + tile.sum(t, 1, keepdims=True)
        tile.store(out, (i, 0), acc)
    return k


@pytest.mark.parametrize("scale", [False, True])
def test_a_load_whose_name_is_rebound_after_it_is_pipelined(scale: bool) -> None:
    """The iteration's tile is bound as the iteration starts; a later rebinding of the
    name leaves the load issued ahead, and the results as one stage gives them."""
    x = (rng.integers(-8, 9, (24, 70)) * 0.5).astype(np.float32)
    outs = []
    for stages in (1, 3):
        out = np.full((24, 1), -1.0, np.float32)
        cpu(rebinding_row_sums(stages, scale), 3, x, out, 8, 16)
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    want = 2 * x.sum(axis=1) + (80.0 if scale else 0.0)  # + 1 at 5 tiles' 80 columns
    np.testing.assert_array_equal(outs[1][:, 0], want.astype(np.float32))
    args = (x, np.zeros((24, 1), np.float32), 8, 16)
    ir1 = rebinding_row_sums(1, scale).compile(*args, arch="sm_90").ir
    ir3 = rebinding_row_sums(3, scale).compile(*args, arch="sm_90").ir
    assert ir3.count("oxide.vload") == 3 * ir1.count("oxide.vload")


def test_a_load_whose_name_the_body_reads_first_is_not_pipelined() -> None:
    """`acc + t` reads the previous iteration's `t` before the load rebinds it: issued
    ahead, the load would be seen one iteration early."""
    @tile.kernel(num_stages=3)
    def lagged(x: Slice[f32], out: DisjointSlice[f32], B: Const[int]):
        i = tile.bid(0)
        acc = tile.zeros((B,))
        t = tile.zeros((B,))
        for kk in range(4):
            acc = acc + t * (kk + 1.0)
            t = tile.load(x, (kk,), (B,))
        tile.store(out, (i,), acc)

    x = rng.integers(-8, 9, 64).astype(np.float32)
    out = np.zeros(16, np.float32)
    cpu(lagged, 1, x, out, 16)
    rows = x.reshape(4, 16)
    np.testing.assert_array_equal(out, 2 * rows[0] + 3 * rows[1] + 4 * rows[2])


def inline_matmul(stages: int):
    @tile.kernel(num_warps=4, num_stages=stages)
    def mm(a: Slice[f32, 2], b: Slice[f32, 2], c: DisjointSlice[f32, 2], B: Const[int]):
        i, j = tile.bid(0), tile.bid(1)
        acc = tile.zeros((B, B))
        for kk in range(0, tile.cdiv(a.shape[1], B)):
            acc = tile.mma(tile.load(a, (i, kk), (B, B)), tile.load(b, (kk, j), (B, B)), acc)
        tile.store(c, (i, j), acc)
    return mm


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_loads_inside_an_expression_are_pipelined_too(stages: int) -> None:
    """`tile.mma(tile.load(...), tile.load(...), acc)`: the loads move into statements of
    their own and are issued ahead like named ones, with the same results."""
    a = (rng.integers(-4, 5, (40, 72)) * 0.25).astype(np.float32)
    b = (rng.integers(-4, 5, (72, 24)) * 0.25).astype(np.float32)
    c = np.zeros((40, 24), np.float32)
    cpu(inline_matmul(stages), (3, 2), a, b, c, 16)
    np.testing.assert_array_equal(c, a @ b)
    sig = (a, b, c, 16)
    ir = inline_matmul(stages).compile(*sig, arch="sm_90").ir
    named = matmul(stages).compile(*sig, arch="sm_90").ir
    assert ir.count("oxide.vload") == named.count("oxide.vload")
    if stages > 1:
        once = inline_matmul(1).compile(*sig, arch="sm_90").ir
        assert ir.count("oxide.vload") == stages * once.count("oxide.vload")


def test_a_load_under_a_conditional_expression_stays_put() -> None:
    @tile.kernel(num_stages=2)
    def cond(x: Slice[f32], out: DisjointSlice[f32], B: Const[int], FLAG: Const[bool]):
        i = tile.bid(0)
        acc = tile.zeros((B,))
        for kk in range(4):
            acc = acc + (tile.load(x, (kk,), (B,)) if FLAG else tile.zeros((B,)))
        tile.store(out, (i,), acc)

    x = rng.standard_normal(64).astype(np.float32)
    out = np.zeros(16, np.float32)
    cpu(cond, 1, x, out, 16, True)
    np.testing.assert_allclose(out, x.reshape(4, 16).sum(0), rtol=1e-6)
    ir = cond.compile(x, out, 16, True, arch="sm_90").ir
    once = tile.kernel(num_stages=1)(cond.__wrapped__).compile(x, out, 16, True,
                                                               arch="sm_90").ir
    assert ir.count("oxide.vload") == once.count("oxide.vload")


def split_k_matmul(stages: int, spelled: str):
    """A split-K step: block (i, j, s) multiplies K steps s * STEPS ... of tile (i, j) into
    slice s of `c`; its K index spelled through names the body binds (`spelled`)."""
    @tile.kernel(num_warps=4, num_stages=stages)
    def named(a: Slice[f32, 2], b: Slice[f32, 2], c: DisjointSlice[f32, 3], B: Const[int],
              STEPS: Const[int]):
        i, j, s = tile.bid(0), tile.bid(1), tile.bid(2)
        acc = tile.zeros((B, B))
        for kk in range(STEPS):
            k = s * STEPS + kk
            acc = tile.mma(tile.load(a, (i, k), (B, B)), tile.load(b, (k, j), (B, B)), acc)
        tile.store(c[s], (i, j), acc)

    @tile.kernel(num_warps=4, num_stages=stages)
    def chained(a: Slice[f32, 2], b: Slice[f32, 2], c: DisjointSlice[f32, 3], B: Const[int],
                STEPS: Const[int]):
        i, j, s = tile.bid(0), tile.bid(1), tile.bid(2)
        acc = tile.zeros((B, B))
        for kk in range(STEPS):
            first = s * STEPS
            k = first + kk
            x = tile.load(a, (i, k), (B, B))
            acc = tile.mma(x, tile.load(b, (k, j), (B, B)), acc)
        tile.store(c[s], (i, j), acc)

    @tile.kernel(num_warps=4, num_stages=stages)
    def divided(a: Slice[f32, 2], b: Slice[f32, 2], c: DisjointSlice[f32, 3], B: Const[int],
                STEPS: Const[int]):
        i, j, s = tile.bid(0), tile.bid(1), tile.bid(2)
        acc = tile.zeros((B, B))
        for kk in range(STEPS):
            k = (s * STEPS * 2 + kk * 2) // 2  # a division: left as the name
            acc = tile.mma(tile.load(a, (i, k), (B, B)), tile.load(b, (k, j), (B, B)), acc)
        tile.store(c[s], (i, j), acc)

    return {"named": named, "chained": chained, "divided": divided}[spelled]


@pytest.mark.parametrize("spelled", ["named", "chained", "divided"])
@pytest.mark.parametrize("stages", [1, 3])
def test_a_k_index_bound_to_a_name_is_pipelined(stages: int, spelled: str) -> None:
    """`k = s * STEPS + kk` in the body, then loads at k: the loads read the loop variable
    and names the body does not assign only through k's arithmetic, so they are issued
    ahead (the name substituted in them) as `tile.load(a, (i, s * STEPS + kk), ...)`
    would be; a definition with a division is left alone. Same results either way."""
    B, steps, splits = 16, 2, 3
    a = (rng.integers(-4, 5, (40, B * steps * splits)) * 0.25).astype(np.float32)
    b = (rng.integers(-4, 5, (B * steps * splits, 24)) * 0.25).astype(np.float32)
    c = np.zeros((splits, 40, 24), np.float32)
    kernel = split_k_matmul(stages, spelled)
    cpu(kernel, (3, 2, splits), a, b, c, B, steps)
    for s in range(splits):
        ks = slice(s * B * steps, (s + 1) * B * steps)
        np.testing.assert_array_equal(c[s], a[:, ks] @ b[ks])
    sig = (a, b, c, B, steps)

    def count(ir: str) -> int:  # the tile loads' ops in the IR
        return ir.count("oxide.masked_load") + ir.count("oxide.vload")

    once = count(split_k_matmul(1, spelled).compile(*sig, arch="sm_90").ir)
    assert once == 2
    loads = count(kernel.compile(*sig, arch="sm_90").ir)
    piped = stages > 1 and spelled != "divided"
    assert loads == (stages * once if piped else once)
