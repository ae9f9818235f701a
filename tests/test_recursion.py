"""Recursive @ox.func (issue 15 item 12): real function calls instead of inlined copies.

The kernels run on the CPU target and are compared against the same recursion in Python;
the GPU code is checked by compiling it for sm_80 and sm_90 (the PTX has a `.func` and
`call`s, the cubin assembles) and the stack limit against the fake driver
(tests/fake_cuda.py). tests/test_gpu_recursion.py runs the kernels on a GPU.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest
from fake_cuda import FakeDriver, use_launch_flavor

import oxide as ox
from oxide import AtomicSlice, DisjointSlice, RawSlice, Slice, f32, i32, i64, thread


@pytest.fixture
def cpu() -> Iterator[None]:
    with ox.device("cpu"):
        yield


# --- the functions ---------------------------------------------------------------------

@ox.func
def fact(n: i64) -> i64:
    if n <= 1:
        return i64(1)
    return n * fact(n - 1)


@ox.func
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


@ox.func
def ack(m, n):
    if m == 0:
        return n + 1
    if n == 0:
        return ack(m - 1, 1)
    return ack(m - 1, ack(m, n - 1))


@ox.func
def ipow(b: i64, e: i32) -> i64:
    """Exponentiation by squaring: b ** e with i64 wraparound."""
    if e == 0:
        return 1
    h = ipow(b, e // 2)
    if e % 2 == 0:
        return h * h
    return h * h * b


@ox.func
def is_even(n):
    if n == 0:
        return True
    return is_odd(n - 1)


@ox.func
def is_odd(n):
    if n == 0:
        return False
    return is_even(n - 1)


@ox.func
def egcd(a: i64, b: i64):
    """(g, x, y) with a*x + b*y == g: a tuple result through the recursion."""
    if b == 0:
        return a, i64(1), i64(0)
    g, x, y = egcd(b, a % b)
    return g, y, x - (a // b) * y


@ox.func
def alternating(a, n):
    """a[n] - a[n-1] + a[n-2] - ... : not a tail call LLVM can turn into a loop, so the
    recursion really runs `n` deep."""
    if n == 0:
        return a[0]
    return a[n] - alternating(a, n - 1)


@ox.func
def big_frame(n: i32) -> f32:
    """A recursion with an 8 KiB frame (a local array indexed at run time stays in local
    memory): the default 4 KiB stack does not hold even one level."""
    t = ox.local.array(f32, 2048)
    t[(n * 7) % 2048] = f32(n)
    if n <= 0:
        return t[0]
    return big_frame(n - 1) + t[(n * 7) % 2048]


@ox.func
def fib_counted(n, calls):
    ox.atomic.add(calls, 0, 1)
    if n < 2:
        return n
    return fib_counted(n - 1, calls) + fib_counted(n - 2, calls)


@ox.func
def read_down(a, n):
    """Reads a[n], a[n-1], ..., a[-1]: the last read is out of bounds, inside the recursion."""
    if n < -1:
        return 0.0
    return a[n] + read_down(a, n - 1)


@ox.func
def checked_countdown(n):
    assert n != 3, "reached three"
    if n <= 0:
        return 0
    return 1 + checked_countdown(n - 1)


@ox.func
def thread_at_depth(n):
    if n == 0:
        return ox.thread_idx.x + ox.block_idx.x * 100
    return thread_at_depth(n - 1)


def py_fib(n: int) -> int:
    return n if n < 2 else py_fib(n - 1) + py_fib(n - 2)


def py_ack(m: int, n: int) -> int:
    if m == 0:
        return n + 1
    if n == 0:
        return py_ack(m - 1, 1)
    return py_ack(m - 1, py_ack(m, n - 1))


def wrap64(x: int) -> int:
    return (x + 2**63) % 2**64 - 2**63


# --- the kernels -------------------------------------------------------------------------

@ox.kernel
def factorials(ns: Slice[i64], out: DisjointSlice[i64]):
    i = thread.index_1d()
    if i < len(out) and i < len(ns):
        out[i] = fact(ns[i])


@ox.kernel
def fibs(ns: Slice[i32], out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i < len(out) and i < len(ns):
        out[i] = fib(ns[i])


@ox.kernel
def ackermanns(ms: Slice[i32], ns: Slice[i32], out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i < len(out) and i < len(ms) and i < len(ns):
        out[i] = ack(ms[i], ns[i])


@ox.kernel
def powers(bs: Slice[i64], es: Slice[i32], out: DisjointSlice[i64]):
    i = thread.index_1d()
    if i < len(out) and i < len(bs) and i < len(es):
        out[i] = ipow(bs[i], es[i])


@ox.kernel
def parities(ns: Slice[i32], out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i < len(out) and i < len(ns):
        even = is_even(ns[i])
        out[i] = i32(1) if even else i32(0)


@ox.kernel
def gcds(a: Slice[i64], b: Slice[i64], out: DisjointSlice[i64, 2]):
    ij = thread.index_2d()
    if ij in out:
        i = ij.row
        if ij.col == 0 and i < len(a) and i < len(b):
            g, x, y = egcd(a[i], b[i])
            with ox.unsafe():
                out[i, 0] = g
                out[i, 1] = x
                out[i, 2] = y


@ox.kernel
def deep(a: Slice[i64], depth: i32, out: DisjointSlice[i64]):
    i = thread.index_1d()
    if i < len(out):
        out[i] = alternating(a, depth - i32(i))


@ox.kernel
def counted_fibs(ns: Slice[i32], calls: AtomicSlice[i32], out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i < len(out) and i < len(ns):
        out[i] = fib_counted(ns[i], calls)


@ox.kernel
def sum_down(a: Slice[f32], start: i32, out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i < len(out):
        out[i] = read_down(a, start)


@ox.kernel
def countdowns(n: i32, out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i < len(out):
        out[i] = checked_countdown(n)


@ox.kernel
def who_am_i(out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i < len(out):
        out[i] = thread_at_depth(i32(i) % 5)


@ox.kernel(block=(32,))
def shared_then_fib(ns: Slice[i32], out: DisjointSlice[i32]):
    """Shared memory and a barrier in the kernel, the recursion in a function between them."""
    tile = ox.shared.array(i32, 32)
    t = thread.in_block()
    i = thread.index_1d()
    v = i32(0)
    if i < len(ns):
        v = ns[i]
    tile[t] = fib(v)
    ox.sync_threads()
    if i < len(out):
        out[i] = tile[31 - t]


@ox.func
def steps_down(n):
    if n <= 0:
        return n
    return steps_down(n - 1)


@ox.kernel
def witness_argument(out: DisjointSlice[i64]):
    i = thread.index_1d()
    if i < len(out):
        out[i] = steps_down(i) + i  # a ThreadIndex argument arrives as a plain i64


@ox.func
def halve(x, n):
    if n <= 0:
        return x
    return halve(x * ox.bf16(0.5), n - 1)


@ox.kernel
def bf16_halves(a: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i < len(out) and i < len(a):
        out[i] = f32(halve(ox.bf16(a[i]), 3))


WEIGHTS = ox.ConstantArray(f32, 8)
WEIGHTS.set(np.arange(8, dtype=np.float32))
TABLE = np.arange(16, dtype=np.float32) * 2  # captured: constant memory as well


@ox.func
def weighted(n):
    if n < 0:
        return f32(0)
    return WEIGHTS[n] + TABLE[n] + weighted(n - 1)


@ox.kernel
def constants_around_calls(out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i < len(out):
        before = TABLE[1]  # the kernel reads TABLE first, WEIGHTS only after the call
        out[i] = before + weighted(i32(i)) + WEIGHTS[0]


@ox.func
def runaway(n):
    """No base case is ever reached for n >= 0: only the depth guard stops it."""
    if n < 0:
        return n
    return runaway(n + 1) + 1


@ox.kernel
def runaways(out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i < len(out):
        out[i] = runaway(i32(i))


# --- results against Python --------------------------------------------------------------

def test_factorial(cpu) -> None:
    ns = np.arange(21, dtype=np.int64)
    out = np.zeros_like(ns)
    factorials[1, 32](ns, out)
    assert out.tolist() == [math.factorial(n) for n in range(21)]


def test_fibonacci(cpu) -> None:
    ns = np.arange(22, dtype=np.int32)
    out = np.zeros_like(ns)
    fibs[2, 16](ns, out)
    assert out.tolist() == [py_fib(n) for n in range(22)]


def test_ackermann_small(cpu) -> None:
    ms, ns = np.meshgrid(np.arange(4, dtype=np.int32), np.arange(4, dtype=np.int32))
    ms, ns = ms.ravel().copy(), ns.ravel().copy()
    out = np.zeros_like(ms)
    ackermanns[1, 16](ms, ns, out)
    assert out.tolist() == [py_ack(int(m), int(n)) for m, n in zip(ms, ns, strict=True)]


def test_integer_power(cpu) -> None:
    rng = np.random.default_rng(7)
    bs = rng.integers(-50, 50, 64).astype(np.int64)
    es = rng.integers(0, 40, 64).astype(np.int32)
    out = np.zeros_like(bs)
    powers[2, 32](bs, es, out)
    assert out.tolist() == [wrap64(int(b) ** int(e)) for b, e in zip(bs, es, strict=True)]


def test_mutual_recursion(cpu) -> None:
    ns = np.arange(0, 200, 7, dtype=np.int32)
    out = np.zeros_like(ns)
    parities[1, 64](ns, out)
    assert out.tolist() == [int(n % 2 == 0) for n in ns]


def test_tuple_result(cpu) -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(1, 10**6, 20).astype(np.int64)
    b = rng.integers(1, 10**6, 20).astype(np.int64)
    out = np.zeros((20, 3), np.int64)
    gcds[(1, 20), (4, 1)](a, b, out)
    for k in range(20):
        g, x, y = out[k]
        assert g == math.gcd(int(a[k]), int(b[k]))
        assert int(a[k]) * x + int(b[k]) * y == g


def test_depth_1000_on_the_cpu(cpu) -> None:
    """A thousand frames deep (and then some): the CPU runs the recursion on the OS
    thread's stack."""
    a = np.random.default_rng(1).integers(-100, 100, 1201).astype(np.int64)
    out = np.zeros(8, np.int64)
    deep[1, 8](a, 1200, out)

    def expected(n: int) -> int:  # a[n] - (a[n-1] - (... - a[0]))
        value = int(a[0])
        for k in range(1, n + 1):
            value = int(a[k]) - value
        return value

    assert out.tolist() == [expected(1200 - i) for i in range(8)]


