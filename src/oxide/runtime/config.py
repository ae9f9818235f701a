"""`ox.LaunchConfig`: grid, block, dynamic shared memory and clusters of a launch."""

from __future__ import annotations

import operator
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from oxide.errors import LaunchError

Dim3 = tuple[int, int, int]


def as_dim3(value: Any, what: str) -> Dim3:
    """Normalize an int or a 1-3 tuple to (x, y, z), rejecting zeros and negatives."""
    if value.__class__ is tuple:  # fast paths for tuples of plain positive ints
        n = len(value)
        if n == 3:
            x, y, z = value
            if (x.__class__ is int and y.__class__ is int and z.__class__ is int
                    and x > 0 and y > 0 and z > 0):
                return value  # type: ignore[no-any-return]
        elif n == 2:
            x, y = value
            if x.__class__ is int and y.__class__ is int and x > 0 and y > 0:
                return (x, y, 1)
    if isinstance(value, (tuple, list)):
        if not 1 <= len(value) <= 3:
            raise LaunchError(f"{what} must be an int or a tuple of 1 to 3 ints, got {value!r}")
        items: tuple[Any, ...] = tuple(value)
    elif as_int(value) is None:
        raise LaunchError(f"{what} must be an int or a tuple of 1 to 3 ints, got {value!r}")
    else:
        items = (value,)
    dims = []
    for v in items:
        n = as_int(v)
        if n is None or n < 1:
            raise LaunchError(f"{what} dimensions must be positive ints, got {value!r}")
        dims.append(n)
    x, y, z = (*dims, 1, 1)[:3]
    return (x, y, z)


def as_int(value: Any) -> int | None:
    """A plain int for any integer (`operator.index`: NumPy integers too), else None.

    Bools are not sizes (`True` is a mistake more often than a 1), nor are floats."""
    if isinstance(value, (bool, np.bool_)):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


_set = object.__setattr__  # a frozen dataclass sets its fields through object
MAX_CLUSTER = 8  # blocks per cluster that every sm_90 GPU runs (16 needs a non-portable opt-in)


def _cluster(value: Any, grid: Dim3) -> Dim3 | None:
    """`cluster=` as (x, y, z), or None for clusters of one block; an ArgumentError when
    the grid is not a whole number of clusters or a cluster is larger than 8 blocks."""
    from oxide.errors import ArgumentError

    c = as_dim3(value, "cluster")
    size = c[0] * c[1] * c[2]
    if size > MAX_CLUSTER:
        raise ArgumentError(f"a cluster has at most {MAX_CLUSTER} blocks; cluster={c} has "
                            f"{size}")
    for axis, g, n in zip("xyz", grid, c, strict=True):
        if g % n:
            raise ArgumentError(f"the grid is a whole number of clusters: grid.{axis} = {g} "
                                f"is not a multiple of cluster.{axis} = {n} (round it up to "
                                f"{-(-g // n) * n} and let the extra blocks return)")
    return None if size == 1 else c
_DIMS = struct.Struct("@7I")


@dataclass(frozen=True, init=False, slots=True)
class LaunchConfig:
    """Where a kernel runs: `grid` blocks of `block` threads, plus dynamic shared memory.

    >>> LaunchConfig.for_num_elems(1000).grid
    (4, 1, 1)
    """

    grid: Dim3
    block: Dim3
    shared_mem_bytes: int
    # grid, block and shared memory as the driver's seven u32 (runtime/native_launch.py)
    dims: bytes = field(init=False, repr=False, compare=False)
    # thread-block clusters (sm_90): blocks per cluster along x, y, z; None for none (a
    # cluster of one). `grid` still counts blocks, a multiple of the cluster on each axis.
    cluster: Dim3 | None = None

    def __init__(self, grid: Any = 1, block: Any = 1, shared_mem_bytes: int = 0,
                 cluster: Any = None) -> None:
        # Made per launch by `kernel[grid, block]`: plain positive ints skip as_dim3.
        g = (grid, 1, 1) if grid.__class__ is int and grid > 0 else as_dim3(grid, "grid")
        b = (block, 1, 1) if block.__class__ is int and block > 0 else as_dim3(block, "block")
        if shared_mem_bytes.__class__ is not int:
            smem = as_int(shared_mem_bytes)
            if smem is None:
                raise LaunchError(f"shared_mem_bytes must be a non-negative int, "
                                  f"got {shared_mem_bytes!r}")
            shared_mem_bytes = smem
        if shared_mem_bytes < 0:
            raise LaunchError(f"shared_mem_bytes must be a non-negative int, "
                              f"got {shared_mem_bytes!r}")
        threads = b[0] * b[1] * b[2]
        if threads > 1024:
            raise LaunchError(f"a block has at most 1024 threads; {b} has {threads}")
        try:
            dims = _DIMS.pack(*g, *b, shared_mem_bytes)
        except struct.error:
            raise LaunchError(f"grid {g}, block {b} or shared_mem_bytes {shared_mem_bytes} is "
                              "beyond what a CUDA launch takes (32-bit unsigned)") from None
        _set(self, "grid", g)
        _set(self, "block", b)
        _set(self, "shared_mem_bytes", shared_mem_bytes)
        _set(self, "dims", dims)
        _set(self, "cluster", None if cluster is None else _cluster(cluster, g))

    @property
    def cluster_size(self) -> int:
        c = self.cluster
        return 1 if c is None else c[0] * c[1] * c[2]

    @classmethod
    def for_num_elems(cls, n: int, block: int = 256) -> LaunchConfig:
        """One thread per element, `block` threads per block, enough blocks to cover `n`."""
        count, size = as_int(n), as_int(block)
        if count is None or count < 0:
            raise LaunchError(f"n must be a non-negative int, got {n!r}")
        if size is None or size < 1:
            raise LaunchError(f"block must be a positive int, got {block!r}")
        return cls(grid=max(1, -(-count // size)), block=size)

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]
