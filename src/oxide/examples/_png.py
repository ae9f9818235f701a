"""A minimal PNG writer (8-bit RGB, zlib), so the mandelbrot example needs no imaging library."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def write_png(path: str | Path, rgb: np.ndarray) -> Path:
    """Writes an (height, width, 3) uint8 image; returns the path written."""
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError("write_png takes an (height, width, 3) uint8 array")
    height, width, _ = rgb.shape
    rows = np.hstack([np.zeros((height, 1), np.uint8), rgb.reshape(height, width * 3)])
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    path = Path(path)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)
                     + _chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) + _chunk(b"IEND", b""))
    return path
