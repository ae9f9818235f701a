"""The Tile-model differential fuzzer (tools/tile_fuzz.py): its model's rules, that it
catches a wrong result, a seeded CPU run, and the bugs it found."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f16, f32, i32, tile

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.tile_fuzz import main  # noqa: E402
from tools.tile_fuzzing import rules as R  # noqa: E402
from tools.tile_fuzzing.generator import generate  # noqa: E402
from tools.tile_fuzzing.model import Expected, Model, evaluate  # noqa: E402
from tools.tile_fuzzing.program import Input, Lit, Node, Program, Scratch  # noqa: E402
from tools.tile_fuzzing.runner import Failure, compare, fuzz, run_program  # noqa: E402

SEED = 2  # the seed that found the two bugs at the end of this file
PROGRAMS = 250  # about 22 s with two workers on a 2-core machine


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OXIDE_CACHE", "0")


# -- the model follows docs/language.md --------------------------------------------------

def test_conversions_saturate_truncate_and_round_once() -> None:
    f = np.array([np.nan, 3e9, -3e9, -2.7, 2.7, np.inf], np.float32)
    assert R.convert(f, "f32", "i32").tolist() == [0, 2**31 - 1, -(2**31), -2, 2, 2**31 - 1]
    big = np.array([65519, 65520, -(2**31)], np.int32)
    assert R.convert(big, "i32", "f16").tolist() == [65504.0, np.inf, -np.inf]
    assert R.constant(0.1, "f16") == np.float16(0.1)
    assert R.with_literal("i32", 0.5) == "f32" and R.with_literal("f16", 3) == "f16"
    assert not R.literal_fits(1e5, "f16") and not R.literal_fits(2**31, "i32")
    assert R.promote("i32", "f16") == "f16" and R.promote("f16", "f32") == "f32"


def _program(index: int, want: str) -> Program:
    """The first program from `index` on whose output has dtype `want` (`SEED`)."""
    while generate(SEED, index).out_dtype != want:
        index += 1
    return generate(SEED, index)


def test_programs_are_deterministic() -> None:
    assert generate(SEED, 7).source() == generate(SEED, 7).source()
    assert generate(SEED, 7).source() != generate(SEED + 1, 7).source()


def test_reductions_see_the_padding_and_stores_clip() -> None:
    """A ragged tile's row sum includes its padding; the store drops the outside."""
    p = _program(0, "i32")
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    p.inputs = [Input("x0", "i32", (2, 3), (2, 4), ("BM", "BN"), ("i", "j"), 10, (2, 3),
                      (0, 0))]
    p.tile, p.out_shape, p.out_dtype, p.params = (2, 4), (2, 3), "i32", []
    load = Node("v0", "load", (), 0, "i32", (2, 4))
    total = Node("v1", "reduce", (load,), ("sum", 1, True), "i32", (2, 1))
    root = Node("v2", "broadcast", (total,), None, "i32", (2, 4))
    p.nodes, p.root = [load, total, root], root
    e = Model(p, {"x0": x}).run()
    assert e.value.tolist() == [[13] * 3, [22] * 3]  # 0+1+2+10, 3+4+5+10


# -- the harness catches what is wrong --------------------------------------------------

def test_a_wrong_model_value_is_reported() -> None:
    """An off-by-one in the expected output must be reported: the check is not vacuous."""
    p = _program(0, "i32")
    while (ok := run_program(SEED, p.index, "cpu")).checked == 0:  # all unspecified
        p = _program(p.index + 1, "i32")
    assert ok.failure is None

    def off_by_one(prog: Program, arrays: dict[str, np.ndarray]) -> Expected:
        e = evaluate(prog, arrays)
        e.value = e.value.copy()
        e.value[~e.undef] += 1
        return e

    out = run_program(SEED, p.index, "cpu", model=off_by_one)
    assert out.failure is not None and out.failure.kind == "mismatch"
    report = out.failure.report()
    assert "expected" in report and "def fuzz_kernel" in report and "launch:" in report


def test_a_write_outside_the_view_is_reported() -> None:
    p = _program(0, "f32")
    buffer = np.zeros(p.out_buffer, np.float32)
    e = Expected(np.zeros(p.out_shape, np.float32), np.zeros(p.out_shape, bool), None)
    after = buffer.copy()
    after[tuple(-1 for _ in p.out_buffer)] = 1.0
    view = after[tuple(slice(o, o + n) for o, n in zip(p.out_offset, p.out_shape, strict=True))]
    checked, detail = compare(p, e, view, buffer, after)
    if p.out_buffer == p.out_shape:  # no room around the view: the write is inside it
        assert detail is not None and "expected" in detail
    else:
        assert detail is not None and "outside the view" in detail


