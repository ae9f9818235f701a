"""Several GPUs, on the host side (issue 30), against a fake driver with two devices: no GPU
needed. tests/test_multigpu.py runs the same on two real GPUs."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from fake_cuda import FakeDriver, Tensor, fake_torch, use_launch_flavor

import oxide as ox
from oxide import DisjointSlice, Slice, f32, thread
from oxide.runtime import device as device_module


@ox.kernel
def add(x: Slice[f32], y: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] + y[i]


@pytest.fixture(params=["native", "ctypes"])
def two_gpus(request, monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[FakeDriver]:
    driver = FakeDriver(devices=2)
    driver.install(monkeypatch)
    use_launch_flavor(monkeypatch, request.param)
    monkeypatch.setenv("OXIDE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    monkeypatch.setattr(device_module, "_default", None)
    monkeypatch.setattr(device_module, "_several", False)
    from oxide.runtime import peers

    monkeypatch.setattr(peers, "_enabled", set())
    add.__dict__.pop("_oxide_launchers", None)
    add.__dict__.pop("_oxide_bound", None)
    driver.formats = "QqQqQq"
    yield driver
    add.__dict__.pop("_oxide_launchers", None)
    add.__dict__.pop("_oxide_bound", None)


def _tensors(dev_x: int, dev_y: int, dev_out: int) -> tuple[Tensor, Tensor, Tensor]:
    return (Tensor(0x10000, (256,), device=dev_x), Tensor(0x20000, (256,), device=dev_y),
            Tensor(0x30000, (256,), device=dev_out))


def test_a_launch_runs_on_the_gpu_of_its_arrays(two_gpus, general) -> None:
    x, y, out = _tensors(1, 1, 1)
    for launch in (lambda: add[1, 256](x, y, out), lambda: ox.launch(add, (1, 256), x, y, out)):
        launch()
        assert two_gpus.launches[-1]["context"] == 0x1001  # GPU 1's context
    x0, y0, out0 = _tensors(0, 0, 0)
    add[1, 256](x0, y0, out0)
    assert two_gpus.launches[-1]["context"] == 0x1000
    before = len(general)
    for _ in range(3):  # both GPUs' launches keep their binders
        add[1, 256](x, y, out)
        add[1, 256](x0, y0, out0)
    assert len(general) == before
    assert [r["context"] for r in two_gpus.launches[-2:]] == [0x1001, 0x1000]


def test_a_chosen_device_wins_and_other_gpus_arrays_are_named(two_gpus) -> None:
    x, y, out = _tensors(0, 1, 0)
    with pytest.raises(ox.ArgumentError, match=r"`y` is on cuda:1, but this launch runs on "
                                                r"cuda:0.*ox.enable_peer_access\(0, 1\)"):
        add[1, 256](x, y, out)
    with ox.device(1), pytest.raises(ox.ArgumentError, match="`x` is on cuda:0"):
        add[1, 256](*_tensors(0, 0, 0))
    assert not two_gpus.launches


def test_peer_access_lets_a_kernel_read_the_other_gpus_array(two_gpus, general) -> None:
    x, y, out = _tensors(0, 1, 0)
    ox.enable_peer_access(0, 1)
    assert sorted(two_gpus.peer_access) == [(0x1000, 0x1001), (0x1001, 0x1000)]
    ox.enable_peer_access(1, 0)  # both directions are on already: nothing more
    assert len(two_gpus.peer_access) == 2
    add[1, 256](x, y, out)
    assert two_gpus.launches[-1]["context"] == 0x1000
    assert two_gpus.launches[-1]["args"][2] == 0x20000  # y's address, as it is
    before = len(general)
    add[1, 256](x, y, out)
    assert len(general) == before  # the binder takes the peer array too


def test_peer_access_needs_two_gpus(two_gpus) -> None:
    with pytest.raises(ox.DeviceError, match="between two GPUs"):
        ox.enable_peer_access("cpu", 0)
    with pytest.raises(ox.DeviceError, match="does not exist"):
        ox.enable_peer_access(0, 2)
