"""Shared memory without `unsafe` that must not compile (issue 13): racy phases, barriers
some threads never reach, non-injective index maps, indices oxide cannot follow, and
DisjointSlice writes at maps that two threads or two blocks share; plus the launches the
proof's assumptions rule out.

Every kernel declares its block shape (`@ox.kernel(block=...)`), so its shared arrays
may be used outside `ox.unsafe()` and passes/shared_races.py must find the race. Each
pattern names what oxide must say for that case: the array, the cell, the two threads or
the cause, so a case cannot pass on another case's diagnostic.
"""

# ruff: noqa: F841, F842, B007, E731, F821 - the corpus is bad kernels on purpose

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import AtomicSlice, DisjointSlice, RawSlice, Slice, f32, i32, thread, u32

from . import bad

SE, KTE, LE, AE = ox.SafetyError, ox.KernelTypeError, ox.LaunchError, ox.ArgumentError
B = 128  # the block size of the 1-D cases
T = 16  # the tile side of the 2-D cases
AT = r"\S+:\d+:\d+"  # a file:line:col in a message
ANY = r"(\d+ ?,? ?)+"  # a cell whose coordinates the case does not fix
# Which of several colliding pairs a message names is the prover's choice: patterns fix a
# thread (or cell) only where the case has one answer, and otherwise match any.
TH = r"thread (\d+|\(x=\d+, y=\d+\))"
DIVERGENT = r"`ox\.sync_threads\(\)` waits for every thread of the block, but it sits under"


def race(array: str, reader: str = TH, cell: str = ANY, writer: str = TH,
         verb: str = "reads") -> str:
    """The message of a read/write race: the reader, the cell, the writer, both places."""
    return (rf"data race on shared array `{array}`: {reader} {verb} `{array}\[{cell}\]` "
            rf"at {AT} while {writer} writes it at {AT}, in the same phase.*"
            r"add `ox\.sync_threads\(\)` between them")


def clash(array: str, cell: str = ANY) -> str:
    """The message of two threads writing one cell in one phase (at one or two places)."""
    return (rf"data race on shared array `{array}`: {TH} and {TH} both write "
            rf"`{array}\[{cell}\]` in the same phase \(at {AT}( and {AT})?\).*"
            r"make each thread write its own cells")


def divergent(condition: str) -> str:
    """A barrier under a thread-dependent condition, naming that condition."""
    return rf"{DIVERGENT}.*whether a thread gets here depends on `{condition}`"


# -- a missing barrier in the classic shared-memory algorithms


@bad(SE, pattern=race("sh"))
def reduction_without_barrier_after_load():
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        sh = ox.shared.array(f32, B)
        t = thread.in_block()
        i = ox.block_idx.x * B + t
        sh[t] = x[i] if i < len(x) else 0.0  # <-
        s = B // 2
        while s > 0:
            if t < s:
                sh[t] += sh[t + s]  # <-
            ox.sync_threads()
            s //= 2
        if t == 0:
            out[ox.block_idx.x] = sh[0]
    return k


@bad(SE, pattern=race("sh"))
def reduction_without_barrier_in_tree():
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        sh = ox.shared.array(f32, B)
        t = thread.in_block()
        i = ox.block_idx.x * B + t
        sh[t] = x[i] if i < len(x) else 0.0
        ox.sync_threads()
        s = B // 2
        while s > 0:
            if t < s:
                sh[t] += sh[t + s]  # <-
            s //= 2
        ox.sync_threads()
        if t == 0:
            out[ox.block_idx.x] = sh[0]
    return k


@bad(SE, pattern=race("tile"))
def transpose_without_barrier():
    @ox.kernel(block=(T, T))
    def k(a: Slice[f32, 2], out: DisjointSlice[f32, 2]):
        tile = ox.shared.array(f32, (T, T + 1))
        tx = ox.thread_idx.x
        ty = ox.thread_idx.y
        tile[ty, tx] = a[ox.block_idx.y * T + ty, ox.block_idx.x * T + tx]  # <-
        out[ox.block_idx.x * T + ty, ox.block_idx.y * T + tx] = tile[tx, ty]  # <-
    return k


