"""TMA and clusters without a GPU: the PTX (cp.async.bulk.tensor, the tensor map as a
64-byte-aligned 128-byte grid-constant parameter addressed in place), the cubin for
sm_90, ox.TensorMap's checks, the CPU's copies (ragged boxes, each swizzle, stores clipped
at the edge) and mbarriers, and the cluster launch checks.

tests/test_gpu_tma.py runs the same kernels on an H100/H200 against NumPy.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
import test_gpu_tma as gt

import oxide as ox
from oxide import RawSlice, f16, f32, i32, u32, u64
from oxide import types as T
from oxide.codegen import hopper

TM2 = ox.TensorMap[f32, 2]
LOAD_STORE_SIG = (TM2, TM2, RawSlice[f32], i32, i32, 16, 32)


def ptx_of(kernel: Any, *sig: Any, arch: str = "sm_90") -> tuple[Any, str]:
    ck = kernel.compile(*sig, arch=arch)
    assert ck.cubin  # nvJitLink assembled it
    assert "llvm." not in ck.ptx  # every intrinsic resolved
    return ck, ck.ptx


# -- the PTX ---------------------------------------------------------------------------------

def test_load_and_store_compile() -> None:
    ck, ptx = ptx_of(gt.load_store, *LOAD_STORE_SIG)
    assert ck.arch == "sm_90"  # TMA is sm_90, not sm_90a
    sym = ck.name
    # both maps: 128 bytes by value, 64-byte aligned; TMA takes their param-space address
    assert re.findall(rf"\.param \.align 64 \.b8 {sym}_param_(\d)\[128\]", ptx) == ["0", "1"]
    assert ".local" not in ptx and "ld.param.b64" not in ptx.split("cp.async")[0][-400:]
    assert re.search(r"cvta\.param\.u64\s+%rd\d+, %rd\d+;", ptx)
    load = [ln for ln in ptx.splitlines() if "cp.async.bulk.tensor.2d.shared::cluster" in ln]
    assert len(load) == 1
    assert ".global.tile.mbarrier::complete_tx::bytes [" in load[0]
    # coordinates innermost first: x (param 5, clamped to 0 and rounded down to a 16-byte
    # boundary (the sign bit is known clear, so the mask is 0x7FFFFFFC), its
    # check beside) before y (param 4; `raw` is 2 and 3)
    x_reg = re.search(rf"ld\.param\.b32\s+(%r\d+), \[{sym}_param_5\]", ptx).group(1)
    y_reg = re.search(rf"ld\.param\.b32\s+(%r\d+), \[{sym}_param_4\]", ptx).group(1)
    x_max = re.search(rf"max\.s32\s+(%r\d+), {x_reg}, 0;", ptx).group(1)
    x_round = re.search(rf"and\.b32\s+(%r\d+), {x_max}, 2147483644;", ptx).group(1)
    assert f"{{{x_round}, {y_reg}}}" in load[0]
    for text in ("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group",
                 "cp.async.bulk.commit_group;",
                 "cp.async.bulk.prefetch.tensor.2d.L2.global.tile"):
        assert text in ptx, text
    assert re.search(r"cp\.async\.bulk\.wait_group\s+0;", ptx)
    assert re.search(r"cp\.async\.bulk\.wait_group\.read\s+0;", ptx)
    assert re.search(r"prefetch(\.param)?\.tensormap", ptx)
    # the shared array TMA fills is aligned for the 128-byte swizzle
    assert re.search(r"\.shared \.align 1024 \.b8 oxide_shared\d+\[2048\]", ptx)


def test_assembles_for_sm_90a_without_a_frame() -> None:
    """The map is read in the parameter space: no stack frame, no local copy."""
    from test_wgmma_tma import info_log

    ck, ptx = ptx_of(gt.load_store, *LOAD_STORE_SIG, arch="sm_90a")
    assert ".target sm_90a" in ptx
    log = info_log(ptx, "sm_90a")
    entry = log.split(f"Function properties for {ck.name}")[1]
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in entry, log


def test_multicast_compiles() -> None:
    _, ptx = ptx_of(gt.multicast, TM2, RawSlice[f32], 8, 32)
    assert re.search(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.tile\.mbarrier::"
                     r"complete_tx::bytes\.multicast::cluster \[%rd\d+\], \[%rd\d+, \{%r\d+, "
                     r"%r\d+\}\], \[\w+\], %rs\d+;", ptx)
    assert "barrier.cluster.arrive" in ptx and "barrier.cluster.wait" in ptx


@ox.kernel
def every_rank(m1: ox.TensorMap[u32, 1], m3: ox.TensorMap[u32, 3], m5: ox.TensorMap[u32, 5]):
    s1 = ox.shared.array(u32, 64)
    s3 = ox.shared.array(u32, (2, 4, 8))
    s5 = ox.shared.array(u32, 64)  # the box (1, 2, 2, 2, 8): shared arrays have rank 1-3
    bars = ox.shared.array(u64, 1)
    with ox.unsafe():
        ox.tma.load(m1, s1, 4, bars[0])  # innermost coordinates at 16-byte boundaries
        ox.tma.load(m3, s3, 1, 2, 4, bars[0])
        ox.tma.load(m5, s5, 1, 2, 3, 4, 8, bars[0])
        ox.tma.store(m5, s5, 5, 4, 3, 2, 0)


def test_ranks_one_to_five() -> None:
    _, ptx = ptx_of(every_rank, ox.TensorMap[u32, 1], ox.TensorMap[u32, 3],
                    ox.TensorMap[u32, 5])
    for rank, count in ((1, 1), (3, 3), (5, 5)):
        line = next(ln for ln in ptx.splitlines()
                    if f"cp.async.bulk.tensor.{rank}d.shared::cluster" in ln)
        assert len(re.search(r"\{([^}]*)\}", line).group(1).split(",")) == count
    assert "cp.async.bulk.tensor.5d.global.shared::cta" in ptx


@ox.kernel
def prefetch_and_scale(m: ox.TensorMap[f32, 2], x: ox.Slice[f32], y: ox.DisjointSlice[f32]):
    i = ox.thread.index_1d()
    if i in y:
        ox.tma.prefetch(m, 0, 0)
        y[i] = x[i] * 2.0


def test_a_kernel_with_a_map_is_not_coarsened() -> None:
    """An elementwise kernel would run several blocks per thread through an inner
    function (codegen/coarsen.py); a by-value map passed to it would land in local
    memory, where TMA cannot read it."""
    ck, ptx = ptx_of(prefetch_and_scale, TM2, ox.Slice[f32], ox.DisjointSlice[f32])
    assert ck.grid_x_factor == 1
    assert ".local" not in ptx and "cp.async.bulk.prefetch.tensor.2d" in ptx


def test_sm80_is_a_target_error() -> None:
    with pytest.raises(ox.TargetError, match=r"`ox.tma.load\(\)` needs sm_90; the target is "
                                             r"sm_80") as info:
        every_rank.compile(ox.TensorMap[u32, 1], ox.TensorMap[u32, 3], ox.TensorMap[u32, 5],
                           arch="sm_80")
    assert info.value.span is not None and info.value.hint
    assert info.value.span.line > 0


def test_the_target_table_knows_tma() -> None:
    for kind in ("tma.load.2d", "tma.load.3d.multicast", "tma.store.5d", "tma.barrier",
                 "tma.commit_group", "tma.wait_group", "tma.wait_group_read", "tma.prefetch.2d",
                 "tma.prefetch_descriptor"):
        assert hopper.requirement(kind) == (90, False)
        assert hopper.user_name(kind).startswith("ox.tma.")
    assert hopper.user_name("tma.wait_group_read") == "ox.tma.wait_group_read()"
    assert hopper.user_name("tma.prefetch_descriptor") == "ox.tma.prefetch_descriptor()"
    for rank in range(1, 6):
        assert f"llvm.nvvm.cp.async.bulk.tensor.g2s.tile.{rank}d" in hopper.KNOWN_NVVM


# -- ox.TensorMap --------------------------------------------------------------------------

def test_tensor_map_describes_a_host_array() -> None:
    from oxide.runtime.tensormap import CPU_LAYOUT

    a = np.zeros((40, 64), np.float32)
    tm = ox.TensorMap(a, (16, 32), swizzle=128)
    assert (tm.rank, tm.box, tm.box_bytes, tm.device) == (2, (16, 32), 2048, -1)
    assert len(tm.raw) == 128 and tm.address % 64 == 0
    base, rank, item, *rest = CPU_LAYOUT.unpack(tm.raw[:CPU_LAYOUT.size])
    assert (base, rank, item) == (a.ctypes.data, 2, 4)
    dims, strides, box, (swizzle, oob) = rest[:5], rest[5:10], rest[10:15], rest[15:]
    assert dims == [64, 40, 1, 1, 1] and strides == [4, 256, 0, 0, 0]  # innermost first
    assert box == [32, 16, 1, 1, 1] and (swizzle, oob) == (128, 0)
    assert "box=(16, 32)" in repr(tm)
    assert ox.TensorMap[f32, 2] == T.TensorMapType(f32, 2)
    assert ox.TensorMap[f16] == T.TensorMapType(f16, 2)  # rank 2 by default


@pytest.mark.parametrize("make, message", [
    (lambda: ox.TensorMap(np.zeros((8, 8, 8, 8, 8, 8), np.float32), (1,) * 6), "rank 1 to 5"),
    (lambda: ox.TensorMap(np.zeros((8, 8), np.bool_), (8, 16)), "not bool_"),
    (lambda: ox.TensorMap(np.zeros((8, 64), np.float32), (8, 64), swizzle=128),
     r"at most 128 bytes \(32 f32\)"),
    (lambda: ox.TensorMap(np.zeros((8, 64), np.float32), (8, 16), swizzle=128),
     "exactly 128 bytes"),
    (lambda: ox.TensorMap(np.zeros((8, 64), np.float32), (8, 3)), "multiple of 16 bytes"),
    (lambda: ox.TensorMap(np.zeros((300, 64), np.float32), (257, 16)), "1 to 256"),
    (lambda: ox.TensorMap(np.zeros((8, 64), np.float32), (0, 16)), "1 to 256"),
    (lambda: ox.TensorMap(np.zeros((8, 6), np.float32), (8, 4)), "multiple of 16 bytes"),
    (lambda: ox.TensorMap(np.zeros((8, 64), np.float32)[:, ::2], (8, 16)), "contiguous"),
    (lambda: ox.TensorMap(np.zeros(65, np.float32)[1:], (16,)), "16-byte aligned"),
    (lambda: ox.TensorMap(np.zeros((8, 64), np.float32), (8,)), "tuple of 2 ints"),
    (lambda: ox.TensorMap(np.zeros((8, 64), np.float32), (8, 16), swizzle=16), "None, 32"),
    (lambda: ox.TensorMap(np.zeros((8, 64), np.int32), (8, 16), oob_fill="nan"), "float"),
    (lambda: ox.TensorMap(np.zeros((8, 64), np.float32), (8, 16), l2_promotion=32),
     "l2_promotion"),
    (lambda: ox.TensorMap([1, 2, 3], (1,)), "takes an array"),
])
def test_tensor_map_checks(make: Any, message: str) -> None:
    with pytest.raises(ox.ArgumentError, match=message):
        make()


def test_interleave_is_not_built() -> None:
    with pytest.raises(NotImplementedError, match="interleave"):
        ox.TensorMap(np.zeros((8, 64), np.float32), (8, 16), interleave=32)


def test_annotation_checks() -> None:
    with pytest.raises(TypeError, match="rank 1 to 5"):
        ox.TensorMap[f32, 6]
    a = np.zeros((48, 64), np.float32)
    with pytest.raises(ox.ArgumentError, match=r"`src` is TensorMap\[f32, 2\]; got a tensor "
                                               r"map of f16, rank 2"):
        with ox.device("cpu"):
            ox.launch(gt.load_store, (1, 32), ox.TensorMap(a.astype(np.float16), (16, 16)),
                      ox.TensorMap(a, (16, 32)), np.zeros(512, np.float32), 0, 0, 16, 32)
    with pytest.raises(ox.ArgumentError, match=r"`dst` is TensorMap\[f32, 2\]; got ndarray"):
        with ox.device("cpu"):
            ox.launch(gt.load_store, (1, 32), ox.TensorMap(a, (16, 32)), a,
                      np.zeros(512, np.float32), 0, 0, 16, 32)


# -- the CPU's copies ---------------------------------------------------------------------

@pytest.mark.parametrize("swizzle, cols", gt.SWIZZLES)
@pytest.mark.parametrize("y, x", gt.CORNERS)
def test_cpu_load_and_store(swizzle: int | None, cols: int, y: int, x: int) -> None:
    """Each element lands where the hardware puts it (the swizzle), elements past the edge
    read as zero, and the store drops them."""
    with ox.device("cpu"):
        src, raw, dst = gt.run_load_store(swizzle, cols, y, x, lambda v: v)
    box = gt.box_of(src, y, x, 16, cols)
    np.testing.assert_array_equal(raw, gt.swizzled(box, swizzle))
    np.testing.assert_array_equal(dst, gt.stored(dst.shape, src, y, x, 16, cols))
    if swizzle is not None:
        assert not np.array_equal(raw, box.ravel())  # the swizzle moved something
    if (y, x) == (40, 56):
        assert (box[8:] == 0).all() and (box[:, 8:] == 0).all()


def test_cpu_unaligned_inner_coordinate_is_a_kernel_error() -> None:
    """An innermost coordinate off a 16-byte boundary (-5 f32: the H200 faults on it) is a
    failed assertion naming the rule; the copy still runs, rounded down, and ends."""
    with ox.device("cpu"), pytest.raises(ox.KernelAssertionError,
                                         match="innermost TMA coordinate is a multiple of 4, 0 or more"):
        gt.run_load_store(None, 16, 0, -5, lambda v: v)


@pytest.mark.parametrize("y, x", gt.LOAD_CORNERS)
def test_cpu_load_before_the_first_row_reads_zeros(y: int, x: int) -> None:
    with ox.device("cpu"):
        src, raw = gt.run_load_box(y, x, lambda v: v)
    np.testing.assert_array_equal(raw, gt.box_of(src, y, x, 16, 16).ravel())


def test_cpu_store_before_the_first_row_is_a_kernel_error() -> None:
    """A store at row -3 (the H200 faults on it) is a failed assertion naming the rule."""
    with ox.device("cpu"), pytest.raises(ox.KernelAssertionError,
                                         match="TMA store coordinate is 0 or more"):
        gt.run_load_store(None, 16, -3, 0, lambda v: v)


@ox.kernel
def constant_negative_store(dst: ox.TensorMap[f32, 2]):
    s = ox.shared.array(f32, (8, 16))
    with ox.unsafe():
        ox.tma.store(dst, s, -8, 0)


def test_constant_negative_store_coordinate_is_a_compile_error() -> None:
    with pytest.raises(ox.KernelTypeError, match="TMA store coordinate -8") as info:
        constant_negative_store.compile(T.TensorMapType(T.f32, 2), arch="sm_90")
    assert "0 or more" in str(info.value)


@ox.kernel
def constant_unaligned(src: ox.TensorMap[f32, 2], raw: RawSlice[f32]):
    s = ox.shared.array(f32, (8, 16))
    bars = ox.shared.array(u64, 1)
    with ox.unsafe():
        ox.tma.load(src, s, 0, 6, bars[0])


def test_constant_unaligned_inner_coordinate_is_a_compile_error() -> None:
    with pytest.raises(ox.KernelTypeError, match="innermost TMA coordinate 6 breaks TMA.s rule") as info:
        constant_unaligned.compile(T.TensorMapType(T.f32, 2), RawSlice[f32], arch="sm_90")
    assert "multiple of 4" in str(info.value)


def test_cpu_nan_fill() -> None:
    a = np.ones((20, 32), np.float32)
    d = np.zeros((20, 32), np.float32)
    raw = np.zeros(16 * 32, np.float32)
    with ox.device("cpu"):
        ox.launch(gt.load_store, (1, 32), ox.TensorMap(a, (16, 32), oob_fill="nan"),
                  ox.TensorMap(d, (16, 32)), raw, 8, 0, 16, 32)
    got = raw.reshape(16, 32)
    assert (got[:12] == 1).all() and np.isnan(got[12:]).all()


@ox.kernel
def too_small(src: ox.TensorMap[f32, 2], out: RawSlice[f32]):
    s = ox.shared.array(f32, (8, 32))
    bars = ox.shared.array(u64, 1)
    with ox.unsafe():
        if ox.thread_idx.x == 0:
            ox.mbarrier.init(bars[0], 1)
            ox.mbarrier.arrive_expect_tx(bars[0], 16 * 32 * 4)
            ox.tma.load(src, s, 0, 0, bars[0])
            out[0] = s[0, 0]


def test_cpu_box_larger_than_the_shared_array_is_an_index_error() -> None:
    a = np.ones((16, 32), np.float32)
    with ox.device("cpu"), pytest.raises(ox.KernelIndexError,
                                         match=r"index 511 is out of bounds .* \(length 256\)"):
        ox.launch(too_small, (1, 1), ox.TensorMap(a, (16, 32)), np.zeros(1, np.float32))


def test_cpu_mbarrier_ring() -> None:
    a = np.arange(48 * 16, dtype=np.float32).reshape(48, 16)
    out = np.full(6 * 128, -1, np.float32)
    with ox.device("cpu"):
        ox.launch(gt.stages, (1, 64), ox.TensorMap(a, (8, 16)), out, 6)
    np.testing.assert_array_equal(out, a.ravel())
    _, ptx = ptx_of(gt.stages, TM2, RawSlice[f32], 6)
    assert "mbarrier.try_wait.parity.shared.b64" in ptx


@ox.kernel
def tokens(out: RawSlice[u64]):
    bars = ox.shared.array(u64, 1)
    t = ox.thread_idx.x
    with ox.unsafe():
        if t == 0:
            ox.mbarrier.init(bars[0], 4)
        ox.sync_threads()
        if t < 4:
            ox.mbarrier.arrive(bars[0])
        ox.sync_threads()
        done = ox.mbarrier.try_wait_parity(bars[0], 0)
        again = ox.mbarrier.try_wait_parity(bars[0], 1)
        out[t] = u64(done) + u64(2) * u64(again)


def test_cpu_mbarrier_phases() -> None:
    """Four arrivals complete phase 0 (parity 0 reads done, parity 1 not yet)."""
    out = np.zeros(8, np.uint64)
    with ox.device("cpu"):
        ox.launch(tokens, (1, 8), out)
    np.testing.assert_array_equal(out, np.ones(8, np.uint64))


@ox.kernel
def multicast_only(src: ox.TensorMap[f32, 2]):
    s = ox.shared.array(f32, (8, 32))
    bars = ox.shared.array(u64, 1)
    with ox.unsafe():
        ox.tma.load(src, s, 0, 0, bars[0], multicast=3)


def test_cpu_multicast_is_a_target_error() -> None:
    with pytest.raises(ox.TargetError, match=r"multicast=.*runs only on the GPU") as info:
        multicast_only.compile(TM2, target="cpu")
    assert info.value.span is not None


# -- diagnostics ---------------------------------------------------------------------------

def _kernel(body: str) -> Any:
    src = ("import oxide as ox\nfrom oxide import f32, f16, u64, u32, i32, RawSlice\n"
           "@ox.kernel\n"
           "def k(m: ox.TensorMap[f32, 2], x: RawSlice[f32]):\n"
           "    s = ox.shared.array(f32, (16, 32))\n"
           "    h = ox.shared.array(f16, (16, 32))\n"
           "    bars = ox.shared.array(u64, 1)\n"
           f"    {body}\n")
    import linecache
    import uuid

    name = f"<tma-{uuid.uuid4().hex}>"
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    scope: dict[str, Any] = {}
    exec(compile(src, name, "exec"), scope)
    return scope["k"]


@pytest.mark.parametrize("body, error, message", [
    ("ox.tma.load(m, s, 0, 0, bars[0])", ox.SafetyError, "needs `with ox.unsafe"),
    ("with ox.unsafe():\n        ox.tma.load(m, s, 0, bars[0])", ox.KernelTypeError,
     r"takes 2 coordinates \(outermost first\); got 1"),
    ("with ox.unsafe():\n        ox.tma.load(x, s, 0, 0, bars[0])", ox.KernelTypeError,
     "is an ox.TensorMap parameter"),
    ("with ox.unsafe():\n        ox.tma.load(m, h, 0, 0, bars[0])", ox.KernelTypeError,
     "moves f32, the shared array is f16"),
    ("with ox.unsafe():\n        ox.tma.load(m, s, 0, 0, s[0, 0])", ox.KernelTypeError,
     "u64 or i64"),
    ("with ox.unsafe():\n        ox.tma.load(m, x, 0, 0, bars[0])", ox.KernelTypeError,
     "copies to or from a shared array"),
    ("with ox.unsafe():\n        ox.tma.load(m, s, 0, 0, bars[0], multicast=1 << 16)",
     ox.KernelTypeError, "16-bit mask"),
    ("with ox.unsafe():\n        ox.tma.store(m, s, 0, 0.5)", ox.KernelTypeError,
     "does not fit in i32"),
    ("ox.tma.store(m, s, 0, 0)", ox.SafetyError, "needs `with ox.unsafe"),
    ("with ox.unsafe():\n        ox.tma.store(m, s[0, 8], 0, 0)", ox.KernelTypeError,
     r"multiple of 128 bytes; `s\[0, 8\]` is 32 bytes"),
    ("d = ox.shared.dynamic(f32)\n    with ox.unsafe():\n        ox.tma.store(m, d[0], 0, 0)",
     ox.KernelTypeError, "needs a static shared array"),
    ("ox.tma.wait_group(64)", ox.KernelTypeError, "0 to 63"),
    ("ox.tma.wait_group(i32(1))", ox.KernelTypeError, "compile-time integer"),
    ("x[0] = m[0]", ox.KernelTypeError, "an ox.TensorMap parameter is not indexable"),
    ("y = m + 1", ox.KernelTypeError, "needs numbers, not an ox.TensorMap parameter"),
])
def test_diagnostics(body: str, error: type, message: str) -> None:
    k = _kernel(body)
    with pytest.raises(error, match=message) as info:
        k.compile(TM2, RawSlice[f32], arch="sm_90")
    assert info.value.span is not None


def test_an_aligned_element_is_taken() -> None:
    """Row 1 of a (16, 32) f32 array starts 128 bytes in: a valid TMA address."""
    k = _kernel("with ox.unsafe():\n        ox.tma.store(m, s[1, 0], 0, 0)")
    assert "cp.async.bulk.tensor.2d.global.shared::cta" in k.compile(
        TM2, RawSlice[f32], arch="sm_90").ptx


# -- clusters ------------------------------------------------------------------------------

def test_launch_config_cluster() -> None:
    cfg = ox.LaunchConfig(grid=(8, 2), block=128, cluster=(2, 1, 1))
    assert cfg.cluster == (2, 1, 1) and cfg.cluster_size == 2
    assert ox.LaunchConfig(grid=8, block=128, cluster=1).cluster is None  # clusters of one
    assert cfg != ox.LaunchConfig(grid=(8, 2), block=128)
    with pytest.raises(ox.ArgumentError, match=r"grid.x = 6 is not a multiple of "
                                               r"cluster.x = 4 \(round it up to 8"):
        ox.LaunchConfig(grid=6, block=32, cluster=4)
    with pytest.raises(ox.ArgumentError, match=r"grid.y = 3 is not a multiple of cluster.y"):
        ox.LaunchConfig(grid=(4, 3), block=32, cluster=(1, 2))
    with pytest.raises(ox.ArgumentError, match="at most 8 blocks"):
        ox.LaunchConfig(grid=16, block=32, cluster=16)
    with pytest.raises(ox.LaunchError, match="positive"):
        ox.LaunchConfig(grid=16, block=32, cluster=0)


def test_cpu_cluster_launch_is_a_target_error() -> None:
    @ox.kernel
    def k(out: RawSlice[i32]):
        with ox.unsafe():
            out[ox.block_idx.x] = ox.cluster.rank()

    out = np.zeros(4, np.int32)
    with ox.device("cpu"):
        with pytest.raises(ox.TargetError, match=r"cluster=\(2, 1, 1\) runs only on the GPU"):
            ox.launch(k, ox.LaunchConfig(4, 32, cluster=(2, 1, 1)), out)
        ox.launch(k, ox.LaunchConfig(4, 32), out)  # without: clusters of one
    np.testing.assert_array_equal(out, np.zeros(4, np.int32))


# -- the parameter kind in caches and bundles --------------------------------------------

def test_the_signature_knows_tensor_maps() -> None:
    from oxide.runtime import bundle, cache

    spec = T.TensorMapType(f16, 3)
    assert bundle.spec_from_json(bundle.spec_to_json(spec), {}) == spec
    text = cache.signature_text((spec, T.i32))
    assert text == "tensormap f16 3; scalar i32"
    assert cache.signature_text((T.TensorMapType(f32, 3), T.i32)) != text


def test_plans_pack_the_map() -> None:
    """A GPU plan packs the map's 128 bytes by value, a CPU plan its description's address;
    the compiled kernel's argument sizes agree with the GPU packing."""
    from oxide.runtime.args import ParamPlan, Plan, flatten, read_args
    from oxide.runtime.device import parse_device
    from oxide.runtime.gpu import KernelImage, plan_sizes

    spec = T.TensorMapType(f32, 2)
    gpu = Plan((spec,), [ParamPlan("m", "tensormap", spec)])
    assert gpu.formats == ["128s"]
    a = np.zeros((48, 64), np.float32)
    tm = ox.TensorMap(a, (16, 32))
    assert flatten(gpu, (tm,), [None]) == [tm.raw]
    ck = gt.load_store.compile(*LOAD_STORE_SIG, arch="sm_90")
    sizes = KernelImage.from_compiled(ck).arg_sizes
    assert sizes[:2] == (128, 128) and plan_sizes(gpu) == (128, 8)
    args = (tm, tm, a.ravel(), 0, 0, 16, 32)
    cpu_dev = parse_device("cpu")
    key, views = read_args(gt.load_store, args, cpu_dev)
    assert key[0] == (ox.TensorMap, ("f32", 2, -1))
    from oxide.runtime.args import make_plan

    cpu = make_plan(gt.load_store, args, views, cpu_dev)
    assert cpu.formats[:2] == ["Q", "Q"]
    assert flatten(cpu, args, views)[:2] == [tm.address, tm.address]


