"""Issue 27: a tile kernel's `for ... in range(...)` runs as many times as Python's range.

The counter's increment once wrapped around its type: `range(0, n, 2**30)` in i32 with
`n = 2**31 - 1` never ended (a hang, in a kernel that is safe by construction). The tile
loop now takes the SIMT loop's wrap-safe increment (frontend/loops.py `next_counter`),
counts in i64 where a constant bound or step needs it, and refuses constants beyond i64
(a step, a tile index) as the SIMT frontend does, instead of an internal error.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, i32, i64, tile


@pytest.fixture(autouse=True)
def on_cpu() -> Iterator[None]:
    with ox.device("cpu"):
        yield


@tile.kernel(num_warps=1)
def count_i32(start: i32, stop: i32, out: DisjointSlice[i32], STEP: Const[int]):
    acc = tile.zeros((32,), i32)
    for _ in range(start, stop, STEP):
        acc = acc + 1
    tile.store(out, (tile.bid(0),), acc)


@tile.kernel(num_warps=1)
def count_i64(start: i64, stop: i64, out: DisjointSlice[i64], STEP: Const[int]):
    acc = tile.zeros((32,), i64)
    for _ in range(start, stop, STEP):
        acc = acc + 1
    tile.store(out, (tile.bid(0),), acc)


I32_CASES = [(0, 2**31 - 1, 2**30), (0, 2**31 - 1, 2**31 - 1), (-(2**31), 2**31 - 1, 2**31 - 1),
             (2**31 - 1, -(2**31), -(2**30)), (5, 2**31 - 1, 3 * 2**29), (0, 10, 3), (10, 0, -4),
             (0, 10, 2**40)]
I64_CASES = [(0, 2**63 - 1, 2**62), (-(2**63), 2**63 - 1, 2**62 + 1),
             (2**63 - 1, -(2**63), -(2**62)), (2**63 - 10, 2**63 - 1, 7)]


@pytest.mark.parametrize("start,stop,step", I32_CASES)
def test_i32_ranges_run_as_pythons(start: int, stop: int, step: int) -> None:
    out = np.zeros(32, np.int32)
    count_i32[1](start, stop, out, step)
    assert (out == len(range(start, stop, step))).all()


@pytest.mark.parametrize("start,stop,step", I64_CASES)
def test_i64_ranges_run_as_pythons(start: int, stop: int, step: int) -> None:
    out = np.zeros(32, np.int64)
    count_i64[1](start, stop, out, step)
    assert (out == len(range(start, stop, step))).all()


def test_constants_beyond_i64_are_diagnostics() -> None:
    @tile.kernel(num_warps=1)
    def step_too_big(out: DisjointSlice[i32]):
        acc = tile.zeros((32,), i32)
        for _ in range(0, 10, 2**70):
            acc = acc + 1
        tile.store(out, (tile.bid(0),), acc)

    @tile.kernel(num_warps=1)
    def index_too_big(a: Slice[f32], out: DisjointSlice[f32]):
        tile.store(out, (tile.bid(0),), tile.load(a, (2**64,), (32,)))

    for k, sig in ((step_too_big, (DisjointSlice[i32],)),
                   (index_too_big, (Slice[f32], DisjointSlice[f32]))):
        with pytest.raises(ox.KernelTypeError, match="does not fit in i64") as info:
            k.compile(*sig)
        assert info.value.span is not None and "2**" in info.value.span.text
