"""The `oxide` command: wires each command group's module into one typer app.

Each command imports what it needs when it runs, so `oxide --help` and
`oxide list` stay quick (no compiler, no CUDA import).
"""

from __future__ import annotations

import typer

from oxide.cli import build, cache, doctor, inspect_kernel, new, run

app = typer.Typer(
    name="oxide",
    help="Typed Python GPU kernels: run the examples, check the setup, inspect and build kernels.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("run")(run.run)
app.command("list")(run.list_examples)
app.command("show")(run.show)
app.command("new")(new.new)
app.command("doctor")(doctor.doctor)
app.command("inspect")(inspect_kernel.inspect)
app.command("build")(build.build)
app.add_typer(cache.app, name="cache")


def main() -> None:
    """Console-script entry point (`oxide = "oxide.cli.main:main"`)."""
    app()


if __name__ == "__main__":
    main()
