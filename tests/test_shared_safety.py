"""Issue 13: the shared-memory kernels oxide must prove race-free, with no `unsafe` at
all, run on the CPU against NumPy; and what its refusals say.

Each kernel declares its block shape (`@ox.kernel(block=...)`), so passes/shared_races.py
proves every phase (the code between two `ox.sync_threads()`) race-free for that shape,
and DisjointSlice writes at index maps one-thread-per-element over the launch. The
kernels live at module level: tests/test_gpu_shared_safety.py runs the same ones on a GPU.
The racy kernels the proof must refuse are the `shared_races` theme of tests/corpus/;
here are the exact parts of the messages (both places, the cell, two threads that really
collide there, the label and the hint), the launch rules, `thread.in_block()`, the
`ox.unsafe()` escape hatch, and cases found while writing these tests.
"""

from __future__ import annotations

import inspect
import re
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import oxide as ox
from oxide import AtomicSlice, DisjointSlice, RawSlice, Slice, f32, i32, thread, u32
from oxide.passes import shared_races

B = 256  # the 1-D block of the must-prove kernels
TILE, ROWS = 32, 8  # the transpose's tile and its block (TILE x ROWS threads)
T = 16  # the SGEMM tile (a T x T block)
R = 3  # the stencil's radius
NB = 64  # histogram bins

# ------------------------------------------------------------------ the must-prove kernels


