"""The tile dialect (ir/tile_ops.py) and its two passes (tile/layouts.py, tile/to_simt.py):
what the frontend builds, the layouts the pass gives, the conversions it inserts, and
that no tile op survives the lowering."""

from __future__ import annotations

import re

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, Slice, bf16, f32, i32, tile
from oxide.ir.tile_ops import TILE_OPS, TileOperation
from oxide.tile.layout import blocked, mma_accumulator


@tile.kernel
def softmax_rows(x: Slice[f32, 2], out: DisjointSlice[f32, 2], BN: Const[int]):
    i = tile.bid(0)
    t = tile.load(x, (i, 0), (1, BN), padding=-float("inf"))
    e = tile.exp(t - tile.max(t, 1, keepdims=True))
    tile.store(out, (i, 0), e / tile.sum(e, 1, keepdims=True))


@tile.kernel
def scan_of_product(a: Slice[f32, 2], b: Slice[f32, 2], out: DisjointSlice[f32, 2]):
    c = tile.load(a, (0, 0), (32, 16)) @ tile.load(b, (0, 0), (16, 32))
    tile.store(out, (0, 0), tile.cumsum(c, 0))


@tile.kernel
def carried(x: Slice[f32, 2], out: DisjointSlice[f32, 2], n: i32):
    acc = tile.zeros((32, 32), f32)
    for _ in range(n):
        acc = acc + tile.permute(tile.load(x, (0, 0), (32, 32)), (1, 0))
    tile.store(out, (0, 0), acc)


@tile.kernel
def bf16_matmul(a: Slice[bf16, 2], b: Slice[bf16, 2], out: DisjointSlice[f32, 2]):
    acc = tile.zeros((64, 64), f32)
    for k in range(2):
        acc = tile.mma(tile.load(a, (0, k), (64, 16)), tile.load(b, (k, 0), (16, 64)), acc)
    tile.store(out, (0, 0), acc)


@tile.func
def step(a, b, acc):
    return acc + tile.mma(a, b, tile.zeros((64, 64), f32))


@tile.kernel
def through_a_helper(a: Slice[bf16, 2], b: Slice[bf16, 2], out: DisjointSlice[f32, 2]):
    acc = tile.zeros((64, 64), f32)
    for k in range(2):
        acc = step(tile.load(a, (0, k), (64, 16)), tile.load(b, (k, 0), (16, 64)), acc)
    tile.store(out, (0, 0), acc)


def tile_ir(kernel, *args, monkeypatch, capfd) -> str:
    """The tile dialect as the layout and ordering passes leave it, as an sm_80 GPU runs
    it (the mma.sync engine's layouts: the CPU runs every product as an FMA loop, and
    sm_90 takes wgmma where a warp group owns 64 rows)."""
    monkeypatch.setenv("OXIDE_DUMP", "tile")
    monkeypatch.setenv("OXIDE_CACHE", "0")
    kernel.compile(*args, arch="sm_80")
    err = capfd.readouterr().err
    assert "// ---- oxide tile:" in err
    return err


def ops_of(text: str) -> list[str]:
    return re.findall(r'"(tile\.\w+)"', text)


def test_every_op_is_described_and_is_a_tile_operation() -> None:
    from oxide.ir.tile_ops import OP_CLASSES

    assert set(OP_CLASSES) == set(TILE_OPS)
    for kind, cls in OP_CLASSES.items():
        assert cls.name == f"tile.{kind}" and issubclass(cls, TileOperation)


def test_the_frontend_builds_whole_tile_ops_with_layouts(monkeypatch, capfd) -> None:
    x = np.zeros((4, 100), np.float32)
    text = tile_ir(softmax_rows, x, np.empty_like(x), 128, monkeypatch=monkeypatch,
                   capfd=capfd)
    found = ops_of(text)
    assert found.count("tile.reduce") == 2 and "tile.load" in found
    assert "tile.store" in found and "tile.math" in found
    assert "<?>" not in text, "the layout pass left a tile without a layout"
    # the loaded row and the reductions' slice layouts share the row's lanes
    assert "!tile.tile<1x128xf32, <1 x 1@5 x 1@0; 1 x 32@0 x 4@0>>" in text
    assert "!tile.tile<1x1xf32, <1 x 1@5 x 1@0; 1 x 32@0 x 4@0>>" in text


