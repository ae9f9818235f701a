"""The `oxide` command: wires each command group's module into one typer app.

Each command imports what it needs when it runs, so `oxide --help` and
`oxide list` stay quick (no compiler, no CUDA import).
"""

from __future__ import annotations

import typer

from oxide.cli import bench, build, cache, doctor, inspect_kernel, new, run, sanitize

app = typer.Typer(
    name="oxide",
    help="Typed Python GPU kernels: run the examples, check the setup, inspect, time and build kernels.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from oxide import __version__

        typer.echo(f"oxide {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print oxide's version and exit.")) -> None:
    """Typed Python GPU kernels: run the examples, check the setup, inspect, time and build kernels."""


app.command("run")(run.run)
app.command("list")(run.list_examples)
app.command("show")(run.show)
app.command("new")(new.new)
app.command("doctor")(doctor.doctor)
app.command("inspect")(inspect_kernel.inspect)
app.command("build")(build.build)
app.command("sanitize")(sanitize.sanitize)
app.command("bench")(bench.bench)
app.add_typer(cache.app, name="cache")


def main() -> None:
    """Console-script entry point (`oxide = "oxide.cli.main:main"`)."""
    app()


if __name__ == "__main__":
    main()
