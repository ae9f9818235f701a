"""SIMT features: memory spaces, barriers, atomics, warp ops, block collectives, halves.

Every feature compiles to PTX that nvJitLink assembles for sm_80 and sm_90a (no
GPU needed); the kernels then run on the CPU backend, and with `-m gpu` on a
GPU, each checked against NumPy.
"""

import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import oxide as ox
from oxide import (
    AtomicSlice,
    DisjointSlice,
    RawSlice,
    Slice,
    bf16,
    bool_,
    f16,
    f32,
    f64,
    i8,
    i32,
    i64,
    thread,
    u32,
    u64,
)
from oxide.runtime.device import cuda_device_count, device

ARCHES = ("sm_80", "sm_90a")
T = ox.TypeVar("T")
rng = np.random.default_rng(11)

gpu = pytest.mark.gpu
needs_gpu = pytest.mark.skipif(cuda_device_count() == 0, reason="no CUDA GPU")


def assembles(kernel: Any, *sig: Any) -> list[str]:
    """Compiles for every arch down to a cubin; returns the PTX texts."""
    out = []
    for arch in ARCHES:
        ck = kernel.compile(*sig, arch=arch)
        assert len(ck.cubin) > 0
        out.append(ck.ptx)
    return out


@pytest.fixture(params=["cpu", pytest.param("gpu", marks=[gpu, needs_gpu])])
def where(request: pytest.FixtureRequest) -> Iterator[str]:
    with device("cpu" if request.param == "cpu" else 0):
        yield request.param


def run(where: str, kernel: Any, config: Any, *arrays: Any) -> list[np.ndarray]:
    """Launches on the current device; returns every array argument as NumPy afterwards."""
    if where == "cpu":
        ox.launch(kernel, config, *arrays)
        return [a for a in arrays if isinstance(a, np.ndarray)]
    dev = [ox.to_device(a) if isinstance(a, np.ndarray) else a for a in arrays]
    ox.launch(kernel, config, *dev)
    return [d.to_numpy() for d, a in zip(dev, arrays, strict=True) if isinstance(a, np.ndarray)]


# -- atomics -------------------------------------------------------------------------

ATOMIC_KINDS = ("add", "sub", "min", "max", "exch", "cas", "and_", "or_", "xor")
ATOMIC_TYPES = (i32, u32, i64, u64, f32, f64, f16, bf16)


def _atomic_cases() -> list[tuple[str, Any]]:
    out = []
    for kind in ATOMIC_KINDS:
        for dt in ATOMIC_TYPES:
            if dt.bits == 16 and kind != "add":
                continue
            if dt.is_float and kind in ("and_", "or_", "xor"):
                continue
            out.append((kind, dt))
    return out


def _atomic_kernels(kind: str, dt: Any) -> tuple[Any, Any]:
    fn = getattr(ox.atomic, kind)
    if kind == "cas":
        @ox.kernel
        def on_global(a: AtomicSlice[dt], out: DisjointSlice[dt]):
            i = thread.index_1d()
            if i in out:
                out[i] = ox.atomic.cas(a, 0, dt(0), dt(1))

        @ox.kernel
        def on_shared(out: DisjointSlice[dt]):
            s = ox.shared.array(dt, 4)
            i = thread.index_1d()
            if i in out:
                out[i] = ox.atomic.cas(s, 1, dt(0), dt(1), scope="block")
        return on_global, on_shared

    @ox.kernel
    def on_global(a: AtomicSlice[dt], out: DisjointSlice[dt]):
        i = thread.index_1d()
        if i in out:
            out[i] = fn(a, 0, dt(1), scope="system")

    @ox.kernel
    def on_shared(out: DisjointSlice[dt]):
        s = ox.shared.array(dt, (2, 2))
        i = thread.index_1d()
        if i in out:
            out[i] = fn(s, (1, 0), dt(1), scope="block")
    return on_global, on_shared


@pytest.mark.parametrize("kind,dt", _atomic_cases(), ids=lambda x: getattr(x, "name", x))
def test_atomic_compiles(kind: str, dt: Any) -> None:
    on_global, on_shared = _atomic_kernels(kind, dt)
    for ptx in assembles(on_global, AtomicSlice[dt], DisjointSlice[dt]):
        assert "atom" in ptx
    assembles(on_shared, DisjointSlice[dt])


