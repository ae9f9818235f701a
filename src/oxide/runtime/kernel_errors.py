"""The error record a kernel fills when a check fails, and the exception the host raises.

The layout is the kernel ABI's (codegen/abi.py): `i32 claim @0, i32 kind @4,
i32 site @8, i32 dim @12, i64 index @16, i64 length @24`; the first failing
thread claims the record and writes `kind` last, so a non-zero kind means the
other fields are complete. Both runtimes use this module: the GPU one over mapped
pinned memory, the CPU one over a host buffer; `raise_if_failed` turns a filled
record into `ox.KernelIndexError` / `ox.KernelAssertionError` and clears it, so
the next launch starts clean.

>>> rec = ErrorRecord.host()                         # doctest: +SKIP
>>> run(kernel, *args, rec.address)                   # doctest: +SKIP
>>> rec.raise_if_failed(ck.kernel.__name__, ck.sites) # doctest: +SKIP
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

from oxide.codegen.abi import ERROR_RECORD_BYTES
from oxide.errors import KernelAssertionError, KernelIndexError, OxideError, Span

KIND_INDEX, KIND_ASSERT, KIND_DIVISION = 1, 2, 3


class ErrorRecord:
    """A view of one 32-byte error record at a host-visible address."""

    __slots__ = ("address", "_i32", "_i64", "_owner")

    def __init__(self, address: int, owner: Any = None) -> None:
        self.address = address
        self._i32 = (ctypes.c_int32 * 4).from_address(address)
        self._i64 = (ctypes.c_int64 * 4).from_address(address)
        self._owner = owner  # keeps a host buffer alive

    @classmethod
    def host(cls) -> ErrorRecord:
        """A zeroed record in ordinary host memory (the CPU runtime's)."""
        buf = ctypes.create_string_buffer(ERROR_RECORD_BYTES)
        return cls(ctypes.addressof(buf), buf)

    @property
    def failed(self) -> bool:
        """Whether a kernel filled the record (one memory read: cheap enough per launch)."""
        return self._i32[1] != 0

    def take(self) -> tuple[int, int, int, int, int] | None:
        """(kind, site, dim, index, length), and the record cleared; None when it is clean."""
        kind = self._i32[1]
        if kind == 0:
            return None
        fields = (kind, self._i32[2], self._i32[3], self._i64[2], self._i64[3])
        self.clear()
        return fields

    def clear(self) -> None:
        self._i32[1] = 0  # kind first: a half-cleared record never reads as a failure
        self._i32[0] = 0

    def raise_if_failed(self, kernel: str, sites: Sequence[Any]) -> None:
        """Raise the error the record holds (clearing it), if any."""
        fields = self.take()
        if fields is not None:
            raise kernel_error(kernel, sites, *fields)


def kernel_error(kernel: str, sites: Sequence[Any], kind: int, site: int, dim: int, index: int,
                 length: int) -> OxideError:
    """The exception for one filled record: names the kernel, file:line, index and length.

    `sites` is `CompiledKernel.sites` (each with `.kind`, `.span`, `.detail`).
    """
    info = sites[site] if 0 <= site < len(sites) else None
    span: Span | None = getattr(info, "span", None)
    detail = getattr(info, "detail", "")
    exc: OxideError
    if kind == KIND_INDEX:
        # one form for every axis, the first included (NumPy's "for axis 0 with size 4")
        msg = (f"index {index} is out of bounds for axis {dim} of `{detail}` (length {length}) "
               f"in kernel `{kernel}`")
        exc = KernelIndexError(render(msg, span))
        exc.index, exc.length, exc.dim, exc.array = index, length, dim, detail  # type: ignore[attr-defined]
    elif kind == KIND_ASSERT:
        msg = f"assertion failed in kernel `{kernel}`" + (f": {detail}" if detail else "")
        exc = KernelAssertionError(render(msg, span))
    elif kind == KIND_DIVISION:
        exc = KernelAssertionError(render(f"integer division by zero in kernel `{kernel}`", span))
    else:
        exc = KernelAssertionError(render(f"kernel `{kernel}` reported failure kind {kind} "
                                          f"(site {site}); this oxide does not know it", span))
    exc.kernel, exc.span, exc.kind = kernel, span, kind  # type: ignore[attr-defined]
    return exc


def render(message: str, span: Span | None) -> str:
    """`message`, then the file:line and the source line with a caret, as compile errors show."""
    if span is None:
        return message
    num = str(span.line)
    pad = " " * len(num)
    width = max(1, min(span.end_col, len(span.text)) - span.col)
    return "\n".join([message, f"{pad}--> {span}", f"{pad} |", f"{num} | {span.text.rstrip()}",
                      f"{pad} | {' ' * span.col}{'^' * width}"])
