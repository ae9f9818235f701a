"""0-d arrays (rank 0: one element, indexed `()`), in SIMT and tile kernels, on the CPU:
reads, atomics, tile stores from one block, 0-d views, the safety rules that refuse what
would race, and the GPU code they compile to (assembled by nvJitLink, no GPU needed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import oxide as ox
from oxide import AtomicSlice, Const, DisjointSlice, RawSlice, Slice, f32, i32, tile

pytestmark = pytest.mark.usefixtures("cpu")


@pytest.fixture
def cpu():
    with ox.device("cpu"):
        yield


@ox.kernel
def simt_total(x: Slice[f32], out: AtomicSlice[f32, 0]):
    i = ox.thread.index_1d()
    if i in x:
        ox.atomic.add(out, (), x[i])


@ox.kernel
def simt_scale(s: Slice[f32, 0], x: Slice[f32], out: DisjointSlice[f32]):
    i = ox.thread.index_1d()
    if i in out:
        out[i] = x[i] * s[()]


@ox.kernel
def simt_first_thread(out: RawSlice[i32, 0]):
    if ox.thread.index_1d() == 0:
        with ox.unsafe():
            out[()] = 7


def test_simt_threads_combine_into_a_0d_atomic_slice() -> None:
    x = np.arange(1000, dtype=np.float32)
    out = np.zeros((), np.float32)
    simt_total[8, 128](x, out)
    assert out.shape == () and out == x.sum()


def test_simt_reads_a_0d_slice() -> None:
    x = np.arange(100, dtype=np.float32)
    out = np.zeros_like(x)
    simt_scale[1, 128](np.array(2.5, np.float32), x, out)
    np.testing.assert_array_equal(out, x * 2.5)


def test_simt_writes_a_0d_raw_slice_under_unsafe() -> None:
    out = np.zeros((), np.int32)
    simt_first_thread[2, 32](out)
    assert out == 7


def test_a_0d_disjoint_slice_write_is_refused_in_simt() -> None:
    """Every thread would write its one element: the error points to an AtomicSlice,
    also where the block shape is declared (no index map makes it one thread's)."""
    def write(out: DisjointSlice[f32, 0]):
        out[()] = 1.0

    for k in (ox.kernel(write), ox.kernel(block=(32, 1, 1))(write)):
        with pytest.raises(ox.SafetyError, match="0-d DisjointSlice") as info:
            k.compile(DisjointSlice[f32, 0])
        assert "ox.atomic.add(out, (), value)" in info.value.hint


def test_a_rank_mismatch_names_both_ranks() -> None:
    with pytest.raises(ox.ArgumentError, match=r"AtomicSlice\[f32, 0\]; got an array of rank 1"):
        simt_total[1, 32](np.ones(3, np.float32), np.zeros(1, np.float32))


def test_to_device_keeps_a_0d_array() -> None:
    d = ox.to_device(np.array(5.0, np.float32))
    assert d.shape == () and d.to_numpy() == 5.0


@tile.kernel
def tile_total(x: Slice[f32], out: AtomicSlice[f32, 0], B: Const[int]):
    tile.atomic_add(out, (), tile.sum(tile.load(x, (tile.bid(0),), (B,), padding=0.0)))


@tile.kernel
def tile_max(x: Slice[f32], out: DisjointSlice[f32, 0], B: Const[int]):
    tile.store(out, (), tile.max(tile.load(x, (0,), (B,), padding=-math.inf)))


@tile.kernel
def tile_scale(s: Slice[f32, 0], x: Slice[f32], out: DisjointSlice[f32], B: Const[int]):
    i = tile.bid(0)
    tile.store(out, (i,), tile.load(x, (i,), (B,)) * tile.load(s, (), ()))


@tile.kernel
def tile_views(x: Slice[f32], out: DisjointSlice[f32]):
    """`x[i]` of a rank-1 array: the 0-d array of element i (read), `out[i]` (written)."""
    i = tile.bid(0)
    tile.store(out[i], (), tile.load(x[i], (), ()) * 3.0)


def test_tile_blocks_combine_into_a_0d_atomic_slice() -> None:
    x = np.arange(1000, dtype=np.float32)
    out = np.zeros((), np.float32)
    tile_total[8](x, out, 128)
    assert out == x.sum()


def test_one_tile_block_stores_a_0d_result() -> None:
    x = np.random.default_rng(3).standard_normal(100).astype(np.float32)
    out = np.zeros((), np.float32)
    tile_max[1](x, out, 128)
    assert out == x.max()


def test_several_blocks_storing_a_0d_result_are_refused_at_launch() -> None:
    with pytest.raises(ox.LaunchError, match="constant indices only") as info:
        tile_max[4](np.ones(100, np.float32), np.zeros((), np.float32), 128)
    assert "grid 1" in str(info.value) and "tile.atomic_add" in str(info.value)


def test_a_tile_kernel_reads_a_0d_slice() -> None:
    x = np.arange(256, dtype=np.float32)
    out = np.zeros_like(x)
    tile_scale[2](np.array(-2.0, np.float32), x, out, 128)
    np.testing.assert_array_equal(out, -2.0 * x)


def test_a_full_index_view_is_a_0d_array() -> None:
    x = np.arange(6, dtype=np.float32)
    out = np.zeros_like(x)
    tile_views[6](x, out)
    np.testing.assert_array_equal(out, 3 * x)


def test_a_view_takes_no_more_indices_than_the_rank() -> None:
    def over(x: Slice[f32], out: DisjointSlice[f32]):
        tile.store(out, (0,), tile.load(x[0, 0], (), ()))

    with pytest.raises(ox.KernelTypeError, match="at most 1 index, not 2"):
        tile.kernel(over).compile(Slice[f32], DisjointSlice[f32])


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_0d_kernels_assemble_for_the_gpu(arch) -> None:
    """Their PTX addresses the one element at the array's pointer, with no bounds check:
    nvJitLink's ptxas takes it."""
    for k, sig in ((simt_total, (Slice[f32], AtomicSlice[f32, 0])),
                   (simt_scale, (Slice[f32, 0], Slice[f32], DisjointSlice[f32])),
                   (tile_total, (Slice[f32], AtomicSlice[f32, 0], 128)),
                   (tile_max, (Slice[f32], DisjointSlice[f32, 0], 128)),
                   (tile_views, (Slice[f32], DisjointSlice[f32]))):
        assert k.compile(*sig, arch=arch).cubin.startswith(b"\x7fELF")


def test_0d_misuse_gets_a_diagnostic() -> None:
    def simt_len(s: Slice[f32, 0], out: DisjointSlice[f32]):
        i = ox.thread.index_1d()
        if i in out:
            out[i] = f32(len(s))

    def simt_index(s: Slice[f32, 0], out: DisjointSlice[f32]):
        i = ox.thread.index_1d()
        if i in out:
            out[i] = s[0]

    def tile_shape(s: Slice[f32, 0], out: DisjointSlice[f32], B: Const[int]):
        tile.store(out, (0,), tile.zeros((B,), f32) + s.shape[0])

    for fn, decorate, extra, message in (
            (simt_len, ox.kernel, (), r"len\(\) of the 0-d array `s`"),
            (simt_index, ox.kernel, (), r"index it with `\(\)`, not 1 integer"),
            (tile_shape, tile.kernel, (4,), r"0-d array: its `shape` is `\(\)`")):
        with pytest.raises(ox.KernelTypeError, match=message):
            decorate(fn).compile(Slice[f32, 0], DisjointSlice[f32], *extra)
