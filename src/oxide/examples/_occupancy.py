"""How many blocks fill a device: grid-stride examples launch exactly that many.

A grid-stride kernel does the same work with any grid; one that keeps every
SM busy, and no more, has the fewest block-level steps (partials, atomics).
"""

from __future__ import annotations

from oxide.runtime.device import Device

_CPU_BLOCKS = 64


def resident_blocks(dev: Device, blocks_per_sm: int) -> int:
    """`blocks_per_sm` blocks on each SM of a GPU; a fixed count on the CPU."""
    if dev.is_cpu:
        return _CPU_BLOCKS
    from cuda.core import Device as CudaDevice

    return CudaDevice(dev.index).properties.multiprocessor_count * blocks_per_sm
