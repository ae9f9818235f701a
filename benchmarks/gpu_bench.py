"""oxide on the GPU, side by side with torch, a raw cuda.core launch, Triton and numba-cuda.

Run on a CUDA machine: `python benchmarks/gpu_bench.py [--report PATH]` (about 2-3
minutes). Prints a table and writes docs/performance.md (or PATH). Sections:

  (a) vecadd f32, 2^28 elements: GB/s counting 3 arrays x 4 bytes x n
  (b) launch overhead of an empty kernel taking one torch tensor: us per launch,
      median over rounds of back-to-back launches, candidates interleaved per round
  (c) first call in a fresh process: empty compile cache, then a warm one
  (d) fp32 SIMT GEMM 4096^3: oxide (register-blocked, shared memory / plain) vs
      torch.matmul with TF32 off, TFLOP/s

Each section runs in its own try/except: a failure prints and leaves "error" in the
table, never stops the run. Competitors that are missing are skipped.
"""

from __future__ import annotations

import datetime
import importlib
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import oxide as ox  # noqa: E402
from oxide import DisjointSlice, Slice, f32, thread  # noqa: E402

Row = tuple[str, str, str, str]  # section, what, figure, note
rows: list[Row] = []


def row(section: str, what: str, figure: str, note: str = "") -> None:
    rows.append((section, what, figure, note))
    print(f"  {what:<44} {figure:>16}  {note}", flush=True)


def section(name: str, fn: Callable[[], None]) -> None:
    print(f"\n== {name}", flush=True)
    start = time.perf_counter()
    try:
        fn()
    except Exception as exc:  # one failing section must not stop the others
        traceback.print_exc()
        row(name[1], "section failed", "error", f"{type(exc).__name__}: {exc}"[:160])
    print(f"   ({time.perf_counter() - start:.1f} s)", flush=True)


def optional(name: str) -> Any:
    """Import a competitor, or None (with the reason printed) when it is not usable."""
    try:
        return importlib.import_module(name)
    except Exception as exc:  # missing, or broken against this NumPy (numba-cuda)
        print(f"  ({name} unavailable: {type(exc).__name__}: {str(exc)[:120]})")
        return None


def sync() -> None:
    torch.cuda.synchronize()


# ---------------------------------------------------------------------------
# Kernels


@ox.kernel
def vecadd(a: Slice[f32], b: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] + b[i]


@ox.kernel
def empty(x: Slice[f32]):
    pass


@ox.kernel
def empty2(x: Slice[f32]):
    pass


@ox.kernel
def empty3(x: Slice[f32]):
    pass


def seconds_per_call(fn: Callable[[], None], calls: int, rounds: int,
                     include_sync: bool) -> float:
    """Median over `rounds` of (time for `calls` back-to-back calls) / calls."""
    fn()
    sync()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        if include_sync:
            sync()
        samples.append((time.perf_counter() - start) / calls)
        if not include_sync:
            sync()
    return statistics.median(samples)


def interleaved(candidates: dict[str, Callable[[], None]], calls: int,
                rounds: int) -> dict[str, float]:
    """Seconds per call of each candidate: the median over `rounds` rounds, where each
    round times `calls` back-to-back calls of every candidate in turn (synchronized
    between them, untimed). Interleaving spreads the host's drift (clocks, other load)
    over all candidates alike instead of favouring whichever ran in a quiet moment."""
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, fn in candidates.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            samples[name].append((time.perf_counter() - start) / calls)
            sync()
    return {name: statistics.median(times) for name, times in samples.items()}


# ---------------------------------------------------------------------------
# (a) bandwidth


def bench_vecadd() -> None:
    n = 1 << 28
    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    nbytes = 3 * 4 * n
    cfg = ox.LaunchConfig.for_num_elems(n)

    def gbs(t: float) -> str:
        return f"{nbytes / t / 1e9:,.0f} GB/s"

    t_torch = seconds_per_call(lambda: torch.add(a, b, out=c), 10, 5, True)
    row("a", "torch.add", gbs(t_torch), "1.00x")
    t_ox = seconds_per_call(lambda: vecadd[cfg](a, b, c), 10, 5, True)
    ok = bool(torch.equal(c, a + b))
    row("a", "oxide vecadd", gbs(t_ox), f"{t_torch / t_ox:.2f}x torch" + ("" if ok else " WRONG"))
    triton = optional("triton")
    if triton is not None:
        add = _triton_add(triton)
        grid = (triton.cdiv(n, 1024),)
        t_tr = seconds_per_call(lambda: add[grid](a, b, c, n, BLOCK=1024), 10, 5, True)
        row("a", "triton add", gbs(t_tr), f"{t_torch / t_tr:.2f}x torch")


