"""Issue 14, items 8-13 on a real GPU: the kernels of test_trust_semantics.py, same expectations.

Every value is checked bit for bit against `semantics_cases.py` (the reference the
CPU tests use too), so a pass here and there means both targets agree.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import semantics_cases as sc
import test_atomic_float_min_max as afm
import test_half_precision as hp
import test_range_loops as rl
import wrap_cases as wc
from test_trust_semantics import DIVISION_KERNELS, division_args

import oxide as ox
from oxide import f16, f32, f64, i32, i64, u32, u64

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def on_gpu() -> Iterator[None]:
    with ox.device(0):
        yield


def launch(kernel: Any, n: int, *args: Any, block: int = 128) -> list[np.ndarray]:
    """Runs on the GPU; returns every array argument as NumPy afterwards (errors raise)."""
    dev = [ox.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    kernel[ox.LaunchConfig(grid=(n + block - 1) // block, block=block)](*dev)
    ox.synchronize()
    return [d.to_numpy() for d in dev if isinstance(d, ox.DeviceArray)]


def run_binary(case: sc.BinaryCase) -> np.ndarray:
    return launch(case.kernel, case.want.size, case.a, case.b, np.zeros_like(case.want))[-1]


@pytest.mark.parametrize("dt", sc.INTS, ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "floordiv", "mod", "shl", "shr"])
def test_gpu_integer_operators_follow_the_contract(op: str, dt: Any) -> None:
    case = sc.int_case(op, dt)
    sc.assert_same(run_binary(case), case.want, case.a, case.b)


def test_gpu_64_bit_shifts_by_2_to_the_32_give_0() -> None:
    a = np.array([5, 1 << 40, -1, 5], np.int64)
    b = np.array([1 << 32, 1 << 32, (1 << 32) + 1, -1], np.int64)
    assert launch(sc.shl, 4, a, b, np.zeros_like(a))[-1].tolist() == [0, 0, 0, 0]
    ua, ub = a.view(np.uint64), b.view(np.uint64)
    assert launch(sc.shr, 4, ua, ub, np.zeros_like(ua))[-1].tolist() == [0, 0, 0, 0]
    assert launch(sc.shr, 4, a, b, np.zeros_like(a))[-1].tolist() == [0, 0, -1, 0]


@pytest.mark.parametrize("dt", [ox.i8, ox.i16, i32, i64], ids=lambda d: d.name)
def test_gpu_int_min_floordiv_minus_one(dt: Any) -> None:
    lo = -(1 << (dt.bits - 1))
    a = np.array([lo, 7], dt.numpy)
    b = np.array([-1, -1], dt.numpy)
    assert launch(sc.floordiv, 2, a, b, np.zeros_like(a))[-1].tolist() == [lo, -7]
    assert launch(sc.mod, 2, a, b, np.zeros_like(a))[-1].tolist() == [0, 0]


def test_gpu_narrow_integers_wrap() -> None:
    a = np.array([100, -128, 127, -1], np.int8)
    b = np.array([100, -1, 1, -128], np.int8)
    assert launch(sc.add, 4, a, b, np.zeros_like(a))[-1].tolist() == [-56, 127, -128, 127]
    assert launch(sc.cube, 4, a, np.zeros_like(a))[-1].tolist() == [
        sc.wrap(v**3, ox.i8) for v in a.tolist()]


@pytest.mark.parametrize("dt", sc.FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["floordiv", "mod"])
def test_gpu_float_floordiv_and_mod_match_numpy_bit_for_bit(op: str, dt: Any) -> None:
    case = sc.float_case(op, dt)
    sc.assert_same(run_binary(case), case.want, case.a, case.b)


@pytest.mark.parametrize("op", ["floordiv", "mod"])
def test_gpu_bf16_floordiv_and_mod(op: str) -> None:
    case = sc.bf16_case(op)
    sc.assert_same(run_binary(case), case.want, case.a, case.b)


def test_gpu_the_issue_examples_of_float_mod() -> None:
    a32 = np.array([2.5e38, 1.0], np.float32)
    b32 = np.array([4.19, 1e-40], np.float32)
    out = launch(sc.mod, 2, a32, b32, np.zeros_like(a32))[-1]
    sc.assert_same(out, np.remainder(a32, b32), a32, b32)  # 3.74 (not 9.7e30), and finite
    a = np.array([1e30, 1.0, np.inf, 1.0, 0.0], np.float64)
    b = np.array([3.0, 0.1, 1.0, -np.inf, -127.0], np.float64)
    out = launch(sc.mod, 5, a, b, np.zeros_like(a))[-1]
    assert out[0] == 1e30 % 3.0 and out[4] == 0.0 and np.signbit(out[4])
    q = launch(sc.floordiv, 5, a, b, np.zeros_like(a))[-1]
    assert q[1] == 9.0 and np.isnan(q[2]) and q[3] == -1.0


@pytest.mark.parametrize("dt", sc.FLOATS, ids=lambda d: d.name)
def test_gpu_ordered_compares_of_squares_are_false_for_nan(dt: Any) -> None:
    a = np.array([0.0, -0.0, 1.0, -3.0, np.nan, np.inf, -np.inf, 1e-40], dt.numpy)
    out = launch(sc.nonnegative_compares, a.size, a, np.zeros(a.size, np.int32))[-1]
    np.testing.assert_array_equal(out, [sc.ref_nonnegative_compares(x) for x in a])


def test_gpu_min_max_of_a_negated_operand() -> None:
    a, b, c = sc.min_max_of_negated_inputs()
    low, high = launch(sc.min_max_of_negated, a.size, a, b, c, np.zeros_like(a),
                       np.zeros_like(a))[-2:]
    want_low, want_high = sc.ref_min_max_of_negated(a, b, c)
    np.testing.assert_array_equal(low, want_low)
    np.testing.assert_array_equal(high, want_high)


def test_gpu_f16_products_beside_a_select_chain() -> None:
    """ptxas 13.0 paired two f16 products after turning a `tile.where` into a predicated
    write of one's operand (121 for 144 at element 16): the PTX now does them in f32."""
    x0, x1, x2 = sc.halves_beside_a_select_chain_inputs()
    args = [ox.to_device(a) for a in (x0, x1, x2, np.zeros(48, np.float32))]
    sc.halves_beside_a_select_chain[3](*args, 16)
    np.testing.assert_array_equal(args[-1].to_numpy(),
                                  sc.ref_halves_beside_a_select_chain(x0, x1, x2))