def test_a_scratch_load_is_the_last_tile_stored() -> None:
    """The scratch rule: `tile.store(s0, ...)` of a constant tile, then of a row maximum
    (its slice layout), then `tile.load(s0, ...)`: the model gives the maximum."""
    p = _program(0, "i32")
    x = np.arange(8, dtype=np.int32).reshape(2, 4)
    p.inputs = [Input("x0", "i32", (2, 4), (2, 4), ("BM", "BN"), ("i", "j"), None, (2, 4),
                      (0, 0))]
    p.tile, p.out_shape, p.out_dtype, p.params = (2, 4), (2, 4), "i32", []
    p.scratch = [Scratch("s0", "i32", (2, 1), (2, 1))]
    load = Node("v0", "load", (), 0, "i32", (2, 4))
    top = Node("v1", "reduce", (load,), ("max", 1, True), "i32", (2, 1))
    back = Node("v2", "scratch", (Lit(-7), top), 0, "i32", (2, 1))
    root = Node("v3", "broadcast", (back,), None, "i32", (2, 4))
    p.nodes, p.root = [load, top, back, root], root
    assert Model(p, {"x0": x}).run().value.tolist() == [[3] * 4, [7] * 4]
    assert "tile.store(s0, (i, j), tile.full((2, 1), (-7), dtype=i32))" in p.source()


