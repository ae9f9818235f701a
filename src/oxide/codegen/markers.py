"""Marker globals: how compiled code tells the launcher something about its kernel.

A kernel that needs a launch to do more than run its grid (add a producer warp group's
threads, codegen/warp_roles.py; pass its logical grid, codegen/persistent_grid.py) says
so with a global whose name is the kernel's symbol with a suffix. The runtime finds the
name in the loaded code (PTX, a cubin, host object code) whatever route the code took:
a compile, the disk cache, a bundle. This module imports nothing heavy.
"""

from __future__ import annotations


def marker_symbol(kernel_symbol: str, suffix: str) -> str:
    """The marker global `suffix` of the kernel compiled as `kernel_symbol`."""
    return f"{kernel_symbol}_{suffix}"


def marker_global(kernel_symbol: str, suffix: str, value: int, cpu: bool = False) -> str:
    """The marker's LLVM declaration: an i32 global holding `value` (device memory on the
    GPU, where nothing reads it: the name is the message)."""
    space = "" if cpu else "addrspace(1) externally_initialized "
    return (f"@{marker_symbol(kernel_symbol, suffix)} = {space}global i32 {value}, "
            "align 4")


def has_marker(kernel_symbol: str, suffix: str, code: bytes) -> bool:
    """Whether `code` holds the kernel's marker `suffix`."""
    return marker_symbol(kernel_symbol, suffix).encode() in code
