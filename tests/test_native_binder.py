"""Native binders (runtime/native_binder.py) against the fake driver: which launches they
take, and that every launch they decline still gets the Python path's result or error."""

from __future__ import annotations

import inspect
import sys
import threading
from collections.abc import Iterator

import pytest
from fake_cuda import FakeDriver, Tensor, fake_torch, float64, use_launch_flavor, write_record

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, f64, i8, i64, thread
from oxide.errors import AliasingError, ArgumentError, KernelIndexError
from oxide.runtime import device
from oxide.runtime.launch import launch as ox_launch_py


@ox.kernel
def scale(x: Slice[f32], a: f32, out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * a


@ox.kernel
def mixed(x: Slice[f32, 2], n: i8, big: i64, d: f64, B: Const[int]):
    thread.index_1d()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[FakeDriver]:
    driver = FakeDriver()
    driver.install(monkeypatch)
    use_launch_flavor(monkeypatch, "native")
    monkeypatch.setenv("OXIDE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, "torch", fake_torch(current_stream=0x77))
    monkeypatch.setattr(device.only_gpu0, "value", 1)
    monkeypatch.setattr(device, "_default", device.parse_device(0))  # a GPU machine's default
    for k in (scale, mixed):
        k.__dict__.pop("_oxide_launchers", None)
        k.__dict__.pop("_oxide_bound", None)
    yield driver


CFG = ox.LaunchConfig(grid=2, block=32)


class Counted:
    """Wraps a kernel's Python binder: counts the launches that reach it."""

    def __init__(self, kernel) -> None:
        self.launchers = kernel.__dict__["_oxide_launchers"]
        self.binder = self.launchers.last
        self.calls = 0
        self.launchers.last = self

    def __call__(self, *args):
        self.calls += 1
        return self.binder(*args)


def first_launch(fake: FakeDriver) -> tuple[Tensor, Tensor, Counted]:
    fake.formats = "QqfQq"
    x, out = Tensor(0x10000, (64,)), Tensor(0x20000, (64,))
    ox.launch(scale, CFG, x, 2.0, out)  # the general path: a binder and its native twin
    assert scale.__dict__["_oxide_launchers"].native is not None
    return x, out, Counted(scale)


def test_relaunches_go_native_with_the_same_values(fake) -> None:
    x, out, python = first_launch(fake)
    ox.launch(scale, CFG, x, 3.0, out)
    scale[CFG](x, 0.25, out)
    scale[CFG](x, -1.5, out)
    assert python.calls == 0
    assert [rec["args"] for rec in fake.launches] == [
        [0x10000, 64, a, 0x20000, 64] for a in (2.0, 3.0, 0.25, -1.5)]
    # as the general path launched it (a coarsened kernel's grid and hidden logical grid.x)
    assert len({(rec["grid"], rec["block"], rec["stream"], rec["error_record"],
                 tuple(rec["hidden"])) for rec in fake.launches}) == 1
    assert fake.launches[0]["stream"] == 0x77


def test_an_equal_config_goes_native_another_does_not(fake) -> None:
    x, out, python = first_launch(fake)
    ox.launch(scale, ox.LaunchConfig(grid=2, block=32), x, 1.0, out)
    assert python.calls == 0
    ox.launch(scale, ox.LaunchConfig(grid=64, block=32), x, 1.0, out)
    ox.launch(scale, (2, 32), x, 1.0, out)  # a tuple: as_config makes the LaunchConfig
    assert python.calls == 2 and len(fake.launches) == 4
    assert fake.launches[-2]["grid"] != fake.launches[-1]["grid"]


def test_what_differs_is_declined_and_the_python_path_answers(fake) -> None:
    x, out, python = first_launch(fake)
    with pytest.raises(AliasingError):
        ox.launch(scale, CFG, x, 1.0, x)
    overlapping = Tensor(0x10000 + 4 * 32, (64,))  # shares half of x
    with pytest.raises(AliasingError):
        ox.launch(scale, CFG, x, 1.0, overlapping)
    with pytest.raises(ArgumentError):
        ox.launch(scale, CFG, Tensor(0x10000, (64,), dtype=float64), 1.0, out)
    with pytest.raises(ArgumentError):
        ox.launch(scale, CFG, x, 1e39, out)  # beyond f32
    with pytest.raises(ArgumentError):
        ox.launch(scale, CFG, Tensor(0x10002, (64,)), 1.0, out)  # misaligned
    with pytest.raises(ox.KernelTypeError, match="rank-2 array"):  # a plan of rank 2
        ox.launch(scale, CFG, Tensor(0x30000, (8, 8)), 1.0, out)
    assert len(fake.launches) == 1  # none of those launched
    ox.launch(scale, CFG, x, 1, out)  # an int for f32: the Python binder converts it
    ox.launch(scale, CFG, x, 1.0, out, stream=0x55)
    assert [rec["stream"] for rec in fake.launches[1:]] == [0x77, 0x55]
    assert python.calls == 7  # then the int made a binder of its own, which launched both


def test_ints_out_of_their_range_and_consts_of_another_value(fake) -> None:
    fake.formats = "Qqqbqd"
    x = Tensor(0x40000, (4, 8))
    ox.launch(mixed, CFG, x, -128, 2**63 - 1, 0.5, 16)
    launchers = mixed.__dict__["_oxide_launchers"]
    assert launchers.native is not None
    python = Counted(mixed)
    ox.launch(mixed, CFG, x, 127, -(2**63), -2.0, 16)
    assert python.calls == 0
    with pytest.raises(ArgumentError):
        ox.launch(mixed, CFG, x, 128, 0, 0.0, 16)  # beyond i8
    with pytest.raises(ArgumentError):
        ox.launch(mixed, CFG, x, 0, 2**63, 0.0, 16)  # beyond i64
    ox.launch(mixed, CFG, x, 0, 0, 0.0, 32)  # another Const: another specialization
    assert python.calls == 3
    assert [rec["args"] for rec in fake.launches] == [
        [0x40000, 4, 8, -128, 2**63 - 1, 0.5], [0x40000, 4, 8, 127, -(2**63), -2.0],
        [0x40000, 4, 8, 0, 0, 0.0]]


def test_a_filled_error_record_is_raised_by_the_next_launch(fake) -> None:
    x, out, python = first_launch(fake)
    launcher = next(iter(scale.__dict__["_oxide_launchers"].values()))
    write_record(launcher.record.address, 1, 0, 0, 70, 64)
    with pytest.raises(KernelIndexError):
        ox.launch(scale, CFG, x, 1.0, out)
    ox.launch(scale, CFG, x, 1.0, out)  # the record was cleared: native again
    assert python.calls == 1 and len(fake.launches) == 2


def test_after_a_synchronize_the_launcher_is_activated_again(fake) -> None:
    x, out, python = first_launch(fake)
    launcher = next(iter(scale.__dict__["_oxide_launchers"].values()))
    gdev = launcher.gdev
    ox.synchronize()
    assert not launcher.active and gdev.record_table.count == 0
    ox.launch(scale, CFG, x, 1.0, out)
    assert launcher.active and launcher.native_context.active == 1
    assert gdev.record_table.count == 1 and python.calls == 0


def test_a_thread_on_another_device_turns_native_binders_off_while_it_does(fake) -> None:
    x, out, python = first_launch(fake)
    chose, release = threading.Event(), threading.Event()

    def elsewhere() -> None:
        with ox.device("cpu"):
            chose.set()
            release.wait()

    t = threading.Thread(target=elsewhere)
    t.start()
    chose.wait()
    try:
        assert device.only_gpu0.value == 0
        ox.launch(scale, CFG, x, 1.0, out)  # here: still GPU 0, by the Python path
        assert python.calls == 1
    finally:
        release.set()
        t.join()
    assert device.only_gpu0.value == 1
    ox.launch(scale, CFG, x, 1.0, out)
    assert python.calls == 1 and len(fake.launches) == 3


def test_a_driver_error_goes_to_the_python_path_which_raises_it(fake, monkeypatch) -> None:
    x, out, python = first_launch(fake)
    real = fake.launch_ex
    monkeypatch.setattr(fake, "launch_ex", lambda *a: 1)  # CUDA_ERROR_INVALID_VALUE
    with pytest.raises(ox.DeviceError, match="CUDA_ERROR_1"):
        ox.launch(scale, CFG, x, 1.0, out)
    monkeypatch.setattr(fake, "launch_ex", real)
    assert python.calls == 1


def test_arguments_it_does_not_cover_keep_the_python_binder(fake) -> None:
    fake.formats = "QqfQq"
    x, out = Tensor(0x10000, (64,)), Tensor(0x20000, (64,))
    ox.launch(scale, CFG, x, 2, out)  # an int for an f32 parameter: converted in Python
    launchers = scale.__dict__["_oxide_launchers"]
    assert launchers.native is None and launchers.last.flavor == "native"
    ox.launch(scale, CFG, x, 3, out)
    assert [rec["args"][2] for rec in fake.launches] == [2.0, 3.0]


def test_ox_launch_and_kernel_config_are_native_entries_with_the_same_interface(fake) -> None:
    x, out, python = first_launch(fake)
    assert type(ox.launch).__name__ == "builtin_function_or_method"
    assert list(inspect.signature(ox.launch).parameters) == list(
        inspect.signature(ox_launch_py).parameters)
    assert ox.launch.__doc__.startswith("Launch `kernel` over `config`")
    bound = scale[CFG]
    assert type(bound).__name__ == "builtin_function_or_method" and scale[CFG] is bound
    bound(x, 0.5, out)
    ox.launch(scale, CFG, x, a=1.5, out=out)  # by name: the Python function takes it
    bound(x, 2.5, out=out)
    bound(x, 3.5, out, stream=0x66)
    assert [rec["args"][2] for rec in fake.launches] == [2.0, 0.5, 1.5, 2.5, 3.5]
    assert fake.launches[-1]["stream"] == 0x66
    with pytest.raises(AliasingError):
        bound(x, 1.0, x)
    with pytest.raises(ox.LaunchError, match="takes an @ox.kernel"):
        ox.launch(len, CFG, x)
    with pytest.raises(TypeError):
        ox.launch(scale)
    assert python.calls == 4  # by name (2), the stream, the aliasing


@ox.tile.kernel(num_warps=4)
def tile_scale(x: Slice[f32, 2], out: DisjointSlice[f32, 2], a: f32, BN: Const[int]):
    i = ox.tile.bid(0)
    ox.tile.store(out, (i, 0), ox.tile.load(x, (i, 0), (1, BN)) * a)


def test_a_tile_kernels_grid_launch_goes_native(fake) -> None:
    tile_scale.__dict__.pop("_oxide_launchers", None)
    tile_scale.__dict__.pop("_oxide_bound", None)
    fake.formats = "QqqQqqf"
    x, out = Tensor(0x10000, (8, 64)), Tensor(0x20000, (8, 64))
    tile_scale[8](x, out, 2.0, 64)
    python = Counted(tile_scale)
    tile_scale[8](x, out, 3.0, 64)
    assert type(tile_scale[8]).__name__ == "builtin_function_or_method"
    assert python.calls == 0
    ox.launch(tile_scale, 8, x, out, 4.0, 64)  # a config made per launch: the Python path
    assert python.calls == 1
    assert [rec["args"][-1] for rec in fake.launches] == [2.0, 3.0, 4.0]
    assert {rec["block"] for rec in fake.launches} == {(128, 1, 1)}


@ox.kernel
def scale_by_0d(s: Slice[f32, 0], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = s[()]


def test_a_0d_tensor_goes_native(fake) -> None:
    """A 0-d tensor: its shape is `()`, one element (the binder's row is that element, no
    16-byte rows, as fits_vectors says)."""
    scale_by_0d.__dict__.pop("_oxide_launchers", None)
    fake.formats = "QQq"
    s, out = Tensor(0x10000, ()), Tensor(0x20000, (64,))
    ox.launch(scale_by_0d, CFG, s, out)
    python = Counted(scale_by_0d)
    ox.launch(scale_by_0d, CFG, Tensor(0x30000, ()), out)
    assert python.calls == 0
    assert [rec["args"][:2] for rec in fake.launches] == [[0x10000, 0x20000],
                                                          [0x30000, 0x20000]]
    with pytest.raises(ArgumentError, match="rank"):
        ox.launch(scale_by_0d, CFG, Tensor(0x30000, (1,)), out)
