"""NumPy arrays that kernels read from module or closure scope, captured as numba does.

`W = np.array([...])` at module level, then `W[j]` in a kernel: the frontend asks here for
the array's `ox.ConstantArray`, made once per array with the values the array holds at
that moment (a kernel compiled later sees the same snapshot, not later writes to the
NumPy array, as in numba). It then lives in constant memory like any ConstantArray, so
it must fit in 64 KiB; a larger table is an error that says to pass it as a parameter.
"""

from __future__ import annotations

import threading

import numpy as np

from oxide import types as T
from oxide.errors import ArgumentError
from oxide.runtime.constant import ConstantArray

_lock = threading.Lock()
# id(array) -> (array, its ConstantArray); the array is kept so that its id stays its own
_captured: dict[int, tuple[np.ndarray, ConstantArray]] = {}


def capture(array: np.ndarray) -> ConstantArray:
    """The ConstantArray holding `array`'s values (made, and filled, on the first call)."""
    with _lock:
        found = _captured.get(id(array))
        if found is not None and found[0] is array:
            return found[1]
        if not 1 <= array.ndim <= 3 or array.size == 0:
            raise ArgumentError(f"it has shape {array.shape}; kernels capture arrays of 1 to 3 "
                                "dimensions with at least one element")
        try:
            dtype = T.dtype_of(array.dtype)
        except TypeError:
            raise ArgumentError(f"its dtype {array.dtype} is not one oxide supports") from None
        const = ConstantArray(dtype, array.shape)  # ArgumentError past 64 KiB
        const.set(np.ascontiguousarray(array))
        _captured[id(array)] = (array, const)
        return const
