"""wgmma without a GPU: the PTX holds the instructions, the cubin assembles for sm_90a
(nvJitLink) with no spills and no serialized wgmma; the CPU's meaning (exact loops over
each thread's fragment, operands read through the descriptors' swizzled layouts) against
NumPy; and the diagnostics.

tests/test_gpu_wgmma_tma.py runs the same kernels on an H100/H200 against NumPy.
"""

from __future__ import annotations

import ctypes
import re
from typing import Any

import numpy as np
import pytest
import test_gpu_wgmma_tma as gw

import oxide as ox
from oxide import Const, RawSlice, bf16, f16, f32, i32, u32, u64
from oxide.codegen import hopper


def info_log(ptx: str, arch: str) -> str:
    """ptxas's verbose report (registers, spills, performance notes) through nvJitLink."""
    from oxide.codegen.nvjitlink import _INPUT_PTX, _lib

    lib = _lib()
    handle = ctypes.c_void_p()
    opts = [f"-arch={arch}".encode(), b"-O3", b"-Xptxas=-v"]
    argv = (ctypes.c_char_p * len(opts))(*opts)
    assert lib.nvJitLinkCreate(ctypes.byref(handle), len(opts), argv) == 0
    try:
        data = ptx.encode()
        assert lib.nvJitLinkAddData(handle, _INPUT_PTX, data, len(data), b"k") == 0
        assert lib.nvJitLinkComplete(handle) == 0
        size = ctypes.c_size_t()
        lib.nvJitLinkGetInfoLogSize(handle, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value + 1)
        lib.nvJitLinkGetInfoLog(handle, log)
        return log.value.decode(errors="replace")
    finally:
        lib.nvJitLinkDestroy(ctypes.byref(handle))


def compiled(kernel: Any, *sig: Any, arch: str = "sm_90") -> Any:
    ck = kernel.compile(*sig, arch=arch)
    assert ck.cubin
    assert "llvm." not in ck.ptx  # every intrinsic resolved
    return ck


def assert_fast(ck: Any) -> str:
    """No spills, no local memory, no serialized wgmma (ptxas C7509/C7510 notes)."""
    log = info_log(ck.ptx, ck.arch)
    assert "0 bytes spill stores, 0 bytes spill loads" in log, log
    assert "serialized" not in log, log
    return log


SIG_SS = (RawSlice[bf16], RawSlice[bf16], RawSlice[f32])


@pytest.mark.parametrize("groups", [1, 2, 3, 4])
def test_ss_compiles_for_each_n(groups: int) -> None:
    ck = compiled(gw.wgmma_ss, *SIG_SS, groups)
    n = 64 * groups
    assert ck.arch == "sm_90a"  # asked for sm_90: wgmma needs the `a` target
    ptx = ck.ptx
    mma = [ln for ln in ptx.splitlines() if "wgmma.mma_async" in ln]
    assert mma and all(f"m64n{n}k16.f32.bf16.bf16" in ln for ln in mma)
    # the accumulators: N/2 registers, then the two descriptors, p, 1, 1, trans-a, trans-b
    assert all(re.search(r"\}, %rd\d+, %rd\d+, p, 1, 1, 0, 0;", ln) for ln in mma)
    assert len(re.findall(r"%r\d+", mma[0].split("}")[0])) == n // 2
    for instr in ("wgmma.fence.sync.aligned;", "wgmma.commit_group.sync.aligned;",
                  "wgmma.wait_group.sync.aligned 0;"):
        assert instr in ptx
    # swizzled operands start their pattern at a 1024-byte boundary
    assert re.findall(r"\.shared \.align (\d+)", ptx) == ["1024", "1024"]
    assert_fast(ck)


def test_rs_form_with_mn_major_b() -> None:
    ck = compiled(gw.wgmma_rs_mn, RawSlice[f16], RawSlice[f16], RawSlice[f32])
    mma = [ln for ln in ck.ptx.splitlines() if "wgmma.mma_async" in ln]
    assert len(mma) >= 1
    for ln in mma:  # A as 4 registers, then B's descriptor, p, 1, 1, trans-b = 1
        assert "m64n128k16.f32.f16.f16" in ln
        assert re.search(r"\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, p, 1, 1, 1;", ln)
    assert_fast(ck)


def test_swizzle64_and_scale_d() -> None:
    ck = compiled(gw.wgmma_swizzle64, *SIG_SS)
    assert ck.ptx.count("wgmma.mma_async") == 2
    assert_fast(ck)