@ox.kernel(block=(TILE, ROWS))
def transpose(a: Slice[f32, 2], out: DisjointSlice[f32, 2]):
    """The 32x33 padded tile: rows of `a` in, columns out; no `unsafe` at all."""
    tile = ox.shared.array(f32, (TILE, TILE + 1))
    rows = i32(a.shape[0])
    cols = i32(a.shape[1])
    tx = ox.thread_idx.x
    ty = ox.thread_idx.y
    x = ox.block_idx.x * TILE + tx
    y = ox.block_idx.y * TILE + ty
    for k in range(TILE // ROWS):
        inside = y + k * ROWS < rows and x < cols
        tile[ty + k * ROWS, tx] = a[y + k * ROWS, x] if inside else f32(0)
    ox.sync_threads()
    x_out = ox.block_idx.y * TILE + tx
    y_out = ox.block_idx.x * TILE + ty
    for k in range(TILE // ROWS):
        if y_out + k * ROWS < cols and x_out < rows:
            out[y_out + k * ROWS, x_out] = tile[tx, ty + k * ROWS]


@ox.kernel(block=B)
def block_sums(x: Slice[f32], out: DisjointSlice[f32]):
    """A tree reduction in shared memory, one result per block (thread 0 writes it)."""
    sh = ox.shared.array(f32, B)
    t = thread.in_block()
    i = ox.block_idx.x * B + t
    sh[t] = x[i] if i < len(x) else f32(0)
    ox.sync_threads()
    s = B // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        ox.sync_threads()
        s //= 2
    if t == 0:
        out[ox.block_idx.x] = sh[0]


@ox.kernel(block=B)
def hillis_steele(x: Slice[i32], out: DisjointSlice[i32]):
    """Inclusive scan of each block's B elements: read, barrier, add, barrier."""
    sh = ox.shared.array(i32, B)
    t = thread.in_block()
    i = ox.block_idx.x * B + t
    sh[t] = x[i] if i < len(x) else 0
    ox.sync_threads()
    offset = 1
    while offset < B:
        v = 0
        if t >= offset:
            v = sh[t - offset]
        ox.sync_threads()
        sh[t] += v
        ox.sync_threads()
        offset *= 2
    if i < len(x):
        out[i] = sh[t]


@ox.kernel(block=B)
def blelloch(x: Slice[i32], out: DisjointSlice[i32]):
    """Exclusive scan of each block's 2B elements: up-sweep, clear the root, down-sweep."""
    N = 2 * B
    sh = ox.shared.array(i32, 2 * B)
    t = thread.in_block()
    base = ox.block_idx.x * N
    for h in range(2):
        j = base + t + h * B
        sh[t + h * B] = x[j] if j < len(x) else 0
    offset = 1
    d = N // 2
    while d > 0:
        ox.sync_threads()
        if t < d:
            ai = offset * (2 * t + 1) - 1
            bi = offset * (2 * t + 2) - 1
            sh[bi] += sh[ai]
        offset *= 2
        d //= 2
    if t == 0:
        sh[N - 1] = 0
    d = 1
    while d < N:
        offset //= 2
        ox.sync_threads()
        if t < d:
            ai = offset * (2 * t + 1) - 1
            bi = offset * (2 * t + 2) - 1
            v = sh[ai]
            sh[ai] = sh[bi]
            sh[bi] += v
        d *= 2
    ox.sync_threads()
    for h in range(2):
        j = base + t + h * B
        if j < len(x):
            out[j] = sh[t + h * B]


@ox.kernel(block=(T, T))
def sgemm(a: Slice[f32, 2], b: Slice[f32, 2], c: DisjointSlice[f32, 2]):
    """C = A @ B through shared T x T tiles of A and B; `c[row, col]` needs no `unsafe`."""
    As = ox.shared.array(f32, (T, T))
    Bs = ox.shared.array(f32, (T, T))
    tx = ox.thread_idx.x
    ty = ox.thread_idx.y
    row = ox.block_idx.y * T + ty
    col = ox.block_idx.x * T + tx
    n = i32(a.shape[0])
    k = i32(a.shape[1])
    m = i32(b.shape[1])
    acc = f32(0)
    for k0 in range(0, k, T):
        As[ty, tx] = a[row, k0 + tx] if row < n and k0 + tx < k else f32(0)
        Bs[ty, tx] = b[k0 + ty, col] if k0 + ty < k and col < m else f32(0)
        ox.sync_threads()
        for kk in range(T):
            acc += As[ty, kk] * Bs[kk, tx]
        ox.sync_threads()
    if row < n and col < m:
        c[row, col] = acc


@ox.kernel(block=B)
def stencil(x: Slice[f32], out: DisjointSlice[f32]):
    """out[g] = x[g - R] + ... + x[g + R] (zero outside x), the halo loaded by R threads."""
    sh = ox.shared.array(f32, B + 2 * R)
    t = thread.in_block()
    g = ox.block_idx.x * B + t
    n = i32(len(x))
    sh[t + R] = x[g] if g < n else f32(0)
    if t < R:
        sh[t] = x[g - R] if g - R >= 0 and g - R < n else f32(0)
        sh[t + B + R] = x[g + B] if g + B < n else f32(0)
    ox.sync_threads()
    acc = f32(0)
    for j in range(2 * R + 1):
        acc += sh[t + j]
    if g < n:
        out[g] = acc


@ox.kernel(block=B)
def histogram(x: Slice[u32], counts: AtomicSlice[u32]):
    """Per-block bins through shared atomics, then one global atomic per bin."""
    sh = ox.shared.array(u32, NB)
    t = thread.in_block()
    if t < NB:
        sh[t] = u32(0)
    ox.sync_threads()
    i = ox.block_idx.x * B + t
    while i < len(x):
        ox.atomic.add(sh, i32(x[i] % u32(NB)), u32(1))
        i += ox.grid_dim.x * B
    ox.sync_threads()
    if t < NB:
        ox.atomic.add(counts, t, sh[t])


@ox.kernel(block=B)
def softmax(x: Slice[f32, 2], out: DisjointSlice[f32, 2]):
    """One block per row: the block max and the block sum go through shared arrays; the
    output is written strided by B in a loop of run-time length (`out[r, j]`, j = t, t + B,
    ...), an index map proved one-thread-per-element too: no `unsafe` at all."""
    sh = ox.shared.array(f32, B)
    t = thread.in_block()
    r = ox.block_idx.x
    ncols = i32(x.shape[1])
    m = f32(-3.0e38)
    j = t
    while j < ncols:
        m = max(m, x[r, j])
        j += B
    sh[t] = m
    ox.sync_threads()
    s = B // 2
    while s > 0:
        if t < s:
            sh[t] = max(sh[t], sh[t + s])
        ox.sync_threads()
        s //= 2
    mx = sh[0]
    ox.sync_threads()
    acc = f32(0)
    j = t
    while j < ncols:
        acc += ox.math.exp(x[r, j] - mx)
        j += B
    sh[t] = acc
    ox.sync_threads()
    s = B // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        ox.sync_threads()
        s //= 2
    total = sh[0]
    for j in range(t, ncols, B):
        out[r, j] = ox.math.exp(x[r, j] - mx) / total


# The signature each kernel is compiled with, for the proof-time check and the PTX builds.
SIGNATURES: dict[str, tuple[Any, ...]] = {
    "transpose": (Slice[f32, 2], DisjointSlice[f32, 2]),
    "block_sums": (Slice[f32], DisjointSlice[f32]),
    "hillis_steele": (Slice[i32], DisjointSlice[i32]),
    "blelloch": (Slice[i32], DisjointSlice[i32]),
    "sgemm": (Slice[f32, 2], Slice[f32, 2], DisjointSlice[f32, 2]),
    "stencil": (Slice[f32], DisjointSlice[f32]),
    "histogram": (Slice[u32], AtomicSlice[u32]),
    "softmax": (Slice[f32, 2], DisjointSlice[f32, 2]),
}
MUST_PROVE = {name: globals()[name] for name in SIGNATURES}

# ------------------------------------------------------------------ launches and references
# Each `run_*` launches on the current device and returns (got, want); the GPU tests call
# them under `ox.device(0)`.

RNG = np.random.default_rng(13)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def run_transpose(rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    a = RNG.standard_normal((rows, cols)).astype(np.float32)
    out = np.full((cols, rows), np.nan, np.float32)
    transpose[ox.LaunchConfig(grid=(cdiv(cols, TILE), cdiv(rows, TILE)),
                              block=(TILE, ROWS))](a, out)
    return out, a.T


def run_block_sums(n: int) -> tuple[np.ndarray, np.ndarray]:
    x = RNG.standard_normal(n).astype(np.float32)
    blocks = cdiv(n, B)
    out = np.full(blocks, np.nan, np.float32)
    block_sums[blocks, B](x, out)
    return out, np.array([x[i:i + B].sum(dtype=np.float64) for i in range(0, n, B)])


def run_hillis_steele(n: int) -> tuple[np.ndarray, np.ndarray]:
    x = RNG.integers(-100, 100, n).astype(np.int32)
    out = np.zeros(n, np.int32)
    hillis_steele[cdiv(n, B), B](x, out)
    return out, np.concatenate([np.cumsum(x[i:i + B]) for i in range(0, n, B)])


def run_blelloch(n: int) -> tuple[np.ndarray, np.ndarray]:
    x = RNG.integers(-100, 100, n).astype(np.int32)
    out = np.full(n, -1, np.int32)
    blelloch[cdiv(n, 2 * B), B](x, out)
    want = np.concatenate([np.cumsum(x[i:i + 2 * B]) - x[i:i + 2 * B]
                           for i in range(0, n, 2 * B)])
    return out, want


def run_sgemm(n: int, k: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    a = RNG.standard_normal((n, k)).astype(np.float32)
    b = RNG.standard_normal((k, m)).astype(np.float32)
    c = np.full((n, m), np.nan, np.float32)
    sgemm[ox.LaunchConfig(grid=(cdiv(m, T), cdiv(n, T)), block=(T, T))](a, b, c)
    return c, a.astype(np.float64) @ b.astype(np.float64)


def run_stencil(n: int) -> tuple[np.ndarray, np.ndarray]:
    x = RNG.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    stencil[cdiv(n, B), B](x, out)
    padded = np.pad(x.astype(np.float64), R)
    return out, sum(padded[j:j + n] for j in range(2 * R + 1))


def run_histogram(n: int, blocks: int) -> tuple[np.ndarray, np.ndarray]:
    x = RNG.integers(0, 1 << 20, n).astype(np.uint32)
    counts = np.zeros(NB, np.uint32)
    histogram[blocks, B](x, counts)
    return counts, np.bincount(x % NB, minlength=NB).astype(np.uint32)


def run_softmax(rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    x = (RNG.standard_normal((rows, cols)) * 4).astype(np.float32)
    out = np.full((rows, cols), np.nan, np.float32)
    softmax[rows, B](x, out)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return out, e / e.sum(axis=1, keepdims=True)


# (runner, sizes, tolerance: None for exact): ragged sizes, one block, several blocks
CASES: dict[str, tuple[Callable[..., tuple[np.ndarray, np.ndarray]], list[tuple[int, ...]],
                       float | None]] = {
    "transpose": (run_transpose, [(1, 1), (32, 32), (70, 45), (33, 100), (128, 64)], None),
    "block_sums": (run_block_sums, [(1,), (255,), (256,), (1000,), (4097,)], 1e-4),
    "hillis_steele": (run_hillis_steele, [(1,), (256,), (1000,), (3000,)], None),
    "blelloch": (run_blelloch, [(1,), (512,), (1500,), (4097,)], None),
    "sgemm": (run_sgemm, [(1, 1, 1), (16, 16, 16), (37, 45, 29), (64, 33, 70)], 1e-4),
    "stencil": (run_stencil, [(1,), (3,), (256,), (1000,), (2500,)], 1e-5),
    "histogram": (run_histogram, [(1, 1), (300, 1), (5000, 8), (70000, 3)], None),
    "softmax": (run_softmax, [(1, 1), (3, 256), (2, 257), (5, 1000)], 1e-5),
}
RUNS = [pytest.param(name, size, id=f"{name}-{'x'.join(map(str, size))}")
        for name, (_, sizes, _) in CASES.items() for size in sizes]


def check_run(name: str, size: tuple[int, ...]) -> None:
    runner, _, tol = CASES[name]
    got, want = runner(*size)
    if tol is None:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize(("name", "size"), RUNS)
def test_must_prove_kernel_runs_on_the_cpu(name: str, size: tuple[int, ...]) -> None:
    with ox.device("cpu"):
        check_run(name, size)


@pytest.mark.parametrize("name", list(MUST_PROVE))
def test_must_prove_kernels_have_no_unsafe(name: str) -> None:
    """Not one `unsafe` in these kernels: shared tiles, the DisjointSlice outputs at their
    index maps (transpose, SGEMM, the block result, the softmax's strided row) are all
    proved; the block shape they are proved for is declared."""
    kernel = MUST_PROVE[name]
    assert kernel.options.block is not None
    assert "ox.unsafe(" not in inspect.getsource(kernel.fn)
    assert "ox.shared.array(" in inspect.getsource(kernel.fn)


@pytest.mark.parametrize("name", list(MUST_PROVE))
def test_proof_is_quick_and_the_ptx_builds(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh compile (no disk cache) for sm_80 and sm_90 runs the proof and builds a
    cubin; the proof itself takes well under a second on the CPU that runs the tests."""
    monkeypatch.setenv("OXIDE_CACHE", "0")
    times: list[float] = []
    real = shared_races.check_shared_races

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            times.append(time.perf_counter() - start)

    monkeypatch.setattr(shared_races, "check_shared_races", timed)
    kernel = MUST_PROVE[name]
    for arch in ("sm_80", "sm_90"):
        fresh = ox.kernel(block=kernel.options.block)(kernel.fn)
        ck = fresh.compile(*SIGNATURES[name], arch=arch)
        assert "bar.sync" in ck.ptx or "barrier.sync" in ck.ptx
        assert len(ck.cubin) > 0
    assert len(times) == 2, "the proof ran once per compile"
    assert max(times) < 5.0, f"the proof of {name} took {max(times):.2f} s"


# ------------------------------------------------------------------ what a refusal says


def line_of(kernel: Any, marker: str) -> tuple[int, str]:
    """The file line (1-based) of the kernel's source line ending in `# marker`, and its text."""
    src, first = inspect.getsourcelines(kernel.fn)
    hits = [(first + n, text) for n, text in enumerate(src) if text.rstrip().endswith(marker)]
    assert len(hits) == 1, marker
    return hits[0]


def at(kernel: Any, marker: str, code: str) -> str:
    """`file:line:col` of `code` on the line marked `marker` (columns 1-based)."""
    line, text = line_of(kernel, marker)
    return f"{inspect.getsourcefile(kernel.fn)}:{line}:{text.index(code) + 1}"


def refusal(kernel: Any, *sig: Any) -> ox.SafetyError:
    with pytest.raises(ox.SafetyError) as info:
        kernel.compile(*sig, arch="sm_90")
    return info.value


# A race message names one colliding pair of the prover's choosing: the tests read the
# threads, the cell and the places back from it and check that the pair really collides.
THREAD = r"thread (\d+|\(x=\d+, y=\d+\))"
VERB = r"(reads|writes|updates \(atomically\))"
READ_WRITE = re.compile(
    rf"data race on shared array `(?P<array>\w+)`: (?P<second>{THREAD}) (?P<verb2>{VERB}) "
    rf"`(?P=array)\[(?P<cell>[\d, ]+)\]` at (?P<at2>\S+) while (?P<first>{THREAD}) "
    rf"(?P<verb1>{VERB}) it at (?P<at1>\S+), in the same phase")
WRITE_WRITE = re.compile(
    rf"data race on shared array `(?P<array>\w+)`: (?P<first>{THREAD}) and "
    rf"(?P<second>{THREAD}) both write `(?P=array)\[(?P<cell>[\d, ]+)\]` in the same "
    r"phase \(at (?P<at1>\S+?)( and (?P<at2>\S+))?\)")


def thread_of(text: str) -> tuple[int, ...]:
    """`thread 5` -> (5,); `thread (x=1, y=0)` -> (1, 0)."""
    return tuple(int(v) for v in re.findall(r"\d+", text))


def cell_of(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(","))


def test_race_names_both_accesses_the_cell_two_threads_and_the_fix() -> None:
    @ox.kernel(block=128)
    def neighbour(x: Slice[f32], out: RawSlice[f32]):
        sh = ox.shared.array(f32, 128)
        t = thread.in_block()
        sh[t] = x[t]  # write
        v = sh[(t + 1) % 128]  # read
        with ox.unsafe():
            out[t] = v

    e = refusal(neighbour, Slice[f32], RawSlice[f32])
    m = READ_WRITE.fullmatch(e.message)
    assert m, e.message
    (reader,), (writer,), (cell,) = (thread_of(m["second"]), thread_of(m["first"]),
                                     cell_of(m["cell"]))
    assert m["array"] == "sh" and m["verb2"] == "reads" and m["verb1"] == "writes"
    assert (reader + 1) % 128 == cell == writer != reader  # a pair that really collides
    assert m["at2"] == at(neighbour, "# read", "sh[(t")
    assert m["at1"] == at(neighbour, "# write", "sh[t]")
    assert e.span is not None and e.span.line == line_of(neighbour, "# read")[0]
    assert e.label == f"races with line {line_of(neighbour, '# write')[0]}"
    assert e.hint == ("add `ox.sync_threads()` between them, reached by every thread of the "
                      "block")
    rendered = str(e)  # the message, then the source line with its caret and label
    assert "v = sh[(t + 1) % 128]" in rendered and "races with line" in rendered


def test_race_in_a_2d_block_names_threads_by_x_and_y() -> None:
    @ox.kernel(block=(8, 8))
    def swapped(a: Slice[f32, 2], out: RawSlice[f32, 2]):
        tile = ox.shared.array(f32, (8, 8))
        tx = ox.thread_idx.x
        ty = ox.thread_idx.y
        tile[ty, tx] = a[ty, tx]  # write
        v = tile[tx, ty]  # read
        with ox.unsafe():
            out[ty, tx] = v

    e = refusal(swapped, Slice[f32, 2], RawSlice[f32, 2])
    m = READ_WRITE.fullmatch(e.message)
    assert m, e.message
    assert m["second"].startswith("thread (x=") and m["first"].startswith("thread (x=")
    (rx, ry), (wx, wy), cell = thread_of(m["second"]), thread_of(m["first"]), cell_of(m["cell"])
    assert cell == (rx, ry) == (wy, wx) and (rx, ry) != (wx, wy)
    assert m["at2"] == at(swapped, "# read", "tile[tx")
    assert m["at1"] == at(swapped, "# write", "tile[ty")


def test_two_writers_of_one_cell() -> None:
    @ox.kernel(block=64)
    def halves(x: Slice[f32]):
        sh = ox.shared.array(f32, 64)
        t = thread.in_block()
        sh[t // 2] = x[t]  # write

    e = refusal(halves, Slice[f32])
    m = WRITE_WRITE.fullmatch(e.message)
    assert m, e.message
    (t1,), (t2,), (cell,) = thread_of(m["first"]), thread_of(m["second"]), cell_of(m["cell"])
    assert t1 // 2 == t2 // 2 == cell and t1 != t2
    assert m["at1"] == at(halves, "# write", "sh[t") and m["at2"] is None
    assert e.span is not None and e.span.line == line_of(halves, "# write")[0]
    assert "index with the thread's position" in e.hint and "ox.atomic" in e.hint

    @ox.kernel(block=64)
    def overlapping(x: Slice[f32]):
        sh = ox.shared.array(f32, 65)
        t = thread.in_block()
        sh[t] = x[t]  # first
        sh[t + 1] = x[t]  # second

    e = refusal(overlapping, Slice[f32])
    m = WRITE_WRITE.fullmatch(e.message)
    assert m, e.message
    places = {at(overlapping, "# first", "sh[t]"): 0, at(overlapping, "# second", "sh[t +"): 1}
    assert m["at2"] is not None and {m["at1"], m["at2"]} == set(places)
    # each named thread writes the cell at the place named in its position
    (cell,) = cell_of(m["cell"])
    for who, where in (("first", "at1"), ("second", "at2")):
        (t,) = thread_of(m[who])
        assert t + places[m[where]] == cell
    lines = {line_of(overlapping, "# first")[0], line_of(overlapping, "# second")[0]}
    assert e.span is not None and e.span.line in lines
    assert e.label == f"races with line {(lines - {e.span.line}).pop()}"


def test_atomic_beside_a_plain_write_of_one_cell() -> None:
    @ox.kernel(block=64)
    def count(x: Slice[u32]):
        sh = ox.shared.array(u32, 16)
        t = thread.in_block()
        if t < 16:
            sh[t] = u32(0)  # write
        ox.atomic.add(sh, t % 16, u32(1))  # atomic

    e = refusal(count, Slice[u32])
    m = READ_WRITE.fullmatch(e.message)
    assert m, e.message
    roles = {m["verb2"]: (thread_of(m["second"])[0], m["at2"]),
             m["verb1"]: (thread_of(m["first"])[0], m["at1"])}
    assert set(roles) == {"updates (atomically)", "writes"}
    (cell,) = cell_of(m["cell"])
    updater, where_atomic = roles["updates (atomically)"]
    writer, where_write = roles["writes"]
    assert updater % 16 == cell == writer and updater != writer
    assert where_atomic == at(count, "# atomic", "ox.atomic")
    assert where_write == at(count, "# write", "sh[t]")
    assert e.hint.startswith("keep atomic updates and plain accesses of a cell in different "
                             "phases")


def test_loop_carried_race_names_the_next_iteration_s_read() -> None:
    @ox.kernel(block=32)
    def rotate(x: Slice[f32], out: RawSlice[f32], n: i32):
        sh = ox.shared.array(f32, 32)
        t = thread.in_block()
        v = x[t]
        for _ in range(n):
            sh[t] = v  # write
            ox.sync_threads()
            v = sh[(t + 1) % 32]  # read
        with ox.unsafe():
            out[t] = v

    e = refusal(rotate, Slice[f32], RawSlice[f32], i32)
    m = READ_WRITE.fullmatch(e.message)
    assert m, e.message
    (reader,), (writer,), (cell,) = (thread_of(m["second"]), thread_of(m["first"]),
                                     cell_of(m["cell"]))
    assert (reader + 1) % 32 == cell == writer != reader
    assert m["verb2"] == "reads" and m["at2"] == at(rotate, "# read", "sh[(t")
    assert m["verb1"] == "writes" and m["at1"] == at(rotate, "# write", "sh[t]")


def test_an_index_read_from_memory_is_named_as_the_cause() -> None:
    @ox.kernel(block=64)
    def scatter(idx: Slice[i32]):
        sh = ox.shared.array(f32, 64)
        sh[idx[thread.in_block()]] = 1.0  # write

    e = refusal(scatter, Slice[i32])
    assert e.message.startswith("cannot prove the threads of a block use different cells of "
                                "shared array `sh`: the index here depends on a value oxide "
                                "cannot follow at compile time (data read from memory")
    assert e.label == "in thread 0, this index is not known"
    assert "with ox.unsafe():" in e.hint
    assert e.span is not None and e.span.line == line_of(scatter, "# write")[0]


def test_barrier_under_a_thread_condition_names_the_condition() -> None:
    @ox.kernel(block=64)
    def partial(x: Slice[f32], n: i32):
        sh = ox.shared.array(f32, 64)
        t = thread.in_block()
        if t < n:  # condition
            sh[t] = x[t]
            ox.sync_threads()  # barrier

    e = refusal(partial, Slice[f32], i32)
    assert e.message == ("`ox.sync_threads()` waits for every thread of the block, but it "
                         "sits under a condition that depends on the thread")
    assert e.span is not None and e.span.line == line_of(partial, "# barrier")[0]
    assert e.label == (f"whether a thread gets here depends on `t < n` "
                       f"(line {line_of(partial, '# condition')[0]})")


def test_a_disjoint_slice_map_two_blocks_share() -> None:
    @ox.kernel(block=64)
    def overlap(x: Slice[f32], out: DisjointSlice[f32]):
        out[ox.block_idx.x * 32 + thread.in_block()] = x[0]  # write

    e = refusal(overlap, Slice[f32], DisjointSlice[f32])
    assert e.message == ("cannot prove blocks write different elements of DisjointSlice "
                         "`out`: the index here depends on block_idx.x in a way that may let "
                         "two blocks write one element (a block's threads spread over 64 "
                         "values of dimension 0, while block_idx.x moves it by 32)")
    assert e.label == "blocks may overlap here"


def test_shared_memory_outside_unsafe_needs_the_block_shape() -> None:
    @ox.kernel
    def undeclared(x: Slice[f32]):
        sh = ox.shared.array(f32, 64)
        sh[ox.thread_idx.x] = x[0]  # write

    e = refusal(undeclared, Slice[f32])
    assert e.message.startswith("writing a shared array outside `with ox.unsafe():` needs the "
                                "kernel's block shape")
    assert e.span is not None and e.span.line == line_of(undeclared, "# write")[0]


# ------------------------------------------------------------------ the launch rules


def test_a_launch_with_another_block_shape_is_an_argument_error() -> None:
    x = np.ones(512, np.float32)
    out = np.zeros(2, np.float32)
    with ox.device("cpu"):
        with pytest.raises(ox.ArgumentError) as info:
            block_sums[2, 128](x, out)
        assert str(info.value) == (
            f"`block_sums` is declared with block={B}, and its shared-memory accesses are "
            f"proved race-free for that shape only; this launch has block (128, 1, 1). "
            f"Launch with block={B}, or change the kernel's `block=`")
        with pytest.raises(ox.ArgumentError, match=r"block=\(32, 8\).*block \(8, 32, 1\)"):
            transpose[(1, 1), (8, 32)](np.ones((8, 8), np.float32),
                                       np.zeros((8, 8), np.float32))
        assert not out.any(), "nothing ran"
        block_sums[2, B](x, out)  # the declared shape still launches
    np.testing.assert_array_equal(out, [256.0, 256.0])


def test_a_map_without_block_idx_y_refuses_a_2d_grid() -> None:
    with ox.device("cpu"):
        with pytest.raises(ox.LaunchError) as info:
            block_sums[ox.LaunchConfig(grid=(2, 3), block=B)](np.ones(512, np.float32),
                                                               np.zeros(6, np.float32))
    assert str(info.value) == (
        "`block_sums` writes a DisjointSlice at an index map that tells blocks apart by "
        "block_idx.x; this launch has grid.y = 3, so several blocks would write one element. "
        "Launch with those grid dimensions at 1, or make the index use them")


def test_a_map_without_block_idx_refuses_more_than_one_block() -> None:
    """`out[thread_idx.x]` from every block: one block may write it, two may not."""

    @ox.kernel(block=64)
    def first_block_copy(x: Slice[f32], out: DisjointSlice[f32]):
        t = ox.thread_idx.x
        out[t] = x[t] * 2.0

    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    with ox.device("cpu"):
        first_block_copy[1, 64](x, out)
        np.testing.assert_array_equal(out, x * 2)
        with pytest.raises(ox.LaunchError, match=r"tells blocks apart by nothing \(every "
                                                 r"block writes the same elements\); this "
                                                 r"launch has grid\.x = 2"):
            first_block_copy[2, 64](x, out)


def test_transpose_refuses_a_third_grid_axis() -> None:
    with ox.device("cpu"), pytest.raises(ox.LaunchError,
                                         match=r"apart by block_idx\.x, block_idx\.y; this "
                                               r"launch has grid\.z = 2"):
        transpose[ox.LaunchConfig(grid=(1, 1, 2), block=(TILE, ROWS))](
            np.ones((32, 32), np.float32), np.zeros((32, 32), np.float32))


# ------------------------------------------------------------------ thread.in_block()


def test_in_block_in_a_1d_block_is_thread_idx_x() -> None:
    @ox.kernel(block=64)
    def reverse_blocks(x: Slice[f32], out: DisjointSlice[f32]):
        sh = ox.shared.array(f32, 64)
        t = thread.in_block()
        sh[t] = x[ox.block_idx.x * 64 + t]
        ox.sync_threads()
        out[ox.block_idx.x * 64 + t] = sh[63 - t] + f32(t) * 1000.0

    x = RNG.standard_normal(256).astype(np.float32)
    out = np.zeros(256, np.float32)
    with ox.device("cpu"):
        reverse_blocks[4, 64](x, out)
    t = np.tile(np.arange(64), 4)
    want = x.reshape(4, 64)[:, ::-1].ravel() + t.astype(np.float32) * 1000
    np.testing.assert_array_equal(out, want)


def test_in_block_in_a_2d_block_is_row_and_col() -> None:
    @ox.kernel(block=(8, 4))
    def positions(out: DisjointSlice[i32, 2]):
        tile = ox.shared.array(i32, (4, 8))
        p = thread.in_block()
        r, c = p
        tile[p] = r * 100 + c  # the pair indexes a 2-D shared array whole
        ox.sync_threads()
        row = ox.block_idx.y * 4 + thread.in_block().row
        col = ox.block_idx.x * 8 + thread.in_block().col
        out[row, col] = tile[3 - r, 7 - c]  # another thread's cell, after the barrier

    out = np.full((8, 24), -1, np.int32)
    with ox.device("cpu"):
        positions[ox.LaunchConfig(grid=(3, 2), block=(8, 4))](out)
    i, j = np.indices(out.shape)
    np.testing.assert_array_equal(out, (3 - i % 4) * 100 + 7 - j % 8)


def test_in_block_assigned_keeps_row_and_col() -> None:
    @ox.kernel(block=(8, 4))
    def rows_cols(out: DisjointSlice[i32, 2]):
        p = thread.in_block()
        out[ox.block_idx.y * 4 + p.row, ox.block_idx.x * 8 + p.col] = p.row * 100 + p.col

    out = np.full((4, 8), -1, np.int32)
    with ox.device("cpu"):
        rows_cols[1, (8, 4)](out)
    i, j = np.indices(out.shape)
    np.testing.assert_array_equal(out, i * 100 + j)


def test_in_block_needs_a_declared_1d_or_2d_block() -> None:
    @ox.kernel
    def undeclared(out: RawSlice[i32]):
        with ox.unsafe():
            out[thread.in_block()] = 1

    @ox.kernel(block=(2, 2, 2))
    def three_d(out: RawSlice[i32]):
        with ox.unsafe():
            out[thread.in_block()] = 1

    with pytest.raises(ox.KernelTypeError, match=r"thread\.in_block\(\) needs the kernel's "
                                                 r"block shape") as info:
        undeclared.compile(RawSlice[i32], arch="sm_90")
    assert "@ox.kernel(block=" in info.value.hint
    with pytest.raises(ox.KernelTypeError, match=r"1-D and 2-D blocks; this kernel declares "
                                                 r"block=\(2, 2, 2\)"):
        three_d.compile(RawSlice[i32], arch="sm_90")


# ------------------------------------------------------------------ the escape hatch


def test_unsafe_still_lifts_the_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    """A racy read inside `with ox.unsafe():` compiles, and the proof is not even run
    when every shared access is unsafe; the same kernel without it is refused."""
    monkeypatch.setenv("OXIDE_CACHE", "0")
    calls: list[int] = []
    real = shared_races.check_shared_races

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(shared_races, "check_shared_races", counted)

    @ox.kernel(block=64)
    def trusted(x: Slice[f32], out: RawSlice[f32]):
        sh = ox.shared.array(f32, 64)
        t = thread.in_block()
        with ox.unsafe():
            sh[t] = x[t]
            out[t] = sh[(t + 1) % 64]  # racy, on the programmer's word

    @ox.kernel(block=64)
    def checked(x: Slice[f32], out: RawSlice[f32]):
        sh = ox.shared.array(f32, 64)
        t = thread.in_block()
        sh[t] = x[t]
        v = sh[(t + 1) % 64]
        with ox.unsafe():
            out[t] = v

    trusted.compile(Slice[f32], RawSlice[f32], arch="sm_90")
    assert calls == []
    with pytest.raises(ox.SafetyError, match="data race on shared array `sh`"):
        checked.compile(Slice[f32], RawSlice[f32], arch="sm_90")
    assert calls == [1]


def test_unsafe_shared_memory_without_a_block_shape_still_runs() -> None:
    @ox.kernel
    def reverse(x: Slice[f32], out: RawSlice[f32]):
        sh = ox.shared.array(f32, 64)
        t = ox.thread_idx.x
        with ox.unsafe():
            sh[t] = x[t]
        ox.sync_threads()
        with ox.unsafe():
            out[t] = sh[63 - t]

    x = RNG.standard_normal(64).astype(np.float32)
    out = np.zeros(64, np.float32)
    with ox.device("cpu"):
        reverse[1, 64](x, out)
    np.testing.assert_array_equal(out, x[::-1])


# ------------------------------------------------------------------ beyond the list


@ox.kernel(block=128)
def bitonic_sort(x: Slice[f32], out: DisjointSlice[f32]):
    """Each block sorts its 128 elements: compare-and-swap partners `t ^ j`, a barrier
    after every step (the pairs of one step are disjoint, the steps are not)."""
    sh = ox.shared.array(f32, 128)
    t = thread.in_block()
    base = ox.block_idx.x * 128
    sh[t] = x[base + t]
    ox.sync_threads()
    k = 2
    while k <= 128:
        j = k // 2
        while j > 0:
            partner = t ^ j
            if partner > t:
                a = sh[t]
                b = sh[partner]
                up = (t & k) == 0
                if (up and a > b) or (not up and a < b):
                    sh[t] = b
                    sh[partner] = a
            ox.sync_threads()
            j //= 2
        k *= 2
    out[base + t] = sh[t]


def test_bitonic_sort_is_proved_and_sorts() -> None:
    x = RNG.standard_normal(5 * 128).astype(np.float32)
    out = np.zeros_like(x)
    with ox.device("cpu"):
        bitonic_sort[5, 128](x, out)
    np.testing.assert_array_equal(out, np.sort(x.reshape(5, 128), axis=1).ravel())


def test_bitonic_sort_without_its_barrier_is_refused() -> None:
    @ox.kernel(block=128)
    def unsynced(x: Slice[f32], out: DisjointSlice[f32]):
        sh = ox.shared.array(f32, 128)
        t = thread.in_block()
        sh[t] = x[t]
        ox.sync_threads()
        j = 64
        while j > 0:
            partner = t ^ j
            if partner > t:
                a = sh[t]
                b = sh[partner]
                if a > b:
                    sh[t] = b
                    sh[partner] = a
            j //= 2
        ox.sync_threads()
        if ox.block_idx.x == 0:
            out[t] = sh[t]

    e = refusal(unsynced, Slice[f32], DisjointSlice[f32])
    assert e.message.startswith("data race on shared array `sh`: thread ")


def test_dynamic_shared_views_are_one_array_to_the_proof() -> None:
    @ox.kernel(block=64)
    def two_views(x: Slice[f32], out: RawSlice[f32]):
        a = ox.shared.dynamic(f32)
        b = ox.shared.dynamic(f32)
        t = thread.in_block()
        a[t] = x[t]
        v = b[(t + 1) % 64]  # thread 0 reads what thread 1 writes through `a`
        with ox.unsafe():
            out[t] = v

    try:
        two_views.compile(Slice[f32], RawSlice[f32], arch="sm_90")
    except ox.SafetyError as e:
        assert "data race" in e.message
    else:
        raise AssertionError("a race through two views of dynamic shared memory compiled")


def test_double_buffered_tiles_with_a_run_time_tile_count() -> None:
    @ox.kernel(block=(T, T))
    def row_sums(a: Slice[f32, 2], out: DisjointSlice[f32, 2]):
        tiles = ox.shared.array(f32, (2, T, T))
        tx = ox.thread_idx.x
        ty = ox.thread_idx.y
        row = ox.block_idx.y * T + ty
        k = i32(a.shape[1])
        acc = f32(0)
        buf = 0
        tiles[0, ty, tx] = a[row, tx]
        ox.sync_threads()
        for k0 in range(T, k + T, T):
            if k0 < k:
                tiles[1 - buf, ty, tx] = a[row, k0 + tx]
            for kk in range(T):
                acc += tiles[buf, ty, kk]
            ox.sync_threads()
            buf = 1 - buf
        out[row, ox.block_idx.x * T + tx] = acc

    a = RNG.standard_normal((32, 48)).astype(np.float32)
    out = np.zeros((32, 16), np.float32)
    with ox.device("cpu"):
        row_sums[ox.LaunchConfig(grid=(1, 2), block=(T, T))](a, out)
    np.testing.assert_allclose(out, np.repeat(a.sum(axis=1, keepdims=True), 16, axis=1),
                               rtol=1e-4, atol=1e-4)


def test_double_buffered_tiles_read_and_written_in_one_buffer_are_refused() -> None:
    """The divisibility test tells `buf` from `1 - buf`, not `buf` from `buf`."""
    @ox.kernel(block=(T, T))
    def same_buffer(a: Slice[f32, 2], out: DisjointSlice[f32, 2]):
        tiles = ox.shared.array(f32, (2, T, T))
        tx = ox.thread_idx.x
        ty = ox.thread_idx.y
        acc = f32(0)
        buf = 0
        for k0 in range(0, i32(a.shape[1]), T):
            tiles[buf, ty, tx] = a[ty, k0 + tx]
            for kk in range(T):
                acc += tiles[buf, ty, kk]
            ox.sync_threads()
            buf = 1 - buf
        out[ty, tx] = acc

    with pytest.raises(ox.SafetyError, match="shared array `tiles`"):
        same_buffer.compile(Slice[f32, 2], DisjointSlice[f32, 2], arch="sm_90")


def test_dynamic_shared_views_of_different_types_are_not_told_apart() -> None:
    @ox.kernel(block=64)
    def mixed(x: Slice[f32]):
        a = ox.shared.dynamic(f32)
        b = ox.shared.dynamic(ox.i16)  # 2-byte cells over the same bytes as `a`'s 4
        t = thread.in_block()
        a[t] = x[t]
        b[t + 128] = ox.i16(1)

    with pytest.raises(ox.SafetyError, match="different sizes"):
        mixed.compile(Slice[f32], arch="sm_90")


def test_mapped_write_and_thread_index_write_of_one_element_are_refused() -> None:
    @ox.kernel(block=64)
    def mirrored(out: DisjointSlice[f32]):
        i = thread.index_1d()
        out[ox.block_idx.x * 64 + (63 - ox.thread_idx.x)] = 1.0
        if i in out:
            out[i] = 2.0  # thread t writes element t of its block: thread 63 - t's too

    try:
        mirrored.compile(DisjointSlice[f32], arch="sm_90")
    except ox.SafetyError as e:
        assert "DisjointSlice `out`" in e.message
    else:
        raise AssertionError("two writers of one DisjointSlice element compiled")


def test_thread_index_read_of_an_element_mapped_to_another_thread_is_refused() -> None:
    @ox.kernel(block=64)
    def mirrored_read(x: Slice[f32], out: DisjointSlice[f32], y: RawSlice[f32]):
        i = thread.index_1d()
        out[ox.block_idx.x * 64 + (63 - ox.thread_idx.x)] = x[i]
        if i in out:
            v = out[i]  # written by thread 63 - t, with no barrier between
            with ox.unsafe():
                y[i] = v

    try:
        mirrored_read.compile(Slice[f32], DisjointSlice[f32], RawSlice[f32], arch="sm_90")
    except ox.SafetyError as e:
        assert "`out`" in e.message
    else:
        raise AssertionError("a read racing a mapped DisjointSlice write compiled")


def test_writes_in_the_two_arms_of_a_uniform_branch_are_proved() -> None:
    @ox.kernel(block=64)
    def shift_or_copy(x: Slice[f32], out: DisjointSlice[f32], n: i32):
        sh = ox.shared.array(f32, 64)
        t = thread.in_block()
        if n > 0:
            sh[t] = x[t]
        else:
            sh[(t + 1) % 64] = x[t]
        ox.sync_threads()
        if ox.block_idx.x == 0:
            out[t] = sh[t]

    x = RNG.standard_normal(64).astype(np.float32)
    out = np.zeros(64, np.float32)
    with ox.device("cpu"):
        shift_or_copy[1, 64](x, out, 1)
        np.testing.assert_array_equal(out, x)
        shift_or_copy[1, 64](x, out, 0)
        np.testing.assert_array_equal(out, np.roll(x, 1))


def test_a_thread_index_read_racing_a_mapped_write_is_called_a_read() -> None:
    @ox.kernel(block=64)
    def mirrored_read(x: Slice[f32], out: DisjointSlice[f32], y: RawSlice[f32]):
        i = thread.index_1d()
        out[ox.block_idx.x * 64 + (63 - ox.thread_idx.x)] = x[i]  # write
        if i in out:
            v = out[i]  # read
            with ox.unsafe():
                y[i] = v

    e = refusal(mirrored_read, Slice[f32], DisjointSlice[f32], RawSlice[f32])
    assert "both write" not in e.message, e.message
    assert "reads" in e.message and at(mirrored_read, "# read", "out[i]") in e.message


@ox.kernel(block=64)
def _pairs_of_blocks(out: DisjointSlice[f32]):
    t = thread.in_block()
    b = ox.block_idx.x
    if b % 2 == 0:
        out[b * 64 + t] = 1.0
    else:
        out[(b - 1) * 64 + t] = 2.0  # block 2k + 1 writes block 2k's elements


@ox.kernel(block=64)
def _first_block_writes_the_second_s(out: DisjointSlice[f32]):
    t = thread.in_block()
    b = ox.block_idx.x
    if b == 0:
        out[64 + t] = 1.0  # the elements block 1 writes below
    else:
        out[b * 64 + t] = 2.0


@pytest.mark.parametrize("kernel", [_pairs_of_blocks, _first_block_writes_the_second_s],
                         ids=["parity", "first-block"])
def test_blocks_in_different_arms_of_a_block_dependent_branch_are_kept_apart(
        kernel: Any) -> None:
    try:
        kernel.compile(DisjointSlice[f32], arch="sm_90")
    except ox.SafetyError as e:
        assert "DisjointSlice `out`" in e.message
    else:
        raise AssertionError("two blocks writing one DisjointSlice element compiled")


def test_a_grid_stride_loop_writes_a_disjoint_slice() -> None:
    """`range(thread.index_1d(), n, grid_dim.x * B)`: block_idx + grid_dim * k names one
    block, so the writes are one element per thread of the launch."""
    @ox.kernel(block=128)
    def doubled(x: Slice[f32], out: DisjointSlice[f32]):
        for j in range(thread.index_1d(), len(x), ox.grid_dim.x * 128):
            out[j] = x[j] * 2.0

    x = np.arange(5003, dtype=np.float32)
    out = np.zeros_like(x)
    with ox.device("cpu"):
        doubled[7, 128](x, out)
    np.testing.assert_array_equal(out, 2 * x)


def test_a_grid_stride_smaller_than_the_block_is_refused() -> None:
    """A stride of grid_dim.x * 64 with 128-thread blocks: block 0's thread 0 at its second
    trip and block 1's thread 0 (with two blocks) write one element."""
    @ox.kernel(block=128)
    def overlapping(x: Slice[f32], out: DisjointSlice[f32]):
        for j in range(thread.index_1d(), len(x), ox.grid_dim.x * 64):
            out[j] = x[j]

    with pytest.raises(ox.SafetyError, match="DisjointSlice `out`"):
        overlapping.compile(Slice[f32], DisjointSlice[f32], arch="sm_90")


def test_a_one_armed_if_on_data_counts_both_ways() -> None:
    """A thread that cannot tell whether it runs the arm runs it, and after the join what
    the arm assigned is unknown: `v` may be `t` or `t + 1`, so `sh[v]` is not proved."""
    @ox.kernel(block=64)
    def maybe_shifted(x: Slice[f32], out: DisjointSlice[f32]):
        sh = ox.shared.array(f32, 65)
        t = thread.in_block()
        v = t
        if x[t] > 0.0:
            v = t + 1
        sh[v] = x[t]  # write
        ox.sync_threads()
        out[ox.block_idx.x * 64 + t] = sh[t]

    with pytest.raises(ox.SafetyError, match="shared array `sh`"):
        maybe_shifted.compile(Slice[f32], DisjointSlice[f32], arch="sm_90")

    @ox.kernel(block=64)
    def guarded(x: Slice[f32], out: DisjointSlice[f32]):
        sh = ox.shared.array(f32, 64)
        t = thread.in_block()
        i = ox.block_idx.x * 64 + t
        sh[t] = 0.0
        if i < len(x) and x[i] > 0.0:  # the arm writes only this thread's cell
            sh[t] = x[i]
        ox.sync_threads()
        out[i] = sh[63 - t]

    x = np.linspace(-1, 1, 128).astype(np.float32)
    out = np.zeros(128, np.float32)
    with ox.device("cpu"):
        guarded[2, 64](x, out)
    want = np.maximum(x, 0).reshape(2, 64)[:, ::-1].reshape(-1)
    np.testing.assert_array_equal(out, want)


def test_warp_collectives_under_a_warp_uniform_condition_in_a_declared_block() -> None:
    """With the block shape declared, whole warps are checked lane by lane: `t < 32` keeps
    warp 0 whole (the classic last-warp reduction), `t < 16` splits it, and a condition on
    data may split any warp."""
    @ox.kernel(block=128)
    def last_warp(x: Slice[f32], out: DisjointSlice[f32]):
        sh = ox.shared.array(f32, 128)
        t = thread.in_block()
        sh[t] = x[ox.block_idx.x * 128 + t]
        ox.sync_threads()
        if t < 64:
            sh[t] += sh[t + 64]
        ox.sync_threads()
        if t < 32:
            v = ox.warp.reduce_add(sh[t] + sh[t + 32])
            if t == 0:
                out[ox.block_idx.x] = v

    x = np.arange(256, dtype=np.float32)
    out = np.zeros(2, np.float32)
    with ox.device("cpu"):
        last_warp[2, 128](x, out)
    np.testing.assert_array_equal(out, [x[:128].sum(), x[128:].sum()])

    @ox.kernel(block=128)
    def half_warp(x: Slice[f32], out: DisjointSlice[f32]):
        t = thread.in_block()
        v = x[t]
        if t < 16:
            v = ox.warp.reduce_add(v)  # collective
        if t == 0:
            out[ox.block_idx.x] = v

    @ox.kernel(block=128)
    def on_data(x: Slice[f32], out: DisjointSlice[f32]):
        t = thread.in_block()
        v = x[t]
        if v > 0.0:
            v = ox.warp.reduce_add(v)  # collective
        if t == 0:
            out[ox.block_idx.x] = v

    for kernel in (half_warp, on_data):
        with pytest.raises(ox.SafetyError, match="every lane of warp 0") as info:
            kernel.compile(Slice[f32], DisjointSlice[f32], arch="sm_90")
        assert info.value.span is not None
        assert info.value.span.line == line_of(kernel, "# collective")[0]


def test_a_flag_every_thread_reads_from_one_shared_cell_may_guard_barriers() -> None:
    """threadFenceReduction's natural form: thread 0 sets `am_last[0]` before a barrier and
    every thread branches on it, barriers inside. With the block shape declared, the run
    shows all threads read one value, so the barriers are reached by all; a flag read per
    thread, or written by `unsafe` code, is still refused with the uniformity message."""
    @ox.kernel(block=64)
    def last_block_sum(data: Slice[i32], partial: RawSlice[i32], count: AtomicSlice[u32]):
        sh = ox.shared.array(i32, 64)
        am_last = ox.shared.array(ox.bool_, 1)
        t = thread.in_block()
        sh[t] = data[ox.block_idx.x * 64 + t] if ox.block_idx.x * 64 + t < len(data) else 0
        ox.sync_threads()
        s = 32
        while s > 0:
            if t < s:
                sh[t] += sh[t + s]
            ox.sync_threads()
            s //= 2
        if t == 0:
            with ox.unsafe():
                partial[ox.block_idx.x] = sh[0]
        ox.threadfence()
        if t == 0:
            last = u32(ox.grid_dim.x - 1)  # atomicInc wraps to 0 after the last ticket
            am_last[0] = ox.atomic.inc(count, 0, last) == last
        ox.sync_threads()
        if am_last[0]:
            acc = 0
            j = t
            while j < ox.grid_dim.x:
                with ox.unsafe():
                    acc += partial[j]
                j += 64
            sh[t] = acc
            ox.sync_threads()
            s = 32
            while s > 0:
                if t < s:
                    sh[t] += sh[t + s]
                ox.sync_threads()
                s //= 2
            if t == 0:
                with ox.unsafe():
                    partial[0] = sh[0]

    data = np.arange(3000, dtype=np.int32)
    partial = np.zeros(47, np.int32)
    count = np.zeros(1, np.uint32)
    with ox.device("cpu"):
        last_block_sum[47, 64](data, partial, count)
    assert int(partial[0]) == int(data.sum()) and int(count[0]) == 0

    @ox.kernel(block=64)
    def per_thread_flag(x: Slice[i32]):
        sh = ox.shared.array(i32, 64)
        t = thread.in_block()
        sh[t] = x[t]
        ox.sync_threads()
        if sh[t] > 0:
            ox.sync_threads()

    @ox.kernel(block=64)
    def unsafe_flag(x: Slice[i32]):
        flag = ox.shared.array(i32, 1)
        with ox.unsafe():
            flag[0] = x[thread.in_block()]
        if flag[0] > 0:
            ox.sync_threads()

    for kernel in (per_thread_flag, unsafe_flag):
        with pytest.raises(ox.SafetyError, match="waits for every thread of the block"):
            kernel.compile(Slice[i32], arch="sm_90")
