"""How a compiled tile kernel tells the launcher that it has a producer warp group.

A tile kernel with a producer warp group (tile/producer.py) runs 128 threads more than
the `num_warps * 32` a launch names: the launcher must add them. The kernel says so the
way a grid-synchronizing kernel does (codegen/grid_sync.py): a global whose name is the
kernel's symbol with a suffix, found in the loaded code by the runtime (runtime/gpu.py)
whatever route the code took (a compile, the disk cache, a bundle). This module imports
nothing heavy: the runtime reads it without the compiler.
"""

from __future__ import annotations

from oxide.codegen import markers

PRODUCER_THREADS = 128  # one warp group


_SUFFIX = "producer_warp_group"


def marker_symbol(kernel_symbol: str) -> str:
    """The marker global of the kernel compiled as `kernel_symbol` (codegen/markers.py)."""
    return markers.marker_symbol(kernel_symbol, _SUFFIX)


def marker_global(kernel_symbol: str, cpu: bool = False) -> str:
    """The marker's LLVM declaration (its value: the threads the launcher adds)."""
    return markers.marker_global(kernel_symbol, _SUFFIX, PRODUCER_THREADS, cpu)


def extra_threads(kernel_symbol: str, code: bytes) -> int:
    """The threads a launch adds to a block of the kernel in `code` (PTX or a cubin)."""
    return PRODUCER_THREADS if markers.has_marker(kernel_symbol, _SUFFIX, code) else 0
