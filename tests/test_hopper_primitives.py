"""Inline PTX, mma.sync / ldmatrix / stmatrix and the Hopper primitives, without a GPU.

Each primitive compiles to PTX holding its instruction, and the cubin assembles
(nvJitLink) for the architectures that have it; an older target, or the CPU, is a
TargetError at the call, raised before LLVM sees the IR (LLVM aborts the process on an
intrinsic it cannot select). Kernels using sm_90a-only instructions are compiled for
sm_90a when asked for sm_90. tests/test_gpu_hopper_primitives.py checks the results.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import test_gpu_hopper_primitives as gh

import oxide as ox
from oxide import (
    RawSlice,
    Slice,
    bf16,
    bool_,
    f16,
    f32,
    f64,
    i32,
    u8,
    u16,
    u32,
    u64,
)
from oxide.codegen import hopper


def ptx_for(kernel: Any, *sig: Any, arch: str = "sm_90") -> str:
    """The PTX for `arch`, after proving the cubin assembles; never an unresolved
    `llvm.*` call (an unknown intrinsic name would be one: TOOLCHAIN-NOTES pitfall 1)."""
    ck = kernel.compile(*sig, arch=arch)
    assert ck.cubin
    assert "llvm." not in ck.ptx
    return ck.ptx


def target_error(kernel: Any, *sig: Any, arch: str) -> ox.TargetError:
    with pytest.raises(ox.TargetError) as info:
        kernel.compile(*sig, arch=arch)
    return info.value


# -- ox.asm ----------------------------------------------------------------------------

@ox.kernel
def asm_add(x: RawSlice[u32], out: RawSlice[u32]):
    i = ox.thread_idx.x
    with ox.unsafe():
        out[i] = ox.asm("add.u32 %0, %1, %2;", u32, x[i], u32(7))


@ox.kernel
def asm_many(x: RawSlice[f32], y: RawSlice[f64], h: RawSlice[bf16], g: RawSlice[f16],
             n: RawSlice[u64], s: RawSlice[u16]):
    i = ox.thread_idx.x
    with ox.unsafe():
        a, b = ox.asm("{ add.f32 $0, $2, $2; mul.f64 $1, $3, $3; }", (f32, f64), x[i], y[i])
        hb = ox.asm("mov.b16 $0, $1;", bf16, h[i])
        hg = ox.asm("mov.b16 $0, $1;", f16, g[i])
        wide = ox.asm("add.u64 $0, $1, 5;", u64, n[i])
        short = ox.asm("mov.b16 $0, $1;", u16, s[i])
        ox.asm("membar.cta;", None)
        x[i] = a
        y[i] = b
        h[i] = hb
        g[i] = hg
        n[i] = wide
        s[i] = short


@ox.kernel
def asm_constraints(x: RawSlice[u32]):
    i = ox.thread_idx.x
    with ox.unsafe():
        x[i] = ox.asm("add.u32 $0, $1, $2;", u32, x[i], 3, constraints="=r,r,n,~{memory}")


@ox.kernel
def asm_lane(out: RawSlice[u32]):
    with ox.unsafe():
        lane = ox.asm("mov.u32 $0, %laneid;", u32, volatile=False)
        out[ox.thread_idx.x] = lane


def test_asm_compiles_with_typed_operands() -> None:
    for arch in ("sm_80", "sm_90"):
        ptx = ptx_for(asm_add, RawSlice[u32], RawSlice[u32], arch=arch)
        assert "add.u32" in ptx
    ptx = ptx_for(asm_many, RawSlice[f32], RawSlice[f64], RawSlice[bf16], RawSlice[f16],
                  RawSlice[u64], RawSlice[u16])
    for text in ("add.f32", "mul.f64", "mov.b16", "add.u64", "membar.cta"):
        assert text in ptx
    assert "add.u32" in ptx_for(asm_constraints, RawSlice[u32])
    assert "%laneid" in ptx_for(asm_lane, RawSlice[u32])


def test_asm_is_unsafe_and_gpu_only() -> None:
    @ox.kernel
    def outside(x: RawSlice[u32]):
        v = ox.asm("mov.u32 $0, 1;", u32)
        with ox.unsafe():
            x[0] = v

    with pytest.raises(ox.SafetyError, match="needs `with ox.unsafe"):
        outside.compile(RawSlice[u32], arch="sm_90")
    err = target_error(asm_add, RawSlice[u32], RawSlice[u32], arch="cpu")
    assert "only on NVIDIA GPUs" in str(err) and err.span is not None
    assert "ox.asm" in err.span.text


def asm_error(body: str, tmp: Path) -> ox.CompileError:
    ns: dict[str, Any] = {}
    src = ("import oxide as ox\nfrom oxide import *\n"
           "@ox.kernel\ndef k(x: RawSlice[u32], b: RawSlice[bool_], c: RawSlice[u8]):\n"
           "    with ox.unsafe():\n"
           f"        {body}\n")
    path = str(tmp / "asm_kernel.py")  # a real file: diagnostics quote its lines
    with open(path, "w") as f:
        f.write(src)
    exec(compile(src, path, "exec"), ns)
    with pytest.raises(ox.CompileError) as info:
        ns["k"].compile(RawSlice[u32], RawSlice[bool_], RawSlice[u8], arch="sm_90")
    return info.value


@pytest.mark.parametrize("body, message", [
    ('x[0] = ox.asm("mov.u32 $0, $3;", u32, x[1])', "names operand \\$3"),
    ('x[0] = ox.asm("mov.u32 %0, %2;", u32, x[1])', "names operand \\$2"),
    ('ox.asm("", None, b[0])', "cannot be bool_"),
    ('ox.asm("", None, c[0])', "cannot be u8"),
    ('ox.asm("", u8)', "are dtypes"),
    ('ox.asm("", 3)', "are dtypes"),
    ('ox.asm(x, None)', "string literal"),
    ('ox.asm("nop;")', "takes a template"),
    ('x[0] = ox.asm("mov.u32 $0, $1;", u32, x[1], constraints="=r")', "name 1 operands"),
    ('x[0] = ox.asm("mov.u32 $0, $1;", u32, x[1], constraints="=f,r")', "does not fit output"),
    ('x[0] = ox.asm("mov.u32 $0, $1;", u32, x[1], constraints="=r,l")', "does not fit input"),
    ('x[0] = ox.asm("mov.u32 $0, 1;", u32, bogus=1)', "unexpected keyword"),
])
def test_asm_diagnostics(body: str, message: str, tmp_path: Path) -> None:
    err = asm_error(body, tmp_path)
    assert isinstance(err, (ox.KernelTypeError, ox.KernelSyntaxError))
    assert err.span is not None
    import re

    assert re.search(message, err.message), err.message


# -- mma.sync, ldmatrix, stmatrix ------------------------------------------------------

@ox.kernel
def mma_bf16_packed(a: Slice[u32], b: Slice[u32], out: RawSlice[f32]):
    lane = ox.lane_id()
    frag_a = (a[lane * 4], a[lane * 4 + 1], a[lane * 4 + 2], a[lane * 4 + 3])
    frag_b = (b[lane * 2], b[lane * 2 + 1])
    d = ox.mma_sync(frag_a, frag_b, (0.0, 0.0, 0.0, 0.0), dtype=bf16)
    with ox.unsafe():
        for j in range(4):
            out[lane * 4 + j] = d[j]


@ox.kernel
def mma_f16_halves(a: Slice[f16], b: Slice[f16], out: RawSlice[f32]):
    lane = ox.lane_id()
    fa = (a[lane * 8], a[lane * 8 + 1], a[lane * 8 + 2], a[lane * 8 + 3], a[lane * 8 + 4],
          a[lane * 8 + 5], a[lane * 8 + 6], a[lane * 8 + 7])
    fb = (b[lane * 4], b[lane * 4 + 1], b[lane * 4 + 2], b[lane * 4 + 3])
    acc = (f32(1.0), f32(2.0), f32(3.0), f32(4.0))
    for _ in range(3):
        acc = ox.mma_sync(fa, fb, acc, dtype=f16)
    with ox.unsafe():
        for j in range(4):
            out[lane * 4 + j] = acc[j]


@ox.kernel
def mma_tf32(a: Slice[f32], b: Slice[f32], out: RawSlice[f32]):
    lane = ox.lane_id()
    fa = (a[lane * 4], a[lane * 4 + 1], a[lane * 4 + 2], a[lane * 4 + 3])
    d0, d1, d2, d3 = ox.mma_sync(fa, (b[lane * 2], b[lane * 2 + 1]), (0.0, 0.0, 0.0, 0.0),
                                 dtype=f32)
    with ox.unsafe():
        out[lane * 4] = d0 + d1 + d2 + d3


def test_mma_sync_compiles_for_ampere_and_hopper() -> None:
    for arch in ("sm_80", "sm_90"):
        ptx = ptx_for(mma_bf16_packed, Slice[u32], Slice[u32], RawSlice[f32], arch=arch)
        assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in ptx
        ptx = ptx_for(mma_f16_halves, Slice[f16], Slice[f16], RawSlice[f32], arch=arch)
        assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == 3
        ptx = ptx_for(mma_tf32, Slice[f32], Slice[f32], RawSlice[f32], arch=arch)
        assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in ptx


@pytest.mark.parametrize("check", [
    gh.test_mma_sync_bf16_matches_a_matmul, gh.test_mma_sync_f16_halves_accumulate,
    gh.test_mma_sync_tf32_matches_a_matmul, gh.test_ldmatrix_x4_and_trans,
    gh.test_stmatrix_inverts_ldmatrix,
], ids=lambda f: f.__name__[5:])
def test_warp_matrix_instructions_on_the_cpu(check: Any) -> None:
    """The CPU builds mma.sync, ldmatrix and stmatrix from warp shuffles, with PTX's
    fragment layouts: the GPU tests' checks against NumPy pass there too."""
    with ox.device("cpu"):
        check()