def test_the_layout_pass_converts_an_mma_result_before_a_scan(monkeypatch, capfd) -> None:
    a = np.zeros((32, 16), np.float32)
    b = np.zeros((16, 32), np.float32)
    text = tile_ir(scan_of_product, a, b, np.zeros((32, 32), np.float32),
                   monkeypatch=monkeypatch, capfd=capfd)
    found = ops_of(text)
    # the product is in the accumulator layout; the scan walks a blocked one
    assert found.index("tile.mma") < found.index("tile.convert") < found.index("tile.cumsum")
    acc = mma_accumulator((32, 32), 4)
    assert acc is not None and not acc.is_blocked


def test_a_loop_variable_keeps_its_first_layout(monkeypatch, capfd) -> None:
    x = np.zeros((32, 32), np.float32)
    text = tile_ir(carried, x, np.empty_like(x), 3, monkeypatch=monkeypatch, capfd=capfd)
    found = ops_of(text)
    assert found.count("tile.var") == 1 and found.count("tile.var_write") == 2
    assert found.count("tile.var_read") == 2
    assert "tile.convert" not in found  # zeros, permute and + are all blocked: no move


def test_an_mma_accumulator_is_carried_in_the_mma_layout(monkeypatch, capfd) -> None:
    from oxide.ir.tile_ops import _layout_text

    text = tile_ir(bf16_matmul, Slice[bf16, 2], Slice[bf16, 2], DisjointSlice[f32, 2],
                   monkeypatch=monkeypatch, capfd=capfd)
    acc = mma_accumulator((64, 64), 4)
    assert acc is not None
    assert f"!tile.var<!tile.tile<64x64xf32, {_layout_text(acc)}>>" in text
    # tile.zeros is made blocked (8-element runs: the kernel's narrowest array is bf16)
    # and converted once, before the loop: a constant is made again, not moved
    assert f"!tile.tile<64x64xf32, {_layout_text(blocked((64, 64), 4, 8))}>" in text
    found = ops_of(text)
    assert found.index("tile.full") < found.index("tile.convert") < found.index("tile.var_write")


def test_a_product_carried_through_a_helper_keeps_the_mma_layout(monkeypatch, capfd) -> None:
    """The layout pass sees the product inside the inlined @ox.tile.func (the name `acc`
    is assigned from a call, not from an `@`): the loop carries it in the accumulator
    layout, and no conversion runs inside the loop."""
    from oxide.ir.tile_ops import _layout_text

    text = tile_ir(through_a_helper, Slice[bf16, 2], Slice[bf16, 2], DisjointSlice[f32, 2],
                   monkeypatch=monkeypatch, capfd=capfd)
    acc = mma_accumulator((64, 64), 4)
    assert acc is not None
    assert f"!tile.var<!tile.tile<64x64xf32, {_layout_text(acc)}>>" in text
    found = ops_of(text)
    assert found.count("tile.convert") == 1  # the zeros, before the loop
    assert found.index("tile.convert") < found.index("tile.mma")


def test_no_tile_op_survives_the_lowering() -> None:
    x = np.zeros((4, 100), np.float32)
    ck = softmax_rows.compile(x, np.empty_like(x), 128, target="cpu")
    assert "tile." not in ck.ir
    assert "oxide.masked_load" in ck.ir or "oxide.load" in ck.ir


@pytest.mark.parametrize("rows", [1, 3])
def test_the_lowered_kernel_computes_softmax(rows: int) -> None:
    x = np.random.default_rng(0).standard_normal((rows, 100)).astype(np.float32)
    out = np.empty_like(x)
    softmax_rows[rows](x, out, 128)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-6)


