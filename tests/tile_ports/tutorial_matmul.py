"""Triton tutorial 03, matmul: a 1-D grid mapped to (pid_m, pid_n) in grouped order
(GROUP_SIZE_M rows of tiles take turns, for L2 reuse), f16 inputs, an f32 accumulator,
an optional leaky-ReLU epilogue (a `@triton.jit` helper), the result rounded to f16."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import Const, DisjointSlice, RawSlice, Slice, TypeVar, f32, i32, tile

T = TypeVar("T")


@tile.func
def leaky_relu(x):
    return tile.where(x >= 0, x, 0.01 * x)


@tile.kernel(num_warps=4)
def matmul_kernel(a: Slice[T, 2], b: Slice[T, 2], c: DisjointSlice[T, 2],
                  BM: Const[int], BN: Const[int], BK: Const[int], GROUP_M: Const[int],
                  LEAKY: Const[bool]):
    """The tutorial's pid arithmetic, written out."""
    pid = tile.bid(0)
    num_pid_m = tile.cdiv(a.shape[0], BM)
    num_pid_n = tile.cdiv(b.shape[1], BN)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.cdiv(a.shape[1], BK)):
        acc = tile.mma(tile.load(a, (pid_m, k), (BM, BK)), tile.load(b, (k, pid_n), (BK, BN)),
                       acc)
    if LEAKY:
        acc = leaky_relu(acc)
    tile.store(c, (pid_m, pid_n), acc.astype(T))


@tile.kernel(num_warps=4)
def matmul_kernel_raw(a: Slice[T, 2], b: Slice[T, 2], c: RawSlice[T, 2],
                      BM: Const[int], BN: Const[int], BK: Const[int], GROUP_M: Const[int],
                      LEAKY: Const[bool]):
    """Workaround 1: the same pid arithmetic, stored through a RawSlice under unsafe."""
    pid = tile.bid(0)
    num_pid_m = tile.cdiv(a.shape[0], BM)
    num_pid_n = tile.cdiv(b.shape[1], BN)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.cdiv(a.shape[1], BK)):
        acc += tile.load(a, (pid_m, k), (BM, BK)) @ tile.load(b, (k, pid_n), (BK, BN))
    if LEAKY:
        acc = leaky_relu(acc)
    with ox.unsafe():
        tile.store(c, (pid_m, pid_n), acc.astype(T))


@tile.kernel(num_warps=4)
def matmul_kernel_grouped(a: Slice[T, 2], b: Slice[T, 2], c: DisjointSlice[T, 2],
                          BM: Const[int], BN: Const[int], BK: Const[int],
                          GROUP_M: Const[int], LEAKY: Const[bool]):
    """Workaround 2, the documented one: tile.grouped_bid does the pid arithmetic."""
    pid_m, pid_n = tile.grouped_bid(tile.num_tiles(a, 0, BM), tile.num_tiles(b, 1, BN),
                                    GROUP_M)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(a, 1, BK)):
        acc += tile.load(a, (pid_m, k), (BM, BK)) @ tile.load(b, (k, pid_n), (BK, BN))
    if LEAKY:
        acc = leaky_relu(acc)
    tile.store(c, (pid_m, pid_n), acc.astype(T))


def grouped_order(m_tiles: int, n_tiles: int, group: int) -> list[tuple[int, int]]:
    """The tutorial's pid -> (pid_m, pid_n) map, in Python."""
    out = []
    for pid in range(m_tiles * n_tiles):
        in_group = group * n_tiles
        first = (pid // in_group) * group
        size = min(m_tiles - first, group)
        out.append((first + (pid % in_group) % size, (pid % in_group) // size))
    return out


def reference(a: np.ndarray, b: np.ndarray, leaky: bool) -> np.ndarray:
    """The f32 product of the same (rounded) inputs, the epilogue in f32."""
    c = a.astype(np.float32) @ b.astype(np.float32)
    if leaky:
        c = np.where(c >= 0, c, np.float32(0.01) * c)
    return c


@tile.kernel(num_warps=1)
def grouped_order_kernel(order: DisjointSlice[i32, 2], GROUP_M: Const[int]):
    """Each block writes its program id at its (pid_m, pid_n) from tile.grouped_bid, to
    compare the order with the tutorial's arithmetic."""
    pid_m, pid_n = tile.grouped_bid(order.shape[0], order.shape[1], GROUP_M)
    tile.store(order, (pid_m, pid_n), tile.bid(0))
