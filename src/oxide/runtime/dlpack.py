"""DLPack without a copy: reading any producer's tensor (JAX, ...) and exporting DeviceArrays.

The fast paths in `views.py` cover torch, CuPy, NumPy and the CUDA array
interface; this module is the general fallback. A DLPack capsule is read in
place (ctypes over `DLManagedTensor`) and kept alive with the launch's arguments,
so the producer's memory stays valid; the capsule's own destructor releases it.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from oxide import types as T
from oxide.runtime.array_view import HOST, ArrayView, BadArray, _layout, misaligned, oxide_dtype

CPU_DEVICE, CUDA_DEVICE, CUDA_HOST_DEVICE, CUDA_MANAGED_DEVICE = 1, 2, 3, 13
# type codes: kDLInt, kDLUInt and kDLFloat take their width from `bits`; kDLBfloat, kDLBool
# and DLPack 1.1's kDLFloat8_e4m3fn and kDLFloat8_e5m2 name one oxide type each (recent
# torch reads and writes the 8-bit ones, 2.11 did; older torch refuses 8-bit floats there)
_SIZED = {0: "int", 1: "uint", 2: "float"}
_NAMED = {4: T.bf16, 6: T.bool_, 10: T.f8e4m3, 12: T.f8e5m2}
_CODE_OF = {**{dt.name: code for code, dt in _NAMED.items()}, "f": 2, "i": 0, "u": 1}
_NAME = b"dltensor"
_USED = b"used_dltensor"


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", _Deleter)]


_api = ctypes.pythonapi
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_RawGetPointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))


def _dtype(dt: DLDataType) -> T.DType:
    if (dt.code not in _SIZED and dt.code not in _NAMED) or dt.lanes != 1:
        raise BadArray(f"a DLPack tensor of type code {dt.code} x{dt.lanes}, which oxide "
                       "does not support")
    if dt.code in _NAMED:
        return _NAMED[dt.code]
    found = oxide_dtype(_SIZED[dt.code] + str(dt.bits))
    if found is None:
        raise BadArray(f"a DLPack tensor of {dt.bits}-bit type code {dt.code}, which oxide "
                       "does not support")
    return found


def view_from_dlpack(obj: Any) -> ArrayView:
    """Read `obj.__dlpack__()` in place: pointer, shape, strides, dtype, device."""
    try:
        dev_type, dev_id = obj.__dlpack_device__()
        capsule = obj.__dlpack__()
        address = _api.PyCapsule_GetPointer(capsule, _NAME)  # ValueError if not a live one
    except (TypeError, ValueError) as exc:
        raise BadArray(f"a {type(obj).__name__} whose DLPack export oxide cannot read "
                       f"({type(exc).__name__}: {exc}); `__dlpack__()` must return an "
                       "unconsumed \"dltensor\" capsule") from None
    t = DLManagedTensor.from_address(address).dl_tensor
    dt = _dtype(t.dtype)
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = None
    if t.strides:
        strides = _layout(shape, tuple(t.strides[i] for i in range(t.ndim)))
    ptr = (t.data or 0) + t.byte_offset
    if ptr % dt.itemsize:
        raise misaligned(ptr, dt.itemsize)
    owner = (obj, capsule)
    if dev_type == CPU_DEVICE:
        host = np.from_dlpack(obj) if hasattr(np, "from_dlpack") else None
        return ArrayView(ptr, shape, strides, dt, HOST, owner, host)
    if dev_type == CUDA_DEVICE:
        return ArrayView(ptr, shape, strides, dt, int(dev_id), owner)
    if dev_type in (CUDA_HOST_DEVICE, CUDA_MANAGED_DEVICE):
        return ArrayView(ptr, shape, strides, dt, None, owner)
    raise BadArray(f"a DLPack tensor on device type {dev_type}, which oxide cannot reach")


# ---------------------------------------------------------------------------
# Export

_exports: dict[int, tuple[Any, ...]] = {}  # DLManagedTensor address -> what it keeps alive
_lock = threading.Lock()


@_Deleter
def _delete(address: int) -> None:
    """DLPack's deleter: the consumer is done; drop the array reference."""
    with _lock:
        _exports.pop(address, None)


_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@_CapsuleDestructor
def _destroy_capsule(capsule: int) -> None:
    """A capsule nobody consumed (still named "dltensor") owns its tensor: delete it."""
    if _api.PyCapsule_IsValid(capsule, _NAME):
        address = _RawGetPointer(capsule, _NAME)
        if address:
            _delete(address)


def export(ptr: int, shape: tuple[int, ...], dtype: T.DType, device_index: int,
           owner: Any) -> Any:
    """A DLPack capsule of a contiguous CUDA array; it keeps `owner` alive until deleted."""
    code = _CODE_OF.get(dtype.name, _CODE_OF.get(dtype.kind))
    bits = 8 if dtype.is_bool else dtype.bits
    shape_arr = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    managed = DLManagedTensor()
    managed.dl_tensor = DLTensor(ptr, DLDevice(CUDA_DEVICE, device_index), len(shape),
                                 DLDataType(code, bits, 1), shape_arr, None, 0)
    managed.deleter = _delete
    address = ctypes.addressof(managed)
    with _lock:
        _exports[address] = (managed, shape_arr, owner)
    return _api.PyCapsule_New(address, _NAME, ctypes.cast(_destroy_capsule, ctypes.c_void_p))
