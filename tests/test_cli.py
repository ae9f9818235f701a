"""The `oxide` command: list, run, doctor, new, inspect, build (+ load_bundle), cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from oxide import examples
from oxide.cli.main import app
from oxide.runtime.device import cuda_device_count

runner = CliRunner()
needs_gpu = pytest.mark.skipif(cuda_device_count() == 0, reason="needs a CUDA GPU")
EXAMPLES_DIR = Path(examples.__file__).parent
CPU_ENV = {**os.environ, "OXIDE_FORCE_CPU": "1"}


def oxide(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The command as users run it, in a fresh process."""
    return subprocess.run([sys.executable, "-m", "oxide", *args], cwd=cwd, env=CPU_ENV,
                          capture_output=True, text=True, timeout=300, check=False)


def test_list_names_every_example() -> None:
    result = runner.invoke(app, ["list"])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == list(examples.NAMES)
    assert "Vector add" in lines[0]


def test_run_vecadd_on_cpu_passes() -> None:
    result = runner.invoke(app, ["run", "vecadd", "--device", "cpu", "--size", "5000"])
    assert result.exit_code == 0, result.output
    assert "PASS vecadd" in result.stdout
    assert "GB/s" in result.stdout
    assert "ran on CPU" in result.stdout


def test_run_without_gpu_falls_back_to_cpu_and_says_so() -> None:
    done = oxide("run", "vecadd", "--size", "5000")
    assert done.returncode == 0, done.stderr
    assert "PASS vecadd" in done.stdout
    assert "CPU (no CUDA GPU found)" in done.stdout


def test_run_on_a_missing_gpu_is_a_usage_error() -> None:
    result = runner.invoke(app, ["run", "vecadd", "--device", "7"])
    assert result.exit_code == 2
    assert "CUDA device 7 does not exist" in result.stdout


