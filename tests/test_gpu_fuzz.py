"""The differential fuzzer on a real GPU: CPU and GPU results against the reference.

Run with `pytest -m gpu tests/test_gpu_fuzz.py -s`; every test here skips itself where
no CUDA GPU is found. The large run is issue 14's acceptance: the CPU and the GPU agree
with the reference (tools/fuzzing/semantics.py) on 10,000 generated programs, seed
GPU_SEED, each on 64 input vectors. docs/testing.md says how programs are counted.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.fuzzing.runner import Summary, fuzz  # noqa: E402

pytestmark = pytest.mark.gpu

GPU_SEED = 14
SMALL_SEED = 1402


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OXIDE_CACHE", "0")


def _check(summary: Summary) -> None:
    print(summary.line())
    if summary.mismatches:
        pytest.fail(summary.line() + "\n\n" + "\n\n".join(
            m.report() for m in summary.mismatches[:8]), pytrace=False)


def test_gpu_fuzz_small_in_process() -> None:
    """200 programs in this process: the GPU launch, fault and copy-back paths."""
    summary = fuzz(SMALL_SEED, 200, ("cpu", "gpu"), per_kernel=50, vectors=64)
    _check(summary)
    assert summary.pairs["gpu"] == summary.pairs["cpu"] > 200 * 16
    assert summary.fault_launches["gpu"] > 0


def test_gpu_fuzz_10000_programs() -> None:
    """Issue 14's acceptance run: 10,000 programs on the CPU and the GPU, seed GPU_SEED."""
    jobs = max(1, min(16, (os.cpu_count() or 2) - 1))
    summary = fuzz(GPU_SEED, 10_000, ("cpu", "gpu"), per_kernel=50, vectors=64, jobs=jobs)
    _check(summary)
    assert summary.programs == 10_000
    assert summary.pairs["gpu"] == summary.pairs["cpu"]