@ox.kernel
def atomics_all(a: AtomicSlice[i32], f: AtomicSlice[f32], n: i32):
    i = thread.index_1d()
    if i < n:
        v = i32(i)
        ox.atomic.add(a, 0, 1)
        ox.atomic.sub(a, 1, 2)
        ox.atomic.min(a, 2, v)
        ox.atomic.max(a, 3, v)
        ox.atomic.or_(a, 4, 1 << (v % 31))
        ox.atomic.and_(a, 5, ~(1 << (v % 31)))
        ox.atomic.xor(a, 6, v)
        ox.atomic.exch(a, 7, v)
        ox.atomic.cas(a, 8, 0, v + 1)
        ox.atomic.add(f, 0, 0.5)
        ox.atomic.min(f, 1, f32(v) - 10.0)
        ox.atomic.max(f, 2, f32(v) * 2.0)


def test_atomics_run(where: str) -> None:
    n = 1000
    a = np.array([0, 0, 1 << 30, -5, 0, -1, 0, -1, 0], dtype=np.int32)
    f = np.array([0.0, 0.0, -1.0], dtype=np.float32)
    a, f = run(where, atomics_all, ox.LaunchConfig.for_num_elems(n, block=128), a, f,
               np.int32(n))
    xor = 0
    for v in range(n):
        xor ^= v
    assert a[0] == n and a[1] == -2 * n and a[2] == 0 and a[3] == n - 1
    assert a[4] == (1 << 31) - 1 and a[5] == -1 << 31 and a[6] == xor
    assert 0 <= a[7] < n and 1 <= a[8] <= n
    np.testing.assert_array_equal(f, np.float32([n * 0.5, -10.0, 2.0 * (n - 1)]))


@ox.kernel
def histogram(data: Slice[u32], bins: AtomicSlice[u32]):
    # The barriers stay outside `if i in data`: every thread of the block must reach them.
    i = thread.index_1d()
    counts = ox.shared.array(u32, 256)
    t = ox.thread_idx.x
    with ox.unsafe():
        counts[t] = u32(0)
    ox.sync_threads()
    if i in data:
        ox.atomic.add(counts, data[i] % 256, u32(1), scope="block")
    ox.sync_threads()
    with ox.unsafe():
        c = counts[t]
    if c > 0:
        ox.atomic.add(bins, t, c)


def test_shared_histogram(where: str) -> None:
    data = rng.integers(0, 1 << 20, 256 * 40, dtype=np.uint32)
    bins = np.zeros(256, np.uint32)
    (_, bins) = run(where, histogram, ox.LaunchConfig(grid=40, block=256), data, bins)
    np.testing.assert_array_equal(bins, np.bincount(data % 256, minlength=256))


# -- warp collectives ----------------------------------------------------------------

WARP_TYPES = (i32, u32, i64, u64, f32, f64)


def _warp_kernels(dt: Any) -> Any:
    @ox.kernel
    def warp_all(a: Slice[dt], out: DisjointSlice[dt], votes: DisjointSlice[u32],
                 flags: DisjointSlice[bool_]):
        i = thread.index_1d()
        x = a[i]
        y = (ox.warp.shuffle(x, 3) + ox.warp.shuffle_up(x, 1) + ox.warp.shuffle_down(x, 2)
             + ox.warp.shuffle_xor(x, 5) + ox.warp.reduce_add(x) + ox.warp.reduce_min(x)
             + ox.warp.reduce_max(x) + ox.warp.shuffle(x, 0, u32(0xFFFFFFFF)))
        b = ox.warp.ballot(x > dt(1), u32(0xFFFFFFFF)) ^ ox.warp.match_any(x)
        any_all = ox.warp.any(x > dt(2)) != ox.warp.all(x > dt(0))
        if i in out and i in votes and i in flags:
            out[i] = y
            votes[i] = b
            flags[i] = any_all
    return warp_all


