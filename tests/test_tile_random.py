"""Random numbers in tile kernels (issue 28, item 2): `tile.randint`, `tile.rand` and
`tile.randn` are Philox4x32-10 with Triton's conventions. The bits are checked against a
NumPy implementation written here (itself checked against Random123's known-answer
vectors) for seeds of every kind and offsets of any shape, ragged grids included;
tests/test_gpu_tile_lang.py checks that the GPU gives the same bits."""

from __future__ import annotations

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, f32, i8, i32, i64, tile, u32, u64

MASK = 0xFFFFFFFF


def philox4x32(counter: tuple[int, int, int, int], key: tuple[int, int],
               rounds: int = 10) -> tuple[int, int, int, int]:
    """Philox4x32-R on Python integers, as Random123's philox4x32_R: each round
    multiplies words 0 and 2 by the two multipliers, swaps and mixes in the key, then
    bumps the key by the Weyl constants."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for _ in range(rounds):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0, p1 & MASK, (p0 >> 32) ^ c3 ^ k1, p0 & MASK)
        k0, k1 = (k0 + 0x9E3779B9) & MASK, (k1 + 0xBB67AE85) & MASK
    return c0, c1, c2, c3


# Random123's known-answer vectors for philox4x32_10 (kat_vectors): counter, key, result
KAT = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
       ((MASK,) * 4, (MASK, MASK), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
       ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]


def test_the_reference_is_philox4x32_10() -> None:
    for counter, key, want in KAT:
        assert philox4x32(counter, key) == want


def words(seed: int, offsets: np.ndarray, rounds: int = 10) -> np.ndarray:
    """Triton's convention: key = the seed's 64 bits (low word, high word), counter =
    (offset as u32, 0, 0, 0). Returns the four words, shape (4, *offsets.shape)."""
    bits = seed % 2**64
    key = (bits & MASK, bits >> 32)
    flat = [philox4x32((int(o) & MASK, 0, 0, 0), key, rounds) for o in offsets.ravel()]
    return np.array(flat, np.uint64).T.reshape(4, *offsets.shape).astype(np.uint32)


def uniform(bits: np.ndarray) -> np.ndarray:
    """Triton's uint_to_uniform_float for 32 bits."""
    x = bits.view(np.int32)
    x = np.where(x < 0, ~x, x)
    return x.astype(np.float32) * np.float32(4.6566127342e-10)


@tile.kernel(num_warps=2)
def streams(seed: i64, bits: DisjointSlice[u32], u: DisjointSlice[f32], n: DisjointSlice[f32],
            B: Const[int]):
    """Triton's dropout offsets: this block's elements, `pid * BLOCK + arange(BLOCK)`."""
    i = tile.bid(0)
    offsets = i * B + tile.arange(B)
    tile.store(bits, (i,), tile.randint(seed, offsets))
    tile.store(u, (i,), tile.rand(seed, offsets))
    tile.store(n, (i,), tile.randn(seed, offsets))


@pytest.mark.parametrize("seed", [0, 1, 20240515, -5, 2**40 + 3, -(2**63), 2**63 - 1])
def test_bits_uniforms_and_normals_match_the_reference(seed: int) -> None:
    N, B = 300, 128  # 3 blocks, the last ragged
    bits, u, n = np.zeros(N, np.uint32), np.zeros(N, np.float32), np.zeros(N, np.float32)
    with ox.device("cpu"):
        streams[tile.cdiv(N, B)](np.int64(seed), bits, u, n, B)
    w = words(seed, np.arange(N))
    np.testing.assert_array_equal(bits, w[0])
    np.testing.assert_array_equal(u, uniform(w[0]))
    assert (u >= 0).all() and (u < 1).all()
    u1, u2 = np.maximum(uniform(w[0]), np.float32(1e-7)), uniform(w[1])
    want = np.sqrt(-2.0 * np.log(u1.astype(np.float64))) * np.cos(
        np.float32(6.283185307179586) * u2.astype(np.float64))
    np.testing.assert_allclose(n, want, rtol=2e-6, atol=2e-6)


