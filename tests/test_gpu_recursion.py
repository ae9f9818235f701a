"""Recursive @ox.func on a GPU (issue 15 item 12): the CPU suite's kernels
(test_recursion.py) launched on device 0 and compared against Python, the stack limit the
launch sets, and errors reported from inside the recursion."""

from __future__ import annotations

import math

import numpy as np
import pytest
import test_recursion as tr

import oxide as ox
from oxide import DisjointSlice, Slice, i32, i64, thread

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _gpu():
    with ox.device(0):
        yield


def test_factorial() -> None:
    ns = np.arange(21, dtype=np.int64)
    out = np.zeros_like(ns)
    tr.factorials[1, 32](ns, out)
    assert out.tolist() == [math.factorial(n) for n in range(21)]


def test_fibonacci_many_threads() -> None:
    ns = np.random.default_rng(5).integers(0, 21, 4096).astype(np.int32)
    out = np.zeros_like(ns)
    tr.fibs[16, 256](ns, out)
    table = [tr.py_fib(n) for n in range(21)]
    assert out.tolist() == [table[n] for n in ns]


def test_ackermann_small() -> None:
    ms, ns = np.meshgrid(np.arange(4, dtype=np.int32), np.arange(4, dtype=np.int32))
    ms, ns = ms.ravel().copy(), ns.ravel().copy()
    out = np.zeros_like(ms)
    tr.ackermanns[1, 16](ms, ns, out)
    assert out.tolist() == [tr.py_ack(int(m), int(n)) for m, n in zip(ms, ns, strict=True)]


def test_integer_power() -> None:
    rng = np.random.default_rng(7)
    bs = rng.integers(-50, 50, 1024).astype(np.int64)
    es = rng.integers(0, 40, 1024).astype(np.int32)
    out = np.zeros_like(bs)
    tr.powers[4, 256](bs, es, out)
    assert out.tolist() == [tr.wrap64(int(b) ** int(e)) for b, e in zip(bs, es, strict=True)]


def test_mutual_recursion() -> None:
    """Depths up to 63: within the depth guard's limit as compiled (64 levels), whatever
    the loaded module's limit is set to. Depths to 196 under the default stack were once
    reported as too deep on the H200 (2026-12-03, in a 6-worker run) and passed alone
    later, where the device's cubin had no recursive frames at all (LLVM made loops of
    is_even/is_odd): not explained yet, so depth past 64 is tested with `stack_size=`."""
    ns = np.arange(0, 64, 3, dtype=np.int32)
    out = np.zeros_like(ns)
    tr.parities[1, 64](ns, out)
    assert out.tolist() == [int(n % 2 == 0) for n in ns]


