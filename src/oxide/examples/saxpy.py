"""SAXPY, generic over the element type: out[i] = a * x[i] + y[i]."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import DisjointSlice, Slice, thread
from oxide.examples import _harness as h

T = ox.TypeVar("T")


@ox.kernel
def saxpy(a: T, x: Slice[T], y: Slice[T], out: DisjointSlice[T]):
    i = thread.index_1d()
    if i in out:
        out[i] = a * x[i] + y[i]


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> h.ExampleResult:
    """Runs the generic kernel specialized for f32 and checks it against NumPy (FMA tolerance)."""
    with h.running_on(device) as dev:
        n = h.pick_size(dev, size, cpu=1 << 20, gpu=1 << 24)
        rng = np.random.default_rng(2)
        a = np.float32(0.75)  # a NumPy f32 scalar binds T = f32 (a Python float would be f64)
        x = rng.standard_normal(n, dtype=np.float32)
        y = rng.standard_normal(n, dtype=np.float32)
        out = np.zeros(n, dtype=np.float32)
        d_x, d_y, d_out = h.to_device(dev, x, y, out)
        config = ox.LaunchConfig.for_num_elems(n)
        seconds = h.time_launch(dev, lambda: ox.launch(saxpy, config, a, d_x, d_y, d_out))
        # The compiler may fuse a * x + y into one FMA (one rounding instead of two).
        error = float(np.max(np.abs(h.to_numpy(d_out) - (a * x + y)), initial=0.0))
        return h.ExampleResult("saxpy", error <= 1e-5, h.describe(dev), f"n = {n:,} f32",
                               seconds, work=3 * 4 * n, unit="GB/s",
                               detail=h.join(f"max error {error:.1e}",
                                             h.check_arch(saxpy, arch, a, x, y, out)))


if __name__ == "__main__":
    print(main())