def test_the_scratch_rule_finds_a_missing_barrier(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without tile/ordering.py's barriers, some program among seed 27's first 200 that
    stores and loads back a scratch tile (program 142 today) reads a stale tile on the
    CPU (its threads run in turn): the rule can fail. With them, the same program agrees
    with the model."""
    import oxide.tile.pipeline as pipeline

    def missed() -> int | None:
        for index in range(200):
            if generate(27, index).scratch and run_program(27, index, "cpu").failure:
                return index
        return None

    real = pipeline.place_barriers
    monkeypatch.setattr(pipeline, "place_barriers", lambda b: None)
    index = missed()
    assert index is not None
    monkeypatch.setattr(pipeline, "place_barriers", real)
    assert run_program(27, index, "cpu").failure is None


def test_gpu_run_needs_a_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    from oxide.runtime.device import cuda_device_count

    if cuda_device_count() > 0:
        pytest.skip("a GPU is present")
    assert main(["--device", "gpu", "--programs", "1"]) == 2
    assert "needs an NVIDIA GPU" in capsys.readouterr().err


# -- seeded runs ------------------------------------------------------------------------

def _check(failures: list[Failure], line: str) -> None:
    if failures:
        pytest.fail(line + "\n\n" + "\n\n".join(f.report() for f in failures[:5]),
                    pytrace=False)


def test_seeded_cpu_run_agrees_with_the_model() -> None:
    summary = fuzz(SEED, range(PROGRAMS), "cpu", jobs=2)
    assert summary.programs == PROGRAMS and summary.checked > PROGRAMS * 100
    _check(summary.failures, summary.line())


def test_every_block_reordered_agrees_with_the_model(monkeypatch) -> None:
    """OXIDE_TILE_REGISTER_ORDER=always sends every block of every kernel without
    products through tile/register_order.py, on the CPU compiling as sm_90 does: the
    programs still agree with the model (its programs leave FMA contraction nothing to
    choose), and the pass did move their ops."""
    from oxide.tile import pipeline

    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", "1")
    monkeypatch.setenv("OXIDE_TILE_REGISTER_ORDER", "always")
    moved = []
    real = pipeline.reorder_for_registers

    def counted(blocks, cap, cells, always=False):  # type: ignore[no-untyped-def]
        blocks = list(blocks)
        before = [list(b.ops) for b in blocks]
        changed = real(blocks, cap, cells, always)
        moved.extend(list(b.ops) != ops for b, ops in zip(blocks, before, strict=True))
        return changed

    monkeypatch.setattr(pipeline, "reorder_for_registers", counted)
    summary = fuzz(SEED + 70, range(40), "cpu")  # in this process: the count sees it
    assert summary.programs == 40 and sum(moved) >= 20
    _check(summary.failures, summary.line())


@pytest.mark.gpu
def test_seeded_gpu_run_agrees_with_the_model() -> None:
    summary = fuzz(SEED, range(60), "gpu")
    _check(summary.failures, summary.line())


# -- bugs the fuzzer found --------------------------------------------------------------

@tile.kernel
def _pad_negative_zero(x: Slice[f32], o: DisjointSlice[f32], B: Const[int]):
    i = tile.bid(0)
    t = tile.load(x, (i,), (B,), padding=-0.0)
    tile.store(o, (i,), t / 0.0)


def test_negative_zero_padding_does_not_change_the_literal_zero() -> None:
    """Found by seed 2, program 132: `x / 0.0` was -inf for x > 0 once a load used
    `padding=-0.0` (tile constants were cached by value, and 0.0 == -0.0)."""
    x = np.array([2.0, -3.0, 1.0, 5.0], np.float32)
    o = np.zeros(4, np.float32)
    with ox.device("cpu"):
        _pad_negative_zero[1](x, o, 4)
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(o, x / np.float32(0.0))


@tile.kernel
def _shifted_to_f16(x: Slice[i32], o: DisjointSlice[f32], B: Const[int]):
    i = tile.bid(0)
    tile.store(o, (i,), (tile.load(x, (i,), (B,)) << 31).astype(f16).astype(f32))


def test_i32_to_f16_overflows_to_infinity_before_widening() -> None:
    """Found by seed 2, program 187: `(x << 31).astype(f16)` is 0 or -2**31, and f16
    has no -2**31 (it rounds to -inf), but widened to f32 it read -2**31 (LLVM folded
    the f16 step away: codegen `clamp_to_f16_range`; tests/test_half_precision.py)."""
    x = np.array([1, 0, 3, 2], np.int32)
    o = np.zeros(4, np.float32)
    with ox.device("cpu"):
        _shifted_to_f16[1](x, o, 4)
    np.testing.assert_array_equal(o, [-np.inf, 0.0, -np.inf, 0.0])


def _sm90_ptx(seed: int, index: int) -> str:
    """The PTX sm_90 gets for program `index` of `seed`, specialized on its arguments."""
    from tools.tile_fuzzing.data import make_arrays, make_scratch
    from tools.tile_fuzzing.runner import load_kernel

    p = generate(seed, index)
    inputs, _, out = make_arrays(p)
    args = [*inputs.values(), out[None] if p.out_view else out, *make_scratch(p),
            *(R.NP[x.dtype](x.value) for x in p.params), *p.tile]
    return load_kernel(p).compile(*args, arch="sm_90").ptx  # type: ignore[no-any-return]


def test_some_frames_put_row_products_on_wgmma(monkeypatch) -> None:
    """Frames of 16 rows a warp (WGMMA_FRAMES): their row products are wgmma on sm_90
    (issue 26: the fuzzer's products through the wgmma path), and the code sm_90 gets
    agrees with the model on the CPU (OXIDE_TILE_CPU_HOPPER=1; seed 98 program 44 found
    the CPU's 8-bit wgmma reading 16 halves a step)."""
    wide = [i for i in range(300) if (p := generate(98, i)).warps * 16 == p.tile[0] >= 64
            and any(n.op == "rowproduct" for n in p.nodes)]
    assert len(wide) >= 5
    assert "wgmma.mma_async" in _sm90_ptx(98, wide[0])
    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", "1")
    for index in sorted({44, *wide[:2]}):
        got = run_program(98, index, "cpu")
        assert got.failure is None, got.failure.report()


def test_some_frames_let_the_compiler_choose_the_warps() -> None:
    """`AUTO_WARPS_FRAMES`: kernels without a product on `num_warps="auto"` (the warps
    chosen per specialization, tile/auto_warps.py), against the model; a frame drawn for
    it that has a row product names its warps (auto refuses products)."""
    auto = [i for i in range(80) if '@tile.kernel(num_warps="auto")' in generate(104, i).source()]
    assert len(auto) >= 5
    drawn = [p for i in range(300) if (p := generate(104, i)).auto_warps]
    assert any('num_warps="auto"' not in p.source() for p in drawn)  # its row product
    for index in auto[:4]:
        got = run_program(104, index, "cpu")
        assert got.failure is None, got.failure.report()


def test_some_inputs_are_0d_arrays() -> None:
    """`SCALAR_INPUTS`: a 0-d array read with `tile.load(x, (), ())`, one value for every
    block, against the model."""
    scalar = [i for i in range(60) if any(x.shape == () for x in generate(103, i).inputs)]
    assert len(scalar) >= 4
    assert "tile.load(x" in generate(103, scalar[0]).source()
    for index in scalar[:3]:
        got = run_program(103, index, "cpu")
        assert got.failure is None, got.failure.report()


def test_some_outputs_are_added_by_atomics(monkeypatch) -> None:
    """`Program.out_atomic`: about a third of the f32 and i32 outputs are added to an
    AtomicSlice (`sem` relaxed or acq_rel) that starts from values a quarter of which
    lie in and next to the f32 subnormals, against the model's flushed add (the
    language's rule for f32 atomic adds to global memory). A CPU that kept subnormals,
    as it did before that rule, is caught."""
    import oxide.codegen.cpu as cpu_target

    added = [i for i in range(40) if generate(80, i).out_atomic]
    assert len(added) >= 6
    source = generate(80, added[0]).source()
    assert "AtomicSlice[" in source and "tile.atomic_add(out, " in source
    f32_added = [i for i in added if generate(80, i).out_dtype == "f32"]
    for index in f32_added[:3]:
        got = run_program(80, index, "cpu")
        assert got.failure is None, got.failure.report()
    monkeypatch.setenv("OXIDE_CACHE", "0")
    plain = cpu_target.emit_atomic
    monkeypatch.setattr(cpu_target, "emit_atomic",
                        lambda *a, **k: plain(*a, **{**k, "flush_f32": False}))
    assert any(run_program(80, index, "cpu").failure is not None for index in f32_added[:6])


def test_some_wgmma_frames_chain_two_products(monkeypatch) -> None:
    """`PRODUCT_CHAINS`: in frames of 16 rows a warp, a product of a product
    (`s(s(a) @ s(b).T) @ s(a)`, the second's A from registers) reaches the output as a
    (BM, BN) tile: on sm_90 the first is a wgmma, in 64 x 64 frames (`SQUARE_FRAMES`)
    the second too, and the output may leave by a TMA store (seed 2 program 115) or,
    added by a relaxed atomic, a TMA reduction (seed 80 program 100). Against the model
    on the CPU and on the CPU's meaning of the sm_90 code."""
    chained = [i for i in range(120) if any(n.op == "productchain" for n in generate(98, i).nodes)]
    assert len(chained) >= 4
    assert "tile.mma(((tile.mma(" in generate(98, chained[0]).source()
    reduced, stored = _sm90_ptx(80, 100), _sm90_ptx(2, 115)
    assert reduced.count("wgmma.mma_async") >= 8 and "cp.reduce.async.bulk.tensor" in reduced
    assert "cp.async.bulk.tensor.2d.global.shared::cta" in stored
    for index in chained[:2]:
        got = run_program(98, index, "cpu")
        assert got.failure is None, got.failure.report()
    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", "1")
    for seed, index in ((80, 100), (2, 115), (98, chained[0])):
        got = run_program(seed, index, "cpu")
        assert got.failure is None, got.failure.report()


def test_some_frames_pipeline_a_k_loop(monkeypatch) -> None:
    """`K_LOOPS` (program.KLoop): a K loop of products over two arrays of K columns, at a
    `num_stages` from 1 to 8, K often not a multiple of the step, 0 steps now and then
    and one past K (a load of padding alone), the accumulator now and then negated
    between products (`acc = tile.mma(a, b, 0.0 - acc)`: a wgmma in flight must finish); a
    third of them attention's loop (two products a step, the second's A the first's
    result mapped to small integers), and now and then A the transpose of a (bk, BM)
    tile (`a_mn_major`). On sm_90 a wgmma frame's loop fills TMA rings (seed 9 program
    24: 3 stages, and program 104: 2 stages, A transposed, read MN-major from its ring;
    seed 27 program 35, attention's, 8 stages and the RS form; seed 8 program 42,
    attention's in a persistent frame, restarting its rings every tile), rows of 73 halves
    (program 2) cannot be TMA boxes, and program 55's transposed A (rows of 89 halves:
    staged by the threads) is read MN-major too; program 110 is attention's loop in a
    64 x 128 frame on 8 warps, its second product's warp groups splitting the columns
    (`COLUMN_GROUP_FRAMES`); against the model on the CPU and on the CPU's meaning of the
    sm_90 code."""
    import re

    looped = [i for i in range(300) if generate(8, i).kloop is not None]
    assert len(looped) >= 10
    drawn = [generate(8, i) for i in looped]
    loops = [p.kloop for p in drawn if p.kloop is not None]
    assert len({p.num_stages for p in drawn}) >= 5
    assert {x.b_k_major for x in loops} == {True, False} and any(x.steps == 0 for x in loops)
    assert {x.dtype for x in loops} == {"f16", "bf16", "f32"}
    assert any(x.negate for x in loops) and any(x.keys for x in loops)
    assert {x.a_mn_major for x in loops if not x.keys} == {True, False}
    assert "for t in range(kt):" in drawn[0].source()
    assert "0.0 - v" in next(p for p in drawn if p.kloop and p.kloop.negate).source().split(
        "for t in range(kt):")[1].split("\n")[1]
    assert generate(8, 42).persistent is not None
    for seed, index in ((9, 24), (9, 104), (27, 35), (8, 42)):
        ptx = _sm90_ptx(seed, index)
        assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor.2d.shared::cluster" in ptx
    for seed, index in ((9, 104), (8, 55)):  # A MN-major (the transpose bit)
        assert generate(seed, index).kloop.a_mn_major  # type: ignore[union-attr]
        assert re.search(r"wgmma\.mma_async[^;]*p, 1, 1, 1, \d;", _sm90_ptx(seed, index))
    assert re.search(r"wgmma\.mma_async[^;]*\},\s*\{%r", _sm90_ptx(27, 35))  # A in registers
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n64k16", _sm90_ptx(8, 110))
    assert "cp.async.bulk.tensor" not in _sm90_ptx(8, 2)
    for index in looped[:4]:
        got = run_program(8, index, "cpu")
        assert got.failure is None, got.failure.report()
    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", "1")
    for seed, index in ((8, 55), (8, 110), (27, 35), (8, 42), (8, 2), (8, 91), (9, 104)):
        got = run_program(seed, index, "cpu")
        assert got.failure is None and got.checked > 0, got.failure and got.failure.report()


def test_some_frames_walk_their_tiles() -> None:
    """`PERSISTENT_FRAMES` (Program.persistent): a rank-2 kernel walks its tiles itself,
    `for tt in tile.tiles(n)` with `i, j = tile.grouped(tt, ...)` (the statements inside,
    its block indices' i32 copies `bi`, `bj` as the scalars), launched on fewer blocks
    than tiles, against the model (each tile's values are what one block per tile gives)."""
    walking = [i for i in range(120) if generate(8, i).persistent is not None]
    assert len(walking) >= 6
    p = generate(8, walking[0])
    assert p.launch_grid[0] < p.grid[0] * p.grid[1] and len(p.launch_grid) == 1
    source = p.source()
    assert "for tt in tile.tiles(" in source and "i, j = tile.grouped(tt, " in source
    for index in walking[:4]:
        got = run_program(8, index, "cpu")
        assert got.failure is None and got.checked > 0, got.failure and got.failure.report()


def test_some_frames_loop_on_tma_rings_alone(monkeypatch) -> None:
    """`RING_LOOP_FRAMES`: of the frames of 16 rows a warp on 4 warps without a chain or a
    K loop, some get a K loop of 16-bit arrays whose rows are 16-byte aligned as their
    only product (no row products), which sm_90 fills by TMA and, with
    OXIDE_TILE_TWO_BLOCKS=1, compiles for two blocks an SM (seed 2 program 76: 64 x 64
    at 3 stages; program 29: 64 x 16); against the model on the CPU's meaning of that
    code."""
    from tools.tile_fuzzing.generator import Generator

    ringed = []
    for i in range(300):
        g = Generator(random.Random(f"oxide-tile-fuzz/2/{i}"), 2, i)
        if g.ring_loop:
            ringed.append(i)
    assert {29, 76} <= set(ringed)
    for index in (29, 76):
        p = generate(2, index)
        assert p.kloop is not None and p.kloop.dtype in ("f16", "bf16") and not p.kloop.keys
        assert not any(n.op in ("rowproduct", "productchain") for n in p.nodes)
    monkeypatch.setenv("OXIDE_TILE_TWO_BLOCKS", "1")
    monkeypatch.setenv("OXIDE_CACHE", "0")
    for index in (29, 76):
        ptx = _sm90_ptx(2, index)
        assert ".minnctapersm 2" in ptx and "cp.async.bulk.tensor.2d.shared" in ptx
    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", "1")
    for index in (29, 76):
        got = run_program(2, index, "cpu")
        assert got.failure is None, got.failure.report()
