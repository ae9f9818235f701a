"""`ArrayView`, what oxide reads of an array argument, and the checks every reader shares.

The readers of each array kind (runtime/views.py) and the DLPack import and export
(runtime/dlpack.py) build views with these; they live here so that views.py and
dlpack.py need not import each other (docs/architecture.md, "Layers"). Every name is
also importable from `oxide.runtime.views`, as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from oxide import types as T

HOST = -1  # ArrayView.device for host memory; a CUDA ordinal otherwise, None if unknown


class ArrayView:
    """One array argument as a launch sees it.

    `strides` (in elements) is None for C-contiguous data. `host` is a NumPy view of
    host memory (for copies to a GPU), `owner` keeps the producer alive.
    """

    __slots__ = ("ptr", "shape", "strides", "dtype", "device", "owner", "host")

    def __init__(self, ptr: int, shape: tuple[int, ...], strides: tuple[int, ...] | None,
                 dtype: T.DType, device: int | None, owner: Any,
                 host: np.ndarray | None = None) -> None:
        self.ptr = ptr
        self.shape = shape
        self.strides = strides
        self.dtype = dtype
        self.device = device
        self.owner = owner
        self.host = host

    @property
    def contiguous(self) -> bool:
        return self.strides is None

    def fits_vectors(self) -> bool:
        """Whether every row starts at a multiple of 16 bytes and holds a whole number of
        16-byte vectors (see `fits_vectors`)."""
        return fits_vectors(self.ptr, self.shape, self.strides, self.dtype.itemsize)

    def byte_range(self) -> tuple[int, int]:
        """[start, end) of the bytes the array can touch; (0, 0) when it is empty."""
        return byte_range(self.ptr, self.shape, self.strides, self.dtype.itemsize)


VECTOR_BYTES = T.VECTOR_BYTES  # the widest vector access (ld.global.v4.b32)


def fits_vectors(ptr: int, shape: tuple[int, ...], strides: tuple[int, ...] | None,
                 item: int) -> bool:
    """Whether rows of this layout take 16-byte vector accesses: the data address and
    each outer dimension's pitch are multiples of 16 bytes, the innermost stride is one
    element, and a row's length is a multiple of 16 bytes, so that a vector at a
    multiple of its length along a row is aligned and wholly inside the array or wholly
    outside it. What a tile kernel specializes on (`ArrayType.vectors`), as Triton
    specializes on pointers and sizes divisible by 16."""
    if not shape:
        return False
    bits = ptr | (shape[-1] * item)
    if strides is None:
        return bits % VECTOR_BYTES == 0
    if strides[-1] != 1:
        return False
    for s in strides[:-1]:
        bits |= s * item
    return bits % VECTOR_BYTES == 0


def byte_range(ptr: int, shape: tuple[int, ...], strides: tuple[int, ...] | None,
               item: int) -> tuple[int, int]:
    """[start, end) of the bytes an array of this layout can touch; (0, 0) when empty."""
    lo = hi = 0
    for n, s in zip(shape, strides or c_strides(shape), strict=True):
        if n == 0:
            return (0, 0)
        if s >= 0:
            hi += (n - 1) * s
        else:
            lo += (n - 1) * s
    return (ptr + lo * item, ptr + (hi + 1) * item)


c_strides = T.c_strides  # element strides of a C-contiguous shape (views.py re-exports it)


def _layout(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, ...] | None:
    """None where `strides` index like C order (dimensions of size 1 may stride anyhow)."""
    acc = 1
    for n, s in zip(reversed(shape), reversed(strides), strict=True):
        if n != 1 and s != acc:
            return strides
        acc *= n
    return None


_DTYPES: dict[Any, T.DType | None] = {}


def oxide_dtype(raw: Any) -> T.DType | None:
    """The DType of a NumPy/torch/CuPy dtype object (memoized: this is on the launch path)."""
    try:
        return _DTYPES[raw]
    except KeyError:
        pass
    except TypeError:  # unhashable dtype object
        return _lookup(raw)
    dt = _DTYPES[raw] = _lookup(raw)
    return dt


def _lookup(raw: Any) -> T.DType | None:
    if getattr(raw, "isnative", True) is False:
        return None  # big-endian data would be read as raw bytes: `_dtype` says why
    try:
        return T.dtype_of(raw)
    except TypeError:
        return None


class BadArray(Exception):
    """An array oxide cannot pass (element type, layout); the binder names the parameter."""


def _dtype(raw: Any) -> T.DType:
    dt = oxide_dtype(raw)
    if dt is None:
        if getattr(raw, "isnative", True) is False:
            raise BadArray(f"an array of {raw.str} (non-native byte order); kernels read "
                           "native-order data: pass `a.astype(a.dtype.newbyteorder('='))`")
        raise BadArray(f"an array of {raw}, which oxide does not support")
    return dt


def misaligned(ptr: int, itemsize: int) -> BadArray:
    """The error for a data address that is not a multiple of the element size (readers
    test `ptr % itemsize` inline). Why refused: a GPU faults on a misaligned load
    (CUDA_ERROR_MISALIGNED_ADDRESS), which leaves the context unusable, and the CPU
    target's vector loads assume the same alignment."""
    return BadArray(f"an array whose data address {ptr:#x} is not a multiple of its "
                    f"element size {itemsize} (misaligned); pass an aligned copy (`a.copy()`)")


def _elements(byte_strides: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    if any(s % itemsize for s in byte_strides):
        raise BadArray(f"an array with strides {byte_strides} (bytes) that are not multiples "
                       f"of its element size {itemsize}")
    return tuple(s // itemsize for s in byte_strides)
