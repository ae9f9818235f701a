"""Step throughput of the tensor-parallel MLP example at N = 1 and N = 2 GPUs (issue 30's
bar: at least 1.8x at N = 2 for a size where compute dominates).

Runs `torchrun --nproc-per-node N -m oxide.examples.tp_mlp` for each N, takes rank 0's
median step time (its processes print it), and prints the speedup. Needs torch and N GPUs.

    python benchmarks/tp_mlp_scaling.py [--size 8192 4096 16384] [--steps 10]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys

STEP = re.compile(r"rank 0/(\d+): (PASS|FAIL) .*?, ([0-9.]+) ms per step")


def step_ms(n: int, size: list[int], steps: int) -> float:
    torchrun = shutil.which("torchrun")
    command = [torchrun] if torchrun else [sys.executable, "-m", "torch.distributed.run"]
    done = subprocess.run([*command, "--nproc-per-node", str(n), "-m", "oxide.examples.tp_mlp",
                           "--size", *map(str, size), "--steps", str(steps)],
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    found = STEP.search(done.stdout)
    if done.returncode or not found or found.group(2) != "PASS":
        raise SystemExit(f"N={n} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return float(found.group(3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, nargs=3, default=[8192, 4096, 16384],
                        metavar=("M", "D", "H"))
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    one = step_ms(1, args.size, args.steps)
    two = step_ms(2, args.size, args.steps)
    m, d, h = args.size
    print(f"tp_mlp M={m} D={d} H={h} bf16: N=1 {one:.3f} ms/step, N=2 {two:.3f} ms/step, "
          f"throughput x{one / two:.2f} at N=2")


if __name__ == "__main__":
    main()
