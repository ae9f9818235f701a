"""Bad launches, run on the CPU: arguments of the wrong dtype, rank, device, layout, byte
order or alignment; aliasing and self-overlapping writable arrays; configurations beyond
the hardware or the kernel's witnesses; values out of range; run-time failures
(issue 14 items 1, 3, 6, 7, 13, 15). Each builder launches and must raise."""

# ruff: noqa: F841, B018 - launches for their errors

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided, sliding_window_view

import oxide as ox
from oxide import (
    AtomicSlice,
    Const,
    DisjointSlice,
    RawSlice,
    Slice,
    f32,
    i32,
    i64,
    thread,
    u8,
    u32,
    u64,
)

from . import bad

LE, AE, ALE = ox.LaunchError, ox.ArgumentError, ox.AliasingError
KTE = ox.KernelTypeError
T = ox.TypeVar("T")
TABLE = ox.ConstantArray(f32, (4,))  # never set: launching a reader is an error


@ox.kernel
def scale(x: Slice[f32], a: f32, out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * a


@ox.kernel
def bump(out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = out[i] + 1.0


@ox.kernel
def bump_2d(out: DisjointSlice[f32, 2]):
    w = thread.index_2d()
    if w in out:
        out[w] = out[w] + 1.0


@ox.kernel
def copy_2d(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
    w = thread.index_2d()
    if w in out:
        out[w] = x[w]


@ox.kernel
def fill_i32(n: i32, out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i in out:
        out[i] = n


@ox.kernel
def fill_u8(n: u8, out: DisjointSlice[u8]):
    i = thread.index_1d()
    if i in out:
        out[i] = n


@ox.kernel
def fill_u32(n: u32, out: DisjointSlice[u32]):
    i = thread.index_1d()
    if i in out:
        out[i] = n


@ox.kernel
def fill_u64(n: u64, out: DisjointSlice[u64]):
    i = thread.index_1d()
    if i in out:
        out[i] = n


@ox.kernel
def fill_i64(n: i64, out: DisjointSlice[i64]):
    i = thread.index_1d()
    if i in out:
        out[i] = n


@ox.kernel
def times_const(x: Slice[f32], n: Const[int], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * n


@ox.kernel
def pair(a: Slice[T], b: Slice[T], out: DisjointSlice[T]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] + b[i]


@ox.kernel
def two_outputs(a: DisjointSlice[f32], b: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in a and i in b:
        a[i] = 1.0
        b[i] = 2.0


@ox.kernel
def count_into(x: Slice[f32], out: DisjointSlice[f32], total: AtomicSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i]
        ox.atomic.add(total, 0, x[i])


@ox.kernel
def poke(a: RawSlice[f32], j: i64):
    with ox.unsafe():
        a[j] = 1.0


@ox.kernel
def gather(x: Slice[f32, 2], j: i64, out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i, j]


@ox.kernel
def divide(n: i32, d: i32, out: DisjointSlice[i32]):
    i = thread.index_1d()
    if i in out:
        out[i] = n // d


@ox.kernel
def positive(x: Slice[f32]):
    i = thread.index_1d()
    if i in x:
        assert x[i] > 0.0, "x must be positive"


@ox.kernel
def stepped(step: i32, out: DisjointSlice[i32]):
    i = thread.index_1d()
    acc = i32(0)
    for _j in range(0, 10, step):
        acc += 1
    if i in out:
        out[i] = acc


@ox.kernel
def read_table(out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = TABLE[0]


@ox.kernel(max_threads=64)
def narrow(out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = 1.0


@ox.kernel
def dynamic_user(out: DisjointSlice[f32]):
    s = ox.shared.dynamic(f32)
    with ox.unsafe():
        s[ox.thread_idx.x] = 1.0


def f32s(n: int = 8) -> np.ndarray:
    return np.arange(n, dtype=np.float32)


def misaligned_f32(n: int = 8) -> np.ndarray:
    """A float32 view whose data pointer is one byte past an aligned address."""
    raw = np.zeros(4 * n + 8, np.uint8)
    start = (-raw.ctypes.data) % 8 + 1
    return raw[start:start + 4 * n].view(np.float32)


class FakeGpuArray:
    """An object that says it lives in CUDA memory (as numba/CuPy arrays do)."""

    def __init__(self, n: int = 8) -> None:
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4",
                                         "data": (0x7F0000000000, False), "version": 3}


# -- item 1: a 1-D witness is unique only when y and z are 1 (2-D: when z is 1)


@bad(LE, pattern=r"index_1d|ThreadIndex|witness|unique", launch=True)
def index_1d_with_2d_block():
    bump[1, (8, 4)](np.zeros(8, np.float32))


@bad(LE, pattern=r"index_1d|ThreadIndex|witness|unique", launch=True)
def index_1d_with_2d_grid():
    bump[ox.LaunchConfig(grid=(2, 2), block=8)](np.zeros(16, np.float32))


@bad(LE, pattern=r"index_1d|ThreadIndex|witness|unique", launch=True)
def index_1d_with_block_z():
    bump[1, (4, 1, 2)](np.zeros(4, np.float32))


@bad(LE, pattern=r"index_2d|ThreadIndex|witness|unique", launch=True)
def index_2d_with_block_z():
    bump_2d[1, (4, 4, 2)](np.zeros((4, 4), np.float32))


@bad(LE, pattern=r"index_2d|ThreadIndex|witness|unique", launch=True)
def index_2d_with_grid_z():
    bump_2d[(1, 1, 3), (4, 4)](np.zeros((4, 4), np.float32))


# -- item 15: arguments


@bad(AE, pattern=r"3 parameters|got 2|missing", launch=True)
def too_few_arguments():
    scale[1, 8](f32s(), 2.0)


@bad(AE, pattern=r"3 parameters|got 4|too many", launch=True)
def too_many_arguments():
    scale[1, 8](f32s(), 2.0, f32s(), f32s())


@bad(AE, pattern=r"no parameter `scal`|unknown|unexpected", launch=True)
def unknown_keyword_argument():
    scale[1, 8](f32s(), scal=2.0, out=f32s())


@bad(AE, pattern=r"missing.*`out`", launch=True)
def missing_keyword_argument():
    scale[1, 8](x=f32s(), a=2.0)


@bad(AE, pattern=r"two values for `x`|`x`.*(twice|duplicate)", launch=True)
def argument_given_by_position_and_keyword():
    scale[1, 8](f32s(), 2.0, f32s(), x=f32s())


@bad(AE, pattern=r"two values for `x`|`x`.*(twice|duplicate)", launch=True)
def launch_function_keyword_duplicate():
    ox.launch(scale, ox.LaunchConfig(1, 8), f32s(), 2.0, out=f32s(), x=f32s())


@bad(AE, pattern=r"bool|True", launch=True)
def true_for_i32():
    fill_i32[1, 8](True, np.zeros(8, np.int32))


@bad(AE, pattern=r"bool|True", launch=True)
def numpy_bool_for_i32():
    fill_i32[1, 8](np.bool_(True), np.zeros(8, np.int32))


@bad(AE, pattern=r"f32|does not fit|range|too (big|large)", launch=True)
def ten_to_400_for_f32():
    scale[1, 8](f32s(), 10**400, np.zeros(8, np.float32))


@bad(AE, pattern=r"u8|range|does not fit", launch=True)
def three_hundred_for_u8():
    fill_u8[1, 8](300, np.zeros(8, np.uint8))


@bad(AE, pattern=r"u32|range|does not fit|negative", launch=True)
def minus_one_for_u32():
    fill_u32[1, 8](-1, np.zeros(8, np.uint32))


@bad(AE, pattern=r"u64|range|does not fit", launch=True)
def two_to_64_for_u64():
    fill_u64[1, 8](2**64, np.zeros(8, np.uint64))


@bad(AE, pattern=r"i32|range|does not fit", launch=True)
def two_to_31_for_i32():
    fill_i32[1, 8](2**31, np.zeros(8, np.int32))


@bad(AE, pattern=r"i64|range|does not fit", launch=True)
def numpy_uint64_max_for_i64():
    fill_i64[1, 8](np.uint64(2**64 - 1), np.zeros(8, np.int64))


@bad(AE, pattern=r"i32|float|int", launch=True)
def float_for_i32():
    fill_i32[1, 8](2.5, np.zeros(8, np.int32))


@bad(AE, pattern=r"i32|nan|float|int", launch=True)
def nan_for_i32():
    fill_i32[1, 8](float("nan"), np.zeros(8, np.int32))


@bad(AE, pattern=r"f32|str", launch=True)
def string_for_f32():
    scale[1, 8](f32s(), "2.0", np.zeros(8, np.float32))


@bad(AE, pattern=r"scalar|array|ndarray", launch=True)
def array_for_scalar():
    scale[1, 8](f32s(), f32s(), np.zeros(8, np.float32))


@bad(AE, pattern=r"`?n`?.*(Const|list|hashable)", launch=True)
def list_for_const_int():
    times_const[1, 8](f32s(), [2], np.zeros(8, np.float32))


@bad(AE, pattern=r"`?n`?.*(Const|ndarray|array|hashable)", launch=True)
def array_for_const_int():
    times_const[1, 8](f32s(), np.array([2]), np.zeros(8, np.float32))


@bad(AE, ox.KernelTypeError, pattern=r"`?n`?.*(Const|float|int)|Const\[int\]", launch=True)
def float_for_const_int():
    times_const[1, 8](f32s(), 2.5, np.zeros(8, np.float32))


@bad(AE, pattern=r"not an array|None", launch=True)
def none_for_array():
    scale[1, 8](None, 2.0, np.zeros(8, np.float32))


@bad(AE, pattern=r"not an array|list", launch=True)
def list_for_disjoint_slice():
    scale[1, 8](f32s(), 2.0, [0.0] * 8)


@bad(AE, pattern=r"f32|float64|f64", launch=True)
def float64_array_for_f32():
    scale[1, 8](np.arange(8, dtype=np.float64), 2.0, np.zeros(8, np.float32))


@bad(AE, pattern=r"f32|bool", launch=True)
def bool_array_for_f32():
    scale[1, 8](np.ones(8, bool), 2.0, np.zeros(8, np.float32))


@bad(AE, pattern=r"complex|dtype|c64|f32", launch=True)
def complex_array_for_f32():
    scale[1, 8](np.ones(8, np.complex64), 2.0, np.zeros(8, np.float32))


@bad(AE, pattern=r"object|dtype|f32", launch=True)
def object_array():
    scale[1, 8](np.array([1.0] * 8, dtype=object), 2.0, np.zeros(8, np.float32))


@bad(KTE, pattern=r"rank-0 array", launch=True)
def zero_d_array():
    """`scale`'s unranked `x: Slice[f32]` takes rank 0 from the argument; its body indexes
    it with a 1-D ThreadIndex."""
    scale[1, 8](np.ones((), np.float32), 2.0, np.zeros(8, np.float32))


@bad(AE, pattern=r"rank|dimension|2", launch=True)
def rank_1_for_fixed_rank_2():
    copy_2d[1, 8](f32s(), np.zeros((2, 4), np.float32))


@bad(AE, pattern=r"\bT = f64.*\bT = f32|type variable T\b", launch=True)
def typevar_bound_twice():
    pair[1, 8](f32s(), np.zeros(8, np.float64), np.zeros(8, np.float32))


@bad(AE, pattern=r"f32|f64|float64", launch=True)
def device_array_of_wrong_dtype():
    scale[1, 8](ox.zeros(8, ox.f64), 2.0, np.zeros(8, np.float32))


@bad(AE, pattern=r"device|GPU|CUDA|cpu", launch=True, cpu_only=True)
def gpu_array_as_output_on_cpu():
    scale[1, 8](f32s(), 2.0, FakeGpuArray())


# -- items 3 and 6: layouts a writable or readable parameter cannot take


@bad(AE, ALE, pattern=r"overlap", launch=True)
def as_strided_self_overlap():
    buf = np.zeros(16, np.float32)
    bump_2d[1, (4, 4)](as_strided(buf, (4, 4), (4, 4)))


@bad(AE, ALE, pattern=r"overlap", launch=True)
def sliding_window_writeable():
    buf = np.zeros(10, np.float32)
    bump_2d[1, (3, 8)](sliding_window_view(buf, 3, writeable=True))


@bad(AE, ALE, pattern=r"overlap|stride|broadcast", launch=True)
def zero_stride_column_writable():
    buf = np.zeros(4, np.float32)
    bump_2d[1, (4, 4)](as_strided(buf, (4, 4), (4, 0)))


@bad(AE, ALE, pattern=r"overlap", launch=True)
def negative_stride_self_overlap():
    buf = np.zeros(8, np.float32)
    view = as_strided(buf[4:], (4, 4), (-4, 4))
    bump_2d[1, (4, 4)](view)


@bad(AE, pattern=r"byte order|big-endian|endian", launch=True)
def big_endian_input():
    scale[1, 8](f32s().astype(">f4"), 2.0, np.zeros(8, np.float32))


@bad(AE, pattern=r"byte order|big-endian|endian", launch=True)
def big_endian_output():
    scale[1, 8](f32s(), 2.0, np.zeros(8, ">f4"))


@bad(AE, pattern=r"align", launch=True)
def misaligned_input():
    scale[1, 8](misaligned_f32(), 2.0, np.zeros(8, np.float32))


@bad(AE, pattern=r"align", launch=True)
def misaligned_output():
    scale[1, 8](f32s(), 2.0, misaligned_f32())


@bad(AE, pattern=r"align|stride|multiple", launch=True)
def structured_field_view():
    rec = np.zeros(8, dtype=np.dtype([("tag", "u1"), ("v", "<f4")]))
    scale[1, 8](rec["v"], 2.0, np.zeros(8, np.float32))


@bad(AE, pattern=r"mask", launch=True)
def masked_input():
    x = np.ma.masked_array(f32s(), mask=[False, True] * 4)
    scale[1, 8](x, 2.0, np.zeros(8, np.float32))


@bad(AE, pattern=r"mask", launch=True)
def masked_output():
    out = np.ma.masked_array(np.zeros(8, np.float32), mask=[True] * 8)
    scale[1, 8](f32s(), 2.0, out)


@bad(AE, pattern=r"read-only|writ", launch=True)
def read_only_output():
    out = np.zeros(8, np.float32)
    out.setflags(write=False)
    scale[1, 8](f32s(), 2.0, out)


@bad(AE, pattern=r"read-only|writ", launch=True)
def output_over_immutable_bytes():
    scale[1, 8](f32s(), 2.0, np.frombuffer(bytes(32), np.float32))


# -- aliasing


@bad(ALE, pattern=r"overlap", launch=True)
def output_is_input():
    x = f32s()
    scale[1, 8](x, 2.0, x)


@bad(ALE, pattern=r"overlap", launch=True)
def shifted_views_of_one_buffer():
    buf = f32s(9)
    scale[1, 8](buf[:-1], 2.0, buf[1:])


@bad(ALE, pattern=r"overlap", launch=True)
def interleaved_views_of_one_buffer():
    buf = f32s(16)
    scale[1, 8](buf[::2], 2.0, buf[1::2])


@bad(ALE, pattern=r"overlap", launch=True)
def two_outputs_one_buffer():
    buf = np.zeros(8, np.float32)
    two_outputs[1, 8](buf, buf)


@bad(ALE, pattern=r"overlap", launch=True)
def atomic_total_inside_output():
    buf = np.zeros(9, np.float32)
    count_into[1, 8](f32s(), buf[:8], buf[7:])


@bad(ALE, pattern=r"overlap", launch=True)
def transpose_of_output_as_input():
    out = np.zeros((4, 4), np.float32)
    copy_2d[1, (4, 4)](out.T, out)


# -- configurations


@bad(LE, pattern=r"positive|block", launch=True)
def block_of_zero():
    scale[1, 0](f32s(), 2.0, np.zeros(8, np.float32))


@bad(LE, pattern=r"1024", launch=True)
def block_of_2048():
    scale[1, 2048](f32s(), 2.0, np.zeros(8, np.float32))


@bad(LE, pattern=r"1024", launch=True)
def block_1024_by_2():
    scale[1, (1024, 2)](f32s(), 2.0, np.zeros(8, np.float32))


@bad(LE, pattern=r"block\.z|64", launch=True)
def block_z_of_128():
    fill_i32[1, (1, 1, 128)](1, np.zeros(8, np.int32))


@bad(LE, pattern=r"grid\.y|65535", launch=True)
def grid_y_of_70000():
    fill_i32[(1, 70000), 1](1, np.zeros(8, np.int32))


@bad(LE, pattern=r"positive|grid", launch=True)
def negative_grid():
    scale[-1, 8](f32s(), 2.0, np.zeros(8, np.float32))


@bad(LE, pattern=r"grid|int", launch=True)
def float_grid():
    scale[2.5, 8](f32s(), 2.0, np.zeros(8, np.float32))


@bad(LE, pattern=r"grid|int|bool", launch=True)
def bool_grid():
    scale[True, 8](f32s(), 2.0, np.zeros(8, np.float32))


@bad(LE, pattern=r"block|int", launch=True)
def string_block():
    scale[1, "256"](f32s(), 2.0, np.zeros(8, np.float32))


@bad(LE, pattern=r"LaunchConfig|kernel\[", launch=True)
def string_config():
    scale["grid"](f32s(), 2.0, np.zeros(8, np.float32))


@bad(LE, pattern=r"LaunchConfig|kernel\[", launch=True)
def five_item_config():
    scale[1, 8, None, 0, 0](f32s(), 2.0, np.zeros(8, np.float32))


@bad(LE, pattern=r"LaunchConfig|kernel\[|launch", launch=True)
def kernel_called_without_config():
    scale(f32s(), 2.0, np.zeros(8, np.float32))


@bad(LE, pattern=r"shared|227|KiB|limit|bytes", launch=True, isolate=True)
def dynamic_shared_of_1_gib():
    dynamic_user[ox.LaunchConfig(1, 32, shared_mem_bytes=1 << 30)](np.zeros(8, np.float32))


@bad(LE, pattern=r"shared|227|KiB|limit|bytes", launch=True)
def dynamic_shared_of_300_kib():
    dynamic_user[ox.LaunchConfig(1, 32, shared_mem_bytes=300 * 1024)](np.zeros(8, np.float32))


@bad(LE, pattern=r"shared_mem_bytes|negative", launch=True)
def negative_dynamic_shared():
    dynamic_user[ox.LaunchConfig(1, 32, shared_mem_bytes=-4)](np.zeros(8, np.float32))


@bad(LE, pattern=r"shared_mem_bytes|int", launch=True)
def float_dynamic_shared():
    dynamic_user[ox.LaunchConfig(1, 32, shared_mem_bytes=1024.0)](np.zeros(8, np.float32))


@bad(LE, pattern=r"max_threads|64|threads", launch=True)
def block_beyond_max_threads():
    narrow[1, 128](np.zeros(128, np.float32))


# -- constant memory


@bad(LE, pattern=r"TABLE|never set|set\(", launch=True)
def constant_array_never_set():
    read_table[1, 8](np.zeros(8, np.float32))


@bad(AE, LE, pattern=r"shape|\(4,\)|size", launch=True)
def constant_array_set_with_wrong_shape():
    table = ox.ConstantArray(f32, (4,))
    table.set(np.zeros(5, np.float32))


# -- run time: failures a launch reports instead of corrupting memory


@bad(ox.KernelIndexError, pattern=r"index|length|bounds", launch=True, isolate=True)
def raw_write_far_out_of_bounds():
    poke[1, 1](np.zeros(8, np.float32), 1 << 40)


@bad(ox.KernelIndexError, pattern=r"index|length|bounds", launch=True, isolate=True)
def raw_write_one_past_the_end():
    buf = np.zeros(9, np.float32)
    poke[1, 1](buf[:8], 8)
    assert buf[8] == 0.0, "the wild write landed"


@bad(ox.KernelIndexError, pattern=r"index|length|bounds", launch=True, isolate=True)
def raw_write_negative_index():
    buf = np.zeros(9, np.float32)
    poke[1, 1](buf[1:], -1)


@bad(ox.KernelIndexError, pattern=r"index|length|bounds", launch=True)
def column_read_beyond_transposed_view():
    x = np.zeros((8, 3), np.float32).T
    gather[1, 3](x, 8, np.zeros(3, np.float32))


@bad(ox.KernelAssertionError, pattern=r"division by zero", launch=True)
def integer_division_by_zero():
    divide[1, 8](7, 0, np.zeros(8, np.int32))


@bad(ox.KernelAssertionError, pattern=r"`positive`: x must be positive", launch=True)
def assertion_fails():
    positive[1, 8](-f32s())


@bad(ox.KernelAssertionError, pattern=r"range\(\) step must not be zero", launch=True,
     isolate=True)
def range_step_zero_at_run_time():
    stepped[1, 8](0, np.zeros(8, np.int32))


@bad(AE, pattern=r"`n`.*(Const|None)", launch=True)
def none_for_const_int():
    times_const[1, 8](f32s(), None, np.zeros(8, np.float32))


# -- the same refusals through ox.launch, and on relaunches (the cached fast path)


@ox.func
def mark_mine(out):
    i = thread.index_1d()
    if i in out:
        out[i] = out[i] + 1.0


@ox.kernel
def bump_via_func(out: DisjointSlice[f32]):
    mark_mine(out)


@bad(LE, pattern=r"index_1d|ThreadIndex|witness|unique", launch=True)
def index_1d_in_func_with_2d_block():
    bump_via_func[1, (8, 4)](np.zeros(8, np.float32))


@bad(LE, pattern=r"index_1d|ThreadIndex|witness|unique", launch=True)
def index_1d_through_ox_launch():
    ox.launch(bump, ox.LaunchConfig(grid=1, block=(8, 4)), np.zeros(8, np.float32))


@bad(LE, pattern=r"index_1d|ThreadIndex|witness|unique", launch=True)
def index_1d_bad_config_relaunched():
    out = np.zeros(8, np.float32)
    bump[1, 8](out)
    cfg = ox.LaunchConfig(grid=1, block=(8, 4))
    try:
        bump[cfg](out)
    except ox.LaunchError:
        pass
    bump[cfg](out)  # the same config object again: still refused


@bad(AE, pattern=r"byte order|big-endian|endian", launch=True)
def big_endian_on_relaunch():
    out = np.zeros(8, np.float32)
    scale[1, 8](f32s(), 2.0, out)
    scale[1, 8](f32s().astype(">f4"), 2.0, out)


@bad(AE, pattern=r"align", launch=True)
def misaligned_on_relaunch():
    scale[1, 8](f32s(), 2.0, np.zeros(8, np.float32))
    scale[1, 8](f32s(), 2.0, misaligned_f32())


@bad(AE, pattern=r"mask", launch=True)
def masked_on_relaunch():
    out = np.zeros(8, np.float32)
    scale[1, 8](f32s(), 2.0, out)
    scale[1, 8](np.ma.masked_array(f32s(), mask=[True] * 8), 2.0, out)


@bad(AE, ALE, pattern=r"overlap", launch=True)
def self_overlap_on_relaunch():
    bump_2d[1, (4, 4)](np.zeros((4, 4), np.float32))
    bump_2d[1, (4, 4)](as_strided(np.zeros(16, np.float32), (4, 4), (4, 4)))


@bad(ALE, pattern=r"overlap", launch=True)
def aliasing_on_relaunch():
    x = f32s()
    scale[1, 8](x, 2.0, np.zeros(8, np.float32))
    scale[1, 8](x, 2.0, x)


@bad(AE, pattern=r"read-only|writ", launch=True)
def read_only_output_on_relaunch():
    out = np.zeros(8, np.float32)
    scale[1, 8](f32s(), 2.0, out)
    out.setflags(write=False)
    scale[1, 8](f32s(), 2.0, out)


@bad(AE, pattern=r"bool|True", launch=True)
def true_for_i32_on_relaunch():
    out = np.zeros(8, np.int32)
    fill_i32[1, 8](1, out)
    fill_i32[1, 8](True, out)


@bad(AE, pattern=r"u8|range|does not fit", launch=True)
def out_of_range_u8_on_relaunch():
    out = np.zeros(8, np.uint8)
    fill_u8[1, 8](255, out)
    fill_u8[1, 8](256, out)


@bad(AE, pattern=r"f32|f64", launch=True)
def wrong_dtype_on_relaunch():
    out = np.zeros(8, np.float32)
    scale[1, 8](f32s(), 2.0, out)
    scale[1, 8](f32s(), 2.0, np.zeros(8, np.float64))


@bad(AE, pattern=r"3 parameters|got 2", launch=True)
def too_few_arguments_on_relaunch():
    out = np.zeros(8, np.float32)
    scale[1, 8](f32s(), 2.0, out)
    scale[1, 8](f32s(), out)


@bad(AE, pattern=r"f32|too large|range", launch=True)
def huge_float_on_relaunch():
    out = np.zeros(8, np.float32)
    scale[1, 8](f32s(), 2.0, out)
    scale[1, 8](f32s(), 10**400, out)


@bad(AE, pattern=r"`n`.*(Const|bool|True)", launch=True)
def true_for_const_int():
    times_const[1, 8](f32s(), True, np.zeros(8, np.float32))


# -- host objects that are not what they claim, and host API misuse around a launch


def plain_scale(x, a, out):
    """A kernel body someone forgot to decorate with @ox.kernel."""
    out[:] = x * a


class BrokenDLPack:
    """A DLPack producer on the CPU whose `__dlpack__` hands back no capsule."""

    def __dlpack__(self, **kwargs: object) -> object:
        return 5

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


class BrokenCudaArray:
    """A `__cuda_array_interface__` whose data pointer is missing."""

    __cuda_array_interface__ = {"shape": (8,), "typestr": "<f4", "data": (None, False),
                                "version": 3}


@bad(LE, pattern=r"plain_scale|kernel|@ox\.kernel", launch=True)
def launch_of_an_undecorated_function():
    ox.launch(plain_scale, ox.LaunchConfig(1, 8), f32s(), 2.0, np.zeros(8, np.float32))


@bad(AE, pattern=r"`x`|DLPack|capsule", launch=True)
def dlpack_producer_without_a_capsule():
    scale[1, 8](BrokenDLPack(), 2.0, np.zeros(8, np.float32))


@bad(AE, pattern=r"`x`|__cuda_array_interface__|pointer|data", launch=True, cpu_only=True)
def cuda_array_interface_without_a_pointer():
    scale[1, 8](BrokenCudaArray(), 2.0, np.zeros(8, np.float32))


@bad(ox.OxideError, pattern=r"shape|negative|-1", launch=True)
def empty_with_a_negative_shape():
    ox.empty(-1, ox.f32)


@bad(ox.OxideError, pattern=r"dtype|complex64", launch=True)
def empty_with_a_complex_dtype():
    ox.empty(4, np.complex64)


@bad(ox.OxideError, pattern=r"dtype|<U1|str", launch=True)
def to_device_of_strings():
    ox.to_device(np.array(["a", "b"]))


@bad(ox.OxideError, pattern=r"dtype|complex64", launch=True)
def constant_array_of_a_numpy_type():
    # np.float32 is a dtype ConstantArray takes (as ox.empty does); complex is not
    ox.ConstantArray(np.complex64, 4)


@bad(ox.OxideError, pattern=r"300|u8|range|fit", launch=True)
def constant_array_set_out_of_range():
    ox.ConstantArray(u8, 2).set([300, 1])


@bad(ox.OxideError, pattern=r"nan|i32|integer", launch=True)
def constant_array_set_nan_into_ints():
    ox.ConstantArray(i32, 2).set([float("nan"), 1.0])


# -- issue 27: what a launch takes besides its arguments


@bad(AE, pattern=r"stream= takes.*'default'", launch=True)
def string_for_a_stream():
    scale[1, 8](np.ones(8, np.float32), 2.0, np.zeros(8, np.float32), stream="default")


@bad(AE, pattern=r"stream= takes.*not a 64-bit pointer", launch=True)
def negative_stream_handle():
    scale[1, 8, -1](np.ones(8, np.float32), 2.0, np.zeros(8, np.float32))


@bad(LE, pattern=r"grid", launch=True)
def numpy_float_tile_grid():
    from oxide import tile

    @tile.kernel(num_warps=1)
    def k(out: DisjointSlice[f32]):
        tile.store(out, (tile.bid(0),), tile.zeros((32,), f32))

    k[np.float64(1.0)](np.zeros(32, np.float32))


@ox.kernel
def mma_anywhere(a: Slice[u32], out: RawSlice[f32]):
    d = ox.mma_sync((a[0], a[1], a[2], a[3]), (a[4], a[5]), (0.0, 0.0, 0.0, 0.0))
    with ox.unsafe():
        out[ox.thread_idx.x] = d[0]


@bad(LE, pattern=r"mma_sync.*last warp is partial", launch=True)
def mma_sync_launched_in_a_block_of_16():
    mma_anywhere[1, 16](np.zeros(8, np.uint32), np.zeros(16, np.float32))
