"""The GPU relaunch fast path (runtime/fastpath.py) against the fake driver: binders and
their fallbacks to the general path, with torch-like tensors (tests/fake_cuda.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import numpy as np
import pytest
from fake_cuda import FakeDriver, Tensor, fake_torch, float64, int32, use_launch_flavor

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, i32, thread, tile
from oxide.runtime import gpu, gpu_devices


@ox.kernel
def scale(x: Slice[f32], a: f32, out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * a


@ox.kernel
def grid2(x: Slice[f32, 2], n: i32, out: DisjointSlice[f32, 2]):
    i = thread.index_2d()
    if i in out:
        out[i] = x[i] + f32(n)


@ox.kernel
def blocked(x: Slice[f32], B: Const[int]):
    thread.index_1d()


@tile.kernel
def tile_copy(x: Slice[f32, 2], out: DisjointSlice[f32, 2], BN: Const[int]):
    i = tile.bid(0)
    tile.store(out, (i, 0), tile.load(x, (i, 0), (1, BN)))


@pytest.fixture(params=["native", "ctypes"])
def fake(request, monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[FakeDriver]:
    """The fake driver, with launches through the native trampoline or through ctypes."""
    driver = FakeDriver()
    driver.install(monkeypatch)
    use_launch_flavor(monkeypatch, request.param)
    monkeypatch.setenv("OXIDE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, "torch", fake_torch(current_stream=0x77))
    for k in (scale, grid2, blocked, tile_copy):
        k.__dict__.pop("_oxide_launchers", None)
        k.__dict__.pop("_oxide_bound", None)
    with ox.device(0):
        yield driver


CFG = ox.LaunchConfig(grid=1, block=32)


def test_relaunch_takes_the_binder_with_new_pointers_and_extents(fake, general) -> None:
    fake.formats = "QqfQq"
    ox.launch(scale, CFG, Tensor(0x1000, (8,)), 2.0, Tensor(0x2000, (8,)))
    assert len(general) == 1 and scale.__dict__["_oxide_launchers"].last is not gpu.no_binder
    ox.launch(scale, CFG, Tensor(0x3000, (100,)), 3.0, Tensor(0x4000, (100,)))
    scale[CFG](Tensor(0x5000, (7,)), 0.5, Tensor(0x6000, (7,)))
    assert len(general) == 1
    assert [rec["args"] for rec in fake.launches] == [
        [0x1000, 8, 2.0, 0x2000, 8], [0x3000, 100, 3.0, 0x4000, 100],
        [0x5000, 7, 0.5, 0x6000, 7]]
    assert {rec["stream"] for rec in fake.launches} == {0x77}  # torch's current stream
    ox.launch(scale, CFG, Tensor(0x1000, (8,)), 1.0, Tensor(0x2000, (8,)), stream=0x99)
    assert fake.launches[-1]["stream"] == 0x99 and len(general) == 1
    for _ in range(2):  # an int for the f32: another type key, so one more general launch
        ox.launch(scale, CFG, Tensor(0x1000, (8,)), 3, Tensor(0x2000, (8,)))
    assert fake.launches[-1]["args"][2] == 3.0 and len(general) == 2


def test_dtype_change_is_an_argument_error(fake, general) -> None:
    fake.formats = "QqfQq"
    ox.launch(scale, CFG, Tensor(0x1000, (8,)), 2.0, Tensor(0x2000, (8,)))
    with pytest.raises(ox.ArgumentError, match="`x` is Slice\\[f32\\]; got an array of f64"):
        ox.launch(scale, CFG, Tensor(0x1000, (8,), dtype=float64), 2.0, Tensor(0x2000, (8,)))
    with pytest.raises(ox.ArgumentError, match="`out` .* got an array of i32"):
        ox.launch(scale, CFG, Tensor(0x1000, (8,)), 2.0, Tensor(0x2000, (8,), dtype=int32))
    with pytest.raises(ox.ArgumentError, match="rank 0 to 4"):  # Slice[f32]: any rank 0-4
        ox.launch(scale, CFG, Tensor(0x1000, (2, 2, 2, 2, 2)), 2.0, Tensor(0x2000, (8,)))
    with pytest.raises(ox.ArgumentError, match="has 3 parameters"):
        ox.launch(scale, CFG, Tensor(0x1000, (8,)), 2.0)
    assert len(fake.launches) == 1


@pytest.mark.parametrize("devices", [1, 2])
def test_binder_declines_a_tensor_on_another_device(fake, general, monkeypatch,
                                                    devices) -> None:
    """With one GPU the binder reads `is_cuda` (a CPU tensor is the only other kind);
    with several, `get_device()`, and the general path names the device."""
    from oxide.runtime.device import current_device

    monkeypatch.setattr(gpu_devices, "cuda_device_count", lambda: devices)
    fake.formats = "QqfQq"
    ox.launch(scale, CFG, Tensor(0x1000, (8,)), 2.0, Tensor(0x2000, (8,)))
    binder = scale.__dict__["_oxide_launchers"].last
    assert ("is_cuda" in binder.source) == (devices == 1)
    other = Tensor(0x1000, (8,), device=-1 if devices == 1 else 1)
    assert binder(CFG, (other, 2.0, Tensor(0x2000, (8,))), None, current_device()) is False
    if devices == 2:
        with pytest.raises(ox.ArgumentError, match="`x` is on cuda:1"):
            ox.launch(scale, CFG, other, 2.0, Tensor(0x2000, (8,)))
    assert len(fake.launches) == 1


def test_strided_after_contiguous_makes_a_new_plan(fake, general) -> None:
    fake.formats = "Qqqiqqq"
    ox.launch(grid2, CFG, Tensor(0x1000, (4, 6)), 1, Tensor(0x2000, (4, 6)))
    assert fake.launches[-1]["args"] == [0x1000, 4, 6, 1, 0x2000, 4, 6]
    fake.formats = "Qqqqqiqqq"
    column_view = Tensor(0x1000, (4, 3), strides=(6, 2))
    ox.launch(grid2, CFG, column_view, 2, Tensor(0x2000, (4, 3)))
    assert fake.launches[-1]["args"] == [0x1000, 4, 3, 6, 2, 2, 0x2000, 4, 3]
    assert len(general) == 2 and len(grid2.__dict__["_oxide_launchers"]) == 2  # a new plan
    ox.launch(grid2, CFG, Tensor(0x5000, (8, 2), strides=(4, 1)), 3, Tensor(0x2000, (8, 2)))
    assert fake.launches[-1]["args"] == [0x5000, 8, 2, 4, 1, 3, 0x2000, 8, 2]
    fake.formats = "Qqqiqqq"
    ox.launch(grid2, CFG, Tensor(0x1000, (2, 2)), 4, Tensor(0x2000, (2, 2)))
    assert fake.launches[-1]["args"] == [0x1000, 2, 2, 4, 0x2000, 2, 2]
    fake.formats = "Qqqqqiqqq"
    ox.launch(grid2, CFG, column_view, 5, Tensor(0x2000, (4, 3)))
    assert fake.launches[-1]["args"] == [0x1000, 4, 3, 6, 2, 5, 0x2000, 4, 3]
    assert len(general) == 2  # both layouts keep their binders under the one type key


def test_broadcast_writable_view_is_caught_on_the_fast_path(fake) -> None:
    fake.formats = "Qqqiqqqqq"
    ox.launch(grid2, CFG, Tensor(0x1000, (4, 3)), 1, Tensor(0x2000, (4, 3), strides=(6, 2)))
    with pytest.raises(ox.ArgumentError, match="`out` is writable but has a zero stride"):
        ox.launch(grid2, CFG, Tensor(0x1000, (4, 3)), 1, Tensor(0x2000, (4, 3), strides=(0, 2)))


def test_aliasing_still_raises(fake, general) -> None:
    fake.formats = "QqfQq"
    ox.launch(scale, CFG, Tensor(0x1000, (8,)), 2.0, Tensor(0x2000, (8,)))
    with pytest.raises(ox.AliasingError, match="`out` .* overlaps `x`"):
        ox.launch(scale, CFG, Tensor(0x1000, (8,)), 2.0, Tensor(0x1000 + 28, (8,)))
    ox.launch(scale, CFG, Tensor(0x1000, (8,)), 2.0, Tensor(0x1000 + 32, (8,)))  # neighbours
    ox.launch(scale, CFG, Tensor(0x1000, (0,)), 2.0, Tensor(0x1000, (8,)))  # empty: no bytes
    assert len(fake.launches) == 3


@pytest.mark.parametrize("a, message", [(1e40, "`a` is f32, whose largest value is"),
                                        ("2", "`a` is a scalar \\(f32\\); got str")])
def test_scalar_errors_on_the_fast_path(fake, a, message) -> None:
    fake.formats = "QqfQq"
    ox.launch(scale, CFG, Tensor(0x1000, (8,)), 2.0, Tensor(0x2000, (8,)))
    with pytest.raises(ox.ArgumentError, match=message):
        ox.launch(scale, CFG, Tensor(0x1000, (8,)), a, Tensor(0x2000, (8,)))
    ox.launch(scale, CFG, Tensor(0x1000, (8,)), float("inf"), Tensor(0x2000, (8,)))
    assert fake.launches[-1]["args"][2] == float("inf")


def test_int_scalar_out_of_range(fake) -> None:
    fake.formats = "Qqqiqqq"
    x, out = Tensor(0x1000, (2, 2)), Tensor(0x2000, (2, 2))
    ox.launch(grid2, CFG, x, 1, out)
    with pytest.raises(ox.ArgumentError, match="`n` is i32, whose range is"):
        ox.launch(grid2, CFG, x, 2**40, out)
    with pytest.raises(ox.ArgumentError, match="`n` is i32; got the float 1.5"):
        ox.launch(grid2, CFG, x, 1.5, out)
    ox.launch(grid2, CFG, x, -(2**31), out)
    assert fake.launches[-1]["args"][3] == -(2**31)


def test_const_values_keep_their_own_specializations(fake, general) -> None:
    fake.formats = "Qq"
    x = Tensor(0x1000, (8,))
    for b in (4, 8, 4, 8):
        ox.launch(blocked, CFG, x, b)
    first, second, third, fourth = (rec["function"] for rec in fake.launches)
    assert first != second and first == third and second == fourth
    assert len(general) == 2


def test_device_arrays_take_the_fast_path(fake, general) -> None:
    fake.formats = "QqfQq"
    x, y = ox.zeros(8), ox.zeros(8)
    scale[CFG](x, 1.0, y)
    big_x, big_y = ox.zeros(64), ox.zeros(64)
    scale[CFG](big_x, 1.0, big_y)
    assert fake.launches[-1]["args"] == [big_x.data_ptr, 64, 1.0, big_y.data_ptr, 64]
    assert len(general) == 1
    with pytest.raises(ox.AliasingError):
        scale[CFG](x, 1.0, x)
    with pytest.raises(ox.ArgumentError, match="got an array of f64"):
        scale[CFG](ox.zeros(8, ox.f64), 1.0, y)


def test_host_arrays_always_take_the_general_path(fake, general) -> None:
    import warnings

    fake.formats = "QqfQq"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            scale[CFG](np.zeros(8, np.float32), 1.0, np.zeros(8, np.float32))
    assert len(general) == 2 and not scale.__dict__["_oxide_launchers"].fast


def test_kernel_getitem_reuses_the_bound_launch(fake) -> None:
    assert scale[CFG] is scale[CFG]
    assert scale[ox.LaunchConfig(grid=1, block=32)] is not scale[CFG]
    fake.formats = "QqfQq"
    x, y = Tensor(0x1000, (8,)), Tensor(0x2000, (8,))
    for _ in range(2):
        scale[2, 64](x, 1.0, y)
    assert fake.launches[-1]["block"] == (64, 1, 1)
    scale[ox.LaunchConfig(grid=3, block=32, shared_mem_bytes=64)](x, 1.0, y)
    scale[ox.LaunchConfig(grid=3, block=32, shared_mem_bytes=64)](x, 1.0, y)  # equal, made anew
    assert fake.launches[-1]["block"] == (32, 1, 1) and fake.launches[-1]["shmem"] == 64
    with pytest.raises(ox.LaunchError, match="block.z = 65 exceeds"):
        scale[1, (1, 1, 65)](x, 1.0, y)


def test_kernel_errors_are_checked_on_the_fast_path(fake) -> None:
    from fake_cuda import write_record

    fake.formats = "QqfQq"
    x, y = Tensor(0x1000, (8,)), Tensor(0x2000, (8,))
    scale[CFG](x, 1.0, y)
    scale[CFG](x, 1.0, y)
    write_record(fake.launches[-1]["error_record"], 1, 0, 0, 9, 8)
    with pytest.raises(ox.KernelIndexError, match="index 9"):
        scale[CFG](x, 1.0, y)
    scale[CFG](x, 1.0, y)  # cleared


def test_launch_config_fast_paths_keep_the_checks() -> None:
    assert ox.LaunchConfig(grid=(4, 2), block=(16, 16)).block == (16, 16, 1)
    assert ox.LaunchConfig(grid=(1, 2, 3), block=8).grid == (1, 2, 3)
    for grid, block, message in [((0, 1), 1, "grid dimensions must be positive"),
                                 ((True, 1), 1, "grid dimensions must be positive"),
                                 (1, (1, 2.0), "block dimensions must be positive"),
                                 (1, 2048, "at most 1024 threads"),
                                 (-1, 1, "grid dimensions must be positive"),
                                 ((1, 2, 3, 4), 1, "a tuple of 1 to 3 ints")]:
        with pytest.raises(ox.LaunchError, match=message):
            ox.LaunchConfig(grid=grid, block=block)
    with pytest.raises(ox.LaunchError, match="shared_mem_bytes"):
        ox.LaunchConfig(shared_mem_bytes=-1)
    cfg = ox.LaunchConfig(grid=2, block=32)
    assert cfg == ox.LaunchConfig(grid=(2,), block=(32, 1, 1)) and hash(cfg)
    with pytest.raises(AttributeError):
        cfg.grid = (1, 1, 1)  # type: ignore[misc]


def test_a_coarsened_kernel_runs_fewer_blocks_and_gets_the_logical_grid(fake, general) -> None:
    """The launch runs ceil(grid.x / factor) blocks and passes the logical grid.x as the
    last hidden parameter, also when the config changes."""
    from oxide.codegen.coarsen import FACTOR

    fake.formats, fake.hidden_formats = "QqfQq", "QI"
    x, y = Tensor(0x1000, (8,)), Tensor(0x2000, (8,))
    for n in (10, 7, 10, 1, 2**31 - 1):
        ox.launch(scale, ox.LaunchConfig(grid=n, block=32), x, 2.0, y)
        launcher = next(iter(scale.__dict__["_oxide_launchers"].values()))
        assert launcher.grid_x_factor == FACTOR > 1
        assert fake.launches[-1]["grid"] == (-(-n // FACTOR), 1, 1)
        assert fake.launches[-1]["hidden"] == [n]
    assert len(general) == 1  # the first launch; the binder took the others


def test_a_thread_without_a_current_context_gets_one_and_the_launch(fake, general) -> None:
    """One GPU: binders do not test the context first; the driver's
    CUDA_ERROR_INVALID_CONTEXT makes the launcher set it and launch again."""
    fake.formats = "QqfQq"
    ox.launch(scale, CFG, Tensor(0x1000, (8,)), 2.0, Tensor(0x2000, (8,)))
    fake.ctx = 0  # as in a thread that never used CUDA
    gpu._tls.ctx = None
    ox.launch(scale, CFG, Tensor(0x3000, (8,)), 3.0, Tensor(0x4000, (8,)))
    assert fake.ctx == 0x1000 and len(general) == 1
    assert [rec["args"][0] for rec in fake.launches] == [0x1000, 0x3000]


def test_tile_binder_declines_rows_that_change_vector_fit(fake, general) -> None:
    """A tile kernel's binder re-tests `fits_vectors` (ArrayType.vectors) on every launch:
    a tensor whose rows stop fitting 16-byte vectors (a base 4 bytes off, a row of 63 f32)
    takes the general path to its own specialization; the aligned one's binder stays."""
    fake.formats = "QqqQqq"
    ox.launch(tile_copy, 4, Tensor(0x1000, (4, 64)), Tensor(0x2000, (4, 64)), 64)
    ox.launch(tile_copy, 4, Tensor(0x3000, (4, 64)), Tensor(0x4000, (4, 64)), 64)
    assert len(general) == 1
    ox.launch(tile_copy, 4, Tensor(0x1004, (4, 64)), Tensor(0x2000, (4, 64)), 64)
    assert len(general) == 2
    ox.launch(tile_copy, 4, Tensor(0x1000, (4, 63)), Tensor(0x2000, (4, 63)), 64)
    assert len(general) == 3
    ox.launch(tile_copy, 4, Tensor(0x5000, (4, 64)), Tensor(0x6000, (4, 64)), 64)
    ox.launch(tile_copy, 4, Tensor(0x5004, (4, 64)), Tensor(0x6000, (4, 64)), 64)
    assert len(general) == 3  # both kinds keep their binders under the one type key
    assert [rec["args"][0] for rec in fake.launches] == [0x1000, 0x3000, 0x1004, 0x1000,
                                                         0x5000, 0x5004]
    vectors = {key[0][0].vectors for key in tile_copy._specializations}
    assert vectors == {True, False}


