"""256-bin histogram: per-block counts with shared-memory atomics, merged with global ones."""

from __future__ import annotations

from typing import Any

import numpy as np

import oxide as ox
from oxide import AtomicSlice, Slice, i64, u8, u32
from oxide.testing import RunResult, check_arch, describe_device, seconds_per_launch

BINS = 256
BLOCK = 256  # one thread per bin for clearing and merging the block's counts


@ox.kernel(block=BLOCK)
def histogram(data: Slice[u8], bins: AtomicSlice[u32]):
    """Counting in shared memory keeps the contended atomics on the SM; only 256 per block
    reach global memory. No `unsafe`: oxide proves each thread clears and reads only its
    own bin, with barriers between those phases and the atomic one."""
    counts = ox.shared.array(u32, BINS)
    t = ox.thread_idx.x
    counts[t] = u32(0)
    ox.sync_threads()
    stride = i64(ox.grid_dim.x) * i64(ox.block_dim.x)
    j = i64(ox.block_idx.x) * i64(ox.block_dim.x) + i64(t)
    while j < len(data):
        ox.atomic.add(counts, data[j], u32(1), scope="block")
        j += stride
    ox.sync_threads()
    c = counts[t]
    if c > 0:
        ox.atomic.add(bins, t, c)


def resident_blocks(dev: Any, per_sm: int) -> int:
    """`per_sm` blocks on each SM of a GPU (a grid-stride kernel then keeps every SM busy
    and has the fewest block-level steps), 64 on the CPU."""
    if dev.is_cpu:
        return 64
    from cuda.core import Device

    return Device(dev.index).properties.multiprocessor_count * per_sm


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """Counts `size` random bytes (skewed, so some bins are hot) and checks np.bincount."""
    with ox.device(device) as dev:
        n = size or (1 << 20 if dev.is_cpu else 1 << 28)
        rng = np.random.default_rng(9)
        data = np.minimum(rng.exponential(40.0, n), BINS - 1).astype(np.uint8)
        bins = np.zeros(BINS, np.uint32)
        d_data, d_bins = [ox.to_device(arr) for arr in (data, bins)]
        config = ox.LaunchConfig(grid=resident_blocks(dev, 2048 // BLOCK), block=BLOCK)
        ox.launch(histogram, config, d_data, d_bins)
        passed = np.array_equal(d_bins.to_numpy(), np.bincount(data, minlength=BINS))
        seconds = seconds_per_launch(lambda: ox.launch(histogram, config, d_data, d_bins), dev)
        return RunResult("histogram", passed, describe_device(dev), f"n = {n:,} u8", seconds,
                         work=n, unit="GB/s",
                         detail=check_arch(histogram, arch, data, bins))


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
