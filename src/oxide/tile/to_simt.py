"""The tile dialect into SIMT IR: each tile op replaced by the ops of one thread.

It runs after `tile/layouts.py`, over the tile ops in the order the frontend built them
(`TileBuilder.tile_ops`), and asks `tile/lower.py`'s TileEmitter for each: a tile value
becomes `Slots`, one SSA value per slot of its layout. What it assumes: every tile type
has its layout and elementwise operands agree (the layout pass). What it guarantees:
no tile op is left; `tile.extract` results are replaced by the scalar each thread holds
(and stay block-uniform for the uniformity pass); an op `tile/ordering.py` counts on
for a barrier (`syncs_block`) emitted one; the SIMT ops stand where the tile op
stood (`TileBuilder.lowering`), so the kernel is the one building them on the spot
would have given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xdsl.ir import Operation, SSAValue

from oxide import types as T
from oxide.ir import ops
from oxide.ir.tile_ops import TileType, TileVarType, kind_of
from oxide.ir.types import ir_type
from oxide.tile.builder import TileBuilder
from oxide.tile.layouts import layout_of
from oxide.tile.lower import TileEmitter
from oxide.tile.mma_choice import engine_of
from oxide.tile.mma_lower import lower_mma, relayout
from oxide.tile.operand_rings import issue, ring_of
from oxide.tile.ordering import syncs_block
from oxide.tile.overlap import issue_pending_tail, lower_step, settle
from oxide.tile.pingpong import PingPongRefused, lower_schedule
from oxide.tile.row_staging import Stager
from oxide.tile.tma_rings import (
    drain_all,
    drain_settled,
    issue_tma,
    produce_tma,
    release_all,
    release_tma,
    ring_by_id,
)
from oxide.tile.tma_stores import drain_stores, store_tma
from oxide.tile.values import Slots


class ToSIMT:
    """Lowers one kernel's tile ops (see the module docstring)."""

    def __init__(self, b: TileBuilder, em: TileEmitter, stager: Stager | None = None) -> None:
        self.b = b
        self.em = em
        self.stager = stager
        self.slots: dict[SSAValue, Slots] = {}
        self.vars: dict[SSAValue, list[SSAValue]] = {}

    def run(self) -> None:
        carried: int | None = None  # a product's barrier count, checked after its copies
        for op in list(self.b.tile_ops):
            kind = kind_of(op)
            lower: Callable[[Operation], Any] = getattr(self, f"_{kind}")
            relied, before = syncs_block(op), self.em.barriers
            if relied and kind == "mma" and _barrier_follows(op):
                relied, carried = False, before  # TMA operands: its copies' barrier
            with self.b.lowering(op):
                if self.stager is not None:
                    self.stager.store(op, self.slots)
                out = lower(op)
                if self.stager is not None:
                    self.stager.reload(op, self.slots)
            if carried is not None and kind == "load":
                relied, before, carried = True, carried, None
            assert not relied or self.em.barriers > before, (
                f"{op.name}: tile/ordering.py counts on a barrier its lowering did not emit")
            turns = self.em.turns
            if turns is not None and op in turns.ops and self.em.barriers > before:
                raise PingPongRefused  # a warp group holding the turn would wait here
            if isinstance(out, Slots):
                out = (out,)
            for r, s in zip(op.results, out or (), strict=False):
                if isinstance(r.type, TileType):
                    assert s.layout.key() == layout_of(r).key(), (
                        f"{op.name}: lowered to another layout than the layout pass gave")
                    self.slots[r] = s
        if self.stager is not None:
            self.stager.finish()  # counted last: StagingRefused where they do not fit
        for op in reversed(self.b.tile_ops):
            op.detach()
            op.erase(safe_erase=False)
        self.b.tile_ops = []
        self.b.block = self.b.end_block
        if self.em.rings is not None and self.em.rings.tma_rings:
            drain_all(self.em)  # no TMA copy lands after the block is done
        drain_stores(self.em)  # nor does a TMA store still read its shared tile

    def _in(self, v: SSAValue) -> Slots:
        return self.slots[v]

    def _dtype(self, op: Operation) -> T.DType:
        t = op.results[0].type
        assert isinstance(t, TileType)
        return t.dtype

    # -- one method per op --------------------------------------------------------------

    def _full(self, op: Operation) -> Slots:
        return self.em.full(layout_of(op.results[0]), op.param("value"), self._dtype(op))

    def _splat(self, op: Operation) -> Slots:
        return self.em.splat(layout_of(op.results[0]), self._in(op.operands[0]))

    def _arange(self, op: Operation) -> Slots:
        return self.em.arange(layout_of(op.results[0]), self._dtype(op))

    def _index(self, op: Operation) -> Slots:
        return self.em.index_tile(layout_of(op.results[0]), op.param("axis"))

    def _cast(self, op: Operation) -> Slots:
        return self.em.cast(self._in(op.operands[0]), self._dtype(op))

    def _binary(self, op: Operation) -> Slots:
        a, b = (self._in(v) for v in op.operands)
        return self.em.binary(op.param("kind"), a, b, op.param("site"))

    def _compare(self, op: Operation) -> Slots:
        a, b = (self._in(v) for v in op.operands)
        return self.em.compare(op.param("pred"), a, b)

    def _unary(self, op: Operation) -> Slots:
        return self.em.unary(op.param("kind"), self._in(op.operands[0]))

    def _math(self, op: Operation) -> Slots:
        return self.em.math(op.param("fn"), [self._in(v) for v in op.operands],
                            self._dtype(op))

    def _where(self, op: Operation) -> Slots:
        c, a, b = (self._in(v) for v in op.operands)
        return self.em.where(c, a, b)

    def _broadcast(self, op: Operation) -> Slots:
        return self.em.broadcast(self._in(op.operands[0]), layout_of(op.results[0]))

    def _convert(self, op: Operation) -> Slots:
        x, target = self._in(op.operands[0]), layout_of(op.results[0])
        if op.param("to") == "mma":  # a constant accumulator is made again, not moved
            return relayout(self.em, x, target)
        return self.em.convert(x, target)

    def _expand(self, op: Operation) -> Slots:
        x = self._in(op.operands[0])
        return Slots(x.dtype, layout_of(op.results[0]), x.values)

    def _squeeze(self, op: Operation) -> Slots:
        x = self._in(op.operands[0])
        return Slots(x.dtype, layout_of(op.results[0]), x.values)

    def _permute(self, op: Operation) -> Slots:
        return self.em.permute(self._in(op.operands[0]), op.param("axes"),
                               layout_of(op.results[0]))

    def _reshape(self, op: Operation) -> Slots:
        return self.em.reshape(self._in(op.operands[0]), layout_of(op.results[0]))

    def _slices(self, op: Operation) -> list[Slots]:
        x, *index = op.operands
        return self.em.slices(self._in(x), [self._in(i).scalar for i in index],
                              op.param("starts"), op.param("subs"), op.param("drop", ()),
                              [layout_of(r) for r in op.results])

    def _cat(self, op: Operation) -> Slots:
        return self.em.concatenate([self._in(v) for v in op.operands], op.param("axis"),
                                   layout_of(op.results[0]))

    def _reduce(self, op: Operation) -> Slots:
        return self.em.reduce(op.param("kind"), self._in(op.operands[0]), op.param("axis"),
                              op.param("keepdims"))

    def _arg_reduce(self, op: Operation) -> tuple[Slots, Slots]:
        x, index = (self._in(v) for v in op.operands)
        return self.em.arg_reduce(op.param("kind"), x, index, op.param("axis"),
                                  op.param("keepdims"))

    def _cumsum(self, op: Operation) -> Slots:
        return self.em.cumsum(self._in(op.operands[0]), op.param("axis"))

    def _narrow_compare(self, op: Operation) -> Slots:
        return narrow_compare(self.em, op.param("pred"), self._in(op.operands[0]),
                              self._in(op.operands[1]))

    def _load(self, op: Operation) -> Slots:
        array, padding, *index = op.operands
        live = None
        if op.param("live"):  # a load issued ahead: whether its iteration runs
            live = self._in(index.pop()).scalar
        dt = self._dtype(op)
        ring = ring_of(layout_of(op.results[0]))
        if ring is not None:  # copied into a product operand's ring
            pipe = op.param("pipe")
            first = bool(pipe and pipe[2])
            index_values = [self._in(i).scalar for i in index]
            if op.param("role") == "producer":  # a producer warp group (tile/producer.py)
                return produce_tma(self.em, array, index_values, ring, dt, live)
            if self.em.consumer_threads is not None:
                return release_tma(self.em, ring, dt, first, live)
            if op.param("after_product") == "barrier":  # the buffers' last product is done
                self.em.barrier()
            if ring.tma:
                return issue_tma(self.em, array, index_values, ring, dt, first, live)
            return issue(self.em, array, index_values, ring, dt, first)
        pad = self.b.cast(self._in(padding).scalar, dt)
        layout = layout_of(op.results[0])
        got = self.em.load(array, op.param("vectors"), dt, [self._in(i).scalar for i in index],
                           layout.lead(op.param("drop") or 0), pad)
        return Slots(dt, layout, got.values)

    def _store(self, op: Operation) -> None:
        array, value, *index = op.operands
        index_values = [self._in(i).scalar for i in index]
        if op.param("tma"):  # through shared memory, by TMA (tile/tma_stores.py)
            store_tma(self.em, array, index_values, self._in(value), op.param("tma"))
            return
        t = self._in(value)
        self.em.store(array, op.param("vectors"), index_values,
                      Slots(t.dtype, t.layout.lead(op.param("drop") or 0), t.values))

    def _atomic(self, op: Operation) -> Slots:
        count = op.param("values")
        array, values, index = op.operands[0], op.operands[1:1 + count], op.operands[1 + count:]
        drop = op.param("drop") or 0
        slots = [self._in(v) for v in values]
        if op.param("tma"):  # added by a TMA reduction (tile/tma_stores.py): no old values
            t = slots[-1]
            store_tma(self.em, array, [self._in(i).scalar for i in index], t,
                      op.param("tma"), reduce=True)
            zero = self.em.const(0.0, t.dtype)
            return Slots(t.dtype, t.layout, [zero] * len(t.values))
        old = self.em.atomic(array, op.param("kind"), op.param("sem"), op.param("scope"),
                             [self._in(i).scalar for i in index],
                             [Slots(t.dtype, t.layout.lead(drop), t.values)
                              for t in slots], op.param("site"), bool(op.results[0].uses))
        return Slots(old.dtype, slots[-1].layout, old.values)

    def _barrier(self, op: Operation) -> None:
        self.em.barrier()

    def _mma(self, op: Operation) -> Slots:
        a, b, acc = (self._in(v) for v in op.operands)
        after_commit = None
        if op.param("overlap") is not None:  # the head of a rotated loop (tile/overlap.py)
            plan = self.em.overlap[op.param("overlap")]
            after_commit = lambda: issue_pending_tail(  # noqa: E731
                self.em, plan, self.vars[plan.acc])
        return lower_mma(self.em, a, b, acc, layout_of(op.results[0]), engine_of(op),
                         op.param("b_transposed", False), op.param("in_flight", False),
                         op.param("pingpong"), after_commit, op.param("a_transposed", False),
                         op.param("swapped", False))

    def _schedule(self, op: Operation) -> None:
        if op.param("loop") is not None:  # a rotated loop's (tile/overlap.py)
            plan = self.em.overlap[op.param("loop")]
            lower_step(self.em, plan, op.param("step"), [self._in(v) for v in op.operands],
                       self.vars[plan.acc])
            return
        lower_schedule(self.em, op.param("step"))

    def _from_scalar(self, op: Operation) -> Slots:
        v = op.operands[0]
        divisor = op.param("divisor")
        if divisor is not None:
            self.em.divisors[v] = divisor
        return Slots(self._dtype(op), layout_of(op.results[0]), (v,))

    def _extract(self, op: Operation) -> None:
        value, result = self._in(op.operands[0]).scalar, op.results[0]
        if result in self.b.uniform:  # a branch condition: block-uniform
            self.b.uniform.discard(result)
            self.b.uniform.add(value)
        result.replace_all_uses_with(value)

    def _var(self, op: Operation) -> None:
        t = op.results[0].type
        assert isinstance(t, TileVarType)
        layout = layout_of(op.results[0])
        dt = T.i32 if ring_of(layout) is not None else t.tile.dtype  # a ring's token
        self.vars[op.results[0]] = [self.b.alloc(ops.SlotOp(ir_type(dt)))
                                    for _ in range(layout.slots)]

    def _var_write(self, op: Operation) -> None:
        var, value = op.operands
        for slot, v in zip(self.vars[var], self._in(value).values, strict=True):
            self.b.emit(ops.SlotWriteOp(slot, v))

    def _var_read(self, op: Operation) -> Slots:
        var = op.operands[0]
        t = var.type
        assert isinstance(t, TileVarType)
        values = [self.b.value(ops.SlotReadOp(slot)) for slot in self.vars[var]]
        if op.param("settle"):  # a product left running writes them (operand_rings.py)
            wait = ops.HopperOp("wgmma.wait", values, [v.type for v in values], imm=(0,))
            self.b.emit(wait)
            values = list(wait.results)
            for ring in filter(None, (ring_by_id(self.em, r)
                                      for r in op.param("settle_rings", ()))):
                if self.em.consumer_threads is not None:  # its fills back to the producer
                    release_all(self.em, ring)
                else:
                    drain_settled(self.em, ring)
        if op.param("overlap_settle") is not None:  # a rotated loop's tail in flight
            values = settle(self.em, self.em.overlap[op.param("overlap_settle")], values)
        return Slots(t.tile.dtype, layout_of(var), tuple(values))


