"""Blocked layouts: which of a tile block's threads holds which elements of a tile.

A tile block has `num_warps * 32` threads. A tile of a static power-of-two shape is
spread over them as Triton's blocked layouts do: along each dimension `d`

    coordinate = rep * spc_d + (warp_d * inner_d * tpw_d + inner * tpw_d + lane_d) * spt_d + s

where `lane_d = (lane >> lane_shift_d) & (tpw_d - 1)` and `warp_d = (warp >> warp_shift_d)
& (wpc_d - 1)` pick a contiguous group of lane bits and of warp bits for the dimension,
`spt_d` elements sit side by side in one thread (`s < spt_d`), `inner < inner_d` are the
repetitions one warp covers before the next warp's elements start, `spc_d = spt_d * tpw_d *
inner_d * wpc_d` is what one pass of the whole block covers, and `rep < shape_d / spc_d`
repeats it when the tile is larger. Blocked layouts have `inner_d = 1`; the tensor-core
accumulator (`tile/mma_lower.py`) has a warp's rows `g + 8 * i` and columns `2t + s + 8 * i`
before the next warp's, so it needs `inner_d > 1`. A thread's elements are its *slots*:
one static offset per dimension (`rep * spc_d + inner * tpw_d * spt_d + s`) added to the
thread's base, so every tile op is a loop over slots at compile time.

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

from oxide import types as T

WARP_SIZE = 32
# the fewest elements side by side in one thread along the innermost dimension: 4 x
# 32-bit is one 128-bit access
VECTOR = 4


@dataclass(frozen=True)
class DimMap:
    """How one dimension is spread: elements per thread, then lanes, then the warp's own
    repetitions (`inner`), then warps."""

    spt: int = 1
    lane_shift: int = 0
    tpw: int = 1
    warp_shift: int = 0
    wpc: int = 1
    inner: int = 1

    @property
    def span(self) -> int:
        """Elements one pass of the block covers along this dimension (`spc`)."""
        return self.spt * self.tpw * self.inner * self.wpc

    @property
    def warp_stride(self) -> int:
        """Elements between the first elements of two consecutive warps along it."""
        return self.spt * self.tpw * self.inner


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
            span, step = m.span, m.spt * m.tpw
            per_dim.append([r * span + i * step + s for r in range(self.reps(d))
                            for i in range(m.inner) for s in range(m.spt)])
        return list(itertools.product(*per_dim))

    @property
    def slots(self) -> int:
        n = 1
        for d, m in enumerate(self.dims):
            n *= self.reps(d) * m.inner * m.spt
        return n

    @property
    def is_blocked(self) -> bool:
        """Whether every dimension is a plain blocked map (no warp-inner repetitions): the
        layouts every tile op handles; `tile/mma_lower.py`'s accumulator is the other kind."""
        return all(m.inner == 1 for n, m in zip(self.shape, self.dims, strict=True) if n > 1)

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

    def lead(self, n: int) -> Layout:
        """This layout under `n` new leading dimensions of extent 1 (a view's fixed
        dimensions put back, so its tile is addressed in the array's): the same slots."""
        layout = self
        for _ in range(n):
            layout = layout.insert(0)
        return layout

    def transposed(self) -> Layout:
        """A 2-d layout with its dimensions swapped: each thread holds the transposes of
        the elements it held (a product computed transposed keeps its accumulator so,
        tile/mma_choice.py `swapped_fits`)."""
        assert len(self.shape) == 2
        return Layout(self.shape[::-1], self.dims[::-1], self.num_warps)

    def with_extent_one(self, d: int) -> Layout:
        """This layout with dimension `d` cut to extent 1 (what a broadcast source along
        `d` must look like to need no data movement)."""
        return self.squeeze(d)


def broadcast_source(target: Layout, dims: tuple[int, ...]) -> Layout:
    """The layout a tile of `dims` (the target's rank, extents 1 or the target's) is in
    where broadcasting it to `target` moves nothing: `target` with the broadcast
    dimensions squeezed."""
    need = target
    for d, (n, m) in enumerate(zip(dims, target.shape, strict=True)):
        if n != m:
            need = need.squeeze(d)
    return need


