"""numba's Laplace solver: Jacobi relaxation on a 2-D grid with ping-pong buffers.

Written from numba's documentation example (one relaxation step per launch, the host
swapping the two buffers between launches), on a 2-D grid: every interior point becomes
the mean of its four neighbours, the boundary keeps its values.

Friction met while porting (see tests/test_ports.py for the checks that pin it):

- The in-kernel ping-pong, `src = a if step % 2 == 0 else b` and `dst = b if step % 2 ==
  0 else a`, works (issue 15 item 2): the two choices are made by one computation of the
  scalar `step`, arms swapped, so every thread reads the array the launch does not write
  (passes/disjoint_reads.py; `a` and `b` may not alias: the launch refuses it). It was
  refused as a read of a DisjointSlice the kernel writes until the read rule followed the
  choices.
- The same choice through an `if/else` statement (`src = a` / `src = b`) was refused with
  "`src` is an array and cannot be rebound"; it works now (issue 15 item 2), as does the
  swap `src, dst = dst, src` in a loop (tests/test_array_rebinding.py).
- Calling one `@ox.func` on `(a, b)` in one branch and on `(b, a)` in the other compiles
  the func twice but fails the safety pass: `a` is a DisjointSlice the kernel writes (in
  one branch), so its neighbour reads are refused. The error's hint says "read `a[i]`
  with the ThreadIndex `i`" although the thread's index is the 2-D `ij`, and flags
  `src[i, j]` with `i, j = ij.row, ij.col` (the thread's own element) too.
- numba's own example keeps every time step in one launch, with a grid-wide barrier
  between steps (`cuda.cg.this_grid().sync()`). `ox.grid.this_grid()` was "`ox` has no
  attribute `grid`"; it works now (issue 15 item 11: `natural_grid_sync`, a cooperative
  launch on the GPU). numba's `i, j = cuda.grid(2)` spelled `ox.grid(2)` is an error whose
  hint names the oxide spelling, `thread.index_2d()`. Note also that numba's
  `x, y = cuda.grid(2); a[x, y]` indexes the first axis with the x dimension, while
  `index_2d().row` follows y: a port that keeps numba's launch shape is still correct,
  but transposes its memory access pattern.
- Workarounds that work: (1) the host swap (`jacobi_step`), which is what numba's example
  does anyway; (2) the parity as a `Const[int]` parameter, so that an `if` on it keeps
  one branch and each name is bound once (`jacobi_step_parity`, two specializations);
  (3) `RawSlice` buffers and a device function under `with ox.unsafe():`
  (`jacobi_step_raw`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import oxide as ox
from oxide import Const, DisjointSlice, RawSlice, Slice, f32, i32, thread

BLOCK = (16, 16)


@ox.kernel
def jacobi_step(src: Slice[f32, 2], dst: DisjointSlice[f32, 2]):
    """One relaxation step from `src` into `dst`; the boundary is copied."""
    ij = thread.index_2d()
    i, j = ij.row, ij.col
    n, m = src.shape
    if ij in dst:
        if i == 0 or j == 0 or i == n - 1 or j == m - 1:
            dst[ij] = src[i, j]
        else:
            dst[ij] = 0.25 * (src[i - 1, j] + src[i + 1, j] + src[i, j - 1] + src[i, j + 1])


@ox.kernel
def jacobi_step_parity(a: DisjointSlice[f32, 2], b: DisjointSlice[f32, 2], parity: Const[int]):
    """In-kernel ping-pong, workaround 2: the parity is a compile-time constant, so only
    one arm of the `if` is compiled and `src`/`dst` are each bound once; in each
    specialization one buffer is only read (reads anywhere) and the other only written."""
    ij = thread.index_2d()
    if parity == 0:
        src = a
        dst = b
    else:
        src = b
        dst = a
    i, j = ij.row, ij.col
    n, m = src.shape
    if ij in dst:
        if i == 0 or j == 0 or i == n - 1 or j == m - 1:
            dst[ij] = src[i, j]
        else:
            dst[ij] = 0.25 * (src[i - 1, j] + src[i + 1, j] + src[i, j - 1] + src[i, j + 1])


@ox.func
def relax_raw(src, dst, i, j):
    """One point of a step on RawSlices: the caller vouches that `src` is not written."""
    n, m = src.shape
    if i < n and j < m:
        with ox.unsafe():
            if i == 0 or j == 0 or i == n - 1 or j == m - 1:
                dst[i, j] = src[i, j]
            else:
                dst[i, j] = 0.25 * (src[i - 1, j] + src[i + 1, j] + src[i, j - 1]
                                    + src[i, j + 1])


@ox.kernel
def jacobi_step_raw(a: RawSlice[f32, 2], b: RawSlice[f32, 2], step: i32):
    """In-kernel ping-pong, workaround 3: a run-time step, one device function called with
    the buffers in either order, RawSlices under `ox.unsafe()`."""
    ij = thread.index_2d()
    if step % 2 == 0:
        relax_raw(a, b, ij.row, ij.col)
    else:
        relax_raw(b, a, ij.row, ij.col)


def natural_ternary() -> ox.Kernel:
    """The in-kernel form as a CUDA/numba user writes it first (issue 15 item 2)."""

    @ox.kernel
    def jacobi_ternary(a: DisjointSlice[f32, 2], b: DisjointSlice[f32, 2], step: i32):
        ij = thread.index_2d()
        src = a if step % 2 == 0 else b
        dst = b if step % 2 == 0 else a
        i, j = ij.row, ij.col
        n, m = src.shape
        if ij in dst:
            if i == 0 or j == 0 or i == n - 1 or j == m - 1:
                dst[ij] = src[i, j]
            else:
                dst[ij] = 0.25 * (src[i - 1, j] + src[i + 1, j] + src[i, j - 1] + src[i, j + 1])

    return jacobi_ternary


def natural_if_else() -> ox.Kernel:
    """The same choice through an `if/else` statement on a run-time step."""

    @ox.kernel
    def jacobi_if_else(a: RawSlice[f32, 2], b: RawSlice[f32, 2], step: i32):
        ij = thread.index_2d()
        if step % 2 == 0:
            src = a
            dst = b
        else:
            src = b
            dst = a
        relax_raw(src, dst, ij.row, ij.col)

    return jacobi_if_else


@ox.func
def relax_disjoint(src, dst, ij):
    """One point of a step written as for DisjointSlices (used by `natural_func_swap`)."""
    i, j = ij.row, ij.col
    n, m = src.shape
    if ij in dst:
        if i == 0 or j == 0 or i == n - 1 or j == m - 1:
            dst[ij] = src[i, j]
        else:
            dst[ij] = 0.25 * (src[i - 1, j] + src[i + 1, j] + src[i, j - 1] + src[i, j + 1])


def natural_func_swap() -> ox.Kernel:
    """A device function called on (a, b) or (b, a): both buffers DisjointSlices."""

    @ox.kernel
    def jacobi_func_swap(a: DisjointSlice[f32, 2], b: DisjointSlice[f32, 2], step: i32):
        ij = thread.index_2d()
        if step % 2 == 0:
            relax_disjoint(a, b, ij)
        else:
            relax_disjoint(b, a, ij)

    return jacobi_func_swap


def natural_grid_sync() -> ox.Kernel:
    """numba's shape: all steps in one launch, a grid-wide barrier between them."""

    @ox.kernel
    def jacobi_grid_sync(a: RawSlice[f32, 2], b: RawSlice[f32, 2], steps: i32):
        ij = thread.index_2d()
        grid = ox.grid.this_grid()
        for step in range(steps):
            if step % 2 == 0:
                relax_raw(a, b, ij.row, ij.col)
            else:
                relax_raw(b, a, ij.row, ij.col)
            grid.sync()

    return jacobi_grid_sync


