"""`oxide sanitize FILE.py [ARGS...]`: run a script under NVIDIA's compute-sanitizer.

compute-sanitizer (memcheck, racecheck, initcheck, synccheck) watches every kernel
the script launches, oxide's included: it reports out-of-bounds and misaligned
accesses, shared-memory races and uninitialized reads that escaped oxide's own
checks (an `unsafe` block, `checks=False`). It ships with the CUDA Toolkit, not with
pip, so this command finds it (`$OXIDE_SANITIZER`, `PATH`, `$CUDA_HOME/bin`,
/usr/local/cuda/bin) or says how to get it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
INSTALL_HINT = (
    "compute-sanitizer was not found. It comes with the CUDA Toolkit "
    "(https://developer.nvidia.com/cuda-downloads), in its bin/ directory; install the "
    "toolkit (or only its compute-sanitizer component), then put that directory on PATH, "
    "set CUDA_HOME, or point OXIDE_SANITIZER at the executable.")


def find_sanitizer() -> str | None:
    """The compute-sanitizer executable to use, or None."""
    explicit = os.environ.get("OXIDE_SANITIZER")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "compute-sanitizer").is_file():
            return str(Path(root) / "bin" / "compute-sanitizer")
    return None


def sanitize(
    file: Annotated[Path, typer.Argument(help="The Python script to run (its __main__ "
                                              "block runs).")],
    args: Annotated[list[str] | None, typer.Argument(help="Arguments for the script.")] = None,
    tool: Annotated[str, typer.Option(help="memcheck | racecheck | initcheck | synccheck")
                    ] = "memcheck",
) -> None:
    """Run FILE.py under compute-sanitizer, which checks every kernel it launches on the GPU."""
    if tool not in TOOLS:
        typer.echo(f"oxide sanitize: --tool must be one of {', '.join(TOOLS)}, not {tool!r}",
                   err=True)
        raise typer.Exit(2)
    if not file.is_file():
        typer.echo(f"oxide sanitize: no file {file}", err=True)
        raise typer.Exit(2)
    exe = find_sanitizer()
    if exe is None:
        typer.echo(f"oxide sanitize: {INSTALL_HINT}", err=True)
        raise typer.Exit(2)
    cmd = [exe, "--tool", tool, "--error-exitcode", "1", sys.executable, str(file), *(args or [])]
    typer.echo(f"oxide sanitize: {' '.join(cmd)}", err=True)
    raise typer.Exit(subprocess.call(cmd))