def test_gpu_f32_atomic_adds_flush_subnormals_on_global_memory_only() -> None:
    start, x = sc.f32_atomic_add_inputs()
    zeros = np.zeros(64, np.float32)
    got = launch(sc.f32_atomic_adds, 64, start, x, start.copy(), zeros, zeros, zeros, block=64)
    sc.check_f32_atomic_adds(start, x, *got[2:])


@pytest.mark.parametrize("dt", sc.FLOATS, ids=lambda d: d.name)
def test_gpu_float_min_max_order_negative_zero_first_and_drop_nan(dt: Any) -> None:
    vals = [0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 1e-40]
    a = np.array([x for x in vals for _ in vals], dt.numpy)
    b = np.array([y for _ in vals for y in vals], dt.numpy)
    low, high = launch(sc.min_max, a.size, a, b, np.zeros_like(a), np.zeros_like(a))[2:]
    for kind, got in (("min", low), ("max", high)):
        want = np.array([sc.ref_min_max(kind, x, y) for x, y in zip(a, b, strict=True)], dt.numpy)
        sc.assert_same(got, want, a, b)


@pytest.mark.parametrize("src", [f16, f32, f64], ids=lambda d: d.name)
@pytest.mark.parametrize("dst", sc.INTS, ids=lambda d: d.name)
def test_gpu_float_to_int_saturates_and_nan_is_0(src: Any, dst: Any) -> None:
    x = sc.conversion_inputs(src)
    out = launch(sc.converter(dst), x.size, x, np.zeros(x.size, dst.numpy))[-1]
    want = np.array([sc.ref_convert(float(v), dst) for v in x], dst.numpy)
    sc.assert_same(out, want, x)


