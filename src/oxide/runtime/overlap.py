"""Whether a strided array's elements overlap one another: the launch check of writable arrays.

Why it matters: a writable argument whose elements share memory (a broadcast view,
`np.lib.stride_tricks.as_strided(buf, (4, 4), (4, 4))`, `sliding_window_view(...,
writeable=True)`) lets two threads holding distinct ThreadIndex witnesses write the
same bytes. DisjointSlice's race freedom and the `noalias` the compiler gives array
parameters both rest on distinct elements having distinct addresses. Read-only
(`Slice`) arguments may overlap themselves: reading one address twice is harmless.

The test (strides in elements, as `ArrayView` holds them):

- a dimension of extent 1 does not matter (its index is always 0), and an empty array
  has no elements to overlap;
- negating a stride mirrors the array along that dimension, which translates the set
  of element offsets, so only |stride| matters;
- sort the dimensions by |stride|: if each |stride| exceeds the span `sum (n - 1) *
  |stride|` of all the smaller ones, the offsets are a mixed-radix numbering and all
  distinct. Every layout NumPy, torch or CuPy slicing and transposing makes passes.
- otherwise a zero stride or two equal strides overlap for sure. Two dimensions
  (|strides| a, b > 0, extents n, m) overlap exactly when a * x == b * y has a nonzero
  solution with |x| < n, |y| < m; the smallest is x = b / g, y = a / g (g = gcd(a, b)),
  so exactly when b / g < n and a / g < m. Any other layout (three or more
  interleaved dimensions) is decided exactly by listing its offsets when it has at most
  `EXACT_LIMIT` elements, and refused beyond (oxide cannot prove it safe; a contiguous
  copy is).

>>> self_overlap((4, 4), (1, 1))
1
>>> self_overlap((4, 4), (-4, 1))
0
"""

from __future__ import annotations

import functools
import math

import numpy as np

DISJOINT, OVERLAPS, UNPROVED = 0, 1, 2
EXACT_LIMIT = 1 << 20  # elements listed by the exact test (~20 ms at the limit, cached)


def self_overlap(shape: tuple[int, ...], strides: tuple[int, ...]) -> int:
    """DISJOINT when every element has its own address, OVERLAPS when two share one,
    UNPROVED when the layout is too large for the exact test.

    Runs on every launch of a writable strided array: ranks 1 and 2 take no sort."""
    rank = len(shape)
    if rank == 1:
        return OVERLAPS if strides[0] == 0 and shape[0] > 1 else DISJOINT
    if rank == 2:
        n, m = shape
        a, b = strides
        if a < 0:
            a = -a
        if b < 0:
            b = -b
        if n > 1 and m > 1:
            if (b and a > (m - 1) * b) or (a and b > (n - 1) * a):
                return DISJOINT
            return _two((a, n), (b, m))
        if n == 0 or m == 0:
            return DISJOINT
        return OVERLAPS if (a if m == 1 else b) == 0 and n * m > 1 else DISJOINT
    return _slow(shape, strides)


def _two(first: tuple[int, int], second: tuple[int, int]) -> int:
    """Two dimensions of extents > 1, as (|stride|, extent): decided exactly (the docstring)."""
    (a, n), (b, m) = first, second
    if a == 0 or b == 0:
        return OVERLAPS
    g = math.gcd(a, b)
    return OVERLAPS if b // g < n and a // g < m else DISJOINT


_MEMO: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}  # rank >= 3: the sort costs
_MEMO_SIZE = 4096


def _slow(shape: tuple[int, ...], strides: tuple[int, ...]) -> int:
    key = (shape, strides)
    found = _MEMO.get(key)
    if found is None:
        if len(_MEMO) >= _MEMO_SIZE:
            _MEMO.clear()
        found = _MEMO[key] = _decide(shape, strides)
    return found


def _decide(shape: tuple[int, ...], strides: tuple[int, ...]) -> int:
    dims = []
    for n, s in zip(shape, strides, strict=True):
        if n == 0:
            return DISJOINT
        if n > 1:
            dims.append((s if s >= 0 else -s, n))
    dims.sort()
    span = 0  # the largest offset the smaller dimensions reach
    for s, n in dims:
        if s <= span:
            break
        span += (n - 1) * s
    else:
        return DISJOINT
    if any(s == 0 for s, _ in dims) or len({s for s, _ in dims}) < len(dims):
        return OVERLAPS  # a zero stride, or two dimensions stepping alike
    if len(dims) == 2:
        return _two(dims[0], dims[1])
    return _exact(tuple(dims))


@functools.lru_cache(maxsize=256)
def _exact(dims: tuple[tuple[int, int], ...]) -> int:
    """List the offsets of the (|stride|, extent) dimensions and look for a repeat."""
    if math.prod(n for _, n in dims) > EXACT_LIMIT:
        return UNPROVED
    offsets = np.zeros(1, np.int64)
    for s, n in dims:
        offsets = (offsets[:, None] + np.arange(n, dtype=np.int64) * s).ravel()
    offsets.sort()
    return OVERLAPS if bool((offsets[1:] == offsets[:-1]).any()) else DISJOINT
