"""The arithmetic semantics of docs/language.md as test cases, shared by both targets.

`tests/test_trust_semantics.py` runs every case on the CPU and
`tests/test_gpu_semantics.py` the same kernels on a GPU, each against the
expected values computed here in plain Python and NumPy (the reference), so the
two targets are held to one contract: integers wrap, shifts by the width or
more give 0 (the sign for a signed `>>`) with the amount read as unsigned,
float `//` and `%` are NumPy's (CPython's) bit for bit, float-to-integer
conversions saturate with NaN to 0, and a partial warp mask is honoured.
"""

from __future__ import annotations

import functools
import itertools
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

import oxide as ox
from oxide import (
    DisjointSlice,
    Slice,
    bf16,
    f16,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    thread,
    u8,
    u16,
    u32,
    u64,
)

T = ox.TypeVar("T")
INTS = (i8, i16, i32, i64, u8, u16, u32, u64)
FLOATS = (f16, f32, f64)
rng = np.random.default_rng(14)


# -- kernels -----------------------------------------------------------------------


@ox.kernel
def add(a: Slice[T], b: Slice[T], out: DisjointSlice[T]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] + b[i]


@ox.kernel
def sub(a: Slice[T], b: Slice[T], out: DisjointSlice[T]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] - b[i]


@ox.kernel
def mul(a: Slice[T], b: Slice[T], out: DisjointSlice[T]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] * b[i]


@ox.kernel
def floordiv(a: Slice[T], b: Slice[T], out: DisjointSlice[T]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] // b[i]


@ox.kernel
def mod(a: Slice[T], b: Slice[T], out: DisjointSlice[T]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] % b[i]


@ox.kernel
def shl(a: Slice[T], b: Slice[T], out: DisjointSlice[T]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] << b[i]


@ox.kernel
def shr(a: Slice[T], b: Slice[T], out: DisjointSlice[T]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] >> b[i]


@ox.kernel
def cube(a: Slice[T], out: DisjointSlice[T]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] ** 3


@ox.kernel
def negate(a: Slice[T], out: DisjointSlice[T]):
    i = thread.index_1d()
    if i in out:
        out[i] = -a[i]


@ox.kernel
def nonnegative_compares(a: Slice[T], out: DisjointSlice[i32]):
    """Ordered comparisons of values that are >= 0 or NaN (a square, an absolute value)
    with negative constants, as bits: false for NaN, as IEEE's ordered `>` says. ptxas
    13.0 took `x * x > -1.0` for always true (tile fuzzer, seed 74, H100)."""
    i = thread.index_1d()
    if i in out:
        x = a[i]
        sq = x * x
        bits = 0
        if sq > -1.0:
            bits += 1
        if -60000.0 < sq:  # the fuzzer had -2**31, past f16
            bits += 2
        if abs(x) > -0.5:
            bits += 4
        if sq >= -1.0:
            bits += 8
        if abs(x) >= -0.0:
            bits += 16
        out[i] = bits


def ref_nonnegative_compares(x: float) -> int:
    """`nonnegative_compares` in Python floats: every bit set for a number, none for NaN."""
    return 0 if np.isnan(x) else 31


@ox.kernel(block=64)
def f32_atomic_adds(start: Slice[f32], x: Slice[f32], glob: ox.AtomicSlice[f32],
                    old: DisjointSlice[f32], shared: DisjointSlice[f32],
                    shared_old: DisjointSlice[f32]):
    """`glob[i] += x[i]` (`glob` starts as `start`), keeping the old values, by a global
    atomic (the GPU's `atom.add.f32` flushes subnormals) and a shared one (it keeps them);
    one block of 64 threads, one element each."""
    sh = ox.shared.array(f32, 64)
    i = thread.in_block()
    sh[i] = start[i]
    ox.sync_threads()
    old[i] = ox.atomic.add(glob, i, x[i])
    shared_old[i] = ox.atomic.add(sh, i, x[i])
    ox.sync_threads()
    shared[i] = sh[i]


