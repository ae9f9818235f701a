"""Operand rings filled by TMA: a K loop's product operands copied by the tensor memory
accelerator, one mbarrier per buffer.

tile/operand_rings.py gives a pipelined K loop's two product operands rings whose copies
the loop issues after its product (`after_product`), behind a barrier every thread passes
once done with the buffers they overwrite. Where a ring's array is a 2-d kernel parameter
(`RingLayout.tma`), this module fills its buffers by TMA instead of each thread's
cp.async copies:

- the launch builds a tensor map of the array for boxes of (rows, width) elements (one
  slab of the swizzled layout wgmma reads, `operand_rings.swizzled_index`) with the
  swizzle of `width` 16-bit elements: a hidden kernel parameter (`TileEmitter.operand_map`,
  codegen/abi.py `OperandMap`); elements past the array's edge arrive as zeros (the
  padding 0 the ring asks of its loads);
- buffer b of a ring has an mbarrier `full[b]` (count 1, initialized at the kernel's
  start by thread 0, before a barrier); a ring load takes the ring's next buffer: thread 0
  arms `full[b]` with the tile's bytes (`mbarrier.arrive.expect_tx`) and issues one TMA
  copy per slab; the token is `phase << 4 | b`, the phase being the parity of the
  buffer's fill count;
- a product whose operands both came by TMA waits for their phases (`mbarrier.try_wait
  .parity`, every thread) and needs neither the proxy fence nor the barrier a cp.async
  ring needs: TMA writes in the async proxy, and the mbarrier's completion makes them
  visible to each waiting thread.

Why no phase is ambiguous: a buffer is filled again only after every thread waited for
its previous fill (the refill waits for the barrier after the product that read it), so
no mbarrier ever runs two phases ahead of a waiting thread. A loop makes no fill past
its end: a load issued ahead for an iteration that does not run (`live` false, from
tile/loops.py) copies nothing and leaves the counters alone, in every role alike. The
next run of the loop (`first`) and the kernel's end (`drain`) still wait for every
buffer's latest fill, so no copy lands in shared memory another run reuses or a finished
block gave back.

With a producer warp group (tile/producer.py) a ring load is two: the consumers'
(`release_tma`: no copy; the buffer released on its `empty[b]` mbarrier) and the
producer's (`produce_tma`: wait for that release, arm, copy), in place of `issue_tma`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xdsl.ir import SSAValue

from oxide import types as T
from oxide.ir import ops
from oxide.ir.types import ir_type
from oxide.tile.operand_rings import BUFFER_BITS, RingLayout, ring_array, ring_state, zero_slot
from oxide.tile.values import Slots


def box_of(ring: RingLayout) -> tuple[int, int]:
    """The box one TMA copy moves: a slab, (rows, width) elements."""
    return ring.shape[0], ring.width


def swizzle_of(ring: RingLayout, dt: T.DType) -> int:
    """The swizzle in bytes: the slab row's (32, 64 or 128)."""
    return ring.width * (dt.bits // 8)


def barriers(em: Any, ring: RingLayout) -> SSAValue:
    """The ring's `full` mbarriers, one per buffer: made once, initialized at the kernel's
    start by thread 0 (count 1: the arrive that arms a fill), then a block barrier. In a
    kernel with a producer warp group (tile/producer.py) the ring also has `empty`
    mbarriers (`empties`), initialized beside them."""
    state = ring_state(em)
    if ring.ring not in state.barriers:
        state.barriers[ring.ring] = init_barriers(em, ring.buffers, 1)
        if em.consumer_threads is not None:  # one arrive per consumer warp
            state.empties[ring.ring] = init_barriers(em, ring.buffers, em.num_warps)
        em.b.at_entry(ops.HopperOp("fence.mbarrier_init", [], []))
        em.b.at_entry(ops.BarrierOp("block"))
        em.uses_barriers = True
        state.phases[ring.ring] = zero_slot(em)
        state.tma_rings.append(ring)
    return state.barriers[ring.ring]  # type: ignore[no-any-return]


def empties(em: Any, ring: RingLayout) -> SSAValue:
    """The ring's `empty` mbarriers (a kernel with a producer warp group): phase p of
    `empty[b]` completes when every consumer warp has given back the buffer's (p + 1)-th
    fill (`release_one`: fills go back in the order they were made)."""
    barriers(em, ring)
    return ring_state(em).empties[ring.ring]  # type: ignore[no-any-return]


def init_barriers(em: Any, count: int, arrivals: int) -> SSAValue:
    """`count` mbarriers of `arrivals` arrivals each, initialized by thread 0 at the
    kernel's start."""
    bars = em.shared(T.u64, count)
    if em.cpu:  # each thread in turn, before the block's first barrier: one state
        for j in range(count):
            em.b.at_entry(ops.HopperOp("mbarrier.init", [em.const(arrivals, T.i32)], [],
                                       bars, [em.const(j, T.i64)]))
        return bars
    tid = em._entry(ops.RegisterOp("tid.x", ir_type(T.i32)))
    for j in range(count):
        address = em._entry(ops.HopperOp("tma.barrier", [], [ir_type(T.i64)], bars,
                                         [em.const(j, T.i64)]))
        em.b.at_entry(ops.InlineAsmOp(
            "{ .reg .pred p; setp.eq.u32 p, $1, 0; "
            f"@p mbarrier.init.shared::cta.b64 [$0], {arrivals}; }}", "l,r", [address, tid],
            [], True))
    return bars


def issue_tma(em: Any, array: SSAValue, index: list[SSAValue], ring: RingLayout,
              dt: T.DType, first: bool, live: SSAValue | None = None) -> Slots:
    """A ring load by TMA: thread 0 arms the next buffer's mbarrier with the tile's bytes
    and copies each slab into it; the token names the buffer and the phase to wait for.
    A load issued ahead for an iteration that does not run (`live` false) fills nothing
    and leaves the counters as they were."""
    assert not ring.producer_only, "a ring for a producer warp group filled without one"
    b = em.b
    ring_array(em, ring, dt)
    if first:  # a pipelined loop starts: its last run's fills landed, its reads are done
        drain_ring(em, ring)
        b.emit(ops.HopperOp("wgmma.wait", [], [], imm=(0,)))
        em.barrier()
    buffer, phase = _advance(em, ring, live)
    ring_state(em).drained.discard(ring.ring)  # a fill to wait for again
    issuer = first_thread(em)
    if live is not None:
        issuer = b.value(ops.BinaryOp("and", issuer, live))
    only_if(em, issuer, lambda: _fill(em, array, index, ring, dt, buffer))
    return _token(em, ring, dt, buffer, phase)


def produce_tma(em: Any, array: SSAValue, index: list[SSAValue], ring: RingLayout,
                dt: T.DType, live: SSAValue | None = None) -> Slots:
    """A ring load in the producer's one thread (tile/producer.py): wait until the
    consumers released the buffer's last fill, then arm its `full[b]` and copy the tile
    into it (only where `live`, as `issue_tma`). Fill n of buffer b is its
    (n // buffers)-th; the release of the one before completes phase n // buffers - 1 of
    `empty[b]`: the wait is for the other parity than this fill's (a first fill's
    returns at once, a fresh mbarrier's phase -1 counting as complete)."""
    b = em.b
    buffer, phase = _advance(em, ring, live)

    def fill() -> None:
        previous = b.value(ops.BinaryOp("xor", phase, em.const(1, T.i32)))
        b.emit(ops.HopperOp("mbarrier.wait_parity", [previous], [], empties(em, ring),
                            [b.cast(buffer, T.i64)]))
        _fill(em, array, index, ring, dt, buffer)
    if live is None:
        fill()
    else:
        only_if(em, live, fill)
    return _token(em, ring, dt, buffer, phase)


def release_tma(em: Any, ring: RingLayout, dt: T.DType, first: bool,
                live: SSAValue | None = None) -> Slots:
    """A ring load in the consumers (tile/producer.py): no copy, the producer makes it.
    The ring's counters advance as the producer's do (where `live`: a fill is made).
    Buffers go back to the producer when the products that read them are done
    (`consume`, `release_all`); a loop's start (`first`) gives back whatever the last run
    left: its last product's fills. A resident ring's fill (tile/operand_rings.py) is
    read by every product until its load runs again: given back there, its products done."""
    b = em.b
    ring_array(em, ring, dt)
    empties(em, ring)
    if first or ring.resident:
        b.emit(ops.HopperOp("wgmma.wait", [], [], imm=(0,)))
        release_all(em, ring)
    buffer, phase = _advance(em, ring, live)
    _count(em, _accounts(em, ring).fills, live)
    return _token(em, ring, dt, buffer, phase)


@dataclass(frozen=True)
class _Accounts:
    """A ring's fills as the consumers count them (i32 slots): made (ring loads),
    consumed (by products), released (given back on `empty[b]`, in order), and the
    buffer and phase of the next one to release."""

    fills: SSAValue
    consumed: SSAValue
    released: SSAValue
    buffer: SSAValue
    phase: SSAValue


def _accounts(em: Any, ring: RingLayout) -> _Accounts:
    state = ring_state(em)
    if ring.ring not in state.accounts:
        state.accounts[ring.ring] = _Accounts(*(zero_slot(em) for _ in range(5)))
    return state.accounts[ring.ring]  # type: ignore[no-any-return]


def _count(em: Any, slot: SSAValue, live: SSAValue | None = None) -> None:
    """One more in `slot` (where `live`, if given)."""
    b = em.b
    one = em.const(1, T.i32) if live is None else b.value(ops.CastOp(live, ir_type(T.i32)))
    b.emit(ops.SlotWriteOp(slot, b.value(ops.BinaryOp("add", b.value(ops.SlotReadOp(slot)),
                                                      one))))


def consume(em: Any, rings: list[RingLayout], in_flight: bool) -> None:
    """After a product's `wgmma.wait_group` in the consumers: it consumed one fill of each
    ring; the fills whose products are done (all but the one still in flight) go back. A
    resident ring's fill is given back by its next load (`release_tma`), not here."""
    b = em.b
    for ring in rings:
        if ring.resident:
            continue
        acc = _accounts(em, ring)
        _count(em, acc.consumed)
        done = b.value(ops.SlotReadOp(acc.consumed))
        if in_flight:
            done = b.value(ops.BinaryOp("sub", done, em.const(1, T.i32)))
        pending = b.value(ops.CompareOp("lt", b.value(ops.SlotReadOp(acc.released)), done))
        only_if(em, pending, lambda ring=ring: release_one(em, ring, wait=False))


def release_all(em: Any, ring: RingLayout) -> None:
    """Every fill not yet given back (at most one per buffer), in order: those a product
    read (its wgmma done: the caller waited for every product), and those none read
    (fills past a loop's end) once landed, so that no copy is in flight into a buffer the
    producer fills again."""
    b = em.b
    acc = _accounts(em, ring)
    for _ in range(ring.buffers):
        released = b.value(ops.SlotReadOp(acc.released))
        left = b.value(ops.CompareOp("lt", released, b.value(ops.SlotReadOp(acc.fills))))
        unread = b.value(ops.CompareOp("ge", released, b.value(ops.SlotReadOp(acc.consumed))))
        only_if(em, left, lambda unread=unread: release_one(em, ring, wait=unread))
    # the fills nobody read count as consumed: `consumed` is the next fill a product
    # reads (the next run's first), so `consume` compares it with `released` again
    b.emit(ops.SlotWriteOp(acc.consumed, b.value(ops.SlotReadOp(acc.fills))))


def release_one(em: Any, ring: RingLayout, wait: SSAValue | bool) -> None:
    """Give the oldest fill not yet released back to the producer: lane 0 of each warp
    arrives on its buffer's `empty` mbarrier; with `wait` (a condition), first wait until
    the fill landed."""
    b = em.b
    acc = _accounts(em, ring)
    buffer = b.value(ops.SlotReadOp(acc.buffer))
    phase = b.value(ops.SlotReadOp(acc.phase))
    if wait is not False:
        def landed() -> None:
            b.emit(ops.HopperOp("mbarrier.wait_parity", [phase], [], barriers(em, ring),
                                [b.cast(buffer, T.i64)]))
        if wait is True:
            landed()
        else:
            only_if(em, wait, landed)
    lane, _ = em._thread()
    bars = empties(em, ring)
    only_if(em, em._entry(ops.CompareOp("eq", lane, em.const(0, T.i32))),
            lambda: b.emit(ops.HopperOp("mbarrier.arrive", [], [ir_type(T.i64)], bars,
                                        [b.cast(buffer, T.i64)])))
    _count(em, acc.released)
    after = b.value(ops.BinaryOp("add", buffer, em.const(1, T.i32)))
    wrapped = b.value(ops.CompareOp("eq", after, em.const(ring.buffers, T.i32)))
    b.emit(ops.SlotWriteOp(acc.buffer, b.value(ops.SelectOp(wrapped, em.const(0, T.i32),
                                                            after))))
    b.emit(ops.SlotWriteOp(acc.phase, b.value(ops.BinaryOp(
        "xor", phase, b.value(ops.CastOp(wrapped, ir_type(T.i32)))))))


def ring_by_id(em: Any, ring_id: int) -> RingLayout | None:
    """The TMA ring numbered `ring_id`, once a ring load of it was lowered."""
    state = em.rings
    return next((r for r in (state.tma_rings if state is not None else ())
                 if r.ring == ring_id), None)


def first_thread(em: Any) -> SSAValue:
    """Whether this is thread 0 (computed once, at the kernel's start)."""
    lane, warp = em._thread()
    return em._entry(ops.CompareOp("eq", em._entry(ops.BinaryOp("or", lane, warp)),
                                   em.const(0, T.i32)))


def only_if(em: Any, cond: SSAValue, body: Callable[[], Any]) -> None:
    """Emit `body` where `cond` holds (a branch around it)."""
    b = em.b
    then, join = b.new_block(), b.new_block()
    b.cond_br(cond, then, join)
    b.set_block(then)
    body()
    b.br(join)
    b.set_block(join)


def _advance(em: Any, ring: RingLayout, live: SSAValue | None = None
             ) -> tuple[SSAValue, SSAValue]:
    """(buffer, phase) of the ring's next fill; the counters move past it, where `live`
    (a fill that is made) if given."""
    b = em.b
    state = ring_state(em)
    buffer = b.value(ops.SlotReadOp(state.next_buffer[ring.ring]))
    phase = b.value(ops.SlotReadOp(state.phases[ring.ring]))
    after = b.value(ops.BinaryOp("add", buffer, em.const(1, T.i32)))
    wrapped = b.value(ops.CompareOp("eq", after, em.const(ring.buffers, T.i32)))
    following = b.value(ops.SelectOp(wrapped, em.const(0, T.i32), after))
    flip = wrapped
    if live is not None:
        following = b.value(ops.SelectOp(live, following, buffer))
        flip = b.value(ops.BinaryOp("and", wrapped, live))
    b.emit(ops.SlotWriteOp(state.next_buffer[ring.ring], following))
    b.emit(ops.SlotWriteOp(state.phases[ring.ring], b.value(ops.BinaryOp(
        "xor", phase, b.value(ops.CastOp(flip, ir_type(T.i32)))))))
    return buffer, phase


def _fill(em: Any, array: SSAValue, index: list[SSAValue], ring: RingLayout, dt: T.DType,
          buffer: SSAValue) -> None:
    """Arm `full[buffer]` with the tile's bytes and copy the tile at `index` into the
    buffer, one TMA copy per slab (the calling thread alone). An index longer than 2
    leads with a view's fixed dimensions (extent 1 in the box)."""
    b = em.b
    bars = barriers(em, ring)
    smem = ring_array(em, ring, dt)
    rows, cols = ring.shape
    width = ring.width
    fixed, row0, col0 = box_start(em, index, rows, cols)
    tmap = em.operand_map(array, (1,) * len(fixed) + box_of(ring), swizzle_of(ring, dt))
    bar = b.value(ops.HopperOp("tma.barrier", [], [ir_type(T.i64)], bars,
                               [b.cast(buffer, T.i64)]))
    b.emit(ops.HopperOp("mbarrier.arrive_expect_tx", [em.const(rows * cols * dt.bits // 8,
                                                                T.i32)],
                        [ir_type(T.i64)], bars, [b.cast(buffer, T.i64)]))
    start = b.value(ops.BinaryOp("mul", b.cast(buffer, T.i64), em.const(rows * cols, T.i64)))
    for s in range(cols // width):
        at = start if s == 0 else b.value(ops.BinaryOp("add", start,
                                                       em.const(s * rows * width, T.i64)))
        col = col0 if s == 0 else b.value(ops.BinaryOp("add", col0,
                                                       em.const(s * width, T.i32)))
        b.emit(ops.HopperOp(f"tma.load.{len(index)}d", [tmap, bar, *fixed, row0, col], [], smem,
                            [at], imm=()))


def _token(em: Any, ring: RingLayout, dt: T.DType, buffer: SSAValue, phase: SSAValue) -> Slots:
    """The ring load's value: `phase << 4 | buffer`, what the product waits for."""
    b = em.b
    token = b.value(ops.BinaryOp("or", b.value(ops.BinaryOp(
        "shl", phase, em.const(BUFFER_BITS, T.i32))), buffer))
    return Slots(dt, ring, (token,))


def box_start(em: Any, index: list[SSAValue], rows: int, cols: int
              ) -> tuple[list[SSAValue], SSAValue, SSAValue]:
    """The first element of a (rows, cols) tile at tile `index`, as TMA coordinates: a
    view's fixed indices first (boxes of extent 1 there), then the row and the column."""
    drop = len(index) - 2
    return ([coordinate(em, i, 1) for i in index[:drop]], coordinate(em, index[drop], rows),
            coordinate(em, index[drop + 1], cols))


def coordinate(em: Any, tile: SSAValue, n: int) -> SSAValue:
    """The first element (i32) of tile `tile` (i64) of `n` elements: TMA fills what lies
    outside the array with zeros. A tile so far out that its first element does not fit
    in 32 bits is replaced by tile (2**31 - 1) // n - 1, which starts past 2**30 - n,
    so still wholly outside the array (a launch refuses extents of 2**30 or more:
    runtime/operand_maps.py)."""
    b = em.b
    lo, hi = -(2 ** 31) // n, (2 ** 31 - 1) // n - 1
    inside = b.value(ops.BinaryOp("and", b.value(ops.CompareOp("ge", tile, em.const(lo, T.i64))),
                                  b.value(ops.CompareOp("le", tile, em.const(hi, T.i64)))))
    clamped = b.value(ops.SelectOp(inside, tile, em.const(hi, T.i64)))
    return b.cast(b.value(ops.BinaryOp("mul", clamped, em.const(n, T.i64))), T.i32)


def wait_tma(em: Any, tokens: list[Slots]) -> None:
    """Every thread waits for the fills its TMA tokens name (their buffers' phases)."""
    b = em.b
    mask = em.const((1 << BUFFER_BITS) - 1, T.i32)
    for t in tokens:
        ring = t.layout
        assert isinstance(ring, RingLayout) and ring.tma
        buffer = b.value(ops.BinaryOp("and", t.values[0], mask))
        phase = b.value(ops.BinaryOp("shr", t.values[0], em.const(BUFFER_BITS, T.i32)))
        b.emit(ops.HopperOp("mbarrier.wait_parity", [phase], [], barriers(em, ring),
                            [b.cast(buffer, T.i64)]))


def drain_ring(em: Any, ring: RingLayout) -> None:
    """Wait for the latest fill of each of the ring's buffers: those before the next one
    were filled in this round of the ring (this phase), the others in the last (with no
    last round, the wait for parity 1 of a fresh mbarrier returns at once)."""
    b = em.b
    bars = barriers(em, ring)
    state = ring_state(em)
    buffer = b.value(ops.SlotReadOp(state.next_buffer[ring.ring]))
    phase = b.value(ops.SlotReadOp(state.phases[ring.ring]))
    last = b.value(ops.BinaryOp("xor", phase, em.const(1, T.i32)))
    for j in range(ring.buffers):
        this_round = b.value(ops.CompareOp("lt", em.const(j, T.i32), buffer))
        parity = b.value(ops.SelectOp(this_round, phase, last))
        b.emit(ops.HopperOp("mbarrier.wait_parity", [parity], [], bars, [em.const(j, T.i64)]))


def drain_all(em: Any) -> None:
    """At the kernel's end: no TMA copy still lands in the block's shared memory (but
    for the rings drained where their loop's product settled, `drain_settled`, and not
    filled since)."""
    state = em.rings
    for ring in (state.tma_rings if state is not None else ()):
        if ring.ring not in state.drained:
            drain_ring(em, ring)


def drain_settled(em: Any, ring: RingLayout) -> None:
    """Where a loop's last product settled (its wgmma waited for) in a kernel without a
    producer: wait for the ring's fills here, not at the kernel's end. Why: ptxas
    serializes every wgmma of a kernel (its note C7514, "non wgmma instructions reading
    accumulator registers ... between start and end of the pipeline stage") whose
    epilogue stores the result in several TMA slabs and then waits on an mbarrier
    (ptxas 13.0, sm_90a, 2026-12-07: 128 x 128 x 64 on 4 warps at occupancy 2, or 64 x 128
    x 64; the same waits moved before the epilogue: no note). Every fill of the loop was
    waited for by the products that read it (a loop makes no fill past its end), so
    these waits return at once."""
    drain_ring(em, ring)
    ring_state(em).drained.add(ring.ring)
