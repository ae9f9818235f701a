"""Differential fuzzer of the Tile model: random tile kernels against a NumPy model.

    python tools/tile_fuzz.py --seed 1 --programs 300 --jobs 2

Generates tile kernels (loads with padding at ragged edges, elementwise ops with
promotion and weak literals, masks, `tile.where`, conversions, broadcasting,
reductions, products, and tiles stored to a scratch array and loaded back in another
layout; tools/tile_fuzzing/generator.py), runs each through oxide on the chosen
device, and checks the output against an independent NumPy model of
docs/language.md's Tile model (tools/tile_fuzzing/model.py, whose docstring gives the
comparison rules). Prints one summary line, then each failing program: its source,
its launch arguments, and expected against got at the first differing element.
Exits 1 when anything disagrees or fails to compile.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.tile_fuzzing.runner import Summary, fuzz  # noqa: E402


def _progress(start: float, total: int, every: int) -> Callable[[Summary], None]:
    """One stderr line every `every` programs: the partial summary and time taken."""
    def report(summary: Summary) -> None:
        if summary.programs % every == 0 or summary.programs == total:
            print(f"[{time.perf_counter() - start:7.1f} s, {total - summary.programs} left] "
                  f"{summary.line()}", file=sys.stderr, flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--programs", type=int, default=300)
    ap.add_argument("--only", type=int, default=None, metavar="K",
                    help="run program K of the seed alone (the rerun line of a report)")
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--max-reports", type=int, default=10)
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = ap.parse_args(argv)
    if args.device == "gpu":
        from oxide.runtime.device import cuda_device_count

        if cuda_device_count() == 0:
            print("tile_fuzz: --device gpu needs an NVIDIA GPU, and none was found",
                  file=sys.stderr)
            return 2
    indices = [args.only] if args.only is not None else list(range(args.programs))
    progress = None if args.quiet else _progress(time.perf_counter(), len(indices),
                                                 max(1, len(indices) // 10))
    summary = fuzz(args.seed, indices, args.device, args.jobs, progress)
    print(summary.line())
    for f in summary.failures[:args.max_reports]:
        print()
        print(f.report())
    if len(summary.failures) > args.max_reports:
        print(f"\n... and {len(summary.failures) - args.max_reports} more (--max-reports)")
    return 1 if summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