@pytest.mark.parametrize("dt", WARP_TYPES, ids=lambda d: d.name)
def test_warp_ops_compile(dt: Any) -> None:
    for ptx in assembles(_warp_kernels(dt), Slice[dt], DisjointSlice[dt], DisjointSlice[u32],
                         DisjointSlice[bool_]):
        assert "shfl.sync" in ptx and "vote.sync" in ptx and "match.any.sync" in ptx


@ox.kernel
def warp_shuffles(a: Slice[i32], out: RawSlice[i32, 2]):
    i = ox.block_idx.x * 32 + ox.thread_idx.x  # one row per lane, one column per collective
    x = a[i]
    # every lane of the warp takes part in a full-mask collective: outside the `if`
    s0, s1, s2, s3 = (ox.warp.shuffle(x, 3), ox.warp.shuffle_up(x, 1),
                      ox.warp.shuffle_down(x, 2), ox.warp.shuffle_xor(x, 5))
    r4, r5 = ox.warp.reduce_add(x), ox.warp.reduce_max(x)
    v6, v7 = i32(ox.warp.ballot(x > 0)), i32(ox.warp.match_any(x % 4))
    if i < len(a):
        with ox.unsafe():
            out[i, 0] = s0
            out[i, 1] = s1
            out[i, 2] = s2
            out[i, 3] = s3
            out[i, 4] = r4
            out[i, 5] = r5
            out[i, 6] = v6
            out[i, 7] = v7


def test_warp_ops_run(where: str) -> None:
    a = rng.integers(-100, 100, 64, dtype=np.int32)
    out = np.zeros((64, 8), np.int32)
    _, out = run(where, warp_shuffles, ox.LaunchConfig(grid=2, block=32), a, out)
    for w in range(2):
        x = a[32 * w:32 * w + 32]
        lanes = np.arange(32)
        got = out[32 * w:32 * w + 32]
        np.testing.assert_array_equal(got[:, 0], np.full(32, x[3]))
        # a lane whose source lies outside the warp keeps its own value (CUDA's rule)
        np.testing.assert_array_equal(got[:, 1], x[np.where(lanes >= 1, lanes - 1, lanes)])
        np.testing.assert_array_equal(got[:, 2], x[np.where(lanes + 2 < 32, lanes + 2, lanes)])
        np.testing.assert_array_equal(got[:, 3], x[lanes ^ 5])
        np.testing.assert_array_equal(got[:, 4], np.full(32, x.sum()))
        np.testing.assert_array_equal(got[:, 5], np.full(32, x.max()))
        ballot = int(sum(1 << k for k in range(32) if x[k] > 0))
        np.testing.assert_array_equal(got[:, 6], np.full(32, np.uint32(ballot).view(np.int32)))
        same = [sum(1 << k for k in range(32) if x[k] % 4 == x[j] % 4) for j in range(32)]
        np.testing.assert_array_equal(got[:, 7], np.uint32(same).view(np.int32))


# -- block collectives ---------------------------------------------------------------


@ox.kernel
def block_collectives(a: Slice[T], s: DisjointSlice[T], lo: DisjointSlice[T],
                      hi: DisjointSlice[T], scan: DisjointSlice[T]):
    i = thread.index_1d()
    v = a[i] if i < len(a) else T(0)
    total = ox.block.reduce_add(v)
    smallest = ox.block.reduce_min(v)
    largest = ox.block.reduce_max(v)
    before = ox.block.exclusive_scan(v)
    if i in s and i in lo and i in hi and i in scan:
        s[i] = total
        lo[i] = smallest
        hi[i] = largest
        scan[i] = before


@pytest.mark.parametrize("dt", (f32, f64, i32, u32, i64, u64, f16, i8), ids=lambda d: d.name)
def test_block_collectives_compile(dt: Any) -> None:
    sig = (Slice[dt],) + (DisjointSlice[dt],) * 4
    for ptx in assembles(block_collectives, *sig):
        assert "bar.sync" in ptx and "shfl.sync" in ptx