def test_depth_recursion_is_a_real_call() -> None:
    """The deep recursion is not turned into a loop: the optimized host code calls it."""
    ck = deep.compile(Slice[i64], i32, DisjointSlice[i64], target="cpu")
    assert "call" in ck.llvm and "oxide_recursive_alternating" in ck.llvm


def test_atomic_array_argument(cpu) -> None:
    ns = np.array([10, 12, 15], np.int32)
    calls = np.zeros(1, np.int32)
    out = np.zeros_like(ns)
    counted_fibs[1, 3](ns, calls, out)
    assert out.tolist() == [py_fib(int(n)) for n in ns]

    def count(n: int) -> int:
        return 1 if n < 2 else 1 + count(n - 1) + count(n - 2)

    assert calls[0] == sum(count(int(n)) for n in ns)


def test_bounds_check_inside_the_recursion(cpu) -> None:
    a = np.arange(10, dtype=np.float32)
    out = np.zeros(2, np.float32)
    with pytest.raises(ox.KernelIndexError, match="read_down|`a`") as info:
        sum_down[1, 2](a, 9, out)
    assert "-1" in str(info.value)


def test_assert_inside_the_recursion(cpu) -> None:
    out = np.zeros(4, np.int32)
    countdowns[1, 4](2, out)
    assert out.tolist() == [2] * 4
    with pytest.raises(ox.KernelAssertionError, match="reached three"):
        countdowns[1, 4](6, out)