@bad(SE, pattern=race("sh"))
def hillis_steele_without_middle_barrier():
    @ox.kernel(block=B)
    def k(x: Slice[i32], out: RawSlice[i32]):
        sh = ox.shared.array(i32, B)
        t = ox.thread_idx.x
        sh[t] = x[t]
        ox.sync_threads()
        offset = 1
        while offset < B:
            v = 0
            if t >= offset:
                v = sh[t - offset]  # <-
            sh[t] += v  # <-
            ox.sync_threads()
            offset *= 2
        with ox.unsafe():
            out[t] = sh[t]
    return k


@bad(SE, pattern=race("sh"))
def hillis_steele_without_trailing_barrier():
    @ox.kernel(block=B)
    def k(x: Slice[i32], out: RawSlice[i32]):
        sh = ox.shared.array(i32, B)
        t = ox.thread_idx.x
        sh[t] = x[t]
        ox.sync_threads()
        offset = 1
        while offset < B:
            v = 0
            if t >= offset:
                v = sh[t - offset]  # <-
            ox.sync_threads()
            sh[t] += v  # <-
            offset *= 2
        with ox.unsafe():
            out[t] = sh[t]
    return k


@bad(SE, pattern=clash("sh"))
def blelloch_without_upsweep_barrier():
    @ox.kernel(block=B)
    def k(x: Slice[i32], out: RawSlice[i32]):
        N = 2 * B
        sh = ox.shared.array(i32, 2 * B)
        t = ox.thread_idx.x
        sh[t] = x[t]  # <-
        sh[t + B] = x[t + B]  # <-
        offset = 1
        d = N // 2
        while d > 0:
            if t < d:
                ai = offset * (2 * t + 1) - 1
                bi = offset * (2 * t + 2) - 1
                sh[bi] += sh[ai]  # <-
            offset *= 2
            d //= 2
        if t == 0:
            sh[N - 1] = 0  # <-
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
        with ox.unsafe():
            out[t] = sh[t]
    return k


@bad(SE, pattern=clash("sh"))
def blelloch_without_downsweep_barrier():
    @ox.kernel(block=B)
    def k(x: Slice[i32], out: RawSlice[i32]):
        N = 2 * B
        sh = ox.shared.array(i32, 2 * B)
        t = ox.thread_idx.x
        sh[t] = x[t]
        sh[t + B] = x[t + B]
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
            sh[N - 1] = 0  # <-
        d = 1
        while d < N:
            offset //= 2
            if t < d:
                ai = offset * (2 * t + 1) - 1
                bi = offset * (2 * t + 2) - 1
                v = sh[ai]  # <-
                sh[ai] = sh[bi]  # <-
                sh[bi] += v  # <-
            d *= 2
        ox.sync_threads()
        with ox.unsafe():
            out[t] = sh[t]
    return k


@bad(SE, pattern=race("sh"))
def stencil_without_barrier_after_halo_loads():
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: RawSlice[f32]):
        R = 3
        sh = ox.shared.array(f32, B + 2 * R)
        t = ox.thread_idx.x
        g = ox.block_idx.x * B + t
        sh[t + R] = x[g]  # <-
        if t < R:
            sh[t] = x[g - R] if g >= R else f32(0)
            sh[t + B + R] = x[g + B]
        acc = f32(0)
        for j in range(2 * R + 1):
            acc += sh[t + j]  # <-
        with ox.unsafe():
            out[g] = acc
    return k


@bad(SE, pattern=race("As"))
def sgemm_without_barrier_after_tile_loads():
    @ox.kernel(block=(T, T))
    def k(a: Slice[f32, 2], b: Slice[f32, 2], c: DisjointSlice[f32, 2]):
        As = ox.shared.array(f32, (T, T))
        Bs = ox.shared.array(f32, (T, T))
        tx = ox.thread_idx.x
        ty = ox.thread_idx.y
        row = ox.block_idx.y * T + ty
        col = ox.block_idx.x * T + tx
        acc = f32(0)
        for k0 in range(0, i32(a.shape[1]), T):
            As[ty, tx] = a[row, k0 + tx]  # <-
            Bs[ty, tx] = b[k0 + ty, col]
            for kk in range(T):
                acc += As[ty, kk] * Bs[kk, tx]  # <-
            ox.sync_threads()
        c[row, col] = acc
    return k


