"""What a newcomer meets first (issue 16, items 1 and 6): `oxide list` and `oxide show`,
a mistyped example name, `oxide inspect EXAMPLE`, the no-GPU notice said once,
`DeviceArray.copy_to_host()` and `ox.launch(..., device=)`."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import oxide as ox
from oxide import examples
from oxide.cli.main import app

runner = CliRunner()
EXAMPLES_DIR = Path(examples.__file__).parent
CPU_ENV = {**os.environ, "OXIDE_FORCE_CPU": "1"}


def oxide(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The command as users run it, in a fresh process without a GPU."""
    return subprocess.run([sys.executable, "-m", "oxide", *args], cwd=cwd, env=CPU_ENV,
                          capture_output=True, text=True, timeout=300, check=False)


def test_list_says_where_each_example_lives() -> None:
    done = oxide("list")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == list(examples.NAMES)
    for name, line in zip(examples.NAMES, lines, strict=True):
        assert line.split()[1] == f"{name}.py"
        assert (EXAMPLES_DIR / f"{name}.py").is_file()
    assert str(EXAMPLES_DIR) in done.stderr
    assert "oxide show NAME" in done.stderr


@pytest.mark.parametrize("name", examples.NAMES)
def test_show_prints_the_example_source_exactly(name: str) -> None:
    result = runner.invoke(app, ["show", name])
    assert result.exit_code == 0, result.output
    assert result.stdout == (EXAMPLES_DIR / f"{name}.py").read_text(encoding="utf-8")


def test_show_output_runs_as_a_file(tmp_path: Path) -> None:
    """`oxide show vecadd > mine.py` is a starting point: the copy runs."""
    done = oxide("show", "vecadd")
    assert done.returncode == 0, done.stderr
    (tmp_path / "mine.py").write_text(done.stdout)
    ran = oxide("run", str(tmp_path / "mine.py"), "--size", "3000")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "PASS" in ran.stdout


# the modules an example may import: oxide's public ones (tests/test_public_namespaces.py)
PUBLIC_MODULES = {"oxide", "oxide.testing", "oxide.tile", "oxide.kernels.hopper_gemm"}
# a fresh process imports this checkout's oxide, whatever its working directory
SRC = os.pathsep.join([str(Path(ox.__file__).resolve().parent.parent),
                       os.environ.get("PYTHONPATH", "")])


