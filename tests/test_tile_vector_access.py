"""Tile loads and stores (tile/lower.py): masked accesses, each vector of a thread's
side-by-side elements (up to 16 bytes) or single element predicated on its own bounds
test, with no branch. A launch specializes on whether each array's rows take 16-byte
vectors (`ArrayType.vectors`, `fits_vectors`): aligned rows get vector accesses,
misaligned bases, odd pitches and strided views element ones; a compile from types tests
at run time. Every path must give the same elements, on the CPU and in the PTX."""

from __future__ import annotations

import re

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, Slice, bf16, f16, f32, f64, i8, i32, tile
from oxide import types as T
from oxide.runtime.array_view import fits_vectors

rng = np.random.default_rng(23)


@tile.kernel(num_warps=2)
def copy2d(x: Slice[f32, 2], out: DisjointSlice[f32, 2], BM: Const[int], BN: Const[int]):
    i, j = tile.bid(0), tile.bid(1)
    tile.store(out, (i, j), tile.load(x, (i, j), (BM, BN), padding=-1.0))


@tile.kernel
def copy1d(x: Slice[f32], out: DisjointSlice[f32], B: Const[int]):
    i = tile.bid(0)
    tile.store(out, (i,), tile.load(x, (i,), (B,)) * 2.0)


@tile.kernel
def shifted(x: Slice[f32], out: DisjointSlice[f32], B: Const[int]):
    """Reads the tile before its own: block 0 reads tile -1, wholly outside (padding)."""
    i = tile.bid(0)
    tile.store(out, (i,), tile.load(x, (i - 1,), (B,), padding=7.0))


def cpu(kernel, grid, *args):
    with ox.device("cpu"):
        kernel[grid](*args)


