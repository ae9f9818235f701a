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
    # bf16 @ bf16 is a bf16 tile: each step's product rounded before the f32 sum
    "a bf16 product": "acc = acc + tile.load(a, (i, k), (BM, BK)) @ tile.load(b, (k, j), "
                      "(BK, BN))",
    "another accumulator": "acc = tile.mma(tile.load(a, (i, k), (BM, BK)), "
                           "tile.load(b, (k, j), (BK, BN)), acc * 0.5)",
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


def _variant(tmp_path, name: str, line: str | None):  # noqa: ANN001, ANN202
    """A tile kernel made from _CANONICAL with the line that starts like `line` replaced
    by it, imported from a file (kernels are read from their source)."""
    lines = _CANONICAL.splitlines()
    if line is not None:
        # the statement the line replaces: the one that starts like it (`tile.store`, `for`,
        # `i, j =`), an accumulator update the `tile.mma` one, `acc = tile.zeros` its own
        head = line.split("(")[0].strip()
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
