"""Bad tile kernels: each is refused at compile time with its class, a message that says
why, and a span on the line marked `# <-` (the line the user must change)."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import oxide as ox
from oxide import DisjointSlice, RawSlice, Slice, f32, i32, tile, u32

V = np.zeros(64, np.float32)
M = np.zeros((8, 8), np.float32)
VI = np.zeros(64, np.int32)
VU = np.zeros(64, np.uint32)


@tile.kernel
def broadcast_mismatch(a: Slice[f32, 2], o: DisjointSlice[f32, 2]):
    i = tile.bid(0)
    x = tile.load(a, (i, 0), (4, 8))
    y = tile.load(a, (i, 0), (4, 16))
    tile.store(o, (i, 0), x + y)  # <-


@tile.kernel
def not_power_of_two(a: Slice[f32], o: DisjointSlice[f32]):
    i = tile.bid(0)
    tile.store(o, (i,), tile.load(a, (i,), (100,)))  # <-


@tile.kernel
def store_at_computed_index(a: Slice[f32], o: DisjointSlice[f32]):
    i = tile.bid(0)
    tile.store(o, (i + 1,), tile.load(a, (i,), (64,)))  # <-


@tile.kernel
def witnesses_swapped(a: Slice[f32, 2], o: DisjointSlice[f32, 2]):
    i, j = tile.bid(0), tile.bid(1)
    tile.store(o, (i, j), tile.load(a, (i, j), (8, 8)))
    tile.store(o, (j, i), tile.load(a, (j, i), (8, 8)))  # <-


@tile.kernel
def two_tile_shapes(a: Slice[f32], o: DisjointSlice[f32]):
    i = tile.bid(0)
    tile.store(o, (i,), tile.load(a, (i,), (64,)))
    tile.store(o, (i,), tile.load(a, (i,), (32,)))  # <-


@tile.kernel
def store_to_slice(a: Slice[f32]):
    i = tile.bid(0)
    tile.store(a, (i,), tile.zeros((64,)))  # <-


@tile.kernel
def raw_store_outside_unsafe(a: Slice[f32], o: RawSlice[f32]):
    i = tile.bid(0)
    tile.store(o, (i,), tile.load(a, (i,), (64,)))  # <-


@tile.kernel
def store_wrong_dtype(a: Slice[f32], o: DisjointSlice[i32]):
    i = tile.bid(0)
    tile.store(o, (i,), tile.load(a, (i,), (64,)))  # <-


@tile.kernel
def math_on_ints(a: Slice[i32], o: DisjointSlice[i32]):
    i = tile.bid(0)
    tile.store(o, (i,), tile.exp(tile.load(a, (i,), (64,))))  # <-


@tile.kernel
def signed_unsigned(a: Slice[i32], b: Slice[u32], o: DisjointSlice[i32]):
    i = tile.bid(0)
    x = tile.load(a, (i,), (64,)) + tile.load(b, (i,), (64,))  # <-
    tile.store(o, (i,), x)


@tile.kernel
def bitwise_on_floats(a: Slice[f32], o: DisjointSlice[f32]):
    i = tile.bid(0)
    x = tile.load(a, (i,), (64,))
    tile.store(o, (i,), x & x)  # <-


@tile.kernel
def unknown_op(a: Slice[f32], o: DisjointSlice[f32]):
    i = tile.bid(0)
    tile.store(o, (i,), tile.softplus(tile.load(a, (i,), (64,))))  # <-


@tile.kernel
def mma_inner_mismatch(a: Slice[f32, 2], o: DisjointSlice[f32, 2]):
    i = tile.bid(0)
    x = tile.load(a, (i, 0), (16, 8))
    tile.store(o, (i, 0), x @ x)  # <-


@tile.kernel
def mma_acc_shape(a: Slice[f32, 2], o: DisjointSlice[f32, 2]):
    i = tile.bid(0)
    x = tile.load(a, (i, 0), (16, 16))
    tile.store(o, (i, 0), tile.mma(x, x, tile.zeros((16, 8))))  # <-


@tile.kernel
def cumsum_bad_axis(a: Slice[f32], o: DisjointSlice[f32]):
    i = tile.bid(0)
    tile.store(o, (i,), tile.cumsum(tile.load(a, (i,), (64,)), 1))  # <-


@tile.kernel
def argmax_of_bools(a: Slice[f32], o: DisjointSlice[i32]):
    i = tile.bid(0)
    tile.store(o, (i,), tile.argmax(tile.load(a, (i,), (64,)) > 0, 0, keepdims=True))  # <-


@tile.kernel
def bad_axis(a: Slice[f32, 2], o: DisjointSlice[f32, 2]):
    i = tile.bid(0)
    x = tile.load(a, (i, 0), (8, 8))
    tile.store(o, (i, 0), x - tile.sum(x, 2, keepdims=True))  # <-


@tile.kernel
def wrong_index_rank(a: Slice[f32, 2], o: DisjointSlice[f32, 2]):
    i = tile.bid(0)
    x = tile.load(a, (i,), (8, 8))  # <-
    tile.store(o, (i, 0), x)


@tile.kernel
def store_rank_mismatch(a: Slice[f32, 2], o: DisjointSlice[f32]):
    i = tile.bid(0)
    tile.store(o, (i,), tile.load(a, (i, 0), (8, 8)))  # <-


@tile.kernel
def element_assignment(a: Slice[f32], o: DisjointSlice[f32]):
    i = tile.bid(0)
    x = tile.load(a, (i,), (64,))
    x[0] = 1.0  # <-
    tile.store(o, (i,), x)


@tile.kernel
def if_on_a_tile(a: Slice[f32], o: DisjointSlice[f32]):
    i = tile.bid(0)
    x = tile.load(a, (i,), (64,))
    if x > 0:  # <-
        x = x * 2.0
    tile.store(o, (i,), x)


@tile.kernel
def if_arms_disagree(a: Slice[f32], o: DisjointSlice[f32], s: f32):
    i = tile.bid(0)
    x = tile.load(a, (i,), (64,))
    if s > 0:  # <-
        x = x * 2.0
    else:
        x = x.astype(i32)
    tile.store(o, (i,), x)


@tile.kernel
def break_in_loop(a: Slice[f32], o: DisjointSlice[f32]):
    i = tile.bid(0)
    x = tile.zeros((64,))
    for k in range(4):
        x = x + tile.load(a, (k,), (64,))
        break  # <-
    tile.store(o, (i,), x)


@tile.kernel
def loop_changes_shape(a: Slice[f32], o: DisjointSlice[f32]):
    i = tile.bid(0)
    x = tile.zeros((64,))
    for k in range(4):  # <-
        x = tile.load(a, (k,), (32,))
    tile.store(o, (i,), x)


@tile.kernel
def loop_step_runtime(a: Slice[f32], o: DisjointSlice[f32], s: i32):
    i = tile.bid(0)
    x = tile.zeros((64,))
    for k in range(0, 4, s):  # <-
        x = x + tile.load(a, (k,), (64,))
    tile.store(o, (i,), x)


@tile.kernel
def too_large(a: Slice[f32], o: DisjointSlice[f32]):
    i = tile.bid(0)
    tile.store(o, (i,), tile.load(a, (i,), (1 << 16,)))  # <-


@tile.kernel
def bad_bid_axis(a: Slice[f32], o: DisjointSlice[f32]):
    i = tile.bid(3)  # <-
    tile.store(o, (i,), tile.load(a, (i,), (64,)))


@tile.kernel
def where_needs_bool(a: Slice[f32], o: DisjointSlice[f32]):
    i = tile.bid(0)
    x = tile.load(a, (i,), (64,))
    tile.store(o, (i,), tile.where(x, x, 0.0))  # <-


@tile.kernel
def disjoint_read_elsewhere(o: DisjointSlice[f32]):
    i = tile.bid(0)
    x = tile.load(o, (i + 1,), (64,))  # <-
    tile.store(o, (i,), x)


@tile.kernel
def index_item_float(a: Slice[f32], o: DisjointSlice[f32]):
    i = tile.bid(0)
    tile.store(o, (i,), tile.load(a, (1.5,), (64,)))  # <-


@tile.kernel
def shape_not_constant(a: Slice[f32], o: DisjointSlice[f32], n: i32):
    i = tile.bid(0)
    tile.store(o, (i,), tile.load(a, (i,), (n,)))  # <-


@ox.func
def simt_helper(x: f32) -> f32:
    return x * 2


@tile.kernel
def simt_func_in_tile(a: Slice[f32], o: DisjointSlice[f32]):
    i = tile.bid(0)
    tile.store(o, (i,), simt_helper(tile.load(a, (i,), (64,))))  # <-


@tile.func
def tile_helper_bad(t):
    return t + tile.load(t, (0,), (64,))  # <-


@tile.kernel
def tile_func_error_points_inside(a: Slice[f32], o: DisjointSlice[f32]):
    i = tile.bid(0)
    tile.store(o, (i,), tile_helper_bad(tile.load(a, (i,), (64,))))


@tile.func
def tile_helper_early_return(t, flip):
    if flip:
        return -t  # <-
    return t


@tile.kernel
def tile_func_return_points_inside(a: Slice[f32], o: DisjointSlice[f32]):
    i = tile.bid(0)
    tile.store(o, (i,), tile_helper_early_return(tile.load(a, (i,), (64,)), True))


@tile.kernel
def bad_permute(a: Slice[f32, 2], o: DisjointSlice[f32, 2]):
    i = tile.bid(0)
    tile.store(o, (i, 0), tile.permute(tile.load(a, (i, 0), (8, 8)), (0, 0)))  # <-


@tile.kernel
def bad_reshape(a: Slice[f32, 2], o: DisjointSlice[f32, 2]):
    i = tile.bid(0)
    tile.store(o, (i, 0), tile.load(a, (i, 0), (8, 8)).reshape((4, 8)))  # <-


CASES = [
    (broadcast_mismatch, (M, M), ox.KernelTypeError, r"cannot broadcast shapes \(4, 8\) and \(4, 16\)"),
    (not_power_of_two, (V, V), ox.KernelTypeError, r"powers of two; \(100,\) has 100"),
    (store_at_computed_index, (V, V), ox.SafetyError, r"DisjointSlice: it is written only at a tile index built from"),
    (witnesses_swapped, (M, M), ox.SafetyError, r"`o` is a DisjointSlice written at `\(j, i\)` and accessed at `\(i, j\)` on line \d+: their TileIndex witnesses index different dimensions"),
    (two_tile_shapes, (V, V), ox.SafetyError, r"tiles of shape \(64,\); this tile is \(32,\)"),
    (store_to_slice, (V,), ox.SafetyError, r"`a` is a Slice: kernels only read it"),
    (raw_store_outside_unsafe, (V, V), ox.SafetyError, r"RawSlice: storing to it needs `with ox.unsafe\(\):`"),
    (store_wrong_dtype, (V, VI), ox.KernelTypeError, r"`o` holds i32; cannot store a tile of shape \(64,\) and dtype f32"),
    (math_on_ints, (VI, VI), ox.KernelTypeError, r"tile.exp takes floats, not i32"),
    (signed_unsigned, (VI, VU, VI), ox.KernelTypeError, r"i32 and u32 mix signed and unsigned"),
    (bitwise_on_floats, (V, V), ox.KernelTypeError, r"`&` needs integers or bools, not f32"),
    (unknown_op, (V, V), ox.KernelSyntaxError, r"has no attribute `softplus`"),
    (mma_inner_mismatch, (M, M), ox.KernelTypeError, r"`@`: the inner dimensions differ: `a` is \(16, 8\) and `b` is \(16, 8\)"),
    (mma_acc_shape, (M, M), ox.KernelTypeError, r"the accumulator of tile.mma is \(M, N\) = \(16, 16\)"),
    (cumsum_bad_axis, (V, V), ox.KernelTypeError, r"the axis of tile.cumsum is a constant from -1 to 0"),
    (argmax_of_bools, (V, VI), ox.KernelTypeError, r"tile.argmax of a bool tile"),
    (bad_axis, (M, M), ox.KernelTypeError, r"the axis of tile.sum is a constant from -2 to 1"),
    (wrong_index_rank, (M, M), ox.KernelTypeError, r"`a` has rank 2: its tile index has 2 items, not 1"),
    (store_rank_mismatch, (M, V), ox.KernelTypeError, r"`o` has rank 1; cannot store a tile of shape \(8, 8\)"),
    (element_assignment, (V, V), ox.KernelSyntaxError, r"tile kernels do not assign to elements"),
    (if_on_a_tile, (V, V), ox.KernelTypeError, r"`if` needs a scalar condition, not a tile of shape \(64,\)"),
    (if_arms_disagree, (V, V, np.float32(1)), ox.KernelTypeError, r"`x` is a tile of shape \(64,\) and dtype f32 after one arm of this `if` and a tile of shape \(64,\) and dtype i32 after the other"),
    (break_in_loop, (V, V), ox.UnsupportedFeatureError, r"`break` in a tile kernel loop is not supported"),
    (loop_changes_shape, (V, V), ox.KernelTypeError, r"`x` is a tile of shape \(64,\) and dtype f32 before the loop and a tile of shape \(32,\)"),
    (loop_step_runtime, (V, V, np.int32(1)), ox.UnsupportedFeatureError, r"the step of a tile kernel loop is a non-zero constant"),
    (too_large, (V, V), ox.KernelTypeError, r"puts 512 elements in each of the block's 128 threads"),
    (bad_bid_axis, (V, V), ox.KernelTypeError, r"tile.bid takes a grid axis: 0, 1 or 2"),
    (where_needs_bool, (V, V), ox.KernelTypeError, r"the condition of tile.where is a bool tile"),
    (disjoint_read_elsewhere, (V,), ox.SafetyError, r"it is read only at a tile index built from"),
    (index_item_float, (V, V), ox.KernelTypeError, r"a tile index holds integer scalars, not the constant 1.5"),
    (simt_func_in_tile, (V, V), ox.UnsupportedFeatureError, r"cannot be called in a tile kernel"),
    (bad_permute, (M, M), ox.KernelTypeError, r"the axes of tile.permute are a permutation of \(0, 1\)"),
    (bad_reshape, (M, M), ox.KernelTypeError, r"cannot reshape a tile of shape \(8, 8\) and dtype f32 \(64 elements\) to \(4, 8\)"),
    (shape_not_constant, (V, V, np.int32(64)), ox.KernelTypeError, r"the tile shape must be a tuple of compile-time integers"),
]


def _marked_line(kernel) -> int:
    lines, first = inspect.getsourcelines(kernel.fn)
    marked = [first + k for k, text in enumerate(lines) if text.rstrip().endswith("# <-")]
    assert len(marked) == 1
    return marked[0]


@pytest.mark.parametrize("kernel,args,cls,pattern", CASES, ids=[c[0].__name__ for c in CASES])
def test_bad_tile_kernel(kernel, args, cls, pattern):
    with pytest.raises(cls, match=pattern) as info:
        kernel.compile(*args, arch="cpu")
    err = info.value
    assert err.span is not None and err.span.line == _marked_line(kernel)
    assert err.span.file.endswith("test_tile_diagnostics.py")
    assert "-->" in str(err)  # the rendered diagnostic shows where


def test_error_inside_a_tile_func_points_into_it():
    with pytest.raises(ox.KernelTypeError, match="tile.load takes an array parameter") as info:
        tile_func_error_points_inside.compile(V, V, arch="cpu")
    assert info.value.span.line == _marked_line(tile_helper_bad)


def test_an_early_return_in_a_tile_func_points_at_it():
    """Found by porting Liger's RoPE: the line shown was the calling kernel's (its source
    with the helper's line numbers)."""
    with pytest.raises(ox.UnsupportedFeatureError, match="returns with its last statement") \
            as info:
        tile_func_return_points_inside.compile(V, V, arch="cpu")
    assert info.value.span.line == _marked_line(tile_helper_early_return)
    assert "return it once" in str(info.value)


def test_corpus_is_large_enough():
    assert len(CASES) >= 25


def test_bad_options_at_the_decorator():
    with pytest.raises(ox.KernelTypeError, match="num_warps` must be 1, 2, 4, 8, 16 or 32"):
        tile.kernel(num_warps=3)
    with pytest.raises(ox.KernelTypeError, match="`num_stages` must be an int from 1 to 8"):
        tile.kernel(num_stages=9)


def test_tile_functions_outside_kernels():
    with pytest.raises(RuntimeError, match="inside an @ox.tile.kernel"):
        tile.load(V, (0,), (64,))
    assert tile.cdiv(100, 32) == 4
    assert math.isclose(tile.cdiv(7, 7), 1)


def test_launch_with_a_block_is_refused():
    with pytest.raises(ox.LaunchError, match="launch the tile kernel"):
        not_power_of_two["x"]