def run_copy2d(x: np.ndarray, bm: int, bn: int) -> np.ndarray:
    out = np.zeros(x.shape, np.float32)
    grid = (-(-x.shape[0] // bm), -(-x.shape[1] // bn))
    cpu(copy2d, grid, x, out, bm, bn)
    return out


@pytest.mark.parametrize("cols", [64, 67, 4, 3])
def test_copy_aligned_and_odd_pitches(cols: int) -> None:
    x = rng.standard_normal((37, cols)).astype(np.float32)
    assert np.array_equal(run_copy2d(x, 8, 16), x)


def test_copy_from_a_misaligned_base() -> None:
    """A contiguous view one element in: its rows are not 16-byte aligned."""
    backing = rng.standard_normal(33 * 64 + 1).astype(np.float32)
    x = backing[1:].reshape(33, 64)
    assert x.flags.c_contiguous and x.ctypes.data % 16 != 0
    assert np.array_equal(run_copy2d(x, 8, 32), x)


def test_copy_from_a_strided_view() -> None:
    x = rng.standard_normal((20, 128)).astype(np.float32)[:, ::2]
    assert np.array_equal(run_copy2d(x, 4, 32), x)


def test_negative_tile_index_reads_padding() -> None:
    x = rng.standard_normal(256).astype(np.float32)
    out = np.zeros_like(x)
    cpu(shifted, 4, x, out, 64)
    assert np.array_equal(out[:64], np.full(64, 7.0, np.float32))
    assert np.array_equal(out[64:], x[:192])


@pytest.mark.parametrize("n", [4096, 4099, 100])
def test_copy1d_ragged(n: int) -> None:
    x = rng.standard_normal(n).astype(np.float32)
    out = np.zeros_like(x)
    cpu(copy1d, -(-n // 512), x, out, 512)
    assert np.array_equal(out, x * 2)


def make_copy(dt):
    @tile.kernel
    def copy_dt(x: Slice[dt, 2], out: DisjointSlice[dt, 2], BN: Const[int]):
        i, j = tile.bid(0), tile.bid(1)
        tile.store(out, (i, j), tile.load(x, (i, j), (4, BN)))
    return copy_dt


@pytest.mark.parametrize("dt,np_dt", [(f64, np.float64), (f16, np.float16), (i8, np.int8),
                                      (i32, np.int32)])
def test_other_element_sizes(dt, np_dt) -> None:
    kernel = make_copy(dt)
    x = (rng.standard_normal((9, 200)) * 50).astype(np_dt)
    out = np.zeros_like(x)
    cpu(kernel, (3, 2), x, out, 128)
    assert np.array_equal(out, x)


def test_bf16_copy() -> None:
    pytest.importorskip("ml_dtypes")  # NumPy's bfloat16
    x = rng.standard_normal((8, 256)).astype("bfloat16")
    out = np.zeros_like(x)
    cpu(make_copy(bf16), (2, 2), x, out, 128)
    assert np.array_equal(out.view(np.uint16), x.view(np.uint16))


@pytest.mark.parametrize("dt,access", [(f32, "v4.b32"), (f64, "v2.b64"), (f16, "v2.b32"),
                                       (i8, "b32")])
def test_ptx_moves_whole_vectors(dt, access) -> None:
    """The aligned path moves each thread's 4 side-by-side elements in one access (16
    bytes of f32 or f64 as .v4/.v2, 8 bytes of f16 as .v2.b32, 4 bytes of i8 as .b32)."""
    x = np.zeros((4, 128), _np(dt))
    ptx = make_copy(dt).compile(x, x, 128, arch="sm_90").ptx
    assert f"ld.global.nc.{access}" in ptx
    assert f"st.global.{access}" in ptx


def _np(dt) -> type:
    return {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i8": np.int8}[dt.name]


def test_ptx_keeps_no_per_element_coordinates() -> None:
    """The edge path compares static offsets with one per-thread room per dimension,
    so a 64-element-per-thread tile does not hold 64 coordinates in registers: ptxas
    needs no more than the values themselves and a few addresses."""
    from oxide.codegen.nvjitlink import ptx_to_cubin

    x = np.zeros(8192, np.float32)
    ptx = copy1d.compile(x, x.copy(), 8192, arch="sm_90").ptx
    # 8192 elements over 128 threads: 64 each, in 16 vectors of 4
    assert ptx.count("ld.global.nc.v4.") == 16 and ptx.count("st.global.v4.") == 16
    assert ptx_to_cubin(ptx, "sm_90")
    assert len(re.findall(r"cvt\.u64\.u32", ptx)) < 8


@pytest.mark.parametrize("ptr,shape,strides,item,fits", [
    (1024, (8, 64), None, 4, True),      # 256-byte rows
    (1024, (8, 67), None, 4, False),     # 268-byte rows: the pitch is not a multiple of 16
    (1028, (8, 64), None, 4, False),     # a misaligned base
    (1024, (64,), None, 2, True),        # 1-d: 128 bytes
    (1024, (63,), None, 2, False),       # 1-d, 126 bytes: the last vector would straddle
    (1024, (8, 32), (128, 1), 4, True),  # a column slice of a wider array: pitch 512 bytes
    (1024, (8, 32), (130, 1), 4, False),  # pitch 520 bytes
    (1024, (8, 32), (64, 2), 4, False),  # every other column: no vectors
    (1024, (0, 64), None, 4, True),      # empty
])
def test_fits_vectors(ptr, shape, strides, item, fits) -> None:
    assert fits_vectors(ptr, shape, strides, item) is fits


def test_a_launch_specializes_on_row_vectors() -> None:
    """An aligned array and a misaligned view of the same shape launch two
    specializations (vector accesses, element accesses), both right."""
    from oxide.runtime.args import make_plan, read_args
    from oxide.runtime.device import parse_device

    def vectors(x: np.ndarray) -> bool | None:  # the launch plan's `x` specialization
        out = np.zeros(x.shape, np.float32)
        args = (x, out, 8, 32)
        device = parse_device("cpu")
        _key, views = read_args(copy2d, args, device)
        return make_plan(copy2d, args, views, device).signature[0].vectors

    backing = rng.standard_normal(33 * 64 + 1).astype(np.float32)
    aligned = backing[:33 * 64].reshape(33, 64)
    misaligned = backing[1:].reshape(33, 64)
    if aligned.ctypes.data % 16:
        pytest.skip("NumPy gave an allocation that is not 16-byte aligned")
    assert vectors(aligned) is True and vectors(misaligned) is False
    assert vectors(rng.standard_normal((33, 63)).astype(np.float32)) is False  # odd pitch
    assert np.array_equal(run_copy2d(aligned, 8, 32), aligned)
    assert np.array_equal(run_copy2d(misaligned, 8, 32), misaligned)


@pytest.mark.parametrize("vectors,vector_accesses,element_accesses,branches", [
    (True, 16, 0, 0), (False, 0, 64, 0), (None, 16, 64, 2)])
def test_the_specialization_is_straight_line_code(vectors, vector_accesses,
                                                  element_accesses, branches) -> None:
    """Known rows (a launch) give one access path and no branch; unknown ones (a
    compile from types) both paths behind one uniform branch per access."""
    x = T.ArrayType("slice", f32, 1, True, vectors=vectors)
    out = T.ArrayType("disjoint", f32, 1, True, vectors=vectors)
    ptx = copy1d.compile(x, out, 8192, arch="sm_90").ptx
    assert ptx.count("ld.global.nc.v4.b32") == ptx.count("st.global.v4.b32") == vector_accesses
    assert ptx.count("ld.global.nc.b32") == ptx.count("st.global.b32") == element_accesses
    assert len(re.findall(r"@%p\d+ bra", ptx)) == branches


@pytest.mark.parametrize("name", ["f32", "f64", "f16", "bf16", "i8", "u8", "i16", "i32", "i64",
                                  "bool_"])
@pytest.mark.parametrize("vectors", [True, False, None])
def test_masked_accesses_assemble_for_every_element_type(name, vectors) -> None:
    """The inline PTX of masked loads and stores (`codegen/emit_masked.py`: .b16 to .v4.b32
    words, or a branch for bools) is accepted by ptxas for every element type, with the
    vector path, the element path, and both (a compile from types)."""
    from oxide.codegen.nvjitlink import ptx_to_cubin

    dt = getattr(T, name)
    x = T.ArrayType("slice", dt, 2, True, vectors=vectors)
    out = T.ArrayType("disjoint", dt, 2, True, vectors=vectors)
    for arch in ("sm_80", "sm_90"):
        ptx = make_copy(dt).compile(x, out, 128, arch=arch).ptx
        assert ptx_to_cubin(ptx, arch).startswith(b"\x7fELF")
        if name != "bool_" and vectors is not False:
            assert re.search(r"@%p\d+ ld\.global\.nc\.(v[24]\.)?b(16|32|64)", ptx)
