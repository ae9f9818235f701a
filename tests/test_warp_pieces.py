"""Warp-level pieces (issue 15 item 9): `ox.sync_warp(mask)`, `ox.warp.activemask()`, the
lanemask helpers, `ox.warp.match_all` and the `width=` keyword of shuffles.

Each runs on the CPU against a Python model of CUDA's semantics (PTX ISA: `shfl.sync` with
its segment mask, `match.all.sync`, `%lanemask_*`, `activemask.b32`), and assembles for
sm_80 and sm_90. The `check_*` functions take the device from the caller, so
tests/test_gpu_warp_pieces.py runs the same checks on a GPU. The last part ports the idea
of cuda-samples' warpAggregatedAtomicsCG: per-warp aggregated atomic increments, one
atomic per warp (or per group of lanes holding the same key) by an elected leader.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import oxide as ox
from oxide import AtomicSlice, RawSlice, Slice, f32, f64, i32, i64, u32, u64
from oxide.runtime.device import device

ARCHES = ("sm_80", "sm_90")
FULL = 0xFFFFFFFF
SHUFFLES = ("shuffle", "shuffle_up", "shuffle_down", "shuffle_xor")
WIDTHS = (1, 2, 4, 8, 16, 32)
rng = np.random.default_rng(15)


@pytest.fixture(autouse=True)
def on_cpu() -> Iterator[None]:
    with device("cpu"):
        yield


def launch(kernel: Any, config: Any, *arrays: Any) -> list[np.ndarray]:
    """Launches on the current device (CPU or GPU); returns the arrays as NumPy after."""
    from oxide.runtime.device import current_device

    if current_device().is_cpu:
        ox.launch(kernel, config, *arrays)
        return [a for a in arrays if isinstance(a, np.ndarray)]
    dev = [ox.to_device(a) if isinstance(a, np.ndarray) else a for a in arrays]
    ox.launch(kernel, config, *dev)
    return [d.to_numpy() for d, a in zip(dev, arrays, strict=True) if isinstance(a, np.ndarray)]


def assembles(kernel: Any, *sig: Any) -> list[str]:
    """Compiles for sm_80 and sm_90 down to a cubin (nvJitLink); returns the PTX texts."""
    out = []
    for arch in ARCHES:
        ck = kernel.compile(*sig, arch=arch)
        assert len(ck.cubin) > 0
        out.append(ck.ptx)
    return out


def lanes_of(block: int) -> list[tuple[int, int]]:
    """(first thread, lane count) of each warp of a 1-D block."""
    return [(w, min(32, block - w)) for w in range(0, block, 32)]


# -- shuffles with width= ----------------------------------------------------------------


def shuffle_model(kind: str, vals: np.ndarray, args: np.ndarray, width: int, mask: int,
                  block: int) -> np.ndarray:
    """CUDA's `__shfl_*_sync(mask, v, arg, width)` as PTX's segmented `shfl` computes it, with
    oxide's rule that a source outside the warp or the members gives the caller's value."""
    out = vals.copy()
    for first, count in lanes_of(block):
        members = mask & ((1 << count) - 1)
        for lane in range(count):
            arg = int(args[first + lane]) & FULL
            start = lane & ~(width - 1)
            last = start + width - 1
            if kind == "shuffle":
                src, ok = start | (arg & (width - 1)), True
            elif kind == "shuffle_up":
                src = lane - arg
                ok = src >= start
            elif kind == "shuffle_down":
                src = lane + arg
                ok = src <= last
            else:
                src = lane ^ arg
                ok = arg < 32 and src <= last
            ok = ok and 0 <= src < 32 and bool(members >> src & 1)
            out[first + lane] = vals[first + src] if ok else vals[first + lane]
    return out


def make_shuffle(kind: str, width: int, masked: bool) -> Any:
    op = getattr(ox.warp, kind)
    if masked:
        @ox.kernel
        def k(x: Slice[ox.TypeVar("T")], a: Slice[i32], out: RawSlice[ox.TypeVar("T")],
              mask: u32):
            t = ox.thread_idx.x
            r = op(x[t], a[t], mask, width=width)
            with ox.unsafe():
                out[t] = r
    else:
        @ox.kernel
        def k(x: Slice[ox.TypeVar("T")], a: Slice[i32], out: RawSlice[ox.TypeVar("T")]):
            t = ox.thread_idx.x
            r = op(x[t], a[t], width=width)
            with ox.unsafe():
                out[t] = r
    return k


def check_shuffle_width(kind: str, width: int, dtype: Any, block: int, mask: int | None,
                        args: np.ndarray | None = None) -> None:
    np_t = np.dtype(dtype.numpy_name)
    vals = (rng.standard_normal(block) * 100).astype(np_t) if dtype.is_float else \
        rng.integers(-(2 ** 31), 2 ** 31, block).astype(np_t)
    if args is None:
        args = rng.integers(0, 40, block).astype(np.int32)
    out = np.zeros(block, np_t)
    k = make_shuffle(kind, width, mask is not None)
    extra = () if mask is None else (np.uint32(mask),)
    (_, _, got) = launch(k, (1, block), vals, args, out, *extra)
    want = shuffle_model(kind, vals, args, width, FULL if mask is None else mask, block)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("kind", SHUFFLES)
def test_shuffle_width_matches_cuda(kind: str, width: int) -> None:
    check_shuffle_width(kind, width, i32, 64, None)
    check_shuffle_width(kind, width, f32, 64, None,
                        np.full(64, {"shuffle": 5, "shuffle_xor": 3}.get(kind, 1), np.int32))


@pytest.mark.parametrize("kind", SHUFFLES)
def test_shuffle_width_64_bit_masked_partial_warp(kind: str) -> None:
    for dt in (i64, f64, u64):
        check_shuffle_width(kind, 8, dt, 45, None)
        check_shuffle_width(kind, 4, dt, 64, 0x0F0F_F0F0)


def test_shuffle_width_32_is_the_plain_shuffle() -> None:
    """`width=32` (CUDA's default) compiles to the same PTX as no width."""
    @ox.kernel
    def plain(x: Slice[f32], out: RawSlice[f32]):
        t = ox.thread_idx.x
        r = ox.warp.shuffle_down(x[t], 3)
        with ox.unsafe():
            out[t] = r

    @ox.kernel
    def wide(x: Slice[f32], out: RawSlice[f32]):
        t = ox.thread_idx.x
        r = ox.warp.shuffle_down(x[t], 3, width=32)
        with ox.unsafe():
            out[t] = r

    a = plain.compile(Slice[f32], RawSlice[f32], arch="sm_90").ptx
    b = wide.compile(Slice[f32], RawSlice[f32], arch="sm_90").ptx
    def shuffles(ptx: str) -> list[str]:
        return [ln.strip() for ln in ptx.splitlines() if "shfl" in ln]

    assert shuffles(a) == shuffles(b) and ", 3, 31," in shuffles(a)[0]


@pytest.mark.parametrize("width", (2, 8, 16))
def test_shuffle_width_ptx_c_operand(width: int) -> None:
    """The `c` operand is `(32 - width) << 8 | clamp`, clamp 0 for up and 31 otherwise."""
    for kind in SHUFFLES:
        k = make_shuffle(kind, width, False)
        for ptx in assembles(k, Slice[i32], Slice[i32], RawSlice[i32]):
            mode = {"shuffle": "idx", "shuffle_up": "up", "shuffle_down": "down",
                    "shuffle_xor": "bfly"}[kind]
            c = (32 - width) << 8 | (0 if mode == "up" else 31)
            lines = [ln for ln in ptx.splitlines() if f"shfl.sync.{mode}.b32" in ln]
            assert lines and all(f", {c}," in ln for ln in lines), lines


def test_segmented_reduction_with_width() -> None:
    """The classic use: a sum over each group of 8 lanes with shuffle_xor(width=8)."""
    @ox.kernel
    def group_sum(x: Slice[i32], out: RawSlice[i32]):
        t = ox.thread_idx.x
        v = x[t]
        off = 4
        while off > 0:
            v += ox.warp.shuffle_xor(v, off, width=8)
            off //= 2
        with ox.unsafe():
            out[t] = v

    x = rng.integers(-1000, 1000, 128).astype(np.int32)
    out = np.zeros(128, np.int32)
    launch(group_sum, (1, 128), x, out)
    np.testing.assert_array_equal(out, np.repeat(x.reshape(-1, 8).sum(axis=1), 8))
    assembles(group_sum, Slice[i32], RawSlice[i32])


def _compile_error(build: Callable[[], Any], *sig: Any) -> ox.CompileError:
    with pytest.raises(ox.CompileError) as info:
        build().compile(*sig, arch="sm_90")
    return info.value


def _from_source(src: str, name: str, scope: dict[str, Any]) -> Callable[[], Any]:
    """A kernel builder from source text (registered with linecache, as kernels need)."""
    import linecache

    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    exec(compile(src, name, "exec"), scope)  # noqa: S102
    return scope["build"]


@pytest.mark.parametrize("width, what", [("3", "power of two"), ("64", "power of two"),
                                         ("0", "power of two"), ("2.0", "integer"),
                                         ("n", "compile-time")])
def test_shuffle_width_is_validated(width: str, what: str) -> None:
    src = f"""
def build():
    @ox.kernel
    def k(x: Slice[i32], out: RawSlice[i32], n: i32):
        t = ox.thread_idx.x
        r = ox.warp.shuffle(x[t], 1, width={width})
        with ox.unsafe():
            out[t] = r
    return k
"""
    scope: dict[str, Any] = {"ox": ox, "Slice": Slice, "RawSlice": RawSlice, "i32": i32}
    build = _from_source(src, f"<width {width}>", scope)
    err = _compile_error(build, Slice[i32], RawSlice[i32], i32)
    assert isinstance(err, ox.KernelTypeError)
    assert what in str(err) and "1, 2, 4, 8, 16 or 32" in err.hint


def test_shuffle_unknown_keyword_is_named() -> None:
    def build() -> Any:
        @ox.kernel
        def k(x: Slice[i32], out: RawSlice[i32]):
            t = ox.thread_idx.x
            r = ox.warp.shuffle(x[t], 1, widht=8)
            with ox.unsafe():
                out[t] = r
        return k

    err = _compile_error(build, Slice[i32], RawSlice[i32])
    assert isinstance(err, ox.KernelSyntaxError) and "widht" in str(err)


def test_width_on_a_non_shuffle_is_refused() -> None:
    def build() -> Any:
        @ox.kernel
        def k(x: Slice[i32], out: RawSlice[i32]):
            t = ox.thread_idx.x
            r = ox.warp.reduce_add(x[t], width=8)
            with ox.unsafe():
                out[t] = r
        return k

    err = _compile_error(build, Slice[i32], RawSlice[i32])
    assert isinstance(err, ox.KernelSyntaxError)


def test_shuffle_from_lane_0_with_width_is_not_warp_uniform() -> None:
    """A full-mask shuffle from lane 0 is warp-uniform; with width=8 it reads lane 0 of each
    group of 8, so a full-warp collective under a condition on it is refused."""
    def build() -> Any:
        @ox.kernel
        def k(x: Slice[i32], out: RawSlice[i32]):
            t = ox.thread_idx.x
            if ox.warp.shuffle(x[t], 0, width=8) > 0:
                ox.sync_warp()
        return k

    err = _compile_error(build, Slice[i32], RawSlice[i32])
    assert isinstance(err, ox.SafetyError)

    @ox.kernel
    def fine(x: Slice[i32], out: RawSlice[i32]):
        t = ox.thread_idx.x
        if ox.warp.shuffle(x[t], 0) > 0:
            ox.sync_warp()

    fine.compile(Slice[i32], RawSlice[i32], arch="sm_90")


# -- lanemasks ---------------------------------------------------------------------------

LANEMASKS = {
    "lt": lambda lane: (1 << lane) - 1,
    "le": lambda lane: (2 << lane) - 1,
    "eq": lambda lane: 1 << lane,
    "gt": lambda lane: FULL & ~((2 << lane) - 1),
    "ge": lambda lane: FULL & ~((1 << lane) - 1),
}


@ox.kernel
def lanemasks(out: RawSlice[u32, 2]):
    t = (ox.thread_idx.z * ox.block_dim.y + ox.thread_idx.y) * ox.block_dim.x + ox.thread_idx.x
    with ox.unsafe():
        out[t, 0] = ox.warp.lanemask_lt()
        out[t, 1] = ox.warp.lanemask_le()
        out[t, 2] = ox.warp.lanemask_eq()
        out[t, 3] = ox.warp.lanemask_gt()
        out[t, 4] = ox.warp.lanemask_ge()


def check_lanemasks(block: tuple[int, ...]) -> None:
    n = int(np.prod(block))
    out = np.zeros((n, 5), np.uint32)
    (got,) = launch(lanemasks, (1, block), out)
    want = np.array([[LANEMASKS[w](t % 32) for w in LANEMASKS] for t in range(n)], np.uint32)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("block", [(64,), (45,), (8, 4, 3)])
def test_lanemasks_match_ptx_registers(block: tuple[int, ...]) -> None:
    check_lanemasks(block)


def test_lanemasks_read_ptx_special_registers() -> None:
    for ptx in assembles(lanemasks, RawSlice[u32, 2]):
        for w in LANEMASKS:
            assert f"%lanemask_{w}" in ptx


def test_lanemask_is_lane_varying() -> None:
    def build() -> Any:
        @ox.kernel
        def k(out: RawSlice[u32]):
            if ox.warp.lanemask_lt() == 0:
                ox.sync_warp()
        return k

    err = _compile_error(build, RawSlice[u32])
    assert isinstance(err, ox.SafetyError) and "lanemask_lt" in err.label


# -- activemask --------------------------------------------------------------------------


@ox.kernel
def active_in_branch(x: Slice[i32], out: RawSlice[u32], mod: i32):
    t = ox.thread_idx.y * ox.block_dim.x + ox.thread_idx.x
    m = u32(0)
    if x[t] % mod == 0:
        m = ox.warp.activemask()
    else:
        m = ox.warp.activemask()
    with ox.unsafe():
        out[t] = m


def activemask_model(pred: np.ndarray, block: int) -> np.ndarray:
    want = np.zeros(block, np.uint32)
    for first, count in lanes_of(block):
        p = pred[first:first + count]
        yes = sum(1 << lane for lane in range(count) if p[lane])
        no = sum(1 << lane for lane in range(count) if not p[lane])
        for lane in range(count):
            want[first + lane] = yes if p[lane] else no
    return want


def check_activemask(shape: int | tuple[int, int], mod: int, exact: bool) -> None:
    """Each branch's lanes see themselves; on the CPU (exact) exactly the lanes of their
    branch. A GPU may split a branch's lanes further, so there: own bit set, and a subset."""
    block = int(np.prod(shape))
    x = rng.integers(0, 1000, block).astype(np.int32)
    out = np.zeros(block, np.uint32)
    (_, got) = launch(active_in_branch, (1, shape), x, out, np.int32(mod))
    want = activemask_model(x % mod == 0, block)
    if exact:
        np.testing.assert_array_equal(got, want)
    for t in range(block):
        assert got[t] >> (t % 32) & 1
        assert got[t] & ~want[t] == 0


@pytest.mark.parametrize("block, mod", [(64, 3), (45, 2), (96, 1), (33, 5), ((8, 9), 4)])
def test_activemask_is_the_lanes_that_arrive_together(block: Any, mod: int) -> None:
    check_activemask(block, mod, exact=True)


def test_activemask_whole_warp_and_in_loops() -> None:
    """Every lane together gives the existing lanes; lanes leaving a loop at different
    trips are not counted by the lanes still in it."""
    @ox.kernel
    def loops(trips: Slice[i32], out: RawSlice[u32, 2]):
        t = ox.thread_idx.x
        with ox.unsafe():
            out[t, 0] = ox.warp.activemask()
        k = 0
        while k < trips[t]:
            k += 1
            a = ox.warp.activemask()
            with ox.unsafe():
                out[t, k] = a

    block = 40
    trips = rng.integers(0, 6, block).astype(np.int32)
    out = np.zeros((block, 7), np.uint32)
    launch(loops, (1, block), trips, out)
    for first, count in lanes_of(block):
        assert all(out[first + lane, 0] == (1 << count) - 1 for lane in range(count))
        for k in range(1, 7):
            in_loop = sum(1 << lane for lane in range(count) if trips[first + lane] >= k)
            for lane in range(count):
                want = in_loop if trips[first + lane] >= k else 0
                assert out[first + lane, k] == want, (first + lane, k)
    for ptx in assembles(loops, Slice[i32], RawSlice[u32, 2]):
        assert "activemask.b32" in ptx


def test_activemask_needs_no_uniform_control_flow() -> None:
    for ptx in assembles(active_in_branch, Slice[i32], RawSlice[u32], i32):
        assert ptx.count("activemask.b32") == 2


# -- match_all ---------------------------------------------------------------------------


def make_match_all(masked: bool) -> Any:
    if masked:
        @ox.kernel
        def k(x: Slice[ox.TypeVar("T")], out: RawSlice[u32], pred: RawSlice[i32], mask: u32):
            t = ox.thread_idx.x
            if (mask >> u32(ox.lane_id())) & u32(1) != u32(0):
                m, p = ox.warp.match_all(x[t], mask)
                with ox.unsafe():
                    out[t] = m
                    pred[t] = i32(p)
    else:
        @ox.kernel
        def k(x: Slice[ox.TypeVar("T")], out: RawSlice[u32], pred: RawSlice[i32]):
            t = ox.thread_idx.x
            m, p = ox.warp.match_all(x[t])
            with ox.unsafe():
                out[t] = m
                pred[t] = i32(p)
    return k


def check_match_all(dtype: Any, block: int, mask: int | None) -> None:
    """Warps whose members all hold one value get (members, True), the others (0, False)."""
    np_t = np.dtype(dtype.numpy_name)
    x = np.zeros(block, np_t)
    for w, (first, count) in enumerate(lanes_of(block)):
        x[first:first + count] = w + 1
        if w % 2:  # odd warps: one member differs
            m = FULL if mask is None else mask
            lane = [lane for lane in range(count) if m >> lane & 1][-1]
            x[first + lane] = -7 if dtype.is_signed or dtype.is_float else 99
    if dtype.is_float:  # floats compare by bits: 0.0 and -0.0 differ
        x[0] = 0.0
        x[1:min(32, block)] = 0.0
    out = np.full(block, 12345, np.uint32)
    pred = np.full(block, -1, np.int32)
    extra = () if mask is None else (np.uint32(mask),)
    _, out, pred = launch(make_match_all(mask is not None), (1, block), x, out, pred, *extra)
    for first, count in lanes_of(block):
        members = (FULL if mask is None else mask) & ((1 << count) - 1)
        vals = {x[first + lane].tobytes() for lane in range(count) if members >> lane & 1}
        agree = len(vals) == 1
        for lane in range(count):
            if not members >> lane & 1:
                assert out[first + lane] == 12345
                continue
            assert out[first + lane] == (members if agree else 0)
            assert pred[first + lane] == int(agree)


@pytest.mark.parametrize("dtype", [i32, u32, i64, u64, f32, f64], ids=lambda d: d.name)
def test_match_all_matches_cuda(dtype: Any) -> None:
    check_match_all(dtype, 96, None)
    check_match_all(dtype, 70, None)
    check_match_all(dtype, 64, 0x00FF_FF00)


def test_match_all_negative_zero_differs_by_bits() -> None:
    x = np.zeros(32, np.float32)
    x[5] = -0.0
    out = np.zeros(32, np.uint32)
    pred = np.zeros(32, np.int32)
    launch(make_match_all(False), (1, 32), x, out, pred)
    assert (out == 0).all() and (pred == 0).all()


def test_match_all_assembles_to_match_all_sync() -> None:
    for masked in (False, True):
        k = make_match_all(masked)
        sig = (Slice[i32], RawSlice[u32], RawSlice[i32]) + ((u32,) if masked else ())
        for ptx in assembles(k, *sig):
            assert "match.all.sync.b32" in ptx
        sig = (Slice[f64], RawSlice[u32], RawSlice[i32]) + ((u32,) if masked else ())
        for ptx in assembles(k, *sig):
            assert "match.all.sync.b64" in ptx


def test_full_mask_match_all_needs_the_whole_warp() -> None:
    def build() -> Any:
        @ox.kernel
        def k(x: Slice[i32], out: RawSlice[u32]):
            t = ox.thread_idx.x
            if ox.lane_id() < 16:
                m, p = ox.warp.match_all(x[t])
        return k

    err = _compile_error(build, Slice[i32], RawSlice[u32])
    assert isinstance(err, ox.SafetyError) and "match_all" in str(err)


def test_match_all_result_is_warp_uniform() -> None:
    """Every lane gets the same (mask, pred), so a full-warp collective may depend on it."""
    @ox.kernel
    def k(x: Slice[i32], out: RawSlice[i32]):
        t = ox.thread_idx.x
        m, p = ox.warp.match_all(x[t])
        if p:
            s = ox.warp.reduce_add(x[t])
            with ox.unsafe():
                out[t] = s

    x = np.repeat(np.array([3, 4], np.int32), 32)
    x[40] = 0
    out = np.zeros(64, np.int32)
    launch(k, (1, 64), x, out)
    np.testing.assert_array_equal(out, np.r_[np.full(32, 96), np.zeros(32)])


def test_match_all_returns_a_pair() -> None:
    def build() -> Any:
        @ox.kernel
        def k(x: Slice[i32], out: RawSlice[u32]):
            t = ox.thread_idx.x
            m = ox.warp.match_all(x[t])
            with ox.unsafe():
                out[t] = m
        return k

    err = _compile_error(build, Slice[i32], RawSlice[u32])
    assert isinstance(err, ox.KernelTypeError)


# -- sync_warp(mask) ---------------------------------------------------------------------


@ox.kernel
def half_warp_exchange(x: Slice[i32], out: RawSlice[i32]):
    """Each half warp writes shared memory, syncs only its own lanes and reads a neighbour's
    slot: `__syncwarp(0x0000FFFF)` / `__syncwarp(0xFFFF0000)` in divergent branches."""
    buf = ox.shared.array(i32, 64)
    t = ox.thread_idx.x
    lane = ox.lane_id()
    with ox.unsafe():
        if lane < 16:
            buf[t] = x[t] * 2
            ox.sync_warp(0x0000FFFF)
            out[t] = buf[t ^ 1] + buf[t ^ 15]
        else:
            buf[t] = x[t] * 3
            ox.sync_warp(u32(0xFFFF0000))
            out[t] = buf[t ^ 1] + buf[t ^ 15]


def check_sync_warp_mask() -> None:
    x = rng.integers(-1000, 1000, 64).astype(np.int32)
    out = np.zeros(64, np.int32)
    _, out = launch(half_warp_exchange, (1, 64), x, out)
    lane = np.arange(64) % 32
    scaled = np.where(lane < 16, x * 2, x * 3)
    t = np.arange(64)
    np.testing.assert_array_equal(out, scaled[t ^ 1] + scaled[t ^ 15])


def test_sync_warp_with_a_mask_orders_the_members() -> None:
    check_sync_warp_mask()


def test_sync_warp_mask_assembles_to_bar_warp_sync() -> None:
    for ptx in assembles(half_warp_exchange, Slice[i32], RawSlice[i32]):
        assert ptx.count("bar.warp.sync") == 2


def test_sync_warp_full_mask_is_the_checked_barrier() -> None:
    """`ox.sync_warp(0xFFFFFFFF)` is `ox.sync_warp()`: under a lane condition, refused."""
    def build() -> Any:
        @ox.kernel
        def k(out: RawSlice[i32]):
            if ox.lane_id() < 3:
                ox.sync_warp(0xFFFFFFFF)
        return k

    err = _compile_error(build, RawSlice[i32])
    assert isinstance(err, ox.SafetyError) and "ox.sync_warp" in str(err)

    @ox.kernel
    def run_time(out: RawSlice[i32], m: u32):
        if ox.lane_id() < 3:
            ox.sync_warp(m)  # the user names the lanes: not checked

    run_time.compile(RawSlice[i32], u32, arch="sm_90")


@pytest.mark.parametrize("mask, error, what", [
    ("0", ox.SafetyError, "names no lane"),
    ("1.0", ox.KernelTypeError, "must be an integer"),
    ("True", ox.KernelTypeError, "must be an integer"),
    ("big", ox.KernelTypeError, "u32"),
    ("1, 2", ox.KernelSyntaxError, "0 to 1"),
])
def test_sync_warp_mask_is_validated(mask: str, error: type, what: str) -> None:
    src = f"""
def build():
    @ox.kernel
    def k(out: RawSlice[i32], big: u64):
        ox.sync_warp({mask})
    return k
"""
    scope: dict[str, Any] = {"ox": ox, "RawSlice": RawSlice, "i32": i32, "u64": u64}
    build = _from_source(src, f"<mask {mask}>", scope)
    err = _compile_error(build, RawSlice[i32], u64)
    assert isinstance(err, error) and what in str(err), str(err)
    assert "ox.sync_warp()" in str(err)


def test_sync_warp_keeps_its_name() -> None:
    assert ox.sync_warp.__name__ == "sync_warp"
    with pytest.raises(RuntimeError, match="only works inside"):
        ox.sync_warp()


# -- warp-aggregated atomics (cuda-samples' warpAggregatedAtomicsCG, our own version) -----


@ox.kernel
def filter_aggregated(x: Slice[i32], out: RawSlice[i32], count: AtomicSlice[u32]):
    """Stream compaction of the positive values: the lanes that take the branch together
    elect a leader (their lowest lane), which reserves room for all of them with one
    atomic; each lane's slot is the leader's base plus its rank among them."""
    i = ox.thread.index_1d()
    if i < len(x):
        v = x[i]
        if v > 0:
            active = ox.warp.activemask()
            leader = ox.ffs(active) - 1
            rank = ox.popc(active & ox.warp.lanemask_lt())
            base = u32(0)
            if rank == 0:
                base = ox.atomic.add(count, 0, u32(ox.popc(active)))
            base = ox.warp.shuffle(base, leader, active)
            with ox.unsafe():
                out[base + u32(rank)] = v


@ox.kernel
def histogram_aggregated(keys: Slice[i32], hist: AtomicSlice[u32], slot: RawSlice[u32]):
    """A per-key counter: the lanes holding the same key (`match_any`) elect one leader,
    which adds their number with one atomic and shares the old count, so each lane also
    gets a distinct slot among its key's lanes (CG's labeled_partition + thread_rank)."""
    i = ox.thread.index_1d()
    if i < len(keys):
        k = keys[i]
        active = ox.warp.activemask()
        peers = ox.warp.match_any(k, active)
        leader = ox.ffs(peers) - 1
        rank = ox.popc(peers & ox.warp.lanemask_lt())
        old = u32(0)
        if rank == 0:
            old = ox.atomic.add(hist, k, u32(ox.popc(peers)))
        old = ox.warp.shuffle(old, leader, peers)
        with ox.unsafe():
            slot[i] = old + u32(rank)


def check_warp_aggregated_atomics(n: int, block: int) -> None:
    x = rng.integers(-50, 50, n).astype(np.int32)
    out = np.zeros(n, np.int32)
    count = np.zeros(1, np.uint32)
    grid = -(-n // block)
    (_, got, c) = launch(filter_aggregated, (grid, block), x, out, count)
    positive = x[x > 0]
    assert c[0] == positive.size
    np.testing.assert_array_equal(np.sort(got[:positive.size]), np.sort(positive))
    assert (got[positive.size:] == 0).all()

    keys = rng.integers(0, 9, n).astype(np.int32)
    hist = np.zeros(9, np.uint32)
    slot = np.zeros(n, np.uint32)
    (_, h, s) = launch(histogram_aggregated, (grid, block), keys, hist, slot)
    np.testing.assert_array_equal(h, np.bincount(keys, minlength=9))
    for key in range(9):  # each key's lanes got the slots 0..count-1, once each
        np.testing.assert_array_equal(np.sort(s[keys == key]), np.arange(h[key]))


@pytest.mark.parametrize("n, block", [(1000, 128), (4099, 96), (77, 45)])
def test_warp_aggregated_atomics_match_numpy(n: int, block: int) -> None:
    check_warp_aggregated_atomics(n, block)


def test_warp_aggregated_atomics_assemble() -> None:
    for ptx in assembles(filter_aggregated, Slice[i32], RawSlice[i32], AtomicSlice[u32]):
        assert "activemask.b32" in ptx and "%lanemask_lt" in ptx
    for ptx in assembles(histogram_aggregated, Slice[i32], AtomicSlice[u32], RawSlice[u32]):
        assert "match.any.sync" in ptx
