"""The native launch trampoline (runtime/native_launch.py): what it hands the driver, its
errors, threads, and when launches switch to it (with the fake driver of fake_cuda.py)."""

from __future__ import annotations

import ctypes
import struct
import sys
import threading
from collections.abc import Iterator

import pytest
from fake_cuda import FakeDriver, Tensor, fake_torch

import oxide as ox
from oxide import Slice, f16, f32, f64, i8, i16, i64, thread, u8, u16, u32, u64
from oxide.errors import InternalCompilerError
from oxide.runtime import gpu, native_launch
from oxide.runtime.cuda_driver import LAUNCH_CONFIG

PROTO = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                         ctypes.c_void_p)


class Driver:
    """A cuLaunchKernelEx that decodes what it gets with `formats` and answers `result`."""

    def __init__(self, formats: str, result: int = 0) -> None:
        self.formats = formats
        self.result = result
        self.calls: list[dict] = []
        self.c_function = PROTO(self._launch)
        self.address = ctypes.cast(self.c_function, ctypes.c_void_p).value

    def _launch(self, config: int, function: int, params: int, extra: object) -> int:
        pointers = (ctypes.c_void_p * len(self.formats)).from_address(params)
        values = [struct.unpack(f, ctypes.string_at(p, struct.calcsize(f)))[0]
                  for f, p in zip(self.formats, pointers, strict=True)]
        self.calls.append({"config": LAUNCH_CONFIG.unpack(ctypes.string_at(config,
                                                                           LAUNCH_CONFIG.size)),
                           "function": function, "values": values, "extra": extra})
        return self.result


@pytest.fixture(scope="module")
def trampoline():
    fn = native_launch.trampoline()
    assert fn is not None, native_launch.unavailable_reason()
    return fn


def dims(grid=(1, 1, 1), block=(32, 1, 1), shared=0) -> bytes:
    return ox.LaunchConfig(grid=grid, block=block, shared_mem_bytes=shared).dims


def test_every_value_kind_reaches_the_driver_as_its_machine_type(trampoline) -> None:
    formats = ["Q", "b", "B", "h", "H", "i", "I", "q", "Q", "?", "f", "d", "H"]
    driver = Driver("".join(formats) + "Q")
    ctx = native_launch.make_context(driver.address, 0x3000, 0xABC0, 1, formats)
    values = [0x7F00_DEAD_BEE0, -5, 250, -30000, 65000, -(2**31), 2**32 - 1, -(2**63),
              2**64 - 1, True, 1.5, -2.25e300, 0x3C00]
    assert trampoline(ctypes.addressof(ctx), dims((5, 6, 7), (32, 2, 1), 4096), 0x1234,
                      *values) == 0
    (call,) = driver.calls
    assert call["values"] == values + [0xABC0]  # then the error record
    assert call["config"] == (5, 6, 7, 32, 2, 1, 4096, 0x1234, 0, 0)
    assert call["function"] == 0x3000 and call["extra"] is None


def test_f32_values_round_to_nearest(trampoline) -> None:
    driver = Driver("fQ")
    ctx = native_launch.make_context(driver.address, 1, 0, 1, ["f"])
    trampoline(ctypes.addressof(ctx), dims(), 0, 0.1)
    assert driver.calls[0]["values"][0] == struct.unpack("f", struct.pack("f", 0.1))[0]


def test_a_coarsened_kernel_gets_fewer_blocks_and_its_logical_grid(trampoline) -> None:
    driver = Driver("QQI")
    ctx = native_launch.make_context(driver.address, 1, 0xAB, 4, ["Q"])
    for n, blocks in ((1, 1), (4, 1), (5, 2), (2**31 - 1, 2**29)):
        trampoline(ctypes.addressof(ctx), dims(grid=n), 0, 7)
        assert driver.calls[-1]["config"][:3] == (blocks, 1, 1)
        assert driver.calls[-1]["values"] == [7, 0xAB, n]


def test_the_drivers_answer_comes_back(trampoline) -> None:
    driver = Driver("Q", result=201)
    ctx = native_launch.make_context(driver.address, 1, 0, 1, [])
    assert trampoline(ctypes.addressof(ctx), dims(), 0) == 201


def test_bad_values_raise_before_the_driver_is_called(trampoline) -> None:
    driver = Driver("QfQ")
    ctx = native_launch.make_context(driver.address, 1, 0, 1, ["Q", "f"])
    address = ctypes.addressof(ctx)
    with pytest.raises(TypeError):
        trampoline(address, dims(), 0, 1, "2.0")
    with pytest.raises(TypeError):
        trampoline(address, dims(), 0, 1.5, 2.0)  # a float for an int
    with pytest.raises(TypeError):
        trampoline(address, None, 0, 1, 2.0)  # no dims
    assert trampoline(address, dims(), 0, 1) == -1  # too few values
    assert trampoline(address, dims(), 0, 1, 2.0, 3) == -1  # too many
    assert trampoline(address) == -1
    assert driver.calls == []


def test_too_many_values_for_the_trampoline_is_refused() -> None:
    with pytest.raises(ValueError, match="takes 60"):
        native_launch.make_context(1, 1, 0, 1, ["Q"] * 61)


