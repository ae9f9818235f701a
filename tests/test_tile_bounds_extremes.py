"""Issue 27: tile loads and stores at extreme tile indices read padding and write nothing.

A tile's start is `index * shape` in 64 bits. At a tile index of 2**54 with 1024-element
tiles that product wraps to 0: the load once read element 0 instead of the padding, an
`unsafe` RawSlice store wrote `[0:1024]`, and at `2**63 - 1` the CPU process crashed
(an illegal address on the GPU). The bounds test now holds without overflow
(tile/access.py `_rooms`); these check it on the CPU, against exact Python integers, for
1-D and 2-D tiles, `order=`, vector and element accesses, and indices from constants and
from i32, u32, i64 and u64 parameters; and that SIMT bounds checks hold at the same
indices. tests/test_gpu_robustness.py runs them on a GPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import oxide as ox
from oxide import DisjointSlice, RawSlice, Slice, f32, i64, thread, tile

I = ox.TypeVar("I")  # noqa: E741 - the index dtype, one specialization each
N = 256  # 1-D tile
R, C = 8, 64  # 2-D tile
PAD = -1.0
SENTINEL = -7.0

# 2**56 * N and 2**61 * R wrap to 0; 2**54 * 1024 did in the issue
EXTREMES = [2**54, 2**54 + 3, 2**56, 2**61, 2**62, 2**63 - 1, -(2**63), -1, -(2**53)]
BY_DTYPE = {
    np.int64: EXTREMES,
    np.int32: [2**31 - 1, -(2**31), -1],
    np.uint32: [2**32 - 1, 2**31],
    np.uint64: [2**64 - 1, 2**63, 2**63 + 2**54, 2**54, 2**56, 2**61],
}


@pytest.fixture(autouse=True)
def on_cpu() -> Iterator[None]:
    with ox.device("cpu"):
        yield


@tile.kernel(num_warps=2)
def load_1d(a: Slice[f32], i: I, out: DisjointSlice[f32]):
    tile.store(out, (tile.bid(0),), tile.load(a, (i,), (N,), padding=PAD))


@tile.kernel(num_warps=2)
def store_1d(a: Slice[f32], i: I, out: RawSlice[f32]):
    t = tile.load(a, (0,), (N,))
    with ox.unsafe():
        tile.store(out, (i,), t)


@tile.kernel(num_warps=2)
def load_2d(a: Slice[f32, 2], i: I, j: I, out: DisjointSlice[f32, 2]):
    tile.store(out, (tile.bid(0), 0), tile.load(a, (i, j), (R, C), padding=PAD))


@tile.kernel(num_warps=2)
def load_2d_transposed(a: Slice[f32, 2], i: I, j: I, out: DisjointSlice[f32, 2]):
    # tile dimension 0 walks array dimension 1: a's (R, C) tile at (i, j), transposed
    tile.store(out, (tile.bid(0), 0), tile.load(a, (j, i), (C, R), padding=PAD, order=(1, 0)))


@tile.kernel(num_warps=2)
def store_2d(a: Slice[f32, 2], i: I, j: I, out: RawSlice[f32, 2]):
    t = tile.load(a, (0, 0), (R, C))
    with ox.unsafe():
        tile.store(out, (i, j), t)


@tile.kernel(num_warps=2)
def load_constant_indices(a: Slice[f32], out: DisjointSlice[f32, 2]):
    tile.store(out, (0, 0), tile.load(a, (2**54,), (N,), padding=PAD)[None, :])
    tile.store(out, (1, 0), tile.load(a, (2**63 - 1,), (N,), padding=PAD)[None, :])
    tile.store(out, (2, 0), tile.load(a, (-(2**63),), (N,), padding=PAD)[None, :])
    tile.store(out, (3, 0), tile.load(a, (2**62 + 1,), (N,), padding=PAD)[None, :])


@tile.kernel(num_warps=2)
def load_computed_index(a: Slice[f32], k: i64, out: DisjointSlice[f32]):
    # k * 2**20 is 2**60 for k = 2**40: computed in i64, then a tile index
    tile.store(out, (tile.bid(0),), tile.load(a, (k * 2**20,), (N,), padding=PAD))


def expected_load(a: np.ndarray, starts: tuple[int, ...], shape: tuple[int, ...]
                  ) -> np.ndarray:
    """The tile of `a` from element `starts` (exact integers), PAD outside."""
    out = np.full(shape, PAD, np.float32)
    for pos in np.ndindex(*shape):
        at = tuple(s + p for s, p in zip(starts, pos, strict=True))
        if all(0 <= x < n for x, n in zip(at, a.shape, strict=True)):
            out[pos] = a[at]
    return out


def arrays_1d() -> list[np.ndarray]:
    """A 16-byte-aligned array (vector accesses) and a view one element in (element
    accesses): the launch specializes on which."""
    base = np.arange(1, 3 * N + 2, dtype=np.float32)
    return [base[: 3 * N], base[1: 3 * N + 1]]


@pytest.mark.parametrize("dtype", list(BY_DTYPE), ids=lambda d: d.__name__)
def test_1d_loads_at_extreme_indices_read_padding(dtype: type) -> None:
    for a in arrays_1d():
        for value in [*BY_DTYPE[dtype], 2, 3]:
            out = np.zeros(N, np.float32)
            load_1d[1](a, dtype(value), out)
            np.testing.assert_array_equal(out, expected_load(a, (value * N,), (N,)),
                                          err_msg=f"index {value} ({dtype.__name__})")


@pytest.mark.parametrize("dtype", list(BY_DTYPE), ids=lambda d: d.__name__)
def test_1d_stores_at_extreme_indices_write_nothing(dtype: type) -> None:
    a = np.arange(1, N + 1, dtype=np.float32)
    for value in [*BY_DTYPE[dtype], 1]:
        for out in (np.full(3 * N, SENTINEL, np.float32),
                    np.full(3 * N + 1, SENTINEL, np.float32)[1:]):
            store_1d[1](a, dtype(value), out)
            want = np.full_like(out, SENTINEL)
            if value == 1:
                want[N:2 * N] = a
            np.testing.assert_array_equal(out, want, err_msg=f"index {value}")


@pytest.mark.parametrize("kernel", [load_2d, load_2d_transposed], ids=lambda k: k.__name__)
@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.int32], ids=lambda d: d.__name__)
def test_2d_loads_at_extreme_indices_read_padding(kernel, dtype: type) -> None:
    a = np.arange(1, 4 * R * 3 * C + 1, dtype=np.float32).reshape(4 * R, 3 * C)
    fine = [0, 1]
    for i, j in [(v, w) for v in BY_DTYPE[dtype] for w in fine] + \
                [(w, v) for v in BY_DTYPE[dtype] for w in fine] + \
                [(v, v) for v in BY_DTYPE[dtype]] + [(1, 2)]:
        want = expected_load(a, (i * R, j * C), (R, C))
        if kernel is load_2d_transposed:
            want = want.T
        out = np.zeros(want.shape, np.float32)
        kernel[1](a, dtype(i), dtype(j), out)
        np.testing.assert_array_equal(out, want, err_msg=f"index ({i}, {j}) {dtype.__name__}")


def test_2d_stores_at_extreme_indices_write_nothing() -> None:
    a = np.arange(1, R * C + 1, dtype=np.float32).reshape(R, C)
    for i, j in [(2**54, 0), (0, 2**54), (2**62, 2**62), (-(2**63), 0), (0, 2**63 - 1),
                 (1, 1)]:
        out = np.full((3 * R, 3 * C), SENTINEL, np.float32)
        store_2d[1](a, i64(i), i64(j), out)
        want = np.full_like(out, SENTINEL)
        if (i, j) == (1, 1):
            want[R:2 * R, C:2 * C] = a
        np.testing.assert_array_equal(out, want, err_msg=f"index ({i}, {j})")


def test_constant_extreme_indices_read_padding() -> None:
    a = np.arange(1, 2 * N + 1, dtype=np.float32)
    out = np.zeros((4, N), np.float32)
    load_constant_indices[1](a, out)
    assert (out == PAD).all()


def test_a_computed_extreme_index_reads_padding() -> None:
    a = np.arange(1, 2 * N + 1, dtype=np.float32)
    for k in (2**40, 2**34, -(2**40)):
        out = np.zeros(N, np.float32)
        load_computed_index[1](a, i64(k), out)
        assert (out == PAD).all(), k


# -- SIMT kernels: the bounds checks compare the whole 64-bit index, unsigned ------------

@ox.kernel
def simt_read(a: Slice[f32, 2], i: I, j: I, out: DisjointSlice[f32]):
    t = thread.index_1d()
    if t in out:
        out[t] = a[i, j]


@ox.kernel
def simt_write(a: RawSlice[f32, 2], i: I, j: I):
    with ox.unsafe():
        a[i, j] = 5.0


@pytest.mark.parametrize("dtype", list(BY_DTYPE), ids=lambda d: d.__name__)
def test_simt_accesses_at_extreme_indices_are_index_errors(
        dtype: type, place: Any = lambda x: x, fetch: Any = lambda x: x) -> None:
    """No wraparound reaches an address: each extreme index fails its check (a
    KernelIndexError), the read gives 0 and the write is skipped. `place`/`fetch` put the
    arrays where the launch runs and read them back (on a GPU: device arrays, since host
    arrays are not copied back after a launch that reported an error)."""
    a = place(np.arange(1, 65, dtype=np.float32).reshape(8, 8))
    for value in BY_DTYPE[dtype]:
        for i, j in ((value, 0), (1, value)):
            out = place(np.full(1, SENTINEL, np.float32))
            with pytest.raises(ox.KernelIndexError):
                simt_read[1, 1](a, dtype(i), dtype(j), out)
                ox.synchronize()
            assert fetch(out)[0] == 0.0
            target = place(np.full((8, 8), SENTINEL, np.float32))
            with pytest.raises(ox.KernelIndexError):
                simt_write[1, 1](target, dtype(i), dtype(j))
                ox.synchronize()
            assert (fetch(target) == SENTINEL).all()