def test_the_layout_check_catches_what_the_pass_must_not_leave() -> None:
    from oxide.ir.tile_ops import TileType, make
    from oxide.tile.layouts import check_layouts

    shape = (64, 64)
    a, b = blocked(shape, 4), blocked(shape, 4, 8)  # 4 and 8 elements a thread side by side
    assert a.key() != b.key()
    fa = make("full", [], [TileType.of(shape, f32, a)], value=0.0)
    fb = make("full", [], [TileType.of(shape, f32, b)], value=1.0)
    check_layouts([fa, fb])
    mixed = make("binary", [fa.results[0], fb.results[0]], [TileType.of(shape, f32, a)],
                 kind="add")
    with pytest.raises(AssertionError, match="different layouts"):
        check_layouts([fa, fb, mixed])
    bare = make("full", [], [TileType.of(shape, f32)], value=0.0)
    with pytest.raises(AssertionError, match="without a layout"):
        check_layouts([bare])


def test_the_engine_pass_puts_products_of_halves_on_tensor_cores_only_on_the_gpu(
        monkeypatch, capfd) -> None:
    """tile/mma_choice.py, the first pass: mma.sync where the GPU's tensor cores take the
    product, an FMA loop on the CPU and for f32 (sm_90 takes this 128-row tile on wgmma,
    two instructions a warp group: tests/test_tile_row_blocks.py)."""
    import ml_dtypes

    a = np.zeros((128, 64), ml_dtypes.bfloat16)
    b = np.zeros((64, 128), ml_dtypes.bfloat16)
    c = np.zeros((128, 128), np.float32)
    for arch, engine in (("sm_80", "mma.sync"), ("sm_90", "wgmma"), ("cpu", "fma")):
        monkeypatch.setenv("OXIDE_DUMP", "tile")
        monkeypatch.setenv("OXIDE_CACHE", "0")
        product_of.compile(a, b, c, arch=arch)
        text = capfd.readouterr().err
        assert f"engine='{engine}'" in text
    product_of.compile(a.astype(np.float32), b.astype(np.float32), c, arch="sm_90")
    assert "engine='fma'" in capfd.readouterr().err


T = ox.TypeVar("T")


@tile.kernel(num_warps=4)
def product_of(a: Slice[T, 2], b: Slice[T, 2], c: DisjointSlice[f32, 2]):
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((128, 128), f32)
    acc = tile.mma(tile.load(a, (i, 0), (128, 64)), tile.load(b, (0, j), (64, 128)), acc)
    tile.store(c, (i, j), acc)


def test_the_engine_pass_takes_wgmma_where_a_warp_group_owns_64_rows(monkeypatch, capfd):
    """sm_90 and M = 16 * num_warps (here 64 on 4 warps): wgmma; sm_80: mma.sync."""
    import ml_dtypes

    a = np.zeros((64, 64), ml_dtypes.bfloat16)
    b = np.zeros((64, 128), ml_dtypes.bfloat16)
    c = np.zeros((64, 128), np.float32)
    monkeypatch.setenv("OXIDE_DUMP", "tile")
    monkeypatch.setenv("OXIDE_CACHE", "0")
    for arch, engine in (("sm_90", "wgmma"), ("sm_80", "mma.sync"), ("cpu", "fma")):
        ck = wgmma_sized.compile(a, b, c, arch=arch)
        assert f"engine='{engine}'" in capfd.readouterr().err
        if arch == "sm_90":
            assert ck.arch == "sm_90a" and ck.ptx.count("wgmma.mma_async") == 4


@tile.kernel(num_warps=4)
def wgmma_sized(a: Slice[bf16, 2], b: Slice[bf16, 2], c: DisjointSlice[f32, 2]):
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.mma(tile.load(a, (i, 0), (64, 64)), tile.load(b, (0, j), (64, 128)),
                   tile.zeros((64, 128), f32))
    tile.store(c, (i, j), acc)