@ox.kernel
def min_max_of_negated(a: Slice[i32], b: Slice[i32], c: Slice[i32], low: DisjointSlice[i32],
                       high: DisjointSlice[i32]):
    """Three-operand min and max with a negated middle operand: ptxas 13.0 fused them
    into one `VIMNMX3` that dropped the negation (codegen/ptx_rewrite.py)."""
    i = thread.index_1d()
    if i in low:
        low[i] = min(min(a[i], -b[i]), c[i])
    if i in high:
        high[i] = max(max(a[i], -b[i]), c[i])


def min_max_of_negated_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """i32 operands with the ends of the range (-(-2**31) wraps to itself)."""
    edges = np.array([0, 1, -1, 5, -5, 2**31 - 1, -(2**31), 100, -100], np.int64)
    a, b, c = (np.concatenate([np.resize(np.roll(edges, k), 81), rng.integers(-1000, 1001, 47)])
               .astype(np.int32) for k in range(3))
    b[:81] = np.repeat(edges, 9)
    return a, b, c


def ref_min_max_of_negated(a: np.ndarray, b: np.ndarray, c: np.ndarray
                           ) -> tuple[np.ndarray, np.ndarray]:
    neg = (-b.astype(np.int64)).astype(np.int32)  # wraps as i32 does
    return np.minimum(np.minimum(a, neg), c), np.maximum(np.maximum(a, neg), c)


@ox.tile.kernel(num_warps=8)
def halves_beside_a_select_chain(x0: Slice[f32, 1], x1: Slice[f16, 1], x2: Slice[i32, 1],
                                 out: DisjointSlice[f32, 1], B: ox.Const[int]):
    """f16 products beside a choice between their operands, from the tile fuzzer (seed
    124 program 58): ptxas 13.0 paired `v6 * v6` with `v9 * v9` into one HFMA2 after it
    had turned the `tile.where` into a predicated write of v6's register, so the product
    read the chosen value (121 for 144). No f16 arithmetic reaches ptxas now
    (codegen/ptx_rewrite.py `halves_in_f32`)."""
    i = ox.tile.bid(0)
    v0 = ox.tile.load(x0, (i,), (B,), padding=-2.5)
    v1 = ox.tile.load(x1, (i,), (B,), padding=65504.0)
    v2 = ox.tile.load(x2, (i,), (B,), padding=-2147483648)
    v4 = ox.tile.floor(v1)
    v5 = (-1) <= v4
    v6 = ox.tile.ceil(v4)
    v8 = v6 * v6
    v9 = v6 - i
    v10 = ox.tile.where(v5, v9, v6)
    v13 = v2 + ox.tile.minimum(v0, v9 * v9 * v9)
    ox.tile.store(out, (i,), ox.tile.maximum(ox.tile.maximum(v13, v8), v10))


def halves_beside_a_select_chain_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """48 elements (three blocks of 16): f16 values whose floors are integers from -10 to
    10, so every f16 step (the cube of v9, at most 12 in size, too) is exact and the
    reference can compute in f64."""
    x0 = rng.integers(-100, 100, 48).astype(np.float32)
    x1 = (rng.integers(-10, 11, 48) + rng.choice([0.0, 0.25, 0.49], 48)).astype(np.float16)
    x2 = rng.integers(-100, 100, 48).astype(np.int32)
    return x0, x1, x2


def ref_halves_beside_a_select_chain(x0: np.ndarray, x1: np.ndarray, x2: np.ndarray
                                     ) -> np.ndarray:
    block = np.arange(x1.size) // 16
    v4 = np.floor(x1.astype(np.float64))
    v9 = v4 - block
    v10 = np.where(v4 >= -1, v9, v4)
    v13 = x2 + np.minimum(x0, v9 ** 3)
    return np.maximum(np.maximum(v13, v4 * v4), v10).astype(np.float32)


