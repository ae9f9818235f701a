"""Tile atomics lowered thread by thread (mixed into `tile/lower.py`'s TileEmitter).

Each element of the updated tile is updated once, by its owner thread (`owner`: replicas
skip it), with the SIMT kernel's `oxide.atomic` (relaxed, at the scope asked for), and
only where it lies inside the array. The memory orderings are built around it:

- a release (`release`, `acq_rel`) first has every thread fence its own earlier accesses
  at the scope and meet at a block barrier, so the atomic comes after every access the
  block made before it (the fence after the barrier is cumulative: the owner's release
  covers what the barrier showed it);
- an acquire (`acquire`, `acq_rel`) fences after the atomic and meets at a block barrier
  before anything else runs, so every later access of the block comes after it;
- the old values reach the replicas (every thread that holds an element of the result:
  a scalar result, the old value of a lock, is held by all) through shared memory, the
  owners writing, between block barriers.

What it assumes: tile code is block-uniform (every thread reaches the barriers). What
it guarantees: no element is updated twice, none outside the array at all (its old
value reads 0), and the result holds the same old value in every thread that holds the
element. The tile's own bounds test (`_slot_inside`, as tile loads and stores use) is the
only one: the atomic itself is emitted unchecked (`AtomicOp(checked=False)`), no second
bounds check and report path that the first test makes unreachable. Where the thread's
whole tile lies inside the array (its farthest slot does) and the thread owns its
elements, one test covers them all and the updates follow without a branch each; only a
tile at the array's edge tests element by element.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import SSAValue

from oxide.ir import ops
from oxide.ir.types import ir_type
from oxide.tile.values import Slots


class AtomicEmitMixin:
    """`atomic` (see the module docstring)."""

    def atomic(self, arr: SSAValue, kind: str, sem: str, scope: str,
               index: Sequence[SSAValue], values: Sequence[Slots], site: int,
               used: bool) -> Slots:
        """`kind` on the tile at `index` with `values` (compare first for cas); the old
        values, shared with the replicas where `used`."""
        value = values[-1]
        layout, dt = value.layout, value.dtype
        if sem in ("release", "acq_rel"):
            self.b.emit(ops.BarrierOp(f"fence.{scope}"))
            self.barrier()
        owner = self.owner(layout)
        starts = self._starts(index, layout)
        rooms = self._rooms(arr, index, starts, layout)
        zero = self.const(0.0 if dt.is_float else 0, dt)
        offsets = layout.offsets()
        slots = []
        for _ in offsets:
            slot = self.b.alloc(ops.SlotOp(ir_type(dt)))
            self.b.emit(ops.SlotWriteOp(slot, zero))
            slots.append(slot)

        def update(k: int, offs: tuple[int, ...]) -> None:
            """Element k's atomic, its old value into its slot. Unchecked: the caller
            has established that the element lies inside the array."""
            compare = values[0].values[k] if len(values) == 2 else None
            old = self.b.value(ops.AtomicOp(kind, scope, arr, self._element(starts, offs),
                                            value.values[k], compare, site, checked=False))
            self.b.emit(ops.SlotWriteOp(slots[k], old))

        done = self.b.new_block()
        if len(offsets) > 1:  # the whole tile inside (and owned): no test per element
            whole = self._slot_inside(rooms, tuple(max(o[d] for o in offsets)
                                                   for d in range(len(layout.shape))))
            if owner is not None:
                whole = self.b.value(ops.BinaryOp("and", whole, owner))
            fast, edge = self.b.new_block(), self.b.new_block()
            self.b.cond_br(whole, fast, edge)
            self.b.set_block(fast)
            for k, offs in enumerate(offsets):
                update(k, offs)
            self.b.br(done)
            self.b.set_block(edge)
        for k, offs in enumerate(offsets):  # at an edge: each element where it lies inside
            cond = self._slot_inside(rooms, offs)
            if owner is not None:
                cond = self.b.value(ops.BinaryOp("and", cond, owner))
            then, join = self.b.new_block(), self.b.new_block()
            self.b.cond_br(cond, then, join)
            self.b.set_block(then)
            update(k, offs)
            self.b.br(join)
            self.b.set_block(join)
        self.b.br(done)
        self.b.set_block(done)
        olds = [self.b.value(ops.SlotReadOp(slot)) for slot in slots]
        result = Slots(dt, layout, tuple(olds))
        acquire = sem in ("acquire", "acq_rel")
        if acquire:
            self.b.emit(ops.BarrierOp(f"fence.{scope}"))
        if used and owner is not None:  # the owners' old values, to every holder
            return self._from_owners(result, owner)
        if acquire:
            self.barrier()
        return result

    def _from_owners(self, t: Slots, owner: SSAValue) -> Slots:
        """`t` as its owners hold it, in every thread that holds its elements: the owners
        write a shared copy, a barrier, everyone reads its slots."""
        staged = self.stage(t.shape, t.dtype)
        write, join = self.b.new_block(), self.b.new_block()
        self.b.cond_br(owner, write, join)
        self.b.set_block(write)
        self.stage_write(staged, t)
        self.b.br(join)
        self.b.set_block(join)
        self.barrier()
        return self.stage_read(staged, t.layout, lambda coords: coords)

