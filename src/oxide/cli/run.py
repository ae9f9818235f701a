"""`oxide run` and `oxide list`: the shipped examples, or a user's file with a `main()`.

`oxide run FILE.py` imports the file and calls its `main()`, passing the options
its signature accepts (`device`, `arch`, `size`, `out`); the launches inside run
on `--device` either way. `main()` passes only by returning True or None (a NumPy
bool counts; an object with `.passed` is judged by it); anything else fails, with
what it returned: `0`, `np.False_` or a list are not verdicts. A file without `main()` is
an error: oxide cannot invent inputs for its kernels (`oxide inspect` and
`oxide build` compile them without running).
"""

from __future__ import annotations

import inspect
import os
import traceback
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from oxide import examples
from oxide.checked_runs import RunResult, describe_device
from oxide.cli.loading import device_spec, example_source, kernels_in, load_module
from oxide.errors import DeviceError, OxideError
from oxide.runtime.device import device as use_device
from oxide.runtime.device import quiet_cpu_notice

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def list_examples() -> None:
    """List the shipped examples and where their source lives (`oxide show NAME` prints one)."""
    width = max(map(len, examples.NAMES))
    files = {name: example_source(name) for name in examples.NAMES}
    file_width = max(len(f.name) for f in files.values())
    for name in examples.NAMES:
        console.print(f"[bold]{name:<{width}}[/bold]  {files[name].name:<{file_width}}  "
                      f"{escape(examples.summary(name))}")
    folder = files[examples.NAMES[0]].parent
    err_console.print(f"source: {escape(str(folder))}{os.sep}NAME.py; `oxide show NAME` "
                      "prints it, `oxide run NAME` runs it", style="dim")


def show(
    name: Annotated[str, typer.Argument(help="A shipped example (see `oxide list`).")],
) -> None:
    """Print a shipped example's source, to read or to copy as a starting point."""
    file = example_source(name)
    err_console.print(f"# {file}", style="dim")
    print(file.read_text(encoding="utf-8"), end="")


def run(
    target: Annotated[str, typer.Argument(help="A shipped example (see `oxide list`) or a "
                                               "Python file with a main().")],
    device: Annotated[str | None, typer.Option(help="cpu, or a GPU ordinal (0, 1, ...). "
                                                    "Default: GPU 0, else the CPU.")] = None,
    arch: Annotated[str | None, typer.Option(help="Also compile for this GPU architecture "
                                                  "(e.g. sm_90) and check the cubin.")] = None,
    size: Annotated[int | None, typer.Option(help="Problem size (elements, rows, pixels "
                                                  "wide or bodies).", min=1)] = None,
    out: Annotated[Path | None, typer.Option(help="Where to write output (mandelbrot: "
                                                  "a PNG).")] = None,
) -> None:
    """Run an example or FILE.py's main(): prints PASS or FAIL, a time, and the device."""
    module = load_module(target)
    entry = getattr(module, "main", None)
    if not callable(entry):
        kernels = ", ".join(kernels_in(module)) or "none"
        console.print(f"[red]error:[/red] {escape(target)} defines no main() to run "
                      f"(its kernels: {escape(kernels)}); see `oxide inspect` and `oxide build`")
        raise typer.Exit(2)
    options = {"device": device_spec(device), "arch": arch, "size": size, "out": out}
    accepted = inspect.signature(entry).parameters
    ignored = [k for k, v in options.items()
               if v is not None and k not in accepted and k != "device"]
    if ignored:
        console.print(f"[red]error:[/red] {escape(target)}'s main() takes no "
                      f"{', '.join('--' + k for k in ignored)}")
        raise typer.Exit(2)
    # The result line says where the launches ran, `CPU (no CUDA GPU found)` included, so
    # the runtime's own no-GPU notice (on stderr) would say it a second time.
    quiet_cpu_notice()
    try:
        selected = use_device(options["device"])  # checked now: a bad one is a usage error
    except DeviceError as exc:  # --device names no device here
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    dev = None
    try:
        with selected as dev:
            result = entry(**{k: v for k, v in options.items() if k in accepted})
            where = describe_device(dev)
    except OxideError as exc:  # a kernel's diagnostic says all there is to say
        console.print(escape(f"{type(exc).__module__}.{type(exc).__name__}: {exc}"))
        console.print(f"[bold red]FAIL[/bold red] {escape(target)}")
        _ran_on(dev)
        raise typer.Exit(1) from None
    except Exception:  # a bug in the user's code: the traceback is what helps
        console.print(escape(traceback.format_exc()), end="")
        console.print(f"[bold red]FAIL[/bold red] {escape(target)}: raised an exception")
        _ran_on(dev)
        raise typer.Exit(1) from None
    report(target, result, where)


def _ran_on(dev: Any) -> None:
    """The `ran on` line after a failure, where the device is known: it is the only place
    `oxide run` says the launches fell back to the CPU (see quiet_cpu_notice)."""
    if dev is not None:
        console.print(f"  ran on {escape(describe_device(dev))}")


def verdict(result: Any) -> tuple[bool, str]:
    """Whether main()'s return value passes, and why not when it is not a verdict: only
    True and None pass (a bare `return`, a test's `True`, a comparison's `np.True_`).

    Truthiness is not enough: `0`, `np.False_` and lists say nothing about a test having
    passed, and reading them as verdicts printed PASS for failures. An object with a
    `.passed` attribute is judged by that attribute, under the same rule.
    """
    import numpy as np

    if hasattr(result, "passed") and not isinstance(result, (bool, np.bool_)):
        flag = result.passed
        if isinstance(flag, (bool, np.bool_)):
            return bool(flag), ""
        return False, f"its .passed is {_shown(flag)}, not True or False"
    if result is None or isinstance(result, (bool, np.bool_)):
        return result is None or bool(result), ""
    return False, f"{_shown(result, False)} is not a verdict: main() must return True, " \
                  "False or None"


def _shown(value: Any, with_value: bool = True) -> str:
    """`a list` / `1 (an int)`: a value's type, after its (shortened) repr."""
    kind = type(value)
    name = kind.__qualname__ if kind.__module__ == "builtins" else \
        f"{kind.__module__}.{kind.__qualname__}"
    article = "an" if name[0] in "aeiou" else "a"
    if not with_value:
        return f"{article} {name}"
    text = repr(value)
    return f"{text[:77] + '...' if len(text) > 80 else text} ({article} {name})"


def report(target: str, result: Any, where: str) -> None:
    """Prints the PASS/FAIL line and exits 1 on FAIL."""
    if isinstance(result, RunResult):
        passed = result.passed
        line = f"{escape(result.name)}: {escape(result.problem)}; {result.figure}"
        where = result.device
        if result.detail:
            line += f"  ({escape(result.detail)})"
    else:
        passed, why = verdict(result)
        text = repr(result)
        text = text[:77] + "..." if len(text) > 80 else text
        line = f"{escape(target)}: main() returned {escape(text)}"
        if why:
            line += f": {escape(why)}"
    status = "[bold green]PASS[/bold green]" if passed else "[bold red]FAIL[/bold red]"
    console.print(f"{status} {line}")
    console.print(f"  ran on {escape(where)}")
    if not passed:
        raise typer.Exit(1)