def test_gpu_encoding_order() -> None:
    """The driver gets dimensions innermost first, byte strides of dimensions 1 and up,
    and the box innermost first (the call itself stubbed: no GPU here)."""
    from unittest import mock

    from cuda.bindings import driver as drv

    from oxide.runtime import cuda_driver, tensormap

    calls = []

    def encode(*args: Any) -> Any:
        calls.append(args)
        return drv.CUresult.CUDA_SUCCESS, drv.CUtensorMap()

    with mock.patch.object(drv, "cuTensorMapEncodeTiled", encode), \
            mock.patch.object(cuda_driver, "init", lambda: None):
        raw = tensormap.encode(0x10000, T.bf16, (3, 128, 64), (8192, 64, 1), (2, 64, 64), 128,
                               None, "zero")
    assert len(raw) == 128
    dt, rank, ptr, dims, strides, box, elem, _, swizzle, *_ = calls[0]
    assert (int(dt), rank, ptr) == (9, 3, 0x10000)  # BFLOAT16
    assert [int(x) for x in dims] == [64, 128, 3]
    assert [int(x) for x in strides] == [128, 16384]
    assert [int(x) for x in box] == [64, 64, 2] and [int(x) for x in elem] == [1, 1, 1]
    assert int(swizzle) == 3  # SWIZZLE_128B

    def refuse(*args: Any) -> Any:
        return drv.CUresult.CUDA_ERROR_INVALID_VALUE, drv.CUtensorMap()

    with mock.patch.object(drv, "cuTensorMapEncodeTiled", refuse), \
            mock.patch.object(cuda_driver, "init", lambda: None), \
            pytest.raises(ox.ArgumentError, match="the driver refused the tensor map"):
        tensormap.encode(0x10000, T.f32, (8, 16), (16, 1), (8, 16), None, None, "zero")


