"""The canonical matmul K loop (oxide/tile/matmul_pattern.py): what is recognized, what
is not, and that the wgmma template declines what it cannot run (no GPU needed: the
GPU runs are tests/test_gpu_tile_matmul_template.py)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, Slice, bf16, f16, f32, tile
from oxide.examples import tile_matmul as example
from oxide.kernels import tile_matmul as template
from oxide.runtime.array_view import ArrayView
from oxide.runtime.config import LaunchConfig
from oxide.runtime.device import Device
from oxide.tile.matmul_pattern import MatmulPattern, match

A = Slice[bf16, 2]
C = DisjointSlice[bf16, 2]


@tile.kernel
def named_loads(a: A, b: A, c: C, BM: Const[int], BN: Const[int], BK: Const[int]):
    """The loads named first; the grid's axis 1 walks the rows."""
    j = tile.bid(0)
    i = tile.bid(1)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(a, 1, BK)):
        x = tile.load(a, (i, k), (BM, BK))
        y = tile.load(b, (k, j), (BK, BN))
        acc = tile.mma(x, y, acc)
    tile.store(c, (i, j), acc.astype(bf16))


@tile.kernel
def literal_sizes(b: A, c: C, a: A):
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((64, 128), f32)
    for kk in range(tile.num_tiles(a, 1, 32)):
        acc = tile.mma(tile.load(a, (i, kk), (64, 32)), tile.load(b, (kk, j), (32, 128)), acc)
    tile.store(c, (i, j), acc.astype(bf16))


def test_the_example_is_the_canonical_loop() -> None:
    assert match(example.tile_matmul) == MatmulPattern(0, 1, 2, "BM", "BN", "BK", 0)
    assert example.tile_matmul.gpu_template() is not None
    assert match(example.tile_matmul_f32) is None  # f32: no wgmma template
    assert example.tile_matmul_f32.gpu_template() is None


def test_named_loads_and_a_transposed_grid() -> None:
    assert match(named_loads) == MatmulPattern(0, 1, 2, "BM", "BN", "BK", 1)


def test_literal_sizes_and_any_parameter_order() -> None:
    p = match(literal_sizes)
    assert p == MatmulPattern(2, 0, 1, 64, 128, 32, 0)
    assert p.sizes(literal_sizes.params, (None, None, None)) == (64, 128, 32)


# Each of these differs from the canonical loop in one way that changes what it computes
# (or that the template cannot do): none is recognized, so each runs as written.
_VARIANTS = {
    "epilogue": "tile.store(c, (i, j), tile.maximum(acc, 0.0).astype(bf16))",
    "f16 output": "tile.store(c, (i, j), acc.astype(f16))",
    "transposed store": "tile.store(c, (j, i), acc.astype(bf16))",
    "f16 accumulator": "acc = tile.zeros((BM, BN), f16)",
    "another bound": "for k in range(tile.num_tiles(b, 0, BK)):",
    "a later start": "for k in range(1, tile.num_tiles(a, 1, BK)):",
    "scaled product": "acc = tile.mma(tile.load(a, (i, k), (BM, BK)) * 2.0, "
                      "tile.load(b, (k, j), (BK, BN)), acc)",
    "swapped loads": "acc = tile.mma(tile.load(a, (k, i), (BM, BK)), "
                     "tile.load(b, (k, j), (BK, BN)), acc)",
    "padding": "acc = tile.mma(tile.load(a, (i, k), (BM, BK), padding=1.0), "
               "tile.load(b, (k, j), (BK, BN)), acc)",
    "one block index": "i, j = tile.bid(0), tile.bid(0)",
    "a product of another accumulator": "acc = acc2 + tile.load(a, (i, k), (BM, BK)) @ "
                                        "tile.load(b, (k, j), (BK, BN))",
    "a product subtracted": "acc = acc - tile.load(a, (i, k), (BM, BK)) @ "
                            "tile.load(b, (k, j), (BK, BN))",
    "another accumulator": "acc = tile.mma(tile.load(a, (i, k), (BM, BK)), "
                           "tile.load(b, (k, j), (BK, BN)), acc * 0.5)",
    "a load named like the row index": ("acc = tile.mma", "i = tile.load(a, (i, k), (BM, BK))"
                                        "\n        acc = tile.mma(i, tile.load(b, (k, j), "
                                        "(BK, BN)), acc)"),
    "extra statement": "tile.store(c, (i, j), acc.astype(bf16))\n    x = 1",
}
_CANONICAL = """
def kernel(a: A, b: A, c: C, BM: Const[int], BN: Const[int], BK: Const[int]):
    i, j = tile.bid(0), tile.bid(1)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(a, 1, BK)):
        acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)), acc)
    tile.store(c, (i, j), acc.astype(bf16))
"""


