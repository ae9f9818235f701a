"""Chained comparisons short-circuit as Python's do (issue 14, round 2).

`1 < x < 7 // d` with `x = 0` and `d = 0` is False in Python without dividing; oxide
evaluated every operand and reported a division by zero Python would never reach.
"""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import DisjointSlice, Slice, i32, thread

N = 3


@ox.kernel
def chained(x: Slice[i32], d: Slice[i32], out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i in out:
        r = 0
        if 1 < x[i] < 7 // d[i]:
            r = 1
        if x[i] < -5 < 7 // d[i] < 100:
            r += 10
        out[i] = r


@ox.kernel
def constant_links(x: Slice[i32], out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i in out:
        r = 0
        if 1 < N < 7:  # folds: the branch is compiled alone
            r = 1
        if 7 < N < x[i] // 0:  # folds to False without reaching the division
            r = 2
        if 1 < N < x[i]:
            r += 10
        out[i] = r


def run(kernel, *args: np.ndarray) -> list[int]:
    out = np.zeros(args[0].size, np.int32)
    with ox.device("cpu"):
        kernel[ox.LaunchConfig.for_num_elems(out.size)](*args, out)
    return out.tolist()


def test_a_false_link_skips_the_operands_after_it() -> None:
    x = np.array([0, -9, 9, 3], np.int32)
    d = np.array([0, 1, 1, 1], np.int32)
    assert run(chained, x, d) == [0, 10, 0, 1]  # x = 0: neither chain reaches 7 // 0


def test_a_true_link_evaluates_the_next_one() -> None:
    with np.testing.assert_raises(ox.KernelAssertionError):
        run(chained, np.array([2], np.int32), np.array([0], np.int32))


def test_constant_links_fold() -> None:
    assert run(constant_links, np.array([0, 5], np.int32)) == [1, 11]
