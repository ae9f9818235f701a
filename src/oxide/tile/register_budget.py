"""A warning where one tile cannot fit a thread's registers: the row that spills.

What it assumes: the layout pass ran (every tile value has its layout), for a GPU target.
What it does: finds the tile value that gives a thread the most 32-bit registers; past
`LIMIT` (half of the 255 a thread may have: the kernel needs more than that one value
live), ptxas will spill it to local memory, and a kernel that reads a row once runs at a
fraction of the bandwidth (tile_layernorm at 32768 f32 columns on 8 warps: 0.2x Triton,
H200 2026-12-03). It changes nothing: it warns (`ox.PerformanceWarning`), at the line
that made the tile, with the two ways out: more warps per block, or the row in chunks
through a loop (the tile_wide_rows example). The CPU has no register file to overflow.
"""

from __future__ import annotations

import warnings

from oxide.errors import PerformanceWarning
from oxide.ir.tile_ops import TileType
from oxide.tile.builder import TileBuilder
from oxide.tile.layouts import layout_of

LIMIT = 128  # 32-bit registers one tile may take in each thread


def check_register_budget(b: TileBuilder, num_warps: int) -> None:
    """Warn once for the kernel's largest tile if it takes over LIMIT registers a thread."""
    worst, worst_op, worst_type = 0, None, None
    for op in b.tile_ops:
        for r in op.results:
            if not isinstance(r.type, TileType) or r.type.layout.data is None:
                continue
            regs = -(-layout_of(r).slots * r.type.dtype.itemsize // 4)
            if regs > worst:
                worst, worst_op, worst_type = regs, op, r.type
    if worst <= LIMIT or worst_op is None or worst_type is None:
        return
    span = b.spans.get(worst_op)
    shape = " x ".join(str(d) for d in worst_type.dims)
    message = (
        f"a {shape} {worst_type.dtype.name} tile takes {worst} registers in each of "
        f"the block's {32 * num_warps} threads: more than fit beside the rest of the kernel, "
        f"so ptxas spills it to local memory, which can slow the kernel down several "
        f"times.\n"
        f"  help: give the block more warps (`@tile.kernel(num_warps={min(32, 2 * num_warps)})`"
        f", or ox.autotune over num_warps), or walk the row in chunks through a loop:\n"
        f"      for c in range(tile.num_tiles(x, 1, BN)):\n"
        f"          t = tile.load(x, (row, c), (1, BN))\n"
        f"          ...\n"
        f"  with BN a few thousand columns (`oxide show tile_wide_rows`: softmax and layer "
        f"norm that way)")
    if span is None:
        warnings.warn(message, PerformanceWarning, stacklevel=3)
    else:  # shown at the user's line, as a compile error is
        warnings.warn_explicit(message, PerformanceWarning, span.file, span.line)