def _triton_add(triton: Any) -> Any:
    tl = importlib.import_module("triton.language")

    @triton.jit
    def add(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(c_ptr + offs, tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs,
                                                                             mask=mask),
                 mask=mask)

    return add


# ---------------------------------------------------------------------------
# (b) launch overhead


def bench_launch_overhead() -> None:
    from oxide.runtime import native_launch
    from oxide.runtime.gpu import gpu_device

    t = torch.zeros(1024, device="cuda")
    cfg = ox.LaunchConfig(grid=1, block=32)
    candidates: dict[str, Callable[[], None]] = {}

    def measure(name: str, fn: Callable[[], None]) -> None:
        fn()  # compiled, loaded and launched once before any timing
        sync()
        candidates[name] = fn

    # Steady state: where llvmlite was not loaded yet (a warm compile cache), launches
    # go through ctypes until WARMUP_LAUNCHES have been made (runtime/native_launch.py).
    for _ in range(native_launch.WARMUP_LAUNCHES + 2):
        ox.launch(empty, cfg, t)
        if empty.__dict__["_oxide_launchers"].last.flavor != "warmup":
            break
    sync()
    launchers = empty.__dict__["_oxide_launchers"]
    flavor = launchers.last.flavor
    if launchers.native is not None:
        flavor = "native binder"
    print(f"  oxide launches through: {flavor} "
          f"{native_launch.unavailable_reason()}".rstrip())
    measure(f"oxide ox.launch(k, cfg, tensor) [{flavor}]", lambda: ox.launch(empty, cfg, t))
    measure(f"oxide k[cfg](tensor) [{flavor}]", lambda: empty[cfg](t))
    # The Python binder alone (runtime/fastpath.py), as before native binders: a third
    # kernel whose native twin is set aside (it stays so while its Python binder launches).
    ox.launch(empty3, cfg, t)
    empty3.__dict__["_oxide_launchers"].native = None
    measure("oxide ox.launch(k, cfg, tensor) [python binder]", lambda: ox.launch(empty3, cfg, t))
    # The same through ctypes, as without llvmlite: a second kernel whose binder was
    # made while the trampoline was off.
    saved = native_launch._built
    native_launch._built = (None, "off for this row")
    try:
        measure("oxide ox.launch(k, cfg, tensor) [ctypes]", lambda: ox.launch(empty2, cfg, t))
    finally:
        native_launch._built = saved
    assert empty2.__dict__["_oxide_launchers"].last.flavor == "ctypes"
    launcher = next(iter(empty.__dict__["_oxide_launchers"].values()))
    if launcher.native is not None:
        native, address, dims = launcher.native, launcher.native_address, cfg.dims
        ptr, n = t.data_ptr(), t.numel()
        measure("oxide's trampoline alone (pack + cuLaunchKernelEx)",
                lambda: native(address, dims, 0, ptr, n))
    launch_ex, params = launcher.launch_ex, launcher.params_address
    launcher.prepare(cfg, 0)  # the config struct the ctypes path would use
    config, function = launcher.config_address, launcher.fptr
    measure("cuLaunchKernelEx through ctypes alone",
            lambda: launch_ex(config, function, params, None))

    core = optional("cuda.core")
    if core is not None:
        dev = core.Device(0)
        dev.set_current()
        ck = empty.compile(Slice[f32], arch=gpu_device(0).arch)
        kern = core.ObjectCode.from_cubin(ck.cubin).get_kernel(ck.name)
        stream = dev.default_stream
        core_cfg = core.LaunchConfig(grid=1, block=32)
        record = torch.zeros(8, dtype=torch.int64, device="cuda")  # never written: no failure
        n64 = np.int64(t.numel())
        err = record.data_ptr()
        measure("raw cuda.core.launch (same cubin)",
                lambda: core.launch(stream, core_cfg, kern, t.data_ptr(), n64, err))
    triton = optional("triton")
    if triton is not None:
        @triton.jit
        def tk(x_ptr):
            pass

        measure("triton", lambda: tk[(1,)](t))
    numba_cuda = optional("numba.cuda")
    if numba_cuda is not None:
        try:
            @numba_cuda.jit
            def nk(x):
                pass

            measure("numba-cuda", lambda: nk[1, 32](t))
        except Exception as exc:
            print(f"  (numba-cuda failed: {type(exc).__name__}: {str(exc)[:120]})")
    results = interleaved(candidates, calls=2000, rounds=21)
    raw = results.get("raw cuda.core.launch (same cubin)")
    for name, secs in results.items():
        note = f"{secs / raw:.2f}x raw cuda.core" if raw else ""
        row("b", name, f"{secs * 1e6:.2f} us", note)


# ---------------------------------------------------------------------------
# (c) first call in a fresh process

