"""The CUDA driver's JIT optimization level against tile_attention's cold load and speed.

tile_attention (sm_90a with `setmaxnreg`) loads as PTX, which the driver's own ptxas
compiles at `cuModuleLoadData`: on a cold cache that is the largest stage of its first
call (docs/performance.md, "Time to first result"). This times the load and the kernel
at each `CU_JIT_OPTIMIZATION_LEVEL` (and with no option: the driver's default), each in
a fresh process with the driver's cache off (issue 29: is a lower level a cheaper first
call at no cost to the kernel?).

    python benchmarks/jit_levels.py [--levels default 4 2 1 0]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

PROBE = r"""
import ctypes, json, sys, time
import torch
from cuda.bindings import driver as drv
from triton.testing import do_bench
import oxide as ox
from oxide.runtime import cuda_driver as cd

level, causal = sys.argv[1], sys.argv[2] == "1"
loads = []

def load_module(image):
    buf = ctypes.create_string_buffer(image, len(image))
    t = time.perf_counter()
    if level == "default":
        module = cd.call(drv.cuModuleLoadData, ctypes.addressof(buf), what="load")
    else:
        module = cd.call(drv.cuModuleLoadDataEx, ctypes.addressof(buf), 1,
                         [drv.CUjit_option.CU_JIT_OPTIMIZATION_LEVEL], [int(level)], what="load")
    loads.append(time.perf_counter() - t)
    return module

cd.load_module = load_module
from oxide.examples import tile_attention as m
B, H, S, D = 8, 16, 4096, 64
bm, bn = m.gpu_block(D)
q, k, v = (torch.randn(B * H * S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
o = torch.empty_like(q)
run = lambda: ox.launch(m.tile_attention, B * H * S // bm, q, k, v, o, S, 0.125, bm, bn, D,
                        causal)
run()
torch.cuda.synchronize()
ms = do_bench(run, warmup=50, rep=300)
flops = 4 * B * H * S * S * D / (2 if causal else 1)
print(json.dumps({"load_s": loads[0], "tflops": flops / ms / 1e9}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", nargs="+", default=["default", "4", "2", "1", "0"])
    args = parser.parse_args()
    env = dict(os.environ, CUDA_CACHE_DISABLE="1", OXIDE_CACHE="0")
    print("| causal | JIT level | module load (driver ptxas) | TFLOPS (B8 H16 S4096 D64) |")
    print("| --- | --- | ---: | ---: |")
    for causal in ("1", "0"):
        for level in args.levels:
            out = subprocess.run([sys.executable, "-c", PROBE, level, causal], env=env,
                                 capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"| {causal == '1'} | {level} | {r['load_s'] * 1e3:.0f} ms | "
                  f"{r['tflops']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
