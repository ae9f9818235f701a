"""Issue 27: constants the compiler folds mean what Python means by them.

Where Python raises on a constant expression, the compiler raises a diagnostic with a
span, in SIMT and tile kernels alike, and the tile frontend folds with the SIMT one's
bounds (frontend/constfold.py), so no constant expression hangs it. The bad-kernel corpus
(tests/corpus/constants.py) holds the plain cases; these are the ones that need a run or
a look at what was accepted.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterator

import numpy as np
import pytest

import oxide as ox
from oxide import DisjointSlice, Slice, f16, f32, i32, i64, thread, tile, u32

NAN = math.nan


@pytest.fixture(autouse=True)
def on_cpu() -> Iterator[None]:
    with ox.device("cpu"):
        yield


def test_simt_typed_negative_constant_shift_is_refused() -> None:
    @ox.kernel
    def k(n: i32, out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i in out:
            out[i] = n << i32(-2)

    with pytest.raises(ox.KernelTypeError, match="negative constant") as info:
        k.compile(i32, DisjointSlice[i32])
    assert info.value.span is not None and "i32(-2)" in info.value.span.text


def test_an_unsigned_constant_amount_is_not_negative() -> None:
    """`u32(4294967295)` is a large amount, not -1: it shifts everything out (0)."""
    @ox.kernel
    def k(n: u32, out: DisjointSlice[u32]):
        i = thread.index_1d()
        if i in out:
            out[i] = n << u32(4294967295)

    out = np.full(2, 7, np.uint32)
    k[1, 2](u32(5), out)
    assert out.tolist() == [0, 0]


def test_a_negative_run_time_shift_amount_still_reads_as_unsigned() -> None:
    @ox.kernel
    def k(n: i32, s: i32, out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i in out:
            out[i] = n << s

    out = np.full(1, 7, np.int32)
    k[1, 1](1, -1, out)
    assert out.tolist() == [0]


def test_tile_constant_conversion_is_a_typed_scalar() -> None:
    """`f32(c)` in a tile kernel is an f32 value, as in a SIMT kernel: an f16 tile times
    it is an f32 tile (a weak literal would have kept f16)."""
    @tile.kernel
    def k(x: Slice[f16], out: DisjointSlice[f32]):
        t = tile.load(x, (tile.bid(0),), (16,))
        tile.store(out, (tile.bid(0),), t * f32(0.1))

    x = np.arange(16, dtype=np.float16)
    out = np.zeros(16, np.float32)
    k[1](x, out)
    assert np.array_equal(out, x.astype(np.float32) * np.float32(0.1))


@pytest.mark.parametrize("expr,words", [
    ("i32(NAN)", "NaN is no integer"),
    ("i32(3e10)", "does not fit in i32"),
    ("int(1e300)", "too large"),
    ("min(1, (2,))", "fails"),
    ("(1,) < 2", "fails"),
    ("tile.maximum(1, (2,))", "fails"),
    ("~1.5", "bad operand"),
    ("7 // 0", "division or modulo by zero"),
])
def test_tile_constants_python_refuses_are_diagnostics(expr: str, words: str) -> None:
    ns: dict[str, object] = {}
    src = ("def k(out: DisjointSlice[i64]):\n"
           f"    v = {expr}\n"
           "    tile.store(out, (tile.bid(0),), tile.full((16,), 1, i64))\n")
    import linecache

    path = f"<constant-refusals-{abs(hash(src))}>"
    linecache.cache[path] = (len(src), None, src.splitlines(True), path)
    exec(compile(src, path, "exec"), {**globals(), "NAN": NAN}, ns)
    k = tile.kernel(ns["k"])
    with pytest.raises(ox.KernelTypeError, match=words) as info:
        k.compile(DisjointSlice[i64])
    assert info.value.span is not None and info.value.span.line == 2


def test_the_folding_limits_are_checked_before_evaluating() -> None:
    from oxide.frontend import constfold

    for fn, values in ((operator.mul, ((0,), 2**40)), (operator.mul, ("ab", 2**40)),
                       (operator.pow, (3, 2**40)), (operator.lshift, (1, 2**40))):
        with pytest.raises(constfold.FoldError, match="too (long|large)"):
            constfold.evaluate(fn, values)


def test_tile_full_converts_a_float_to_its_integer_dtype_as_numpy_does() -> None:
    @tile.kernel(num_warps=1)
    def k(out: DisjointSlice[i32]):
        tile.store(out, (tile.bid(0),), tile.full((32,), 2.7, i32) + tile.full((32,), -2.7, i32)
                   * 10)

    out = np.zeros(32, np.int32)
    k[1](out)
    assert (out == 2 - 20).all()


@pytest.mark.parametrize("expr,words", [
    ("tile.full((16,), NAN, i64)", "NaN is no integer"),
    ("tile.full((16,), 1e30, i64)", "does not fit in i64"),
    ("tile.grouped(1.5, 2, 2, 2)[0]", "the literal 1.5 is not an integer"),
])
def test_tile_floats_where_integers_go_are_diagnostics(expr: str, words: str) -> None:
    """A float literal met by an integer type is an error, as in SIMT kernels (it was
    truncated silently, or raised Python's ValueError for NaN)."""
    import linecache

    src = ("def k(out: DisjointSlice[i64]):\n"
           f"    v = {expr}\n"
           "    tile.store(out, (tile.bid(0),), tile.full((16,), 1, i64))\n")
    path = f"<constant-refusals-{abs(hash(src))}>"
    linecache.cache[path] = (len(src), None, src.splitlines(True), path)
    ns: dict[str, object] = {}
    exec(compile(src, path, "exec"), {**globals(), "NAN": NAN}, ns)
    with pytest.raises(ox.KernelTypeError, match=words) as info:
        tile.kernel(ns["k"]).compile(DisjointSlice[i64])
    assert info.value.span is not None and info.value.span.line == 2