def f32_atomic_add_inputs() -> tuple[np.ndarray, np.ndarray]:
    """64 (start, addend) pairs: subnormal, normal, zero and signed-zero operands and
    sums that land in the subnormals, leave them, or cancel."""
    tiny, low = 2.0 ** -140, 2.0 ** -126  # a subnormal step, the smallest normal
    pairs = [(2.0 ** -120, tiny), (tiny, 2.0 ** -120), (0.0, tiny), (low / 2, low / 2),
             (1.0, 2.0 ** -120), (-tiny, tiny), (low, -tiny), (0.0, 0.0), (-0.0, -tiny),
             (-low, tiny), (low, -low / 2), (3 * tiny, -tiny), (1.5, -1.5),
             (-0.0, -0.0), (low / 2, -low)]
    pairs += [(float(a), float(b)) for a, b in
              (rng.integers(-40, 41, (64 - len(pairs), 2)) * np.array([tiny, 2.0 ** -130]))]
    start, x = (np.array(col, np.float32) for col in zip(*pairs, strict=True))
    return start, x


def ref_flushed_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """What `atom.add.f32` on global memory gives: subnormal inputs and results flushed to
    zeros of their sign, the sum rounded to nearest even between."""
    def flush(v: np.ndarray) -> np.ndarray:
        return np.where(np.abs(v) < np.float32(2.0 ** -126), np.copysign(np.float32(0), v), v)
    return flush(flush(a) + flush(b)).astype(np.float32)


def check_f32_atomic_adds(start: np.ndarray, x: np.ndarray, glob: np.ndarray,
                          old: np.ndarray, shared: np.ndarray, shared_old: np.ndarray) -> None:
    """The global sums flushed, the shared ones IEEE's, the old values as they were."""
    assert_same(glob, ref_flushed_add(start, x), start, x)
    assert_same(shared, (start + x).astype(np.float32), start, x)
    assert_same(old, start, start, x)
    assert_same(shared_old, start, start, x)
    assert np.count_nonzero(glob != shared) >= 8  # the inputs reach the flush


@ox.kernel
def min_max(a: Slice[T], b: Slice[T], low: DisjointSlice[T], high: DisjointSlice[T]):
    i = thread.index_1d()
    if i in low and i in high:
        low[i] = min(a[i], b[i])
        high[i] = max(a[i], b[i])