def natural_cuda_grid() -> ox.Kernel:
    """numba's `i, j = cuda.grid(2)` spelled `ox.grid(2)`."""

    @ox.kernel
    def jacobi_cuda_grid(src: Slice[f32, 2], dst: RawSlice[f32, 2]):
        i, j = ox.grid(2)
        relax_raw(src, dst, i, j)

    return jacobi_cuda_grid


def initial_grid(rows: int, cols: int) -> np.ndarray:
    """A plate with a hot top edge, a warm left edge and a cold inside."""
    a = np.zeros((rows, cols), np.float32)
    a[0, :] = 1.0
    a[:, 0] = 0.5
    return a


def reference(a: np.ndarray, steps: int) -> np.ndarray:
    """`steps` Jacobi steps in NumPy, in f32 and in the kernel's order of additions."""
    a = a.copy()
    for _ in range(steps):
        b = a.copy()
        b[1:-1, 1:-1] = np.float32(0.25) * (((a[:-2, 1:-1] + a[2:, 1:-1]) + a[1:-1, :-2])
                                             + a[1:-1, 2:])
        a = b
    return a


def _config(shape: tuple[int, int]) -> ox.LaunchConfig:
    rows, cols = shape
    return ox.LaunchConfig(grid=(-(-cols // BLOCK[0]), -(-rows // BLOCK[1])), block=BLOCK)


def solve_host_swap(a0: np.ndarray, steps: int) -> np.ndarray:
    """numba's scheme: one launch per step, the host swapping the buffers."""
    cfg = _config(a0.shape)
    src, dst = ox.to_device(a0), ox.to_device(a0)
    for _ in range(steps):
        jacobi_step[cfg](src, dst)
        src, dst = dst, src
    return src.copy_to_host()


def solve_in_kernel(kernel: Callable, a0: np.ndarray, steps: int, *, parity: bool) -> np.ndarray:
    """The buffers stay put; the kernel picks its source from the step (or its parity)."""
    cfg = _config(a0.shape)
    a, b = ox.to_device(a0), ox.to_device(a0)
    for s in range(steps):
        kernel[cfg](a, b, s % 2 if parity else s)
    return (a if steps % 2 == 0 else b).copy_to_host()
