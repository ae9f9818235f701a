"""`oxide inspect FILE.py::KERNEL`: print one compile stage of one specialization.

`oxide inspect vecadd` (a bare file or example) takes the kernel named after it, else
its only kernel. Stages: `ir` (oxide IR), `llvm` (optimized LLVM IR), `ptx`, `sass` (the cubin
disassembled by `cuobjdump` or `nvdisasm`, found on PATH, under $CUDA_HOME/bin,
or in the `nvidia-cuda-nvdisasm` wheel). `--arch cpu` compiles for the CPU
instead (stages `ir` and `llvm`). Types come from `--types`, else from the
annotations (see `oxide.cli.signatures`).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from oxide.cli.loading import load_kernel
from oxide.cli.signatures import SignatureError, compile_args, parse_consts, parse_types

err_console = Console(stderr=True, highlight=False, soft_wrap=True)

STAGES = ("ir", "llvm", "ptx", "sass")


def find_sass_tool() -> list[str] | None:
    """The command that disassembles a cubin file (its path is appended), or None."""
    dirs = [os.path.join(os.environ[v], "bin") for v in ("CUDA_HOME", "CUDA_PATH")
            if os.environ.get(v)]
    dirs += [d for p in sys.path for d in glob.glob(os.path.join(p, "nvidia", "cu*", "bin"))]
    for tool, flags in (("cuobjdump", ["-sass"]), ("nvdisasm", ["-c"])):
        found = shutil.which(tool) or next(
            (os.path.join(d, tool) for d in dirs if os.access(os.path.join(d, tool), os.X_OK)),
            None)
        if found:
            return [found, *flags]
    return None


def sass(ck: Any) -> str:
    """The cubin's SASS; typer.Exit(1) with the way to get a disassembler when there is none."""
    tool = find_sass_tool()
    if tool is None:
        err_console.print(
            "[red]error:[/red] SASS needs `cuobjdump` or `nvdisasm`, and neither was found "
            "(PATH, $CUDA_HOME/bin, the nvidia wheels)\n"
            "  fix: pip install nvidia-cuda-nvdisasm, or install a CUDA toolkit and put its "
            "bin/ on PATH\n  the PTX (`--stage ptx`) needs neither")
        raise typer.Exit(1)
    with tempfile.TemporaryDirectory(prefix="oxide-sass-") as tmp:
        path = os.path.join(tmp, f"{ck.name}.cubin")
        with open(path, "wb") as f:
            f.write(ck.cubin)
        done = subprocess.run([*tool, path], capture_output=True, text=True, check=False)
    if done.returncode:
        err_console.print(f"[red]error:[/red] {escape(' '.join(tool))} failed:\n"
                          f"{escape(done.stderr)}")
        raise typer.Exit(1)
    return done.stdout


def inspect(
    target: Annotated[str, typer.Argument(help="FILE.py::KERNEL, or EXAMPLE::KERNEL for a "
                                               "shipped example (vecadd::vecadd). A bare "
                                               "FILE.py or EXAMPLE takes its kernel of the "
                                               "same name, else its only one.")],
    stage: Annotated[str, typer.Option(help="ir | llvm | ptx | sass")] = "ptx",
    arch: Annotated[str, typer.Option(help="GPU architecture (sm_80, sm_90, sm_90a...), or "
                                           "cpu for the host target.")] = "sm_90",
    types: Annotated[str | None, typer.Option(
        help='One type per parameter, e.g. "Slice[f32], f32, DisjointSlice[f32]" (a Const '
             "parameter takes a value). Default: from the annotations, f32 for TypeVars.")
    ] = None,
    const: Annotated[list[str] | None, typer.Option(
        help="NAME=VALUE for a Const parameter; repeat for several.")] = None,
) -> None:
    """Print a kernel's oxide IR, LLVM IR, PTX or SASS for one specialization."""
    if stage not in STAGES:
        raise typer.BadParameter(f"--stage is one of {', '.join(STAGES)}, not {stage!r}")
    if arch == "cpu" and stage in ("ptx", "sass"):
        raise typer.BadParameter(f"--stage {stage} needs a GPU --arch (e.g. sm_90); "
                                 "the CPU target has ir and llvm")
    kernel = load_kernel(target)
    try:
        args = compile_args(kernel, parse_types(types) if types else None,
                            parse_consts(const or []))
    except SignatureError as exc:
        raise typer.BadParameter(str(exc)) from exc
    from oxide.errors import OxideError

    try:
        ck = kernel.compile(*args, arch=arch)
        text = sass(ck) if stage == "sass" else getattr(ck, stage)
    except OxideError as exc:
        err_console.print(escape(f"{type(exc).__module__}.{type(exc).__name__}: {exc}"))
        raise typer.Exit(1) from None
    print(text.rstrip("\n"))