OXIDE_FIRST = """
import json, sys, time
import torch
import oxide as ox
from oxide import f32, Slice, DisjointSlice, thread

@ox.kernel
def vecadd(a: Slice[f32], b: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] + b[i]

a = torch.randn(1 << 20, device="cuda"); b = torch.randn_like(a); c = torch.empty_like(a)
from oxide.runtime.gpu import gpu_device
gpu_device(0)  # CUDA context and bindings: not part of the first call's compile-and-load
torch.cuda.synchronize()
start = time.perf_counter()
vecadd[ox.LaunchConfig.for_num_elems(a.numel())](a, b, c)
torch.cuda.synchronize()
first = time.perf_counter() - start
start = time.perf_counter()
vecadd[ox.LaunchConfig.for_num_elems(a.numel())](a, b, c)
torch.cuda.synchronize()
second = time.perf_counter() - start
assert torch.equal(c, a + b)
print(json.dumps({"first": first, "second": second,
                  "heavy": [m for m in ("xdsl", "llvmlite") if m in sys.modules]}))
"""

TRITON_FIRST = """
import json, time
import torch, triton, triton.language as tl

@triton.jit
def add(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(c_ptr + offs, tl.load(a_ptr + offs, mask=m) + tl.load(b_ptr + offs, mask=m), mask=m)

a = torch.randn(1 << 20, device="cuda"); b = torch.randn_like(a); c = torch.empty_like(a)
triton.runtime.driver.active.get_current_device()
torch.cuda.synchronize()
start = time.perf_counter()
add[(triton.cdiv(a.numel(), 1024),)](a, b, c, a.numel(), BLOCK=1024)
torch.cuda.synchronize()
first = time.perf_counter() - start
start = time.perf_counter()
add[(triton.cdiv(a.numel(), 1024),)](a, b, c, a.numel(), BLOCK=1024)
torch.cuda.synchronize()
second = time.perf_counter() - start
assert torch.equal(c, a + b)
print(json.dumps({"first": first, "second": second}))
"""

NUMBA_FIRST = """
import json, time
import torch
from numba import cuda

@cuda.jit
def add(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]

a = torch.randn(1 << 20, device="cuda"); b = torch.randn_like(a); c = torch.empty_like(a)
cuda.current_context()
torch.cuda.synchronize()
start = time.perf_counter()
add[(a.numel() + 255) // 256, 256](a, b, c)
torch.cuda.synchronize()
first = time.perf_counter() - start
start = time.perf_counter()
add[(a.numel() + 255) // 256, 256](a, b, c)
torch.cuda.synchronize()
second = time.perf_counter() - start
assert torch.equal(c, a + b)
print(json.dumps({"first": first, "second": second}))
"""


def run_fresh(code: str, workdir: Path, env: dict[str, str]) -> dict[str, Any]:
    script = workdir / "first_call.py"
    script.write_text(textwrap.dedent(code))
    done = subprocess.run([sys.executable, str(script)], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=240)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr else "failed")
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_first_call() -> None:
    src = str(ROOT / "src")
    path = os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "ox").mkdir()
        env = {"OXIDE_CACHE_DIR": str(work / "cache"), "OXIDE_CACHE": "1", "PYTHONPATH": path}
        cold = run_fresh(OXIDE_FIRST, work / "ox", env)
        row("c", "oxide first call, empty cache", f"{cold['first'] * 1e3:,.1f} ms",
            "compile + load + launch")
        warm = run_fresh(OXIDE_FIRST, work / "ox", env)
        heavy = ",".join(warm["heavy"]) or "none"
        row("c", "oxide first call, warm cache (new process)", f"{warm['first'] * 1e3:,.1f} ms",
            f"imports of xdsl/llvmlite: {heavy}; 2nd call {warm['second'] * 1e3:.2f} ms")
        if optional("triton") is not None:
            (work / "tr").mkdir()
            tenv = {"TRITON_CACHE_DIR": str(work / "triton-cache")}
            cold = run_fresh(TRITON_FIRST, work / "tr", tenv)
            row("c", "triton first call, empty cache", f"{cold['first'] * 1e3:,.1f} ms")
            warm = run_fresh(TRITON_FIRST, work / "tr", tenv)
            row("c", "triton first call, warm cache (new process)",
                f"{warm['first'] * 1e3:,.1f} ms")
        try:
            (work / "nb").mkdir()
            cold = run_fresh(NUMBA_FIRST, work / "nb", {})
            row("c", "numba-cuda first call (no disk cache)", f"{cold['first'] * 1e3:,.1f} ms")
        except Exception as exc:
            print(f"  (numba-cuda unavailable: {str(exc)[:160]})")


# ---------------------------------------------------------------------------
# (d) GEMM


