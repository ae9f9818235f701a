"""Float atomic min/max follow `min`/`max` (issue 14, round 2): -0.0 orders below +0.0 and
a NaN loses, on every target (codegen/atomics.py used `llvm.minnum`, which leaves signed
zeros to the target). tests/test_gpu_semantics.py runs the same kernel on a GPU."""

from __future__ import annotations

import numpy as np
import pytest

import oxide as ox
from oxide import DisjointSlice, Slice, thread

T = ox.TypeVar("T")


@ox.kernel
def fold_min_max(x: Slice[T], low: DisjointSlice[T], high: DisjointSlice[T]):
    i = thread.index_1d()
    if i < len(x):
        with ox.unsafe():
            ox.atomic.min(low, 0, x[i])
            ox.atomic.max(high, 0, x[i])


CASES = [  # (start, the values folded in, min, max); bits compared
    (0.0, [-0.0], -0.0, 0.0),
    (-0.0, [0.0], -0.0, 0.0),
    (np.nan, [1.5], 1.5, 1.5),
    (2.0, [np.nan], 2.0, 2.0),
]


def run_case(dtype: type, start: float, values: list[float]) -> tuple[np.ndarray, np.ndarray]:
    x = np.array(values, dtype)
    low, high = np.array([start], dtype), np.array([start], dtype)
    fold_min_max[ox.LaunchConfig.for_num_elems(x.size)](x, low, high)
    return low, high


def bits(a: np.ndarray) -> list[int]:
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64).tolist()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_float_atomic_min_max_order_signed_zeros_on_the_cpu(dtype: type, case: tuple) -> None:
    start, values, lo, hi = case
    with ox.device("cpu"):
        low, high = run_case(dtype, start, values)
    assert bits(low) == bits(np.array([lo], dtype)) and bits(high) == bits(np.array([hi], dtype))

