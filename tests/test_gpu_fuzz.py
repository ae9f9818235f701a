"""The differential fuzzer on a real GPU: CPU and GPU results against the reference.

Run with `pytest -m gpu tests/test_gpu_fuzz.py -s`; every test here skips itself where
no CUDA GPU is found. Issue 14's acceptance run, 10,000 programs on the CPU and the GPU,
is `python tools/fuzz.py --seed 14 --programs 10000 --device both --jobs 16 --vectors 64`
(about ten minutes of compiling on a 16-core host, too long for a test); docs/testing.md
gives its last result and says how programs are counted.
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


def test_gpu_fuzz_1000_programs() -> None:
    """The first 1,000 programs of the acceptance run (seed GPU_SEED), in worker processes."""
    jobs = max(1, min(16, (os.cpu_count() or 2) - 1))
    summary = fuzz(GPU_SEED, 1_000, ("cpu", "gpu"), per_kernel=50, vectors=64, jobs=jobs)
    _check(summary)
    assert summary.programs == 1_000
    assert summary.pairs["gpu"] == summary.pairs["cpu"]