def bench_gemm() -> None:
    import gemm_kernels as g

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    n = 4096
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    c = torch.empty(n, n, device="cuda")
    flops = 2 * n ** 3

    def tflops(t: float) -> str:
        return f"{flops / t / 1e12:,.1f} TFLOP/s"

    t_torch = seconds_per_call(lambda: torch.matmul(a, b, out=c), 5, 5, True)
    want = c.clone()
    row("d", "torch.matmul (cuBLAS, TF32 off)", tflops(t_torch), "1.00x")
    cfg = g.config(n, n)
    for kernel in (g.sgemm_shared, g.sgemm_regs):
        try:
            c.zero_()
            t_ox = seconds_per_call(lambda k=kernel: k[cfg](a, b, c), 3, 5, True)
            err = float(((c - want).abs().max() / want.abs().max()).item())
            note = f"{t_torch / t_ox:.2f}x torch; max rel err {err:.1e}"
            row("d", f"oxide {kernel.__name__}", tflops(t_ox),
                note + ("" if err < 1e-3 else " WRONG"))
        except Exception as exc:
            traceback.print_exc()
            row("d", f"oxide {kernel.__name__}", "error", f"{type(exc).__name__}: {exc}"[:160])


# ---------------------------------------------------------------------------
# Report


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("oxide-cuda", "torch", "triton", "numba-cuda", "cupy-cuda13x", "cuda-core",
                 "cuda-bindings", "llvmlite", "xdsl", "numpy"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def device_info() -> tuple[str, str]:
    from oxide.runtime import cuda_driver
    from oxide.runtime.gpu import gpu_device

    gpu = gpu_device(0)
    cuda = cuda_driver.driver_version()
    driver = f"CUDA {cuda // 1000}.{cuda % 1000 // 10}"
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=20)
        if smi.returncode == 0 and smi.stdout.strip():
            driver = f"{smi.stdout.strip().splitlines()[0]} ({driver})"
    except (OSError, subprocess.SubprocessError):
        pass
    return f"{gpu.name} ({gpu.arch})", driver



def _code(what: str) -> str:
    """A table cell's text; one holding `k[cfg](t)` goes in backticks (Markdown would
    read it as a link)."""
    return f"`{what}`" if "](" in what else what

def write_report(path: Path, gpu: str, driver: str, seconds: float) -> None:
    lines = [
        "# oxide performance",
        "",
        f"Measured {datetime.date.today().isoformat()} on {gpu}, driver {driver}, by "
        f"`python benchmarks/gpu_bench.py` ({seconds:.0f} s). Ratios matter more than "
        "absolute numbers, which drift from run to run.",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in versions().items()) + ".",
        "",
        "| section | what | result | note |",
        "| --- | --- | ---: | --- |",
    ]
    # `what` holds code like `k[cfg](tensor)`, which Markdown would read as a link
    lines += [f"| {s} | {_code(w)} | {f} | {n} |" for s, w, f, n in rows]
    lines += [
        "",
        "Sections: (a) vecadd f32, 2^28 elements, GB/s counting 3 x 4 bytes per element; "
        "(b) launch overhead of an empty kernel taking one torch tensor, median of 21 rounds "
        "of 2000 back-to-back launches, the candidates interleaved round by round "
        "(synchronized between runs, not timed), all on the same (legacy default) stream; (c) first "
        "call of a vecadd in a fresh process after CUDA is initialized, with an empty "
        "compile cache and then a warm one; (d) fp32 SIMT GEMM 4096^3, TF32 off.",
        "",
    ]
    # The other benchmarks' sections (each under a "## " heading, or the marker comment
    # before the first of them) stay as they are.
    old = path.read_text() if path.exists() else ""
    starts = [old.index(m) + 1 for m in ("\n<!-- ", "\n## ") if m in old]
    rest = old[min(starts):] if starts else ""
    path.write_text("\n".join(lines) + ("\n" + rest if rest else ""))


def main() -> None:
    report = ROOT / "docs" / "performance.md"
    if len(sys.argv) == 3 and sys.argv[1] == "--report":
        report = Path(sys.argv[2])
    start = time.perf_counter()
    gpu, driver = device_info()
    print(f"oxide GPU benchmarks on {gpu}, driver {driver}")
    with ox.device(0):
        section("(a) vecadd f32 2^28", bench_vecadd)
        section("(b) launch overhead", bench_launch_overhead)
        section("(c) first call", bench_first_call)
        section("(d) fp32 GEMM 4096^3", bench_gemm)
    seconds = time.perf_counter() - start
    write_report(report, gpu, driver, seconds)
    print(f"\nwrote {report} ({seconds:.0f} s)")


if __name__ == "__main__":
    main()
