"""Block coarsening (codegen/coarsen.py): which kernels get it, and that it keeps meaning."""

from __future__ import annotations

import numpy as np
import pytest

import oxide as ox
from oxide import DisjointSlice, Slice, f32, i32, thread
from oxide.codegen.coarsen import FACTOR


@ox.kernel
def vecadd(a: Slice[f32], b: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] + b[i]


@ox.kernel(coarsen=False)
def vecadd_plain(a: Slice[f32], b: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] + b[i]


@ox.kernel
def with_barrier(a: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    ox.sync_threads()
    if i in out:
        out[i] = a[i]


@ox.kernel
def block_ids(a: Slice[i32], out: DisjointSlice[i32]):
    """Records what each logical thread sees of the grid: coarsening must not show."""
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] + ox.block_idx.x * 8192 + ox.grid_dim.x


@ox.kernel
def grid_2d(a: Slice[f32, 2], out: DisjointSlice[f32, 2]):
    w = thread.index_2d()
    if w in out:
        out[w] = a[w] * 2.0


SIG = (Slice[f32], Slice[f32], DisjointSlice[f32])


def test_elementwise_kernels_are_coarsened_with_reads_issued_first() -> None:
    ck = vecadd.compile(*SIG, arch="sm_90")
    assert ck.grid_x_factor == FACTOR
    body = ck.ptx.split(".func oxide_$_report(")[0]
    lines = [ln.strip() for ln in body.splitlines()]
    loads = [n for n, ln in enumerate(lines) if ln.startswith("ld.global")]
    stores = [n for n, ln in enumerate(lines) if ln.startswith("st.global")]
    assert len(loads) == 2 * FACTOR and len(stores) == FACTOR
    assert max(loads) < min(stores)  # both logical blocks' reads are in flight together
    assert len(ck.cubin) > 0


@pytest.mark.parametrize("kernel, sig", [
    (vecadd_plain, SIG),
    (with_barrier, (Slice[f32], DisjointSlice[f32])),
])
def test_kernels_whose_threads_may_interact_or_opt_out_are_not(kernel, sig) -> None:
    assert kernel.compile(*sig, arch="sm_90").grid_x_factor == 1


def test_the_cpu_target_is_not_coarsened() -> None:
    assert getattr(vecadd.compile(*SIG, target="cpu"), "grid_x_factor", 1) == 1


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 255, 256, 257, 4097, 1 << 20])
def test_coarsened_launch_matches_the_logical_grid(n: int) -> None:
    a = np.arange(n, dtype=np.int32) % 7
    out = ox.empty(n, ox.i32)
    cfg = ox.LaunchConfig.for_num_elems(n, block=256)
    with ox.device(0):
        block_ids[cfg](ox.to_device(a), out)
        got = out.to_numpy()
    blocks = np.arange(n) // 256
    np.testing.assert_array_equal(got, a + blocks * 8192 + cfg.grid[0])


@pytest.mark.gpu
def test_coarsened_2d_kernel_and_index_errors_still_reported() -> None:
    x = np.random.default_rng(0).standard_normal((37, 301)).astype(np.float32)
    out = ox.empty(x.shape, ox.f32)
    with ox.device(0):
        grid_2d[((301 + 31) // 32, (37 + 7) // 8), (32, 8)](ox.to_device(x), out)
        np.testing.assert_array_equal(out.to_numpy(), x * np.float32(2.0))
        short = ox.to_device(np.ones(100, np.float32))
        res = ox.empty(300, ox.f32)
        vecadd[ox.LaunchConfig.for_num_elems(300)](short, ox.to_device(np.ones(300, np.float32)),
                                                   res)
        with pytest.raises(ox.KernelIndexError, match=r"out of bounds .*length 100"):
            ox.synchronize()