@pytest.mark.parametrize("block", (1, 7, 32, 33, 100, 256, 1000, 1024))
def test_block_collectives_run(where: str, block: int) -> None:
    blocks = 3
    a = rng.integers(-50, 50, block * blocks).astype(np.int32)
    outs = [np.zeros_like(a) for _ in range(4)]
    _, *outs = run(where, block_collectives, ox.LaunchConfig(grid=blocks, block=block), a,
                   *outs)
    rows = a.reshape(blocks, block)
    expect = [np.repeat(rows.sum(1), block), np.repeat(rows.min(1), block),
              np.repeat(rows.max(1), block), (np.cumsum(rows, 1) - rows).ravel()]
    for got, want in zip(outs, expect, strict=True):
        np.testing.assert_array_equal(got, want)


@ox.kernel
def block_sum_2d(a: Slice[f32], out: RawSlice[f32]):
    # block (16, 5): x and y both vary inside the block. thread.index_1d() is not unique
    # in such a launch (the launch refuses it), so row y = 0 writes through a RawSlice.
    t = ox.thread_idx.y * ox.block_dim.x + ox.thread_idx.x
    total = ox.block.reduce_add(a[t])
    if ox.thread_idx.y == 0 and ox.thread_idx.x < len(out):
        with ox.unsafe():
            out[ox.thread_idx.x] = total


def test_block_collective_2d_block(where: str) -> None:
    a = rng.integers(0, 9, 80).astype(np.float32)
    out = np.zeros(16, np.float32)
    _, out = run(where, block_sum_2d, ox.LaunchConfig(grid=1, block=(16, 5)), a, out)
    np.testing.assert_array_equal(out, np.full(16, a.sum()))


# -- memory spaces and barriers ------------------------------------------------------