@bad(SE, pattern=race("As"))
def sgemm_without_trailing_barrier():
    @ox.kernel(block=(T, T))
    def k(a: Slice[f32, 2], b: Slice[f32, 2], c: DisjointSlice[f32, 2]):
        As = ox.shared.array(f32, (T, T))
        Bs = ox.shared.array(f32, (T, T))
        tx = ox.thread_idx.x
        ty = ox.thread_idx.y
        row = ox.block_idx.y * T + ty
        col = ox.block_idx.x * T + tx
        acc = f32(0)
        for k0 in range(0, i32(a.shape[1]), T):
            As[ty, tx] = a[row, k0 + tx]  # <-
            Bs[ty, tx] = b[k0 + ty, col]
            ox.sync_threads()
            for kk in range(T):
                acc += As[ty, kk] * Bs[kk, tx]  # <-
        c[row, col] = acc
    return k


@bad(SE, pattern=race("sh", cell="0", writer="thread 0"))
def softmax_without_barrier_after_reading_the_max():
    @ox.kernel(block=B)
    def k(x: Slice[f32, 2], out: RawSlice[f32, 2]):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        r = ox.block_idx.x
        sh[t] = x[r, t]
        ox.sync_threads()
        s = B // 2
        while s > 0:
            if t < s:
                sh[t] = max(sh[t], sh[t + s])
            ox.sync_threads()
            s //= 2
        mx = sh[0]  # <-
        sh[t] = ox.math.exp(x[r, t] - mx)  # <-
        ox.sync_threads()
        with ox.unsafe():
            out[r, t] = sh[t]
    return k


# -- a read of another thread's cell in the same phase


@bad(SE, pattern=race("sh"))
def read_right_neighbour():
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: RawSlice[f32]):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        sh[t] = x[t]  # <-
        v = sh[(t + 1) % B]  # <-
        with ox.unsafe():
            out[t] = v
    return k


@bad(SE, pattern=race("sh"))
def read_left_neighbour_under_guard():
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: RawSlice[f32]):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        sh[t] = x[t]  # <-
        v = f32(0)
        if t > 0:
            v = sh[t - 1]  # <-
        with ox.unsafe():
            out[t] = v
    return k


@bad(SE, pattern=race("sh"))
def read_mirrored_cell():
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: RawSlice[f32]):
        sh = ox.shared.array(f32, B)
        t = thread.in_block()
        sh[t] = x[t]  # <-
        v = sh[B - 1 - t]  # <-
        with ox.unsafe():
            out[t] = v
    return k


@bad(SE, pattern=race("sh"))
def read_xor_partner():
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: RawSlice[f32]):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        sh[t] = x[t]  # <-
        v = sh[t ^ 1]  # <-
        with ox.unsafe():
            out[t] = v
    return k


@bad(SE, pattern=race("tile"))
def read_next_column_of_a_2d_tile():
    @ox.kernel(block=(T, T))
    def k(a: Slice[f32, 2], out: RawSlice[f32, 2]):
        tile = ox.shared.array(f32, (T, T + 1))
        r, c = thread.in_block()
        tile[r, c] = a[r, c]  # <-
        v = tile[r, c + 1]  # <-
        with ox.unsafe():
            out[r, c] = v
    return k


@bad(SE, pattern=race("sh"))
def tree_levels_without_barrier_between():
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: RawSlice[f32]):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        sh[t] = x[t]
        ox.sync_threads()
        if t < 64:
            sh[t] += sh[t + 64]  # <-
        if t < 32:
            sh[t] += sh[t + 32]  # <-
        ox.sync_threads()
        with ox.unsafe():
            out[t] = sh[t]
    return k


# -- two threads writing one cell through a non-injective map


