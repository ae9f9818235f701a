"""How a compiled tile kernel tells the launcher that it walks its grid persistently.

A tile kernel whose products run on a producer warp group (tile/producer.py) compiles to
walk its logical grid itself (tile/persistent_schedule.py): the launch runs at most as
many blocks as the GPU holds at once, and each loops over logical block indices. The
launcher then does two things a plain launch does not: it passes the logical grid as
three hidden i32 parameters (after the kernel's own, before its hidden tensor maps), and
it runs `min(blocks of the grid, blocks resident at once)` blocks along x. The kernel
says so as a producer kernel does (codegen/warp_roles.py): a marker global whose name is
the kernel's symbol with a suffix, found in the loaded code whatever route it took (a
compile, the disk cache, a bundle). This module imports nothing heavy: the runtime
reads it without the compiler.
"""

from __future__ import annotations

import os

from oxide.codegen import markers

GRID_PARAMS = 3  # the logical grid's x, y and z, each an i32
MAX_BLOCKS = 2 ** 32  # a walked grid has fewer blocks: the kernel divides in 32 bits
GRID_BYTES = (4,) * GRID_PARAMS  # their sizes among a kernel's machine arguments


_SUFFIX = "persistent_grid"


def marker_global(kernel_symbol: str, cpu: bool = False) -> str:
    """The marker's LLVM declaration (codegen/markers.py; its value: the hidden
    parameters the launch adds)."""
    return markers.marker_global(kernel_symbol, _SUFFIX, GRID_PARAMS, cpu)


def is_persistent(kernel_symbol: str, code: bytes) -> bool:
    """Whether the kernel in `code` (PTX, a cubin or host object code) walks its grid."""
    return markers.has_marker(kernel_symbol, _SUFFIX, code)


def hardware_blocks(grid: tuple[int, int, int], resident: int, kernel_name: str) -> int:
    """The blocks a launch of logical `grid` runs: one per resident slot, at most one per
    logical block (and at least one). A grid of MAX_BLOCKS blocks or more is a
    LaunchError."""
    gx, gy, gz = grid
    total = gx * gy * gz
    if total >= MAX_BLOCKS:
        from oxide.errors import LaunchError

        raise LaunchError(f"`{kernel_name}` walks its grid with the blocks that fit (a tile "
                          f"kernel with a producer warp group), which takes fewer than 2**32 "
                          f"blocks; grid {grid} has {total}: launch fewer, larger tiles, or "
                          "set OXIDE_TILE_PERSISTENT=0 before compiling")
    return max(1, min(total, resident))


def enabled() -> bool:
    """OXIDE_TILE_PERSISTENT=0 keeps one block per logical block for every tile kernel
    (to compare the two)."""
    return os.environ.get("OXIDE_TILE_PERSISTENT", "1") != "0"
