"""Several processes on one GPU at once: fuzz kernels, deliberate faults, checked results.

Issue 27 ("Under load"): the GPU fuzz test and an example failed only while other test
processes shared the GPU. Processes sharing a GPU must never change a result, so this
runs N worker processes at the same time, each of which, over several rounds:

- fuzzes a few batches of generated programs on the GPU against the reference
  interpreter (tools/fuzzing), fault launches included;
- launches a kernel that reads out of bounds and checks the `ox.KernelIndexError` (its
  index and length), then the same kernel in bounds and checks every element;
- divides by zero on purpose and checks the `ox.KernelAssertionError`, then a clean
  launch of the same kernel;
- transposes a matrix with the shipped example and checks it against NumPy.

Each worker prints one JSON line: what it checked and every failure, with the text of
any exception. `python tools/gpu_stress.py --workers 8` runs them and exits 1 if any
failed; tests/test_gpu_concurrency.py runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _faulting_kernels() -> tuple[Any, Any]:
    import oxide as ox
    from oxide import DisjointSlice, Slice, i32, thread

    @ox.kernel
    def shifted_read(x: Slice[i32], shift: i32, out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[i + shift] * 3

    @ox.kernel
    def divide(x: Slice[i32], d: i32, out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[i] // d

    return shifted_read, divide


def worker(seed: int, rounds: int, programs: int, device: str = "gpu") -> dict[str, Any]:
    """One process's share of the load; returns what it checked and what failed
    (`device` "cpu" runs the same checks without a GPU, to try the tool)."""
    import numpy as np

    import oxide as ox
    from oxide.examples import transpose
    from tools.fuzzing.runner import fuzz

    failures: list[str] = []
    checked = {"fuzz_results": 0, "fault_launches": 0, "faults": 0, "clean": 0,
               "transposes": 0}
    shifted_read, divide = _faulting_kernels()
    rng = np.random.default_rng(seed)
    n = 1 << 16
    for r in range(rounds):
        try:
            summary = fuzz(seed * 100 + r, programs, (device,), per_kernel=20, vectors=64)
            checked["fuzz_results"] += summary.pairs.get(device, 0)
            checked["fault_launches"] += summary.fault_launches.get(device, 0)
            failures += [m.report() for m in summary.mismatches[:3]]
            _checks(ox, np, transpose, shifted_read, divide, rng, n, r, device, checked,
                    failures)
        except Exception:  # report, and go on with the next round
            failures.append(f"round {r}: {traceback.format_exc()}")
    return {"seed": seed, "pid": os.getpid(), "checked": checked, "failures": failures}


def _checks(ox: Any, np: Any, transpose: Any, shifted_read: Any, divide: Any, rng: Any, n: int,
            r: int, device: str, checked: dict[str, int], failures: list[str]) -> None:
    """One round's deliberate faults, the clean launches after them and a transpose."""
    with ox.device("cpu" if device == "cpu" else 0):
        x = rng.integers(-1000, 1000, n).astype(np.int32)
        d_x = ox.to_device(x)
        out = ox.to_device(np.zeros(n, np.int32))
        cfg = ox.LaunchConfig.for_num_elems(n)
        shift = int(rng.integers(1, 500))
        try:
            shifted_read[cfg](d_x, shift, out)
            ox.synchronize()
            failures.append(f"round {r}: no KernelIndexError for shift {shift}")
        except ox.KernelIndexError as exc:
            checked["faults"] += 1
            if exc.length != n or not n <= exc.index < n + shift:  # type: ignore[attr-defined]
                failures.append(f"round {r}: wrong index error: {exc}")
        shifted_read[cfg](d_x, 0, out)
        if not np.array_equal(out.to_numpy(), x * 3):
            failures.append(f"round {r}: wrong values after an index error")
        checked["clean"] += 1
        try:
            divide[cfg](d_x, 0, out)
            ox.synchronize()
            failures.append(f"round {r}: no KernelAssertionError for a zero divisor")
        except ox.KernelAssertionError:
            checked["faults"] += 1
        d = int(rng.integers(1, 9))
        divide[cfg](d_x, d, out)
        if not np.array_equal(out.to_numpy(), x // d):
            failures.append(f"round {r}: wrong values after a division fault")
        checked["clean"] += 1
        result = transpose.main(device="cpu" if device == "cpu" else 0,
                                size=2048 + 64 * r if device == "gpu" else 100)
        checked["transposes"] += 1
        if not result.passed:
            failures.append(f"round {r}: transpose example failed: {result}")


def run(workers: int, rounds: int, programs: int, timeout: float, device: str = "gpu"
        ) -> list[dict[str, Any]]:
    """Start `workers` processes at once and collect their reports."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p), OXIDE_CACHE="0")
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(1000 + k),
                               "--rounds", str(rounds), "--programs", str(programs),
                               "--device", device],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env, cwd=ROOT)
             for k in range(workers)]
    reports = []
    deadline = time.monotonic() + timeout
    for k, p in enumerate(procs):
        try:
            out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            reports.append({"seed": 1000 + k, "failures": [f"timed out after {timeout:.0f} s"],
                            "stderr": err[-2000:]})
            continue
        line = out.strip().splitlines()[-1] if out.strip() else ""
        try:
            reports.append(json.loads(line))
        except json.JSONDecodeError:
            reports.append({"seed": 1000 + k, "failures": [f"exit {p.returncode}: no report"],
                            "stderr": err[-4000:]})
    return reports


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--programs", type=int, default=40)
    parser.add_argument("--timeout", type=float, default=480)
    parser.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        sys.path.insert(0, str(ROOT))
        print(json.dumps(worker(args.worker, args.rounds, args.programs, args.device)))
        return 0
    reports = run(args.workers, args.rounds, args.programs, args.timeout, args.device)
    bad = [r for r in reports if r.get("failures")]
    for r in reports:
        print(json.dumps(r)[:3000])
    print(f"{len(reports)} workers, {len(bad)} with failures")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