@bad(SE, pattern=clash("sh"))
def write_at_half_the_thread():
    @ox.kernel(block=B)
    def k(x: Slice[f32]):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        sh[t // 2] = x[t]  # <-
    return k


@bad(SE, pattern=clash("sh"))
def write_at_thread_mod_16():
    @ox.kernel(block=B)
    def k(x: Slice[f32]):
        sh = ox.shared.array(f32, 16)
        t = ox.thread_idx.x
        sh[t % 16] = x[t]  # <-
    return k


@bad(SE, pattern=clash("sh", "0"))
def write_at_a_constant_index():
    @ox.kernel(block=B)
    def k(x: Slice[f32]):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        sh[0] = x[t]  # <-
    return k


@bad(SE, pattern=clash("sh"))
def write_at_thread_with_low_bit_cleared():
    @ox.kernel(block=B)
    def k(x: Slice[u32]):
        sh = ox.shared.array(u32, B)
        t = ox.thread_idx.x
        sh[t & ~1] = x[t]  # <-
    return k


@bad(SE, pattern=clash("sh"))
def write_at_thread_shifted_right():
    @ox.kernel(block=B)
    def k(x: Slice[f32]):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        sh[(t >> 1) | 1] = x[t]  # <-
    return k


@bad(SE, pattern=clash("row"))
def write_a_row_cell_from_every_column():
    @ox.kernel(block=(T, T))
    def k(a: Slice[f32, 2]):
        row = ox.shared.array(f32, T)
        row[ox.thread_idx.y] = a[ox.thread_idx.y, ox.thread_idx.x]  # <-
    return k


@bad(SE, pattern=clash("sh"))
def two_stores_overlapping_by_one():
    @ox.kernel(block=B)
    def k(x: Slice[f32]):
        sh = ox.shared.array(f32, B + 1)
        t = ox.thread_idx.x
        sh[t] = x[t]  # <-
        sh[t + 1] = x[t]  # <-
    return k


@bad(SE, pattern=clash("sh"))
def write_at_thread_mod_half_block_in_a_loop():
    @ox.kernel(block=B)
    def k(x: Slice[f32]):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        for j in range(2):
            sh[(t + j * 64) % 64] = x[t]  # <-
    return k


# -- barriers some threads never reach (passes/uniformity.py)


@bad(SE, pattern=divergent(r"t < n"))
def barrier_under_if_thread_below_n():
    @ox.kernel(block=B)
    def k(x: Slice[f32], n: i32):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        if t < n:
            sh[t] = x[t]
            ox.sync_threads()  # <-
    return k


@bad(SE, pattern=divergent(r"t == 0"))
def barrier_under_if_thread_zero():
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: RawSlice[f32]):
        sh = ox.shared.array(f32, 1)
        t = ox.thread_idx.x
        if t == 0:
            sh[0] = x[0]
            ox.sync_threads()  # <-
        with ox.unsafe():
            out[t] = sh[0]
    return k


@bad(SE, pattern=divergent(r"j < t"))
def barrier_in_loop_with_thread_dependent_trip_count():
    @ox.kernel(block=B)
    def k(x: Slice[f32]):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        j = 0
        while j < t:
            sh[t] += x[j]
            ox.sync_threads()  # <-
            j += 1
    return k


@bad(SE, pattern=DIVERGENT + r".*whether a thread gets here depends on `(for j in )?range\(t")
def barrier_in_for_range_of_the_thread():
    @ox.kernel(block=B)
    def k(x: Slice[f32]):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        for j in range(t):
            sh[t] += x[j]
            ox.sync_threads()  # <-
    return k


@bad(SE, pattern=r"may read `sh\[.*which no live thread has written.*return early")
def return_before_barrier():
    # The early return itself is fine (the barrier does not wait for threads that
    # returned); reading the mirror cell is not: its thread may have returned unwritten.
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: RawSlice[f32]):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        i = ox.block_idx.x * B + t
        if i >= len(x):
            return
        sh[t] = x[i]
        ox.sync_threads()
        v = sh[B - 1 - t]  # <-
        with ox.unsafe():
            out[i] = v
    return k


@bad(SE, pattern=divergent(r"t < n"))
def barrier_skipped_by_threads_that_run_on():
    # threads with t >= n skip the barrier and run on to the end: live, not returned
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: RawSlice[f32], n: i32):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        if t < n:
            sh[t] = x[t]
            ox.sync_threads()  # <-
        with ox.unsafe():
            out[t] = x[t]
    return k


