"""Compile speed: `import oxide`, and cold compiles to cubin of DESIGN.md's `scale` kernel and of
the Tile model's `tile_softmax` (BN = 8192: issue 11's bar is 0.5 s).

Each figure is measured in a fresh process (so every lazy import is paid), and
the median of several runs is reported. Needs no GPU.

    python benchmarks/compile_speed.py [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

IMPORT_PROBE = """
import time
t = time.perf_counter()
import oxide
print(time.perf_counter() - t)
"""

COMPILE_PROBE = """
import json, time
import oxide as ox
from oxide import DisjointSlice, Slice, f32, thread

@ox.kernel
def scale(input: Slice[f32], factor: f32, out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = input[i] * factor

t0 = time.perf_counter()
ck = scale.compile(Slice[f32], f32, DisjointSlice[f32], arch="sm_90")
t1 = time.perf_counter()
ptx = ck.ptx
t2 = time.perf_counter()
cubin = ck.cubin
t3 = time.perf_counter()
print(json.dumps({"total": t3 - t0, "frontend+llvm-ir": t1 - t0, "ptx": t2 - t1,
                  "cubin": t3 - t2, "cubin_bytes": len(cubin)}))
"""

# `vectors=True` is the specialization a launch with 16-byte-aligned rows compiles (what a
# user's first `tile_softmax[...](x, out, 8192)` on torch tensors builds); `vectors=None`
# is a compile from the bare annotations, which tests the alignment at run time.
TILE_PROBE = """
import json, time
import oxide as ox
from oxide import f32, types as T
from oxide.examples.tile_softmax import tile_softmax

x = T.ArrayType("slice", f32, 2, True, vectors=VECTORS)
out = T.ArrayType("disjoint", f32, 2, True, vectors=VECTORS)
t0 = time.perf_counter()
ck = tile_softmax.compile(x, out, 8192, arch="sm_90")
cubin = ck.cubin
print(json.dumps({"total": time.perf_counter() - t0}))
"""


def run_probe(code: str, env: dict[str, str]) -> str:
    """Run `code` as a script in a fresh interpreter (kernels need a source file)."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
    try:
        out = subprocess.run([sys.executable, f.name], capture_output=True, text=True,
                             env=env)
        if out.returncode:
            raise RuntimeError(out.stderr)
        return out.stdout.strip().splitlines()[-1]
    finally:
        os.unlink(f.name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    env = dict(os.environ, OXIDE_CACHE="0", OXIDE_CACHE_DIR=tempfile.mkdtemp())
    # An installed package has its bytecode compiled; let the warm-up run write it here too.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    run_probe(COMPILE_PROBE, env)  # warm the OS file cache and .pyc files
    imports = [float(run_probe(IMPORT_PROBE, env)) for _ in range(args.runs)]
    compiles = [json.loads(run_probe(COMPILE_PROBE, env)) for _ in range(args.runs)]
    # tile_softmax as a user's next process meets it: the cache directory holds the
    # toolchain memo (where libdevice and nvJitLink are), `compile()` caches no kernels
    tile_env = dict(env, OXIDE_CACHE="1")
    tiles = {}
    for vectors in ("True", "None"):
        probe = TILE_PROBE.replace("VECTORS", vectors)
        run_probe(probe, tile_env)
        tiles[vectors] = [json.loads(run_probe(probe, tile_env))["total"]
                          for _ in range(args.runs)]
    med = {k: statistics.median(c[k] for c in compiles) for k in compiles[0]}
    print(f"runs: {args.runs} fresh processes each, median")
    print(f"import oxide:                    {statistics.median(imports) * 1e3:7.1f} ms")
    print(f"cold compile of scale to cubin:  {med['total'] * 1e3:7.1f} ms")
    print(f"  frontend + LLVM IR (+ xdsl import):   {med['frontend+llvm-ir'] * 1e3:7.1f} ms")
    print(f"  LLVM O3 + PTX (+ llvmlite import):    {med['ptx'] * 1e3:7.1f} ms")
    print(f"  nvJitLink cubin (+ library load):     {med['cubin'] * 1e3:7.1f} ms")
    for vectors, what in (("True", "as a launch with 16-byte rows compiles it"),
                          ("None", "from its annotations (alignment tested at run time)")):
        t = tiles[vectors]
        print(f"cold compile of tile_softmax (BN 8192) to cubin, {what}: "
              f"{statistics.median(t) * 1e3:7.1f} ms (min {min(t) * 1e3:.1f}, "
              f"max {max(t) * 1e3:.1f})")


if __name__ == "__main__":
    main()
