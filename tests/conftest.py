"""Shared test setup: `@pytest.mark.gpu` tests skip themselves where no CUDA GPU is found;
fixtures that several suites of the GPU launch path use."""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import sys
import tempfile

import pytest

# The disk cache of this test run is its own (CPU and GPU entries alike): a result never
# depends on what an earlier run, or the user's own work, left in ~/.cache/oxide.
# every compile in the tests checks the IR it produced (off by default: it costs time)
os.environ.setdefault("OXIDE_VERIFY_IR", "1")

# JAX takes 75% of the GPU's memory when it first touches it and keeps it for the life of
# the process: one pytest worker that ran the JAX interop test starved the others (`-n 6`
# on the H200 failed 256 MiB-1 GiB allocations in four examples, and the GPU fuzz test's
# launches, with CUDA_ERROR_OUT_OF_MEMORY). Allocate on demand instead.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

if "OXIDE_CACHE_DIR" not in os.environ:
    os.environ["OXIDE_CACHE_DIR"] = tempfile.mkdtemp(prefix="oxide-test-cache-")
    atexit.register(shutil.rmtree, os.environ["OXIDE_CACHE_DIR"], True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    global _GPU_TESTS_RUN
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    from oxide.runtime.device import cuda_device_count

    if cuda_device_count() > 0:
        _GPU_TESTS_RUN = True
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (none found)")
    for item in gpu_items:
        item.add_marker(skip)


_GPU_TESTS_RUN = False  # set at collection where a GPU is found


def pytest_runtest_teardown(item: pytest.Item) -> None:
    """After a GPU test, hand the memory its arrays held back to the device: with several
    workers on one GPU (`pytest -n`), memory that torch's or CuPy's caching allocators
    keep, or that waits for a garbage collection, made other workers' large allocations
    fail."""
    if not (_GPU_TESTS_RUN and item.get_closest_marker("gpu")):
        return  # a skipped test held nothing, and a full collection per test is slow
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    cupy = sys.modules.get("cupy")
    if cupy is not None:  # CuPy's pool keeps freed blocks too
        cupy.get_default_memory_pool().free_all_blocks()


@pytest.fixture
def general(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the launches that take the general GPU path (the binders declined)."""
    from oxide.runtime import gpu

    calls: list[int] = []
    real = gpu.launch_gpu

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(gpu, "launch_gpu", counted)
    return calls


@pytest.fixture
def hopper_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tile kernels run on the CPU as sm_90 compiles them (OXIDE_TILE_CPU_HOPPER=1):
    wgmma, TMA rings and the producer warp group emulated, checked against NumPy."""
    monkeypatch.setenv("OXIDE_TILE_CPU_HOPPER", "1")