@ox.kernel
def memory_spaces(out: DisjointSlice[f32]):
    s1 = ox.shared.array(f32, 64)
    s2 = ox.shared.array(f32, (4, 16))
    s3 = ox.shared.array(f64, (2, 4, 8))
    loc = ox.local.array(f32, (2, 3))
    t = ox.thread_idx.x
    with ox.unsafe():
        s1[t] = f32(t)
        s2[t // 16, t % 16] = f32(2 * t)
        s3[t // 32, (t // 8) % 4, t % 8] = f64(3 * t)
    ox.sync_threads()
    ox.sync_warp()
    ox.threadfence()
    ox.threadfence_block()
    ox.threadfence_system()
    for k in range(3):
        loc[1, k] = f32(k)
    i = thread.index_1d()
    if i in out:
        with ox.unsafe():
            r = 63 - t
            out[i] = (s1[r] + s2[r // 16, r % 16] + f32(s3[r // 32, (r // 8) % 4, r % 8])
                      + loc[1, 2])


def test_memory_spaces_ptx() -> None:
    for ptx in assembles(memory_spaces, DisjointSlice[f32]):
        for needle in ("st.shared", "ld.shared", "bar.sync", "bar.warp.sync", "fence.sc.gpu",
                       "fence.sc.cta", "fence.sc.sys"):
            assert needle in ptx, needle


def test_memory_spaces_run(where: str) -> None:
    out = np.zeros(64, np.float32)
    (out,) = run(where, memory_spaces, ox.LaunchConfig(grid=1, block=64), out)
    r = 63 - np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(out, 6 * r + 2)


@ox.kernel
def reverse_dynamic(a: Slice[f32], out: DisjointSlice[f32]):
    buf = ox.shared.dynamic(f32)
    i = thread.index_1d()
    t = ox.thread_idx.x
    n = ox.block_dim.x
    with ox.unsafe():
        buf[t] = a[i]
    ox.sync_threads()
    if i in out:
        with ox.unsafe():
            out[i] = buf[n - 1 - t] + f32(len(buf))


def test_dynamic_shared_ptx() -> None:
    for ptx in assembles(reverse_dynamic, Slice[f32], DisjointSlice[f32]):
        assert ".extern .shared" in ptx and "%dynamic_smem_size" in ptx


def test_dynamic_shared_run(where: str) -> None:
    a = np.arange(256, dtype=np.float32)
    out = np.zeros_like(a)
    cfg = ox.LaunchConfig(grid=2, block=128, shared_mem_bytes=128 * 4 * 2)
    _, out = run(where, reverse_dynamic, cfg, a, out)
    want = a.reshape(2, 128)[:, ::-1].ravel() + 256
    np.testing.assert_array_equal(out, want)


COEFFS = ox.ConstantArray(f32, 16)
TABLE = ox.ConstantArray(i32, (4, 4))


@ox.kernel
def use_constants(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * COEFFS[i % 16] + f32(TABLE[(i // 4) % 4, i % 4]) + f32(len(COEFFS))


def test_constant_memory_ptx() -> None:
    ck = use_constants.compile(Slice[f32], DisjointSlice[f32], arch="sm_90a")
    assert [s for s, _ in ck.constants] == ["oxide_const_0", "oxide_const_1"]
    assert [c for _, c in ck.constants] == [COEFFS, TABLE]
    for ptx in assembles(use_constants, Slice[f32], DisjointSlice[f32]):
        assert ".visible .const .align 16 .b8 oxide_const_0[64]" in ptx and "ld.const" in ptx


def test_constant_array_host_side() -> None:
    c = ox.ConstantArray(ox.f32, (2, 3))
    with pytest.raises(ox.LaunchError, match="never set"):
        c.sync_to("module", lambda data: None, "k")
    c.set(np.arange(6).reshape(2, 3))
    uploads: list[bytes] = []
    c.sync_to("module", uploads.append)
    c.sync_to("module", uploads.append)  # already current: no second copy
    c.sync_to("other module", uploads.append)
    assert uploads == [np.arange(6, dtype=np.float32).tobytes()] * 2
    c.set(np.ones((2, 3)))
    c.sync_to("module", uploads.append)
    assert len(uploads) == 3 and c.values is not None and not c.values.flags.writeable
    with pytest.raises(ox.ArgumentError, match="shape"):
        c.set([1.0, 2.0])
    with pytest.raises(ox.ArgumentError, match="64 KiB"):
        ox.ConstantArray(ox.f64, 1 << 14)


def test_constant_memory_run(where: str) -> None:
    COEFFS.set(np.linspace(0, 1, 16))
    TABLE.set(np.arange(16).reshape(4, 4))
    x = rng.standard_normal(100).astype(np.float32)
    _, out = run(where, use_constants, ox.LaunchConfig.for_num_elems(100), x,
                 np.zeros_like(x))
    i = np.arange(100)
    want = x * np.linspace(0, 1, 16, dtype=np.float32)[i % 16] + (i % 16) + 16
    np.testing.assert_allclose(out, want, rtol=1e-6)


# -- half precision ------------------------------------------------------------------


def _half_kernel(dt: Any) -> Any:
    @ox.kernel
    def half_math(a: Slice[dt], b: Slice[dt], out: DisjointSlice[dt], wide: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out and i in wide:
            x = a[i] * b[i] + a[i] - b[i] / dt(2.0)
            y = max(x, -x) + abs(a[i])
            out[i] = y * 0.5 + 1
            wide[i] = f32(y) + f32(ox.math.sqrt(abs(a[i])))
    return half_math


@pytest.mark.parametrize("dt", (f16, bf16), ids=lambda d: d.name)
def test_half_precision_compiles(dt: Any) -> None:
    ptx80, ptx90 = assembles(_half_kernel(dt), Slice[dt], Slice[dt], DisjointSlice[dt],
                             DisjointSlice[f32])
    # LLVM makes f16 (and bf16) arithmetic native, and oxide spells each operation in f32
    # between exact conversions before ptxas sees it, which paired 16-bit operations
    # wrongly (codegen/ptx_rewrite.py `halves_in_f32`)
    for ptx in (ptx80, ptx90):
        assert f"cvt.rn.{dt.name}.f32" in ptx and "fma.rn.f32" in ptx
        assert not re.search(rf"^\s*(add|sub|mul|fma|min|max)[.a-zA-Z]*\.{dt.name}", ptx, re.M)


def test_f16_runs(where: str) -> None:
    a = rng.standard_normal(256).astype(np.float16)
    b = rng.standard_normal(256).astype(np.float16)
    out = np.zeros_like(a)
    wide = np.zeros(256, np.float32)
    _, _, out, wide = run(where, _half_kernel(f16), ox.LaunchConfig.for_num_elems(256), a, b,
                          out, wide)
    x = a * b + a - b / np.float16(2)
    y = np.maximum(x, -x) + np.abs(a)
    np.testing.assert_allclose(out, y * np.float16(0.5) + np.float16(1), rtol=2e-2, atol=2e-2)


# -- safety --------------------------------------------------------------------------


def _compile_error(build: Callable[[], Any], *sig: Any) -> ox.CompileError:
    with pytest.raises(ox.CompileError) as info:
        build().compile(*sig, arch="sm_90")
    return info.value


def test_shared_access_needs_unsafe_and_names_block_collectives() -> None:
    def build() -> Any:
        @ox.kernel
        def racy(out: DisjointSlice[f32]):
            s = ox.shared.array(f32, 32)
            s[ox.thread_idx.x] = 1.0
        return racy

    err = _compile_error(build, DisjointSlice[f32])
    assert isinstance(err, ox.SafetyError)
    assert "ox.block.reduce_add" in err.hint and "ox.block.exclusive_scan" in err.hint
    assert "@ox.kernel(block=(256,))" in err.hint  # or declare the block shape: proved safe


def test_constant_arrays_are_read_only() -> None:
    def build() -> Any:
        @ox.kernel
        def writes(out: DisjointSlice[f32]):
            COEFFS[0] = 1.0
        return writes

    err = _compile_error(build, DisjointSlice[f32])
    assert isinstance(err, ox.SafetyError) and "COEFFS.set" in err.hint


def test_atomic_scope_must_be_a_known_string() -> None:
    def build() -> Any:
        @ox.kernel
        def bad(a: AtomicSlice[i32]):
            ox.atomic.add(a, 0, 1, scope="cluster")
        return bad

    assert isinstance(_compile_error(build, AtomicSlice[i32]), ox.KernelSyntaxError)


def test_raw_transpose_through_padded_tile_compiles() -> None:
    @ox.kernel
    def transpose(a: Slice[f32, 2], out: RawSlice[f32, 2]):
        tile = ox.shared.array(f32, (32, 33))
        x = ox.block_idx.x * 32 + ox.thread_idx.x
        y = ox.block_idx.y * 32 + ox.thread_idx.y
        with ox.unsafe():
            tile[ox.thread_idx.y, ox.thread_idx.x] = a[y, x]
        ox.sync_threads()
        with ox.unsafe():
            out[ox.block_idx.x * 32 + ox.thread_idx.y, ox.block_idx.y * 32 + ox.thread_idx.x] = \
                tile[ox.thread_idx.x, ox.thread_idx.y]

    assembles(transpose, Slice[f32, 2], RawSlice[f32, 2])


def test_block_collective_rejects_bool() -> None:
    def build() -> Any:
        @ox.kernel
        def bad(a: Slice[i64], out: DisjointSlice[i64]):
            ox.block.reduce_add(a[0] > 0)
        return bad

    assert isinstance(_compile_error(build, Slice[i64], DisjointSlice[i64]), ox.KernelTypeError)


# -- the SIMT examples ---------------------------------------------------------------

SIMT_EXAMPLES = ("reduction", "histogram", "transpose", "scan", "softmax", "sgemm")


@pytest.mark.parametrize("name", SIMT_EXAMPLES)
@pytest.mark.parametrize("arch", ARCHES)
def test_simt_example_on_cpu_and_compiles(name: str, arch: str) -> None:
    module = __import__(f"oxide.examples.{name}", fromlist=["main"])
    result = module.main(device="cpu", arch=arch)
    assert result.passed, str(result)
    assert f"cubin for {arch}" in result.detail


@gpu
@needs_gpu
@pytest.mark.parametrize("name", SIMT_EXAMPLES)
def test_simt_example_on_gpu(name: str) -> None:
    module = __import__(f"oxide.examples.{name}", fromlist=["main"])
    result = module.main(device=0)
    assert result.passed, str(result)
