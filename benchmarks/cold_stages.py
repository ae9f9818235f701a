"""Where a cold first call's time goes, by the wall clock: `first_call.py`'s kernels, each
in fresh processes with every cache empty (oxide's and the CUDA driver's JIT cache).

Why beside first_call.py's breakdown: that one is a cProfile run, which inflates the
Python stages about three times against the C ones (LLVM, ptxas), so its shares mislead.
Here a "staged" process first imports what a first call imports, one group at a time,
each timed (xDSL, oxide's compiler, llvmlite with LLVM's initialization, nvJitLink's
library, the toolchain fingerprint), then makes the call with its stages wrapped by
timers: the tile frontend and passes, the safety passes, the LLVM IR text, LLVM's parse
and O3 and PTX (`to_ptx` holds both), ptxas through nvJitLink (a cubin), the module load
(the driver's own ptxas, for a kernel loaded as PTX: sm_90a with setmaxnreg), and the
launch trampoline's build. A "plain" process makes the same call untouched, for the
total. Stages nest (`to_ptx` holds `parse` and `optimize`), so they do not add up.

    python benchmarks/cold_stages.py [--runs 2] [--kernels tile_softmax tile_attention]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from first_call import COMPILE_BYTECODE, SETUP, run_script  # noqa: E402

# (module, function) pairs timed in a staged process; `Class.method` for a method
STAGES = [
    ("oxide.tile.frontend", "lower_tile_kernel"), ("oxide.frontend.entry", "lower_kernel"),
    ("oxide.tile.auto_warps", "choose_warps"),
    ("oxide.passes.safety", "check_disjoint_writes"),
    ("oxide.passes.disjoint_reads", "check_disjoint_reads"),
    ("oxide.passes.uniformity", "check_barrier_uniformity"),
    ("oxide.passes.shared_races", "check_shared_races"),
    ("oxide.codegen.emit", "Emitter.emit"), ("oxide.codegen.llvm", "parse"),
    ("oxide.codegen.llvm", "optimize"), ("oxide.codegen.llvm", "to_ptx"),
    ("oxide.codegen.nvjitlink", "ptx_to_cubin"), ("oxide.runtime.cuda_driver", "load_module"),
    ("oxide.runtime.native_launch", "_build"),
]

PROBE = """
import collections, functools, importlib, json, sys, time
T = {{}}
def lap(name, t=[time.perf_counter()]):
    now = time.perf_counter(); T[name] = (now - t[0]) * 1e3; t[0] = now
import torch
import oxide as ox
from oxide.runtime.gpu import gpu_device
{setup}
gpu_device(0)
torch.cuda.synchronize()
lap("setup")

def timed_stages():
    '''Wrap each stage function (and the names other oxide modules imported it under)
    with a timer; inside a function, so that nothing here shadows the setup's names.'''
    spent = collections.defaultdict(float)
    for module_name, qualname in {stages!r}:
        owner = importlib.import_module(module_name)
        *path, attr = qualname.split(".")
        for part in path:
            owner = getattr(owner, part)
        original = getattr(owner, attr)
        def timer(fn=original, name=qualname):
            @functools.wraps(fn)
            def timed(*args, **kwargs):
                start = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    spent[name] += (time.perf_counter() - start) * 1e3
            return timed
        wrapped = timer()
        setattr(owner, attr, wrapped)
        if not path:
            for module in list(sys.modules.values()):
                if (getattr(module, "__name__", "").startswith("oxide")
                        and getattr(module, attr, None) is original):
                    setattr(module, attr, wrapped)
    return spent

spent = None
if {staged}:
    import xdsl.dialects.builtin; lap("import xDSL")
    import oxide.compiler, oxide.tile.frontend, oxide.codegen.emit; lap("import oxide's compiler")
    from oxide.codegen.llvm import binding; binding(); lap("llvmlite + LLVM init")
    from oxide.codegen import nvjitlink; nvjitlink._lib(); lap("nvJitLink's library")
    from oxide.runtime.cache import toolchain_fingerprint; toolchain_fingerprint()
    lap("toolchain fingerprint")
    spent = timed_stages(); lap("imports of the timed stages")
call()
torch.cuda.synchronize()
lap("first call")
for name, ms in (spent or {{}}).items():
    T["  " + name] = ms
print(json.dumps(T))
"""


def probe(kernel: str, staged: bool) -> dict[str, float]:
    code = PROBE.format(setup=textwrap.dedent(SETUP[kernel]), stages=STAGES, staged=staged)
    with tempfile.TemporaryDirectory() as cache:
        try:
            return run_script(code, Path(cache))
        except RuntimeError as exc:
            raise RuntimeError(f"{kernel}: {exc}") from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="processes of each kind")
    parser.add_argument("--kernels", nargs="+", choices=list(SETUP), default=list(SETUP))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:  # bytecode, as pip install writes it
        run_script(COMPILE_BYTECODE, Path(cache))
    for kernel in args.kernels:
        for staged in (False, True):
            runs: dict[str, list[float]] = {}
            for _ in range(args.runs):
                for name, ms in probe(kernel, staged).items():
                    runs.setdefault(name, []).append(ms)
            print(f"{kernel}, {'staged' if staged else 'plain'} (median of {args.runs} "
                  "processes, ms; min-max)")
            for name, values in runs.items():
                if name != "setup":
                    print(f"  {name:<32} {statistics.median(values):8.1f}  "
                          f"({min(values):.0f}-{max(values):.0f})")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