@ox.kernel
def fill_from_0d(s: Slice[f32, 0], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = s[()]


@tile.kernel
def tile_fill_from_0d(s: Slice[f32, 0], out: DisjointSlice[f32], B: Const[int]):
    i = tile.bid(0)
    tile.store(out, (i,), tile.load(s, (), ()) + tile.zeros((B,), f32))


def test_a_0d_tensor_takes_the_binder(fake, general) -> None:
    """A 0-d tensor (shape `()`): its pointer alone; a tile kernel's specialization says it
    has no 16-byte rows. Another rank goes to the general path, which refuses it."""
    for k in (fill_from_0d, tile_fill_from_0d):
        k.__dict__.pop("_oxide_launchers", None)
        k.__dict__.pop("_oxide_bound", None)
    fake.formats = "QQq"
    out = Tensor(0x2000, (64,))
    for s in (0x1000, 0x3000):
        ox.launch(fill_from_0d, CFG, Tensor(s, ()), out)
    fake.formats = "QQq"
    tile_fill_from_0d[2](Tensor(0x1000, ()), out, 32)
    tile_fill_from_0d[2](Tensor(0x5000, ()), out, 32)
    assert len(general) == 2  # one first launch per kernel
    assert [rec["args"][:2] for rec in fake.launches] == [
        [0x1000, 0x2000], [0x3000, 0x2000], [0x1000, 0x2000], [0x5000, 0x2000]]
    with pytest.raises(ox.ArgumentError, match="rank"):
        ox.launch(fill_from_0d, CFG, Tensor(0x1000, (1,)), out)
