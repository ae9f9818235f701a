"""Unsafe programs that must never compile: races through DisjointSlice reads and writes,
barriers only some threads reach, reads of variables some paths never assign (issue 14
items 2, 4, 5), and write-discipline breaches in new combinations."""

# ruff: noqa: F841, F842, B007, E731, F821 - the corpus is bad kernels on purpose

from __future__ import annotations

import oxide as ox
from oxide import AtomicSlice, DisjointSlice, RawSlice, Slice, f32, i32, i64, thread

from . import bad

KSE, KTE, SE = ox.KernelSyntaxError, ox.KernelTypeError, ox.SafetyError

TABLE = ox.ConstantArray(f32, (16,))

# -- item 2: a DisjointSlice read at another thread's index races with that thread's write


@bad(SE, pattern=r"DisjointSlice|race|another thread")
def disjoint_read_next_element():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = out[i + 1] + 1.0  # <-
    return k


@bad(SE, pattern=r"DisjointSlice|race|another thread")
def disjoint_read_previous_element_before_write():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d()
        v = out[i - 1]  # <-
        if i in out:
            out[i] = v
    return k


@bad(SE, pattern=r"DisjointSlice|race|another thread")
def disjoint_read_element_zero():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = out[0] * 2.0  # <-
    return k


@bad(SE, pattern=r"DisjointSlice|race|another thread")
def disjoint_read_in_loop():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d()
        acc = f32(0)
        for j in range(len(out)):
            acc += out[j]  # <-
        if i in out:
            out[i] = acc
    return k


@bad(SE, pattern=r"DisjointSlice|race|another thread")
def disjoint_2d_read_neighbour_column():
    @ox.kernel
    def k(out: DisjointSlice[f32, 2]):
        w = thread.index_2d()
        if w in out:
            out[w] = out[w.row, w.col + 1]  # <-
    return k


@bad(SE, pattern=r"DisjointSlice|race|another thread")
def disjoint_read_through_func():
    @ox.func
    def left(a, j):
        return a[j - 1]  # <-

    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = left(out, i)
    return k


# -- item 4: barriers and block collectives every thread of the block must reach


@bad(SE, pattern=r"barrier|thread-dependent|every thread|diverg")
def block_reduce_under_thread_branch():
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        s = f32(0)
        if i < 3:
            s = ox.block.reduce_add(x[i])  # <-
        if i in out:
            out[i] = s
    return k


@bad(SE, pattern=r"barrier|thread-dependent|every thread|diverg")
def sync_threads_for_thread_zero():
    @ox.kernel
    def k(x: Slice[f32]):
        if ox.thread_idx.x == 0:
            ox.sync_threads()  # <-
    return k


@bad(SE, pattern=r"waits for every thread of the block.*depends on `i >= len\(out\)`")
def block_collective_after_bounds_return():
    # `ox.sync_threads()` after the early return is fine (CUDA's barriers do not wait
    # for exited threads); a block collective is not: it combines every thread's value
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i >= len(out):
            return
        s = ox.block.reduce_add(x[i])  # <-
        out[i] = s
    return k


@bad(SE, pattern=r"barrier|thread-dependent|every thread|diverg")
def sync_threads_in_thread_dependent_loop():
    @ox.kernel
    def k(x: Slice[f32]):
        for j in range(ox.thread_idx.x):
            ox.sync_threads()  # <-
    return k


@bad(SE, pattern=r"barrier|thread-dependent|every thread|diverg")
def exclusive_scan_in_else_branch():
    @ox.kernel
    def k(x: Slice[i32], out: DisjointSlice[i32]):
        i = thread.index_1d()
        v = i32(0)
        if ox.lane_id() == 0:
            v = 1
        else:
            v = ox.block.exclusive_scan(x[i])  # <-
        if i in out:
            out[i] = v
    return k


@bad(SE, pattern=r"barrier|thread-dependent|every thread|diverg")
def reduce_max_under_data_condition():
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        m = f32(0)
        if x[i] > 0.0:
            m = ox.block.reduce_max(x[i])  # <-
        if i in out:
            out[i] = m
    return k


@bad(SE, pattern=r"barrier|thread-dependent|every thread|diverg|break")
def barrier_after_thread_dependent_break():
    @ox.kernel
    def k(x: Slice[f32]):
        for j in range(8):
            if ox.thread_idx.x == j:
                break
            ox.sync_threads()  # <-
    return k


