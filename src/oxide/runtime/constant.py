"""`ox.ConstantArray`: constant memory, declared at module level and set from the host.

Kernels read it (`C[i]`) through the GPU's constant cache; the compiler gives
each kernel module its own global for it (`CompiledKernel.constants` lists
`(symbol, ConstantArray)`). The values live here, on the host, with a version
number: each loaded module (on each device) remembers the version it last
received, so `set` costs one host copy and every launch after it uploads only
where the module is stale. A launch before any `set` is an `ox.LaunchError`,
never a kernel reading whatever the memory held.

A declaration or a `set` that cannot be honoured exactly is an `ox.ArgumentError`:
`set` converts values as a launch converts a scalar argument, so a value that would
wrap, truncate or overflow to infinity in the declared dtype is refused, never stored.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from oxide import fp8
from oxide import types as T
from oxide.errors import ArgumentError, LaunchError
from oxide.specialize import short_repr as _short

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
        self.dtype = _dtype(dtype)
        self.shape = _shape(shape)
        self.size = int(np.prod(self.shape))
        self.nbytes = self.size * self.dtype.itemsize
        if self.nbytes > CONSTANT_MEMORY_BYTES:
            raise ArgumentError(f"ox.ConstantArray({self.dtype.name}, {shape!r}) needs "
                                f"{self.nbytes:,} bytes; they do not fit in the GPU's 64 KiB "
                                "of constant memory")
        self.version = 0  # 0: never set
        self._values: np.ndarray | None = None
        self._uploaded: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def set(self, values: Any) -> None:
        """Sets every element (array-like of the declared shape, converted to the dtype).

        The conversion is exact or refused (an `ox.ArgumentError`, the old values kept):
        an integer dtype takes integers (and bools) within its range, never floats (NaN
        and 2.5 have no integer value; `values.astype(...)` truncates on purpose); a float
        dtype takes numbers, rounded to it, unless a finite one would become infinite.
        Kernels launched after this call see the new values; launches already queued
        keep the values they were launched with.
        """
        arr = _convert(self, values)
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
        raise ArgumentError(f"{self!r} is read inside kernels; on the host use `.values`")

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


def _dtype(dtype: Any) -> T.DType:
    """The numeric oxide dtype for an oxide dtype, a NumPy dtype or scalar type (as
    `ox.empty` takes), or a dtype name; an ArgumentError for anything else."""
    try:
        dt = T.dtype_of(dtype if isinstance(dtype, (T.DType, str)) else np.dtype(dtype))
    except TypeError:
        dt = None
    if dt is None:
        raise ArgumentError(f"{dtype!r} is not a dtype a ConstantArray can hold; use ox.f32, "
                            "ox.i32, ... (f16, bf16, f8e4m3, f8e5m2, f32, f64, i8-i64, u8-u64) "
                            "or their NumPy dtypes")
    if dt.is_bool:
        raise ArgumentError("constant arrays hold numbers; use u8 for flags")
    return dt


def _shape(shape: Any) -> tuple[int, ...]:
    """1 to 3 positive int extents (NumPy ints too, not bools), or an ArgumentError."""
    def extent(d: Any) -> bool:
        return isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)) \
            and d > 0

    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    if not isinstance(dims, tuple | list) or not 1 <= len(dims) <= 3 \
            or not all(extent(d) for d in dims):
        raise ArgumentError(f"a ConstantArray shape is 1 to 3 positive ints, got {shape!r}")
    return tuple(int(d) for d in dims)


def _convert(c: ConstantArray, values: Any) -> np.ndarray:
    """`values` as a fresh C-ordered array of `c`'s dtype and shape, converted exactly
    (see `ConstantArray.set`), or an ArgumentError saying which value does not fit."""
    try:
        src = _numbers(_to_host(values))
    except (TypeError, ValueError, RuntimeError) as exc:  # ragged lists, unreadable objects
        raise ArgumentError(f"{c!r}.set: cannot read the values as an array: {exc}") from None
    if isinstance(src, np.ma.MaskedArray):  # its masked elements hold arbitrary data
        raise ArgumentError(f"{c!r} cannot be set from a masked array: give it "
                            "`values.filled(fill_value)`")
    if src.shape != c.shape:
        raise ArgumentError(f"{c!r} has shape {c.shape}; set with values of shape {src.shape}")
    dt = c.dtype
    if src.dtype == object:
        bad = [v for v in src.flat if not isinstance(v, _NUMBER)][:1]
        if bad:
            raise ArgumentError(f"{c!r} holds numbers; got {type(bad[0]).__name__} "
                                f"{_short(bad[0])}")
        if dt.is_int:
            src = np.array([int(v) if isinstance(v, _INTEGER) else v for v in src.flat],
                           dtype=object).reshape(src.shape)
    elif src.dtype.kind == "V" and _is_ml_dtype(src.dtype):  # ml_dtypes' kind: no NumPy one
        src = src.astype(np.float32)  # exact for bfloat16 and the 8-bit floats
    elif src.dtype.kind not in "biuf":
        raise ArgumentError(f"{c!r} holds numbers; got values of dtype {src.dtype}")
    if dt.is_int:
        return _to_int(c, src)
    return _to_fp8(c, src) if dt.is_fp8 else _to_float(c, src)


def _is_ml_dtype(dtype: np.dtype) -> bool:
    return any(dtype == t.numpy for t in (T.bf16, T.f8e4m3, T.f8e5m2))


_INTEGER = (bool, int, np.bool_, np.integer)
_NUMBER = (*_INTEGER, float, np.floating)


def _numbers(host: Any) -> np.ndarray:
    """An ndarray of `host`; a Python sequence becomes an object array of its elements, so
    no integer is first rounded through float64 (NumPy reads [2**64 - 1, -1] as floats)."""
    if isinstance(host, np.ndarray):
        return host
    if isinstance(host, list | tuple):
        return np.array(host, dtype=object)
    return np.asarray(host)


def _to_int(c: ConstantArray, src: np.ndarray) -> np.ndarray:
    dt = c.dtype
    if src.dtype.kind == "f" or (src.dtype == object
                                 and not all(isinstance(v, _INTEGER) for v in src.flat)):
        bad = next(v for v in src.flat if not isinstance(v, _INTEGER))
        raise ArgumentError(f"{c!r} holds integers; got the float {_plain(bad)} (convert "
                            f"explicitly, `values.astype(np.{np.dtype(dt.numpy).name})`, to "
                            "truncate)")
    lo, hi = ((-(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1) if dt.is_signed
              else (0, (1 << dt.bits) - 1))
    for v in (min(src.flat), max(src.flat)) if src.dtype == object else (src.min(), src.max()):
        if not lo <= int(v) <= hi:
            raise ArgumentError(f"{c!r}: {dt.name}'s range is {lo}..{hi}; got {int(v)}")
    return np.array(src, dtype=dt.numpy, copy=True, order="C")


def _to_float(c: ConstantArray, src: np.ndarray, dt: T.DType | None = None) -> np.ndarray:
    """`src` in the float type `dt` (`c`'s by default), rounded."""
    dt = dt or c.dtype
    if src.dtype == object:
        try:
            src = np.array([float(v) for v in src.flat], dtype=np.float64).reshape(src.shape)
        except OverflowError:  # an int beyond every float
            bad = next(v for v in src.flat if _beyond_float64(v))
            raise ArgumentError(f"{c!r}: {_short(bad)} is too large for any float") from None
    with np.errstate(all="ignore"):  # overflow is detected below, not warned about
        out = np.array(src, dtype=dt.numpy, copy=True, order="C")
    grew = np.isinf(out) & ~np.isinf(src) if src.dtype.kind == "f" else np.isinf(out)
    if grew.any():
        bad = src[grew].flat[0]
        raise ArgumentError(f"{c!r}: {_plain(bad)} is beyond {dt.name}'s range (it would "
                            "become infinity)")
    return out


def _to_fp8(c: ConstantArray, src: np.ndarray) -> np.ndarray:
    """Numbers as an 8-bit float array, converted as a kernel converts them (oxide/fp8.py:
    one rounding, NaN as 0x7F; not ml_dtypes' own conversion, which before 0.7 rounded an
    f64 through f32). What a literal of the type may be (frontend/promote.literal_fits):
    a magnitude beyond the largest finite value, infinities included, is refused, as other
    float types refuse a value that would become infinite, where a kernel's conversion
    would saturate it."""
    dt, fmt = c.dtype, fp8.FORMATS[c.dtype.name]
    wide = _to_float(c, src, T.f64)  # exact, but for integers past 2**53, beyond range
    with np.errstate(invalid="ignore"):
        beyond = np.abs(wide) > fmt.max_finite  # NaN is not
    if beyond.any():
        raise ArgumentError(f"{c!r}: {_plain(wide[beyond].flat[0])} is beyond {dt.name}'s "
                            f"range (its largest finite value is {fmt.max_finite:g})")
    bits = np.fromiter((fp8.to_bits(v, fmt) for v in wide.flat), np.uint8, wide.size)
    return bits.view(dt.numpy).reshape(wide.shape)


def _plain(v: Any) -> str:
    """A value as Python writes it (`1e+300`, not `np.float64(1e+300)`), abbreviated."""
    return _short(v.item() if isinstance(v, np.generic) else v)


def _beyond_float64(v: Any) -> bool:
    try:
        float(v)
    except OverflowError:
        return True
    return False