def _barrier_follows(mma: Operation) -> bool:
    """Whether the barrier tile/ordering.py counts on for `mma` comes with the deferred
    copies just after it: both operands filled by TMA (no barrier before the wgmma)."""
    nxt = mma.next_op
    if nxt is None or kind_of(nxt) != "load" or nxt.param("after_product") != "barrier":  # type: ignore[attr-defined]
        return False
    return all(getattr(layout_of(v), "tma", False) for v in mma.operands[:2])


def narrow_compare(em: TileEmitter, pred: str, a: Slots, n: Slots) -> Slots:
    """`a pred n` of a narrow signed integer tile `a` and a wider signed 0-d `n` (as in
    `tile.arange(BN)[None, :] < x.shape[1]`: i32 against i64), computed in `a`'s type:
    `n` is clamped into it once, and a block-uniform test of `n` against that type's
    range fixes the ends, so each element costs one narrow compare instead of a widening
    and a 64-bit compare; where `a` is a thread's coordinates plus static offsets
    (`tile.arange`), each element compares its offset with one per-thread room. The same
    truth values as the promoted compare."""
    lo, hi = -(1 << (a.dtype.bits - 1)), (1 << (a.dtype.bits - 1)) - 1
    scalar = n.layout
    lo_n, hi_n = em.full(scalar, lo, n.dtype), em.full(scalar, hi, n.dtype)
    clamped = em.cast(em.binary("min", em.binary("max", n, lo_n), hi_n), a.dtype)
    offsets = em.as_offsets(a)  # `tile.arange(BN)`: each value a thread base + k
    if offsets is not None:
        # a lies strictly inside i32 (`as_offsets` checks it), so an n past either end
        # clamps to a value past every element: the compare is right as it is
        return em.compare_offsets(pred, *offsets, clamped.scalar,
                                  em.divisors.get(n.scalar, 1), a.layout)
    cmp = em.compare(pred, a, em.broadcast(clamped, a.layout))
    # where n lies outside a's range, the clamped compare is wrong at one end only
    fix = {"lt": ("or", "gt", hi_n), "le": ("and", "ge", lo_n),
           "gt": ("or", "lt", lo_n), "ge": ("and", "le", hi_n)}
    if pred in fix:
        how, test, bound = fix[pred]
        conds = [(how, em.compare(test, n, bound))]
    else:  # eq / ne: n must be in range to equal any element
        inside = em.binary("and", em.compare("ge", n, lo_n), em.compare("le", n, hi_n))
        conds = [("and", inside)] if pred == "eq" else [("or", em.unary("not", inside))]
    for how, cond in conds:
        cmp = em.binary(how, cmp, em.broadcast(cond, a.layout))
    return cmp

