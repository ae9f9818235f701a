"""`ox.ConstantArray`: constant memory, declared at module level and set from the host.

Kernels read it (`C[i]`) through the GPU's constant cache; the compiler gives
each kernel module its own global for it (`CompiledKernel.constants` lists
`(symbol, ConstantArray)`). The values live here, on the host, with a version
number: each loaded module (on each device) remembers the version it last
received, so `set` costs one host copy and every launch after it uploads only
where the module is stale. A launch before any `set` is an `ox.LaunchError`,
never a kernel reading whatever the memory held.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from oxide import types as T
from oxide.errors import LaunchError

CONSTANT_MEMORY_BYTES = 64 * 1024  # what a GPU has, for all constant arrays of one module


class ConstantArray:
    """A read-only array in the GPU's constant memory (64 KiB per module in all).

    >>> import oxide as ox
    >>> COEFFS = ox.ConstantArray(ox.f32, 4)          # at module level
    >>> COEFFS.set([0.5, 0.25, 0.125, 0.0625])         # on the host, before launching
    >>> COEFFS.values.tolist()
    [0.5, 0.25, 0.125, 0.0625]
    """

    def __init__(self, dtype: Any, shape: int | tuple[int, ...]) -> None:
        self.dtype = T.dtype_of(dtype)
        if self.dtype.is_bool:
            raise TypeError("constant arrays hold numbers; use u8 for flags")
        dims = (shape,) if isinstance(shape, int) else tuple(shape)
        if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and d > 0 for d in dims):
            raise ValueError(f"a ConstantArray shape is 1 to 3 positive ints, got {shape!r}")
        self.shape = dims
        self.size = int(np.prod(dims))
        self.nbytes = self.size * self.dtype.itemsize
        if self.nbytes > CONSTANT_MEMORY_BYTES:
            raise ValueError(f"{self.nbytes:,} bytes do not fit in the GPU's 64 KiB of "
                             "constant memory")
        self.version = 0  # 0: never set
        self._values: np.ndarray | None = None
        self._uploaded: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def set(self, values: Any) -> None:
        """Sets every element (array-like of the declared shape, converted to the dtype).

        Kernels launched after this call see the new values; launches already queued
        keep the values they were launched with.
        """
        host = _to_host(values)
        arr = np.array(host, dtype=self.dtype.numpy, copy=True, order="C")
        if arr.shape != self.shape:
            raise ValueError(f"ConstantArray of shape {self.shape} set with values of shape "
                             f"{arr.shape}")
        with self._lock:
            self._values = arr
            self.version += 1

    @property
    def values(self) -> np.ndarray | None:
        """A read-only view of the current host values (None before the first `set`)."""
        if self._values is None:
            return None
        view = self._values.view()
        view.flags.writeable = False
        return view

    def host_bytes(self, kernel_name: str = "") -> bytes:
        """The values as the device stores them; a LaunchError if they were never set."""
        if self._values is None:
            user = f" by kernel `{kernel_name}`" if kernel_name else ""
            raise LaunchError(f"{self!r} is used{user} but was never set: call "
                              "`.set(values)` on it before launching")
        return self._values.tobytes()

    def sync_to(self, key: Hashable, upload: Callable[[bytes], None],
                kernel_name: str = "") -> None:
        """Calls `upload(bytes)` if the module identified by `key` holds an older version.

        `key` names one loaded copy of the global (e.g. (device ordinal, module
        handle)); `upload` copies the bytes into it (stream-ordered before the launch).
        """
        with self._lock:
            data = self.host_bytes(kernel_name)
            if self._uploaded.get(key) == self.version:
                return
            upload(data)
            self._uploaded[key] = self.version

    def forget(self, key: Hashable) -> None:
        """Drops the record of a module that was unloaded (its key may be reused)."""
        with self._lock:
            self._uploaded.pop(key, None)

    def __getitem__(self, index: Any) -> Any:
        raise RuntimeError("a ConstantArray is read inside kernels; on the host use `.values`")

    def __repr__(self) -> str:
        dims = self.shape[0] if len(self.shape) == 1 else self.shape
        return f"ox.ConstantArray({self.dtype.name}, {dims})"


def _to_host(values: Any) -> Any:
    """Host memory for array-likes that live elsewhere (torch/CuPy device arrays)."""
    if hasattr(values, "detach") and hasattr(values, "cpu"):  # torch
        return values.detach().cpu().numpy()
    if hasattr(values, "get") and hasattr(values, "__cuda_array_interface__"):  # CuPy
        return values.get()
    if hasattr(values, "to_numpy"):  # oxide device arrays
        return values.to_numpy()
    return values