def oxide_imports(source: str) -> set[str]:
    """The oxide modules a file imports, at any depth of its code."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "oxide"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "oxide":
            found.add(node.module)
    return found


@pytest.mark.parametrize("name", examples.NAMES)
def test_show_output_is_a_script_of_its_own(name: str, tmp_path: Path) -> None:
    """`oxide show NAME > mine.py; python mine.py` runs: the example imports only public
    API, and its `__main__` block runs it (here on the CPU) and says PASS."""
    done = oxide("show", name)
    assert done.returncode == 0, done.stderr
    assert oxide_imports(done.stdout) <= PUBLIC_MODULES, oxide_imports(done.stdout)
    script = tmp_path / "mine.py"
    script.write_text(done.stdout)
    ran = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600, check=False,
                         env={**CPU_ENV, "PYTHONPATH": SRC})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.startswith(f"PASS {name}: "), ran.stdout
    assert "on CPU" in ran.stdout


def test_show_unknown_example_lists_the_names() -> None:
    result = runner.invoke(app, ["show", "vecad"])
    assert result.exit_code == 2
    for name in examples.NAMES:
        assert name in result.output


def test_run_unknown_name_lists_the_examples() -> None:
    result = runner.invoke(app, ["run", "nosuch"])
    assert result.exit_code == 2
    assert "neither a shipped example nor a file" in result.output
    for name in examples.NAMES:
        assert name in result.output


def test_run_missing_py_file_says_not_a_file() -> None:
    result = runner.invoke(app, ["run", "nosuch.py"])
    assert result.exit_code == 2
    assert "not a file" in result.output


def test_no_gpu_notice_is_printed_once() -> None:
    done = oxide("run", "vecadd", "--size", "5000")
    assert done.returncode == 0, done.stdout + done.stderr
    both = done.stdout + done.stderr
    assert both.count("no CUDA GPU found") == 1, both
    assert "ran on CPU (no CUDA GPU found)" in done.stdout


def test_failing_run_still_says_where_it_ran(tmp_path: Path) -> None:
    (tmp_path / "boom.py").write_text(textwrap.dedent("""
        def main():
            raise ValueError("boom")
    """))
    done = oxide("run", str(tmp_path / "boom.py"))
    assert done.returncode == 1
    assert "FAIL" in done.stdout and "ValueError: boom" in done.stdout
    both = done.stdout + done.stderr
    assert both.count("no CUDA GPU found") == 1, both


def test_the_library_still_says_it_falls_back(tmp_path: Path) -> None:
    """Outside `oxide run`, the runtime's notice on stderr is the only word of it."""
    script = tmp_path / "lib.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        import oxide as ox
        from oxide import DisjointSlice, Slice, f32, thread

        @ox.kernel
        def twice(x: Slice[f32], out: DisjointSlice[f32]):
            i = thread.index_1d()
            if i in out:
                out[i] = x[i] * 2.0

        x = np.arange(10, dtype=np.float32)
        y = np.zeros_like(x)
        twice[ox.LaunchConfig.for_num_elems(10)](x, y)
        twice[ox.LaunchConfig.for_num_elems(10)](x, y)
        assert (y == 2 * x).all()
    """))
    done = subprocess.run([sys.executable, str(script)], env=CPU_ENV, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("no CUDA GPU found") == 1
    assert done.stdout == ""


def test_inspect_bare_example_name_takes_its_kernel() -> None:
    bare = runner.invoke(app, ["inspect", "vecadd", "--stage", "ir", "--arch", "cpu"])
    named = runner.invoke(app, ["inspect", "vecadd::vecadd", "--stage", "ir", "--arch", "cpu"])
    assert bare.exit_code == 0, bare.output
    assert bare.stdout == named.stdout
    assert "vecadd" in bare.stdout


def test_inspect_bare_file_with_one_kernel(tmp_path: Path) -> None:
    (tmp_path / "k.py").write_text(textwrap.dedent("""
        import oxide as ox
        from oxide import DisjointSlice, Slice, f32, thread

        @ox.kernel
        def neg(x: Slice[f32], out: DisjointSlice[f32]):
            i = thread.index_1d()
            if i in out:
                out[i] = -x[i]
    """))
    result = runner.invoke(app, ["inspect", str(tmp_path / "k.py"), "--arch", "sm_80"])
    assert result.exit_code == 0, result.output
    assert ".visible .entry" in result.stdout and "neg" in result.stdout


def test_inspect_bare_file_with_several_kernels_names_them(tmp_path: Path) -> None:
    (tmp_path / "two.py").write_text(textwrap.dedent("""
        import oxide as ox
        from oxide import DisjointSlice, Slice, f32, thread

        @ox.kernel
        def first(x: Slice[f32], out: DisjointSlice[f32]):
            i = thread.index_1d()
            if i in out:
                out[i] = x[i]

        @ox.kernel
        def second(x: Slice[f32], out: DisjointSlice[f32]):
            i = thread.index_1d()
            if i in out:
                out[i] = x[i] + 1.0
    """))
    result = runner.invoke(app, ["inspect", str(tmp_path / "two.py")])
    assert result.exit_code == 2
    # rich folds a long temporary path inside its error box: read the lines joined
    flat = "".join(line.strip().strip("│").strip() for line in result.output.splitlines())
    assert "two.py::first" in flat and "two.py::second" in flat


def test_inspect_unknown_bare_name_lists_the_examples() -> None:
    result = runner.invoke(app, ["inspect", "vecad"])
    assert result.exit_code == 2
    assert "vecadd" in result.output and "sgemm" in result.output


def test_copy_to_host_is_to_numpy() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    with ox.device("cpu"):
        d = ox.to_device(x)
        host = d.copy_to_host()
    assert isinstance(host, np.ndarray)
    np.testing.assert_array_equal(host, x)
    host[0, 0] = 99.0  # a copy: the device array keeps its values
    np.testing.assert_array_equal(d.to_numpy(), x)


def test_launch_device_keyword(tmp_path: Path) -> None:
    """`ox.launch(..., device="cpu")` runs there, whatever the current device; a device
    that does not exist is a DeviceError before anything runs."""
    script = tmp_path / "dev.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        import oxide as ox
        from oxide import DisjointSlice, Slice, f32, thread

        @ox.kernel
        def add1(x: Slice[f32], out: DisjointSlice[f32]):
            i = thread.index_1d()
            if i in out:
                out[i] = x[i] + 1.0

        x = np.arange(100, dtype=np.float32)
        y = np.zeros_like(x)
        ox.launch(add1, ox.LaunchConfig.for_num_elems(100), x, y, device="cpu")
        assert (y == x + 1).all()
        y[:] = 0
        ox.launch(add1, ox.LaunchConfig.for_num_elems(100), x, out=y, device="cpu")
        assert (y == x + 1).all()
        try:
            ox.launch(add1, ox.LaunchConfig.for_num_elems(100), x, y, device=5)
        except ox.DeviceError as exc:
            assert "CUDA device 5 does not exist" in str(exc)
        else:
            raise AssertionError("launched on a device that does not exist")
        print("ok")
    """))
    done = subprocess.run([sys.executable, str(script)], env=CPU_ENV, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