@ox.kernel(checks=False)
def descriptors(out: RawSlice[u64], flag: i32):
    sa = ox.shared.array(bf16, (64, 64))
    sb = ox.shared.array(f16, (2, 32, 64))
    sc = ox.shared.array(bf16, (64, 16))
    with ox.unsafe():
        out[0] = ox.wgmma_desc(sa[0, 0])
        out[1] = ox.wgmma_desc(sb[0, 16, 0], major="mn")
        out[2] = ox.wgmma_desc(sc[8, 0], swizzle=32)


def test_descriptor_bits() -> None:
    """bits 16-29 LBO >> 4, 32-45 SBO >> 4, 62-63 the swizzle (1: 128 B, 2: 64 B, 3: 32 B);
    the low 14 bits are the address >> 4, added at run time."""
    ptx = compiled(descriptors, RawSlice[u64], i32).ptx
    consts = {int(c) & ~0x3FFF for c in re.findall(r"or\.b64\s+%rd\d+, %rd\d+, (-?\d+);", ptx)}
    consts = {c % (1 << 64) for c in consts}
    want = {(1 << 62) | (1024 >> 4 << 32) | (16 >> 4 << 16),          # K-major, 128 B
            (1 << 62) | (1024 >> 4 << 32) | (32 * 128 >> 4 << 16),    # MN-major: slab stride
            (3 << 62) | (256 >> 4 << 32) | (16 >> 4 << 16)}           # K-major, 32 B
    assert want <= consts, (sorted(hex(c) for c in consts))


@ox.kernel
def wait_nested(out: RawSlice[f32]):
    acc = ((1.0,) * 8, (2.0,) * 4)
    ox.wgmma_fence()
    ox.wgmma_commit()
    acc = ox.wgmma_wait(1, acc)
    with ox.unsafe():
        out[ox.thread_idx.x] = acc[0][7] + acc[1][3]
    ox.wgmma_wait(0)


def test_wait_carries_nested_accumulators() -> None:
    """The wait ties each accumulator to an output register; `wgmma_wait(n)` alone waits."""
    ck = compiled(wait_nested, RawSlice[f32])
    assert "wgmma.wait_group.sync.aligned 1;" in ck.ptx
    assert "wgmma.wait_group.sync.aligned 0;" in ck.ptx
    llvm = ck.llvm
    tied = re.search(r'asm sideeffect "[^"]*wait_group[^"]* 1;", "([^"]*)"', llvm)
    assert tied is not None
    parts = tied.group(1).split(",")
    assert parts[:12] == ["=f"] * 12 and parts[12:24] == [str(k) for k in range(12)]


# -- target checks ----------------------------------------------------------------------------

def test_sm80_is_a_target_error() -> None:
    with pytest.raises(ox.TargetError, match=r"needs sm_90a?; the target is sm_80"):
        gw.wgmma_ss.compile(*SIG_SS, 1, arch="sm_80")


@ox.kernel
def only_wgmma(out: RawSlice[f32]):
    ox.wgmma_fence()
    ox.wgmma_commit()
    ox.wgmma_wait(0)


def test_sm80_names_the_wgmma_call() -> None:
    with pytest.raises(ox.TargetError, match=r"`ox.wgmma_fence\(\)` needs sm_90a; the "
                                             r"target is sm_80") as info:
        only_wgmma.compile(RawSlice[f32], arch="sm_80")
    assert "ox.wgmma_fence()" in str(info.value)
    # sm_90 compiles as sm_90a
    assert compiled(only_wgmma, RawSlice[f32]).arch == "sm_90a"


# -- the CPU's meaning ----------------------------------------------------------------------

def bf16_array(x: np.ndarray) -> np.ndarray:
    import ml_dtypes

    return x.astype(ml_dtypes.bfloat16).ravel()


@pytest.mark.parametrize("groups", [1, 2, 3, 4])
def test_cpu_ss_k_major(groups: int) -> None:
    rng = np.random.default_rng(groups)
    n = 64 * groups
    a, b = gw.small_values(rng, (64, 64)), gw.small_values(rng, (n, 64))
    out = np.zeros(64 * n, np.float32)
    with ox.device("cpu"):
        ox.launch(gw.wgmma_ss, (1, 128), bf16_array(a), bf16_array(b), out, groups)
    np.testing.assert_array_equal(out.reshape(64, n), a @ b.T)


