"""Time to first result: each shipped tile kernel's first call in a fresh process, with an
empty compile cache and with a warm one, and where the cold call's time goes.

Issue 29's bars (H200 host): a cold first call of tile_softmax and tile_layernorm in
0.4 s, of tile_attention in 1.0 s, and a warm-cache first call of every example in
0.1 s. The clock starts after CUDA is initialized (torch's context and oxide's device),
with the inputs on the GPU, and stops when the result is there (`torch.cuda.synchronize`).
Cold means every cache empty: oxide's and the CUDA driver's JIT cache (`CUDA_CACHE_PATH`,
where the PTX of a kernel the driver compiles itself is kept); warm means both as the cold
probe left them, as a second process finds them. Before the probes, one process imports everything and compiles nothing, so that the OS
has the shared libraries in its page cache (`--no-page-cache-warmup` skips it: then the
first probe also reads them from disk, as the first Python run after a boot does), and
before that the packages the probes import beyond torch get their bytecode, as `pip
install` writes it (`--no-bytecode` skips it).

The breakdown comes from a third, profiled cold run (cProfile's cumulative times of the
stage functions; profiling inflates them, so read them as shares): the frontend with the
tile passes, the safety passes, the LLVM IR text, LLVM O3 + NVPTX, nvJitLink, loading
the module, and what is left (imports, the launch path, the runtime's first-launch work).

Where Triton is installed, the same work written in Triton (a softmax, a causal attention
of the same blocks) is timed the same way beside them: a peer's time to first result on
the same host.

    python benchmarks/first_call.py [--json out.json] [--kernels tile_attention ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

SETUP = {
    "tile_softmax": """
        from oxide.examples.tile_softmax import tile_softmax
        x = torch.randn(8192, 8192, device="cuda"); out = torch.empty_like(x)
        call = lambda: ox.launch(tile_softmax, 8192, x, out, 8192)
    """,
    "tile_layernorm": """
        from oxide.examples.tile_layernorm import tile_layernorm
        x = torch.randn(8192, 8192, device="cuda"); out = torch.empty_like(x)
        w = torch.randn(8192, device="cuda"); b = torch.randn(8192, device="cuda")
        call = lambda: ox.launch(tile_layernorm, 8192, x, w, b, out, 1e-5, 8192)
    """,
    "tile_attention": """
        from oxide.examples import tile_attention as m
        bm, bn = m.gpu_block(64)
        q, k, v = (torch.randn(16 * 4096, 64, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        o = torch.empty_like(q)
        call = lambda: ox.launch(m.tile_attention, 16 * 4096 // bm, q, k, v, o, 4096,
                                 0.125, bm, bn, 64, True)
    """,
    "tile_matmul": """
        from oxide.examples import tile_matmul as m
        bm, bn, bk = m.GPU_TILE  # (an H100/H200: this runs on sm_90)
        a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(4096, 4096, device="cuda", dtype=torch.bfloat16)
        call = lambda: ox.launch(m.tile_matmul, m.grid(4096, 4096, bm, bn), a, b, c, bm, bn, bk)
    """,
    "vecadd (SIMT)": """
        from oxide.examples.vecadd import vecadd
        a = torch.randn(1 << 24, device="cuda"); b = torch.randn_like(a)
        c = torch.empty_like(a)
        call = lambda: vecadd[ox.LaunchConfig.for_num_elems(a.numel())](a, b, c)
    """,
}

# The same work written in Triton, timed the same way (Triton's cache, TRITON_CACHE_DIR,
# goes with oxide's): a peer's time to first result on the same host. The attention is
# the online-softmax forward oxide's example computes, causal, with the same blocks
# (128 queries a program, 8 warps) and the masked diagonal in a loop of its own.
PEERS = {
    "Triton softmax": """
        import triton, triton.language as tl

        @triton.jit
        def softmax_rows(x_ptr, out_ptr, n, BN: tl.constexpr):
            row = tl.program_id(0)
            cols = tl.arange(0, BN)
            x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=-float("inf"))
            e = tl.exp(x - tl.max(x, 0))
            tl.store(out_ptr + row * n + cols, e / tl.sum(e, 0), mask=cols < n)

        x = torch.randn(8192, 8192, device="cuda"); out = torch.empty_like(x)
        call = lambda: softmax_rows[(8192,)](x, out, 8192, BN=8192)
    """,
    "Triton attention": """
        import triton, triton.language as tl

        @triton.jit
        def _keys(acc, m, l, q, k_ptr, v_ptr, first_q, lo, hi, scale2,
                  BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, MASKED: tl.constexpr):
            rows = first_q + tl.arange(0, BM)
            for start in range(lo, hi, BN):
                keys = start + tl.arange(0, BN)
                kt = tl.load(k_ptr + keys[None, :] * D + tl.arange(0, D)[:, None])
                s = tl.dot(q, kt)
                if MASKED:
                    s = tl.where(keys[None, :] <= rows[:, None], s, -float("inf"))
                m_new = tl.maximum(m, tl.max(s, 1) * scale2)
                p = tl.math.exp2(s * scale2 - m_new[:, None])
                alpha = tl.math.exp2(m - m_new)
                l = l * alpha + tl.sum(p, 1)
                vt = tl.load(v_ptr + keys[:, None] * D + tl.arange(0, D)[None, :])
                acc = tl.dot(p.to(tl.bfloat16), vt, acc * alpha[:, None])
                m = m_new
            return acc, m, l

        @triton.jit
        def attention(q_ptr, k_ptr, v_ptr, o_ptr, seq, scale2, BM: tl.constexpr,
                      BN: tl.constexpr, D: tl.constexpr):
            b = tl.program_id(0)
            head = b // (seq // BM)
            first = (b % (seq // BM)) * BM
            base = head * seq * D
            rows = first + tl.arange(0, BM)
            q = tl.load(q_ptr + base + rows[:, None] * D + tl.arange(0, D)[None, :])
            acc = tl.zeros((BM, D), tl.float32)
            m = tl.full((BM,), -float("inf"), tl.float32)
            l = tl.zeros((BM,), tl.float32)
            acc, m, l = _keys(acc, m, l, q, k_ptr + base, v_ptr + base, first, 0, first,
                              scale2, BM, BN, D, False)
            acc, m, l = _keys(acc, m, l, q, k_ptr + base, v_ptr + base, first, first,
                              first + BM, scale2, BM, BN, D, True)
            out = acc / l[:, None]
            tl.store(o_ptr + base + rows[:, None] * D + tl.arange(0, D)[None, :],
                     out.to(tl.bfloat16))

        q, k, v = (torch.randn(16 * 4096, 64, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        o = torch.empty_like(q)
        call = lambda: attention[(16 * 4096 // 128,)](q, k, v, o, 4096, 0.125 * 1.4426950408889634,
                                                       BM=128, BN=128, D=64, num_warps=8,
                                                       num_stages=3)
    """,
}

# stage -> the functions whose cumulative time it is (file suffix, function name)
STAGES = {
    "frontend + tile passes": [("frontend/entry.py", "lower_kernel"),
                               ("tile/frontend.py", "lower_tile_kernel")],
    "safety passes": [("passes/safety.py", "check_disjoint_writes"),
                      ("passes/disjoint_reads.py", "check_disjoint_reads"),
                      ("passes/uniformity.py", "check_barrier_uniformity"),
                      ("passes/shared_races.py", "check_shared_races")],
    "LLVM IR text": [("codegen/emit.py", "emit")],
    "LLVM O3 + NVPTX": [("codegen/llvm.py", "to_ptx")],
    "nvJitLink": [("codegen/nvjitlink.py", "ptx_to_cubin")],
    "module load": [("runtime/cuda_driver.py", "load_module")],
}

PROBE = """
import cProfile, json, pstats, sys, time
import torch
import oxide as ox
from oxide.runtime.gpu import gpu_device
{setup}
gpu_device(0)
torch.cuda.synchronize()
prof = cProfile.Profile() if {profile} else None
start = time.perf_counter()
if prof: prof.enable()
call()
torch.cuda.synchronize()
if prof: prof.disable()
first = time.perf_counter() - start
start = time.perf_counter()
call()
torch.cuda.synchronize()
second = time.perf_counter() - start
stages = {{}}
if prof:
    stats = pstats.Stats(prof).stats
    for name, funcs in {stages!r}.items():
        stages[name] = sum(max([v[3] for (f, _, fn), v in stats.items()
                                if f.replace("\\\\", "/").endswith(suffix) and fn == func],
                               default=0.0) for suffix, func in funcs)
print(json.dumps({{"first": first, "second": second, "stages": stages}}))
"""


def probe(name: str, cache: Path, profile: bool) -> dict[str, Any]:
    setup = {**SETUP, **PEERS}[name]
    code = PROBE.format(setup=textwrap.dedent(setup), profile=profile, stages=STAGES)
    try:
        return run_script(code, cache)
    except RuntimeError as exc:
        raise RuntimeError(f"{name}: {exc}") from None


def run_script(code: str, cache: Path) -> dict[str, Any]:
    """Run `code` in a fresh Python with `cache` as oxide's cache directory; its last
    line of output, as JSON."""
    with tempfile.TemporaryDirectory() as work:
        script = Path(work) / "probe.py"
        script.write_text(code)
        # the driver's JIT cache goes with oxide's: an sm_90a kernel with setmaxnreg
        # (tile_attention, tile_matmul) loads as PTX the driver compiles and keeps in its
        # own cache across processes, so a cold probe must not find an earlier one's work
        env = {**os.environ, "OXIDE_CACHE_DIR": str(cache),
               "CUDA_CACHE_PATH": str(cache / "cuda-driver"),
               "TRITON_CACHE_DIR": str(cache / "triton"),
               "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "src"),
                                                         os.environ.get("PYTHONPATH", "")) if p)}
        done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                              text=True, timeout=600)
    if done.returncode:
        raise RuntimeError(done.stderr.strip()[-800:])
    return json.loads(done.stdout.strip().splitlines()[-1])


# Imports everything the probes use and compiles nothing: the shared libraries (LLVM's,
# torch's, CUDA's) and the bytecode are then in the OS's page cache, as after any earlier
# Python process that used them, so the first probe does not pay their first read from
# disk (on the H200 host, the first `import llvmlite.binding` after the machine starts
# takes 195 ms, later ones 24 ms).
WARM_PAGE_CACHE = """
import torch, oxide, oxide.compiler, oxide.tile.frontend, oxide.codegen.nvjitlink
from oxide.codegen.llvm import binding
from oxide.runtime.gpu import gpu_device
binding()
gpu_device(0)
torch.zeros(1, device="cuda")
print("{}")
"""

# Compiles the bytecode of the packages a tile kernel's first call imports (beyond torch),
# as `pip install` does at install time and a Python run does on first import. A host
# that sets PYTHONDONTWRITEBYTECODE (the lent GPU hosts do) with packages installed
# `--no-compile` would otherwise compile xDSL's and oxide's sources in every probe: on the
# dev VM that alone turns tile_softmax's 0.23-0.32 s compile into 0.65-0.91 s.
COMPILE_BYTECODE = """
import compileall, json, sys
import torch
before = set(sys.modules)
import oxide, oxide.compiler, oxide.tile.frontend, oxide.codegen.nvjitlink
from oxide.codegen.llvm import binding
from oxide.runtime.cache import toolchain_fingerprint
binding()
toolchain_fingerprint()
roots = set()
for name in set(sys.modules) - before:
    top = sys.modules.get(name.split(".")[0])
    if getattr(top, "__path__", None):
        roots.add(list(top.__path__)[0])  # the whole package, as pip compiles it
failed = sum(not compileall.compile_dir(r, quiet=2) for r in sorted(roots))
print(json.dumps({"packages": sorted(roots), "failed": failed}))
"""


def _has_triton() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the figures here too")
    parser.add_argument("--no-page-cache-warmup", action="store_true",
                        help="let the first probe read the libraries from disk")
    parser.add_argument("--no-bytecode", action="store_true",
                        help="leave modules without bytecode compiling from source in "
                             "every probe")
    parser.add_argument("--kernels", nargs="+", choices=[*SETUP, *PEERS], metavar="NAME",
                        help="only these (default: every kernel, and Triton's peers "
                             "where Triton is installed)")
    args = parser.parse_args()
    if not args.no_bytecode:
        with tempfile.TemporaryDirectory() as cache_dir:
            done = run_script(COMPILE_BYTECODE, Path(cache_dir))
        print(f"bytecode compiled for {len(done['packages'])} packages "
              f"({done['failed']} with a module that would not compile or a read-only folder)")
    if not args.no_page_cache_warmup:
        with tempfile.TemporaryDirectory() as cache_dir:
            run_script(WARM_PAGE_CACHE, Path(cache_dir))
    names = args.kernels or [*SETUP, *(PEERS if _has_triton() else ())]
    results: dict[str, Any] = {}
    for name in names:
        with tempfile.TemporaryDirectory() as cache_dir:
            cache = Path(cache_dir)
            cold = probe(name, cache, profile=False)
            warm = probe(name, cache, profile=False)
        results[name] = {"cold": cold["first"], "warm": warm["first"],
                         "second": cold["second"]}
        if name in SETUP:  # where oxide's stages go; a peer has none of them
            with tempfile.TemporaryDirectory() as cache_dir:
                profiled = probe(name, Path(cache_dir), profile=True)
            results[name].update(profiled=profiled["first"], stages=profiled["stages"])
    print(f"{'kernel':<16} {'cold first call':>16} {'warm cache':>11} {'2nd call':>9}")
    for name, r in results.items():
        print(f"{name:<16} {r['cold'] * 1e3:>13.0f} ms {r['warm'] * 1e3:>8.0f} ms "
              f"{r['second'] * 1e3:>6.2f} ms")
    print("\nwhere a cold first call goes (cProfile, shares of the profiled call):")
    stages = list(STAGES) + ["rest"]
    print(f"{'kernel':<16} " + " ".join(f"{s[:14]:>14}" for s in stages))
    for name, r in results.items():
        if "profiled" not in r:
            continue
        total = r["profiled"]
        shares = [r["stages"].get(s, 0.0) for s in STAGES]
        shares.append(max(0.0, total - sum(shares)))
        print(f"{name:<16} " + " ".join(f"{v * 1e3:>11.0f} ms" for v in shares))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