def test_the_first_known_answer_through_a_kernel() -> None:
    """seed 0 and offset 0 are counter 0 and key 0: Random123's first vector."""
    bits = np.zeros(4, np.uint32)
    with ox.device("cpu"):
        streams[1](np.int64(0), bits, np.zeros(4, np.float32), np.zeros(4, np.float32), 4)
    assert bits[0] == 0x6627E8D5


@tile.kernel(num_warps=4)
def seeds_and_offsets(s32: i32, s64: u64, o: DisjointSlice[u32, 2], B: Const[int]):
    """Seeds of other types and constants; 2-d and negative offsets; fewer rounds."""
    offs = tile.arange(B)[:, None] * 1000 - tile.arange(B)[None, :]  # some negative
    tile.store(o, (0, 0), tile.randint(s32, offs))                   # sign-extended
    tile.store(o, (1, 0), tile.randint(s64, offs.astype(u32)))
    tile.store(o, (2, 0), tile.randint(-7, offs))
    tile.store(o, (3, 0), tile.randint(2**35 + 9, offs, n_rounds=7))
    tile.store(o, (4, 0), tile.randint(s32, offs.astype(i8)))        # widened to 32 bits


def test_seed_types_and_negative_2d_offsets() -> None:
    B = 16
    o = np.zeros((5 * B, B), np.uint32)
    with ox.device("cpu"):
        seeds_and_offsets[1](np.int32(-3), np.uint64(2**64 - 12345), o, B)
    offs = np.arange(B)[:, None] * 1000 - np.arange(B)[None, :]
    np.testing.assert_array_equal(o[:B], words(-3, offs)[0])
    np.testing.assert_array_equal(o[B:2 * B], words(2**64 - 12345, offs)[0])
    np.testing.assert_array_equal(o[2 * B:3 * B], words(-7, offs)[0])
    np.testing.assert_array_equal(o[3 * B:4 * B], words(2**35 + 9, offs, 7)[0])
    np.testing.assert_array_equal(o[4 * B:], words(-3, offs.astype(np.int8))[0])


def test_the_numbers_look_uniform_and_normal() -> None:
    N, B = 1 << 16, 1024
    bits, u, n = np.zeros(N, np.uint32), np.zeros(N, np.float32), np.zeros(N, np.float32)
    with ox.device("cpu"):
        streams[N // B](np.int64(123), bits, u, n, B)
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
    assert abs(n.mean()) < 0.02 and abs(n.std() - 1) < 0.02
    assert len(np.unique(bits)) > N - 5


def test_random_numbers_compile_for_the_gpu() -> None:
    ck = streams.compile(i64, DisjointSlice[u32], DisjointSlice[f32], DisjointSlice[f32], 256,
                         arch="sm_90")
    assert "mul.hi.u32" in ck.ptx and ck.cubin


# -- diagnostics ---------------------------------------------------------------------------


@tile.kernel
def wide_offsets(o: DisjointSlice[f32]):
    tile.store(o, (0,), tile.rand(1, tile.arange(8).astype(i64)))


@tile.kernel
def float_seed(o: DisjointSlice[f32], s: f32):
    tile.store(o, (0,), tile.rand(s, tile.arange(8)))


@tile.kernel
def tile_seed(o: DisjointSlice[f32]):
    tile.store(o, (0,), tile.rand(tile.arange(8), tile.arange(8)))


@tile.kernel
def float_offsets(o: DisjointSlice[f32]):
    tile.store(o, (0,), tile.rand(1, tile.zeros((8,))))


@tile.kernel
def bad_rounds(o: DisjointSlice[f32]):
    tile.store(o, (0,), tile.rand(1, tile.arange(8), n_rounds=0))


W = DisjointSlice[f32]


@pytest.mark.parametrize("kernel,types,message", [
    (wide_offsets, (W,), "integers of at most 32 bits"),
    (float_seed, (W, f32), "the seed of tile.rand is an integer scalar"),
    (tile_seed, (W,), "the seed of tile.rand is an integer scalar"),
    (float_offsets, (W,), "integers of at most 32 bits"),
    (bad_rounds, (W,), "n_rounds is a constant from 1 to 64"),
])
def test_random_misuse_is_a_diagnostic(kernel, types, message) -> None:
    with pytest.raises(ox.KernelTypeError) as info:
        kernel.compile(*types, arch="cpu")
    assert message in str(info.value)
    assert info.value.span is not None and info.value.hint
