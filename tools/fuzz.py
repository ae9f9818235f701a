"""Differential fuzzer: random typed kernels on the CPU and the GPU against a reference.

    python tools/fuzz.py --seed 1 --programs 2000 --device both --jobs 8 --minimize

Generates programs (integer and float arithmetic with every operator and conversion,
branches, loops, `@ox.func` calls), runs them through oxide on the chosen devices,
and checks every result bit for bit against an independent interpreter of
docs/language.md (tools/fuzzing/semantics.py). docs/testing.md explains the counts.
Prints one summary line, then each mismatch: the program, its inputs, expected and got.
Exits 1 when anything disagrees.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.fuzzing.harness import Mismatch  # noqa: E402
from tools.fuzzing.runner import Summary, fuzz  # noqa: E402


def _first_per_program(mismatches: list[Mismatch]) -> list[tuple[Mismatch, int]]:
    """One mismatch per (device, batch, program, kind), with how many vectors showed it."""
    groups: dict[tuple[str, int, int, str], list[Mismatch]] = {}
    for m in mismatches:
        groups.setdefault((m.device, m.batch.index, m.program, m.what), []).append(m)
    return [(ms[0], len(ms)) for ms in groups.values()]


def _report_progress(summary: Summary, batches_left: int, seconds: float) -> None:
    """One stderr line per batch: the partial summary, elapsed time and batches left."""
    print(f"[{seconds:7.1f} s, {batches_left} batches left] {summary.line()}",
          file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--programs", type=int, default=500)
    ap.add_argument("--device", choices=("cpu", "gpu", "both"), default="cpu")
    ap.add_argument("--per-kernel", type=int, default=50, help="programs per compiled kernel")
    ap.add_argument("--vectors", type=int, default=32, help="input vectors per program")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--minimize", action="store_true", help="shrink each mismatch to a repro")
    ap.add_argument("--max-reports", type=int, default=20)
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    ap.add_argument("--batch-seconds", type=float, default=600.0,
                    help="with --jobs > 1, report a batch that runs longer as a hang")
    args = ap.parse_args(argv)
    devices = ("cpu", "gpu") if args.device == "both" else (args.device,)
    if "gpu" in devices:
        from oxide.runtime.device import cuda_device_count

        if cuda_device_count() == 0:
            print("fuzz: --device gpu/both needs an NVIDIA GPU, and none was found",
                  file=sys.stderr)
            return 2
    summary = fuzz(args.seed, args.programs, devices, args.per_kernel, args.vectors, args.jobs,
                   progress=None if args.quiet else _report_progress,
                   batch_seconds=args.batch_seconds)
    print(summary.line())
    groups = _first_per_program(summary.mismatches)
    for m, count in groups[:args.max_reports]:
        if args.minimize:
            from tools.fuzzing.minimize import minimize

            m = minimize(m)
        print()
        print(m.report())
        if count > 1:
            print(f"  ({count} input vectors of this program disagree)")
    if len(groups) > args.max_reports:
        print(f"\n... and {len(groups) - args.max_reports} more programs (--max-reports)")
    return 1 if summary.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
