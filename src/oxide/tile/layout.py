"""Blocked layouts: which of a tile block's threads holds which elements of a tile.

A tile block has `num_warps * 32` threads. A tile of a static power-of-two shape is
spread over them as Triton's blocked layouts do: along each dimension `d`

    coordinate = rep * spc_d + (warp_d * tpw_d + lane_d) * spt_d + s

where `lane_d = (lane >> lane_shift_d) & (tpw_d - 1)` and `warp_d = (warp >> warp_shift_d)
& (wpc_d - 1)` pick a contiguous group of lane bits and of warp bits for the dimension,
`spt_d` elements sit side by side in one thread (`s < spt_d`), `spc_d = spt_d * tpw_d *
wpc_d` is what one pass of the whole block covers, and `rep < shape_d / spc_d` repeats
it when the tile is larger. A thread's elements are its *slots*: one static offset per
dimension (`rep * spc_d + s`) added to the thread's base, so every tile op is a loop over
slots at compile time.

What it assumes and guarantees:
- shapes are powers of two and `spt_d <= shape_d`;
- where one pass covers more than the tile (`spc_d > shape_d`, small tiles, and the
  bits left to no dimension), several threads hold the same element: *replicas*. The
  coordinate then wraps (`base & (shape_d - 1)`), every replica holds the element's value,
  and `owner` says which thread is its one canonical holder (stores and reductions count
  only that one);
- two layouts with equal `key()` put the same element in the same slot of every thread,
  so ops between them need no data movement; otherwise `tile/lower.py` converts through
  shared memory.

A reduction along `d` keeps the parent's map for the other dimensions (a *slice*
layout): the bits of `d` become replica bits, so broadcasting the result back against
the parent (`x - tile.max(x, 1, keepdims=True)`) moves nothing.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

WARP_SIZE = 32
# elements side by side in one thread along the innermost dimension: 4 x 32-bit is one
# 128-bit access (the vector width the next step, vectorized loads, will use)
VECTOR = 4


@dataclass(frozen=True)
class DimMap:
    """How one dimension is spread: elements per thread, then lanes, then warps."""

    spt: int = 1
    lane_shift: int = 0
    tpw: int = 1
    warp_shift: int = 0
    wpc: int = 1

    @property
    def span(self) -> int:
        """Elements one pass of the block covers along this dimension (`spc`)."""
        return self.spt * self.tpw * self.wpc


@dataclass(frozen=True)
class Layout:
    """A tile shape and how each of its dimensions maps onto lanes and warps."""

    shape: tuple[int, ...]
    dims: tuple[DimMap, ...]
    num_warps: int

    def key(self) -> tuple[object, ...]:
        """Equal keys: the same element in the same slot of every thread. A dimension of
        extent 1 holds coordinate 0 wherever its bits go, so its map does not count."""
        return (self.shape, tuple(DimMap() if n == 1 else m
                                  for n, m in zip(self.shape, self.dims, strict=True)))

    @property
    def threads(self) -> int:
        return self.num_warps * WARP_SIZE

    def reps(self, d: int) -> int:
        return max(1, self.shape[d] // self.dims[d].span)

    def offsets(self) -> list[tuple[int, ...]]:
        """The static offset of each slot, in slot order (row-major over dimensions)."""
        per_dim = []
        for d, m in enumerate(self.dims):
            span = m.span
            per_dim.append([r * span + s for r in range(self.reps(d)) for s in range(m.spt)])
        return list(itertools.product(*per_dim))

    @property
    def slots(self) -> int:
        n = 1
        for d, m in enumerate(self.dims):
            n *= self.reps(d) * m.spt
        return n

    def wraps(self, d: int) -> bool:
        """Whether a pass covers more than the tile along `d` (threads past it are replicas)."""
        return self.dims[d].span > self.shape[d]

    def lane_bits(self) -> int:
        """The lane bits some dimension of extent > 1 uses."""
        bits = 0
        for n, m in zip(self.shape, self.dims, strict=True):
            if n > 1:
                bits |= (m.tpw - 1) << m.lane_shift
        return bits

    def warp_bits(self) -> int:
        bits = 0
        for n, m in zip(self.shape, self.dims, strict=True):
            if n > 1:
                bits |= (m.wpc - 1) << m.warp_shift
        return bits

    # -- derived layouts ------------------------------------------------------------

    def drop(self, d: int) -> Layout:
        """The layout of a reduction along `d` without keepdims: its bits become replicas."""
        return Layout(self.shape[:d] + self.shape[d + 1:], self.dims[:d] + self.dims[d + 1:],
                      self.num_warps)

    def squeeze(self, d: int) -> Layout:
        """The layout of a reduction along `d` with keepdims: extent 1, one element per thread."""
        m = self.dims[d]
        dims = (*self.dims[:d], DimMap(1, m.lane_shift, m.tpw, m.warp_shift, m.wpc),
                *self.dims[d + 1:])
        return Layout((*self.shape[:d], 1, *self.shape[d + 1:]), dims, self.num_warps)

    def insert(self, d: int) -> Layout:
        """`x[:, None]`: a new dimension of extent 1 at `d` that no bits map."""
        return Layout((*self.shape[:d], 1, *self.shape[d:]), (*self.dims[:d], DimMap(),
                                                              *self.dims[d:]), self.num_warps)

    def with_extent_one(self, d: int) -> Layout:
        """This layout with dimension `d` cut to extent 1 (what a broadcast source along
        `d` must look like to need no data movement)."""
        return self.squeeze(d)


def blocked(shape: tuple[int, ...], num_warps: int) -> Layout:
    """The default layout of a tile: up to VECTOR contiguous elements per thread along the
    innermost dimension, lanes fastest along it, warps along the outermost dimensions
    (so a row stays in one warp when it fits, and row reductions need no shared memory)."""
    rank = len(shape)
    if rank == 0:
        return Layout((), (), num_warps)
    total = 1
    for n in shape:
        total *= n
    threads = num_warps * WARP_SIZE
    spt = [1] * rank
    spt[-1] = max(1, min(VECTOR, shape[-1], total // threads))
    tpw = [1] * rank
    lane_shift = [0] * rank
    lanes, shift = WARP_SIZE, 0
    for d in reversed(range(rank)):  # innermost first
        t = min(lanes, max(1, shape[d] // spt[d]))
        tpw[d], lane_shift[d] = t, shift
        shift += t.bit_length() - 1
        lanes //= t
    wpc = [1] * rank
    warp_shift = [0] * rank
    warps, wshift = num_warps, 0
    for d in range(rank):  # outermost first
        w = min(warps, max(1, shape[d] // (spt[d] * tpw[d])))
        wpc[d], warp_shift[d] = w, wshift
        wshift += w.bit_length() - 1
        warps //= w
    # a tile smaller than the block leaves lane or warp bits to no dimension: replicas
    dims = tuple(DimMap(spt[d], lane_shift[d], tpw[d], warp_shift[d], wpc[d])
                 for d in range(rank))
    return Layout(tuple(shape), dims, num_warps)
