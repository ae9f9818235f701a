"""Issue 15 item 1: an unranked `Slice[f32]` takes its rank from the argument."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import oxide as ox
from oxide import DisjointSlice, Slice, f32, thread


@pytest.fixture(autouse=True)
def on_cpu() -> Iterator[None]:
    with ox.device("cpu"):
        yield


@ox.kernel
def row_sums(m: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        s = f32(0.0)
        for j in range(m.shape[1]):
            s += m[i, j]
        out[i] = s


@ox.kernel
def total(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = f32(len(x))  # len() is the first dimension, whatever the rank


def test_an_unranked_slice_takes_the_arguments_rank() -> None:
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = np.zeros(3, np.float32)
    row_sums[1, 32](m, out)
    np.testing.assert_array_equal(out, m.sum(axis=1))


def test_one_specialization_per_rank() -> None:
    out = np.zeros(2, np.float32)
    for shape in [(5,), (6, 2), (7, 2, 2)]:
        total[1, 32](np.zeros(shape, np.float32), out)
        assert out.tolist() == [shape[0]] * 2


def test_the_wrong_rank_for_the_body_is_a_compile_error() -> None:
    with pytest.raises(ox.CompileError):
        row_sums[1, 32](np.zeros(4, np.float32), np.zeros(4, np.float32))


def test_a_declared_rank_is_kept_and_the_error_names_both_fixes() -> None:
    @ox.kernel
    def one_d(x: Slice[f32, 1], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[i]

    with pytest.raises(ox.ArgumentError) as e:
        one_d[1, 32](np.zeros((2, 2), np.float32), np.zeros(4, np.float32))
    assert "Slice[f32, 2]" in str(e.value) and "`Slice[f32]`" in str(e.value)


def test_compile_with_the_type_keeps_rank_1() -> None:
    ck = total.compile(Slice[f32], DisjointSlice[f32], target="cpu")
    assert ck.signature[0].rank == 1
    ck2 = total.compile(np.zeros((2, 3), np.float32), DisjointSlice[f32], target="cpu")
    assert ck2.signature[0].rank == 2
