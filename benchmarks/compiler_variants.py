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
