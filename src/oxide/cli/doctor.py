"""`oxide doctor`: checks every piece oxide needs, and says how to fix what is missing.

Checks are graded by what their failure costs: `fail` means kernels cannot run
even on the CPU (the only case with a nonzero exit), `warn` means the GPU path
is unavailable and launches fall back to the CPU, `ok` is fine.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

import typer
from rich.console import Console
from rich.markup import escape

console = Console(highlight=False, soft_wrap=True)

PACKAGES = (  # (distribution, needed for: "cpu" if the CPU path needs it, else "gpu")
    ("oxide-cuda", "cpu"), ("numpy", "cpu"), ("llvmlite", "cpu"), ("xdsl", "cpu"),
    ("cuda-core", "gpu"), ("cuda-bindings", "gpu"), ("cuda-pathfinder", "gpu"),
    ("nvidia-nvjitlink", "gpu"), ("nvidia-nvvm", "gpu"),
)

# The smallest kernel PTX: nvJitLink assembling it proves the linker works for an arch.
TINY_PTX = """.version 8.0
.target {arch}
.address_size 64
.visible .entry oxide_doctor() {{ ret; }}
"""


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, the outcome, and the fix when not ok."""

    name: str
    status: str  # "ok", "warn" or "fail"
    detail: str
    fix: str = ""


def ok(name: str, detail: str) -> Check:
    return Check(name, "ok", detail)


def guarded(name: str, status: str, fix: str, probe: Callable[[], str]) -> Check:
    """Runs `probe`; its text is the ok detail, and an exception becomes a `status` check."""
    try:
        return ok(name, probe())
    except Exception as exc:  # every failure is a finding to report, not a crash
        return Check(name, status, f"{type(exc).__name__}: {exc}".splitlines()[0], fix)


def check_python() -> Check:
    """Which interpreter: the usual surprise is a different one from the user's venv."""
    version = ".".join(map(str, sys.version_info[:3]))
    return ok("python", f"{version} ({sys.executable})")


def check_packages() -> list[Check]:
    out = []
    for dist, need in PACKAGES:
        try:
            out.append(ok(dist, importlib.metadata.version(dist)))
        except importlib.metadata.PackageNotFoundError:
            if dist == "oxide-cuda":  # imported from a source tree (PYTHONPATH=src)
                import oxide

                out.append(ok(dist, f"{oxide.__version__} from source ({oxide.__path__[0]})"))
                continue
            status = "fail" if need == "cpu" else "warn"
            out.append(Check(dist, status, "not installed", f"pip install {dist}"))
    return out


def probe_host_target() -> str:
    from oxide.codegen.llvm import binding

    llvm = binding()
    triple = llvm.get_process_triple()
    llvm.Target.from_triple(triple).create_target_machine()
    return f"{triple} (kernels compile to host code)"


def probe_launch_trampoline() -> str:
    """The native launch trampoline builds (else GPU launches keep the slower ctypes call)."""
    from oxide.runtime import native_launch

    if native_launch.trampoline() is None:
        raise RuntimeError(native_launch.unavailable_reason())
    return "JIT-compiled (GPU relaunches skip ctypes)"


def probe_nvptx() -> str:
    from oxide.codegen.llvm import nvptx_machine

    nvptx_machine("sm_90")
    return "nvptx64-nvidia-cuda, sm_90 target machine created"


def probe_libdevice() -> str:
    from oxide.codegen.toolchain import find_libdevice

    return find_libdevice()


def probe_nvjitlink() -> str:
    from oxide.codegen.nvjitlink import ptx_to_cubin
    from oxide.codegen.toolchain import find_nvjitlink

    cubin = ptx_to_cubin(TINY_PTX.format(arch="sm_90"), "sm_90", "oxide_doctor")
    return f"{find_nvjitlink()} (assembled PTX for sm_90: {len(cubin)} bytes)"


def check_gpus() -> list[Check]:
    """The driver and each GPU; no driver is a warning: launches then run on the CPU."""
    if os.environ.get("OXIDE_FORCE_CPU") == "1":
        return [Check("cuda driver", "warn", "OXIDE_FORCE_CPU=1: GPUs are ignored",
                      "unset OXIDE_FORCE_CPU to use the GPU")]
    try:
        from cuda.bindings import driver

        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return [Check("cuda driver", "warn", f"cuInit failed: {err.name}",
                          "install the NVIDIA driver (and check `nvidia-smi`); "
                          "until then kernels run on the CPU")]
        _, version = driver.cuDriverGetVersion()
        _, count = driver.cuDeviceGetCount()
    except Exception as exc:  # no libcuda.so: the common case on a machine without a GPU
        return [Check("cuda driver", "warn", f"not found ({type(exc).__name__}: {exc})",
                      "on a machine with an NVIDIA GPU, install its driver; "
                      "without one, kernels run on the CPU")]
    out = [ok("cuda driver", f"CUDA {version // 1000}.{version % 1000 // 10}")]
    if count == 0:
        out.append(Check("gpus", "warn", "the driver sees no GPU",
                         "check `nvidia-smi` and CUDA_VISIBLE_DEVICES"))
    for index in range(count):
        out.append(guarded(f"gpu {index}", "warn", "check `nvidia-smi`",
                           lambda index=index: _describe_gpu(index)))
    return out


