"""`&`, `|`, `^` between integers of one width and different signedness (issue 15 item 13).

The bits of such a result do not depend on which signedness is picked, so oxide takes
the unsigned type (C's usual conversions) instead of refusing the mix; arithmetic and
comparisons that mix signedness stay errors (their results do depend on it).
"""

from __future__ import annotations

import numpy as np
import pytest

import oxide as ox
from oxide import DisjointSlice, Slice, i16, i32, i64, u16, u32, u64

N = 200
PAIRS = [(u32, i32, np.uint32, np.int32), (u64, i64, np.uint64, np.int64),
         (u16, i16, np.uint16, np.int16)]


@pytest.fixture
def cpu():
    with ox.device("cpu"):
        yield


U = ox.TypeVar("U")
S = ox.TypeVar("S")
O = ox.TypeVar("O")  # noqa: E741


@ox.kernel
def bitwise_mixed(a: Slice[U], b: Slice[S], o_and: DisjointSlice[O], o_or: DisjointSlice[O],
                  o_xor: DisjointSlice[O], o_rev: DisjointSlice[O]):
    i = ox.thread.index_1d()
    if i in o_and and i in o_or and i in o_xor and i in o_rev:
        o_and[i] = a[i] & b[i]
        o_or[i] = b[i] | a[i]
        o_xor[i] = a[i] ^ b[i]
        o_rev[i] = b[i] & a[i]


def _random(dtype: type, seed: int) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max, N, dtype=dtype,
                                                endpoint=True)


@pytest.mark.parametrize("udt,sdt,unp,snp", PAIRS)
def test_bitwise_mix_is_the_unsigned_type_and_matches_numpy(cpu, udt, sdt, unp, snp) -> None:
    a, b = _random(unp, 1), _random(snp, 2)
    outs = [np.zeros(N, unp) for _ in range(4)]
    bitwise_mixed[2, 128](a, b, *outs)
    bu = b.view(unp)
    for got, want in zip(outs, (a & bu, bu | a, a ^ bu, bu & a), strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("udt,sdt,unp,snp", PAIRS)
def test_the_result_type_is_unsigned(udt, sdt, unp, snp) -> None:
    # the outputs are declared unsigned: a signed result would be a type error on store
    sig = (Slice[udt], Slice[sdt], DisjointSlice[udt], DisjointSlice[udt], DisjointSlice[udt],
           DisjointSlice[udt])
    bitwise_mixed.compile(*sig, arch="cpu")
    with pytest.raises(ox.KernelTypeError, match=f"holds {sdt.name}; cannot store an? {udt.name}"):
        bitwise_mixed.compile(Slice[udt], Slice[sdt], DisjointSlice[sdt], DisjointSlice[sdt],
                              DisjointSlice[sdt], DisjointSlice[sdt], arch="cpu")


@ox.kernel
def mixed_arith(a: Slice[u32], b: Slice[i32], out: DisjointSlice[u32]):
    i = ox.thread.index_1d()
    if i in out:
        out[i] = a[i] + b[i]


@ox.kernel
def mixed_compare(a: Slice[u32], b: Slice[i32], out: DisjointSlice[u32]):
    i = ox.thread.index_1d()
    if i in out:
        if a[i] < b[i]:
            out[i] = 1


@pytest.mark.parametrize("kernel", [mixed_arith, mixed_compare])
def test_arithmetic_and_comparisons_still_refuse_the_mix(kernel) -> None:
    with pytest.raises(ox.KernelTypeError, match="mixing u32 and i32"):
        kernel.compile(Slice[u32], Slice[i32], DisjointSlice[u32], arch="cpu")


@ox.kernel
def lanes_below(out: DisjointSlice[i32]):
    """CUDA's `__popc(active & ((1 << lane) - 1))`: a u32 mask and an i32 lane."""
    i = ox.thread.index_1d()
    active = ox.warp.activemask()
    lane = ox.lane_id()
    if i in out:
        out[i] = ox.popc(active & ((1 << lane) - 1))


def test_lane_mask_idiom_runs_on_the_cpu(cpu) -> None:
    out = np.zeros(64, np.int32)
    lanes_below[1, 64](out)
    np.testing.assert_array_equal(out, np.arange(64) % 32)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_lane_mask_idiom_compiles_for_the_gpu(arch: str) -> None:
    ck = lanes_below.compile(DisjointSlice[i32], arch=arch)
    assert "popc.b32" in ck.ptx
    assert "and.b32" in ck.ptx
    assert ck.cubin[:4] == b"\x7fELF"


@ox.kernel
def witness_mask(out: DisjointSlice[u64], mask: u64):
    """A ThreadIndex is an i64 as a number: `i & mask_u64` is u64."""
    i = ox.thread.index_1d()
    if i in out:
        out[i] = i & mask


def test_thread_index_and_an_unsigned_mask(cpu) -> None:
    out = np.zeros(100, np.uint64)
    witness_mask[1, 128](out, np.uint64(0b1010))
    np.testing.assert_array_equal(out, np.arange(100, dtype=np.uint64) & np.uint64(0b1010))


@ox.kernel
def in_place(x: Slice[i32], m: Slice[u32], out_i: DisjointSlice[i32], out_u: DisjointSlice[u32]):
    """`x &= m` keeps `x`'s type (the bits are the same): C's compound assignment."""
    i = ox.thread.index_1d()
    if i in out_i and i in out_u:
        v = x[i]
        v &= m[i]
        v |= m[i] >> 3
        v ^= m[i]
        out_i[i] = v
        out_u[i] = m[i]
        out_u[i] &= x[i]


def test_compound_bitwise_assignment_keeps_the_target_type(cpu) -> None:
    x, m = _random(np.int32, 5), _random(np.uint32, 6)
    out_i, out_u = np.zeros(N, np.int32), np.zeros(N, np.uint32)
    in_place[2, 128](x, m, out_i, out_u)
    xu = x.view(np.uint32)
    want = (((xu & m) | (m >> np.uint32(3))) ^ m).view(np.int32)
    np.testing.assert_array_equal(out_i, want)
    np.testing.assert_array_equal(out_u, m & xu)


def test_compound_arithmetic_still_refuses_the_mix() -> None:
    @ox.kernel
    def add_in_place(x: Slice[i32], m: Slice[u32], out: DisjointSlice[i32]):
        i = ox.thread.index_1d()
        if i in out:
            v = x[i]
            v += m[i]
            out[i] = v
    with pytest.raises(ox.KernelTypeError, match="mixing i32 and u32"):
        add_in_place.compile(Slice[i32], Slice[u32], DisjointSlice[i32], arch="cpu")
