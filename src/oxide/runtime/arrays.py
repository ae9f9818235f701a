"""`ox.DeviceArray`: an n-d array on the current device, and `ox.to_device/empty/zeros`.

On a GPU it owns a `cuMemAlloc` allocation in the device's primary context (so
torch, CuPy and numba read it through `__cuda_array_interface__` or DLPack without
a copy); on the CPU it wraps a NumPy array, so the same program runs on both.
Arrays are C-contiguous.

>>> x = ox.to_device(np.arange(4, dtype=np.float32))   # doctest: +SKIP
>>> y = ox.zeros(4, ox.f32)                             # doctest: +SKIP
>>> scale[ox.LaunchConfig.for_num_elems(4)](x, 2.0, y)  # doctest: +SKIP
>>> y.to_numpy()                                        # doctest: +SKIP
array([0., 2., 4., 6.], dtype=float32)
"""

from __future__ import annotations

import math
import sys
import weakref
from typing import Any

import numpy as np

from oxide import types as T
from oxide.errors import ArgumentError
from oxide.runtime.device import Device, current_device, parse_device
from oxide.runtime.views import HOST, ArrayView, oxide_dtype


def _np_dtype(dtype: Any) -> np.dtype:
    """The NumPy dtype of an oxide or NumPy dtype; ArgumentError for ones kernels cannot use."""
    try:
        dt = dtype.numpy if isinstance(dtype, T.DType) else np.dtype(dtype)
    except TypeError:
        raise ArgumentError(f"{dtype!r} is not a dtype; use ox.f32, ox.i32, ... or a NumPy "
                            "dtype") from None
    if oxide_dtype(dt) is None:
        raise ArgumentError(f"oxide has no dtype for {dt} arrays (kernels take f16, bf16, "
                            "f8e4m3, f8e5m2, f32, f64, i8-i64, u8-u64 and bool_ in native "
                            "byte order)")
    return dt


def _shape(shape: Any) -> tuple[int, ...]:
    try:
        dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    except TypeError:
        dims = (shape,)  # not iterable: refused below
    if any(not isinstance(n, (int, np.integer)) or isinstance(n, (bool, np.bool_)) or n < 0
           for n in dims):
        raise ArgumentError(f"a shape is non-negative ints, got {shape!r}")
    return tuple(int(n) for n in dims)


def _free(device_index: int, ptr: int) -> None:
    from oxide.runtime.gpu_devices import free_device_memory

    free_device_memory(device_index, ptr)


