"""Ahead-of-time bundles: the manifest round trip, picking a cubin, and launching one."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, f64
from oxide.aot import Job, build_bundle
from oxide.examples.saxpy import saxpy
from oxide.examples.scale import scale
from oxide.runtime.bundle import BundleError, arch_runs_on, spec_from_json, spec_to_json
from oxide.runtime.device import cuda_device_count
from oxide.specialize import ConstValue

needs_gpu = pytest.mark.skipif(cuda_device_count() == 0, reason="needs a CUDA GPU")
T = ox.TypeVar("T")


@pytest.mark.parametrize("spec", [
    f32, Slice[f32], DisjointSlice[f64, 3].with_layout(False), Slice[T], T, Const[int],
    ConstValue(4), ConstValue(0.5),
])
def test_spec_json_round_trip(spec: object) -> None:
    typevars = {"T": T}
    assert spec_from_json(spec_to_json(spec), typevars) == spec


@pytest.mark.parametrize("arch, device, runs", [
    ("sm_80", "sm_80", True), ("sm_80", "sm_86", True), ("sm_86", "sm_80", False),
    ("sm_80", "sm_90", False), ("sm_90a", "sm_90", True), ("sm_90", "sm_90a", True),
    ("sm_90a", "sm_100", False), ("sm_90", "sm_100", False),
])
def test_arch_compatibility(arch: str, device: str, runs: bool) -> None:
    assert arch_runs_on(arch, device) is runs


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundle")
    build_bundle([Job("scale", scale, (Slice[f32], f32, DisjointSlice[f32])),
                  Job("saxpy", saxpy, (f64, Slice[f64], Slice[f64], DisjointSlice[f64]))],
                 ["sm_80", "sm_90a"], out)
    return out


def test_bundle_picks_the_cubin_for_the_gpu(bundle_dir: Path) -> None:
    b = ox.load_bundle(bundle_dir)
    x = np.ones(8, np.float32)
    assert b.scale.compile(x, 2.5, x, arch="sm_86").arch == "sm_80"
    assert b.scale.compile(x, 2.5, x, arch="sm_90").arch == "sm_90a"
    newer = b.scale.compile(x, 2.5, x, arch="sm_100")  # no cubin runs there: the sm_80 PTX
    assert (newer.arch, newer.is_ptx) == ("sm_80", True)
    assert ".target sm_80" in newer.ptx and newer.module_image.endswith(b"\0")


def test_an_arch_specific_build_has_no_ptx_for_newer_gpus(tmp_path: Path) -> None:
    build_bundle([Job("scale", scale, (Slice[f32], f32, DisjointSlice[f32]))], ["sm_90a"],
                 tmp_path)
    assert not list(tmp_path.glob("*.ptx"))
    x = np.ones(8, np.float32)
    with pytest.raises(ox.DeviceError, match="rebuild the bundle with --arch sm_100"):
        ox.load_bundle(tmp_path).scale.compile(x, 2.5, x, arch="sm_100")


def test_bundle_names_the_signatures_it_has(bundle_dir: Path) -> None:
    b = ox.load_bundle(bundle_dir)
    x = np.ones(8, np.float32)
    with pytest.raises(ox.ArgumentError, match=r'--sig "saxpy: f32, Slice\[f32\]'):
        b.saxpy.compile(np.float32(2), x, x, x, arch="sm_90")
    with pytest.raises(AttributeError, match="its kernels: scale, saxpy"):
        b.nope  # noqa: B018


def test_bundle_on_the_cpu_says_it_needs_a_gpu(bundle_dir: Path) -> None:
    b = ox.load_bundle(bundle_dir)
    x = np.ones(8, np.float32)
    with ox.device("cpu"), pytest.raises(ox.DeviceError, match="holds GPU code only"):
        b.scale[1, 8](x, 2.5, np.zeros_like(x))


def test_damaged_bundles_are_reported(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="oxide build"):
        ox.load_bundle(tmp_path)
    (tmp_path / "bundle.json").write_text('{"format": "oxide-bundle", "version": 99}')
    with pytest.raises(BundleError, match="rebuild"):
        ox.load_bundle(tmp_path)


@pytest.mark.gpu
@needs_gpu
def test_bundle_runs_on_gpu(tmp_path: Path) -> None:
    from oxide.runtime.gpu import gpu_device

    build_bundle([Job("scale", scale, (Slice[f32], f32, DisjointSlice[f32]))],
                 [gpu_device(0).arch], tmp_path)
    b = ox.load_bundle(tmp_path)
    x = np.arange(1000, dtype=np.float32)
    y = np.zeros_like(x)
    with ox.device(0), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NumPy arrays are copied to the GPU and back
        b.scale[4, 256](x, 2.5, y)
    np.testing.assert_array_equal(y, x * np.float32(2.5))
