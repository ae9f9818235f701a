"""`range` runs exactly as many times as Python's, even where `counter + step` would wrap.

Issue 14, round 2 (found by the fuzzer): `for j in range(a[0], i8(127), i8(5))` with
`a[0] = 120` ran 155 times; the counter wrapped from 125 to -126 and went on.
tests/test_gpu_semantics.py runs the same kernels on a GPU.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import oxide as ox
from oxide import DisjointSlice, Slice, i8, i32, i64, thread, u8, u64

T = ox.TypeVar("T")


@ox.kernel
def trips_i8_by_5(a: Slice[i8], out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i in out:
        n = 0
        for _ in range(a[i], i8(127), i8(5)):
            n += 1
        out[i] = n


@ox.kernel
def trips_i8_down_by_5(a: Slice[i8], out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i in out:
        n = 0
        for _ in range(a[i], i8(-128), i8(-5)):
            n += 1
        out[i] = n


@ox.kernel
def constant_edges(out: DisjointSlice[i64]):
    i = thread.index_1d()
    if i in out:
        n = i64(0)
        for j in range(-(2**63), 2**63 - 1, 2**62):  # len(range()) itself overflows here
            n = n * 10 + (j >> 62) + 3
        out[i] = n


@ox.kernel
def trips(start: Slice[T], stop: Slice[T], step: Slice[T], out: DisjointSlice[i32],
          last: DisjointSlice[T]):
    i = thread.index_1d()
    if i in out and i in last:
        n = 0
        for j in range(start[i], stop[i], step[i]):
            n += 1
            last[i] = j
        out[i] = n


def count_of(start: int, stop: int, step: int) -> int:
    """`len(range(start, stop, step))`, for any size."""
    return max(0, (stop - start + step - (1 if step > 0 else -1)) // step)


def trip_cases(dt: object, count: int = 3000) -> tuple[np.ndarray, ...]:
    """Random ranges plus the edges of the type, of at most 300 trips (steps 0 excluded:
    that is reported)."""
    info = np.iinfo(dt.numpy)  # type: ignore[attr-defined]
    lo, hi = int(info.min), int(info.max)
    rng = random.Random(14)
    edges = [lo, lo + 1, lo + 7, -3 if lo else 3, 0, 1, hi - 7, hi - 1, hi]
    steps = [s for s in (1, -1, 2, -2, 3, 5, -5, 7, hi, lo, hi // 2, -(hi // 2), hi - 3)
             if s and lo <= s <= hi]
    cases = [(a, b, s) for a in edges for b in edges for s in steps
             if count_of(a, b, s) <= 300]
    while len(cases) < count:
        s = rng.randint(lo, hi) or 1
        a = rng.randint(lo, hi)
        b = rng.choice((rng.randint(lo, hi), a + rng.randint(-200, 200) * s))
        if lo <= b <= hi and count_of(a, b, s) <= 300:
            cases.append((a, b, s))
    return tuple(np.array(c, dt.numpy) for c in zip(*cases, strict=True))  # type: ignore


def python_trips(start: np.ndarray, stop: np.ndarray, step: np.ndarray) -> tuple[list, list]:
    ranges = [range(a, b, s) for a, b, s in
              zip(start.tolist(), stop.tolist(), step.tolist(), strict=True)]
    return [len(r) for r in ranges], [r[-1] if r else 0 for r in ranges]


def run_trips(dt: object, *cases: np.ndarray) -> tuple[list, list]:
    n = cases[0].size
    out, last = np.zeros(n, np.int32), np.zeros(n, dt.numpy)  # type: ignore[attr-defined]
    trips[ox.LaunchConfig.for_num_elems(n)](*cases, out, last)
    return out.tolist(), last.tolist()


@pytest.fixture(autouse=True)
def on_cpu():
    with ox.device("cpu"):
        yield


def test_a_step_past_the_type_maximum_ends_the_loop() -> None:
    a = np.array([120, 126, 127, 0, -128], np.int8)
    out = np.zeros(5, np.int32)
    trips_i8_by_5[ox.LaunchConfig.for_num_elems(5)](a, out)
    assert out.tolist() == [len(range(v, 127, 5)) for v in a.tolist()] == [2, 1, 0, 26, 51]
    trips_i8_down_by_5[ox.LaunchConfig.for_num_elems(5)](a, out)
    assert out.tolist() == [len(range(v, -128, -5)) for v in a.tolist()]


@pytest.mark.parametrize("dt", [i8, u8, ox.i16, ox.u16, i32, ox.u32, i64, u64],
                         ids=lambda d: d.name)
def test_run_time_ranges_count_as_python_does(dt: object) -> None:
    cases = trip_cases(dt)
    assert run_trips(dt, *cases) == python_trips(*cases)


def test_constant_ranges_at_the_edges_of_i64() -> None:
    out = np.zeros(1, np.int64)
    constant_edges[ox.LaunchConfig.for_num_elems(1)](out)
    assert out.tolist() == [1234]  # j >> 62 is -2, -1, 0, 1: four trips, then it stops