class DeviceArray:
    """A C-contiguous array in one device's memory (or a NumPy array on the CPU device)."""

    _oxide_array = True  # what the argument readers look for
    __slots__ = ("shape", "dtype", "device", "_ptr", "_host", "_finalizer", "__weakref__")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, device: Device,
                 host: np.ndarray | None = None) -> None:
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self._host = host
        self._ptr = 0
        self._finalizer: Any = None
        if device.is_cpu:
            if self._host is None:
                self._host = np.empty(shape, dtype)
            return
        from oxide.runtime.gpu_devices import allocate_device_memory

        self._ptr = allocate_device_memory(device.index, self.nbytes)
        self._finalizer = weakref.finalize(self, _free, device.index, self._ptr)

    # -- NumPy-like description --------------------------------------------------------

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def strides(self) -> tuple[int, ...]:
        """Byte strides, as NumPy gives them (C order)."""
        out, acc = [], self.dtype.itemsize
        for n in reversed(self.shape):
            out.append(acc)
            acc *= max(n, 1)
        return tuple(reversed(out))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device={self.device})"

    # -- data ------------------------------------------------------------------------

    @property
    def data_ptr(self) -> int:
        """The address of the first element (device memory on a GPU)."""
        return self._host.ctypes.data if self._host is not None else self._ptr

    def to_numpy(self) -> np.ndarray:
        """A host copy. On a GPU this synchronizes the device first (all streams), then raises
        any error a kernel reported (`ox.KernelIndexError`...), so the data is final."""
        if self._host is not None:
            return self._host.copy()
        from oxide.runtime.gpu_devices import copy_to_host

        out = np.empty(self.shape, self.dtype)
        copy_to_host(self.device.index, out, self._ptr)
        return out

    def copy_to_host(self) -> np.ndarray:
        """`to_numpy()` under numba's name (`d_arr.copy_to_host()`), so numba code ports as is.

        numba's `ary=` and `stream=` arguments are not taken: this always returns a new
        NumPy array, after synchronizing as `to_numpy()` does.
        """
        return self.to_numpy()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.to_numpy()
        return out if dtype is None else out.astype(dtype)

    def _view(self) -> ArrayView:
        dt = oxide_dtype(self.dtype)
        assert dt is not None  # checked when the array was made
        if self._host is not None:
            return ArrayView(self._host.ctypes.data, self.shape, None, dt, HOST, self,
                             self._host)
        return ArrayView(self._ptr, self.shape, None, dt, self.device.index, self)

    # -- interchange -------------------------------------------------------------------

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        if self._host is not None:
            raise AttributeError("a CPU DeviceArray has no __cuda_array_interface__")
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self._ptr, False),
                "strides": None, "version": 3}

    @property
    def __array_interface__(self) -> dict[str, Any]:
        if self._host is None:
            raise AttributeError("a GPU DeviceArray has no __array_interface__; use .to_numpy()")
        return self._host.__array_interface__

    def __dlpack_device__(self) -> tuple[int, int]:
        from oxide.runtime.dlpack import CPU_DEVICE, CUDA_DEVICE

        return (CPU_DEVICE, 0) if self._host is not None else (CUDA_DEVICE, self.device.index)

    def __dlpack__(self, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        if self._host is not None:
            return self._host.__dlpack__()
        from oxide.runtime.dlpack import export

        return export(self._ptr, self.shape, T.dtype_of(self.dtype), self.device.index, self)


def _target(device: Any) -> Device:
    return current_device() if device is None else parse_device(device)


def empty(shape: Any, dtype: Any = T.f32, device: Any = None) -> DeviceArray:
    """An uninitialized array on `device` (default: the current device).

    >>> buf = ox.empty((1024, 1024), ox.f32)   # doctest: +SKIP
    """
    return DeviceArray(_shape(shape), _np_dtype(dtype), _target(device))


def zeros(shape: Any, dtype: Any = T.f32, device: Any = None) -> DeviceArray:
    """A zero-filled array on `device` (default: the current device).

    >>> acc = ox.zeros(256, ox.u32)   # doctest: +SKIP
    """
    dev = _target(device)
    if dev.is_cpu:
        return DeviceArray(_shape(shape), _np_dtype(dtype), dev,
                           np.zeros(_shape(shape), _np_dtype(dtype)))
    arr = DeviceArray(_shape(shape), _np_dtype(dtype), dev)
    from oxide.runtime.gpu_devices import zero_device_memory

    zero_device_memory(dev.index, arr._ptr, arr.nbytes)
    return arr


def to_device(array: Any, device: Any = None, stream: int | None = None) -> DeviceArray:
    """A copy of a host array (anything NumPy converts) on `device` (default: current).

    The copy is complete on return, unless `stream` (a raw handle) is given: then it is
    only ordered on that stream.

    >>> x = ox.to_device(np.ones(1000, np.float32))   # doctest: +SKIP
    """
    ma = sys.modules.get("numpy.ma.core")  # no masked array exists before it is imported
    if ma is not None and isinstance(array, ma.MaskedArray):  # np.asarray drops the mask
        raise ArgumentError("to_device got a NumPy masked array, whose mask a kernel would "
                            "ignore; pass `a.filled(value)` or `a.data`")
    host = np.asarray(array, order="C")  # (np.ascontiguousarray makes a 0-d array 1-d)
    if not host.dtype.isnative:  # the copy is made anyway: make it in native byte order
        host = host.astype(host.dtype.newbyteorder("="))
    _np_dtype(host.dtype)
    dev = _target(device)
    if dev.is_cpu:
        return DeviceArray(host.shape, host.dtype, dev, host.copy())
    arr = DeviceArray(host.shape, host.dtype, dev)
    from oxide.runtime.gpu_devices import copy_to_device

    copy_to_device(dev.index, arr._ptr, host, stream)
    return arr
