"""The SASS of a cubin, as nvdisasm prints it: for tests that pin what ptxas made of
oxide's PTX where the fault was ptxas's own (a fused instruction, a fence), on any
machine, GPU or not.

nvdisasm comes from PyPI's `nvidia-cuda-nvdisasm` (the `test` extra) or a CUDA toolkit;
`sass_of_ptx` also needs a ptxas binary (a CUDA toolkit's), since nvJitLink's own ptxas
may be another release than the GPU host's driver. Each returns None where a tool is
missing, and the tests skip. A developer's tool, not oxide API.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path


def _tool(name: str) -> str | None:
    """`name` on PATH, in the `nvidia` wheels' `cu13/bin`, or under CUDA_HOME."""
    found = shutil.which(name)
    if found:
        return found
    try:
        import nvidia  # the namespace package of NVIDIA's wheels
    except ImportError:
        nvidia = None
    roots = [Path(p) / "cu13" / "bin" for p in getattr(nvidia, "__path__", [])]
    roots.append(Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin")
    for root in roots:
        candidate = root / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def sass(cubin: bytes) -> str | None:
    """nvdisasm's listing of `cubin` (`-c`: the code sections), or None without nvdisasm."""
    tool = _tool("nvdisasm")
    if tool is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        done = subprocess.run([tool, "-c", str(path)], capture_output=True, text=True,
                              timeout=120)
    if done.returncode:
        raise RuntimeError(f"nvdisasm failed: {done.stderr.strip()[:500]}")
    return done.stdout


def sass_of_ptx(ptx: str, arch: str) -> str | None:
    """The SASS ptxas -O3 makes of `ptx` for `arch` as a whole program (as the driver's JIT
    compiles it), or None without ptxas or nvdisasm."""
    ptxas = _tool("ptxas")
    if ptxas is None or _tool("nvdisasm") is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "kernel.ptx", Path(tmp) / "kernel.cubin"
        src.write_text(ptx)
        done = subprocess.run([ptxas, "-O3", f"-arch={arch}", str(src), "-o", str(out)],
                              capture_output=True, text=True, timeout=300)
        if done.returncode:
            raise RuntimeError(f"ptxas failed: {done.stderr.strip()[:500]}")
        return sass(out.read_bytes())