def _variant(tmp_path, name: str, line: str | tuple[str, str] | None):  # noqa: ANN001, ANN202
    """A tile kernel made from _CANONICAL with the line that starts like `line` replaced
    by it, imported from a file (kernels are read from their source)."""
    lines = _CANONICAL.splitlines()
    if line is not None:
        # the statement the line replaces: the one that starts like it (`tile.store`, `for`,
        # `i, j =`), an accumulator update the `tile.mma` one, `acc = tile.zeros` its own;
        # or (anchor, text): the statement that starts with the anchor
        head, line = line if isinstance(line, tuple) else (line.split("(")[0].strip(), line)
        if head.startswith("acc =") and not head.startswith("acc = tile.zeros"):
            head = "acc = tile.mma"
        at = next(n for n, t in enumerate(lines) if t.strip().startswith(head))
        lines[at] = lines[at][:len(lines[at]) - len(lines[at].lstrip())] + line
    path = tmp_path / f"variant_{len(list(tmp_path.iterdir()))}.py"
    path.write_text("from oxide import Const, DisjointSlice, Slice, bf16, f16, f32, tile\n"
                    "A = Slice[bf16, 2]\nC = DisjointSlice[bf16, 2]\n\n@tile.kernel"
                    + "\n".join(lines) + "\n")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


def test_the_variant_maker_keeps_the_canonical_loop(tmp_path) -> None:  # noqa: ANN001
    assert match(_variant(tmp_path, "canonical", None)) is not None


# `@` on bf16 is an f32 product, and `acc + a @ b` is `tile.mma(a, b, acc)` (the frontend
# makes it that op): the same computation, so the same pattern
_SPELLINGS = {
    "acc + product": "acc = acc + tile.load(a, (i, k), (BM, BK)) @ tile.load(b, (k, j), "
                     "(BK, BN))",
    "product + acc": "acc = tile.load(a, (i, k), (BM, BK)) @ tile.load(b, (k, j), (BK, BN))"
                     " + acc",
    "+=": ("acc = tile.mma", "acc += tile.load(a, (i, k), (BM, BK)) @ tile.load(b, (k, j), "
                             "(BK, BN))"),
}


@pytest.mark.parametrize("name", list(_SPELLINGS))
def test_products_added_with_at_are_the_canonical_loop(tmp_path, name: str) -> None:  # noqa: ANN001
    canonical = match(_variant(tmp_path, "canonical", None))
    assert match(_variant(tmp_path, name, _SPELLINGS[name])) == canonical


@pytest.mark.parametrize("name", list(_VARIANTS))
def test_anything_else_is_not_recognized(tmp_path, name: str) -> None:  # noqa: ANN001
    assert match(_variant(tmp_path, name, _VARIANTS[name])) is None


def test_f16_operands_are_not_recognized(tmp_path) -> None:  # noqa: ANN001
    k = _variant(tmp_path, "f16", None)
    k.params = tuple(p if p.name != "a" else type(p)(p.name, Slice[f16, 2]) for p in k.params)
    assert match(k) is None


def test_the_template_declines_the_cpu() -> None:
    a = np.zeros((64, 64), bf16.numpy)
    c = np.zeros((64, 64), bf16.numpy)
    pattern = match(example.tile_matmul)
    cfg = LaunchConfig(grid=(1, 1), block=256)
    assert not template.launch(example.tile_matmul, pattern, cfg, (a, a.copy(), c, 64, 64, 32),
                               None, Device("cpu", -1))