def vector_elements(itemsizes: list[int]) -> int:
    """The contiguous elements per thread of a kernel's default layouts: 16 bytes (one
    128-bit access) of its narrowest array element, and at least VECTOR. Every default
    layout of the kernel uses the same run, so tiles of different dtypes combine without
    conversions, and a bf16 tile moves in 16-byte accesses (8 elements) like an f32 one
    (4): with 4 bf16 a thread, bf16 layernorm ran at 0.70x Triton on the H200."""
    return max(VECTOR, T.VECTOR_BYTES // min(itemsizes)) if itemsizes else VECTOR


def blocked(shape: tuple[int, ...], num_warps: int, vector: int = VECTOR,
            whole_vectors: bool = False) -> Layout:
    """The default layout of a tile: up to `vector` contiguous elements per thread along
    the innermost dimension, lanes fastest along it, warps along the outermost dimensions
    (so a row stays in one warp when it fits, and row reductions need no shared memory).
    A kernel picks `vector` once, from its narrowest array element (`vector_elements`).
    `whole_vectors`: runs of `vector` elements (or the whole row) even where the tile has
    fewer than `vector` elements a thread, the threads left over holding replicas (a
    16-byte copy each: tile/operand_rings.py)."""
    rank = len(shape)
    if rank == 0:
        return Layout((), (), num_warps)
    total = 1
    for n in shape:
        total *= n
    threads = num_warps * WARP_SIZE
    spt = [1] * rank
    spt[-1] = max(1, min(vector, shape[-1], vector if whole_vectors else total // threads))
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


# -- the tensor-core accumulator (tile/mma.py) ------------------------------------------

MMA_M, MMA_N = 16, 8  # one mma.sync m16n8k16 covers 16 x 8 elements of the result


def mma_warps(shape: tuple[int, int], num_warps: int, rows_only: bool = False
              ) -> tuple[int, int]:
    """How the block's warps split an (M, N) result: warps double along the dimension
    where each warp's share is larger (M first on a tie), while a warp still covers at
    least one instruction tile (16 rows, 8 columns); 8 warps on 128 x 128 are 4 x 2.
    Warps left over hold replicas. `rows_only` (where the kernel reduces the product's
    rows, `tile/layouts.py`): every warp takes whole rows, where there are 16 a warp."""
    m, n = shape
    if rows_only and m // MMA_M >= num_warps:
        return num_warps, 1
    wm = wn = 1
    while wm * wn < num_warps:
        can_m, can_n = m // (MMA_M * wm) >= 2, n // (MMA_N * wn) >= 2
        if can_m and (not can_n or m // wm >= n // wn):
            wm *= 2
        elif can_n:
            wn *= 2
        else:
            break
    return wm, wn


def mma_accumulator(shape: tuple[int, ...], num_warps: int, rows_only: bool = False
                    ) -> Layout | None:
    """The layout of mma.sync's accumulator over a whole (M, N) tile, or None where the
    tile is smaller than one instruction (M < 16 or N < 8).

    In a warp, lane `l` (`g = l >> 2`, `t = l & 3`) holds rows `g + 8 i` and columns
    `2t + s + 8 j` of the warp's (M / WM) x (N / WN) share: the C/D fragments of PTX's
    m16n8 instruction tiles, repeated over the share (`inner`), then the next warp's."""
    if len(shape) != 2 or shape[0] < MMA_M or shape[1] < MMA_N:
        return None
    m, n = shape
    wm, wn = mma_warps((m, n), num_warps, rows_only)
    rows = DimMap(spt=1, lane_shift=2, tpw=8, warp_shift=0, wpc=wm, inner=m // wm // 8)
    # (no warp bits along N when one warp spans it: the A-operand layout's form, so a
    # product's result can be the next product's A operand where it spans K, `p @ v`)
    cols = DimMap(spt=2, lane_shift=0, tpw=4, warp_shift=wm.bit_length() - 1 if wn > 1 else 0,
                  wpc=wn, inner=n // wn // 8)
    return Layout((m, n), (rows, cols), num_warps)


def wgmma_accumulator(shape: tuple[int, int], num_warps: int) -> Layout:
    """wgmma's accumulator over an (M, N) tile of M = r * 16 * num_warps rows: warp group
    g's instruction j writes rows `64 (j * groups + g) ...` (its warp w, the group's
    w-th, rows `16 w + g` and `16 w + g + 8`, lane `g = l >> 2`), so warp w's rows are
    `16 w + g + 8 i` of every block of 16 * num_warps rows, the blocks repeated (`reps`).
    For r = 1 it is `mma_accumulator(shape, num_warps, rows_only=True)`. Where M is
    fewer rows than the warps cover (64 rows on 8 warps: tile/mma_choice.py
    `column_groups`), the warp groups split the columns instead: warp bits 0-1 pick the
    16 rows, the group bits the group's band of N / groups columns."""
    m, n = shape
    row_warps = min(num_warps, max(4, m // 16))
    col_warps = num_warps // row_warps
    rows = DimMap(spt=1, lane_shift=2, tpw=8, warp_shift=0, wpc=row_warps, inner=2)
    cols = DimMap(spt=2, lane_shift=0, tpw=4, warp_shift=2 if col_warps > 1 else 0,
                  wpc=col_warps, inner=n // col_warps // 8)
    return Layout((m, n), (rows, cols), num_warps)


def mma_operand_a(shape: tuple[int, int], wm: int, num_warps: int) -> Layout:
    """The layout of an (M, K) tile as mma.sync's A operand of a product whose result
    splits M over `wm` warps: each thread holds the A fragments its warp's rows need
    (rows `g + 8 i`, columns `2t + s + 8 j`: registers a0..a3 of every m16n8k16 tile of
    the share), so the product reads them from registers, not from shared memory. The
    warps that split N hold replicas (each needs the same rows). With one warp along N
    it is the accumulator layout of an (M, K) result: `p @ v` takes `p` as it is."""
    m, k = shape
    rows = DimMap(spt=1, lane_shift=2, tpw=8, warp_shift=0, wpc=wm, inner=m // wm // 8)
    cols = DimMap(spt=2, lane_shift=0, tpw=4, inner=k // 8)
    return Layout((m, k), (rows, cols), num_warps)
