"""Tiles moved between threads through shared memory, lowered thread by thread (mixed
into `tile/lower.py`'s TileEmitter): layout conversions, `permute`, `reshape`,
`tile.slices` (`Tile.extract`, `tile.split`, the batches of a rank-3 product) and
`tile.cat`.

Each goes through one shared-memory copy (`stage`), between block barriers: the
sources' elements are written at their coordinates in the result (or the source), and
each thread reads back the elements its target layout gives it. What they assume: tile
code is block-uniform (every thread reaches the barriers), and a run-time sub-tile
index is a 0-d tile, the same in every thread. What they guarantee: no shared-memory
access outside the copy (a run-time index is taken modulo the number of sub-tiles along
its dimension, a power of two).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.ir import SSAValue

from oxide import types as T
from oxide.ir import ops
from oxide.ir.types import ir_type
from oxide.tile.layout import Layout
from oxide.tile.values import Slots


@dataclass(frozen=True)
class Staged:
    """A tile's copy in shared memory: the array, its (padded) shape, the tile's dtype."""

    array: SSAValue
    shape: tuple[int, ...]
    dtype: T.DType


def padded_rows(shape: tuple[int, ...], dt: T.DType) -> tuple[int, ...]:
    """The shape of a shared-memory copy of a tile: rows one 32-bit word longer than the
    tile's (for a rank >= 2 tile), so a column of a row-major copy spreads over all 32
    banks: a transpose or a layout change reads it without bank conflicts."""
    if len(shape) < 2 or shape[-1] == 1:
        return shape
    return (*shape[:-1], shape[-1] + max(1, 4 // max(1, dt.bits // 8)))


class ShapeEmitMixin:
    """Shared-memory copies of tiles (see the module docstring)."""

    def convert(self, t: Slots, target: Layout) -> Slots:
        """`t` in another layout of the same shape, through shared memory."""
        assert t.shape == target.shape
        if t.layout.key() == target.key():
            return Slots(t.dtype, target, t.values)
        return self.rearrange(t, target, lambda coords: coords)

    def rearrange(self, t: Slots, target: Layout,
                  source: Callable[[list[SSAValue]], list[SSAValue]]) -> Slots:
        """A tile of `target`'s layout whose element at coordinates `c` is `t`'s element at
        `source(c)`: a layout conversion, a reshape (same row-major position) or a
        permutation, through one shared-memory copy of the tile."""
        staged = self.stage(t.shape, t.dtype)
        self.stage_write(staged, t)
        self.barrier()
        return self.stage_read(staged, target, source)

    def stage(self, shape: tuple[int, ...], dt: T.DType) -> Staged:
        """A shared-memory copy of a tile of `shape` (rows padded, `padded_rows`), after a
        barrier; the caller writes it (`stage_write`), passes a barrier, and reads it
        back before the next copy begins. Copies of one size share one array (`staging`):
        the barrier comes after every read of the copy before it, in program order, so a
        loop, or a kernel of many conversions, reuses the array safely."""
        store_dt = T.u8 if dt.is_bool else dt
        padded = padded_rows(shape, store_dt)
        n = 1
        for e in padded:
            n *= e
        smem = self.staging(store_dt, n, "copy")
        self.barrier()
        return Staged(smem, padded, dt)

    def stage_write(self, staged: Staged, t: Slots, offsets: Sequence[int] | None = None
                    ) -> None:
        """Every slot of `t` into the copy, at its coordinates plus `offsets`."""
        store_dt = T.u8 if staged.dtype.is_bool else staged.dtype
        for coords, v in zip(self.coords(t.layout), t.values, strict=True):
            if offsets is not None:
                coords = [c if not o else self.b.value(ops.BinaryOp("add", c, self.const(
                    o, T.i32))) for c, o in zip(coords, offsets, strict=True)]
            idx = self.linear(coords, staged.shape, T.i64)
            self.b.emit(ops.StoreOp(staged.array, [idx], self.b.cast(v, store_dt), 0, False,
                                    True))

    def stage_read(self, staged: Staged, target: Layout,
                   source: Callable[[list[SSAValue]], list[SSAValue]]) -> Slots:
        """A tile of `target`'s layout whose element at `c` is the copy's at `source(c)`."""
        store_dt = T.u8 if staged.dtype.is_bool else staged.dtype
        out = []
        for coords in self.coords(target):
            idx = self.linear(source(coords), staged.shape, T.i64)
            v = self.b.value(ops.LoadOp(staged.array, [idx], ir_type(store_dt), 0, False, True))
            if staged.dtype.is_bool:
                v = self.b.value(ops.CompareOp("ne", v, self.const(0, T.u8)))
            out.append(v)
        return Slots(staged.dtype, target, tuple(out))

    def permute(self, t: Slots, axes: tuple[int, ...], target: Layout) -> Slots:
        """`t` with its dimensions reordered: result dimension `k` is `t`'s `axes[k]`."""
        def source(coords: list[SSAValue]) -> list[SSAValue]:
            src: list[SSAValue] = [coords[0]] * len(axes)
            for k, a in enumerate(axes):
                src[a] = coords[k]
            return src

        return self.rearrange(t, target, source)

    def reshape(self, t: Slots, target: Layout) -> Slots:
        """`t`'s elements in row-major order, in a tile of `target`'s shape."""
        def source(coords: list[SSAValue]) -> list[SSAValue]:
            # the same row-major position: unravel the target position in t's shape
            pos = self.linear(coords, target.shape)
            out = []
            for n in reversed(t.shape):
                out.append(self.b.value(ops.BinaryOp("and", pos, self.const(n - 1, T.i32)))
                           if n > 1 else self.const(0, T.i32))
                if n > 1:
                    pos = self.b.value(ops.BinaryOp("shr", pos, self.const(n.bit_length() - 1,
                                                                           T.i32)))
            return out[::-1]

        return self.rearrange(t, target, source)

    def slices(self, x: Slots, index: Sequence[SSAValue], starts: Sequence[tuple[int, ...]],
               subs: Sequence[tuple[int, ...]], drop: tuple[int, ...],
               targets: Sequence[Layout]) -> list[Slots]:
        """Sub-tiles of `x`: result `r` has the elements `x[starts[r] + i * subs[r] + c]`
        for `c` in the full-rank shape `subs[r]` (`i` the run-time tile index `index`,
        one 0-d integer per dimension, or none), with the dimensions `drop` (extent 1)
        left out, in `targets[r]`'s layout. One copy of `x` serves every result."""
        staged = self.stage(x.shape, x.dtype)
        self.stage_write(staged, x)
        self.barrier()
        out = []
        for start, sub, target in zip(starts, subs, targets, strict=True):
            base = [self.const(s, T.i32) for s in start]
            if index:
                base = [self._wrapped_start(i, b, n, s)
                        for i, b, n, s in zip(index, base, x.shape, sub, strict=True)]

            def source(coords: list[SSAValue], base: list[SSAValue] = base) -> list[SSAValue]:
                full = iter(coords)
                src = []
                for d, b in enumerate(base):
                    c = self.const(0, T.i32) if d in drop else next(full)
                    src.append(self.b.value(ops.BinaryOp("add", c, b)))
                return src

            out.append(self.stage_read(staged, target, source))
        return out

    def _wrapped_start(self, index: SSAValue, start: SSAValue, extent: int, sub: int
                       ) -> SSAValue:
        """`start + (index mod (extent / sub)) * sub` for an i32 `index` (the frontend
        truncates wider ones, which keeps the low bits this reads): the first element of
        sub-tile `index` along a dimension, inside the tile whatever `index` is."""
        count = extent // sub
        wrapped = self.b.value(ops.BinaryOp("and", index, self.const(count - 1, T.i32)))
        first = self.b.value(ops.BinaryOp("mul", wrapped, self.const(sub, T.i32)))
        return self.b.value(ops.BinaryOp("add", first, start))

    def concatenate(self, parts: Sequence[Slots], axis: int, target: Layout) -> Slots:
        """`parts` side by side along `axis` (equal extents elsewhere), in `target`."""
        staged = self.stage(target.shape, parts[0].dtype)
        offset = 0
        for p in parts:
            at = [0] * len(target.shape)
            at[axis] = offset
            self.stage_write(staged, p, at)
            offset += p.shape[axis]
        self.barrier()
        return self.stage_read(staged, target, lambda coords: coords)