@pytest.mark.parametrize("src", sc.INTS, ids=lambda d: d.name)
def test_gpu_int_to_bf16_rounds_once(src: Any) -> None:
    x = sc.int_to_bf16_inputs(src)
    out = launch(sc.int_to_bf16, x.size, x, np.zeros(x.size, np.float32))[-1]
    sc.assert_same(out, np.array([sc.bf16_of_int(int(v)) for v in x], np.float32), x)


def test_gpu_range_step_zero_is_reported() -> None:
    out = np.full(4, 7, np.int32)
    with pytest.raises(ox.KernelAssertionError, match=r"range\(\) step must not be zero"):
        launch(sc.stepped, 4, 0, 10, 0, out)
    for start, stop, step in ((0, 10, 3), (10, 0, -3), (0, 10, -1)):
        got = launch(sc.stepped, 4, start, stop, step, out)[-1]
        assert got.tolist() == [len(range(start, stop, step))] * 4


@pytest.mark.parametrize("dt", [i32, u32, i64, u64, f32, f64], ids=lambda d: d.name)
@pytest.mark.parametrize("n", [64, 48])
def test_gpu_masked_warp_reductions_reduce_over_the_mask(dt: Any, n: int) -> None:
    x = (sc.rng.standard_normal(n) * 1000).astype(dt.numpy)
    for masks in (sc.member_masks(n), np.full(n, 0xFFFFFFFF, np.uint32)):
        outs = launch(sc.warp_reduce, n, x, masks, *[np.zeros(n, dt.numpy)] * 3, block=n)[2:]
        for got, want in zip(outs, sc.warp_reduce_want(x, masks, n), strict=True):
            sc.assert_same(got, want, x, masks)


@pytest.mark.parametrize("dt", [i32, f64], ids=lambda d: d.name)
def test_gpu_shuffles_read_only_member_lanes(dt: Any) -> None:
    n = 48
    x = (np.arange(n) * 10 + 1).astype(dt.numpy)
    arg = sc.rng.integers(-3, 40, n).astype(np.int32)
    masks = sc.member_masks(n)
    outs = launch(sc.warp_shuffles, n, x, arg, masks, *[np.zeros(n, dt.numpy)] * 4,
                  block=n)[3:]
    for got, want in zip(outs, sc.shuffle_want(x, arg, masks, n), strict=True):
        sc.assert_same(got, want, x, arg, masks)


def test_gpu_per_bucket_maximum_over_match_any_groups() -> None:
    n = 64
    key = sc.rng.integers(0, 4, n).astype(np.int32)
    x = sc.rng.standard_normal(n).astype(np.float32)
    out = launch(sc.bucket_max, n, key, x, np.zeros(n, np.float32), block=n)[-1]
    for i in range(n):
        w = i - i % 32
        assert out[i] == x[w:w + 32][key[w:w + 32] == key[i]].max()


def test_gpu_votes_over_partial_masks() -> None:
    n = 48
    p = sc.rng.integers(0, 2, n).astype(np.int32)
    masks = sc.member_masks(n)
    ballot, anyv, allv = launch(sc.warp_votes, n, p, masks, np.zeros(n, np.uint32),
                                np.zeros(n, np.int32), np.zeros(n, np.int32), block=n)[2:]
    for i in range(n):
        w = i - i % 32
        lanes = [k for k in range(32) if masks[i] >> k & 1 and w + k < n]
        want = sum(1 << k for k in lanes if p[w + k])
        assert ballot[i] == want
        assert anyv[i] == int(want != 0) and allv[i] == int(all(p[w + k] for k in lanes))