@ox.kernel(stack_size=16 * 1024)
def deep_parities(ns: Slice[i32], out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i < len(out) and i < len(ns):
        out[i] = i32(1) if tr.is_even(ns[i]) else i32(0)


def test_deep_mutual_recursion_with_stack_size() -> None:
    """Depth 400 needs more than the default stack: `stack_size=` gives it room."""
    ns = np.arange(0, 400, 7, dtype=np.int32)
    out = np.zeros_like(ns)
    deep_parities[1, 64](ns, out)
    assert out.tolist() == [int(n % 2 == 0) for n in ns]


def test_tuple_result() -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(1, 10**6, 64).astype(np.int64)
    b = rng.integers(1, 10**6, 64).astype(np.int64)
    out = np.zeros((64, 3), np.int64)
    tr.gcds[(1, 64), (4, 1)](a, b, out)
    for k in range(64):
        g, x, y = out[k]
        assert g == math.gcd(int(a[k]), int(b[k]))
        assert int(a[k]) * x + int(b[k]) * y == g


def test_atomic_array_argument() -> None:
    ns = np.array([10, 12, 15], np.int32)
    calls = np.zeros(1, np.int32)
    out = np.zeros_like(ns)
    tr.counted_fibs[1, 3](ns, calls, out)
    assert out.tolist() == [tr.py_fib(int(n)) for n in ns]

    def count(n: int) -> int:
        return 1 if n < 2 else 1 + count(n - 1) + count(n - 2)

    assert calls[0] == sum(count(int(n)) for n in ns)


def test_registers_inside_the_recursion() -> None:
    out = np.zeros(96, np.int32)
    tr.who_am_i[3, 32](out)
    assert out.tolist() == [(i % 32) + (i // 32) * 100 for i in range(96)]


def test_beside_shared_memory_and_barriers() -> None:
    ns = (np.arange(1024, dtype=np.int32) * 7) % 20
    out = np.zeros(1024, np.int32)
    tr.shared_then_fib[32, 32](ns, out)
    assert out.tolist() == [tr.py_fib(int(ns[(i // 32) * 32 + 31 - i % 32]))
                            for i in range(1024)]


def test_constant_arrays_in_the_kernel_and_the_function() -> None:
    out = np.zeros(8, np.float32)
    tr.constants_around_calls[1, 8](out)
    assert out.tolist() == [3 * sum(range(i + 1)) + 2 for i in range(8)]


def test_bounds_check_inside_the_recursion() -> None:
    a = np.arange(10, dtype=np.float32)
    out = np.zeros(2, np.float32)
    with pytest.raises(ox.KernelIndexError, match="`a`"):
        tr.sum_down[1, 2](a, 9, out)
        ox.synchronize()


def test_assert_inside_the_recursion() -> None:
    out = np.zeros(4, np.int32)
    tr.countdowns[1, 4](2, out)
    assert out.tolist() == [2] * 4
    with pytest.raises(ox.KernelAssertionError, match="reached three"):
        tr.countdowns[1, 4](6, out)
        ox.synchronize()


@ox.kernel(stack_size=24 * 1024)
def deep_gpu(a: Slice[i64], depth: i32, out: DisjointSlice[i64]):
    i = thread.index_1d()
    if i < len(out):
        out[i] = tr.alternating(a, depth - i32(i % 8))


def test_depth_1000_with_a_larger_stack() -> None:
    """1200 frames of about 16 bytes (ptxas's frame for `alternating` on sm_90): more than
    the 4 KiB default holds, within the 24 KiB this kernel asks for."""
    from oxide.runtime import cuda_driver as cd
    from oxide.runtime import gpu

    a = np.random.default_rng(1).integers(-100, 100, 1201).astype(np.int64)
    out = np.zeros(256, np.int64)
    deep_gpu[2, 128](a, 1200, out)
    ox.synchronize()

    def expected(n: int) -> int:
        value = int(a[0])
        for k in range(1, n + 1):
            value = int(a[k]) - value
        return value

    assert out.tolist() == [expected(1200 - i % 8) for i in range(256)]
    gdev = gpu.gpu_device(0)
    gdev.enter()
    assert cd.context_limit("STACK_SIZE") >= 24 * 1024


def test_the_default_stack_is_set_for_recursive_kernels() -> None:
    from oxide.kernel import DEFAULT_STACK_SIZE
    from oxide.runtime import cuda_driver as cd
    from oxide.runtime import gpu

    out = np.zeros(8, np.int32)
    tr.fibs[1, 8](np.arange(8, dtype=np.int32), out)
    gdev = gpu.gpu_device(0)
    gdev.enter()
    assert cd.context_limit("STACK_SIZE") >= DEFAULT_STACK_SIZE


def test_runaway_recursion_is_a_kernel_error_not_a_fault() -> None:
    """The depth guard stops the recursion before the stack overflows: a failed assertion
    reported at the function, and the context stays usable."""
    out = np.zeros(64, np.int32)
    with pytest.raises(ox.KernelAssertionError, match="`runaway` recursed deeper"):
        tr.runaways[2, 32](out)
        ox.synchronize()
    ns = np.arange(10, dtype=np.int32)
    fibs_out = np.zeros_like(ns)
    tr.fibs[1, 10](ns, fibs_out)  # the context survived
    assert fibs_out.tolist() == [tr.py_fib(n) for n in range(10)]


@ox.kernel(stack_size=24 * 1024)
def deeper_than_asked(a: Slice[i64], depth: i32, out: DisjointSlice[i64]):
    i = thread.index_1d()
    if i < len(out):
        out[i] = tr.alternating(a, depth)


def test_a_recursion_deeper_than_stack_size_is_reported() -> None:
    a = np.ones(100_001, np.int64)
    out = np.zeros(32, np.int64)
    with pytest.raises(ox.KernelAssertionError, match="`alternating` recursed deeper"):
        deeper_than_asked[1, 32](a, 100_000, out)
        ox.synchronize()

