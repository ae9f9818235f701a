"""What `stream=` may be: the raw CUstream handle of an explicit stream, or an ArgumentError.

A launch's stream is handed to the driver as a 64-bit handle. Anything else (a string,
a float, a bool, a negative number, an object whose stream protocol returns junk) is a
mistake, and it must be one on every device: the CPU runs launches at once and has no
streams, but a program tested there must not pass a stream a GPU would refuse (or
misread). This module reads a stream without importing the CUDA bindings, so the CPU
runtime checks it too (runtime/launch.py); runtime/gpu.py launches on the handle.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from oxide.errors import ArgumentError

_HANDLE_LIMIT = 1 << 64  # a CUstream is a pointer
_ATTRIBUTES = ("cuda_stream", "ptr", "handle")  # torch, CuPy, cuda.core's `Stream.handle`


def stream_handle(stream: Any) -> int:
    """The raw CUstream of an explicit `stream=`: a cuda.core `Stream` or any object with
    `__cuda_stream__`, one with `cuda_stream`, `ptr` or `handle` (torch, CuPy), or the
    handle itself as an integer (`0`: the legacy default stream).

    >>> stream_handle(0x7F00)
    32512
    """
    if isinstance(stream, (bool, np.bool_)):
        raise _refused(stream, "a bool is not a stream")
    try:
        return _in_range(operator.index(stream), stream)
    except TypeError:
        pass
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        try:
            value = proto() if callable(proto) else proto
            version, handle = value
        except Exception as exc:  # noqa: BLE001 - a user object's protocol, reported
            raise _refused(stream, f"its __cuda_stream__ gave no (version, handle) pair "
                                   f"({type(exc).__name__}: {exc})") from None
        return _in_range(_as_handle(handle, stream), stream)
    for attr in _ATTRIBUTES:
        handle = getattr(stream, attr, None)
        if handle is not None:
            return _in_range(_as_handle(handle, stream), stream)
    raise _refused(stream, "it is none of these")


def _as_handle(value: Any, stream: Any) -> int:
    """A handle from a stream object's protocol: an integer, or an object that converts
    to one (cuda.core's `CUstream`); never a float, string or bool read as a number."""
    if isinstance(value, (bool, np.bool_, float, np.floating, str, bytes)):
        raise _refused(stream, f"its handle is {value!r}, not an integer")
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise _refused(stream, f"its handle is {value!r}, not an integer") from None


def _in_range(handle: int, stream: Any) -> int:
    if not 0 <= handle < _HANDLE_LIMIT:
        raise _refused(stream, f"the handle {handle} is not a 64-bit pointer")
    return handle


def _refused(stream: Any, why: str) -> ArgumentError:
    shown = repr(stream)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return ArgumentError(f"stream= takes a cuda.core Stream, an object with __cuda_stream__ "
                         f"(torch, CuPy) or a raw CUstream handle (a non-negative int); got "
                         f"{shown} ({type(stream).__name__}): {why}")