@pytest.mark.parametrize("name", sorted(DIVISION_KERNELS))
def test_gpu_division_by_zero_is_reported_from_every_kind_of_kernel(name: str) -> None:
    kernel, args, _ = division_args(name, 1000)
    with pytest.raises(ox.KernelAssertionError, match="division by zero"):
        launch(kernel, 1000, *args)
    ox.synchronize()  # the record was cleared: the context stays usable


# -- round 2: f16 / bf16 (tests/test_half_precision.py runs the same kernels on the CPU) --

def test_gpu_f64_to_f16_rounds_once() -> None:
    a = hp.f64_to_f16_cases()
    assert hp.same_f16(launch(hp.narrow_f64, a.size, a, np.zeros(a.size, np.float16))[-1], a)


@pytest.mark.parametrize("dt", [np.int32, np.uint32, np.int64, np.uint64])
def test_gpu_int_to_f16_overflows_before_widening(dt: Any) -> None:
    a = np.array([0, 1, 3, 255, 1023, 1024, 1025, 2046, 2047, 4095, 6000], dt)
    got = launch(hp.ints_through_f16, a.size, a, np.zeros(a.size, np.float32), 6)[-1]
    with np.errstate(over="ignore"):
        want = ((a.astype(np.int64) & 2047) << 6).astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(got, want)


def test_gpu_bf16_subnormals_survive_compares_and_sign_ops() -> None:
    a = hp.bf16_cases()
    n = a.size
    outs = [np.zeros(n, np.int32), np.zeros(n, hp.BF16), np.zeros(n, hp.BF16),
            np.zeros(n, hp.BF16), np.zeros(n, np.float32)]
    hp.assert_bf16_reads(launch(hp.bf16_reads, n, a, *outs)[1:], a)


@pytest.mark.parametrize("dt", [ox.i8, ox.u8, ox.i16, ox.u16, i32, u32, i64, u64],
                         ids=lambda d: d.name)
def test_gpu_run_time_ranges_count_as_python_does(dt: Any) -> None:
    cases = rl.trip_cases(dt)
    n = cases[0].size
    out, last = launch(rl.trips, n, *cases, np.zeros(n, np.int32), np.zeros(n, dt.numpy))[3:]
    assert (out.tolist(), last.tolist()) == rl.python_trips(*cases)


def test_gpu_a_step_past_the_type_maximum_ends_the_loop() -> None:
    a = np.array([120, 126, 127, 0, -128], np.int8)
    assert launch(rl.trips_i8_by_5, 5, a, np.zeros(5, np.int32))[-1].tolist() == [2, 1, 0, 26, 51]
    assert launch(rl.trips_i8_down_by_5, 5, a, np.zeros(5, np.int32))[-1].tolist() == [
        len(range(v, -128, -5)) for v in a.tolist()]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", afm.CASES)
def test_gpu_float_atomic_min_max_order_signed_zeros(dtype: type, case: tuple) -> None:
    start, values, lo, hi = case
    x = np.array(values, dtype)
    low, high = launch(afm.fold_min_max, x.size, x, np.array([start], dtype),
                       np.array([start], dtype))[1:]
    assert afm.bits(low) == afm.bits(np.array([lo], dtype))
    assert afm.bits(high) == afm.bits(np.array([hi], dtype))


def test_gpu_bf16_subnormals_pass_through_a_select() -> None:
    a, k, want = hp.bf16_select_cases()
    out = launch(hp.bf16_select, a.size, a, k, np.zeros(a.size, hp.BF16))[-1]
    assert out.view(np.uint16).tolist() == want


@pytest.mark.parametrize("name", list(wc.KERNELS))
def test_gpu_16_bit_wrap_and_abs_at_the_minimum(name: str) -> None:
    a, b, c = wc.inputs()
    (_, _, _, out) = launch(wc.KERNELS[name], a.size, a, b, c, np.zeros(a.size, np.int64))
    np.testing.assert_array_equal(out, wc.expected(name))