def test_binder_packs_the_map_and_declines_clusters() -> None:
    """The fast path's generated binder (runtime/fastpath.py), with a stand-in launcher:
    a tensor map's 128 bytes are packed by value, a map of another kind is declined, and a
    native binder leaves cluster launches to the path that sets the attribute."""
    import types
    from unittest import mock

    from oxide.runtime import fastpath
    from oxide.runtime.args import ParamPlan, Plan

    spec = T.TensorMapType(f32, 2)
    plan = Plan((spec, T.i32), [ParamPlan("m", "tensormap", spec),
                                ParamPlan("n", "scalar", T.i32, dtype=T.i32)])
    packed: list[Any] = []
    native: list[Any] = []
    gdev = types.SimpleNamespace(enter=lambda: None, check_errors=lambda: None,
                                 active_records=[], activate=lambda L: None, single=True)

    def launcher(flavor: str, plan: Plan = plan) -> Any:
        return types.SimpleNamespace(
            flavor=flavor, plan=plan, gdev=gdev, stream_source=None, lock=mock.MagicMock(),
            packer=types.SimpleNamespace(pack_into=lambda *a: packed.append(a)),
            buffer=None, launch_ex=lambda *a: 0, config_address=0, fptr=0, params_address=0,
            upload_constants=None, native=lambda *a: native.append(a) or 0, native_address=0,
            constants=(), packed_cfg=None, packed_stream=None, prepare=lambda cfg, h: None,
            checked_cfg=None, check=lambda cfg: None, active=True, map_packer=None)

    tm = ox.TensorMap(np.zeros((16, 32), np.float32), (8, 32))
    with mock.patch.object(fastpath, "parse_device", lambda i: "dev"):
        binder = fastpath.make_binder(launcher("ctypes"), (tm, 3), 0, ())
        cfg = ox.LaunchConfig(1, 32)
        assert binder(cfg, (tm, 3), None, "dev")
        assert packed[-1][2:] == (tm.raw, 3)
        other = ox.TensorMap(np.zeros((16, 32), np.float16), (8, 32))
        assert not binder(cfg, (other, 3), None, "dev")
        # a kernel without maps launches natively, but not with clusters
        scalars = Plan((T.i32,), [ParamPlan("n", "scalar", T.i32, dtype=T.i32)])
        nbinder = fastpath.make_binder(launcher("native", scalars), (3,), 0, ())
        assert nbinder(cfg, (3,), None, "dev") and native
        assert not nbinder(ox.LaunchConfig(2, 32, cluster=2), (3,), None, "dev")


