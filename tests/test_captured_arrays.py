"""Issue 15 item 5: NumPy arrays read from module or closure scope are captured (numba's rule)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import oxide as ox
from oxide import DisjointSlice, Slice, f32, i32, thread

TAPS = np.array([0.25, 0.5, 0.25], np.float32)
TABLE = np.arange(12, dtype=np.int32).reshape(3, 4)


@pytest.fixture(autouse=True)
def on_cpu() -> Iterator[None]:
    with ox.device("cpu"):
        yield


@ox.kernel
def smooth(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        s = f32(0.0)
        for j in range(3):
            if i + j < len(x):
                s += TAPS[j] * x[i + j]
        out[i] = s + f32(TABLE[2, 3])


def test_a_module_level_array_is_read_in_a_kernel() -> None:
    x = np.arange(6, dtype=np.float32)
    out = np.zeros(4, np.float32)
    smooth[1, 32](x, out)
    want = np.array([sum(TAPS[j] * x[i + j] for j in range(3)) for i in range(4)], np.float32)
    np.testing.assert_array_equal(out, want + 11)
    assert smooth.compile(Slice[f32], DisjointSlice[f32], arch="sm_90").cubin


def test_the_values_are_those_of_the_first_capture() -> None:
    table = np.array([1, 2, 3], np.int32)  # a closure variable

    @ox.kernel
    def pick(out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i in out:
            out[i] = table[i % 3]

    out = np.zeros(3, np.int32)
    pick[1, 32](out)
    table[0] = 100  # as in numba: the kernel keeps the values it captured
    pick[1, 32](out)
    assert out.tolist() == [1, 2, 3]


def test_an_array_too_big_for_constant_memory_names_the_alternatives() -> None:
    big = np.zeros(20_000, np.float32)

    @ox.kernel
    def read(out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = big[i]

    with pytest.raises(ox.KernelTypeError, match="cannot capture") as e:
        read.compile(DisjointSlice[f32], target="cpu")
    assert "Slice parameter" in e.value.hint and "ConstantArray" in e.value.hint


def test_kernels_do_not_write_a_captured_array() -> None:
    @ox.kernel
    def write(out: DisjointSlice[f32]):
        i = thread.index_1d()
        TAPS[0] = 1.0
        if i in out:
            out[i] = 0.0

    with pytest.raises(ox.SafetyError, match="only read it"):
        write.compile(DisjointSlice[f32], target="cpu")