def test_registers_inside_the_recursion(cpu) -> None:
    out = np.zeros(96, np.int32)
    who_am_i[3, 32](out)
    assert out.tolist() == [(i % 32) + (i // 32) * 100 for i in range(96)]


def test_beside_shared_memory_and_barriers(cpu) -> None:
    ns = (np.arange(64, dtype=np.int32) * 7) % 20
    out = np.zeros(64, np.int32)
    shared_then_fib[2, 32](ns, out)
    assert out.tolist() == [py_fib(int(ns[(i // 32) * 32 + 31 - i % 32])) for i in range(64)]


def test_thread_index_argument(cpu) -> None:
    out = np.zeros(40, np.int64)
    witness_argument[2, 20](out)
    assert out.tolist() == list(range(40))


def test_bf16_values_through_the_calls(cpu) -> None:
    """bf16 arguments and results cross the calls (rounded as the kernel rounds them)."""
    a = np.array([8.0, 3.0, -40.0, 2.0**-120], np.float32)
    out = np.zeros_like(a)
    bf16_halves[1, 4](a, out)
    assert out.tolist() == (a / 8).tolist()


def test_constant_arrays_in_the_kernel_and_the_function(cpu) -> None:
    """One global per constant array, whichever function reads it first."""
    out = np.zeros(8, np.float32)
    constants_around_calls[1, 8](out)
    assert out.tolist() == [3 * sum(range(i + 1)) + 2 for i in range(8)]
    ck = constants_around_calls.compile(DisjointSlice[f32], arch="sm_90")
    assert len(ck.constants) == 2 and len(ck.cubin) > 0


def test_runaway_recursion_is_reported_not_a_crash(cpu) -> None:
    """The depth guard: a call deeper than the thread's stack holds reports a failed
    assertion at the function and returns zeros, instead of overflowing the stack."""
    from oxide.codegen.cpu import host_stack_bytes

    out = np.zeros(4, np.int32)
    with pytest.raises(ox.KernelAssertionError, match="`runaway` recursed deeper than the "
                       r"stack allows.*stack_size") as info:
        runaways[1, 4](out)
    assert "def runaway(n):" in str(info.value)
    ck = runaways.compile(DisjointSlice[i32], target="cpu")
    limit = int(ck.llvm_unoptimized.split("icmp ugt i32 %oxide.depth, ")[1].split()[0])
    assert f"icmp slt i32 {limit}, 0" in ck.llvm_unoptimized  # the kernel's check of room
    assert limit >= 2000 and limit * 256 <= host_stack_bytes()
    assert out.tolist() == [limit] * 4  # the deepest call returned 0, every level added 1


# --- what the compiler makes of it -------------------------------------------------------

@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_has_a_function_and_calls(arch: str) -> None:
    ck = fibs.compile(Slice[i32], DisjointSlice[i32], arch=arch)
    assert ".func" in ck.ptx and "call" in ck.ptx
    assert "oxide_recursive_fib" in ck.ptx
    assert len(ck.cubin) > 0 and b"oxide_recursive_fib" in ck.cubin
    assert "oxide.call" in ck.ir and "oxide.func_return" in ck.ir


def test_the_driver_jit_leaves_recursive_kernels_to_their_cubin(monkeypatch) -> None:
    """Under OXIDE_DRIVER_JIT=1 a kernel that calls a recursive @ox.func still loads its
    nvJitLink cubin: its stack and recursion limit are computed from that cubin's frames."""
    from oxide.compiler import compile_kernel
    from oxide.specialize import signature_from

    monkeypatch.setenv("OXIDE_DRIVER_JIT", "1")
    sig = signature_from(fibs, (Slice[i32], DisjointSlice[i32]))
    ck = compile_kernel(fibs, sig, "nvptx", "sm_90")  # not the memoized one
    assert ck.module_image == ck.cubin and ck.cubin.startswith(b"\x7fELF")


@pytest.mark.parametrize("kernel,sig", [
    (ackermanns, (Slice[i32], Slice[i32], DisjointSlice[i32])),
    (parities, (Slice[i32], DisjointSlice[i32])),
    (gcds, (Slice[i64], Slice[i64], DisjointSlice[i64, 2])),
    (counted_fibs, (Slice[i32], AtomicSlice[i32], DisjointSlice[i32])),
    (sum_down, (Slice[f32], i32, DisjointSlice[f32])),
    (who_am_i, (DisjointSlice[i32],)),
    (shared_then_fib, (Slice[i32], DisjointSlice[i32])),
])
def test_gpu_code_assembles(kernel, sig) -> None:
    for arch in ("sm_80", "sm_90"):
        ck = kernel.compile(*sig, arch=arch)
        assert len(ck.cubin) > 0


def test_one_function_per_specialization() -> None:
    @ox.func
    def depth_of(n):
        if n <= 0:
            return n
        return depth_of(n - 1)

    @ox.kernel
    def two_types(a: i32, b: i64, out: RawSlice[i64]):
        with ox.unsafe():
            out[0] = i64(depth_of(a)) + depth_of(b) + depth_of(b)

    ck = two_types.compile(i32, i64, RawSlice[i64], target="cpu")
    assert [f.sym_name.data for f in ck.device_functions] == [
        "oxide_recursive_depth_of_0", "oxide_recursive_depth_of_1"]


def test_non_recursive_functions_stay_inlined() -> None:
    @ox.func
    def twice(x):
        return x + x

    @ox.kernel
    def k(a: Slice[i32], out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i < len(out) and i < len(a):
            out[i] = twice(a[i])

    ck = k.compile(Slice[i32], DisjointSlice[i32], arch="sm_90")
    assert ck.device_functions == [] and ".func" not in ck.ptx and "oxide.call" not in ck.ir


# --- diagnostics -------------------------------------------------------------------------

def _compile_error(kernel, *sig):
    with pytest.raises(ox.CompileError) as info:
        kernel.compile(*sig, target="cpu")
    return info.value


def test_barrier_inside_is_refused() -> None:
    @ox.func
    def sync_down(n):
        ox.sync_threads()
        if n <= 0:
            return n
        return sync_down(n - 1)

    @ox.kernel
    def k(n: i32, out: RawSlice[i32]):
        with ox.unsafe():
            out[0] = sync_down(n)

    err = _compile_error(k, i32, RawSlice[i32])
    assert isinstance(err, ox.UnsupportedFeatureError)
    assert "`sync_down` is recursive" in str(err) and "sync_threads" in str(err)
    assert err.span is not None and "ox.sync_threads()" in err.span.text
    assert err.hint


def test_warp_collective_inside_is_refused() -> None:
    @ox.func
    def warp_down(v, n):
        if n <= 0:
            return v
        return warp_down(ox.warp.reduce_add(v), n - 1)

    @ox.kernel
    def k(n: i32, out: RawSlice[i32]):
        with ox.unsafe():
            out[0] = warp_down(n, n)

    err = _compile_error(k, i32, RawSlice[i32])
    assert isinstance(err, ox.UnsupportedFeatureError) and "warp collective" in str(err)


def test_shared_memory_inside_is_refused() -> None:
    @ox.func
    def shared_down(n):
        s = ox.shared.array(i32, 32)
        with ox.unsafe():
            s[0] = n
            if n <= 0:
                return s[0]
        return shared_down(n - 1)

    @ox.kernel
    def k(n: i32, out: RawSlice[i32]):
        with ox.unsafe():
            out[0] = shared_down(n)

    err = _compile_error(k, i32, RawSlice[i32])
    assert isinstance(err, ox.UnsupportedFeatureError) and "shared memory" in str(err)


def test_disjoint_slice_argument_is_refused() -> None:
    @ox.func
    def fill(out, n):
        if n <= 0:
            return n
        return fill(out, n - 1)

    @ox.kernel
    def k(n: i32, out: DisjointSlice[i32]):
        fill(out, n)

    err = _compile_error(k, i32, DisjointSlice[i32])
    assert isinstance(err, ox.UnsupportedFeatureError)
    assert "DisjointSlice" in str(err) and "`out`" in str(err) and err.hint


def test_tuple_and_local_array_arguments_are_refused() -> None:
    @ox.func
    def first(t, n):
        if n <= 0:
            return n
        return first(t, n - 1)

    @ox.kernel
    def with_tuple(n: i32, out: RawSlice[i32]):
        with ox.unsafe():
            out[0] = first((n, n), n)

    @ox.kernel
    def with_local(n: i32, out: RawSlice[i32]):
        loc = ox.local.array(i32, 4)
        with ox.unsafe():
            out[0] = first(loc, n)

    err = _compile_error(with_tuple, i32, RawSlice[i32])
    assert isinstance(err, ox.UnsupportedFeatureError) and "tuple" in str(err)
    err = _compile_error(with_local, i32, RawSlice[i32])
    assert isinstance(err, ox.UnsupportedFeatureError) and "local array" in str(err)


def test_call_before_any_return_asks_for_the_type() -> None:
    @ox.func
    def backwards(n):
        return backwards(n - 1) * n if n > 1 else 1

    @ox.kernel
    def k(n: i32, out: RawSlice[i32]):
        with ox.unsafe():
            out[0] = backwards(n)

    err = _compile_error(k, i32, RawSlice[i32])
    assert isinstance(err, ox.KernelTypeError)
    assert "before any `return`" in str(err) and "-> i32" in err.hint

    @ox.func
    def declared(n) -> i32:
        return declared(n - 1) * n if n > 1 else 1

    @ox.kernel
    def k2(n: i32, out: RawSlice[i32]):
        with ox.unsafe():
            out[0] = declared(n)

    out = np.zeros(1, np.int32)
    with ox.device("cpu"):
        k2[1, 1](6, out)
    assert out[0] == 720


def test_result_is_varying_for_the_uniformity_pass() -> None:
    """The callee can read thread_idx: a barrier under a condition on its result is refused,
    even though every argument is uniform."""
    @ox.kernel
    def k(n: i32, out: RawSlice[i32]):
        if thread_at_depth(n) > 3:
            ox.sync_threads()
        with ox.unsafe():
            out[0] = n

    err = _compile_error(k, i32, RawSlice[i32])
    assert isinstance(err, ox.SafetyError)


# --- the stack ---------------------------------------------------------------------------

def test_stack_size_option() -> None:
    @ox.kernel(stack_size=16384)
    def k(n: i32, out: RawSlice[i32]):
        with ox.unsafe():
            out[0] = fib(n)

    assert k.options.stack_size == 16384
    for bad in (0, -1, 1 << 20, 1.5, True):
        with pytest.raises(ox.KernelTypeError, match="stack_size"):
            ox.kernel(stack_size=bad)


def test_stack_bytes() -> None:
    from oxide.kernel import DEFAULT_STACK_SIZE
    from oxide.runtime.gpu import stack_bytes

    ck = fibs.compile(Slice[i32], DisjointSlice[i32], arch="sm_90")
    assert stack_bytes(fibs, ck.cubin) == DEFAULT_STACK_SIZE
    assert stack_bytes(factorials, b"no recursion here") == 0

    @ox.kernel(stack_size=8192)
    def k(n: i32):
        pass

    assert stack_bytes(k, b"") == 8192


def _ptxas_frames(ptx: str, arch: str) -> dict[str, int]:
    """ptxas's "N bytes stack frame" of each function, from nvJitLink's verbose info log."""
    import ctypes
    import re

    from oxide.codegen.nvjitlink import _lib

    lib = _lib()
    lib.nvJitLinkGetInfoLogSize.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    lib.nvJitLinkGetInfoLog.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    handle = ctypes.c_void_p()
    opts = [f"-arch={arch}".encode(), b"-O3", b"-verbose"]
    assert lib.nvJitLinkCreate(ctypes.byref(handle), 3, (ctypes.c_char_p * 3)(*opts)) == 0
    try:
        data = ptx.encode()
        assert lib.nvJitLinkAddData(handle, 2, data, len(data), b"k") == 0
        assert lib.nvJitLinkComplete(handle) == 0
        size = ctypes.c_size_t()
        lib.nvJitLinkGetInfoLogSize(handle, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value + 1)
        lib.nvJitLinkGetInfoLog(handle, log)
    finally:
        lib.nvJitLinkDestroy(ctypes.byref(handle))
    return {m[0]: int(m[1]) for m in re.findall(
        r"Function properties for (\S+)\n\S*\s*\.?\s*(\d+) bytes stack frame",
        log.value.decode())}


@pytest.mark.parametrize("kernel,sig", [
    (fibs, (Slice[i32], DisjointSlice[i32])),
    (gcds, (Slice[i64], Slice[i64], DisjointSlice[i64, 2])),
    (deep, (Slice[i64], i32, DisjointSlice[i64])),
])
def test_frames_read_from_the_cubin_are_ptxas_s(kernel, sig) -> None:
    from oxide.runtime.gpu import frame_sizes

    ck = kernel.compile(*sig, arch="sm_90")
    reported = _ptxas_frames(ck.ptx, "sm_90")
    assert any(name.startswith("oxide_recursive_") and size > 0
               for name, size in reported.items())
    frames = frame_sizes(ck.cubin)
    assert {name: frames.get(name, 0) for name in reported} == reported


@ox.kernel
def fib_beside_a_local_table(ns: Slice[i32], out: DisjointSlice[i32]):
    """The kernel's own frame (a local array indexed at run time) is on the stack too."""
    table = ox.local.array(i32, 256)
    i = thread.index_1d()
    if i < len(out) and i < len(ns):
        n = ns[i] % 256
        table[n] = fib(n)
        out[i] = table[(n * 7) % 256]


def _other_frames(frames: dict[str, int]) -> int:
    return sum(size for name, size in frames.items() if not name.startswith("oxide_recursive_"))


def test_recursion_limit() -> None:
    """The guard is checked before each call, so every level up to the limit, the
    kernel's frame and the other functions' frames fit in the stack, less a margin."""
    from oxide.runtime.gpu import STACK_MARGIN, frame_sizes, recursion_limit

    cubin = fibs.compile(Slice[i32], DisjointSlice[i32], arch="sm_90").cubin
    frames = frame_sizes(cubin)
    frame = frames["oxide_recursive_fib_0"]
    assert frame > 0 and STACK_MARGIN == 256
    other = _other_frames(frames)
    assert recursion_limit(cubin, 4096) == (4096 - 256 - other) // frame - 1
    assert recursion_limit(cubin, 65536) == (65536 - 256 - other) // frame - 1
    # the kernel's frame is taken once, the recursive function's once per level
    ck = fib_beside_a_local_table.compile(Slice[i32], DisjointSlice[i32], arch="sm_90")
    frames = frame_sizes(ck.cubin)
    own = frames[ck.name]
    assert own >= 1024 and frames["oxide_recursive_fib_0"] == frame
    other = _other_frames(frames)
    assert other >= own
    limit = recursion_limit(ck.cubin, 8192)
    assert limit == (8192 - 256 - other) // frame - 1
    # the frame of the call the guard refuses (at limit + 1) fits too; one more does not
    assert other + (limit + 1) * frame <= 8192 - 256 < other + (limit + 2) * frame
    # LLVM made factorial's tail recursion a loop: no frame, so no stack to run out of
    cubin = factorials.compile(Slice[i64], DisjointSlice[i64], arch="sm_90").cubin
    assert not any(size for name, size in frame_sizes(cubin).items()
                   if name.startswith("oxide_recursive_"))
    assert recursion_limit(cubin, 4096) == 2**31 - 1
    assert recursion_limit(b"not an ELF image", 4096) is None


@ox.kernel
def big_frames(ns: Slice[i32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i < len(out) and i < len(ns):
        out[i] = big_frame(ns[i])


@ox.kernel(stack_size=64 * 1024)
def big_frames_roomy(ns: Slice[i32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i < len(out) and i < len(ns):
        out[i] = big_frame(ns[i])


def py_big_frame(n: int) -> float:
    return float(sum(range(1, n + 1)))  # each level adds its own n; the base case 0


def test_a_frame_larger_than_the_stack_allows_no_call() -> None:
    """An 8 KiB frame in the default 4 KiB stack: the limit is -1, so the kernel's first
    call is not made (a KernelAssertionError), where the limit was once at least 1 and
    the calls ran past the stack (CUDA_ERROR_ILLEGAL_ADDRESS on an H200)."""
    from oxide.kernel import DEFAULT_STACK_SIZE
    from oxide.runtime.gpu import frame_sizes, recursion_limit

    cubin = big_frames.compile(Slice[i32], DisjointSlice[f32], arch="sm_90").cubin
    frames = frame_sizes(cubin)
    frame = max(size for name, size in frames.items() if name.startswith("oxide_recursive_"))
    assert frame >= 8192
    assert recursion_limit(cubin, DEFAULT_STACK_SIZE) == -1  # not one frame fits
    assert recursion_limit(cubin, 256 + _other_frames(frames) + frame) == 0  # one fits
    roomy = recursion_limit(cubin, 64 * 1024)
    assert roomy == (64 * 1024 - 256 - _other_frames(frames)) // frame - 1 >= 5


def test_big_frames_on_the_cpu(cpu) -> None:
    ns = np.array([0, 1, 5, 30], np.int32)
    out = np.zeros(4, np.float32)
    big_frames[1, 4](ns, out)
    assert out.tolist() == [py_big_frame(int(n)) for n in ns]


def test_a_limit_of_zero_refuses_the_first_call(cpu, monkeypatch) -> None:
    """A stack that holds one frame and no more: the first call is reported (by the
    callee, whose frame fits) and gives 0 (the CPU's limit is 0 where the stack is below
    1 MiB plus a frame)."""
    from oxide.codegen import cpu as cpu_target

    monkeypatch.setattr(cpu_target, "host_stack_bytes", lambda: 1 << 20)

    @ox.kernel
    def k(ns: Slice[i32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i < len(out) and i < len(ns):
            out[i] = big_frame(ns[i])

    ck = k.compile(Slice[i32], DisjointSlice[f32], target="cpu")
    assert "icmp ugt i32 %oxide.depth, 0" in ck.llvm_unoptimized
    out = np.full(2, 9.0, np.float32)
    with pytest.raises(ox.KernelAssertionError, match="`big_frame` recursed deeper"):
        k[1, 2](np.array([0, 3], np.int32), out)
    assert out.tolist() == [0.0, 0.0]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[FakeDriver]:
    from oxide.runtime import cuda_driver

    driver = FakeDriver()
    driver.install(monkeypatch)
    use_launch_flavor(monkeypatch, "ctypes")
    monkeypatch.setenv("OXIDE_CACHE_DIR", str(tmp_path / "cache"))
    limits = {"STACK_SIZE": 1024}
    driver.limit_sets = []  # type: ignore[attr-defined]
    # what the driver refuses: past the per-thread maximum, INVALID_VALUE (523712 bytes on
    # an H200, driver 580); past what the device's memory holds, OUT_OF_MEMORY
    driver.stack_max = None  # type: ignore[attr-defined]
    driver.stack_memory = None  # type: ignore[attr-defined]

    def set_limit(name: str, value: int) -> str | None:
        driver.limit_sets.append((name, value))  # type: ignore[attr-defined]
        if driver.stack_max is not None and value > driver.stack_max:  # type: ignore[attr-defined]
            return "CUDA_ERROR_INVALID_VALUE"
        if driver.stack_memory is not None and value > driver.stack_memory:  # type: ignore[attr-defined]
            return "CUDA_ERROR_OUT_OF_MEMORY"
        limits[name] = value
        return None

    monkeypatch.setattr(cuda_driver, "context_limit", lambda name: limits[name])
    monkeypatch.setattr(cuda_driver, "set_context_limit", set_limit)
    for k in (fibs, doubles, fibs_on_the_largest_stack):
        k.__dict__.pop("_oxide_launchers", None)
    with ox.device(0):
        yield driver


def test_loading_a_recursive_kernel_raises_the_stack_limit(fake: FakeDriver,
                                                          monkeypatch) -> None:
    import ctypes

    from oxide.kernel import DEFAULT_STACK_SIZE, RECURSION_LIMIT_SYMBOL
    from oxide.runtime import cuda_driver
    from oxide.runtime.gpu import recursion_limit

    cell = ctypes.c_int32(-1)
    globals_asked: list[str] = []

    def module_global(module, name):
        globals_asked.append(name)
        return ctypes.addressof(cell), 4

    monkeypatch.setattr(cuda_driver, "module_global", module_global)
    ns, out = ox.empty(8, i32), ox.empty(8, i32)
    fake.formats = "QqQq"
    fibs[1, 8](ns, out)
    fibs[1, 8](ns, out)
    assert fake.limit_sets == [("STACK_SIZE", DEFAULT_STACK_SIZE)]  # type: ignore[attr-defined]
    assert len(fake.launches) == 2
    # the depth guard's limit, written once, for the stack the context has
    cubin = fibs.compile(Slice[i32], DisjointSlice[i32], arch="sm_90").cubin
    assert globals_asked == [RECURSION_LIMIT_SYMBOL]
    assert cell.value == recursion_limit(cubin, DEFAULT_STACK_SIZE) > 0


def test_other_kernels_leave_the_stack_limit_alone(fake: FakeDriver) -> None:
    a, out = ox.empty(8, i32), ox.empty(8, i32)
    fake.formats = "QqQq"
    doubles[1, 8](a, out)
    assert fake.limit_sets == []  # type: ignore[attr-defined]
    assert len(fake.launches) == 1


@ox.kernel
def doubles(a: Slice[i32], out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i < len(out) and i < len(a):
        out[i] = a[i] * 2


@ox.kernel(stack_size=512 * 1024)
def fibs_on_the_largest_stack(ns: Slice[i32], out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i < len(out) and i < len(ns):
        out[i] = fib(ns[i])


def test_a_stack_beyond_the_devices_maximum_is_clamped(fake: FakeDriver, monkeypatch) -> None:
    """`stack_size=512 * 1024` is more than an H200 takes per thread (the driver says
    CUDA_ERROR_INVALID_VALUE above 523712 bytes): the runtime finds the largest it takes
    and the depth guard counts with that, where the launch once failed."""
    import ctypes

    from oxide.runtime import cuda_driver
    from oxide.runtime.gpu import recursion_limit

    cell = ctypes.c_int32(-1)
    monkeypatch.setattr(cuda_driver, "module_global",
                        lambda module, name: (ctypes.addressof(cell), 4))
    fake.stack_max = 523712  # type: ignore[attr-defined]
    ns, out = ox.empty(8, i32), ox.empty(8, i32)
    fake.formats = "QqQq"
    fibs_on_the_largest_stack[1, 8](ns, out)
    assert len(fake.launches) == 1
    sets = [v for _, v in fake.limit_sets]  # type: ignore[attr-defined]
    assert sets[0] == 512 * 1024 and sets[-1] == 523712 and len(sets) < 20
    assert cuda_driver.context_limit("STACK_SIZE") == 523712
    cubin = fibs_on_the_largest_stack.compile(Slice[i32], DisjointSlice[i32],
                                              arch="sm_90").cubin
    assert cell.value == recursion_limit(cubin, 523712)


def test_a_stack_the_device_memory_cannot_hold_is_a_launch_error(fake: FakeDriver) -> None:
    fake.stack_memory = 100_000  # type: ignore[attr-defined]
    ns, out = ox.empty(8, i32), ox.empty(8, i32)
    fake.formats = "QqQq"
    with pytest.raises(ox.LaunchError, match=r"could not give each thread 524288 bytes of "
                       r"stack.*CUDA_ERROR_OUT_OF_MEMORY.*270336 threads.*stack_size="):
        fibs_on_the_largest_stack[1, 8](ns, out)
    assert fake.launches == []