def test_run_reports_a_kernel_error_as_fail(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text(textwrap.dedent("""
        import numpy as np
        import oxide as ox
        from oxide import DisjointSlice, Slice, f32, thread

        @ox.kernel
        def shift(x: Slice[f32], out: DisjointSlice[f32]):
            i = thread.index_1d()
            if i in out:
                out[i] = x[i + 1]

        def main():
            x = np.ones(100, np.float32)
            ox.launch(shift, ox.LaunchConfig.for_num_elems(100), x, np.zeros_like(x))
    """))
    result = runner.invoke(app, ["run", str(tmp_path / "bad.py"), "--device", "cpu"])
    assert result.exit_code == 1
    assert "KernelIndexError" in result.stdout and "FAIL" in result.stdout
    assert "Traceback" not in result.stdout


def test_run_user_file(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(textwrap.dedent("""
        def main(size=10):
            return size == 7
    """))
    ok = runner.invoke(app, ["run", str(tmp_path / "mine.py"), "--size", "7"])
    assert ok.exit_code == 0 and "PASS" in ok.stdout
    bad = runner.invoke(app, ["run", str(tmp_path / "mine.py"), "--size", "8"])
    assert bad.exit_code == 1 and "FAIL" in bad.stdout
    no_out = runner.invoke(app, ["run", str(tmp_path / "mine.py"), "--out", "x.png"])
    assert no_out.exit_code == 2 and "--out" in no_out.stdout


def test_run_file_without_main_explains(tmp_path: Path) -> None:
    (tmp_path / "k.py").write_text((EXAMPLES_DIR / "vecadd.py").read_text().split("def main")[0])
    result = runner.invoke(app, ["run", str(tmp_path / "k.py")])
    assert result.exit_code == 2
    assert "defines no main()" in result.stdout and "vecadd" in result.stdout


def test_run_mandelbrot_writes_png(tmp_path: Path) -> None:
    out = tmp_path / "m.png"
    result = runner.invoke(app, ["run", "mandelbrot", "--device", "cpu", "--size", "40",
                                 "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes().startswith(b"\x89PNG")


def test_doctor_passes_with_cpu_fallback() -> None:
    done = oxide("doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cpu launch" in done.stdout
    assert "ready on the CPU" in done.stdout
    assert "fix:" in done.stdout  # the missing GPU comes with what to do about it


def test_new_project_tests_pass(tmp_path: Path) -> None:
    made = oxide("new", "demo", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    project = tmp_path / "demo"
    assert {p.name for p in project.iterdir()} >= {"pyproject.toml", "demo.py", "tests",
                                                    "README.md"}
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                           cwd=project, env=CPU_ENV, capture_output=True, text=True,
                           timeout=300, check=False)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "2 passed" in tests.stdout
    again = oxide("new", "demo", cwd=tmp_path)
    assert again.returncode == 1 and "not empty" in again.stdout


def test_inspect_scale_prints_ptx() -> None:
    target = f"{EXAMPLES_DIR / 'scale.py'}::scale"
    result = runner.invoke(app, ["inspect", target, "--stage", "ptx", "--arch", "sm_90"])
    assert result.exit_code == 0, result.output
    assert ".target sm_90" in result.stdout and ".entry scale_" in result.stdout


@pytest.mark.parametrize("stage, marker", [("ir", "oxide."), ("llvm", "define")])
def test_inspect_other_stages(stage: str, marker: str) -> None:
    result = runner.invoke(app, ["inspect", "saxpy::saxpy", "--stage", stage,
                                 "--types", "f64, Slice[f64], Slice[f64], DisjointSlice[f64]"])
    assert result.exit_code == 0, result.output
    assert marker in result.stdout
    assert ("double" if stage == "llvm" else "f64") in result.stdout


TMA_KERNEL = """
import oxide as ox
from oxide import RawSlice, f32, i32, u64

@ox.kernel
def copy_box(src: ox.TensorMap[f32, 2], raw: RawSlice[f32], y: i32, x: i32):
    s = ox.shared.array(f32, (8, 16))
    bars = ox.shared.array(u64, 1)
    with ox.unsafe():
        if ox.thread_idx.x == 0:
            ox.mbarrier.init(bars[0], 1)
            ox.fence_mbarrier_init()
            ox.mbarrier.arrive_expect_tx(bars[0], 8 * 16 * 4)
            ox.tma.load(src, s, y, x, bars[0])
        ox.mbarrier.wait_parity(bars[0], 0)
        raw[ox.thread_idx.x] = s[0, ox.thread_idx.x % 16]
"""


def test_inspect_takes_tensor_map_types(tmp_path: Path) -> None:
    src = tmp_path / "tma_kernel.py"
    src.write_text(TMA_KERNEL)
    types = "TensorMap[f32, 2], RawSlice[f32], i32, i32"
    result = runner.invoke(app, ["inspect", f"{src}::copy_box", "--types", types])
    assert result.exit_code == 0, result.output
    assert "cp.async.bulk.tensor.2d" in result.stdout
    bad = runner.invoke(app, ["inspect", f"{src}::copy_box", "--types",
                              "TensorMap[f32, 9], RawSlice[f32], i32, i32"])
    assert bad.exit_code != 0 and "rank from 1 to 5" in bad.output


def test_inspect_const_needs_a_value() -> None:
    missing = runner.invoke(app, ["inspect", "mandelbrot::mandelbrot"])
    assert missing.exit_code == 2 and "--const max_iter=VALUE" in missing.output
    given = runner.invoke(app, ["inspect", "mandelbrot::mandelbrot", "--const", "max_iter=8"])
    assert given.exit_code == 0, given.output


def test_inspect_sass_without_tools_says_how(monkeypatch: pytest.MonkeyPatch) -> None:
    from oxide.cli import inspect_kernel

    monkeypatch.setattr(inspect_kernel, "find_sass_tool", lambda: None)
    result = runner.invoke(app, ["inspect", "scale::scale", "--stage", "sass"])
    assert result.exit_code == 1
    assert "nvdisasm" in result.output and "pip install" in result.output


LOAD_WITHOUT_COMPILER = """
import sys
import numpy as np
import oxide as ox
from oxide.runtime.args import plan_for, read_args
from oxide.runtime.device import Device
from oxide.runtime.gpu import load_image

b = ox.load_bundle(sys.argv[1])
x = np.ones(1000, np.float32)
y = np.zeros_like(x)
code = b.scale.compile(x, 2.5, y, arch="sm_90")
assert code.module_image[:4] == b"\\x7fELF", code.module_image[:4]
assert [a.name for a in code.abi] == ["input", "factor", "out"]
assert code.sites and code.sites[0].span.line > 0
# What launch_gpu does before it reaches the driver: bind the arguments, find the code.
gpu = Device("cuda", 0)
key, views = read_args(b.scale, (x, 2.5, y), gpu)
plan = plan_for(b.scale, (gpu, key), (x, 2.5, y), views, gpu)
image = load_image(b.scale, plan, "sm_90")
assert image.symbol == code.name and image.code == code.module_image
b.scale[4, 256]
with ox.device("cpu"):
    try:
        ox.launch(b.scale, ox.LaunchConfig.for_num_elems(1000), x, 2.5, y)
    except ox.DeviceError as exc:
        assert "holds GPU code only" in str(exc)
    else:
        raise AssertionError("a bundle launched on the CPU")
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("llvmlite", "xdsl"))
assert not loaded, loaded
print("ok", code)
"""


@pytest.mark.parametrize("name", ["b", "b.oxb"])  # a directory, or one file (a zip)
def test_build_then_load_bundle_without_compiler(tmp_path: Path, name: str) -> None:
    built = oxide("build", str(EXAMPLES_DIR / "scale.py"), "-o", str(tmp_path / name),
                  "--arch", "sm_80,sm_90")
    assert built.returncode == 0, built.stdout + built.stderr
    if name.endswith(".oxb"):
        import zipfile

        manifest = json.loads(zipfile.ZipFile(tmp_path / name).read("bundle.json"))
    else:
        manifest = json.loads((tmp_path / name / "bundle.json").read_text())
    spec = manifest["kernels"]["scale"]["specializations"][0]
    assert set(spec["cubins"]) == {"sm_80", "sm_90"}
    assert [p["name"] for p in manifest["kernels"]["scale"]["params"]] == [
        "input", "factor", "out"]
    assert spec["sites"][0]["file"].endswith("scale.py")
    loaded = subprocess.run([sys.executable, "-c", LOAD_WITHOUT_COMPILER, str(tmp_path / name)],
                            env=CPU_ENV, capture_output=True, text=True, timeout=120,
                            check=False)
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    assert "ok" in loaded.stdout


def test_build_with_sig_and_const(tmp_path: Path) -> None:
    result = runner.invoke(app, [
        "build", str(EXAMPLES_DIR / "saxpy.py"), "-o", str(tmp_path / "s"), "--arch", "sm_90a",
        "--sig", "saxpy: f64, Slice[f64], Slice[f64], DisjointSlice[f64]"])
    assert result.exit_code == 0, result.output
    spec = json.loads((tmp_path / "s" / "bundle.json").read_text())["kernels"]["saxpy"]
    assert spec["specializations"][0]["signature"][0] == {"kind": "scalar", "dtype": "f64"}
    bad = runner.invoke(app, ["build", str(EXAMPLES_DIR / "saxpy.py"), "-o", str(tmp_path / "t"),
                              "--sig", "nope: f32"])
    assert bad.exit_code == 2 and "saxpy" in bad.output


def test_cache_info_and_clear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Counts and removes oxide's entries only (issue 14, item 17: it used to delete every
    file under the directory); tests/test_trust_cli_cache.py covers the refusals."""
    from oxide.runtime.cache_layout import MARKER, MARKER_TEXT

    monkeypatch.setenv("OXIDE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache" / "kernels").mkdir(parents=True)
    (tmp_path / "cache" / MARKER).write_text(MARKER_TEXT)
    (tmp_path / "cache" / "kernels" / f"{'ab' * 32}.oxk").write_bytes(b"x" * 2048)
    (tmp_path / "cache" / "notes.txt").write_text("mine")
    info = runner.invoke(app, ["cache", "info"])
    assert info.exit_code == 0
    assert str(tmp_path / "cache") in info.stdout
    assert "entries: 1" in info.stdout and "2.0 KiB" in info.stdout
    cleared = runner.invoke(app, ["cache", "clear"])
    assert cleared.exit_code == 0 and "removed 1" in cleared.stdout
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [MARKER, "notes.txt"]


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("name", examples.NAMES)
def test_run_on_gpu(name: str) -> None:
    result = runner.invoke(app, ["run", name, "--device", "0"])
    assert result.exit_code == 0, result.output
    assert f"PASS {name}" in result.stdout and "ran on GPU 0" in result.stdout


RUN_BUNDLE = """
import sys
import numpy as np
import oxide as ox

b = ox.load_bundle(sys.argv[1])
x = np.arange(1 << 20, dtype=np.float32)
d_x, d_y = ox.to_device(x), ox.empty(x.shape, ox.f32)
with ox.device(0):
    b.scale[(x.size + 255) // 256, 256](d_x, 2.5, d_y)
    ox.launch(b.scale, ox.LaunchConfig.for_num_elems(x.size), d_x, 2.5, d_y)
assert np.array_equal(d_y.to_numpy(), x * np.float32(2.5))
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("llvmlite", "xdsl"))
assert not loaded, loaded
print("bundle PASS")
"""


@pytest.mark.gpu
@needs_gpu
def test_built_bundle_runs_on_gpu_without_compiler(tmp_path: Path) -> None:
    from oxide.runtime.gpu import gpu_device

    built = oxide("build", str(EXAMPLES_DIR / "scale.py"), "-o", str(tmp_path / "b"),
                  "--arch", gpu_device(0).arch)
    assert built.returncode == 0, built.stdout + built.stderr
    ran = subprocess.run([sys.executable, "-c", RUN_BUNDLE, str(tmp_path / "b")],
                         capture_output=True, text=True, timeout=120, check=False)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "bundle PASS" in ran.stdout