@bad(SE, pattern=r"barrier|thread-dependent|every thread|diverg")
def barrier_in_func_called_under_branch():
    @ox.func
    def stage():
        ox.sync_threads()  # <-

    @ox.kernel
    def k(x: Slice[f32]):
        if ox.thread_idx.x < 16:
            stage()  # <-
    return k


@bad(SE, pattern=r"barrier|thread-dependent|every thread|diverg")
def barrier_in_while_on_thread_index():
    @ox.kernel
    def k(x: Slice[f32]):
        j = i32(ox.thread_idx.x)
        while j < 64:
            ox.sync_threads()  # <-
            j += 32
    return k


@bad(SE, pattern=r"barrier|thread-dependent|every thread|diverg")
def barrier_under_witness_guard():
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            total = ox.block.reduce_add(x[i])  # <-
            out[i] = total
    return k


# -- item 5: variables that may be unassigned


@bad(KSE, pattern=r"unassigned|not (be )?(always )?assigned|every path|before assignment|may not")
def assigned_only_in_if_branch():
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i < 1:
            v = x[0]
        if i in out:
            out[i] = v  # <-
    return k


@bad(KSE, pattern=r"unassigned|not (be )?(always )?assigned|every path|before assignment|may not|zero")
def loop_variable_after_runtime_range():
    @ox.kernel
    def k(n: i32, out: DisjointSlice[i32]):
        i = thread.index_1d()
        for j in range(n):
            pass
        if i in out:
            out[i] = j  # <-
    return k


@bad(KSE, pattern=r"unassigned|not (be )?(always )?assigned|every path|before assignment|may not")
def assigned_in_while_body_only():
    @ox.kernel
    def k(n: i32, out: DisjointSlice[i32]):
        i = thread.index_1d()
        c = i32(0)
        while c < n:
            last = c
            c += 1
        if i in out:
            out[i] = last  # <-
    return k


@bad(KSE, pattern=r"unassigned|not (be )?(always )?assigned|every path|before assignment|may not")
def assigned_in_if_and_elif_only():
    @ox.kernel
    def k(a: f32, out: DisjointSlice[f32]):
        i = thread.index_1d()
        if a > 0.0:
            s = 1.0
        elif a < 0.0:
            s = -1.0
        if i in out:
            out[i] = s  # <-
    return k


@bad(KSE, pattern=r"unassigned|not (be )?(always )?assigned|every path|before assignment|may not")
def assigned_after_possible_break():
    @ox.kernel
    def k(x: Slice[f32], n: i32, out: DisjointSlice[f32]):
        i = thread.index_1d()
        for j in range(4):
            if n > j:
                break
            v = x[j]
        if i in out:
            out[i] = v  # <-
    return k


@bad(KSE, pattern=r"unassigned|not (be )?(always )?assigned|every path|before assignment|may not")
def assigned_under_guard_read_outside():
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in x:
            v = x[i]
        print(v)  # <-
    return k


@bad(KSE, pattern=r"unassigned|not (be )?(always )?assigned|every path|before assignment|may not")
def augmented_assign_of_conditionally_assigned():
    @ox.kernel
    def k(a: f32, out: DisjointSlice[f32]):
        i = thread.index_1d()
        if a > 0.0:
            acc = a
        acc += 1.0  # <-
    return k


# -- write disciplines, new combinations


@bad(SE, pattern=r"DisjointSlice.*ThreadIndex")
def disjoint_written_at_thread_idx_register():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        if ox.thread_idx.x < len(out):
            out[ox.thread_idx.x] = 1.0  # <-
    return k


@bad(SE, pattern=r"DisjointSlice.*ThreadIndex")
def disjoint_written_at_block_idx():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        out[ox.block_idx.x] = 1.0  # <-
    return k


@bad(SE, pattern=r"DisjointSlice.*ThreadIndex")
def disjoint_written_at_lane_id():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        out[ox.lane_id()] = 1.0  # <-
    return k


@bad(SE, pattern=r"DisjointSlice.*ThreadIndex")
def disjoint_written_at_witness_times_one():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i * 1] = 1.0  # <-
    return k


@bad(SE, pattern=r"DisjointSlice.*ThreadIndex|witness")
def disjoint_written_at_witness_or_zero():
    @ox.kernel
    def k(flag: i32, out: DisjointSlice[f32]):
        i = thread.index_1d()
        j = i if flag else 0  # <-
        if i in out:
            out[j] = 1.0  # <-
    return k


