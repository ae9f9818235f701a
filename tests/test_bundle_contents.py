"""What a bundle holds (issue 16 item 4): PTX beside the cubins, CPU object code, the
ox.ConstantArrays its kernels read, and the one-file form (`-o NAME.oxb`)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from typer.testing import CliRunner

import oxide as ox
from oxide import DisjointSlice, Slice, f32
from oxide.aot import Job, build_bundle
from oxide.cli.loading import load_file
from oxide.cli.main import app
from oxide.examples.scale import scale
from oxide.runtime.bundle import MANIFEST, BundleError, manifest_digest

SCALE = Job("scale", scale, (Slice[f32], f32, DisjointSlice[f32]))
CONSTANT_KERNELS = textwrap.dedent("""
    import oxide as ox
    from oxide import DisjointSlice, Slice, f32, i32, thread

    COEFFS = ox.ConstantArray(f32, 4)
    COEFFS.set([1.0, 2.0, 3.0, 4.0])
    SHIFT = ox.ConstantArray(i32, 2)   # never set before the build

    @ox.kernel
    def poly(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            v = x[i]
            out[i] = COEFFS[0] + v * (COEFFS[1] + v * (COEFFS[2] + v * COEFFS[3]))

    @ox.kernel
    def shifted(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[i] * COEFFS[3] + f32(SHIFT[1])
""")


def poly_ref(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    return c[0] + x * (c[1] + x * (c[2] + x * c[3]))


@pytest.fixture()
def constants_module(tmp_path: Path) -> Iterator[ModuleType]:
    path = tmp_path / "constant_kernels.py"
    path.write_text(CONSTANT_KERNELS)
    yield load_file(path)
    sys.modules.pop("constant_kernels", None)


def constant_jobs(mod: ModuleType) -> list[Job]:
    sig = (Slice[f32], DisjointSlice[f32])
    return [Job("poly", mod.poly, sig), Job("shifted", mod.shifted, sig)]


def edit_manifest(root: Path, change: object) -> None:
    manifest = json.loads((root / MANIFEST).read_text())
    change(manifest)  # type: ignore[operator]
    manifest["sha256"] = manifest_digest(manifest)
    (root / MANIFEST).write_text(json.dumps(manifest))


# ---------------------------------------------------------------------------
# PTX


def test_ptx_travels_beside_each_cubin(tmp_path: Path) -> None:
    build_bundle([SCALE], ["sm_80", "sm_90"], tmp_path)
    spec = json.loads((tmp_path / MANIFEST).read_text())["kernels"]["scale"]["specializations"][0]
    assert set(spec["ptx"]) == {"sm_80", "sm_90"}
    for arch, name in spec["ptx"].items():
        assert f".target {arch}" in (tmp_path / name).read_text()
    x = np.ones(8, np.float32)
    b = ox.load_bundle(tmp_path)
    assert not b.scale.compile(x, 2.5, x, arch="sm_89").is_ptx  # the sm_80 cubin runs there
    code = b.scale.compile(x, 2.5, x, arch="sm_120")
    assert (code.arch, code.is_ptx) == ("sm_90", True)
    assert code.ptx == scale.compile(Slice[f32], f32, DisjointSlice[f32], arch="sm_90").ptx


def test_a_tampered_ptx_is_refused_at_first_use(tmp_path: Path) -> None:
    build_bundle([SCALE], ["sm_80"], tmp_path)
    ptx = tmp_path / "scale.0.sm_80.ptx"
    ptx.write_text(ptx.read_text().replace("mul.f32", "add.f32"))
    code = ox.load_bundle(tmp_path).scale.compile(np.ones(8, np.float32), 2.5,
                                                  np.ones(8, np.float32), arch="sm_100")
    with pytest.raises(BundleError, match="modified or damaged after the build"):
        code.module_image  # noqa: B018


# ---------------------------------------------------------------------------
# CPU object code


def test_a_cpu_bundle_runs_on_the_cpu(tmp_path: Path) -> None:
    build_bundle([SCALE], ["cpu"], tmp_path)
    b = ox.load_bundle(tmp_path)
    assert not b.scale.gpu_only
    x = np.random.default_rng(0).standard_normal(10_000).astype(np.float32)
    y = np.zeros_like(x)
    with ox.device("cpu"):
        b.scale[ox.LaunchConfig.for_num_elems(x.size)](x, 2.5, y)
    np.testing.assert_array_equal(y, x * np.float32(2.5))
    with pytest.raises(ox.DeviceError, match="no GPU code for `scale`"):
        b.scale.compile(x, 2.5, y, arch=None)


def test_a_cpu_bundle_reports_kernel_errors_with_their_line(tmp_path: Path) -> None:
    build_bundle([SCALE], ["cpu"], tmp_path)
    b = ox.load_bundle(tmp_path)
    x = np.ones(100, np.float32)
    with ox.device("cpu"), pytest.raises(ox.KernelIndexError, match=r"scale\.py"):
        b.scale[1, 128](x[:50], 2.0, np.zeros(100, np.float32))  # reads past `input`


def test_cpu_code_for_another_cpu_is_refused(tmp_path: Path) -> None:
    build_bundle([SCALE], ["sm_90", "cpu"], tmp_path)
    edit_manifest(tmp_path, lambda m: m["kernels"]["scale"]["specializations"][0]["host"]
                  .__setitem__("target", "cpu-elsewhere-0123456789abcdef"))
    x = np.ones(8, np.float32)
    with ox.device("cpu"), pytest.raises(ox.DeviceError, match="rebuild the bundle here"):
        ox.load_bundle(tmp_path).scale[1, 8](x, 2.0, np.zeros_like(x))


CPU_WITHOUT_FRONTEND = """
import sys
import numpy as np
import oxide as ox

b = ox.load_bundle(sys.argv[1])
x = np.arange(1000, dtype=np.float32)
y = np.zeros_like(x)
with ox.device("cpu"):
    b.scale[4, 256](x, 3.0, y)
assert np.array_equal(y, x * np.float32(3.0))
loaded = sorted(m for m in sys.modules if m.split(".")[0] == "xdsl"
                or m.startswith(("oxide.compiler", "oxide.passes", "oxide.ir")))
assert not loaded, loaded
print("ok")
"""


def test_a_cpu_bundle_needs_no_compiler(tmp_path: Path) -> None:
    build_bundle([SCALE], ["cpu"], tmp_path / "b.oxb")
    done = subprocess.run([sys.executable, "-c", CPU_WITHOUT_FRONTEND, str(tmp_path / "b.oxb")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok" in done.stdout


# ---------------------------------------------------------------------------
# ConstantArrays


def test_constant_arrays_travel_with_their_values(constants_module: ModuleType,
                                                  tmp_path: Path) -> None:
    build_bundle(constant_jobs(constants_module), ["sm_90", "cpu"], tmp_path)
    declared = json.loads((tmp_path / MANIFEST).read_text())["constants"]
    assert set(declared) == {"COEFFS", "SHIFT"} and declared["SHIFT"]["values"] is None
    constants_module.COEFFS.set([9.0, 9.0, 9.0, 9.0])  # after the build: not in the bundle
    b = ox.load_bundle(tmp_path)
    np.testing.assert_array_equal(b.constants["COEFFS"].values, [1, 2, 3, 4])
    assert b.constants["COEFFS"] is not constants_module.COEFFS
    x = np.linspace(-2, 2, 1000, dtype=np.float32)
    y = np.zeros_like(x)
    cfg = ox.LaunchConfig.for_num_elems(x.size)
    with ox.device("cpu"):
        b.poly[cfg](x, y)
        np.testing.assert_allclose(y, poly_ref(x, np.array([1, 2, 3, 4], np.float32)),
                                   rtol=1e-6, atol=1e-5)
        b.constants["COEFFS"].set([0.5, -1.0, 0.0, 2.0])
        b.poly[cfg](x, y)
        np.testing.assert_allclose(y, poly_ref(x, np.array([0.5, -1, 0, 2], np.float32)),
                                   rtol=1e-6, atol=1e-5)
        with pytest.raises(ox.LaunchError, match="never set"):
            b.shifted[cfg](x, y)
        b.constants["SHIFT"].set([0, 7])
        b.shifted[cfg](x, y)  # reads COEFFS too: the same array as `poly` reads
    np.testing.assert_array_equal(y, x * np.float32(2.0) + np.float32(7))
    gpu = b.poly.compile(x, y, arch="sm_90")
    assert [arr for _, arr in gpu.constants] == [b.constants["COEFFS"]]
    assert gpu.module_image.startswith(b"\x7fELF")


def test_load_bundle_binds_your_own_constant_arrays(constants_module: ModuleType,
                                                    tmp_path: Path) -> None:
    build_bundle(constant_jobs(constants_module), ["cpu"], tmp_path)
    mine = ox.ConstantArray(f32, 4)
    mine.set([3.0, 0.0, 0.0, 0.0])
    b = ox.load_bundle(tmp_path, constants={"COEFFS": mine})
    assert b.constants["COEFFS"] is mine
    x = np.ones(64, np.float32)
    y = np.zeros_like(x)
    with ox.device("cpu"):
        b.poly[1, 64](x, y)
    np.testing.assert_array_equal(y, np.full(64, 3.0, np.float32))
    with pytest.raises(ox.ArgumentError, match=r"ConstantArray\(f32, \(4,\)\) as built"):
        ox.load_bundle(tmp_path, constants={"COEFFS": ox.ConstantArray(ox.f64, 4)})
    with pytest.raises(ox.ArgumentError, match="they read: COEFFS, SHIFT"):
        ox.load_bundle(tmp_path, constants={"NOPE": mine})


def test_damaged_constant_declarations_are_bundle_errors(constants_module: ModuleType,
                                                         tmp_path: Path) -> None:
    build_bundle(constant_jobs(constants_module), ["cpu"], tmp_path)
    edit_manifest(tmp_path, lambda m: m["constants"]["COEFFS"].__setitem__("values", "AAAA"))
    with pytest.raises(BundleError, match="malformed"):
        ox.load_bundle(tmp_path)
    edit_manifest(tmp_path, lambda m: m["constants"].pop("COEFFS"))
    with pytest.raises(BundleError, match="malformed"):
        ox.load_bundle(tmp_path)


# ---------------------------------------------------------------------------
# One file


def test_a_one_file_bundle_loads_and_runs(constants_module: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "k.oxb"
    assert build_bundle(constant_jobs(constants_module), ["sm_80", "cpu"], out) == out
    names = zipfile.ZipFile(out).namelist()
    assert MANIFEST in names and "poly.0.sm_80.cubin" in names and "poly.0.sm_80.ptx" in names
    assert not list(tmp_path.glob(".k.oxb.*"))  # the temporary file was renamed
    b = ox.load_bundle(out)
    x = np.linspace(0, 1, 100, dtype=np.float32)
    y = np.zeros_like(x)
    with ox.device("cpu"):
        b.poly[1, 128](x, y)
    np.testing.assert_allclose(y, poly_ref(x, np.array([1, 2, 3, 4], np.float32)), rtol=1e-6, atol=1e-5)
    assert b.poly.compile(x, y, arch="sm_100").ptx.startswith("//")


def test_a_damaged_one_file_bundle_is_a_bundle_error(tmp_path: Path) -> None:
    out = tmp_path / "s.oxb"
    build_bundle([SCALE], ["sm_90"], out)
    with zipfile.ZipFile(out) as z:
        members = {n: z.read(n) for n in z.namelist()}
    members["scale.0.sm_90.cubin"] = members["scale.0.sm_90.cubin"][:-1] + b"\x01"
    with zipfile.ZipFile(out, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    x = np.ones(8, np.float32)
    with pytest.raises(BundleError, match=r"s\.oxb:scale\.0\.sm_90\.cubin was modified"):
        ox.load_bundle(out).scale.compile(x, 2.0, x, arch="sm_90").cubin  # noqa: B018
    (tmp_path / "junk.oxb").write_bytes(b"not a zip")
    with pytest.raises(BundleError, match="neither a directory nor a one-file bundle"):
        ox.load_bundle(tmp_path / "junk.oxb")
    with zipfile.ZipFile(tmp_path / "empty.oxb", "w"):
        pass
    with pytest.raises(BundleError, match="no bundle.json"):
        ox.load_bundle(tmp_path / "empty.oxb")


# ---------------------------------------------------------------------------
# The command


def test_oxide_build_writes_every_part(constants_module: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "all.oxb"
    result = CliRunner().invoke(app, ["build", constants_module.__file__, "-o", str(out),
                                      "--arch", "sm_80,sm_90a,cpu"])
    assert result.exit_code == 0, result.output
    assert "ConstantArray COEFFS (f32[4]), with its values" in result.stdout
    assert "ConstantArray SHIFT (i32[2]), NOT set at build time" in result.stdout
    assert f"load it with ox.load_bundle('{out}')" in result.stdout
    spec = ox.load_bundle(out).manifest["kernels"]["poly"]["specializations"][0]
    assert set(spec["cubins"]) == {"sm_80", "sm_90a"} and set(spec["ptx"]) == {"sm_80"}
    assert spec["host"]["file"] == "poly.0.cpu.o"
    bad = CliRunner().invoke(app, ["build", constants_module.__file__, "-o", str(out),
                                   "--arch", "cpu,gpu"])
    assert bad.exit_code == 2
    assert "and cpu for this machine's CPU" in " ".join(bad.output.replace("│", "").split())


# ---------------------------------------------------------------------------
# On a GPU


@pytest.mark.gpu
def test_bundled_constant_arrays_on_the_gpu(constants_module: ModuleType,
                                            tmp_path: Path) -> None:
    from oxide.runtime.gpu import gpu_device

    build_bundle(constant_jobs(constants_module), [gpu_device(0).arch], tmp_path / "b.oxb")
    b = ox.load_bundle(tmp_path / "b.oxb")
    x = ox.to_device(np.linspace(-1, 1, 4096, dtype=np.float32))
    y = ox.empty(4096, f32)
    cfg = ox.LaunchConfig.for_num_elems(4096)
    with ox.device(0):
        b.poly[cfg](x, y)
        np.testing.assert_allclose(y.to_numpy(), poly_ref(x.to_numpy(),
                                                          np.array([1, 2, 3, 4], np.float32)),
                                   rtol=1e-6, atol=1e-5)
        b.constants["COEFFS"].set([0.0, 1.0, 0.0, 0.0])
        b.poly[cfg](x, y)
        np.testing.assert_array_equal(y.to_numpy(), x.to_numpy())


@pytest.mark.gpu
def test_a_bundle_runs_its_ptx_on_a_newer_gpu(tmp_path: Path) -> None:
    """An sm_80-only bundle on an sm_90 GPU: no cubin runs there, the driver compiles the PTX."""
    from oxide.runtime.gpu import gpu_device

    if gpu_device(0).arch.rstrip("a") in ("sm_80", "sm_86", "sm_87", "sm_89"):
        pytest.skip("needs a GPU newer than sm_8x")
    build_bundle([SCALE], ["sm_80"], tmp_path)
    b = ox.load_bundle(tmp_path)
    x = np.arange(1000, dtype=np.float32)
    y = np.zeros_like(x)
    assert b.scale.compile(x, 2.5, y, arch=gpu_device(0).arch).is_ptx
    with ox.device(0), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NumPy arrays are copied to the GPU and back
        b.scale[4, 256](x, 2.5, y)
    np.testing.assert_array_equal(y, x * np.float32(2.5))


def test_a_version_2_bundle_still_loads(tmp_path: Path) -> None:
    """Version 3 only adds optional fields: a bundle from before them keeps working."""
    build_bundle([SCALE], ["sm_80"], tmp_path)

    def to_v2(m: dict[str, object]) -> None:
        m["version"] = 2
        m.pop("constants")
        for spec in m["kernels"]["scale"]["specializations"]:  # type: ignore[index]
            for key in ("ptx", "ptx_sha256", "constants"):
                spec.pop(key)

    edit_manifest(tmp_path, to_v2)
    x = np.ones(8, np.float32)
    b = ox.load_bundle(tmp_path)
    assert b.constants == {}
    assert b.scale.compile(x, 2.5, x, arch="sm_86").cubin.startswith(b"\x7fELF")
    with pytest.raises(ox.DeviceError, match="rebuild the bundle with --arch sm_90"):
        b.scale.compile(x, 2.5, x, arch="sm_90")  # no PTX to fall back on
