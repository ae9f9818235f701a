"""Integer intrinsics: ox.popc, clz, ffs, brev, byte_perm, mulhi and `int.bit_count()`.

Each runs on the CPU over edge values (0, 1, -1, each type's min and max, powers of two,
random values) against a Python reference written from CUDA's definition (__popc,
__clz, __ffs, __brev, __byte_perm as PTX `prmt`, __mulhi/__umulhi/__mul64hi/__umul64hi),
and compiles to PTX that nvJitLink assembles for sm_80 and sm_90. The same checks run
on a GPU in tests/test_gpu_intrinsics.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import oxide as ox
from oxide import DisjointSlice, Slice, f32, i8, i16, i32, i64, thread, u8, u16, u32, u64

ARCHES = ("sm_80", "sm_90")
INT_TYPES = (i8, i16, i32, i64, u8, u16, u32, u64)
T = ox.TypeVar("T")
U = ox.TypeVar("U")
rng = np.random.default_rng(15)


# -- references (Python integers, from CUDA's definitions) -----------------------------

def promoted(dt: ox.DType) -> ox.DType:
    """The type an intrinsic computes in: narrow integers widen to 32 bits (C's promotion)."""
    if dt.bits >= 32:
        return dt
    return i32 if dt.is_signed else u32


def wrap(v: int, dt: ox.DType) -> int:
    v &= (1 << dt.bits) - 1
    return v - (1 << dt.bits) if dt.is_signed and v >> (dt.bits - 1) else v


def unsigned_bits(v: int, bits: int) -> int:
    return v & ((1 << bits) - 1)


def ref_popc(v: int, dt: ox.DType) -> int:
    return unsigned_bits(v, promoted(dt).bits).bit_count()


def ref_clz(v: int, dt: ox.DType) -> int:
    bits = promoted(dt).bits
    return bits - unsigned_bits(v, bits).bit_length()


def ref_ffs(v: int, dt: ox.DType) -> int:
    u = unsigned_bits(v, promoted(dt).bits)
    return (u & -u).bit_length()


def ref_brev(v: int, dt: ox.DType) -> int:
    p = promoted(dt)
    return wrap(int(format(unsigned_bits(v, p.bits), f"0{p.bits}b")[::-1], 2), p)


def ref_mulhi(a: int, b: int, dt: ox.DType) -> int:
    p = promoted(dt)
    return wrap((a * b) >> p.bits, p)


def ref_bit_count(v: int, dt: ox.DType) -> int:
    return abs(v).bit_count()  # Python's int.bit_count()


def ref_byte_perm(x: int, y: int, s: int) -> int:
    """PTX prmt.b32 (CUDA's __byte_perm): byte n of the result is byte `s >> 4n & 7` of
    y:x, or that byte's sign replicated where bit 3 of the nibble is set."""
    source = (unsigned_bits(y, 32) << 32) | unsigned_bits(x, 32)
    out = 0
    for n in range(4):
        nib = (s >> (4 * n)) & 0xF
        byte = (source >> (8 * (nib & 7))) & 0xFF
        if nib & 8:
            byte = 0xFF if byte & 0x80 else 0
        out |= byte << (8 * n)
    return out


# -- inputs ------------------------------------------------------------------------------

def edge_values(dt: ox.DType, n_random: int = 64) -> np.ndarray:
    """0, 1, 2, 3, -1, min, min + 1, max, max - 1, every power of two (and its negation
    for signed types), then random values over the whole range."""
    lo = -(1 << (dt.bits - 1)) if dt.is_signed else 0
    hi = (1 << (dt.bits - 1)) - 1 if dt.is_signed else (1 << dt.bits) - 1
    vals = {0, 1, 2, 3, lo, lo + 1, hi, hi - 1}
    if dt.is_signed:
        vals.add(-1)
    for k in range(dt.bits):
        vals.add(wrap(1 << k, dt))
        vals.add(wrap((1 << k) - 1, dt))
        if dt.is_signed:
            vals.add(wrap(-(1 << k), dt))
    randoms = [int(v) for v in rng.integers(lo, hi, n_random, endpoint=True, dtype=dt.numpy)]
    return np.array(sorted(vals) + randoms, dtype=dt.numpy)


def launch(kernel: Any, n: int, *args: Any) -> None:
    kernel[(n + 63) // 64, 64](*args)


# -- kernels ------------------------------------------------------------------------------

@ox.kernel
def popc_k(x: Slice[T], out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i in out:
        out[i] = ox.popc(x[i])


@ox.kernel
def clz_k(x: Slice[T], out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i in out:
        out[i] = ox.clz(x[i])


@ox.kernel
def ffs_k(x: Slice[T], out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i in out:
        out[i] = ox.ffs(x[i])


@ox.kernel
def bit_count_k(x: Slice[T], out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i].bit_count()


@ox.kernel
def brev_k(x: Slice[T], out: DisjointSlice[U]):
    i = thread.index_1d()
    if i in out:
        out[i] = ox.brev(x[i])


@ox.kernel
def mulhi_k(a: Slice[T], b: Slice[T], out: DisjointSlice[U]):
    i = thread.index_1d()
    if i in out:
        out[i] = ox.mulhi(a[i], b[i])


@ox.kernel
def byte_perm_k(x: Slice[u32], y: Slice[u32], s: Slice[u32], out: DisjointSlice[u32]):
    i = thread.index_1d()
    if i in out:
        out[i] = ox.byte_perm(x[i], y[i], s[i])


COUNTS: dict[str, tuple[Any, Callable[[int, ox.DType], int]]] = {
    "popc": (popc_k, ref_popc), "clz": (clz_k, ref_clz), "ffs": (ffs_k, ref_ffs),
    "bit_count": (bit_count_k, ref_bit_count),
}


def check_count(name: str, dt: ox.DType) -> None:
    kernel, ref = COUNTS[name]
    x = edge_values(dt)
    out = np.full(len(x), -7, np.int32)
    launch(kernel, len(x), x, out)
    want = [ref(int(v), dt) for v in x]
    bad = [(int(v), int(o), w) for v, o, w in zip(x, out, want, strict=True) if o != w]
    assert not bad, f"{name}({dt.name}): (input, got, want) {bad[:5]}"


def check_brev(dt: ox.DType) -> None:
    x = edge_values(dt)
    p = promoted(dt)
    out = np.zeros(len(x), p.numpy)
    launch(brev_k, len(x), x, out)
    want = np.array([ref_brev(int(v), dt) for v in x], p.numpy)
    np.testing.assert_array_equal(out, want)


def check_mulhi(dt: ox.DType) -> None:
    x = edge_values(dt)
    a = np.concatenate([x, np.repeat(x[:24], 24), rng.permutation(x)])
    b = np.concatenate([x[::-1], np.tile(x[:24], 24), x])
    p = promoted(dt)
    out = np.zeros(len(a), p.numpy)
    launch(mulhi_k, len(a), a.astype(dt.numpy), b.astype(dt.numpy), out)
    want = np.array([ref_mulhi(int(u), int(v), dt) for u, v in zip(a, b, strict=True)], p.numpy)
    np.testing.assert_array_equal(out, want)


def byte_perm_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = edge_values(u32, 200)
    y = rng.permutation(x)
    # every selector nibble 0..15 in every position, and random selectors (high bits ignored)
    s = np.array([(k * 0x1111) & 0xFFFF for k in range(16)]
                 + [0x3210, 0x7654, 0x0123, 0x4567, 0x7531, 0x8888, 0xFFFF, 0xBA98, 0x5140]
                 + [int(v) for v in rng.integers(0, 2**32, len(x) - 25, dtype=np.uint64)],
                 np.uint32)
    return x, y, s


def check_byte_perm() -> None:
    x, y, s = byte_perm_inputs()
    out = np.zeros(len(x), np.uint32)
    launch(byte_perm_k, len(x), x, y, s, out)
    want = np.array([ref_byte_perm(int(a), int(b), int(c)) for a, b, c in zip(x, y, s,
                                                                             strict=True)],
                    np.uint32)
    np.testing.assert_array_equal(out, want)


@pytest.fixture(autouse=True)
def _cpu():
    with ox.device("cpu"):
        yield


ids = lambda x: getattr(x, "name", x)  # noqa: E731


@pytest.mark.parametrize("name", list(COUNTS))
@pytest.mark.parametrize("dt", INT_TYPES, ids=ids)
def test_counts_match_cuda(name: str, dt: ox.DType) -> None:
    check_count(name, dt)


@pytest.mark.parametrize("dt", INT_TYPES, ids=ids)
def test_brev_matches_cuda(dt: ox.DType) -> None:
    check_brev(dt)


@pytest.mark.parametrize("dt", INT_TYPES, ids=ids)
def test_mulhi_matches_cuda(dt: ox.DType) -> None:
    check_mulhi(dt)


def test_byte_perm_matches_prmt() -> None:
    check_byte_perm()


def test_reference_byte_perm_examples() -> None:
    """The reference against the examples of CUB's PRMT documentation and the PTX ISA."""
    assert ref_byte_perm(0x03020100, 0x07060504, 0x7531) == 0x07050301
    assert ref_byte_perm(0x03020100, 0x07060504, 0x3210) == 0x03020100
    assert ref_byte_perm(0x00000080, 0, 0x8888) == 0xFFFFFFFF


# -- numba's test_intrinsics bit functions, written again ------------------------------
# numba-cuda tests cuda.popc/brev/clz/ffs with one scalar argument and a one-element
# output; these kernels have the same shape (a scalar parameter, out[0] = f(c)).

@ox.kernel
def scalar_popc(out: DisjointSlice[i32], c: T):
    i = thread.index_1d()
    if i in out:
        out[i] = ox.popc(c)


@ox.kernel
def scalar_clz(out: DisjointSlice[i32], c: T):
    i = thread.index_1d()
    if i in out:
        out[i] = ox.clz(c)


@ox.kernel
def scalar_ffs(out: DisjointSlice[i32], c: T):
    i = thread.index_1d()
    if i in out:
        out[i] = ox.ffs(c)


@ox.kernel
def scalar_brev(out: DisjointSlice[T], c: T):
    i = thread.index_1d()
    if i in out:
        out[i] = ox.brev(c)


NUMBA_CASES = [
    # (kernel, reference, scalar type, argument): numba's popc_u4/u8, brev_u4/u8,
    # clz_i4/u4/i4_1s/i8, ffs_i4/u4/i4_1s/i8 inputs
    (scalar_popc, ref_popc, u32, 0xF0), (scalar_popc, ref_popc, u64, 0xF00000000000),
    (scalar_brev, ref_brev, u32, 0x000030F0), (scalar_brev, ref_brev, u64, 0x000030F0),
    (scalar_clz, ref_clz, i32, 0x00100000), (scalar_clz, ref_clz, u32, 0x00100000),
    (scalar_clz, ref_clz, i32, -1), (scalar_clz, ref_clz, i64, 0x000000000010000),
    (scalar_ffs, ref_ffs, i32, 0x00100000), (scalar_ffs, ref_ffs, u32, 0x00100000),
    (scalar_ffs, ref_ffs, i32, -1), (scalar_ffs, ref_ffs, i64, 0x000000000010000),
    (scalar_ffs, ref_ffs, i32, 0), (scalar_clz, ref_clz, u64, 0),
]


def check_numba_case(kernel: Any, ref: Any, dt: ox.DType, c: int) -> None:
    out = np.zeros(1, np.int32 if kernel is not scalar_brev else dt.numpy)
    kernel[1, 1](out, dt(c))
    assert int(out[0]) == ref(c, dt)


@pytest.mark.parametrize(("kernel", "ref", "dt", "c"), NUMBA_CASES,
                         ids=[f"{k.__name__}-{d.name}-{c:#x}" for k, _, d, c in NUMBA_CASES])
def test_numba_bit_functions(kernel: Any, ref: Any, dt: ox.DType, c: int) -> None:
    check_numba_case(kernel, ref, dt, c)


# -- types and diagnostics -------------------------------------------------------------

def test_result_types() -> None:
    """popc/clz/ffs/bit_count give i32 (CUDA's int); brev and mulhi keep the (promoted)
    operand type; byte_perm gives u32. A wrong output type would be refused at the store."""
    @ox.kernel
    def k(x: Slice[i8], y: Slice[u16], z: Slice[i64], o32: DisjointSlice[i32],
          ou: DisjointSlice[u32], o64: DisjointSlice[i64]):
        i = thread.index_1d()
        if i in o32:
            o32[i] = ox.popc(z[i]) + ox.clz(z[i]) + ox.ffs(z[i]) + ox.brev(x[i])
            o32[i] += ox.mulhi(x[i], x[i]) + z[i].bit_count() + x[i].bit_count()
        if i in ou:
            ou[i] = ox.brev(y[i]) + ox.mulhi(y[i], y[i]) + ox.byte_perm(x[i], 7, 0x3210)
        if i in o64:
            o64[i] = ox.brev(z[i]) + ox.mulhi(z[i], z[i])

    x = np.array([-3, 5], np.int8)
    y = np.array([7, 65535], np.uint16)
    z = np.array([-(2**63), 12345], np.int64)
    o32, ou, o64 = np.zeros(2, np.int32), np.zeros(2, np.uint32), np.zeros(2, np.int64)
    k[1, 2](x, y, z, o32, ou, o64)
    for j in range(2):
        a, b, c = int(x[j]), int(y[j]), int(z[j])
        want32 = (ref_popc(c, i64) + ref_clz(c, i64) + ref_ffs(c, i64) + ref_brev(a, i8)
                  + ref_mulhi(a, a, i8) + ref_bit_count(c, i64) + ref_bit_count(a, i8))
        assert o32[j] == wrap(want32, i32)
        want_u = ref_brev(b, u16) + ref_mulhi(b, b, u16) + ref_byte_perm(a, 7, 0x3210)
        assert ou[j] == wrap(want_u, u32)
        assert o64[j] == wrap(ref_brev(c, i64) + ref_mulhi(c, c, i64), i64)


def test_literals() -> None:
    """A literal argument takes a literal's type (i32, or i64 when it does not fit); a
    literal `.bit_count()` folds as Python computes it."""
    @ox.kernel
    def k(out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i in out:
            out[i] = ox.popc(-1) + ox.clz(1) * 100 + (-(2**40)).bit_count() * 10000
            out[i] += ox.ffs(2**40) * 1000000

    out = np.zeros(1, np.int32)
    k[1, 1](out)
    assert out[0] == 32 + 31 * 100 + 1 * 10000 + 41 * 1000000


@pytest.mark.parametrize(("body", "words"), [
    ("ox.popc(x)", ("ox.popc()", "integer", "f32")),
    ("ox.clz(x > 0)", ("ox.clz()", "integer", "bool")),
    ("x.bit_count()", ("bit_count()", "integer", "f32")),
    ("ox.mulhi(n, x)", ("ox.mulhi()", "integer", "f32")),
    ("ox.byte_perm(n, i64(n), n)", ("ox.byte_perm()", "32-bit", "i64")),
    ("ox.byte_perm(n, n, 2**40)", ("ox.byte_perm()", "does not fit")),
])
def test_diagnostics(body: str, words: tuple[str, ...]) -> None:
    namespace: dict[str, Any] = {"ox": ox, "f32": f32, "i32": i32, "i64": i64,
                                 "DisjointSlice": DisjointSlice, "thread": thread}
    src = ("def k(x: f32, n: i32, out: DisjointSlice[i32]):\n"
           "    i = thread.index_1d()\n"
           "    if i in out:\n"
           f"        out[i] = i32({body})\n")
    import linecache

    fname = f"<intrinsic diag {body}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    exec(compile(src, fname, "exec"), namespace)
    kernel = ox.kernel(namespace["k"])
    with pytest.raises(ox.KernelTypeError) as info:
        kernel.compile(f32, i32, DisjointSlice[i32], target="cpu")
    text = str(info.value)
    for w in words:
        assert w in text, text


# -- GPU code generation (no GPU needed) -------------------------------------------------

PTX_INSTRUCTIONS = {
    "popc": r"popc\.b(32|64)", "clz": r"clz\.b(32|64)", "brev": r"brev\.b(32|64)",
    "mulhi": r"mul\.hi\.[su](32|64)", "byte_perm": r"prmt\.b32",
}


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("dt", (i32, u32, i64, u64, i8, u16), ids=ids)
def test_assembles_for_gpu(arch: str, dt: ox.DType) -> None:
    for kernel, sig, instr in [
        (popc_k, (Slice[dt], DisjointSlice[i32]), "popc"),
        (clz_k, (Slice[dt], DisjointSlice[i32]), "clz"),
        (ffs_k, (Slice[dt], DisjointSlice[i32]), None),
        (bit_count_k, (Slice[dt], DisjointSlice[i32]), "popc"),
        (brev_k, (Slice[dt], DisjointSlice[promoted(dt)]), "brev"),
        (mulhi_k, (Slice[dt], Slice[dt], DisjointSlice[promoted(dt)]), "mulhi"),
    ]:
        ck = kernel.compile(*sig, arch=arch)
        assert len(ck.cubin) > 0
        if instr and not (instr == "mulhi" and dt.bits < 32):  # narrow: one 32-bit mul
            assert re.search(PTX_INSTRUCTIONS[instr], ck.ptx), (kernel.__name__, dt.name)


@pytest.mark.parametrize("arch", ARCHES)
def test_byte_perm_is_prmt(arch: str) -> None:
    ck = byte_perm_k.compile(Slice[u32], Slice[u32], Slice[u32], DisjointSlice[u32], arch=arch)
    assert len(ck.cubin) > 0
    assert re.search(PTX_INSTRUCTIONS["byte_perm"], ck.ptx)


def test_reference_widening_is_c_promotion() -> None:
    """The references promote as C does: u8/u16 zero-extend, i8/i16 sign-extend."""
    assert ref_popc(-1, i8) == 32 and ref_popc(255, u8) == 8
    assert ref_clz(-1, i16) == 0 and ref_clz(1, u16) == 31
    assert ref_bit_count(-128, i8) == 1 and ref_bit_count(-(2**63), i64) == 1
    assert promoted(i16) is i32 and promoted(u8) is u32 and promoted(u64) is u64


# -- block votes (__syncthreads_count/and/or) and wrapping atomics (atomicInc/Dec) ---------

@ox.kernel
def votes_k(x: Slice[i32], out: DisjointSlice[i32, 2]):
    i = thread.index_1d()
    v = 0
    if i < len(x):
        v = x[i]
    count = ox.sync_threads_count(v)
    every = ox.sync_threads_and(v > 0)
    some = ox.sync_threads_or(v > 1000)
    if i < len(x):
        with ox.unsafe():
            out[0, i] = count
            out[1, i] = i32(every) * 10 + i32(some)


def check_votes(threads: int) -> None:
    """Per block: how many threads' value is non-zero, whether all are positive, whether
    any exceeds 1000 (threads past the end of `x` vote 0)."""
    n = 5 * threads - threads // 3
    x = rng.integers(-3, 3, n).astype(np.int32)
    x[: threads] = np.abs(x[: threads]) + 1  # block 0: all positive
    x[2 * threads + 7 % threads] = 5000
    out = np.zeros((2, n), np.int32)
    votes_k[(n + threads - 1) // threads, threads](x, out)
    for b in range((n + threads - 1) // threads):
        vals = np.zeros(threads, np.int64)
        part = x[b * threads:(b + 1) * threads]
        vals[: len(part)] = part
        lo, hi = b * threads, min(n, (b + 1) * threads)
        assert (out[0, lo:hi] == np.count_nonzero(vals)).all(), b
        want = int((vals > 0).all()) * 10 + int((vals > 1000).any())
        assert (out[1, lo:hi] == want).all(), b


@pytest.mark.parametrize("threads", (32, 96, 100, 1024))
def test_sync_threads_votes(threads: int) -> None:
    check_votes(threads)


def test_votes_are_block_barriers() -> None:
    """Under a thread-dependent condition they are a SafetyError, as sync_threads is."""
    @ox.kernel
    def k(x: Slice[i32], out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i in out:
            out[i] = ox.sync_threads_count(x[i])

    with pytest.raises(ox.SafetyError):
        k.compile(Slice[i32], DisjointSlice[i32], target="cpu")


@ox.kernel
def inc_dec_k(a: ox.AtomicSlice[u32], limit: u32, olds: DisjointSlice[u32, 2]):
    i = thread.index_1d()
    if i < olds.shape[1]:
        with ox.unsafe():
            olds[0, i] = ox.atomic.inc(a, 0, limit)
            olds[1, i] = ox.atomic.dec(a, 1, limit)


def ref_inc(old: int, v: int) -> int:
    return 0 if old >= v else old + 1


def ref_dec(old: int, v: int) -> int:
    return v if old == 0 or old > v else old - 1


def check_inc_dec(limit: int, start_inc: int, start_dec: int) -> None:
    """300 threads: whatever order they take, the old values form the sequence one thread
    would see (each step is a function of the last), and the final value is its end."""
    n = 300
    a = np.array([start_inc, start_dec], np.uint32)
    olds = np.zeros((2, n), np.uint32)
    inc_dec_k[(n + 63) // 64, 64](a, np.uint32(limit), olds)
    for row, start, step in ((0, start_inc, ref_inc), (1, start_dec, ref_dec)):
        seq, cur = [], start
        for _ in range(n):
            seq.append(cur)
            cur = step(cur, limit) & 0xFFFFFFFF
        assert sorted(olds[row].tolist()) == sorted(seq), row
        assert int(a[row]) == cur, row


@pytest.mark.parametrize(("limit", "start_inc", "start_dec"), [
    (7, 0, 0), (7, 9, 12), (0, 0, 0), (2**32 - 1, 2**32 - 5, 3), (1000, 5, 5)])
def test_atomic_inc_dec_wrap(limit: int, start_inc: int, start_dec: int) -> None:
    check_inc_dec(limit, start_inc, start_dec)


def test_atomic_inc_needs_u32() -> None:
    @ox.kernel
    def k(a: ox.AtomicSlice[i32]):
        i = thread.index_1d()
        if i < 4:
            ox.atomic.inc(a, 0, 5)

    with pytest.raises(ox.KernelTypeError, match="u32"):
        k.compile(ox.AtomicSlice[i32], target="cpu")


@pytest.mark.parametrize("arch", ARCHES)
def test_votes_and_wrapping_atomics_assemble(arch: str) -> None:
    ck = inc_dec_k.compile(ox.AtomicSlice[u32], u32, DisjointSlice[u32, 2], arch=arch)
    assert len(ck.cubin) > 0
    assert re.search(r"atom(\.global)?\.inc\.u32", ck.ptx)
    assert re.search(r"atom(\.global)?\.dec\.u32", ck.ptx)
    ck = votes_k.compile(Slice[i32], DisjointSlice[i32, 2], arch=arch)
    assert len(ck.cubin) > 0
