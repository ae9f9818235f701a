"""The hidden tensor maps of a tile kernel whose K loops copy their operands by TMA.

tile/tma_rings.py fills a product operand's ring by TMA through a tensor map of the array
argument, which the kernel takes as a hidden parameter after its own (codegen/abi.py
`OperandMap`: which array, the box, the swizzle). A launch builds each map from the
array's pointer, extents and strides, which are among the machine values it already
packs, so every binder that reaches `Launcher.launch` gets them right; an array seen
before (same pointer, extents and strides) reuses its encoded bytes.

What the launch refuses, before anything runs (ArgumentError): an array TMA cannot map
that the kernel's specialization (rows of 16-byte vectors) did not already exclude: an
extent of 2**30 or more (the kernel computes box coordinates in 32 bits). An empty array
maps a small zeroed buffer instead (its tiles are all padding, and a map cannot be empty).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

from oxide import types as T
from oxide.codegen.abi import OperandMap
from oxide.errors import ArgumentError
from oxide.runtime import tensormap

MAX_EXTENT = 1 << 30  # tile/tma_rings.py `_coordinate` stays exact below this
L2_PROMOTION = 256  # bytes per L2 fetch: whole 128-byte rows of the swizzled boxes, paired
_CACHED = 64  # encoded maps kept per launcher (a training loop cycles through a few)
_EMPTY_BYTES = 256  # the stand-in of an empty array: zeros, 16-byte rows


class OperandMapPacker:
    """Writes a launcher's hidden tensor maps into its parameter buffer."""

    def __init__(self, kernel_name: str, maps: Sequence[OperandMap], value_starts: list[int],
                 buffer: Any, offsets: list[int]) -> None:
        self.kernel_name = kernel_name
        self.maps = list(maps)
        self.base = ctypes.addressof(buffer)
        # per map: where its array's values start (pointer, then extents: the kernel maps
        # C-contiguous arrays only, tile/operand_rings.py `_tma_fits`)
        self.sources = [(value_starts[m.param], len(m.box)) for m in maps]
        self.offsets = offsets
        self.encoded: dict[tuple[Any, ...], bytes] = {}
        self.empty = 0  # device address of the zeroed stand-in, made on first need

    def pack(self, values: Sequence[Any]) -> None:
        """Encode (or reuse) each map for this launch's arrays, into the buffer."""
        for m, (start, rank), off in zip(self.maps, self.sources, self.offsets, strict=True):
            ptr = values[start]
            shape = tuple(values[start + 1:start + 1 + rank])
            key = (m, ptr, shape)
            raw = self.encoded.get(key)
            if raw is None:
                raw = self._encode(m, ptr, shape)
                if len(self.encoded) >= _CACHED:
                    self.encoded.clear()
                self.encoded[key] = raw
            ctypes.memmove(self.base + off, raw, T.TENSORMAP_BYTES)

    def _encode(self, m: OperandMap, ptr: int, shape: tuple[int, ...]) -> bytes:
        dtype = T.SCALARS[m.dtype]
        if any(n >= MAX_EXTENT for n in shape):
            raise ArgumentError(
                f"`{self.kernel_name}` copies the operands of its products by TMA, which it "
                f"addresses in 32 bits: an array of shape {shape} is too large (each extent "
                f"below 2**30); run with OXIDE_TILE_TMA=0 for the copies of every thread")
        if 0 in shape:  # nothing to read: every tile is padding
            shape, ptr = (1, 16 // dtype.itemsize), self._empty()
        strides = T.c_strides(shape)
        tensormap.check(dtype, shape, strides, m.box, m.swizzle, ptr, L2_PROMOTION, "zero")
        return tensormap.encode(ptr, dtype, shape, strides, m.box, m.swizzle, L2_PROMOTION,
                                "zero", m.ftz)

    def _empty(self) -> int:
        if not self.empty:
            from oxide.runtime import cuda_driver as cd

            self.empty = cd.mem_alloc(_EMPTY_BYTES)
            cd.memset_zero(self.empty, _EMPTY_BYTES, 0)
            cd.synchronize_context()
        return self.empty


def value_starts(params: Sequence[Any]) -> list[int]:
    """For each machine parameter owner (a plan's non-Const parameters, in order), where
    its values start among the launch's machine values."""
    starts = []
    at = 0
    for p in params:
        if p.kind == "const":
            continue
        starts.append(at)
        at += 1 + p.spec.rank * (2 if p.strided else 1) if p.kind == "array" else 1
    return starts


def cpu_descriptions(maps: Sequence[OperandMap], starts: list[int], values: Sequence[Any]
                     ) -> list[Any]:
    """The CPU target's descriptions (runtime/tensormap.py `CPU_LAYOUT`) of a launch's
    hidden maps, as buffers the caller keeps alive while the kernel runs: a CPU kernel
    takes each description's address (OXIDE_TILE_CPU_HOPPER=1 compiles such kernels)."""
    out = []
    for m in maps:
        start, rank = starts[m.param], len(m.box)
        ptr, shape = values[start], tuple(values[start + 1:start + 1 + rank])
        raw = tensormap.cpu_description(ptr, T.SCALARS[m.dtype], shape, T.c_strides(shape),
                                        m.box, m.swizzle, "zero")
        out.append(ctypes.create_string_buffer(raw, len(raw)))
    return out
