"""CPU backend: a 2^24-element f32 vecadd, timed after a warm-up launch.

Run: `python benchmarks/cpu_vecadd.py [log2 n] [repeats]`. Prints the best time
and the effective bandwidth (two reads and one write of 4 bytes per element),
next to NumPy's `np.add(a, b, out=c)` on the same arrays.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import oxide as ox
from oxide import DisjointSlice, Slice, f32, thread
from oxide.runtime.config import LaunchConfig
from oxide.runtime.device import device


@ox.kernel
def vecadd(a: Slice[f32], b: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] + b[i]


def best_of(repeats: int, fn: object) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    n = 1 << (int(sys.argv[1]) if len(sys.argv) > 1 else 24)
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    rng = np.random.default_rng(0)
    a = rng.standard_normal(n, dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    c = np.empty_like(a)
    cfg = LaunchConfig.for_num_elems(n)
    with device("cpu"):
        start = time.perf_counter()
        vecadd[cfg](a, b, c)
        first = time.perf_counter() - start
        assert np.array_equal(c, a + b)
        t = best_of(repeats, lambda: vecadd[cfg](a, b, c))
    t_np = best_of(repeats, lambda: np.add(a, b, out=c))
    gb = 3 * 4 * n / 1e9
    print(f"vecadd f32 n=2^{n.bit_length() - 1} on the CPU")
    print(f"  oxide: {t * 1e3:8.2f} ms  {gb / t:6.1f} GB/s  (first launch, with JIT: "
          f"{first * 1e3:.0f} ms)")
    print(f"  numpy: {t_np * 1e3:8.2f} ms  {gb / t_np:6.1f} GB/s")


if __name__ == "__main__":
    main()