@pytest.mark.parametrize("cooperative", [False, True])
def test_cluster_launch_attribute(cooperative: bool) -> None:
    """`Launcher.prepare` packs CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION (4) with the shape
    (after the cooperative attribute of a kernel with ox.grid.sync()), and none without
    clusters (checked with a stand-in launcher: no GPU here)."""
    import ctypes
    import struct
    import types

    from oxide.runtime import cuda_driver as cd
    from oxide.runtime import gpu

    coop = (ctypes.create_string_buffer(gpu._COOPERATIVE_ATTRIBUTE.pack(2, 1))
            if cooperative else None)
    fake = types.SimpleNamespace(
        packed_cfg=None, check_config=lambda cfg: None, grid_x_factor=1, extra_threads=0,
        persistent=False, cooperative=cooperative, cooperative_attrs=coop, cluster_attrs=None,
        config_buffer=ctypes.create_string_buffer(cd.LAUNCH_CONFIG.size))
    gpu.Launcher.prepare(fake, ox.LaunchConfig(grid=(8, 2), block=64, cluster=(2, 2)), 0)
    *dims, smem, stream, address, count = cd.LAUNCH_CONFIG.unpack(fake.config_buffer.raw[
        :cd.LAUNCH_CONFIG.size])
    assert dims == [8, 2, 1, 64, 1, 1] and count == (2 if cooperative else 1)
    data = ctypes.string_at(address, 72 * count)
    assert struct.unpack_from("@I4x3I", data, 72 * (count - 1)) == (4, 2, 2, 1)
    if cooperative:
        assert struct.unpack_from("@I4xi", data, 0) == (2, 1)
    gpu.Launcher.prepare(fake, ox.LaunchConfig(grid=(8, 2), block=64), 0)
    *_, address, count = cd.LAUNCH_CONFIG.unpack(fake.config_buffer.raw[:cd.LAUNCH_CONFIG.size])
    assert count == (1 if cooperative else 0)


def test_a_run_time_element_is_checked_for_alignment() -> None:
    """An element computed at run time must start at a 128-byte boundary too: checked
    as the copy runs (a failed assertion; the copy goes to the array's start and its
    mbarrier completes, so the kernel ends and reports it), on the GPU as on the CPU."""
    a = np.arange(2 * 16, dtype=np.float32).reshape(2, 16)
    out = np.zeros(32, np.float32)
    with ox.device("cpu"):
        ox.launch(gt.at_row, (1, 32), ox.TensorMap(a, (2, 16)), out, 2)
        np.testing.assert_array_equal(out, a.ravel())
        with pytest.raises(ox.KernelAssertionError, match="not at a 128-byte boundary"):
            ox.launch(gt.at_row, (1, 32), ox.TensorMap(a, (2, 16)), out, 1)
    _, ptx = ptx_of(gt.at_row, TM2, RawSlice[f32], i32)
    assert re.search(r"and\.b64\s+%rd\d+, %rd\d+, 1;", ptx)  # (64 k) % 128 != 0: k odd