def test_mma_sync_on_the_cpu_rounds_tf32_inputs() -> None:
    """tf32 keeps 10 mantissa bits: the CPU drops the other 13 of each f32 input."""
    rng = np.random.default_rng(4)
    A = rng.standard_normal((16, 8)).astype(np.float32)
    B = rng.standard_normal((8, 8)).astype(np.float32)
    e = np.arange(4)
    fa = A[gh.G[:, None] + 8 * (e % 2)[None, :], gh.T4[:, None] + 4 * (e // 2)[None, :]]
    fb = B[gh.T4[:, None] + 4 * np.arange(2)[None, :], gh.G[:, None]]
    with ox.device("cpu"):
        *_, out = gh.run(gh.mma_tf32, (1, 32), fa.ravel().copy(), fb.ravel().copy(),
                         np.zeros(128, np.float32))

    def tf32(x: np.ndarray) -> np.ndarray:
        return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)

    rows, cols = gh.d_positions()
    want = (tf32(A).astype(np.float64) @ tf32(B).astype(np.float64))[rows, cols]
    np.testing.assert_allclose(out.reshape(32, 4), want, rtol=1e-5, atol=1e-5)


@ox.kernel
def matrices(out: RawSlice[u32], row: i32):
    tile = ox.shared.array(bf16, (16, 16))
    lane = ox.lane_id()
    with ox.unsafe():
        r0, r1, r2, r3 = ox.ldmatrix(tile[lane % 16, (lane // 16) * 8])
        (t0,) = ox.ldmatrix(tile[lane % 8, 0], 1, trans=True)
        u0, u1 = ox.ldmatrix(tile[row, 8], num=2)
        ox.sync_threads()
        ox.stmatrix(tile[lane % 16, (lane // 16) * 8], (r3, r2, r1, r0), trans=True)
        ox.stmatrix(tile[lane % 8, 0], (t0,))
        ox.stmatrix(tile[lane % 16, 8], (u0, u1))
        out[lane] = r0 + t0 + u1


@ox.kernel
def load_only(out: RawSlice[u32]):
    tile = ox.shared.array(f16, (8, 8))
    lane = ox.lane_id()
    with ox.unsafe():
        a, b = ox.ldmatrix(tile[lane % 8, 0], 2, trans=True)
        out[lane] = a ^ b


def test_ldmatrix_and_stmatrix_compile() -> None:
    ptx = ptx_for(matrices, RawSlice[u32], i32)
    for text in ("ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                 "ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16",
                 "ldmatrix.sync.aligned.m8n8.x2.shared.b16",
                 "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
                 "stmatrix.sync.aligned.m8n8.x1.shared.b16",
                 "stmatrix.sync.aligned.m8n8.x2.shared.b16"):
        assert text in ptx, text
    # ldmatrix is Ampere's; stmatrix needs sm_90
    assert "ldmatrix.sync.aligned.m8n8.x2.trans" in ptx_for(load_only, RawSlice[u32],
                                                             arch="sm_80")
    err = target_error(matrices, RawSlice[u32], i32, arch="sm_80")
    assert "ox.stmatrix()" in str(err) and "needs sm_90" in str(err)


def test_ldmatrix_checks_the_row_it_reads() -> None:
    """A run-time row index is bounds-checked (the whole 8-element row); the check
    reports and falls back to element 0, so every lane still runs the collective."""
    ck = matrices.compile(RawSlice[u32], i32, arch="sm_90")
    assert any(site.kind == "index" and "ldmatrix(tile[row, 8]" in site.span.text
               for site in ck.sites)
    assert "@oxide.report" in ck.llvm_unoptimized


def matrix_error(body: str, tmp: Path, decl: str = "ox.shared.array(bf16, (16, 16))"
                 ) -> ox.CompileError:
    ns: dict[str, Any] = {}
    src = ("import oxide as ox\nfrom oxide import *\n"
           "@ox.kernel\ndef k(x: RawSlice[u32]):\n"
           f"    t = {decl}\n"
           "    with ox.unsafe():\n"
           f"        {body}\n")
    path = str(tmp / "matrix_kernel.py")  # a real file: diagnostics quote its lines
    with open(path, "w") as f:
        f.write(src)
    exec(compile(src, path, "exec"), ns)
    with pytest.raises(ox.CompileError) as info:
        ns["k"].compile(RawSlice[u32], arch="sm_90")
    return info.value


@pytest.mark.parametrize("body, decl, message", [
    ("ox.ldmatrix(t[0, 0], 3)", None, "1, 2 or 4 matrices"),
    ("ox.ldmatrix(t[0, 0])", "ox.shared.array(f32, (16, 16))", "bf16 or f16 or i16 or u16"),
    ("ox.ldmatrix(x[0])", None, "works on shared memory"),
    ("ox.ldmatrix(t)", None, "element of a shared array"),
    ("ox.stmatrix(t[0, 0], (x[0], x[1], x[2]))", None, "1, 2 or 4 u32"),
    ("ox.stmatrix(t[0, 0], (f32(1.5),))", None, "u32 or i32"),
    ("ox.mma_sync((x[0],), (x[0], x[1]), (0.0, 0.0, 0.0, 0.0))", None, "A \\(8 bf16"),
    ("ox.mma_sync((x[0], x[1], x[2], x[3]), (x[0], x[1]), (0.0, 0.0))", None, "C \\(4 f32"),
    ("ox.mma_sync((x[0], x[1], x[2], x[3]), (x[0], x[1]), (0.0, 0.0, 0.0, 0.0), "
     "dtype=u32)", None, "bf16, f16 or f32"),
])
def test_matrix_diagnostics(body: str, decl: str | None, message: str, tmp_path: Path) -> None:
    import re

    err = matrix_error(body, tmp_path, decl or "ox.shared.array(bf16, (16, 16))")
    assert isinstance(err, ox.KernelTypeError), err
    assert re.search(message, err.message), err.message


def test_matrix_loads_need_unsafe() -> None:
    @ox.kernel
    def k(x: RawSlice[u32]):
        t = ox.shared.array(bf16, (8, 8))
        (v,) = ox.ldmatrix(t[ox.lane_id() % 8, 0], 1)
        with ox.unsafe():
            x[0] = v

    with pytest.raises(ox.SafetyError, match="ox.ldmatrix"):
        k.compile(RawSlice[u32], arch="sm_90")


# -- mbarrier, fences, elect, setmaxnreg, named barriers, clusters -------------------------

@ox.kernel(max_threads=128)
def ping(out: RawSlice[u64], phase: u32):
    bars = ox.shared.array(u64, 2)
    t = ox.thread_idx.x
    with ox.unsafe():
        if t == 0:
            ox.mbarrier.init(bars[0], 64)
            ox.mbarrier.init(bars[1], 1)
            ox.fence_mbarrier_init()
        ox.sync_threads()
        token = ox.mbarrier.arrive(bars[0])
        ox.mbarrier.wait_parity(bars[0], phase)
        if t == 0:
            token = ox.mbarrier.arrive_expect_tx(bars[1], 0)
        done = ox.mbarrier.try_wait_parity(bars[1], 0)
        ox.fence_proxy_async()
        out[t] = token + u64(done)


@ox.kernel
def arrive_only(out: RawSlice[u64]):
    bars = ox.shared.array(u64, 1)
    with ox.unsafe():
        if ox.thread_idx.x == 0:
            ox.mbarrier.init(bars[0], 32)
        ox.sync_threads()
        out[ox.thread_idx.x] = ox.mbarrier.arrive(bars[0])


def test_mbarrier_compiles() -> None:
    ptx = ptx_for(ping, RawSlice[u64], u32)
    for text in ("mbarrier.init.shared.b64", "mbarrier.arrive.shared.b64",
                 "mbarrier.arrive.expect_tx.shared.b64", "mbarrier.try_wait.parity.shared.b64",
                 "fence.mbarrier_init.release.cluster", "fence.proxy.async.shared::cta"):
        assert text in ptx, text
    # init and plain arrive are Ampere's; the parity waits and expect_tx Hopper's
    assert "mbarrier.arrive.shared.b64" in ptx_for(arrive_only, RawSlice[u64], arch="sm_80")
    err = target_error(ping, RawSlice[u64], u32, arch="sm_80")
    assert "needs sm_90" in str(err)


@pytest.mark.parametrize("body, message", [
    ("ox.mbarrier.arrive(f[0])", "u64 or i64"),
    ("ox.mbarrier.arrive(x[0])", "works on shared memory"),
    ("ox.mbarrier.arrive(b)", "element of a shared array"),
    ("ox.mbarrier.init(b[0])", "takes 2 positional"),
    ("ox.mbarrier.try_wait_parity(b[0], f32(1.5))", "must be an integer"),
    ("ox.mbarrier.arrive(b[0], count=2)", "unexpected keyword"),
])
def test_mbarrier_diagnostics(body: str, message: str, tmp_path: Path) -> None:
    import re

    err = matrix_error(f"b = ox.shared.array(u64, 2)\n        f = ox.shared.array(u32, 2)"
                       f"\n        {body}", tmp_path)
    assert isinstance(err, (ox.KernelTypeError, ox.KernelSyntaxError)), err
    assert re.search(message, err.message), err.message


def test_mbarrier_init_needs_unsafe() -> None:
    @ox.kernel
    def k(x: RawSlice[u64]):
        bars = ox.shared.array(u64, 1)
        ox.mbarrier.init(bars[0], 1)

    with pytest.raises(ox.SafetyError, match="mbarrier.init"):
        k.compile(RawSlice[u64], arch="sm_90")


@ox.kernel(max_threads=384)
def warp_groups(out: RawSlice[u32]):
    t = ox.thread_idx.x
    with ox.unsafe():
        if ox.warp_id() < 4:  # warp group 0 (a warp-uniform condition)
            ox.setmaxnreg(40, inc=False)
            ox.named_barrier_sync(1, 128)
        else:
            ox.setmaxnreg(232)
            ox.named_barrier_sync(2, 256)
        if ox.elect_sync():
            out[t // 32] = u32(1)


def test_setmaxnreg_picks_sm_90a() -> None:
    ck = warp_groups.compile(RawSlice[u32], arch="sm_90")
    assert ck.arch == "sm_90a" and ".target sm_90a" in ck.ptx
    assert ck.cubin
    for text in ("setmaxnreg.dec.sync.aligned.u32 \t40", "setmaxnreg.inc.sync.aligned.u32 \t232",
                 "barrier.sync \t1, 128", "barrier.sync \t2, 256", "elect.sync"):
        assert text in ck.ptx, text
    assert ptx_for(warp_groups, RawSlice[u32], arch="sm_90a")
    for arch in ("sm_80", "sm_100"):
        err = target_error(warp_groups, RawSlice[u32], arch=arch)
        assert "needs sm_90a" in str(err)
    # a kernel without them stays sm_90
    assert asm_add.compile(RawSlice[u32], RawSlice[u32], arch="sm_90").arch == "sm_90"


def test_a_setmaxnreg_kernel_loads_as_ptx_for_the_driver_jit() -> None:
    """nvJitLink's relocatable compile drops setmaxnreg (ptxas note C7504); the runtime
    therefore loads such a kernel's PTX, which the driver compiles whole. Others load
    their cubin."""
    ck = warp_groups.compile(RawSlice[u32], arch="sm_90")
    assert ck.module_image == ck.ptx.encode() + b"\0"
    assert ck.cubin.startswith(b"\x7fELF")  # nvJitLink still assembles it, on request
    plain = asm_add.compile(RawSlice[u32], RawSlice[u32], arch="sm_90")
    assert plain.module_image == plain.cubin


def test_oxide_driver_jit_loads_every_kernel_as_ptx(monkeypatch, tmp_path) -> None:
    """`OXIDE_DRIVER_JIT=1`: any kernel's image is its PTX (the driver compiles it as a
    whole program), under a disk-cache key of its own."""
    from oxide.compiler import compile_kernel
    from oxide.runtime import cache

    monkeypatch.setenv("OXIDE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("OXIDE_CACHE", raising=False)
    key = cache.entry_key(asm_add, asm_add_sig(), "sm_80")
    monkeypatch.setenv("OXIDE_DRIVER_JIT", "1")
    ck = compile_kernel(asm_add, asm_add_sig(), "nvptx", "sm_80")  # not the memoized one
    assert ck.module_image == ck.ptx.encode() + b"\0"
    assert key is not None and cache.entry_key(asm_add, asm_add_sig(), "sm_80") != key


def asm_add_sig() -> tuple:
    from oxide.specialize import signature_from

    return signature_from(asm_add, (RawSlice[u32], RawSlice[u32]))


@pytest.mark.parametrize("body, message", [
    ("ox.setmaxnreg(20)", "24 to 256"),
    ("ox.setmaxnreg(100)", "multiple of 8"),
    ("ox.setmaxnreg(x[0])", "compile-time integer"),
    ("ox.setmaxnreg(64, inc=x[0])", "True or False"),
    ("ox.named_barrier_sync(16, 64)", "0 to 15"),
    ("ox.named_barrier_sync(1, 48)", "multiple of 32"),
    ("ox.cluster.block_idx('w')", "'x', 'y' or 'z'"),
    ("ox.cluster.rank(0)", "takes 0"),
])
def test_warp_group_diagnostics(body: str, message: str, tmp_path: Path) -> None:
    err = matrix_error(body, tmp_path)
    assert isinstance(err, (ox.KernelTypeError, ox.KernelSyntaxError)), err
    assert message in err.message, err.message


def test_named_barrier_runs_on_ampere() -> None:
    @ox.kernel
    def k(out: RawSlice[u32], n: u32):
        ox.named_barrier_sync(3, n)
        with ox.unsafe():
            out[ox.thread_idx.x] = u32(1)

    assert "barrier.sync \t3" in ptx_for(k, RawSlice[u32], u32, arch="sm_80")


@ox.kernel
def cluster_info(out: RawSlice[i32]):
    t = ox.thread_idx.x
    with ox.unsafe():
        out[t] = (ox.cluster.rank() + ox.cluster.size() * 10 + ox.cluster.block_idx("x") * 100
                  + ox.cluster.block_dim(1) + ox.cluster.cluster_idx("z")
                  + ox.cluster.grid_dim(0))
        ox.cluster.sync()
        ox.cluster.arrive()
        ox.cluster.wait()


def test_cluster_registers_and_barrier() -> None:
    ptx = ptx_for(cluster_info, RawSlice[i32])
    for text in ("%cluster_ctarank", "%cluster_nctarank", "%cluster_ctaid.x",
                 "%cluster_nctaid.y", "%clusterid.z", "%nclusterid.x", "barrier.cluster.arrive",
                 "barrier.cluster.wait"):
        assert text in ptx, text
    err = target_error(cluster_info, RawSlice[i32], arch="sm_80")
    assert "needs sm_90" in str(err) and err.span is not None


@ox.kernel
def cluster_of_one(out: RawSlice[i32]):
    b = ox.block_idx.x + 3 * ox.block_idx.y
    ox.fence_proxy_async()
    ox.fence_mbarrier_init()
    with ox.unsafe():
        if ox.thread_idx.x == 0:
            out[b * 8] = ox.cluster.rank()
            out[b * 8 + 1] = ox.cluster.size()
            out[b * 8 + 2] = ox.cluster.block_idx("y")
            out[b * 8 + 3] = ox.cluster.block_dim("x")
            out[b * 8 + 4] = ox.cluster.cluster_idx("x")
            out[b * 8 + 5] = ox.cluster.cluster_idx("y")
            out[b * 8 + 6] = ox.cluster.grid_dim("x")
            out[b * 8 + 7] = ox.cluster.grid_dim("y")


def test_cluster_registers_on_the_cpu_are_a_cluster_of_one() -> None:
    """CPU launches form no clusters (GPU launches do with LaunchConfig(cluster=)): each
    block is a cluster of one, so the cluster index is the block index; the fences order
    nothing there."""
    out = np.full(48, -1, np.int32)
    with ox.device("cpu"):
        ox.launch(cluster_of_one, ((3, 2), 32), out)
    want = [[0, 1, 0, 1, bx, by, 3, 2] for by in range(2) for bx in range(3)]
    np.testing.assert_array_equal(out.reshape(6, 8), np.array(want, np.int32))
    assert "%cluster_ctarank" in ptx_for(cluster_of_one, RawSlice[i32])


@pytest.mark.parametrize("kernel, sig", [  # mbarriers run on the CPU: tests/test_tma.py
    (warp_groups, (RawSlice[u32],)),
    (cluster_info, (RawSlice[i32],)),
    (asm_add, (RawSlice[u32], RawSlice[u32])),
], ids=["warp_groups", "cluster_barrier", "asm"])
def test_every_primitive_is_a_target_error_on_the_cpu(kernel: Any, sig: tuple[Any, ...]
                                                      ) -> None:
    err = target_error(kernel, *sig, arch="cpu")
    assert "runs only on NVIDIA GPUs" in str(err)
    assert err.span is not None and err.hint


def test_every_kind_names_a_known_requirement() -> None:
    """Every kind the frontend emits maps to an architecture and a user-facing name;
    an unknown one is refused before any IR is written."""
    kinds = ["mma.m16n8k16.bf16", "mma.m16n8k8.tf32", "ldmatrix.x4", "stmatrix.x2.trans",
             "mbarrier.init", "mbarrier.arrive", "mbarrier.arrive_expect_tx",
             "mbarrier.try_wait_parity", "mbarrier.wait_parity", "fence.proxy_async",
             "fence.mbarrier_init", "elect_sync", "setmaxnreg.inc", "named_barrier",
             "sreg.cluster.ctarank", "cluster.arrive"]
    for kind in kinds:
        sm, _ = hopper.requirement(kind)
        assert sm in (80, 90)
        assert hopper.user_name(kind).startswith(("ox.", "the cluster"))
    assert hopper.requirement("mbarrier.arrive_expect_tx") == (90, False)
    assert hopper.requirement("setmaxnreg.dec") == (90, True)
    with pytest.raises(ox.TargetError, match="no GPU primitive"):
        hopper.requirement("wgmma.mma_async")
    # an NVVM name oxide never verified is refused before LLVM sees it
    with pytest.raises(ox.InternalCompilerError, match="unknown NVVM intrinsic"):
        hopper._nvvm(None, "llvm.nvvm.wgmma.mma_async.m64n128k16", "void", [])
    assert "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x2.trans.b16.p3" in hopper.KNOWN_NVVM


def test_unknown_namespace_member_is_a_compile_error() -> None:
    @ox.kernel
    def k(x: RawSlice[u64]):
        bars = ox.shared.array(u64, 1)
        ox.mbarrier.frobnicate(bars[0])

    with pytest.raises(ox.CompileError):
        k.compile(RawSlice[u64], arch="sm_90")


def test_an_asm_result_is_thread_varying() -> None:
    @ox.kernel
    def k(x: RawSlice[u32]):
        with ox.unsafe():
            v = ox.asm("mov.u32 $0, %laneid;", u32)
        if v == 0:
            ox.sync_threads()

    with pytest.raises(ox.SafetyError):
        k.compile(RawSlice[u32], arch="sm_90")


def test_mma_sync_under_a_lane_condition_is_an_error() -> None:
    @ox.kernel
    def k(a: Slice[u32], out: RawSlice[f32]):
        lane = ox.lane_id()
        if lane < 16:
            d = ox.mma_sync((a[0], a[1], a[2], a[3]), (a[4], a[5]), (0.0, 0.0, 0.0, 0.0))
            with ox.unsafe():
                out[lane] = d[0]

    with pytest.raises(ox.SafetyError, match="every lane of the warp"):
        k.compile(Slice[u32], RawSlice[f32], arch="sm_90")


def test_the_names_are_exported() -> None:
    for name in ("asm", "mma_sync", "ldmatrix", "stmatrix", "mbarrier", "fence_proxy_async",
                 "fence_mbarrier_init", "elect_sync", "setmaxnreg", "named_barrier_sync",
                 "cluster"):
        assert getattr(ox, name) is getattr(ox.lang, name)
    with pytest.raises(RuntimeError, match="only works inside"):
        ox.mbarrier.arrive(0)
    assert bool_  # the dtype the diagnostics use


@ox.kernel
def ld_row(out: RawSlice[u32], row: i32, col: i32):
    tile = ox.shared.array(u16, (16, 16))
    lane = ox.lane_id()
    with ox.unsafe():
        for i in range(8):  # every element, so that no lane reads uninitialized memory
            e = lane * 8 + i
            tile[e // 16, e % 16] = u16(e + 1)
        ox.sync_threads()
        r = lane % 8
        c = 0
        if lane < 8:  # lanes 0-7 give the rows; the rest take part with rows in range
            r = row + lane
            c = col
        (v,) = ox.ldmatrix(tile[r, c], 1)
        out[lane] = v


def test_an_ldmatrix_row_past_the_array_is_an_index_error() -> None:
    """Each lane's 8-element row must lie in the array: a row index or a column too close
    to the end is reported at the call (the CPU runs it; the GPU reports the same way)."""
    out = np.zeros(32, np.uint32)
    with ox.device("cpu"):
        ox.launch(ld_row, (1, 32), out, np.int32(8), np.int32(8))
        assert out.any()
        for row, col in ((9, 0), (0, 9), (-1, 0)):
            with pytest.raises(ox.KernelIndexError, match="ldmatrix"):
                ox.launch(ld_row, (1, 32), out, np.int32(row), np.int32(col))


def test_ptx_the_driver_rejects_gets_ptxas_diagnostic(monkeypatch) -> None:
    """A setmaxnreg kernel's image is its PTX, never assembled by nvJitLink before the
    driver compiles it; where the driver rejects one, ptxas (through nvJitLink) says why,
    and where ptxas does not object, the driver's own error stands."""
    from oxide.errors import DeviceError, TargetError
    from oxide.runtime import gpu
    from oxide.runtime.kernel_image import KernelImage

    def rejected(code: bytes) -> None:
        raise DeviceError("CUDA_ERROR_INVALID_PTX loading the kernel's cubin")

    monkeypatch.setattr(gpu.cd, "load_module", rejected)
    good = warp_groups.compile(RawSlice[u32], arch="sm_90")
    image = KernelImage(good.module_image, good.name, [], (8,))
    with pytest.raises(DeviceError, match="INVALID_PTX"):
        gpu.load_module(image)
    broken = good.ptx.replace("setmaxnreg.inc.sync.aligned.u32", "setmaxnreg.bogus.u32", 1)
    assert broken != good.ptx
    with pytest.raises(TargetError, match="nvJitLink rejected the PTX"):
        gpu.load_module(KernelImage(broken.encode() + b"\0", good.name, [], (8,)))