@ox.kernel
def bf16_floordiv(a: Slice[f32], b: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = f32(bf16(a[i]) // bf16(b[i]))


@ox.kernel
def bf16_mod(a: Slice[f32], b: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = f32(bf16(a[i]) % bf16(b[i]))


@ox.kernel
def stepped(start: i32, stop: i32, step: i32, out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i in out:
        n = 0
        for _ in range(start, stop, step):
            n += 1
            if n > 1000:
                break
        out[i] = n


@ox.kernel
def warp_reduce(x: Slice[T], masks: Slice[u32], total: DisjointSlice[T], low: DisjointSlice[T],
                high: DisjointSlice[T]):
    i = thread.index_1d()
    if i in total and i in low and i in high:
        m = masks[i]
        total[i] = ox.warp.reduce_add(x[i], m)
        low[i] = ox.warp.reduce_min(x[i], m)
        high[i] = ox.warp.reduce_max(x[i], m)


@ox.kernel
def warp_shuffles(x: Slice[T], arg: Slice[i32], masks: Slice[u32], idx: DisjointSlice[T],
                  up: DisjointSlice[T], down: DisjointSlice[T], xor: DisjointSlice[T]):
    i = thread.index_1d()
    if i in idx and i in up and i in down and i in xor:
        m = masks[i]
        idx[i] = ox.warp.shuffle(x[i], arg[i], m)
        up[i] = ox.warp.shuffle_up(x[i], arg[i], m)
        down[i] = ox.warp.shuffle_down(x[i], arg[i], m)
        xor[i] = ox.warp.shuffle_xor(x[i], arg[i], m)


@ox.kernel
def bucket_max(key: Slice[i32], x: Slice[T], out: DisjointSlice[T]):
    """cuda-samples' warp-aggregated pattern: a per-bucket maximum over a match_any group."""
    i = thread.index_1d()
    group = ox.warp.match_any(key[i])  # full mask: every lane of the warp, outside the `if`
    if i in out:
        out[i] = ox.warp.reduce_max(x[i], group)


@ox.kernel
def warp_votes(p: Slice[i32], masks: Slice[u32], ballot: DisjointSlice[u32],
               anyv: DisjointSlice[i32], allv: DisjointSlice[i32]):
    i = thread.index_1d()
    if i in ballot and i in anyv and i in allv:
        m = masks[i]
        ballot[i] = ox.warp.ballot(p[i] != 0, m)
        anyv[i] = i32(ox.warp.any(p[i] != 0, m))
        allv[i] = i32(ox.warp.all(p[i] != 0, m))


@ox.kernel
def int_to_bf16(a: Slice[T], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = f32(bf16(a[i]))


@functools.cache
def converter(dst: Any) -> Any:
    """`out[i] = dst(a[i])` for one destination type (the source is generic)."""

    @ox.kernel
    def convert(a: Slice[T], out: DisjointSlice[dst]):
        i = thread.index_1d()
        if i in out:
            out[i] = dst(a[i])

    return convert


# -- the reference -----------------------------------------------------------------


def wrap(x: int, dt: Any) -> int:
    """`x` as a `dt` after two's-complement wrap-around."""
    x &= (1 << dt.bits) - 1
    return x - (1 << dt.bits) if dt.is_signed and x >> (dt.bits - 1) else x


def ref_int(op: str, a: int, b: int, dt: Any) -> int:
    """The language's integer operators (docs/language.md, "Operators")."""
    unsigned_b = b & ((1 << dt.bits) - 1)  # a shift amount reads as unsigned
    if op == "shl":
        return wrap(a << unsigned_b, dt) if unsigned_b < dt.bits else 0
    if op == "shr":
        if dt.is_signed:
            return a >> min(unsigned_b, dt.bits - 1)
        return a >> unsigned_b if unsigned_b < dt.bits else 0
    if op in ("floordiv", "mod") and b == 0:
        return 0
    py = {"add": a + b, "sub": a - b, "mul": a * b,
          "floordiv": a // b if b else 0, "mod": a % b if b else 0}[op]
    return wrap(py, dt)


def ref_float(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """NumPy's float `//` and `%` in the arrays' own dtype (float16 through float32)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.floor_divide(a, b) if op == "floordiv" else np.remainder(a, b)


def ref_min_max(kind: str, a: Any, b: Any) -> Any:
    """IEEE 754-2019 minimumNumber / maximumNumber: NaN loses, -0.0 orders below +0.0."""
    if np.isnan(a):
        return b
    if np.isnan(b):
        return a
    if a == 0 and b == 0:
        neg = (np.signbit(a) or np.signbit(b)) if kind == "min" else (
            np.signbit(a) and np.signbit(b))
        return -abs(a) if neg else abs(a)
    return (a if a < b else b) if kind == "min" else (a if a > b else b)


def to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (nearest, ties to even), as float32."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    nan = np.isnan(np.asarray(x, np.float32))
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    out = rounded.astype(np.uint32).view(np.float32)
    return np.where(nan, np.float32("nan"), out).astype(np.float32)


def ref_convert(x: float, dst: Any) -> int:
    """Float to integer: truncate, saturate at the type's range, NaN to 0."""
    if np.isnan(x):
        return 0
    lo = -(1 << (dst.bits - 1)) if dst.is_signed else 0
    hi = (1 << (dst.bits - 1)) - 1 if dst.is_signed else (1 << dst.bits) - 1
    if np.isinf(x):
        return hi if x > 0 else lo
    return max(lo, min(hi, int(x)))


def same_bits(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Where two arrays agree bit for bit (any NaN matches any NaN)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype.kind != "f":
        return got == want
    view = {2: np.uint16, 4: np.uint32, 8: np.uint64}[got.itemsize]
    return (got.view(view) == want.view(view)) | (np.isnan(got) & np.isnan(want))


def assert_same(got: np.ndarray, want: np.ndarray, *inputs: np.ndarray) -> None:
    ok = same_bits(got, want)
    if not ok.all():
        bad = np.nonzero(~ok)[0][:8]
        rows = [f"  inputs {[x[j] for x in inputs]}: got {got[j]!r}, want {want[j]!r}" for j in bad]
        raise AssertionError(f"{(~ok).sum()} of {ok.size} differ:\n" + "\n".join(rows))


# -- the cases ---------------------------------------------------------------------


def int_edges(dt: Any) -> list[int]:
    lo = -(1 << (dt.bits - 1)) if dt.is_signed else 0
    hi = (1 << (dt.bits - 1)) - 1 if dt.is_signed else (1 << dt.bits) - 1
    vals = {0, 1, 2, 3, 5, 7, hi, hi - 1, lo, lo + 1, hi // 2, dt.bits - 1, dt.bits, dt.bits + 1}
    if dt.is_signed:
        vals |= {-1, -2, -3, -7, -dt.bits}
    if dt.bits == 64:
        vals |= {1 << 32, (1 << 32) + 1, 1 << 40, 1 << 33}
    return sorted(v for v in vals if lo <= v <= hi)


@dataclass(frozen=True)
class BinaryCase:
    kernel: Any
    a: np.ndarray
    b: np.ndarray
    want: np.ndarray


def int_case(op: str, dt: Any) -> BinaryCase:
    """Every pair of edge values; zero divisors left out (they are reported: see below)."""
    pairs = [(x, y) for x, y in itertools.product(int_edges(dt), repeat=2)
             if not (op in ("floordiv", "mod") and y == 0)]
    a = np.array([x for x, _ in pairs], dt.numpy)
    b = np.array([y for _, y in pairs], dt.numpy)
    want = np.array([ref_int(op, x, y, dt) for x, y in pairs], dt.numpy)
    return BinaryCase(globals()[op], a, b, want)


FLOAT_EDGES = [0.0, -0.0, 1.0, -1.0, 0.1, -0.1, 0.3, 1.5, 2.0, 3.0, -7.5, 4.19, 127.0, -127.0,
               1e-3, 1e-40, 5e-324, 6e-8, 65504.0, 1e30, -1e30, 2.5e38, 2.0**60, -2.0**60,
               np.inf, -np.inf, np.nan]


def float_case(op: str, dt: Any) -> BinaryCase:
    """Edge values against each other, plus random ones of every magnitude."""
    with np.errstate(all="ignore"):
        edges = np.array(FLOAT_EDGES, np.float64).astype(dt.numpy)
        a = np.repeat(edges, edges.size)
        b = np.tile(edges, edges.size)
        mag = np.exp2(rng.uniform(-30, 30, 400))
        ra = (rng.standard_normal(400) * mag).astype(dt.numpy)
        rb = (rng.standard_normal(400) * np.exp2(rng.uniform(-30, 30, 400))).astype(dt.numpy)
    a, b = np.concatenate([a, ra]), np.concatenate([b, rb])
    return BinaryCase(globals()[op], a, b, ref_float(op, a, b))


def bf16_case(op: str) -> BinaryCase:
    """bf16 `//` and `%`: NumPy's float32 result of the bf16 inputs, rounded to bf16."""
    edges = np.array(FLOAT_EDGES, np.float64).astype(np.float32)
    a = to_bf16(np.concatenate([np.repeat(edges, edges.size),
                                rng.standard_normal(300).astype(np.float32) * 1e3]))
    b = to_bf16(np.concatenate([np.tile(edges, edges.size),
                                rng.standard_normal(300).astype(np.float32)]))
    want = to_bf16(ref_float(op, a, b))
    return BinaryCase(bf16_floordiv if op == "floordiv" else bf16_mod, a, b, want)


def bf16_of_int(v: int) -> np.float32:
    """An integer rounded once to bf16 (8 significant bits, ties to even), as float32."""
    m = abs(v)
    drop = m.bit_length() - 8
    if drop > 0:
        q, r = divmod(m, 1 << drop)
        if r > 1 << (drop - 1) or (r == 1 << (drop - 1) and q & 1):
            q += 1
        m = q << drop
    return np.float32(-m if v < 0 else m)


def int_to_bf16_inputs(dt: Any) -> np.ndarray:
    """Ties, near-ties and extremes at every bit length of `dt`."""
    lo = -(1 << (dt.bits - 1)) if dt.is_signed else 0
    hi = (1 << (dt.bits - 1)) - 1 if dt.is_signed else (1 << dt.bits) - 1
    vals = {lo, hi, 0, 1, 255, 257}
    for bits in range(9, dt.bits + 1):
        tie = (1 << (bits - 1)) | (1 << (bits - 9))
        vals |= {tie - 1, tie, tie + 1, tie | (1 << (bits - 8)), -tie, -tie - 1}
    return np.array(sorted(v for v in vals if lo <= v <= hi), dt.numpy)


def conversion_inputs(src: Any) -> np.ndarray:
    vals = [0.0, -0.0, 0.5, -0.5, 0.99, -0.99, 1.0, -1.0, 126.9, 127.0, 127.5, 128.0, -128.0,
            -128.5, -129.0, 255.0, 255.5, 256.0, 32767.0, 32768.0, -32768.0, -32769.0, 65535.0,
            65536.0, 2.0**31 - 128, 2.0**31, -2.0**31, -2.0**31 - 512, 2.0**32, 2.0**32 - 256,
            2.0**63, -2.0**63, 2.0**63 - 1024, 2.0**64, 2.0**64 - 2048, -1e30, 1e30, 3e38,
            np.inf, -np.inf, np.nan, 65504.0, -65504.0]
    with np.errstate(all="ignore"):
        return np.array(vals, np.float64).astype(src.numpy)


def member_masks(n: int, groups: int = 3) -> np.ndarray:
    """Per lane, the lanes of its warp in its group: partial, non-contiguous masks."""
    key = rng.integers(0, groups, n)
    masks = np.zeros(n, np.uint32)
    for i in range(n):
        w = i - i % 32
        for lane in range(32):
            if w + lane < n and key[w + lane] == key[i]:
                masks[i] |= np.uint32(1 << lane)
    return masks


def warp_reduce_want(x: np.ndarray, masks: np.ndarray, n: int) -> list[np.ndarray]:
    """Sums in lane order over the members; a whole warp sums as the xor butterfly."""
    total, low, high = (np.zeros(n, x.dtype) for _ in range(3))
    for i in range(n):
        w = i - i % 32
        lanes = [k for k in range(32) if masks[i] >> k & 1 and w + k < n]
        vals = x[[w + k for k in lanes]]
        if x.dtype.kind != "f":
            total[i] = wrap(sum(int(v) for v in vals), _dtype_of(x.dtype))
        elif len(lanes) == 32:
            tree = vals.copy()
            off = 16
            while off:
                tree[:off] = tree[:off] + tree[off:2 * off]
                off //= 2
            total[i] = tree[0]
        else:
            acc = x.dtype.type(0)
            for v in vals:
                acc = acc + v
            total[i] = acc
        low[i], high[i] = vals.min(), vals.max()
    return [total, low, high]


def _dtype_of(np_dtype: np.dtype) -> Any:
    return {np.dtype(d.numpy): d for d in (*INTS, f32, f64)}[np.dtype(np_dtype)]


def shuffle_want(x: np.ndarray, arg: np.ndarray, masks: np.ndarray, n: int) -> list[np.ndarray]:
    """Each shuffle's source lane; one outside 0..31, the block or the mask gives own value."""
    outs = [np.empty_like(x) for _ in range(4)]
    for i in range(n):
        lane, w = i % 32, i - i % 32
        a = int(arg[i]) & 0xFFFFFFFF
        sources = [a & 31, lane - a, lane + a, lane ^ a]
        for out, src in zip(outs, sources, strict=True):
            ok = 0 <= src < 32 and w + src < n and masks[i] >> src & 1
            out[i] = x[w + src] if ok else x[i]
    return outs