@bad(SE, pattern=divergent(r"x\[t\] > 0\.0"))
def barrier_under_data_loaded_per_thread():
    @ox.kernel(block=B)
    def k(x: Slice[f32]):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        sh[t] = x[t]
        if x[t] > 0.0:
            ox.sync_threads()  # <-
    return k


@bad(SE, pattern=divergent(r"sh\[t\] > 0\.0"))
def barrier_in_loop_on_a_shared_value():
    @ox.kernel(block=B)
    def k(x: Slice[f32]):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        sh[t] = x[t]
        ox.sync_threads()
        while sh[t] > 0.0:
            ox.sync_threads()  # <-
            sh[t] -= 1.0
    return k


@bad(SE, pattern=divergent(r"t % 2 == 0"))
def barrier_in_else_of_thread_parity():
    @ox.kernel(block=B)
    def k(x: Slice[f32]):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        if t % 2 == 0:
            sh[t] = x[t]
        else:
            ox.sync_threads()  # <-
    return k


# -- loop-carried races: a write after the last barrier, read in the next iteration


@bad(SE, pattern=race("sh"))
def loop_carried_race_constant_trips():
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: RawSlice[f32]):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        v = x[t]
        for it in range(4):
            sh[t] = v  # <-
            ox.sync_threads()
            v = sh[(t + 1) % B]  # <-
        with ox.unsafe():
            out[t] = v
    return k


@bad(SE, pattern=race("sh"))
def loop_carried_race_run_time_trips():
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: RawSlice[f32], n: i32):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        v = x[t]
        for it in range(n):
            sh[t] = v  # <-
            ox.sync_threads()
            v = sh[(t + 1) % B]  # <-
        with ox.unsafe():
            out[t] = v
    return k


@bad(SE, pattern=race("sh"))
def loop_carried_race_in_a_while_loop():
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: RawSlice[f32], n: i32):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        acc = f32(0)
        it = 0
        while it < n:
            ox.sync_threads()
            acc += sh[(t + B - 1) % B]  # <-
            sh[t] = x[it * B + t]  # <-
            it += 1
        with ox.unsafe():
            out[t] = acc
    return k


@bad(SE, pattern=race("As"))
def loop_carried_race_run_time_tile_count():
    @ox.kernel(block=(T, T))
    def k(a: Slice[f32, 2], out: RawSlice[f32, 2], tiles: i32):
        As = ox.shared.array(f32, (T, T))
        tx = ox.thread_idx.x
        ty = ox.thread_idx.y
        acc = f32(0)
        for k0 in range(tiles):
            As[ty, tx] = a[ty, k0 * T + tx]  # <-
            ox.sync_threads()
            for kk in range(T):
                acc += As[ty, kk]  # <-
        with ox.unsafe():
            out[ty, tx] = acc
    return k


@bad(SE, pattern=clash("sh"))
def grid_stride_accumulation_into_the_neighbour_s_cell():
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: RawSlice[f32]):
        sh = ox.shared.array(f32, B)
        t = thread.in_block()
        sh[t] = 0.0  # <-
        i = ox.block_idx.x * B + t
        while i < len(x):
            sh[(t + 1) % B] += x[i]  # <-
            i += ox.grid_dim.x * B
        ox.sync_threads()
        with ox.unsafe():
            out[t] = sh[t]
    return k


# -- indices oxide cannot follow


@bad(SE, pattern=r"cannot prove the threads of a block use different cells of shared array "
                 r"`sh`: the index here depends on a value oxide cannot follow at compile "
                 r"time \(data read from memory.*in thread \d+, this index is not known")
def shared_index_loaded_from_memory():
    @ox.kernel(block=B)
    def k(idx: Slice[i32]):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        sh[idx[t]] = 1.0  # <-
    return k


@bad(SE, pattern=r"cannot prove the threads of a block use different cells of shared array "
                 r"`bins`: the index here depends on a value oxide cannot follow")
def shared_read_at_a_loaded_index_beside_writes():
    @ox.kernel(block=B)
    def k(idx: Slice[i32], out: RawSlice[f32]):
        bins = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        bins[t] = 0.0
        v = bins[idx[t] % B]  # <-
        with ox.unsafe():
            out[t] = v
    return k


