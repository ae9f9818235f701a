"""Prefix sum (exclusive scan) with ox.block.exclusive_scan: scan blocks, scan their totals, add."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import AtomicSlice, DisjointSlice, Slice, i32, thread
from oxide.testing import RunResult, check_arch, describe_device, seconds_per_launch

BLOCK = 1024  # two levels of 1024 cover 2^20 elements


@ox.kernel
def scan_blocks(x: Slice[i32], out: DisjointSlice[i32], totals: AtomicSlice[i32]):
    """out[i] = the sum of x over this block's elements before i; totals[block] = its sum."""
    i = thread.index_1d()
    v = x[i] if i < len(x) else 0
    before = ox.block.exclusive_scan(v)
    if i in out:
        out[i] = before
    if ox.thread_idx.x == ox.block_dim.x - 1:
        ox.atomic.exch(totals, ox.block_idx.x, before + v)


@ox.kernel
def add_offsets(partial: Slice[i32], offsets: Slice[i32], out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i in out:
        out[i] = partial[i] + offsets[ox.block_idx.x]


def exclusive_scan(x: object, partial: object, totals: object, offsets: object, spare: object,
                   out: object, n: int) -> None:
    """out = exclusive prefix sums of x; the other arrays are scratch of the right sizes."""
    blocks = -(-n // BLOCK)
    ox.launch(scan_blocks, ox.LaunchConfig(grid=blocks, block=BLOCK), x, partial, totals)
    ox.launch(scan_blocks, ox.LaunchConfig(grid=1, block=BLOCK), totals, offsets, spare)
    ox.launch(add_offsets, ox.LaunchConfig(grid=blocks, block=BLOCK), partial, offsets, out)


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """Scans `size` (at most 2^20) small integers and checks against NumPy's cumsum."""
    with ox.device(device) as dev:
        n = size or (100_000 if dev.is_cpu else 1 << 20)
        if n > BLOCK * BLOCK:
            raise ValueError(f"this two-level scan handles up to {BLOCK * BLOCK:,} elements")
        blocks = -(-n // BLOCK)
        x = np.random.default_rng(4).integers(-9, 10, n).astype(np.int32)
        partial, out = np.zeros(n, np.int32), np.zeros(n, np.int32)
        totals, offsets = np.zeros(blocks, np.int32), np.zeros(blocks, np.int32)
        spare = np.zeros(1, np.int32)
        args = [ox.to_device(arr) for arr in (x, partial, totals, offsets, spare, out)]
        seconds = seconds_per_launch(lambda: exclusive_scan(*args, n), dev)
        want = np.concatenate(([0], np.cumsum(x)[:-1])).astype(np.int32)
        passed = np.array_equal(args[-1].to_numpy(), want)
        return RunResult("scan", passed, describe_device(dev), f"n = {n:,} i32", seconds,
                         work=2 * 4 * n, unit="GB/s",
                         detail=check_arch(scan_blocks, arch, x, partial, totals))


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
