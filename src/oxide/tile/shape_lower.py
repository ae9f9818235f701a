"""Sub-tiles and concatenation, lowered thread by thread (mixed into `tile/lower.py`'s
TileEmitter): `tile.slices` (`Tile.extract`, `tile.split`, the batches of a rank-3
product) and `tile.cat`.

Both go through one shared-memory copy (`TileEmitter.stage`), between block barriers,
as a permute does: the sources' elements are written at their coordinates in the
result (or the source), and each thread reads back the elements its target layout
gives it. What they assume: tile code is block-uniform (every thread reaches the
barriers), and a run-time sub-tile index is a 0-d tile, the same in every thread.
What they guarantee: no shared-memory access outside the copy (a run-time index is
taken modulo the number of sub-tiles along its dimension, a power of two).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import SSAValue

from oxide import types as T
from oxide.ir import ops
from oxide.tile.layout import Layout
from oxide.tile.values import Slots


class ShapeEmitMixin:
    """`slices` and `concatenate` (see the module docstring)."""

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

