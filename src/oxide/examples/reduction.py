"""Block reduction: the sum of 2^28 floats with ox.block.reduce_add, in two launches."""

from __future__ import annotations

from typing import Any

import numpy as np

import oxide as ox
from oxide import AtomicSlice, Slice, f32, i64
from oxide.testing import RunResult, check_arch, describe_device, seconds_per_launch

UNROLL = 8  # independent loads in flight per thread: what keeps HBM busy
BLOCK = 256


@ox.kernel(checks=False, max_threads=BLOCK)
def partial_sums(a: Slice[f32], partials: AtomicSlice[f32]):
    """Each block sums a grid-strided share of `a` into `partials[block]`.

    A block reads tiles of UNROLL x BLOCK consecutive floats: load u of a thread is
    `BLOCK * u` elements after its first, a constant offset from one address, so
    the eight loads in flight cost one address register. The loop conditions keep
    every index below `len(a)`, so the per-access checks are off.
    """
    n = len(a)
    tile = UNROLL * BLOCK
    step = i64(ox.grid_dim.x) * tile
    j = i64(ox.block_idx.x) * tile + i64(ox.thread_idx.x)
    acc = ox.local.array(f32, UNROLL)  # constant indices after unrolling: registers
    for u in range(UNROLL):
        acc[u] = 0.0
    while j + (UNROLL - 1) * BLOCK < n:
        for u in range(UNROLL):
            acc[u] += a[j + u * BLOCK]
        j += step
    for u in range(UNROLL):  # the last, partial tile
        if j + u * BLOCK < n:
            acc[u] += a[j + u * BLOCK]
    s = f32(0)
    for u in range(UNROLL):
        s += acc[u]
    total = ox.block.reduce_add(s)  # every thread of the block gets it
    if ox.thread_idx.x == 0:
        ox.atomic.exch(partials, ox.block_idx.x, total)


def reduce_sum(a: object, partials: object, out: object, blocks: int) -> None:
    """The sum of `a` into `out[0]`: block partials, then one block over the partials."""
    ox.launch(partial_sums, ox.LaunchConfig(grid=blocks, block=BLOCK), a, partials)
    ox.launch(partial_sums, ox.LaunchConfig(grid=1, block=BLOCK), partials, out)


def resident_blocks(dev: Any, per_sm: int) -> int:
    """`per_sm` blocks on each SM of a GPU (a grid-stride kernel then keeps every SM busy
    and has the fewest block-level steps), 64 on the CPU."""
    if dev.is_cpu:
        return 64
    from cuda.core import Device

    return Device(dev.index).properties.multiprocessor_count * per_sm


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """Sums `size` uniform floats and checks against NumPy's float64 sum."""
    with ox.device(device) as dev:
        n = size or (1 << 20 if dev.is_cpu else 1 << 28)
        blocks = min(resident_blocks(dev, 2048 // BLOCK), -(-n // (UNROLL * BLOCK)))
        a = np.random.default_rng(5).random(n, dtype=np.float32)
        partials = np.zeros(blocks, np.float32)
        out = np.zeros(1, np.float32)
        d_a, d_partials, d_out = [ox.to_device(arr) for arr in (a, partials, out)]
        seconds = seconds_per_launch(lambda: reduce_sum(d_a, d_partials, d_out, blocks), dev)
        got = float(d_out.to_numpy()[0])
        want = float(a.sum(dtype=np.float64))
        passed = abs(got - want) <= 1e-5 * want
        return RunResult("reduction", passed, describe_device(dev), f"n = {n:,} f32", seconds,
                         work=4 * n, unit="GB/s",
                         detail="; ".join(filter(None, (
                             f"sum {got:.6g} (NumPy {want:.6g})",
                             check_arch(partial_sums, arch, a, partials)))))


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
