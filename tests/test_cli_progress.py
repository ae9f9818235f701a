"""Progress display of the CLI (issue 16 item 5): a spinner on a terminal during long
compiles in `oxide run`/`oxide bench`, and nothing at all where output is no terminal."""

from __future__ import annotations

import io
import time

from rich.console import Console
from typer.testing import CliRunner

import oxide as ox
from oxide import DisjointSlice, Slice, f32, thread
from oxide.cli.main import app
from oxide.cli.progress import compile_progress, shown_after
from oxide.kernel import Kernel


def fresh_kernel() -> Kernel:
    """A kernel object of its own, so no compile of it is cached in this process."""
    @ox.kernel
    def halve(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[i] * 0.5

    return halve


def terminal() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=True, width=100), buf


def test_a_long_step_shows_a_spinner_on_a_terminal() -> None:
    console, buf = terminal()
    with shown_after(console, "working on it", delay=0.01):
        time.sleep(0.3)
    assert "working on it" in buf.getvalue()


def test_a_quick_step_shows_nothing() -> None:
    console, buf = terminal()
    with shown_after(console, "working on it", delay=5):
        pass
    assert "working on it" not in buf.getvalue()


def test_compiles_show_which_kernel_and_target() -> None:
    console, buf = terminal()
    original = Kernel.compile
    with compile_progress(console, delay=0):
        assert Kernel.compile is not original
        ck = fresh_kernel().compile(Slice[f32], DisjointSlice[f32], target="cpu")
    assert Kernel.compile is original
    assert ck.target == "cpu"
    assert "compiling `halve` for the CPU" in buf.getvalue()


def test_no_terminal_no_progress() -> None:
    buf = io.StringIO()
    console = Console(file=buf)  # not a terminal: piped or captured
    original = Kernel.compile
    with compile_progress(console, delay=0), shown_after(console, "timing", delay=0):
        assert Kernel.compile is original
        fresh_kernel().compile(Slice[f32], DisjointSlice[f32], target="cpu")
    assert buf.getvalue() == ""


def test_oxide_run_output_has_no_progress_when_captured() -> None:
    result = CliRunner().invoke(app, ["run", "saxpy", "--device", "cpu", "--size", "1000"])
    assert result.exit_code == 0, result.output
    assert "compiling" not in result.output