@bad(SE, pattern=r"cannot prove the threads of a block use different cells of shared array "
                 r"`sh`: the index here depends on a value oxide cannot follow")
def shared_index_through_a_float():
    @ox.kernel(block=B)
    def k(x: Slice[f32]):
        sh = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        sh[i32(x[t] * 0.0) + t] = 1.0  # <-
    return k


# -- atomics beside plain accesses of one cell in one phase


@bad(SE, pattern=rf"data race on shared array `sh`: {TH} updates \(atomically\) "
                 rf"`sh\[\d+\]` at {AT} while {TH} writes it at {AT}, in the same phase.*"
                 r"keep atomic updates and plain accesses of a cell in different phases")
def atomic_add_beside_plain_initialisation():
    @ox.kernel(block=B)
    def k(x: Slice[u32]):
        sh = ox.shared.array(u32, 16)
        t = ox.thread_idx.x
        if t < 16:
            sh[t] = u32(0)  # <-
        ox.atomic.add(sh, t % 16, u32(1))  # <-
    return k


@bad(SE, pattern=r"cannot prove the threads of a block use different cells of shared array "
                 r"`bins`: the index here depends on a value oxide cannot follow.*in thread "
                 r"\d+, this index is not known")
def histogram_read_without_barrier_after_atomics():
    @ox.kernel(block=B)
    def k(x: Slice[u32], counts: AtomicSlice[u32]):
        bins = ox.shared.array(u32, 16)
        t = ox.thread_idx.x
        if t < 16:
            bins[t] = u32(0)
        ox.sync_threads()
        ox.atomic.add(bins, i32(x[t] % u32(16)), u32(1))  # <-
        if t < 16:
            ox.atomic.add(counts, t, bins[t])  # <-
    return k


# -- 2-D tiles with swapped row and column


@bad(SE, pattern=race("tile"))
def tile_written_by_row_read_by_column():
    @ox.kernel(block=(T, T))
    def k(a: Slice[f32, 2], out: RawSlice[f32, 2]):
        tile = ox.shared.array(f32, (T, T))
        p = thread.in_block()
        r, c = p
        tile[p] = a[r, c]  # <-
        v = tile[c, r]  # <-
        with ox.unsafe():
            out[r, c] = v
    return k


@bad(SE, pattern=clash("tile"))
def tile_written_at_row_and_transposed_in_one_phase():
    @ox.kernel(block=(T, T))
    def k(a: Slice[f32, 2]):
        tile = ox.shared.array(f32, (T, T))
        tx = ox.thread_idx.x
        ty = ox.thread_idx.y
        tile[ty, tx] = a[ty, tx]  # <-
        tile[tx, ty] = a[tx, ty]  # <-
    return k


# -- one writer, every thread reading, no barrier between


@bad(SE, pattern=race("sh", cell="0", writer="thread 0"))
def one_writer_all_read_without_barrier():
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: RawSlice[f32]):
        sh = ox.shared.array(f32, 1)
        t = ox.thread_idx.x
        if t == 0:
            sh[0] = x[0]  # <-
        v = sh[0]  # <-
        with ox.unsafe():
            out[t] = v
    return k


@bad(SE, pattern=race("flag", cell="0", writer="thread 127"))
def last_thread_publishes_without_barrier():
    @ox.kernel(block=B)
    def k(x: Slice[i32], out: RawSlice[i32]):
        flag = ox.shared.array(i32, 1)
        t = ox.thread_idx.x
        if t == B - 1:
            flag[0] = x[0]  # <-
        v = flag[0]  # <-
        with ox.unsafe():
            out[t] = v
    return k


@bad(SE, pattern=race("b"))
def second_array_races_first_is_fine():
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: RawSlice[f32]):
        a = ox.shared.array(f32, B)
        b = ox.shared.array(f32, B)
        t = ox.thread_idx.x
        a[t] = x[t]
        b[t] = a[t] * 2.0  # <-
        v = b[(t + 1) % B]  # <-
        with ox.unsafe():
            out[t] = v
    return k