def test_threads_launch_at_once_without_mixing_their_values(trampoline) -> None:
    """No shared buffer: each launch's values are its own, while the GIL is released."""
    driver = Driver("QQQQ")
    ctx = native_launch.make_context(driver.address, 1, 0, 1, ["Q", "Q", "Q"])
    address = ctypes.addressof(ctx)

    def run(k: int) -> None:
        for i in range(300):
            trampoline(address, dims(), k, k, i, k * 1000 + i)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(driver.calls) == 1200
    for call in driver.calls:
        k, i, ki, _ = call["values"]
        assert call["config"][7] == k and ki == k * 1000 + i


# ---------------------------------------------------------------------------
# When launches use it


@ox.kernel
def empty(x: Slice[f32]):
    thread.index_1d()


@ox.kernel
def scalars(x: Slice[f32], a: i8, b: u8, c: i16, d: u16, e: u32, f: i64, g: u64, h: f16,
            k: f64):
    thread.index_1d()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[FakeDriver]:
    driver = FakeDriver()
    driver.install(monkeypatch)
    monkeypatch.setenv("OXIDE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    for k in (empty, scalars):
        k.__dict__.pop("_oxide_launchers", None)
    with ox.device(0):
        yield driver


def test_scalars_of_every_type_through_a_native_binder(fake, trampoline) -> None:
    fake.formats = "QqbBhHIqQed"
    t = Tensor(0x1000, (8,))
    cfg = ox.LaunchConfig(grid=1, block=32)
    for value in (1, 2):  # the general path, then the binder
        ox.launch(scalars, cfg, t, -value, 255, -300, 65535, 2**32 - 1, -(2**40), 2**64 - 1,
                  0.5 * value, 1e300)
        assert fake.launches[-1]["args"] == [0x1000, 8, -value, 255, -300, 65535, 2**32 - 1,
                                             -(2**40), 2**64 - 1, 0.5 * value, 1e300]
    assert scalars.__dict__["_oxide_launchers"].last.flavor == "native"


def test_launches_switch_to_the_trampoline_after_the_warmup(fake, monkeypatch) -> None:
    """Without llvmlite loaded, binders launch through ctypes and count down; then the
    general path builds the trampoline once and makes native binders."""
    monkeypatch.setattr(native_launch, "_built", None)
    monkeypatch.setattr(native_launch, "_llvmlite_loaded", lambda: False)
    monkeypatch.setattr(native_launch, "warmup", [3])
    built: list[int] = []
    real = native_launch.trampoline

    def counted():
        built.append(1)
        return real()

    monkeypatch.setattr(native_launch, "trampoline", counted)
    fake.formats = "Qq"
    t = Tensor(0x1000, (8,))
    cfg = ox.LaunchConfig(grid=1, block=32)
    ox.launch(empty, cfg, t)  # general path: a warm-up binder
    launchers = empty.__dict__["_oxide_launchers"]
    assert launchers.last.flavor == "warmup" and not built
    for _ in range(3):
        ox.launch(empty, cfg, t)
    assert launchers.last.flavor == "warmup" and native_launch.warmup == [0] and not built
    ox.launch(empty, cfg, t)  # declined: the general path builds it
    assert built == [1] and launchers.last.flavor == "native"
    ox.launch(empty, cfg, t)
    assert len(fake.launches) == 6 and built == [1]


def test_without_the_trampoline_launches_keep_ctypes(fake, monkeypatch) -> None:
    def no_llvm():
        raise ImportError("no llvmlite here")

    monkeypatch.setattr(native_launch, "_built", None)
    monkeypatch.setattr(native_launch, "_build", no_llvm)
    fake.formats = "Qq"
    t = Tensor(0x1000, (8,))
    for _ in range(3):
        ox.launch(empty, ox.LaunchConfig(grid=1, block=32), t)
    assert empty.__dict__["_oxide_launchers"].last.flavor == "ctypes"
    assert native_launch.unavailable_reason() == "ImportError: no llvmlite here"
    assert len(fake.launches) == 3


def test_a_wrong_value_count_is_an_internal_error_not_a_launch(fake, trampoline) -> None:
    fake.formats = "Qq"
    ox.launch(empty, ox.LaunchConfig(grid=1, block=32), Tensor(0x1000, (8,)))
    launcher = next(iter(empty.__dict__["_oxide_launchers"].values()))
    with pytest.raises(InternalCompilerError, match="wrong number"):
        launcher.launch(ox.LaunchConfig(grid=1, block=32), 0, [0x1000])
    assert len(fake.launches) == 1
    assert gpu.launch_failure(-1, launcher).__class__ is InternalCompilerError


def test_a_kernel_with_more_values_than_the_trampoline_takes_keeps_ctypes(fake, trampoline,
                                                                          monkeypatch) -> None:
    monkeypatch.setattr(native_launch, "MAX_VALUES", 1)  # `empty` passes 2: pointer, length
    fake.formats = "Qq"
    for _ in range(3):
        ox.launch(empty, ox.LaunchConfig(grid=1, block=32), Tensor(0x1000, (8,)))
    assert empty.__dict__["_oxide_launchers"].last.flavor == "ctypes"
    assert [rec["args"] for rec in fake.launches] == [[0x1000, 8]] * 3
