"""Reading an array argument without copying it: pointer, shape, strides, dtype, device.

Each supported array kind has its own fast reader, chosen once per Python type:
NumPy, torch (through `.data_ptr()`/`.stride()`, without importing torch), CuPy,
oxide's DeviceArray, anything with `__cuda_array_interface__` (numba, ...), and
DLPack (JAX and the rest) as the fallback. This runs on every launch, so the
readers touch as few attributes as they can.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from oxide.runtime.array_view import (  # noqa: F401 - this module's names too
    _DTYPES,
    HOST,
    ArrayView,
    BadArray,
    _dtype,
    _elements,
    _layout,
    _lookup,
    byte_range,
    c_strides,
    misaligned,
    oxide_dtype,
)


def _numpy(a: np.ndarray) -> ArrayView:
    dt = _dtype(a.dtype)
    if a.flags.c_contiguous:
        strides = None
    else:
        strides = _layout(a.shape, _elements(a.strides, a.itemsize))
    ptr = a.ctypes.data
    if ptr % a.itemsize:
        raise misaligned(ptr, a.itemsize)
    return ArrayView(ptr, a.shape, strides, dt, HOST, a, a)


def _masked(a: Any) -> ArrayView:
    raise BadArray("a NumPy masked array, whose mask a kernel would ignore; pass "
                   "`a.filled(value)` or `a.data`")


def _torch(t: Any) -> ArrayView:
    dt = _dtype(t.dtype)
    dev = t.get_device()
    shape = t.shape  # a torch.Size: already a tuple
    strides = None if t.is_contiguous() else _layout(shape, tuple(t.stride()))
    ptr = t.data_ptr()
    if ptr % dt.itemsize:
        raise misaligned(ptr, dt.itemsize)
    if dev < 0:
        return ArrayView(ptr, shape, strides, dt, HOST, t, _torch_host(t))
    return ArrayView(ptr, shape, strides, dt, dev, t)


def _torch_host(t: Any) -> np.ndarray | None:
    try:
        return t.detach().numpy()
    except (TypeError, RuntimeError):  # bf16 and other dtypes NumPy lacks
        return None


def _cupy(a: Any) -> ArrayView:
    dt = _dtype(a.dtype)
    if a.flags.c_contiguous:
        strides = None
    else:
        strides = _layout(a.shape, _elements(a.strides, a.itemsize))
    ptr = a.data.ptr
    if ptr % a.itemsize:
        raise misaligned(ptr, a.itemsize)
    return ArrayView(ptr, a.shape, strides, dt, a.device.id, a)


def _cai(a: Any) -> ArrayView:
    try:
        cai = a.__cuda_array_interface__
        raw = np.dtype(cai["typestr"])
        dt = _dtype(raw)
        shape = tuple(cai["shape"])
        st = cai.get("strides")
        strides = None if st is None else _layout(shape, _elements(tuple(st), raw.itemsize))
        ptr = cai["data"][0]
        if ptr.__class__ is not int:
            ptr = operator.index(ptr)  # TypeError for None and other non-pointers
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise BadArray(f"a {type(a).__name__} whose __cuda_array_interface__ oxide cannot "
                       f"read ({type(exc).__name__}: {exc}); it needs typestr, shape and a "
                       "data pointer (an int)") from None
    if ptr % raw.itemsize:
        raise misaligned(ptr, raw.itemsize)
    return ArrayView(ptr, shape, strides, dt, None, a)


def _oxide(a: Any) -> ArrayView:
    return a._view()


def _dlpack(a: Any) -> ArrayView:
    from oxide.runtime.dlpack import view_from_dlpack

    return view_from_dlpack(a)


def _probe(a: Any) -> ArrayView | None:
    """Objects whose class says nothing: the interfaces may be instance attributes."""
    if hasattr(a, "__cuda_array_interface__"):
        return _cai(a)
    if hasattr(a, "__dlpack__") and hasattr(a, "__dlpack_device__"):
        return _dlpack(a)
    return None


_READERS: dict[type, Callable[[Any], ArrayView | None]] = {np.ndarray: _numpy}


def _reader_for(t: type) -> Callable[[Any], ArrayView | None]:
    module = t.__module__ or ""
    if hasattr(t, "_oxide_array"):
        return _oxide
    if module == "torch" or module.startswith("torch."):
        if hasattr(t, "data_ptr"):
            return _torch
    if module.startswith("cupy") and hasattr(t, "data") and hasattr(t, "device"):
        return _cupy
    if issubclass(t, np.ndarray):
        ma = sys.modules.get("numpy.ma.core")  # no masked array exists before it is imported
        if ma is not None and issubclass(t, ma.MaskedArray):
            return _masked
        return _numpy
    if hasattr(t, "__cuda_array_interface__"):
        return _cai
    if hasattr(t, "__dlpack__") and hasattr(t, "__dlpack_device__"):
        return _dlpack
    return _probe


def reader_of(t: type) -> Callable[[Any], ArrayView | None]:
    """The reader of arrays of Python type `t` (runtime/fastpath.py asks which it is)."""
    reader = _READERS.get(t)
    if reader is None:
        reader = _READERS[t] = _reader_for(t)
    return reader


def view_of(value: Any) -> ArrayView | None:
    """An ArrayView of `value`, or None when it is not an array.

    Raises BadArray for arrays oxide cannot pass (element type, layout).
    """
    t = type(value)
    reader = _READERS.get(t)
    if reader is None:
        reader = _READERS[t] = _reader_for(t)
    return reader(value)