# -- DisjointSlice written at index maps two threads (or two blocks) share


@bad(SE, pattern=rf"two threads write one element of DisjointSlice `out`: {TH} and {TH} "
                 r"of a block both write `out\[\d+\]`.*make the index map one-to-one")
def disjoint_written_at_half_the_thread():
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        t = ox.thread_idx.x
        out[ox.block_idx.x * B + t // 2] = x[t]  # <-
    return k


@bad(SE, pattern=rf"two threads write one element of DisjointSlice `out`: {TH} and {TH} "
                 r"of a block both write `out\[.*\]`.*collides with line")
def block_result_without_a_one_thread_guard():
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        sh = ox.shared.array(f32, B)
        t = thread.in_block()
        sh[t] = x[ox.block_idx.x * B + t]
        ox.sync_threads()
        out[ox.block_idx.x] = sh[0]  # <-
    return k


@bad(SE, pattern=r"cannot prove blocks write different elements of DisjointSlice `out`: the "
                 r"index here depends on block_idx\.x in a way that may let two blocks write "
                 r"one element \(a block's threads spread over 128 values of dimension 0, "
                 r"while block_idx\.x moves it by 64\).*blocks may overlap here")
def disjoint_map_two_blocks_share():
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        t = ox.thread_idx.x
        out[ox.block_idx.x * 64 + t] = x[t]  # <-
    return k


@bad(SE, pattern=r"cannot prove threads write different elements of DisjointSlice `out`: "
                 r"the index here depends on a value that may differ between blocks \(read "
                 r"from memory")
def disjoint_map_offset_by_loaded_data():
    @ox.kernel(block=B)
    def k(x: Slice[f32], start: Slice[i32], out: DisjointSlice[f32]):
        t = ox.thread_idx.x
        out[start[ox.block_idx.x] + t] = x[t]  # <-
    return k


@bad(SE, pattern=rf"two threads write one element of DisjointSlice `out`: {TH} and {TH} "
                 r"of a block both write `out\[\d+\]`")
def block_result_from_every_thread_under_a_uniform_guard():
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: DisjointSlice[f32], n: i32):
        t = thread.in_block()
        if n > 0:
            out[ox.block_idx.x] = x[t]  # <-
    return k


@bad(SE, pattern=r"two threads write one element of DisjointSlice `out`: thread \(x=\d+, "
                 r"y=\d+\) and thread \(x=\d+, y=\d+\) of a block both write `out\[\d+, \d+\]`")
def transpose_rows_stepped_by_7_not_8():
    @ox.kernel(block=(32, 8))
    def k(a: Slice[f32, 2], out: DisjointSlice[f32, 2]):
        tile = ox.shared.array(f32, (32, 33))
        tx = ox.thread_idx.x
        ty = ox.thread_idx.y
        for j in range(4):
            tile[ty + j * 8, tx] = a[ox.block_idx.y * 32 + ty + j * 8, ox.block_idx.x * 32 + tx]
        ox.sync_threads()
        for j in range(4):
            out[ox.block_idx.x * 32 + ty + j * 7, ox.block_idx.y * 32 + tx] = tile[tx, ty + j * 8]  # <-
    return k


@bad(SE, pattern=rf"two threads write one element of DisjointSlice `out`: {TH} and {TH} "
                 r"of a block both write `out\[\d+\]`")
def mapped_write_beside_a_thread_index_write():
    @ox.kernel(block=B)
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d()
        out[ox.block_idx.x * B + (B - 1 - ox.thread_idx.x)] = 1.0  # <-
        if i in out:
            out[i] = 2.0  # <-
    return k


@bad(SE, pattern=r"reads `out\[\d+\]` of DisjointSlice `out` at .*, an element thread \d+ of "
                 r"its block writes")
def thread_index_read_of_an_element_another_thread_maps():
    @ox.kernel(block=B)
    def k(x: Slice[f32], out: DisjointSlice[f32], y: RawSlice[f32]):
        i = thread.index_1d()
        out[ox.block_idx.x * B + (B - 1 - ox.thread_idx.x)] = x[i]  # <-
        if i in out:
            v = out[i]  # <-
            with ox.unsafe():
                y[i] = v
    return k


