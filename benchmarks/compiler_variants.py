"""Compiling a tile kernel with some of the compiler's pieces switched off, for benchmarks
that time the variants side by side in one process (two_blocks.py, fixed_cost.py).

A variant is a set of codegen/switches.py environment variables, and whether 2-d tile
stores may go through shared memory and TMA (tile/tma_stores.py). Each variant needs a
fresh kernel object (`kernel.with_options(...)`): a launch keeps the code it compiled."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def switched(env: dict[str, str], tma_stores: bool = True) -> Iterator[None]:
    """The switches of one variant, for the kernels compiled inside."""
    import oxide.tile.pipeline as pipeline

    saved = {k: os.environ.get(k) for k in env}
    real = pipeline.place_tma_stores
    os.environ.update(env)
    if not tma_stores:
        pipeline.place_tma_stores = lambda *args, **kwargs: False
    try:
        yield
    finally:
        pipeline.place_tma_stores = real
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def timed(fn: Callable[[], Any], rounds: int) -> float:
    """The best of `rounds` GPU-timed means of back-to-back `fn()` (`simt_bench`)."""
    import torch
    from simt_bench import gpu_seconds

    fn()
    torch.cuda.synchronize()
    return min(gpu_seconds(fn) for _ in range(rounds))


def check_product(c: Any, want: Any, k: int, label: str) -> None:
    """Raise where a bf16 product `c` (torch, on the GPU) is further from `want` (its f32
    reference) than its accumulation over `k` (0.02 sqrt(k)) and its own rounding to bf16
    (half a unit in the last place: at most 2^-8 of the value) explain."""
    err = float(((c.float() - want).abs() - want.abs() * 2.0 ** -8).max())
    if err > 0.02 * k ** 0.5:
        raise AssertionError(f"{label}: max |error| past bf16 rounding {err}")
