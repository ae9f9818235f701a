"""Every shipped example passes against NumPy on the CPU (and on a GPU where there is one),
and compiles to cubins for the GPU architectures oxide targets."""

from __future__ import annotations

import struct

import pytest

from oxide import examples
from oxide.runtime.device import cuda_device_count

needs_gpu = pytest.mark.skipif(cuda_device_count() == 0, reason="needs a CUDA GPU")


@pytest.mark.parametrize("name", examples.NAMES)
def test_example_passes_on_cpu(name: str) -> None:
    result = examples.load(name).main(device="cpu")
    assert result.passed, str(result)
    assert result.device.startswith("CPU")
    assert result.seconds > 0


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", examples.NAMES)
def test_example_builds_for_gpu_arch(name: str, arch: str) -> None:
    result = examples.load(name).main(device="cpu", arch=arch, size=64)
    assert result.passed, str(result)
    assert f"cubin for {arch}" in result.detail


def test_mandelbrot_writes_png(tmp_path) -> None:
    path = tmp_path / "m.png"
    result = examples.load("mandelbrot").main(device="cpu", size=48, out=path)
    assert result.passed, str(result)
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert struct.unpack(">II", data[16:24]) == (48, 32)  # IHDR width, height


def test_list_has_a_summary_per_example() -> None:
    assert all(examples.summary(name) for name in examples.NAMES)
    with pytest.raises(KeyError, match="vecadd"):
        examples.load("nope")


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("name", examples.NAMES)
def test_example_passes_on_gpu(name: str) -> None:
    result = examples.load(name).main(device=0)
    assert result.passed, str(result)
    assert result.device.startswith("GPU 0")