def _describe_gpu(index: int) -> str:
    """Opens the device as launches do (primary context), so a broken one shows here."""
    from oxide.runtime.gpu import gpu_device

    gpu = gpu_device(index)
    return f"{gpu.name}, compute capability {gpu.arch[3:-1]}.{gpu.arch[-1]} ({gpu.arch})"


def probe_cache() -> str:
    from oxide.runtime.cache import cache_dir

    path = cache_dir()
    if path is None:
        return "off (OXIDE_CACHE=0): every process compiles its kernels again"
    path.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path, prefix=".doctor-"):
        pass
    return f"{path} (writable)"


def probe_cpu_launch() -> str:
    """The end-to-end proof: a kernel compiles for the host and runs on the CPU."""
    from oxide.examples import scale

    result = scale.main(device="cpu", size=1000)
    if not result.passed:
        raise RuntimeError(f"the scale kernel ran on the CPU but computed wrong values: {result}")
    return "the scale example compiled and ran on the CPU: PASS"


def run_checks() -> list[Check]:
    checks = [check_python(), *check_packages()]
    checks.append(guarded("llvm host target", "fail", "reinstall llvmlite "
                          "(pip install --force-reinstall 'llvmlite>=0.50')", probe_host_target))
    checks.append(guarded("llvm nvptx target", "warn", "pip install 'llvmlite>=0.50' "
                          "(its LLVM includes NVPTX)", probe_nvptx))
    checks.append(guarded("launch trampoline", "warn", "GPU launches still work, through "
                          "ctypes, ~1 us slower each; report a bug with this line",
                          probe_launch_trampoline))
    checks.append(guarded("libdevice", "warn", "pip install nvidia-nvvm, or set CUDA_HOME to a "
                          "CUDA toolkit (needed for ox.math on the GPU)", probe_libdevice))
    checks.append(guarded("nvjitlink", "warn", "pip install nvidia-nvjitlink, or set CUDA_HOME "
                          "to a CUDA toolkit (needed to turn PTX into cubins)", probe_nvjitlink))
    checks += check_gpus()
    checks.append(guarded("cache", "warn", "set OXIDE_CACHE_DIR to a writable directory "
                          "(compiles still work; nothing is reused across runs)", probe_cache))
    checks.append(guarded("cpu launch", "fail", "see the failures above; report a bug if none",
                          probe_cpu_launch))
    return checks


STYLE = {"ok": "[green]ok[/green]  ", "warn": "[yellow]warn[/yellow]", "fail": "[red]fail[/red]"}


def verdict(checks: list[Check]) -> tuple[str, int]:
    """The summary line and the exit code: 1 only if kernels cannot even run on the CPU."""
    if any(c.status == "fail" for c in checks):
        return "[red]oxide cannot run kernels on this machine: fix the failures above[/red]", 1
    gpus = [c for c in checks if c.name.startswith("gpu ") and c.status == "ok"]
    gpu_path = all(c.status == "ok" for c in checks
                   if c.name in ("llvm nvptx target", "nvjitlink", "cuda driver"))
    if gpus and gpu_path:
        return f"[green]ready: kernels run on {len(gpus)} GPU(s) and on the CPU[/green]", 0
    return ("[yellow]ready on the CPU: launches fall back to the CPU (no usable GPU); "
            "the warnings above say what the GPU path lacks[/yellow]", 0)


def doctor() -> None:
    """Check Python, packages, LLVM's NVPTX target, libdevice, nvJitLink, the driver, the
    GPUs and the cache; print the fix for each problem."""
    checks = run_checks()
    width = max(len(c.name) for c in checks)
    for c in checks:
        console.print(f"{STYLE[c.status]}  {c.name:<{width}}  {escape(c.detail)}")
        if c.fix:
            console.print(f"      {'':<{width}}  [dim]fix:[/dim] {escape(c.fix)}")
    summary, code = verdict(checks)
    console.print(summary)
    raise typer.Exit(code)

