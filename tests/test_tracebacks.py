"""A diagnostic in a plain script comes after the user's frames only (issue 29, item 2).

`python script.py` printed 13 to 74 frames of oxide's runtime and compiler above a compile
error's diagnostic. The public entry points now drop oxide's frames from the errors they
raise (oxide/tracebacks.py); `OXIDE_TRACEBACK=full` keeps them. Each case below is a
script run as users run one, in a fresh process on the CPU, ending in an uncaught error.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import oxide as ox
from oxide import tracebacks

PACKAGE = Path(ox.__file__).resolve().parent

PRELUDE = """\
import numpy as np
import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, thread, tile

x = np.ones(10, np.float32)

@ox.kernel
def shifted(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    out[i + 1] = x[i]

@ox.kernel
def reads_past(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i + 1]

@tile.kernel
def tile_bad(a: Slice[f32], out: DisjointSlice[f32], B: Const[int]):
    i = tile.bid(0)
    tile.store(out, (i + 1,), tile.load(a, (i,), (B,)))

def helper():
    shifted[1, 32](x, np.zeros_like(x))   # the user's own frame, between script and oxide
"""

# case -> (the script's last lines, the error printed, the user's line shown last)
CASES = {
    "launch": ("shifted[1, 32](x, np.zeros_like(x))", "oxide.SafetyError",
               "shifted[1, 32](x, np.zeros_like(x))"),
    "nested": ("helper()", "oxide.SafetyError", "shifted[1, 32](x, np.zeros_like(x))"),
    "ox_launch": ("ox.launch(shifted, ox.LaunchConfig(grid=1, block=32), x, np.zeros_like(x))",
                  "oxide.SafetyError", "ox.launch(shifted"),
    "compile": ("shifted.compile(Slice[f32], DisjointSlice[f32], target='cpu')",
                "oxide.SafetyError", "shifted.compile("),
    "tile": ("tile_bad[4](x, np.zeros_like(x), 4)", "oxide.SafetyError", "tile_bad[4]("),
    "decorator": ("@ox.kernel(max_threads=4096)\ndef k(x: Slice[f32]):\n    pass",
                  "oxide.KernelTypeError", "@ox.kernel(max_threads=4096)"),
    "index": ("reads_past[1, 32](x, np.zeros_like(x))", "oxide.KernelIndexError",
              "reads_past[1, 32]("),
    "autotune": ("tuned = ox.autotune(configs=[ox.Config(B=4), ox.Config(B=8)])(tile_bad)\n"
                 "tuned[2](x, np.zeros_like(x))", "oxide.SafetyError", "tuned[2]("),
    "do_bench": ("ox.testing.do_bench(lambda: shifted[1, 32](x, np.zeros_like(x)))",
                 "oxide.SafetyError", "ox.testing.do_bench(lambda: shifted[1, 32]"),
}


def run_script(tmp_path: Path, case: str, **env: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / f"user_{case}.py"
    script.write_text(PRELUDE + "\n" + textwrap.dedent(CASES[case][0]) + "\n")
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "OXIDE_FORCE_CPU": "1",
                                            "PYTHONPATH": os.pathsep.join(
                                                [str(PACKAGE.parent),
                                                 os.environ.get("PYTHONPATH", "")]), **env})


def frame_files(stderr: str) -> list[Path]:
    return [Path(f).resolve() for f in re.findall(r'^  File "([^"]+)", line \d+', stderr, re.M)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_script_shows_its_own_frames_and_the_diagnostic(case: str, tmp_path: Path) -> None:
    done = run_script(tmp_path, case)
    _, error, last_line = CASES[case]
    assert done.returncode == 1
    err = done.stderr
    assert "Traceback (most recent call last):" in err
    files = frame_files(err)
    assert files, err
    assert all(f == (tmp_path / f"user_{case}.py").resolve() for f in files), err
    # the last frame shown is the user's line that called oxide, then the diagnostic
    tail = err[err.rindex('  File "'):].splitlines()
    assert last_line in tail[1], err
    after = [line for line in tail[2:] if line.strip(" ^~") != ""]  # no caret lines
    assert after[0].startswith(f"{error}: "), err


@pytest.mark.parametrize("case", ["launch", "decorator"])
def test_oxide_traceback_full_keeps_oxides_frames(case: str, tmp_path: Path) -> None:
    done = run_script(tmp_path, case, OXIDE_TRACEBACK="full")
    files = frame_files(done.stderr)
    assert any(f.is_relative_to(PACKAGE) for f in files), done.stderr
    assert CASES[case][1] in done.stderr


def _raise_through(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:  # noqa: BLE001 - the test's own exception
        return caught


def test_internal_compiler_errors_keep_every_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OXIDE_TRACEBACK", raising=False)
    bug = _raise_through(ox.InternalCompilerError("oxide's bug"))
    before = bug.__traceback__
    tracebacks.user_frames_only(bug)
    assert bug.__traceback__ is before and before is not None


def test_frames_of_oxide_and_of_its_chained_errors_go(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OXIDE_TRACEBACK", raising=False)
    cause = _raise_through(ValueError("inside"))
    err = _raise_through(ox.LaunchError("outside"))
    err.__cause__ = cause
    # this test's frames are the user's: they stay
    tracebacks.user_frames_only(err)
    assert err.__traceback__ is not None and cause.__traceback__ is not None
    assert tracebacks.is_internal(str(PACKAGE / "runtime" / "launch.py"))
    assert not tracebacks.is_internal(str(PACKAGE / "examples" / "vecadd.py"))
    assert not tracebacks.is_internal(__file__)
