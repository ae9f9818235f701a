"""On an H100/H200: TMA loads and stores (each swizzle, ragged edges), multicast to a 2x1
cluster and the cluster registers of a cluster launch, against NumPy.

tests/test_tma.py compiles the same kernels without a GPU (the PTX, the by-value
parameter, the cubin for sm_90) and runs them on the CPU, whose copies place each element
where the hardware does: with a swizzle of S bytes, the 16 bytes at offset o land at
o ^ ((o // 128) % (S // 16)) * 16 (for 128 bytes: row r's chunk c at c ^ (r % 8)).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import oxide as ox
from oxide import Const, RawSlice, f32, i32, u64

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _gpu() -> Iterator[None]:
    with ox.device(0):
        yield


# -- kernels (tests/test_tma.py runs them on the CPU too) -----------------------------------

@ox.kernel
def load_store(src: ox.TensorMap[f32, 2], dst: ox.TensorMap[f32, 2], raw: RawSlice[f32],
               y: i32, x: i32, R: Const[int], C: Const[int]):
    """TMA-load the box at (y, x) into shared memory, copy shared memory as it lies into
    `raw` (the swizzled layout), then TMA-store it to `dst` at (y, x)."""
    s = ox.shared.array(f32, (R, C))
    bars = ox.shared.array(u64, 1)
    t = ox.thread_idx.x
    with ox.unsafe():
        if t == 0:
            ox.mbarrier.init(bars[0], 1)
            ox.fence_mbarrier_init()
        ox.sync_threads()
        if t == 0:
            ox.tma.prefetch_descriptor(src)
            ox.tma.prefetch(src, y, x)
            ox.mbarrier.arrive_expect_tx(bars[0], R * C * 4)
            ox.tma.load(src, s, y, x, bars[0])
        ox.mbarrier.wait_parity(bars[0], 0)
        for e in range(t, R * C, ox.block_dim.x):
            raw[e] = s[e // C, e % C]
        ox.fence_proxy_async()
        ox.sync_threads()
        if t == 0:
            ox.tma.store(dst, s, y, x)
            ox.tma.commit_group()
            ox.tma.wait_group_read(0)
            ox.tma.wait_group(0)


@ox.kernel
def load_box(src: ox.TensorMap[f32, 2], raw: RawSlice[f32], y: i32, x: i32, R: Const[int],
             C: Const[int]):
    """TMA-load the box at (y, x) and copy shared memory as it lies into `raw`: a load
    may start before the array's first row (those rows read as zeros); a store may not."""
    s = ox.shared.array(f32, (R, C))
    bars = ox.shared.array(u64, 1)
    t = ox.thread_idx.x
    with ox.unsafe():
        if t == 0:
            ox.mbarrier.init(bars[0], 1)
            ox.fence_mbarrier_init()
        ox.sync_threads()
        if t == 0:
            ox.tma.prefetch(src, y, x)
            ox.mbarrier.arrive_expect_tx(bars[0], R * C * 4)
            ox.tma.load(src, s, y, x, bars[0])
        ox.mbarrier.wait_parity(bars[0], 0)
        for e in range(t, R * C, ox.block_dim.x):
            raw[e] = s[e // C, e % C]


@ox.kernel
def multicast(src: ox.TensorMap[f32, 2], out: RawSlice[f32], R: Const[int], C: Const[int]):
    """Block rank 0 of each 2-block cluster loads the box at (R * cluster, 0) once, into
    the shared memory of both blocks; each block writes what it received to its row of
    `out` (out[block, :])."""
    s = ox.shared.array(f32, (R, C))
    bars = ox.shared.array(u64, 1)
    t = ox.thread_idx.x
    b = ox.block_idx.x
    with ox.unsafe():
        if t == 0:
            ox.mbarrier.init(bars[0], 1)
            ox.fence_mbarrier_init()
        ox.cluster.sync()
        if t == 0:
            ox.mbarrier.arrive_expect_tx(bars[0], R * C * 4)
            if ox.cluster.rank() == 0:
                ox.tma.load(src, s, R * ox.cluster.cluster_idx("x"), 0, bars[0], multicast=3)
        ox.mbarrier.wait_parity(bars[0], 0)
        for e in range(t, R * C, ox.block_dim.x):
            out[b * R * C + e] = s[e // C, e % C]
        ox.cluster.sync()


@ox.kernel
def cluster_ids(out: RawSlice[i32]):
    b = ox.block_idx.x
    if ox.thread_idx.x == 0:
        with ox.unsafe():
            out[b * 4 + 0] = ox.cluster.rank()
            out[b * 4 + 1] = ox.cluster.size()
            out[b * 4 + 2] = ox.cluster.block_idx("x")
            out[b * 4 + 3] = ox.cluster.cluster_idx("x")
    ox.cluster.sync()


@ox.kernel
def stages(src: ox.TensorMap[f32, 2], out: RawSlice[f32], S: Const[int]):
    """A ring of S stages: a producer warp (the last) fills stage k from rows 8k.., the
    consumer warp (the first) waits for each, copies it out and frees it; the consumer
    reaches its waits first, so the CPU's waits must let the producer run."""
    s = ox.shared.array(f32, (2, 8, 16))
    full = ox.shared.array(u64, 2)
    empty = ox.shared.array(u64, 2)
    t = ox.thread_idx.x
    with ox.unsafe():
        if t == 0:
            for k in range(2):
                ox.mbarrier.init(full[k], 1)
                ox.mbarrier.init(empty[k], 32)
            ox.fence_mbarrier_init()
        ox.sync_threads()
        if t >= 32:  # the producer warp
            if t == 32:
                for k in range(S):
                    if k >= 2:
                        ox.mbarrier.wait_parity(empty[k % 2], (k // 2 - 1) % 2)
                    ox.mbarrier.arrive_expect_tx(full[k % 2], 8 * 16 * 4)
                    ox.tma.load(src, s[k % 2, 0, 0], 8 * k, 0, full[k % 2])
        else:
            for k in range(S):
                while not ox.mbarrier.try_wait_parity(full[k % 2], (k // 2) % 2):
                    pass
                for e in range(t, 8 * 16, 32):
                    out[k * 128 + e] = s[k % 2, e // 16, e % 16]
                ox.mbarrier.arrive(empty[k % 2])


@ox.kernel
def at_row(src: ox.TensorMap[f32, 2], out: RawSlice[f32], k: i32):
    s = ox.shared.array(f32, (8, 16))  # rows of 64 bytes: odd rows are not 128-aligned
    bars = ox.shared.array(u64, 1)
    with ox.unsafe():
        if ox.thread_idx.x == 0:
            ox.mbarrier.init(bars[0], 1)
            ox.mbarrier.arrive_expect_tx(bars[0], 2 * 16 * 4)
            ox.tma.load(src, s[k, 0], 0, 0, bars[0])
        ox.mbarrier.wait_parity(bars[0], 0)
        out[ox.thread_idx.x] = s[k + ox.thread_idx.x // 16, ox.thread_idx.x % 16]


# -- the expected layouts ---------------------------------------------------------------------

def box_of(a: np.ndarray, y: int, x: int, rows: int, cols: int) -> np.ndarray:
    """The box at (y, x), elements past the edge as zero (TMA's fill)."""
    out = np.zeros((rows, cols), a.dtype)
    part = a[max(y, 0):y + rows, max(x, 0):x + cols]
    out[max(-y, 0):max(-y, 0) + part.shape[0], max(-x, 0):max(-x, 0) + part.shape[1]] = part
    return out


def swizzled(box: np.ndarray, swizzle: int | None) -> np.ndarray:
    """The box as TMA lays it in shared memory (flat): the 16-byte chunk bits of each
    element's byte offset XORed with those of its 128-byte line."""
    flat = box.reshape(-1).copy()
    if swizzle is None:
        return flat
    item = box.dtype.itemsize
    out = np.empty_like(flat)
    nbytes = flat.size * item
    for byte in range(0, nbytes, item):
        row = (byte >> 7) & (swizzle // 16 - 1)
        dst = byte ^ (row << 4)
        out[dst // item] = flat[byte // item]
    return out


def stored(shape: tuple[int, int], a: np.ndarray, y: int, x: int, rows: int,
           cols: int) -> np.ndarray:
    """`dst` after a store of `a`'s box at (y, x) into a -1 array: clipped at the edge."""
    dst = np.full(shape, -1, np.float32)
    box = box_of(a, y, x, rows, cols)
    y0, x0 = max(y, 0), max(x, 0)
    y1, x1 = min(y + rows, shape[0]), min(x + cols, shape[1])
    dst[y0:y1, x0:x1] = box[y0 - y:y1 - y, x0 - x:x1 - x]
    return dst


SWIZZLES = [(None, 16), (32, 8), (64, 16), (128, 32)]  # (swizzle, f32 per box row)
CORNERS = [(0, 0), (8, 16), (40, 56)]  # inside, inside, ragged (a box before the start:
# LOAD_CORNERS; a store there, or an innermost coordinate below 0, faults the H200: both
# are kernel errors in oxide)
LOAD_CORNERS = [(-3, 0), (-8, 16)]  # rows before the start: a load reads them as zeros


def run_load_store(swizzle: int | None, cols: int, y: int, x: int,
                   to: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src, raw, dst) after `load_store` on the device `to` makes arrays for."""
    rows = 16
    rng = np.random.default_rng(7)
    src = rng.standard_normal((48, 64)).astype(np.float32)
    dst = np.full((48, 64), -1, np.float32)
    raw = np.full(rows * cols, np.nan, np.float32)
    a, d, r = to(src), to(dst), to(raw)
    ox.launch(load_store, (1, 128), ox.TensorMap(a, (rows, cols), swizzle=swizzle),
              ox.TensorMap(d, (rows, cols), swizzle=swizzle), r, y, x, rows, cols)
    back = (lambda v: v) if isinstance(d, np.ndarray) else (lambda v: v.to_numpy())
    return src, back(r), back(d)


def run_load_box(y: int, x: int, to: Any) -> tuple[np.ndarray, np.ndarray]:
    """(src, raw) after `load_box` of a 16 x 16 box at (y, x) on the device `to` makes
    arrays for."""
    src = np.random.default_rng(8).standard_normal((48, 64)).astype(np.float32)
    a, r = to(src), to(np.full(256, np.nan, np.float32))
    ox.launch(load_box, (1, 128), ox.TensorMap(a, (16, 16)), r, y, x, 16, 16)
    return src, r if isinstance(r, np.ndarray) else r.to_numpy()


# -- tests ------------------------------------------------------------------------------------

@pytest.mark.parametrize("swizzle, cols", SWIZZLES)
@pytest.mark.parametrize("y, x", CORNERS)
def test_load_and_store_each_swizzle(swizzle: int | None, cols: int, y: int, x: int) -> None:
    src, raw, dst = run_load_store(swizzle, cols, y, x, ox.to_device)
    np.testing.assert_array_equal(raw, swizzled(box_of(src, y, x, 16, cols), swizzle))
    np.testing.assert_array_equal(dst, stored(dst.shape, src, y, x, 16, cols))


@pytest.mark.parametrize("y, x", LOAD_CORNERS)
def test_a_load_before_the_first_row_reads_zeros(y: int, x: int) -> None:
    src, raw = run_load_box(y, x, ox.to_device)
    np.testing.assert_array_equal(raw, box_of(src, y, x, 16, 16).ravel())


def test_a_store_before_the_first_row_is_a_kernel_error_not_a_fault() -> None:
    """A TMA store at row -3 faulted the H200 (illegal instruction): now a kernel error,
    and the context stays usable."""
    with pytest.raises(ox.KernelAssertionError, match="TMA store coordinate is 0 or more"):
        run_load_store(None, 16, -3, 0, ox.to_device)
    src, raw, dst = run_load_store(None, 16, 8, 16, ox.to_device)
    np.testing.assert_array_equal(dst, stored(dst.shape, src, 8, 16, 16, 16))


def test_relaunch_takes_the_fast_path() -> None:
    """The second launch goes through a binder that packs the map's 128 bytes."""
    for _ in range(3):
        src, raw, dst = run_load_store(128, 32, 8, 16, ox.to_device)
    np.testing.assert_array_equal(dst, stored(dst.shape, src, 8, 16, 16, 32))
    launchers = load_store.__dict__["_oxide_launchers"]
    assert launchers.last.flavor == "ctypes" and "a0.raw" in launchers.last.source


def test_torch_tensor_map() -> None:
    torch = pytest.importorskip("torch")
    a = torch.arange(48 * 64, dtype=torch.float32, device="cuda").reshape(48, 64)
    d = torch.full((48, 64), -1.0, device="cuda")
    raw = torch.zeros(16 * 32, device="cuda")
    ox.launch(load_store, (1, 128), ox.TensorMap(a, (16, 32), swizzle=128),
              ox.TensorMap(d, (16, 32), swizzle=128), raw, 16, 32, 16, 32)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(d.cpu().numpy(), stored((48, 64), a.cpu().numpy(), 16, 32,
                                                          16, 32))


def test_multicast_to_a_cluster_of_two() -> None:
    rows, cols = 8, 32
    src = np.arange(4 * rows * cols, dtype=np.float32).reshape(4 * rows, cols)
    out = ox.to_device(np.full(8 * rows * cols, -1, np.float32))
    cfg = ox.LaunchConfig(grid=8, block=64, cluster=(2, 1, 1))
    ox.launch(multicast, cfg, ox.TensorMap(ox.to_device(src), (rows, cols)), out, rows, cols)
    got = out.to_numpy().reshape(8, rows * cols)
    for b in range(8):  # both blocks of cluster c got rows c*8 .. c*8+7
        np.testing.assert_array_equal(got[b], src[(b // 2) * rows:(b // 2 + 1) * rows].ravel())


def test_cluster_registers_of_a_cluster_launch() -> None:
    out = ox.to_device(np.full(8 * 4, -1, np.int32))
    ox.launch(cluster_ids, ox.LaunchConfig(grid=8, block=32, cluster=(2, 1, 1)), out)
    want = [[b % 2, 2, b % 2, b // 2] for b in range(8)]
    np.testing.assert_array_equal(out.to_numpy().reshape(8, 4), np.array(want, np.int32))
    # the next launch without clusters: each block a cluster of one again (native path)
    ox.launch(cluster_ids, ox.LaunchConfig(grid=8, block=32), out)
    want = [[0, 1, 0, b] for b in range(8)]
    np.testing.assert_array_equal(out.to_numpy().reshape(8, 4), np.array(want, np.int32))


def test_a_tensor_map_of_another_device_is_refused() -> None:
    src = np.zeros((48, 64), np.float32)
    host_map = ox.TensorMap(src, (16, 16))  # a host array: the CPU's description
    d = ox.to_device(np.zeros((48, 64), np.float32))
    with pytest.raises(ox.ArgumentError, match="tensor map of a host array"):
        ox.launch(load_store, (1, 128), host_map, ox.TensorMap(d, (16, 16)),
                  ox.to_device(np.zeros(256, np.float32)), 0, 0, 16, 16)


def test_mbarrier_ring() -> None:
    """Six stages through a ring of two buffers, a producer warp and a consumer warp."""
    a = np.arange(48 * 16, dtype=np.float32).reshape(48, 16)
    out = ox.to_device(np.full(6 * 128, -1, np.float32))
    ox.launch(stages, (1, 64), ox.TensorMap(ox.to_device(a), (8, 16)), out, 6)
    np.testing.assert_array_equal(out.to_numpy(), a.ravel())


def test_misaligned_run_time_element_is_reported() -> None:
    a = ox.to_device(np.arange(2 * 16, dtype=np.float32).reshape(2, 16))
    out = ox.to_device(np.zeros(32, np.float32))
    ox.launch(at_row, (1, 32), ox.TensorMap(a, (2, 16)), out, 2)
    np.testing.assert_array_equal(out.to_numpy(), a.to_numpy().ravel())
    ox.launch(at_row, (1, 32), ox.TensorMap(a, (2, 16)), out, 1)
    with pytest.raises(ox.KernelAssertionError, match="not at a 128-byte boundary"):
        ox.synchronize()


def test_unaligned_inner_coordinate_is_a_kernel_error_not_a_fault() -> None:
    """-5 and -4 f32 as the innermost coordinate faulted the H200 (illegal instruction)
    before the check: now kernel errors, and the context stays usable."""
    for x in (-5, -4, 3):
        with pytest.raises(ox.KernelAssertionError, match="innermost TMA coordinate"):
            run_load_store(None, 16, 0, x, ox.to_device)
    src, raw, dst = run_load_store(None, 16, 0, 0, ox.to_device)
    np.testing.assert_array_equal(dst, stored(dst.shape, src, 0, 0, 16, 16))