def test_a_recognized_kernel_still_runs_as_written_on_the_cpu() -> None:
    """The CPU has no template: the written kernel runs, ragged edges included."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((70, 40)).astype(bf16.numpy)
    b = rng.standard_normal((40, 36)).astype(bf16.numpy)
    c = np.zeros((70, 36), bf16.numpy)
    with ox.device("cpu"):
        named_loads[(tile.cdiv(36, 32), tile.cdiv(70, 32))](a, b, c, 32, 32, 16)
    want = a.astype(np.float32) @ b.astype(np.float32)
    # bf16 output: 8 significant bits of each result (the f32 sums are far closer)
    np.testing.assert_allclose(c.astype(np.float32), want, rtol=2 ** -8, atol=1e-6)


# -- the template's plan: every rule, on views of GPU memory that need no GPU ---------------

def _view(ptr: int, shape: tuple[int, int], strides: tuple[int, int] | None = None,
          dtype=bf16, device: int = 0) -> ArrayView:  # noqa: ANN001
    return ArrayView(ptr, shape, strides, dtype, device, None)


def _plan(a, b, c, grid=(8, 8, 1), sizes=(128, 128, 32), pattern=None):  # noqa: ANN001, ANN202
    return template.plan(pattern or match(example.tile_matmul), sizes, grid, a, b, c, 0)


M, K, N = 1000, 704, 1000
A_AT, B_AT, C_AT = 1 << 20, 1 << 24, 1 << 28  # far apart: no overlap


def test_the_plan_of_row_major_operands() -> None:
    p = _plan(_view(A_AT, (M, K)), _view(B_AT, (K, N)), _view(C_AT, (M, N)))
    assert p is not None and (p.m, p.n, p.k) == (M, N, K) and p.cfg.b_mn
    assert p.b.shape == (K, N)


def test_a_transposed_b_is_read_k_major() -> None:
    """`w.T` of a row-major N x K weight: B is K x N with strides (1, K)."""
    p = _plan(_view(A_AT, (M, K)), _view(B_AT, (K, N), (1, K)), _view(C_AT, (M, N)))
    assert p is not None and not p.cfg.b_mn
    assert p.b.shape == (N, K) and p.b.strides == (K, 1)


@pytest.mark.parametrize("case", [
    "unaligned rows", "grid short of C", "grid with z", "C overlaps A", "f16 A", "A elsewhere",
    "C shape", "K mismatch", "tile not a power of two", "tile too big", "column-major C",
    "misaligned base", "empty"])
def test_the_plan_declines(case: str) -> None:
    a, b, c = _view(A_AT, (M, K)), _view(B_AT, (K, N)), _view(C_AT, (M, N))
    grid, sizes = (8, 8, 1), (128, 128, 32)
    if case == "unaligned rows":
        a, b = _view(A_AT, (M, 100)), _view(B_AT, (100, N))
    elif case == "grid short of C":
        grid = (7, 8, 1)
    elif case == "grid with z":
        grid = (8, 8, 2)
    elif case == "C overlaps A":
        c = _view(A_AT + 64, (M, N))
    elif case == "f16 A":
        a = _view(A_AT, (M, K), dtype=f16)
    elif case == "A elsewhere":
        a = _view(A_AT, (M, K), device=1)
    elif case == "C shape":
        c = _view(C_AT, (M + 1, N))
    elif case == "K mismatch":
        b = _view(B_AT, (K + 8, N))
    elif case == "tile not a power of two":
        sizes = (96, 128, 32)
    elif case == "tile too big":
        sizes = (512, 128, 32)
    elif case == "column-major C":
        c = _view(C_AT, (M, N), (1, M))
    elif case == "misaligned base":
        a = _view(A_AT + 2, (M, K))
    elif case == "empty":
        a, b = _view(A_AT, (M, 0)), _view(B_AT, (0, N))
    assert _plan(a, b, c, grid, sizes) is None


def test_a_grid_over_rows_on_axis_1() -> None:
    """`named_loads` walks C's rows with grid axis 1: the grid is read the other way."""
    a, b, c = _view(A_AT, (M, K)), _view(B_AT, (K, 64)), _view(C_AT, (M, 64))
    pattern = match(named_loads)
    assert _plan(a, b, c, (1, 8, 1), (128, 64, 32), pattern) is not None
    assert _plan(a, b, c, (8, 1, 1), (128, 64, 32), pattern) is None


def test_what_the_written_kernel_refuses_the_template_refuses() -> None:
    """256 x 256 x 256 tiles need more shared memory than the written kernel may have
    (227 KiB on sm_90): the template raises the written kernel's diagnostic instead of
    running them as the GEMM."""
    views = {0: _view(A_AT, (512, 512)), 1: _view(B_AT, (512, 512), (1, 512)),
             2: _view(C_AT, (512, 512))}
    k = tile.kernel(num_warps=8)(example.tile_matmul.__wrapped__)
    with pytest.raises(ox.UnsupportedFeatureError, match="bytes of shared memory"):
        template.check_written(k, (None, None, None, 256, 256, 256), (256, 256, 256), views)
    template.check_written(k, (None, None, None, 128, 128, 32), (128, 128, 32), views)
    assert (128, 128, 32) in k.__dict__["_oxide_template_checked"]


def test_a_check_that_passed_is_remembered_on_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check compiles once per source, sizes and toolchain, not once per process: a
    new kernel object of the same source (as a new process makes) finds the check in the
    cache and compiles nothing; other tile sizes compile."""
    from oxide.runtime.cache import cache_dir

    if cache_dir() is None:
        pytest.skip("the compile cache is off (OXIDE_CACHE=0)")
    views = {0: _view(A_AT, (512, 512)), 1: _view(B_AT, (512, 512), (1, 512)),
             2: _view(C_AT, (512, 512))}
    args = (None, None, None, 128, 64, 32)
    template.check_written(tile.kernel(num_warps=8)(example.tile_matmul.__wrapped__), args,
                           (128, 64, 32), views)
    again = tile.kernel(num_warps=8)(example.tile_matmul.__wrapped__)
    compiled = []
    real = type(again).compile

    def spy(self, *a, **k):
        compiled.append(a)
        return real(self, *a, **k)

    monkeypatch.setattr(type(again), "compile", spy)
    template.check_written(again, args, (128, 64, 32), views)
    assert compiled == [] and (128, 64, 32) in again.__dict__["_oxide_template_checked"]
    template.check_written(again, (None, None, None, 128, 64, 64), (128, 64, 64), views)
    assert len(compiled) == 1  # other sizes: not checked before