@bad(SE, pattern=r"DisjointSlice.*ThreadIndex")
def disjoint_written_at_2d_row_in_1d_array():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        w = thread.index_2d()
        if w.row < len(out):
            out[w.row] = 1.0  # <-
    return k


@bad(SE, pattern=r"DisjointSlice.*ThreadIndex")
def disjoint_written_in_func_at_plain_int():
    @ox.func
    def put(a, j, v):
        a[j] = v  # <-

    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d()
        put(out, i + 1, 1.0)
    return k


@bad(SE, pattern=r"DisjointSlice.*ThreadIndex")
def disjoint_written_at_loaded_index():
    @ox.kernel
    def k(idx: Slice[i64], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in idx:
            out[idx[i]] = 1.0  # <-
    return k


@bad(SE, pattern=r"not bounds-guarded")
def disjoint_written_after_guard_on_input():
    @ox.kernel
    def k(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i < len(x):
            out[i] = x[i]  # <-
    return k


@bad(SE, pattern=r"atomics need an AtomicSlice|AtomicSlice")
def atomic_on_disjoint_slice():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        ox.atomic.add(out, 0, 1.0)  # <-
    return k


@bad(SE, pattern=r"AtomicSlice|ox\.atomic")
def atomic_slice_augmented_assign():
    @ox.kernel
    def k(total: AtomicSlice[f32]):
        total[0] += 1.0  # <-
    return k


@bad(SE, pattern=r"shared array.*ox\.unsafe\(\)|ox\.unsafe\(\)")
def shared_array_read_outside_unsafe():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d()
        s = ox.shared.array(f32, 32)
        if i in out:
            out[i] = s[ox.thread_idx.x]  # <-
    return k


@bad(SE, pattern=r"shared|ox\.unsafe\(\)")
def dynamic_shared_write_outside_unsafe():
    @ox.kernel
    def k(x: Slice[f32]):
        s = ox.shared.dynamic(f32)
        s[ox.thread_idx.x] = 1.0  # <-
    return k


@bad(SE, KTE, pattern=r"constant|read-only|cannot be written|write")
def constant_array_write():
    @ox.kernel
    def k(x: Slice[f32]):
        with ox.unsafe():
            TABLE[0] = 1.0  # <-
    return k


@bad(SE, pattern=r"Slice.*read-only")
def slice_written_inside_unsafe():
    @ox.kernel
    def k(a: Slice[f32]):
        i = thread.index_1d()
        with ox.unsafe():
            a[i] = 1.0  # <-
    return k


@bad(SE, pattern=r"RawSlice.*ox\.unsafe\(\)")
def raw_write_in_func_outside_unsafe():
    @ox.func
    def poke(a, j):
        a[j] = 0.0  # <-

    @ox.kernel
    def k(a: RawSlice[f32]):
        poke(a, 3)
    return k


@bad(SE, pattern=r"ThreadIndex.*cannot be rebound|rebound")
def witness_rebound_in_branch():
    @ox.kernel
    def k(n: i64, out: DisjointSlice[f32]):
        i = thread.index_1d()
        if n > 0:
            i = thread.index_1d()  # <-
        if i in out:
            out[i] = 1.0
    return k


@bad(SE, pattern=r"ThreadIndex|cannot be rebound|plain")
def witness_swapped_with_int():
    @ox.kernel
    def k(out: DisjointSlice[f32]):
        i = thread.index_1d()
        j = i64(0)
        i, j = j, i  # <-
        if i in out:
            out[i] = 1.0
    return k


# -- warp collectives whose mask names lanes that never get there (undefined in CUDA:
# every lane of the mask must execute the same collective)


@bad(SE, pattern=r"mask|lane|warp|thread-dependent|every")
def warp_reduce_full_mask_under_lane_branch():
    @ox.kernel
    def k(out: DisjointSlice[i32]):
        i = thread.index_1d()
        s = i32(0)
        if ox.lane_id() < 16:
            s = ox.warp.reduce_add(i32(1))  # <-
        if i in out:
            out[i] = s
    return k


@bad(SE, pattern=r"mask|lane|warp|thread-dependent|every")
def sync_warp_under_lane_branch():
    @ox.kernel
    def k(x: Slice[f32]):
        if ox.lane_id() % 2 == 0:
            ox.sync_warp()  # <-
    return k
