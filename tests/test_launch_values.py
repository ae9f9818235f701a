"""Issue 27: what a launch takes besides the arguments, checked alike on every device.

A garbage `stream=` is an `ox.ArgumentError` on the CPU too (it once ran as if none had
been given); NumPy integers work wherever a launch, a kernel option or a host helper
takes a size (docs/runtime.md), and NumPy floats and bools are refused clearly. The GPU
side of streams is tests/test_runtime_gpu_host.py (a fake driver) and
tests/test_gpu_robustness.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import oxide as ox
from oxide import DisjointSlice, Slice, TensorMap, bf16, f32, thread, tile


@pytest.fixture(autouse=True)
def on_cpu() -> Iterator[None]:
    with ox.device("cpu"):
        yield


@ox.kernel
def double(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * 2.0


@tile.kernel(num_warps=1)
def tile_double(x: Slice[f32], out: DisjointSlice[f32]):
    t = tile.load(x, (tile.bid(0),), (32,))
    tile.store(out, (tile.bid(0),), t * 2.0)


class CoreStream:  # cuda.core's protocol
    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, 0xABC)


class TorchLikeStream:
    cuda_stream = 0xDEF


class BrokenProtocol:
    def __cuda_stream__(self) -> tuple[int, int]:
        raise RuntimeError("no stream")


class StringHandle:
    ptr = "0x10"


GARBAGE = ["default", 1.5, -1, 2**64, True, np.bool_(False), np.float32(0.0), object(),
           [0], BrokenProtocol(), StringHandle()]


@pytest.mark.parametrize("stream", GARBAGE, ids=lambda s: type(s).__name__)
def test_a_garbage_stream_is_refused_on_the_cpu(stream: object) -> None:
    x, out = np.ones(64, np.float32), np.zeros(64, np.float32)
    launches = (lambda: double[2, 32](x, out, stream=stream),
                lambda: double[2, 32, stream](x, out),
                lambda: ox.launch(double, (2, 32), x, out, stream=stream),
                lambda: tile_double[2](x, out, stream=stream))
    for launch in launches:
        with pytest.raises(ox.ArgumentError, match="stream= takes"):
            launch()
    assert not out.any()  # nothing ran


@pytest.mark.parametrize("stream", [0, 0x1234, np.uint64(7), CoreStream(), TorchLikeStream()],
                         ids=lambda s: type(s).__name__)
def test_a_stream_a_gpu_takes_is_accepted_on_the_cpu(stream: object) -> None:
    x, out = np.ones(64, np.float32), np.zeros(64, np.float32)
    double[2, 32](x, out, stream=stream)
    tile_double[2](x, out, stream=stream)
    assert (out == 2).all()


def test_tile_grids_take_numpy_integers() -> None:
    x, out = np.arange(128, dtype=np.float32), np.zeros(128, np.float32)
    for grid in (np.int64(4), (np.int64(4),), (np.int32(4), np.uint8(1)), np.uint16(4)):
        out[:] = 0
        tile_double[grid](x, out)
        assert (out == 2 * x).all(), grid
    out[:] = 0
    tile_double[(np.int64(4), TorchLikeStream())](x, out)  # (grid, stream)
    assert (out == 2 * x).all()
    assert tile.cdiv(np.int64(128), np.int32(32)) == 4
    ox.launch(tile_double, np.int64(tile.cdiv(np.int64(128), 32)), x, out)


@pytest.mark.parametrize("grid", [np.float64(4.0), 4.0, np.bool_(True), True, (2, 1.0),
                                  "4"], ids=repr)
def test_tile_grids_refuse_floats_and_bools(grid: object) -> None:
    x, out = np.ones(32, np.float32), np.zeros(32, np.float32)
    with pytest.raises(ox.LaunchError):
        tile_double[grid](x, out)
    assert not out.any()


def test_simt_launch_configs_take_numpy_integers() -> None:
    x, out = np.ones(64, np.float32), np.zeros(64, np.float32)
    double[np.int64(2), np.int32(32)](x, out)
    double[ox.LaunchConfig(grid=(np.int64(2),), block=np.uint32(32),
                           shared_mem_bytes=np.int64(0))](x, out)
    double[ox.LaunchConfig.for_num_elems(np.int64(64), block=np.int16(32))](x, out)
    assert (out == 2).all()
    for bad in ((np.float64(2), 32), (2, np.bool_(True)), (2, 32.0)):
        with pytest.raises(ox.LaunchError):
            double[bad](x, out)


def test_kernel_options_take_numpy_integers_as_plain_ints() -> None:
    @ox.kernel(block=(np.int64(32), np.int32(2)), max_threads=np.int64(64),
               stack_size=np.int64(8192))
    def k(out: DisjointSlice[f32]):
        pass

    assert k.options.block == (32, 2, 1) and type(k.options.block[0]) is int
    assert type(k.options.max_threads) is int and type(k.options.stack_size) is int

    @tile.kernel(num_warps=np.int64(2), num_stages=np.int32(2), occupancy=np.uint8(2))
    def t(out: DisjointSlice[f32]):
        tile.store(out, (tile.bid(0),), tile.zeros((64,), f32))

    opts = t.tile_options
    assert (opts.num_warps, opts.num_stages, opts.occupancy) == (2, 2, 2)
    assert all(type(v) is int for v in (opts.num_warps, opts.num_stages, opts.occupancy))
    for bad in (np.float64(2.0), np.bool_(True)):
        with pytest.raises(ox.KernelTypeError, match="num_warps"):
            tile.kernel(num_warps=bad)
        with pytest.raises(ox.KernelTypeError, match="max_threads"):
            ox.kernel(max_threads=bad)


def test_host_cdiv_takes_any_integer_and_refuses_the_rest() -> None:
    assert tile.cdiv(10, 4) == 3 and tile.cdiv(np.uint64(10), np.int8(4)) == 3
    assert type(tile.cdiv(np.int64(10), 4)) is int
    for a, b in ((2.5, 1), (4, 1.0), (np.float32(4), 2), (True, 2), (4, 0)):
        with pytest.raises(ox.ArgumentError, match="tile.cdiv"):
            tile.cdiv(a, b)


def test_devices_take_numpy_integers_and_refuse_bad_names() -> None:
    from oxide.runtime.device import parse_device

    # an integer ordinal is looked up (and found missing), not an "unknown device"
    with pytest.raises(ox.DeviceError, match="CUDA device 99 does not exist"):
        parse_device(np.int64(99))
    for bad in ("cuda:x", "cuda:", "cuda:-1", "gpu", 1.0, np.float64(0), True):
        with pytest.raises(ox.DeviceError, match="unknown device"):
            parse_device(bad)


def test_tensor_map_boxes_take_numpy_integers() -> None:
    a = np.zeros((64, 64), np.float32)
    tm = ox.TensorMap(a, (np.int64(16), np.int32(32)))
    assert tm.box == (16, 32) and all(type(b) is int for b in tm.box)
    with pytest.raises(ox.ArgumentError, match="box="):
        ox.TensorMap(a, (16.0, 32))


def test_a_tensor_map_parameter_of_a_tile_kernel_is_a_clear_error() -> None:
    @tile.kernel
    def k(a: Slice[f32], tm: TensorMap[bf16, 2], out: DisjointSlice[f32]):
        tile.store(out, (tile.bid(0),), tile.load(a, (tile.bid(0),), (16,)))

    with pytest.raises(ox.UnsupportedFeatureError, match="tile kernels do not take") as info:
        k.compile(Slice[f32], TensorMap[bf16, 2], DisjointSlice[f32])
    span = info.value.span
    assert span is not None and "tm: TensorMap[bf16, 2]" in span.text
    assert span.text[span.col:span.end_col] == "TensorMap[bf16, 2]"
