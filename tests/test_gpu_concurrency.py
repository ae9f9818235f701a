"""Processes sharing one GPU never change a result (issue 27, "Under load").

Eight worker processes at once (tools/gpu_stress.py), each fuzzing generated kernels
against the reference, launching kernels that fault on purpose (an out-of-bounds read,
a zero divisor) and then the same kernels cleanly, and running the transpose example;
every result is checked in the worker and every failure comes back here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.gpu_stress import run  # noqa: E402

pytestmark = pytest.mark.gpu


def test_processes_sharing_a_gpu_agree_with_the_reference() -> None:
    reports = run(workers=8, rounds=2, programs=40, timeout=480)
    assert len(reports) == 8
    failures = [(r["seed"], f, r.get("stderr", "")) for r in reports for f in r["failures"]]
    assert not failures, "\n\n".join(f"worker {s}: {f}\n{e}" for s, f, e in failures[:5])
    for r in reports:
        checked = r["checked"]
        assert checked["fuzz_results"] > 1000 and checked["fault_launches"] > 0
        assert checked["faults"] == 4 and checked["clean"] == 4 and checked["transposes"] == 2