# -- what the proof needs from the kernel's declaration


@bad(KTE, pattern=r"thread\.in_block\(\) needs the kernel's block shape.*declare it: "
                  r"`@ox\.kernel\(block=")
def in_block_without_a_declared_block():
    @ox.kernel
    def k(x: Slice[f32], out: RawSlice[f32]):
        t = thread.in_block()  # <-
        with ox.unsafe():
            out[t] = x[t]
    return k


@bad(KTE, pattern=r"thread\.in_block\(\) is for 1-D and 2-D blocks; this kernel declares "
                  r"block=\(4, 4, 4\)")
def in_block_in_a_3d_block():
    @ox.kernel(block=(4, 4, 4))
    def k(x: Slice[f32], out: RawSlice[f32]):
        t = thread.in_block()  # <-
        with ox.unsafe():
            out[t] = x[t]
    return k


@bad(SE, pattern=r"writing a shared array outside `with ox\.unsafe\(\):` needs the kernel's "
                 r"block shape")
def shared_write_without_a_declared_block():
    @ox.kernel
    def k(x: Slice[f32]):
        sh = ox.shared.array(f32, B)
        sh[ox.thread_idx.x] = x[ox.thread_idx.x]  # <-
    return k


# -- launches outside what was proved


@ox.kernel(block=B)
def _block_sums(x: Slice[f32], out: DisjointSlice[f32]):
    sh = ox.shared.array(f32, B)
    t = thread.in_block()
    i = ox.block_idx.x * B + t
    sh[t] = x[i] if i < len(x) else 0.0
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
def _copy_at_thread_idx(x: Slice[f32], out: DisjointSlice[f32]):
    t = ox.thread_idx.x
    out[t] = x[t]


@ox.kernel(block=(T, T))
def _tile_copy(a: Slice[f32, 2], out: DisjointSlice[f32, 2]):
    tile = ox.shared.array(f32, (T, T))
    p = thread.in_block()
    row, col = p
    r = ox.block_idx.y * T + row
    c = ox.block_idx.x * T + col
    tile[p] = a[r, c]
    ox.sync_threads()
    out[r, c] = tile[p]


@bad(AE, pattern=r"`_block_sums` is declared with block=128, and its shared-memory accesses "
                 r"are proved race-free for that shape only; this launch has block "
                 r"\(64, 1, 1\)", launch=True)
def launch_with_a_smaller_block_than_declared():
    _block_sums[4, 64](np.zeros(256, np.float32), np.zeros(4, np.float32))


@bad(AE, pattern=r"`_tile_copy` is declared with block=\(16, 16\).*this launch has block "
                 r"\(16, 8, 1\)", launch=True)
def launch_2d_kernel_with_another_block_shape():
    _tile_copy[(1, 1), (16, 8)](np.zeros((16, 16), np.float32),
                                np.zeros((16, 16), np.float32))


@bad(LE, pattern=r"`_copy_at_thread_idx` writes a DisjointSlice at an index map that tells "
                 r"blocks apart by nothing \(every block writes the same elements\); this "
                 r"launch has grid\.x = 4", launch=True)
def thread_idx_map_written_by_many_blocks():
    _copy_at_thread_idx[4, B](np.zeros(512, np.float32), np.zeros(512, np.float32))


@bad(LE, pattern=r"`_block_sums` writes a DisjointSlice at an index map that tells blocks "
                 r"apart by block_idx\.x; this launch has grid\.y = 2", launch=True)
def block_result_with_a_2d_grid():
    _block_sums[ox.LaunchConfig(grid=(2, 2), block=B)](np.zeros(512, np.float32),
                                                       np.zeros(4, np.float32))


@bad(LE, pattern=r"`_tile_copy` writes a DisjointSlice at an index map that tells blocks "
                 r"apart by block_idx\.x, block_idx\.y; this launch has grid\.z = 2",
     launch=True)
def tile_copy_with_a_3d_grid():
    _tile_copy[ox.LaunchConfig(grid=(1, 1, 2), block=(T, T))](
        np.zeros((16, 16), np.float32), np.zeros((16, 16), np.float32))
