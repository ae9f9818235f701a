"""The progress line (issue 16 item 5, issue 29 item 4): a compile or an autotune that runs
for more than a second shows a live, animated line on a terminal's stderr, in scripts as
under `oxide run`, erased when done; nothing where stderr is no terminal, nor with
`OXIDE_PROGRESS=0` (oxide/progress.py)."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import oxide as ox
from oxide import DisjointSlice, Slice, f32, progress, thread
from oxide.cli.main import app
from oxide.kernel import Kernel

CLEAR = "\r\x1b[2K"
# subprocesses import this oxide, whatever their working directory
SRC_ENV = {"PYTHONPATH": os.pathsep.join([str(Path(ox.__file__).resolve().parent.parent),
                                          os.environ.get("PYTHONPATH", "")])}


class Terminal(io.StringIO):
    """A stream that says it is a terminal, and keeps what is written to it."""

    def isatty(self) -> bool:
        return True


def fresh_kernel() -> Kernel:
    """A kernel object of its own, so no compile of it is cached in this process."""
    @ox.kernel
    def halve(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[i] * 0.5

    return halve


def frames_in(text: str) -> set[str]:
    return {line[0] for line in text.split(CLEAR) if line and line[0] in progress.FRAMES}


def test_a_long_step_animates_then_is_erased() -> None:
    out = Terminal()
    with progress.activity("working on it", out, delay=0.0):
        time.sleep(0.6)
    text = out.getvalue()
    assert "working on it" in text
    assert len(frames_in(text)) >= 3  # a thread ticks: the spinner turns, not one frame
    assert text.endswith(CLEAR)  # erased before the block's caller goes on


def test_the_line_shows_the_seconds_elapsed() -> None:
    out = Terminal()
    with progress.activity("step", out, delay=0.0):
        time.sleep(0.35)
    assert " s" in out.getvalue().split(CLEAR)[-2]
    assert out.getvalue().split(CLEAR)[-2].split("  ")[-1].endswith(" s")


def test_a_quick_step_shows_nothing() -> None:
    out = Terminal()
    with progress.activity("working on it", out, delay=5):
        time.sleep(0.2)
    assert out.getvalue() == ""


def test_no_terminal_no_progress() -> None:
    out = io.StringIO()  # piped or captured
    with progress.activity("working on it", out, delay=0.0):
        time.sleep(0.3)
    assert out.getvalue() == ""


def test_oxide_progress_0_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OXIDE_PROGRESS", "0")
    out = Terminal()
    with progress.activity("working on it", out, delay=0.0):
        time.sleep(0.3)
    assert out.getvalue() == ""
    assert not progress.enabled(out)


def test_nested_steps_share_one_line_and_a_repeated_text_shows_once() -> None:
    out = Terminal()
    with progress.activity("autotuning `k`", out, delay=0.0) as outer:
        outer.text = "autotuning `k`: config 2 of 3"
        with progress.activity("compiling `k` for the CPU", out), \
                progress.activity("compiling `k` for the CPU", out):
            time.sleep(0.35)
        time.sleep(0.25)
    lines = [line for line in out.getvalue().split(CLEAR) if line]
    assert any("autotuning `k`: config 2 of 3 · compiling `k` for the CPU  " in line
               and line.count("compiling") == 1 for line in lines)
    assert "compiling" not in lines[-1]  # the inner step ended: the line says so


def test_a_compile_in_a_script_shows_the_kernel_and_target(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    out = Terminal()
    monkeypatch.setattr(sys, "stderr", out)
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    x = np.ones(64, np.float32)
    with ox.device("cpu"):
        fresh_kernel()[1, 64](x, np.zeros_like(x))
    assert "compiling `halve` for the CPU" in out.getvalue()
    assert out.getvalue().endswith(CLEAR)


def test_a_gpu_compile_names_its_architecture(monkeypatch: pytest.MonkeyPatch) -> None:
    out = Terminal()
    monkeypatch.setattr(sys, "stderr", out)
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    ck = fresh_kernel().compile(Slice[f32], DisjointSlice[f32], arch="sm_90")
    assert ck.cubin  # the lazy stages (PTX, cubin) are compiles too
    assert "compiling `halve` for sm_90" in out.getvalue()


def test_oxide_run_output_has_no_progress_when_captured() -> None:
    result = CliRunner().invoke(app, ["run", "saxpy", "--device", "cpu", "--size", "1000"])
    assert result.exit_code == 0, result.output
    assert "compiling" not in result.output


# -- on a real terminal: a pty ------------------------------------------------------------------


def run_on_a_terminal(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
    """Run `args` with stdout and stderr on a pty, as in a terminal; (exit code, output)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL,
                            env={**os.environ, **SRC_ENV, **env}, cwd=cwd)
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the pty
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(timeout=60), b"".join(chunks).decode("utf-8", "replace")


def test_a_script_on_a_terminal_shows_a_turning_line(tmp_path: Path) -> None:
    script = tmp_path / "slow.py"
    script.write_text(textwrap.dedent("""
        import time
        from oxide import progress

        progress.DELAY_S = 0.2
        with progress.activity("a slow step"):
            time.sleep(1.0)
        print("done")
    """))
    code, output = run_on_a_terminal([sys.executable, str(script)], {}, tmp_path)
    assert code == 0, output
    assert "a slow step" in output
    assert len(frames_in(output)) >= 4
    before_done = output[:output.index("done")]
    assert before_done.endswith(CLEAR)  # erased before the script's own output


def test_oxide_run_on_a_terminal_shows_a_tile_kernels_compile(tmp_path: Path) -> None:
    """`tile_matmul` compiled without any progress showing: its compile ran outside what
    the CLI's spinner watched. The line now covers every compile, in the CLI as well (the
    command runs with a delay of 0.05 s: this compile takes less than the usual second)."""
    cli = ("import sys; from oxide import progress; progress.DELAY_S = 0.05; "
           "from oxide.cli.main import main; sys.argv[0] = 'oxide'; main()")
    code, output = run_on_a_terminal(
        [sys.executable, "-c", cli, "run", "tile_matmul", "--device", "cpu", "--size", "64"],
        {"OXIDE_CACHE": "0"}, tmp_path)
    assert code == 0, output
    assert "compiling `tile_matmul` for the CPU" in output
    assert len(frames_in(output)) >= 2  # it turns (a compile of about 0.5 s here)
    assert "PASS" in output
