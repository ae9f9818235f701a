"""Sub-tiles, concatenation and batched products in a tile kernel (mixed into
`TileLowering`): `tile.extract` / `x.extract` (cuTile's sub-tile), `tile.split`,
`tile.cat`, and `tile.mma` / `@` on rank-3 tiles (a product per batch, the leading
dimension).

Shapes stay powers of two: a sub-tile's shape divides its tile's, a split's parts and a
concatenation's result are powers of two. The ops are `tile.slices` and `tile.cat`
(lowered by `tile/shape_lower.py` through one shared-memory copy).
"""

from __future__ import annotations

import ast
from typing import Any

from oxide import types as T
from oxide.errors import KernelTypeError
from oxide.tile.mma_lower import accumulate_dtype
from oxide.tile.values import Static, Tile, describe, shape_text


def _is_int(v: Any) -> bool:
    return isinstance(v, Static) and isinstance(v.obj, int) and not isinstance(v.obj, bool)


class TileShapesMixin:
    """`extract`, `split`, `cat` and batched products (see the module docstring)."""

    # -- sub-tiles ----------------------------------------------------------------------

    def call_extract(self, node: ast.Call) -> Tile:
        x, index, shape = self.positional(node, 3, "tile.extract(x, index, shape)")
        return self.extract(self.as_tile(x, node.args[0]), index, shape, node, node.args[1],
                            node.args[2])

    def extract(self, t: Tile, index_v: Any, shape_v: Any, node: ast.AST,
                index_node: ast.AST, shape_node: ast.AST) -> Tile:
        """cuTile's `extract`: `t` cut into sub-tiles of `shape`, the one at tile index
        `index` (`t[i*m:(i+1)*m, j*n:(j+1)*n]` for `index = (i, j)`). Constant items must
        lie in range; a run-time item (a 0-d integer tile) is taken modulo the number of
        sub-tiles along its dimension, so the result is always inside `t`."""
        sub = self.static_shape(shape_v, shape_node, "the shape of extract")
        if len(sub) != t.ndim or any(n > m for n, m in zip(sub, t.shape, strict=True)):
            raise self.error(KernelTypeError, shape_node,
                             f"extract cuts {t.describe()} into sub-tiles of one rank and no "
                             f"larger, not {shape_text(sub)}")
        items = (list(index_v.obj) if isinstance(index_v, Static) and isinstance(
            index_v.obj, tuple) else list(index_v) if isinstance(index_v, tuple) else [index_v])
        items = [i if isinstance(i, (Tile, Static)) else Static(i) for i in items]
        if len(items) != t.ndim:
            raise self.error(KernelTypeError, index_node,
                             f"the index of a sub-tile of {t.describe()} has {t.ndim} "
                             f"item{'s' if t.ndim != 1 else ''}, not {len(items)}")
        counts = [m // n for m, n in zip(t.shape, sub, strict=True)]
        for item, count in zip(items, counts, strict=True):
            if _is_int(item) and not 0 <= item.obj < count:
                raise self.error(KernelTypeError, index_node,
                                 f"sub-tile index {item.obj} is out of range: {t.describe()} "
                                 f"holds {count} sub-tiles of {shape_text(sub)} along that "
                                 "dimension")
            if not (_is_int(item) or (isinstance(item, Tile) and item.ndim == 0
                                      and item.dtype.is_int)):
                raise self.error(KernelTypeError, index_node,
                                 f"a sub-tile index holds integers, not {describe(item)}")
        if all(_is_int(i) for i in items):
            start = tuple(i.obj * n for i, n in zip(items, sub, strict=True))
            return self.t.slices(t, [], [start], [sub])[0]
        index = [self.t.cast(self.as_tile(i, index_node, T.i32), T.i32) for i in items]
        return self.t.slices(t, index, [(0,) * t.ndim], [sub])[0]

    def call_split(self, node: ast.Call) -> tuple[Tile, ...]:
        """`tile.split(x, sections, axis=0)`, as NumPy's `np.split`: `sections` an integer
        (that many equal parts) or a tuple of split points; every part's extent is a
        power of two. A tuple of tiles."""
        args = self.positional(node, (2, 3), "tile.split(x, sections, axis=0)", ("axis",))
        t = self.as_tile(args[0], node.args[0])
        if not t.ndim:
            raise self.error(KernelTypeError, node.args[0], "tile.split of a scalar")
        axis = self._shape_axis(node, t, "tile.split", 2)
        n, sections = t.shape[axis], args[1]
        if _is_int(sections):
            if sections.obj < 1 or n % sections.obj:
                raise self.error(KernelTypeError, node.args[1],
                                 f"{t.describe()} does not split into {sections.obj} equal "
                                 f"parts along axis {axis}")
            points = list(range(n // sections.obj, n, n // sections.obj))
        elif isinstance(sections, Static) and isinstance(sections.obj, tuple) \
                and all(isinstance(p, int) and not isinstance(p, bool) for p in sections.obj):
            points = list(sections.obj)
        else:
            raise self.error(KernelTypeError, node.args[1],
                             f"the sections of tile.split are a constant integer or a tuple "
                             f"of split points, not {describe(sections)}")
        bounds = [0, *points, n]
        sizes = [b - a for a, b in zip(bounds, bounds[1:], strict=False)]
        if any(b < a for a, b in zip(bounds, bounds[1:], strict=False)) or any(
                not _power_of_two(s) for s in sizes):
            raise self.error(KernelTypeError, node.args[1],
                             f"tile.split's parts are tiles, whose extents are powers of two; "
                             f"split points {tuple(points)} of {n} give {tuple(sizes)}")
        starts = [tuple(a if d == axis else 0 for d in range(t.ndim)) for a in bounds[:-1]]
        subs = [tuple(s if d == axis else m for d, m in enumerate(t.shape)) for s in sizes]
        return tuple(self.t.slices(t, [], starts, subs))

    def call_cat(self, node: ast.Call) -> Tile:
        """`tile.cat(tiles, axis=0)`, as NumPy's `np.concatenate`: tiles of one rank and
        equal extents off `axis`, promoted as `+` promotes; the result's extent along
        `axis` (their sum) is a power of two."""
        args = self.positional(node, (1, 2), "tile.cat(tiles, axis=0)", ("axis",))
        parts = args[0].obj if isinstance(args[0], Static) else args[0]
        if not isinstance(parts, tuple) or not parts:
            raise self.error(KernelTypeError, node.args[0], f"tile.cat takes a tuple of tiles, "
                             f"not {describe(args[0])}", hint="write `tile.cat((a, b), 0)`")
        tiles = [p for p in parts if isinstance(p, Tile)]
        if len(tiles) != len(parts) or any(p.ndim == 0 for p in tiles):
            raise self.error(KernelTypeError, node.args[0], "tile.cat joins tiles of rank 1 to "
                             "3", hint="make a number a tile first: `tile.full((1,), v)`")
        axis = self._shape_axis(node, tiles[0], "tile.cat", 1)
        first = tiles[0]
        dt = first.dtype
        for p in tiles[1:]:
            dt = self.promote(Tile(dt, (), p.ssa), p, node)
            if p.ndim != first.ndim or any(m != n for d, (m, n) in enumerate(
                    zip(p.shape, first.shape, strict=True)) if d != axis):
                raise self.error(KernelTypeError, node.args[0],
                                 f"tile.cat along axis {axis} joins tiles equal in the other "
                                 f"dimensions: {shape_text(first.shape)} and "
                                 f"{shape_text(p.shape)}")
        total = sum(p.shape[axis] for p in tiles)
        if not _power_of_two(total):
            raise self.error(KernelTypeError, node,
                             f"tile.cat would make an extent of {total} along axis {axis}; "
                             "tiles are powers of two", hint="pad the parts (tile.full) so "
                                                             "their extents sum to one")
        if len(tiles) == 1:
            return self.t.cast(first, dt)
        return self.t.cat([self.t.cast(p, dt) for p in tiles], axis)

    def _shape_axis(self, node: ast.Call, t: Tile, what: str, position: int) -> int:
        v, at = self.keyword(node, "axis", position)
        axis = 0 if v is None else v.obj if _is_int(v) else None
        if axis is None or not -t.ndim <= axis < t.ndim:
            raise self.error(KernelTypeError, at or node,
                             f"the axis of {what} is a constant from {-t.ndim} to {t.ndim - 1}"
                             f" for {t.describe()}")
        return axis % t.ndim

    # -- batched products ---------------------------------------------------------------

    def product_shape(self, a: Tile, b: Tile) -> tuple[int, ...] | None:
        """The shape of `a @ b` where it has one: (M, N) for (M, K) @ (K, N), (B, M, N)
        where either is a batch of B such matrices (NumPy's broadcast of the batch)."""
        if not (2 <= a.ndim <= 3 and 2 <= b.ndim <= 3) or a.shape[-1] != b.shape[-2]:
            return None
        if a.ndim == 3 and b.ndim == 3 and a.shape[0] != b.shape[0]:
            return None
        batch = a.shape[:-2] or b.shape[:-2]
        return (*batch, a.shape[-2], b.shape[-1])

    def batched(self, a: Tile, b: Tile, acc: Tile | None) -> Tile:
        """`a @ b (+ acc)` over a batch (the leading dimension of the rank-3 operands; a
        rank-2 one serves every batch): one 2-d product a batch, stacked. Without `acc`,
        each product starts from zeros in the accumulating type."""
        shape = self.product_shape(a, b)
        assert shape is not None and len(shape) == 3
        count = shape[0]

        def batches(t: Tile) -> list[Tile]:
            if t.ndim == 2:
                return [t] * count
            return self.t.slices(t, [], [(k, 0, 0) for k in range(count)],
                                 [(1, *t.shape[1:])] * count, (0,))

        pa, pb = batches(a), batches(b)
        pc = batches(acc) if acc is not None else [
            self.t.full(shape[1:], 0, accumulate_dtype(a.dtype), layout="mma")
            for _ in range(count)]
        outs = [self.t.mma(x, y, c) for x, y, c in zip(pa, pb, pc, strict=True)]
        return self.t.cat([self.t.expand(o, (0,), (1, *o.shape)) for o in outs], 0)


def _power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0
