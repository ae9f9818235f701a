"""Tile loads and stores: a tile of global memory in and out of one thread's slots.

`GlobalAccessMixin` is mixed into `tile/lower.py`'s TileEmitter (it uses its builder `b`,
`const`, `base` and `owner`). What it guarantees: element `(x, y)` of the tile at tile
index `(i, j)` is `arr[i*BM + x, j*BN + y]`; an element outside the array reads the
padding and is never accessed, and a store writes only the elements inside the array
that this thread owns (no replica writes), so a tile access cannot fault. Each access is
masked by its own bounds test (`ops.MaskedLoadOp` / `ops.MaskedStoreOp`: a predicated
instruction on the GPU, `codegen/emit_masked.py`), by vectors of up to 16 bytes where the
array's rows take them. Whether they do is the launch's specialization
(`ArrayType.vectors`); where it is unknown, a block-uniform branch decides at run time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xdsl.ir import SSAValue

from oxide import types as T
from oxide.ir import ops
from oxide.ir.types import ir_type
from oxide.tile.layout import Layout
from oxide.tile.values import Slots


class GlobalAccessMixin:
    """Tile loads and stores of global arrays (mixed into TileEmitter)."""

    b: Any

    def _starts(self, index: Sequence[SSAValue], layout: Layout) -> list[SSAValue]:
        """This thread's first element along each dimension (i64): `i * n + base`. Its
        slots sit at static offsets from it, which LLVM folds into the addresses."""
        starts = []
        for d, (i, n) in enumerate(zip(index, layout.shape, strict=True)):
            g = self.b.value(ops.BinaryOp("mul", i, self.const(n, T.i64)))
            if n > 1:
                g = self.b.value(ops.BinaryOp("add", g, self.b.cast(self.base(layout, d),
                                                                    T.i64)))
            starts.append(g)
        return starts

    def _element(self, starts: Sequence[SSAValue], offs: Sequence[int]) -> list[SSAValue]:
        """The array indices (i64) of the slot at static offsets `offs`."""
        return [s if o == 0 else self.b.value(ops.BinaryOp("add", s, self.const(o, T.i64)))
                for s, o in zip(starts, offs, strict=True)]

    def _rooms(self, arr: SSAValue, index: Sequence[SSAValue], starts: Sequence[SSAValue],
               layout: Layout) -> list[SSAValue]:
        """Per dimension, how many elements from this thread's start on are inside the
        array, so a slot at offset `o` is inside iff `o < room` along every dimension: one
        compare with a constant per slot and dimension, and no per-slot coordinates kept
        in registers.

        The room is 0 unless the tile index `i` lies in [0, extent / n] (n the tile's
        extent there, a power of two): a negative index has all its elements below 0, a
        larger one all of them past the end. Only inside that range is `i * n` (the
        start) free of 64-bit wraparound, since extents are below 2**63: a tile index of
        2**54 times 1024 wraps to 0, and must not read element 0."""
        rooms = []
        zero = self.const(0, T.i64)
        for d, (i, s, n) in enumerate(zip(index, starts, layout.shape, strict=True)):
            extent = self.b.value(ops.ArrayDimOp(arr, d, ir_type(T.i64)))
            left = self.b.value(ops.BinaryOp("sub", extent, s))
            last = extent if n == 1 else self.b.value(
                ops.BinaryOp("shr", extent, self.const(n.bit_length() - 1, T.i64)))
            ahead = self.b.value(ops.CompareOp("ge", i, zero))
            within = self.b.value(ops.CompareOp("le", i, last))
            ok = self.b.value(ops.BinaryOp("and", ahead, within))
            rooms.append(self.b.value(ops.SelectOp(ok, left, zero)))
        return rooms

    def _slot_inside(self, rooms: Sequence[SSAValue], offs: Sequence[int]) -> SSAValue:
        inside = None
        for room, o in zip(rooms, offs, strict=True):
            ok = self.b.value(ops.CompareOp("lt", self.const(o, T.i64), room))
            inside = ok if inside is None else self.b.value(ops.BinaryOp("and", inside, ok))
        return inside if inside is not None else self.const(True, T.bool_)  # a 0-d array

    def _vector_width(self, layout: Layout, dt: T.DType) -> int:
        """Elements per vector access: the thread's run of side-by-side elements along the
        innermost dimension, at most 16 bytes (1: scalar accesses)."""
        if not layout.shape or dt.is_bool or layout.shape[-1] == 1:
            return 1
        size = max(1, dt.bits // 8)
        width = layout.dims[-1].spt
        while width > 1 and width * size > 16:
            width //= 2
        return width

    def _vectors_fit(self, arr: SSAValue, rank: int, width: int, dt: T.DType) -> SSAValue:
        """Whether `width`-element vectors at multiples of `width` along each row are
        aligned and wholly inside the array or wholly outside it: rows start at multiples
        of the vector's bytes, and their length is a multiple of `width`. The same in
        every thread of the block (a uniform branch)."""
        aligned = self.b.value(ops.ArrayAlignedOp(arr, width * max(1, dt.bits // 8),
                                                  ir_type(T.bool_)))
        extent = self.b.value(ops.ArrayDimOp(arr, rank - 1, ir_type(T.i64)))
        rest = self.b.value(ops.BinaryOp("and", extent, self.const(width - 1, T.i64)))
        whole = self.b.value(ops.CompareOp("eq", rest, self.const(0, T.i64)))
        return self.b.value(ops.BinaryOp("and", aligned, whole))

    def _two_ways(self, cond: SSAValue, fast: Callable[[], None], slow: Callable[[], None]
                  ) -> None:
        """`fast()` where `cond` holds, else `slow()`."""
        fast_block, slow_block, join = self.b.new_block(), self.b.new_block(), self.b.new_block()
        self.b.cond_br(cond, fast_block, slow_block)
        self.b.set_block(fast_block)
        fast()
        self.b.br(join)
        self.b.set_block(slow_block)
        slow()
        self.b.br(join)
        self.b.set_block(join)

    def _by_vectors(self, arr: SSAValue, vectors: bool | None, rank: int, dt: T.DType,
                    layout: Layout, access: Callable[[int], list[SSAValue]]
                    ) -> list[SSAValue]:
        """`access(width)` with this thread's vector width where the array's rows take
        vectors, else `access(1)`: decided by the launch's specialization (`vectors`,
        `ArrayType.vectors`), so the accesses are straight-line code; where it is not
        known (None: a compile from types), by a block-uniform branch on `_vectors_fit`,
        the values merged in slots."""
        width = self._vector_width(layout, dt)
        if width == 1 or vectors is not None:
            return access(width if vectors else 1)
        slots: list[SSAValue] = []

        def into_slots(w: int) -> None:
            values = access(w)
            if not slots:
                slots.extend(self.b.alloc(ops.SlotOp(v.type)) for v in values)
            for slot, v in zip(slots, values, strict=True):
                self.b.emit(ops.SlotWriteOp(slot, v))

        self._two_ways(self._vectors_fit(arr, rank, width, dt), lambda: into_slots(width),
                       lambda: into_slots(1))
        return [self.b.value(ops.SlotReadOp(slot)) for slot in slots]

    def load(self, arr: SSAValue, vectors: bool | None, dt: T.DType,
             index: Sequence[SSAValue], layout: Layout, padding: SSAValue) -> Slots:
        """The tile at `index`, elements outside the array read as `padding`: masked
        loads (`ops.MaskedLoadOp`, predicated on the GPU), no branch per element, by
        vectors of up to 16 bytes where the rows take them, else one element at a time.
        A vector's mask is its first element's bounds test (one compare with a constant
        per dimension); in a tile wholly inside the array every mask holds."""
        offsets = layout.offsets()
        starts = self._starts(index, layout)
        rooms = self._rooms(arr, index, starts, layout)
        size = max(1, dt.bits // 8)

        def access(width: int) -> list[SSAValue]:
            values: list[SSAValue] = []
            for k in range(0, len(offsets), width):
                got = self.b.emit(ops.MaskedLoadOp(arr, self._element(starts, offsets[k]),
                                                   self._slot_inside(rooms, offsets[k]),
                                                   padding, width, width * size))
                values += got.res
            return values

        return Slots(dt, layout, tuple(self._by_vectors(arr, vectors, len(index), dt, layout,
                                                       access)))

    def store(self, arr: SSAValue, vectors: bool | None, index: Sequence[SSAValue],
              t: Slots) -> None:
        """Writes the elements this thread owns (no replica writes) that are inside the
        array: masked stores, by vectors where the rows take them, as `load` reads."""
        owner = self.owner(t.layout)
        offsets = t.layout.offsets()
        starts = self._starts(index, t.layout)
        rooms = self._rooms(arr, index, starts, t.layout)
        size = max(1, t.dtype.bits // 8)

        def access(width: int) -> list[SSAValue]:
            for k in range(0, len(offsets), width):
                mask = self._slot_inside(rooms, offsets[k])
                if owner is not None:
                    mask = self.b.value(ops.BinaryOp("and", mask, owner))
                self.b.emit(ops.MaskedStoreOp(arr, self._element(starts, offsets[k]), mask,
                                              t.values[k:k + width], width * size))
            return []

        self._by_vectors(arr, vectors, len(index), t.dtype, t.layout, access)