def test_cpu_rs_with_mn_major_b() -> None:
    rng = np.random.default_rng(7)
    a, b = gw.small_values(rng, (64, 32)), gw.small_values(rng, (32, 128))
    out = np.zeros(64 * 128, np.float32)
    with ox.device("cpu"):
        ox.launch(gw.wgmma_rs_mn, (1, 128), a.astype(np.float16).ravel(),
                  b.astype(np.float16).ravel(), out)
    np.testing.assert_array_equal(out.reshape(64, 128), a @ b)


def test_cpu_swizzle64_and_scale_d() -> None:
    rng = np.random.default_rng(9)
    a, b = gw.small_values(rng, (64, 32)), gw.small_values(rng, (64, 32))
    out = np.zeros(64 * 64, np.float32)
    with ox.device("cpu"):
        ox.launch(gw.wgmma_swizzle64, (1, 128), bf16_array(a), bf16_array(b), out)
    np.testing.assert_array_equal(out.reshape(64, 64), a @ b.T)


@ox.kernel(checks=False)
def unswizzled(a: RawSlice[bf16], out: RawSlice[f32]):
    """A and B the same 64 x 64 matrix, stored row-major without the swizzle the
    descriptor declares: the product then reads permuted K chunks."""
    t = ox.thread_idx.x
    sa = ox.shared.array(bf16, (64, 64))
    with ox.unsafe():
        for e in range(t, 64 * 64, 128):
            sa[e // 64, e % 64] = a[e]
    ox.sync_threads()
    acc = (0.0,) * 32
    for kk in range(4):
        acc = ox.wgmma(acc, ox.wgmma_desc(sa[0, kk * 16]), ox.wgmma_desc(sa[0, kk * 16]))
    acc = ox.wgmma_wait(0, acc)
    lane = t % 32
    for e in range(32):
        row = 16 * (t // 32) + lane // 4 + 8 * ((e // 2) % 2)
        col = 8 * (e // 4) + 2 * (lane % 4) + e % 2
        with ox.unsafe():
            out[row * 64 + col] = acc[e]


def test_cpu_reads_through_the_swizzle() -> None:
    """Row r's chunk c is read from chunk c ^ (r % 8): a row-major array gives
    sum_k A[r, p_r(k)] * A[c, p_c(k)], the same K chunks permuted per row."""
    rng = np.random.default_rng(3)
    a = gw.small_values(rng, (64, 64))
    out = np.zeros(64 * 64, np.float32)
    with ox.device("cpu"):
        ox.launch(unswizzled, (1, 128), bf16_array(a), out)
    k = np.arange(64)
    read = np.stack([a[r, ((k // 8) ^ (r % 8)) * 8 + k % 8] for r in range(64)])
    np.testing.assert_array_equal(out.reshape(64, 64), read @ read.T)
    assert not np.array_equal(out.reshape(64, 64), a @ a.T)


@ox.kernel
def desc_through_a_loop(out: RawSlice[f32]):
    sa = ox.shared.array(bf16, (64, 64))
    d = ox.wgmma_desc(sa[0, 0])
    acc = (0.0,) * 32
    for _kk in range(4):
        acc = ox.wgmma(acc, d, d)
        d = d + u64(2)
    with ox.unsafe():
        out[0] = acc[0]


def test_cpu_needs_the_descriptor_call_in_sight() -> None:
    with pytest.raises(ox.TargetError, match=r"on the CPU, A of ox.wgmma\(\) must come "
                                             r"straight from ox.wgmma_desc\(\)"):
        desc_through_a_loop.compile(RawSlice[f32], target="cpu")
    assert compiled(desc_through_a_loop, RawSlice[f32]).arch == "sm_90a"  # the GPU takes it


def test_cpu_fence_commit_wait_compile() -> None:
    assert only_wgmma.compile(RawSlice[f32], target="cpu") is not None


def test_wgmma_is_known_to_the_target_table() -> None:
    assert hopper.requirement("wgmma.m64n64k16.bf16.ss") == (90, True)
    assert hopper.requirement("wgmma.desc") == (90, True)
    assert {"llvm.nvvm.wgmma.fence.sync.aligned",
            "llvm.nvvm.wgmma.commit_group.sync.aligned"} <= hopper.KNOWN_NVVM


# -- diagnostics ---------------------------------------------------------------------------------

@ox.kernel
def bad_n(out: RawSlice[f32]):
    sa = ox.shared.array(bf16, (64, 64))
    d = ox.wgmma_desc(sa[0, 0])
    acc = ox.wgmma((0.0,) * 6, d, d)
    with ox.unsafe():
        out[0] = acc[0]


@ox.kernel
def too_wide(out: RawSlice[f32]):
    sa = ox.shared.array(bf16, (64, 64))
    d = ox.wgmma_desc(sa[0, 0])
    acc = ox.wgmma(((0.0,) * 32,) * 5, d, d)
    with ox.unsafe():
        out[0] = acc[0][0]


@ox.kernel
def bad_dtype(out: RawSlice[f32]):
    sa = ox.shared.array(bf16, (64, 64))
    d = ox.wgmma_desc(sa[0, 0])
    acc = ox.wgmma((0.0,) * 32, d, d, dtype=f32)
    with ox.unsafe():
        out[0] = acc[0]


@ox.kernel
def bad_b(out: RawSlice[f32], x: u32):
    sa = ox.shared.array(bf16, (64, 64))
    acc = ox.wgmma((0.0,) * 32, ox.wgmma_desc(sa[0, 0]), x)
    with ox.unsafe():
        out[0] = acc[0]


@ox.kernel
def bad_width(out: RawSlice[f32]):
    sa = ox.shared.array(bf16, (64, 32))
    d = ox.wgmma_desc(sa[0, 0])  # 64-byte rows, but swizzle=128
    with ox.unsafe():
        out[0] = f32(d)


@ox.kernel
def bad_swizzle(out: RawSlice[u64]):
    sa = ox.shared.array(bf16, (64, 8))
    with ox.unsafe():
        out[0] = ox.wgmma_desc(sa[0, 0], swizzle=16)


@ox.kernel
def bad_major(out: RawSlice[u64]):
    sa = ox.shared.array(bf16, (64, 64))
    with ox.unsafe():
        out[0] = ox.wgmma_desc(sa[0, 0], major="m")


@ox.kernel
def bad_global(a: RawSlice[bf16], out: RawSlice[u64]):
    with ox.unsafe():
        out[0] = ox.wgmma_desc(a[0])


@ox.kernel
def bad_f32_array(out: RawSlice[u64]):
    sa = ox.shared.array(f32, (64, 32))
    with ox.unsafe():
        out[0] = ox.wgmma_desc(sa[0, 0])


@ox.kernel
def bad_wait(out: RawSlice[f32]):
    ox.wgmma_wait(8)


@ox.kernel
def bad_wait_value(out: RawSlice[f32], n: i32):
    ox.wgmma_wait(n)


@ox.kernel
def bad_rs_trans(a: RawSlice[u32], out: RawSlice[f32]):
    sa = ox.shared.array(bf16, (64, 64))
    with ox.unsafe():
        fa = (a[0], a[1], a[2], a[3])
    acc = ox.wgmma((0.0,) * 32, fa, ox.wgmma_desc(sa[0, 0]), trans_a=True)
    with ox.unsafe():
        out[0] = acc[0]


@ox.kernel
def bad_rs_count(a: RawSlice[u32], out: RawSlice[f32]):
    sa = ox.shared.array(bf16, (64, 64))
    with ox.unsafe():
        fa = (a[0], a[1], a[2])
    acc = ox.wgmma((0.0,) * 32, fa, ox.wgmma_desc(sa[0, 0]))
    with ox.unsafe():
        out[0] = acc[0]


@ox.kernel
def bad_scale(out: RawSlice[f32]):
    sa = ox.shared.array(bf16, (64, 64))
    d = ox.wgmma_desc(sa[0, 0])
    acc = ox.wgmma((0.0,) * 32, d, d, scale_d=1.5)
    with ox.unsafe():
        out[0] = acc[0]


DIAGNOSTICS = [
    (bad_n, (RawSlice[f32],), ox.KernelTypeError, r"got 6 values \(N = 12\)"),
    (too_wide, (RawSlice[f32],), ox.KernelTypeError, r"got 160 values \(N = 320\)"),
    (bad_dtype, (RawSlice[f32],), ox.KernelTypeError, "multiplies bf16 or f16"),
    (bad_b, (RawSlice[f32], u32), ox.KernelTypeError,
     r"B of ox.wgmma\(\) is a shared-memory matrix descriptor"),
    (bad_width, (RawSlice[f32],), ox.KernelTypeError,
     r"with swizzle=128, ox.wgmma_desc\(\) needs rows of 128 bytes \(64 bf16\)"),
    (bad_swizzle, (RawSlice[u64],), ox.KernelTypeError, "swizzle=128, 64 or 32"),
    (bad_major, (RawSlice[u64],), ox.KernelTypeError, "major= is 'k' or 'mn'"),
    (bad_global, (RawSlice[bf16], RawSlice[u64]), ox.KernelTypeError,
     "works on shared memory"),
    (bad_f32_array, (RawSlice[u64],), ox.KernelTypeError, "bf16 or f16"),
    (bad_wait, (RawSlice[f32],), ox.KernelTypeError, "0 to 7, not 8"),
    (bad_wait_value, (RawSlice[f32], i32), ox.KernelTypeError, "compile-time integer"),
    (bad_rs_trans, (RawSlice[u32], RawSlice[f32]), ox.KernelTypeError,
     "trans_a=True needs A in shared memory"),
    (bad_rs_count, (RawSlice[u32], RawSlice[f32]), ox.KernelTypeError,
     r"A \(8 bf16 or 4 packed u32\) is a tuple of 8 values, got 3"),
    (bad_scale, (RawSlice[f32],), ox.KernelTypeError, "scale_d= of ox.wgmma"),
]


@pytest.mark.parametrize(("kernel", "sig", "error", "message"), DIAGNOSTICS,
                         ids=[d[0].__name__ for d in DIAGNOSTICS])
def test_diagnostics(kernel: Any, sig: tuple[Any, ...], error: type, message: str) -> None:
    with pytest.raises(error, match=message) as info:
        kernel.compile(*sig, arch="sm_90")
    assert info.value.hint or "-->" in str(info.value)


def test_const_groups_are_one_specialization_each() -> None:
    a = gw.wgmma_ss.compile(*SIG_SS, 2, arch="sm_90").ptx
    b = gw.wgmma_ss.compile(*SIG_SS, 4, arch="sm_90").ptx
    assert "m64n128k16" in a and "m64n256k16" in b
    _ = Const  # the group count is a Const[int] parameter of the kernel


# -- safety ------------------------------------------------------------------------------------

@ox.kernel
def divergent(out: RawSlice[f32]):
    t = ox.thread_idx.x
    sa = ox.shared.array(bf16, (64, 64))
    acc = (0.0,) * 32
    if t % 2 == 0:
        acc = ox.wgmma(acc, ox.wgmma_desc(sa[0, 0]), ox.wgmma_desc(sa[0, 0]))
    with ox.unsafe():
        out[t] = acc[0]


def test_wgmma_under_a_divergent_condition_is_refused() -> None:
    """wgmma is `.sync.aligned`: the uniformity pass treats it as a warp collective."""
    with pytest.raises(ox.SafetyError, match="needs every lane of the warp"):
        divergent.compile(RawSlice[f32], arch="sm_90")


@ox.kernel
def desc_at(out: RawSlice[u64], i: i32):
    sa = ox.shared.array(bf16, (64, 64))
    with ox.unsafe():
        out[0] = ox.wgmma_desc(sa[i, 0])


def test_descriptor_start_is_bounds_checked() -> None:
    with ox.device("cpu"):
        out = np.zeros(1, np.uint64)
        ox.launch(desc_at, (1, 1), out, 63)
        with pytest.raises(ox.KernelIndexError, match="index 64 is out of bounds"):
            ox.launch(desc_at, (1, 1), out, 64)


@ox.kernel  # checks on: bounds-checked global reads and writes around the wgmma
def wgmma_checked(a: RawSlice[bf16], b: RawSlice[bf16], out: RawSlice[f32]):
    t = ox.thread_idx.x
    sa = ox.shared.array(bf16, (64, 64))
    sb = ox.shared.array(bf16, (64, 64))
    with ox.unsafe():
        for e in range(t, 64 * 64, 128):
            r = e // 64
            k = e % 64
            sa[r, ((k // 8) ^ (r % 8)) * 8 + k % 8] = a[e]
            sb[r, ((k // 8) ^ (r % 8)) * 8 + k % 8] = b[e]
    ox.fence_proxy_async()
    ox.sync_threads()
    acc = (0.0,) * 32
    ox.wgmma_fence()
    for kk in range(4):
        acc = ox.wgmma(acc, ox.wgmma_desc(sa[0, kk * 16]), ox.wgmma_desc(sb[0, kk * 16]),
                       scale_d=kk > 0)
    ox.wgmma_commit()
    acc = ox.wgmma_wait(0, acc)
    for e in range(32):
        with ox.unsafe():
            out[t * 32 + e] = acc[e]


def test_checks_on_do_not_serialize_wgmma() -> None:
    """The bounds checks' report is inlined in a wgmma kernel: no call, so no C7509."""
    ck = compiled(wgmma_checked, *SIG_SS)
    assert "call.uni" not in ck.ptx and "oxide_$_report" not in ck.ptx
    assert_fast(ck)
