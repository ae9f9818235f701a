"""The shipped examples: `oxide run NAME` runs one, `oxide list` lists them.

Each example is a module with a `main(device=None, arch=None, size=None)` that
allocates its inputs, launches, checks the result against NumPy and returns an
`ox.testing.RunResult` (PASS/FAIL, a time and throughput, the device it ran on). Each
imports only public API (`oxide`, `oxide.testing`, `oxide.kernels.hopper_gemm`) and
NumPy, so `oxide show NAME > mine.py` is a script that runs on its own.
"""

from __future__ import annotations

import importlib
from types import ModuleType

NAMES = ("vecadd", "scale", "saxpy", "matadd", "mandelbrot", "nbody", "reduction", "histogram",
         "transpose", "scan", "softmax", "sgemm", "tile_vecadd", "tile_softmax", "tile_layernorm",
         "tile_transpose", "tile_matmul", "tile_attention", "tile_dropout", "tile_wide_rows",
         "tile_layernorm_backward", "tile_fp8_gemm", "gemm_hopper")


def load(name: str) -> ModuleType:
    """The example module called `name`; KeyError names the known ones."""
    if name not in NAMES:
        raise KeyError(f"no example named {name!r}; the examples are {', '.join(NAMES)}")
    return importlib.import_module(f"oxide.examples.{name}")


def summary(name: str) -> str:
    """The first line of an example's docstring."""
    return (load(name).__doc__ or "").strip().splitlines()[0]
