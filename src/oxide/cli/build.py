"""`oxide build FILE.py -o DIR`: every kernel of a file, compiled ahead of time into a bundle.

Each kernel is built for one signature per `--sig "KERNEL: types"` given for it,
else for the default one (TypeVars as f32, arrays C-contiguous with their
declared rank, Const parameters from `--const NAME=VALUE`); see
`oxide.cli.signatures`. `--arch` lists GPU architectures (each gets a cubin and,
but for `sm_XXa`, its PTX) and `cpu` (object code for this machine's CPU).
`-o NAME.oxb` writes one file instead of a directory. `ox.load_bundle(OUT)` loads
the result without the compiler.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from oxide.cli.loading import kernels_in, load_file
from oxide.cli.signatures import SignatureError, compile_args, parse_consts, parse_types

console = Console(highlight=False, soft_wrap=True)
DEFAULT_ARCHS = "sm_80,sm_90"


def parse_archs(text: str) -> list[str]:
    archs = list(dict.fromkeys(a.strip() for a in text.split(",") if a.strip()))
    bad = [a for a in archs
           if a != "cpu" and not (a.startswith("sm_") and a[3:].rstrip("a").isdigit())]
    if not archs or bad:
        raise typer.BadParameter(f"--arch takes GPU architectures like sm_80,sm_90a, and cpu "
                                 f"for this machine's CPU; got {text!r}")
    return archs


def plan_jobs(kernels: dict[str, Any], sigs: list[str], consts: dict[str, Any]) -> list[Any]:
    """One `aot.Job` per (kernel, signature): the --sig ones, else the default."""
    from oxide.aot import Job

    given: dict[str, list[str]] = {}
    for sig in sigs:
        name, sep, types = sig.partition(":")
        if not sep or name.strip() not in kernels:
            raise SignatureError(f"--sig takes \"KERNEL: types\" with KERNEL one of "
                                 f"{', '.join(kernels)}; got {sig!r}")
        given.setdefault(name.strip(), []).append(types)
    jobs = []
    for name, kernel in kernels.items():
        for types in given.get(name, [None]):
            parsed = parse_types(types) if types is not None else None
            jobs.append(Job(name, kernel, compile_args(kernel, parsed, consts)))
    return jobs


def build(
    file: Annotated[Path, typer.Argument(help="The Python file whose kernels to build.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The bundle directory to write, or "
                                                          "one file: NAME.oxb.")],
    arch: Annotated[str, typer.Option(help="Comma-separated GPU architectures (each gets a "
                                           "cubin, and PTX for newer GPUs), and cpu for "
                                           "this machine's CPU.")]
    = DEFAULT_ARCHS,
    sig: Annotated[list[str] | None, typer.Option(
        help='"KERNEL: types" to build KERNEL for these types (repeatable; replaces the '
             "default signature for that kernel).")] = None,
    const: Annotated[list[str] | None, typer.Option(
        help="NAME=VALUE for Const parameters of that name (repeatable).")] = None,
) -> None:
    """Compile every kernel in FILE ahead of time into a bundle (cubins, PTX, CPU code)."""
    from oxide.aot import build_bundle, is_one_file
    from oxide.errors import OxideError
    from oxide.runtime.bundle import describe_signature

    archs = parse_archs(arch)
    kernels = kernels_in(load_file(file))
    if not kernels:
        console.print(f"[red]error:[/red] {escape(str(file))} defines no @ox.kernel")
        raise typer.Exit(1)
    try:
        jobs = plan_jobs(kernels, sig or [], parse_consts(const or []))
    except SignatureError as exc:
        raise typer.BadParameter(str(exc)) from exc
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    try:
        with Progress(*columns, console=console, transient=True,
                      disable=not console.is_terminal) as progress:
            task = progress.add_task("compiling", total=len(jobs) * len(archs))
            manifest = build_bundle(
                jobs, archs, out, source=str(file),
                progress=lambda step: progress.update(task, advance=1, description=step))
    except OxideError as exc:
        console.print(escape(f"{type(exc).__module__}.{type(exc).__name__}: {exc}"))
        raise typer.Exit(1) from None
    where = str(out) if is_one_file(out) else f"{out}/"
    console.print(f"built {len(jobs)} kernel specialization(s) x {len(archs)} arch(s) "
                  f"({', '.join(archs)}) into {escape(where)}")
    for job in jobs:
        console.print(f"  {escape(job.name)}({escape(describe_signature(job.args))})")
    _constants_note(manifest)
    console.print(f"{'bundle' if is_one_file(out) else 'manifest'}: {escape(str(manifest))}; "
                  f"load it with ox.load_bundle({escape(repr(str(out)))})")


def _constants_note(path: Path) -> None:
    """Which ox.ConstantArrays travel with the bundle, and which still need values."""
    from oxide.runtime.bundle import MANIFEST, load_bundle

    declared = load_bundle(path.parent if path.name == MANIFEST else path
                           ).manifest.get("constants", {})
    for name, data in declared.items():
        shape = "x".join(map(str, data["shape"]))
        state = ("with its values at build time" if data["values"] is not None else
                 f"NOT set at build time: set b.constants[{name!r}] before launching")
        console.print(f"  ConstantArray {escape(name)} ({data['dtype']}[{shape}]), "
                      f"{escape(state)}")
