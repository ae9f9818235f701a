"""Product operands copied straight from global memory into rings of shared buffers.

Without this pass a wgmma operand travels global -> registers -> shared memory: each
thread loads its elements, then stores them in the swizzled layout wgmma's descriptors
read (tile/wgmma_lower.py's `stage_swizzled`). With it, a `tile.load` whose only use is an operand
of a product on wgmma becomes `cp.async` copies of 16 bytes straight into that layout, in
one of the `buffers` of the operand's *ring*; the value the load gives is a *token*, one
i32 per thread (the same in every thread): the number of the copy group it committed and
the buffer it filled. The product waits for that group (`cp.async.wait_group`), fences the
copies into the async proxy, passes a barrier and reads the buffer. With `num_stages`
(tile/loops.py issues a loop's loads that many iterations ahead), the copies of the next
iterations fly while this one's product runs, and no register holds them.

What it assumes: the layout pass ran; products chose their engines. A load qualifies when
it reads a 2-d tile of 16-bit floats (or of 8-bit ones, for a K-major operand) from an
array the kernel never writes, the launch specialized on rows of 16-byte vectors
(`ArrayType.vectors`: a 16-byte chunk is aligned and wholly inside the array or wholly
outside, where the copy writes zeros, the padding 0 a product needs), and its padding
is 0. Its token must reach only that operand, either
directly in the same block (one load, two buffers), or through the loop-carried
variables of one pipelined load statement (`pipe` on the load ops, set by tile/loops.py:
the prologue's loads and the loop's, `ahead` iterations ahead; `ahead + 2` buffers), the
loop's load in the product's block (a product under an `if` in the loop keeps registers).

What it guarantees: a buffer is rewritten only after every thread is done reading it,
and a copy never lands on a buffer another copy of the same thread still writes:
- direct: copy n goes to buffer n % 2 after this thread's product n - 1, whose barrier
  every thread passed after its product n - 2 (the last reader of that buffer) was done;
- pipelined, one operand in a ring: in iteration k the loop issues copy k + ahead into
  buffer (k + ahead) % (ahead + 2), last read by product k - 2, which every thread
  finished before the barrier of product k - 1;
- pipelined, both operands (a K loop): the loop's loads move to just after their
  product (`after_product`), and their copies are issued after a barrier every thread
  passes once done with the product before (a product left in flight: after waiting
  for it, `wgmma.wait_group 1`): copy k + ahead then overwrites the buffer product k - 1
  read, so `ahead + 1` buffers do, in flight or not;
- any other product left in flight (`wgmma.wait_group 1`) has one buffer more in each
  ring: its reads end only at the next product's wait, one barrier later.
The prologue of a pipelined loop (`first` load) first waits for all of the thread's own
copies (the previous run of the loop left `ahead` of them in flight) and for its wgmma,
and passes a barrier.
With a producer warp group to fill them (`producer`: tile/producer.py, tile/tma_rings.py),
two more kinds of ring are placed, both filled by TMA and kept only where the producer is
planned (`producer_only`; tile/pipeline.py lowers the kernel again without them where it is
not): a pipelined loop's load that feeds one operand of its product alone (attention's K
and V: the other operand a loop-invariant tile or registers), in `ahead + 1` buffers; and a
*resident* ring, a load outside the loop of the product that reads it (attention's Q), in
one buffer: its fill is read by every run of the product until the load runs again, so the
consumers give it back there (after waiting for their products), not per product. Their
reuse rests on the producer's `empty` mbarriers, not on barriers between products.
Everything else keeps the registers' path. The rings take at most RING_BYTES; where they
and the kernel's other shared memory do not fit together, tile/frontend.py compiles the
kernel again without them (`Target.rings`), as it compiled before rings.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any

from xdsl.ir import BlockArgument, Operation, SSAValue

from oxide import types as T
from oxide.frontend.parallel_calls import SM90A_STATIC_SHARED_BYTES, sm90_block_shared_bytes
from oxide.ir import ops
from oxide.ir.tile_ops import TileType, kind_of
from oxide.ir.types import ArrayType as IRArrayType
from oxide.ir.types import ir_type
from oxide.tile.builder import TileBuilder
from oxide.tile.layout import Layout, blocked
from oxide.tile.layouts import layout_of, set_layout
from oxide.tile.mma_choice import HALVES, engine_of, slab_elements
from oxide.tile.mma_choice import WGMMA_SLAB as SLAB
from oxide.tile.values import Slots

CHUNK = 16  # bytes per cp.async copy
# the rings of one kernel take at most this much shared memory (the rest: conversions)
OTHER_SHARED_BYTES = 16 * 1024
RING_BYTES = SM90A_STATIC_SHARED_BYTES - OTHER_SHARED_BYTES
MAX_WAIT = 7  # the largest `cp.async.wait_group` count a product asks for
TMA_MAX_BOX = 256  # elements per TMA box dimension (a ring of taller tiles keeps cp.async)
# a token is `group << 4 | buffer`: room for 16 buffers, where the deepest ring takes
# `ahead + 3` (num_stages 8 ahead 7, one more for a product in flight)
BUFFER_BITS = 4


def ring_budget(occupancy: int | None) -> int:
    """RING_BYTES, or less where `occupancy` blocks must fit an SM's shared memory."""
    return sm90_block_shared_bytes(occupancy) - OTHER_SHARED_BYTES


@dataclass(frozen=True)
class RingLayout(Layout):
    """The layout of a token: one i32 per thread standing for a tile of `shape` in buffer
    `token & 15` of ring `ring` (`buffers` of them), staged in rows of `width` elements of
    `elem_bytes` bytes."""

    ring: int = 0
    buffers: int = 2
    width: int = SLAB
    pipelined: bool = False  # tokens travel through loop-carried variables
    tma: bool = False  # filled by TMA (tile/tma_rings.py), not by each thread's cp.async
    elem_bytes: int = 2
    # a ring only a producer warp group may fill (a single operand's, or a loop-invariant
    # one's: see `place_operand_rings`)
    producer_only: bool = False
    resident: bool = False  # a loop-invariant operand's: its fill is read until the next

    def __post_init__(self) -> None:
        # a token names its buffer in BUFFER_BITS bits (num_stages bounds the depth)
        assert 1 <= self.buffers <= 1 << BUFFER_BITS, self.buffers

    def key(self) -> tuple[object, ...]:
        return ("ring", self.shape, self.ring)

    @property
    def slots(self) -> int:
        return 1

    @property
    def is_blocked(self) -> bool:
        return False


def ring_of(layout: Layout) -> RingLayout | None:
    return layout if isinstance(layout, RingLayout) else None


def row_elements(k: int, dt: T.DType = T.bf16) -> int:
    """Elements per shared row of a K-major operand with K columns of `dt`: all of K up
    to a 128-byte row, else 128-byte slabs."""
    return min(k, slab_elements(dt))


def operand_width(mn_major: bool, cols: int, dt: T.DType) -> int:
    """The staging row of an operand tile with `cols` columns: an MN-major one (B as `a @
    b` has it, K x N; a folded `a_transposed` A, K x M) goes in slabs of 64 columns, a
    narrower N (16 or 32) in one slab of its width; a K-major one in rows of K
    (`row_elements`)."""
    return min(SLAB, cols) if mn_major else row_elements(cols, dt)


def mn_major(mma: Operation, index: int) -> bool:
    """Whether operand `index` of a wgmma product is read MN-major: B as `a @ b` has it,
    or an A the layout pass folded from `x.permute((1, 0))` (`a_transposed`)."""
    if index == 0:
        return bool(mma.param("a_transposed", False))  # type: ignore[attr-defined]
    return not mma.param("b_transposed", False)  # type: ignore[attr-defined]


# -- the pass ----------------------------------------------------------------------------


def place_operand_rings(b: TileBuilder, tma: bool = True, producer: bool = False,
                        occupancy: int | None = None) -> int:
    """Give each qualifying product operand a ring (see the module docstring); how many.
    With `tma`, a K loop's rings of 2-d array parameters are filled by TMA
    (tile/tma_rings.py); with `producer` as well, a single pipelined operand's and a
    loop-invariant operand's, for a producer warp group (`producer_only`). With
    `occupancy`, the rings leave room for that many blocks an SM (`ring_budget`)."""
    written = {op.operands[0] for op in b.tile_ops if kind_of(op) in ("store", "atomic")}
    writes: dict[SSAValue, list[Operation]] = {}
    for op in b.tile_ops:
        if kind_of(op) == "var_write":
            writes.setdefault(op.operands[0], []).append(op)
    budget = ring_budget(occupancy)
    count = 0
    ids = itertools.count()  # a ring's number: its own, whether or not it is placed
    placed: dict[int, _Placed] = {}
    for op in b.tile_ops:
        if kind_of(op) != "mma" or engine_of(op) != "wgmma":
            continue
        found = []
        for index in (0, 1):
            chain = _chain(op, index, writes, tma and producer)
            if chain is None or op.operands[0] is op.operands[1]:
                continue
            ring = _ring(op, *chain[:2], written, mn_major(op, index), next(ids),
                         tma and producer)
            if ring is not None:
                found.append((ring, chain))
        deferred = len(found) == 2 and all(r.pipelined for r, _ in found)
        if deferred:  # the copies wait for a barrier after the product: one buffer fewer
            found = [(replace(r, buffers=r.buffers - 1, tma=tma and _tma_fits(b, r, c[0][0])),
                      c) for r, c in found]
        elif tma and producer:
            found = [(_shared(_for_producer(b, r, c[0][0]), c[0], placed), c)
                     for r, c in found]
        found = [(r, c) for r, c in found if not r.resident or r.producer_only]
        settle = _accumulator_reads(op, writes) if len(found) == 2 else None
        if settle is not None:
            # one more buffer each (the product in flight reads one), but for deferred
            # copies, which wait for the product before last anyway, and a producer's,
            # which wait for their buffers' release
            wider = found if deferred else [
                (r if r.producer_only else replace(r, buffers=r.buffers + 1), c)
                for r, c in found]
            if sum(ring_bytes(r) for r, _ in wider) <= budget:
                found = wider
                op.set_param("in_flight", True)  # type: ignore[attr-defined]
                for read in settle:
                    read.set_param("settle", True)  # type: ignore[attr-defined]
                    # the rings whose fills the product's last wait gives back
                    # (not a resident ring's: its fill may be read after the loop, and
                    # its next load gives it back)
                    read.set_param("settle_rings",  # type: ignore[attr-defined]
                                   tuple(r.ring for r, _ in found if not r.resident))
        if deferred and sum(ring_bytes(r) for r, _ in found) > budget:
            _too_deep(b, [r for r, _ in found], budget, found[0][1][0][0])
            continue  # both rings or neither: a deferred copy's wait stands for both
        for ring, (loads, variables, reads) in found:
            if ring.ring not in placed:  # a ring shared with an earlier loop's: paid for
                if ring_bytes(ring) > budget:
                    if ring.pipelined:
                        _too_deep(b, [ring], budget, loads[0])
                    continue
                budget -= ring_bytes(ring)
                placed[ring.ring] = _Placed(ring, loads[0].operands[0])
            placed[ring.ring].loops.append(_loops_of(loads[0]))
            count += 1
            for v in (*(ld.results[0] for ld in loads), *variables, *reads):
                set_layout(v, ring)
            if deferred:
                _defer(b, op, next(ld for ld in loads if ld.parent_block() is op.parent_block()))
        if deferred:
            op.next_op.set_param("after_product", "barrier")  # type: ignore[union-attr]
    return count


def _too_deep(b: TileBuilder, rings: list[RingLayout], budget: int, load: Operation) -> None:
    """Note on `b` (`stages_that_fit`) the deepest pipeline whose buffers of these
    pipelined `rings` (one loop's, `load` among its loads) fit the `budget` left, where at
    least two stages do: tile/frontend.py lowers the kernel again at that `num_stages`
    rather than keep the loop's tiles in registers, `num_stages` deep."""
    ahead = load.param("pipe")[1]
    per_buffer = sum(ring_bytes(r) // r.buffers for r in rings)
    extra = max(r.buffers for r in rings) - ahead  # buffers beyond the copies in flight
    stages = budget // per_buffer - extra + 1
    if 2 <= stages <= ahead:
        noted = b.stages_that_fit
        b.stages_that_fit = stages if noted is None else min(noted, stages)


def _for_producer(b: TileBuilder, ring: RingLayout, load: Operation) -> RingLayout:
    """A single pipelined operand's ring, or a resident one, filled by TMA for a producer
    warp group where TMA can fill it: the producer waits for each buffer's release, so a
    pipelined ring needs no buffer for the reads a barrier would otherwise cover
    (`ahead + 1`). Other rings as they were."""
    if not (ring.pipelined or ring.resident) or not _tma_fits(b, ring, load):
        return ring
    buffers = 1 if ring.resident else ring.buffers - 1
    return replace(ring, buffers=buffers, tma=True, producer_only=True)


@dataclass
class _Placed:
    """A ring placed, the array its loads read, and the pipelined loops of those loads
    (`pipe`'s last part), one entry per chain that took it."""

    ring: RingLayout
    array: SSAValue
    loops: list[tuple[int, ...]] = field(default_factory=list)


def _loops_of(load: Operation) -> tuple[int, ...]:
    pipe = load.param("pipe")
    return tuple(pipe[3]) if pipe else ()


def _nested(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Whether one of two loops (paths of pipelined loops) is the other or inside it."""
    return a[:len(b)] == b or b[:len(a)] == a


def _shared(ring: RingLayout, loads: list[Operation], placed: dict[int, _Placed]
            ) -> RingLayout:
    """The ring a producer's chain takes: a resident load's ring placed for an earlier
    product of it; a pipelined loop's ring of the same tiles from the same array placed for
    a loop that neither holds this one nor sits in it (two loops one after another, as a
    causal attention's unmasked and diagonal steps: one ring's fills are made and read in
    program order, the second loop's first load giving back what the first left); else
    `ring` itself."""
    if not ring.producer_only:
        return ring
    if ring.resident:
        return ring_of(layout_of(loads[0].results[0])) or ring
    loops = _loops_of(loads[0])
    for p in placed.values():
        r = p.ring
        if (r.producer_only and r.pipelined and p.array is loads[0].operands[0]
                and (r.shape, r.width, r.buffers, r.elem_bytes)
                == (ring.shape, ring.width, ring.buffers, ring.elem_bytes)
                and not any(_nested(loops, other) for other in p.loops)):
            return r
    return ring


def needs_producer(b: TileBuilder) -> bool:
    """Whether a ring placed in `b` is one only a producer warp group may fill."""
    return any(getattr(ring_of(layout_of(op.results[0])), "producer_only", False)
               for op in b.tile_ops if kind_of(op) == "load")


def products_on_tma_rings(b: TileBuilder) -> bool:
    """Whether `b` has wgmma products and each reads both operands from rings TMA fills
    (a K loop as a GEMM writes it; not an operand from registers or staged by the
    threads)."""
    products = [op for op in b.tile_ops if kind_of(op) == "mma" and engine_of(op) == "wgmma"]
    return bool(products) and all(getattr(ring_of(layout_of(v)), "tma", False)
                                  for op in products for v in op.operands[:2])


def _tma_fits(b: TileBuilder, ring: RingLayout, load: Operation) -> bool:
    """Whether TMA can fill `ring` with `load`'s tiles: a mappable array, boxes of at
    most 256 rows."""
    return (mappable(b, load.operands[0], load.param("drop") or 0)
            and ring.shape[0] <= TMA_MAX_BOX)


def mappable(b: TileBuilder, array: SSAValue, drop: int = 0) -> bool:
    """Whether the launch can build a tensor map of `array` (runtime/operand_maps.py) for
    2-d tiles, `drop` leading dimensions of extent 1 left out (a view's): a C-contiguous
    kernel parameter of rank 2 + drop."""
    return (isinstance(array, BlockArgument) and array.block is b.func.body.blocks[0]
            and isinstance(array.type, IRArrayType) and array.type.rank.data == 2 + drop
            and bool(array.type.contiguous.data))


def _defer(b: TileBuilder, mma: Operation, load: Operation) -> None:
    """Move a pipelined loop's load to just after its product (its operands are defined
    earlier in that block; its value, a token, is only carried to the next iterations),
    marked `after_product`: its copies are issued after a barrier that every thread
    passes once its wgmma before last is done (the first of the product's deferred
    loads passes it: "barrier"), which frees the buffer they overwrite (see the module
    docstring)."""
    load.detach()
    b.tile_ops.remove(load)
    b.insert_tile_op(load, mma, after=True)
    load.set_param("after_product", True)  # type: ignore[attr-defined]


def ring_bytes(ring: RingLayout) -> int:
    rows, cols = ring.shape
    return ring.buffers * rows * cols * ring.elem_bytes


def _accumulator_reads(mma: Operation, writes: dict[SSAValue, list[Operation]]
                       ) -> list[Operation] | None:
    """Where the product may leave its wgmma running (`wgmma.wait_group 1`) while the
    next one is issued: its result only carried in a loop variable that is this product's
    accumulator, as a K loop has it. The variable's reads that feed anything else (the
    epilogue, after the loop) must wait for it first: those reads; None where it may not."""
    result = mma.results[0]
    if len(list(result.uses)) != 1:
        return None
    use = next(iter(result.uses))
    if kind_of(use.operation) != "var_write" or use.index != 1:
        return None
    var = use.operation.operands[0]
    acc = mma.operands[2].owner
    if kind_of(acc) != "var_read" or acc.operands[0] is not var \
            or len(list(mma.operands[2].uses)) != 1:  # type: ignore[union-attr]
        return None
    if any(w.operands[1] is not result and kind_of(w.operands[1].owner) == "mma"
           for w in writes.get(var, ())):
        return None
    settle = []
    for u in var.uses:
        read = u.operation
        if kind_of(read) != "var_read" or read is acc:
            continue
        settle.append(read)
    return settle


def _chain(mma: Operation, index: int, writes: dict[SSAValue, list[Operation]],
           shared: bool = False) -> tuple[list[Operation], list[SSAValue], list[SSAValue]] | None:
    """(the loads, the variables, the variable reads) whose values can reach operand
    `index` of `mma`, where they reach nothing else; None otherwise. With `shared`, a
    load's value (no variables between) may also be operand `index` of other products on
    wgmma that read it alike (a resident ring, read by each: `_shared`)."""
    loads: list[Operation] = []
    variables: list[SSAValue] = []
    reads: list[SSAValue] = []
    stack = [mma.operands[index]]
    seen: set[SSAValue] = set()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        owner = v.owner
        kind = kind_of(owner)
        if kind == "load":
            loads.append(owner)  # type: ignore[arg-type]
        elif kind == "var_read":
            reads.append(v)
            var = owner.operands[0]  # type: ignore[union-attr]
            if var not in variables:
                variables.append(var)
                stack.extend(w.operands[1] for w in writes.get(var, ()))
        else:
            return None
    chain_writes = {id(w) for var in variables for w in writes.get(var, ())}
    others: list[Operation] = []  # other products that read the value
    for v in seen:
        for use in v.uses:
            user = use.operation
            if user is mma and use.index == index:
                continue
            if id(user) in chain_writes and use.index == 1:
                continue
            if (shared and kind_of(user) == "mma" and use.index == index
                    and engine_of(user) == "wgmma"
                    and mn_major(user, index) == mn_major(mma, index)):
                others.append(user)
                continue
            return None
    if others and (variables or any(ld.parent_block() is m.parent_block()
                                    for ld in loads for m in (mma, *others))):
        return None  # shared only as a resident ring: loaded outside every reader's block
    for var in variables:  # a chain variable's other reads are unused (after the loop)
        for u in var.uses:
            if kind_of(u.operation) != "var_read" or u.operation.results[0] in seen:
                continue
            if u.operation.results[0].uses:
                return None
            reads.append(u.operation.results[0])
    return loads, variables, reads


def _ring(mma: Operation, loads: list[Operation], variables: list[SSAValue],
          written: set[SSAValue], mn: bool, ring: int, resident: bool = False
          ) -> RingLayout | None:
    """The ring of these loads (an operand read MN-major where `mn`), or None where one
    does not qualify. With `resident`, a
    load outside the product's block (the loop-invariant operand of a product in a loop)
    or in none of the kernel's loops (a lone step's operand) gets a resident ring (one
    buffer, `_for_producer` decides whether it stays)."""
    pipes = {ld.param("pipe", (None,))[0] for ld in loads}
    outside = False
    if variables:
        # the loop's own load stands in the product's block: each step issues one copy
        # and consumes one, the product's barrier between (the buffers' reuse counts on it)
        if len(pipes) != 1 or None in pipes or not any(
                ld.parent_block() is mma.parent_block() for ld in loads):
            return None
        ahead = loads[0].param("pipe")[1]
        buffers = ahead + 2
    else:
        if len(loads) != 1:
            return None
        outside = loads[0].parent_block() is not mma.parent_block()
        if outside and not (resident and pipes == {None}):
            return None
        # for a producer, a load in none of the kernel's loops is resident wherever it
        # stands (a masked last step's operand after its loop): its one fill stays until it
        # runs again (a loop's load that is not pipelined keeps its plain ring, with which
        # the producer is refused and the kernel keeps its threads' rings)
        outside = outside or (resident and pipes == {None} and bool(loads[0].param("lone")))
        buffers = 1 if outside else 2
    for ld in loads:
        t = ld.results[0].type
        assert isinstance(t, TileType)
        # 8-bit operands: wgmma reads them K-major only
        if not ((t.dtype.name in HALVES or t.dtype.is_fp8 and not mn) and len(t.dims) == 2
                and ld.param("vectors") is True and ld.operands[0] not in written
                and _is_zero(ld.operands[1]) and t.dims[1] * t.dtype.itemsize % CHUNK == 0):
            return None
    t = loads[0].results[0].type
    assert isinstance(t, TileType)
    shape = tuple(t.dims)
    if any(tuple(ld.results[0].type.dims) != shape for ld in loads):  # type: ignore[attr-defined]
        return None
    base = layout_of(loads[0].results[0])
    return RingLayout(base.shape, base.dims, base.num_warps, ring, buffers,
                      operand_width(mn, shape[1], t.dtype), bool(variables),
                      elem_bytes=t.dtype.itemsize, resident=outside)


def _is_zero(padding: SSAValue) -> bool:
    owner = padding.owner
    return kind_of(owner) == "full" and owner.param("value") == 0  # type: ignore[union-attr]


# -- the lowering --------------------------------------------------------------------------


@dataclass
class _Rings:
    """One kernel's ring state: the copy groups committed so far, and per ring the next
    buffer and the shared array."""

    groups: SSAValue
    next_buffer: dict[int, SSAValue] = field(default_factory=dict)
    arrays: dict[int, SSAValue] = field(default_factory=dict)
    # TMA rings (tile/tma_rings.py): their mbarriers and the parity of their rounds
    barriers: dict[int, SSAValue] = field(default_factory=dict)
    phases: dict[int, SSAValue] = field(default_factory=dict)
    empties: dict[int, SSAValue] = field(default_factory=dict)  # with a producer warp group
    # and the consumers' accounts of each ring: fills counted, consumed, released, and the
    # buffer and phase of the next to release (tile/tma_rings.py `release_one`)
    accounts: dict[int, Any] = field(default_factory=dict)
    tma_rings: list[RingLayout] = field(default_factory=list)
    # TMA rings drained where a loop's product settled and filled by nothing emitted
    # since: the kernel's end need not wait for them again (tile/tma_rings.py `drain_all`)
    drained: set[int] = field(default_factory=set)


def ring_state(em: Any) -> _Rings:
    if em.rings is None:
        em.rings = _Rings(zero_slot(em))
    return em.rings  # type: ignore[no-any-return]


def zero_slot(em: Any) -> SSAValue:
    """An i32 slot that holds 0 from the kernel's start."""
    slot = em.b.alloc(ops.SlotOp(ir_type(T.i32)))
    em.b.at_entry(ops.SlotWriteOp(slot, em.const(0, T.i32)))
    return slot


def ring_array(em: Any, ring: RingLayout, dt: T.DType) -> SSAValue:
    """The shared array of `ring`'s buffers, one after another."""
    state = ring_state(em)
    if ring.ring not in state.arrays:
        rows, cols = ring.shape
        state.arrays[ring.ring] = em.shared(dt, ring.buffers * rows * cols)
        state.next_buffer[ring.ring] = zero_slot(em)
    return state.arrays[ring.ring]


def swizzled_index(em: Any, r: SSAValue, c: SSAValue, rows: int, cols: int, width: int,
                   size: int) -> SSAValue:
    """The shared element (i64) of tile element (r, c) (i64 coordinates) staged in slabs
    of `width` columns, each `rows` rows of `width` elements with the swizzle of that row
    size: 16-byte chunk `q` of row `r` stored at chunk `q ^ (r * row_bytes / 128 %
    (row_bytes / 16))`, what a TMA copy with that swizzle writes."""
    b = em.b
    row_bytes = width * size
    phases = row_bytes // 16  # chunks the swizzle rotates: 2, 4 or 8
    slab = b.value(ops.BinaryOp("shr", c, em.const(width.bit_length() - 1, T.i64))) \
        if cols > width else None
    c_in = b.value(ops.BinaryOp("and", c, em.const(width - 1, T.i64))) if cols > width else c
    rot = b.value(ops.BinaryOp("shr", b.value(ops.BinaryOp(
        "mul", r, em.const(row_bytes, T.i64))), em.const(7, T.i64)))
    rot = b.value(ops.BinaryOp("and", rot, em.const(phases - 1, T.i64)))
    rot = b.value(ops.BinaryOp("mul", rot, em.const(16 // size, T.i64)))
    at = b.value(ops.BinaryOp("add", b.value(ops.BinaryOp(
        "mul", r, em.const(width, T.i64))), b.value(ops.BinaryOp("xor", c_in, rot))))
    if slab is not None:
        at = b.value(ops.BinaryOp("add", at, b.value(ops.BinaryOp(
            "mul", slab, em.const(rows * width, T.i64)))))
    return at


def issue(em: Any, array: SSAValue, index: list[SSAValue], ring: RingLayout, dt: T.DType,
          first: bool) -> Slots:
    """A ring load: this thread's 16-byte chunks of the tile at `index` copied into the
    ring's next buffer, one commit group; its token."""
    b = em.b
    if first:  # a pipelined loop starts: the last run's copies landed, its reads are done
        b.emit(ops.HopperOp("cp_async.wait", [], [], imm=(0,)))
        b.emit(ops.HopperOp("wgmma.wait", [], [], imm=(0,)))
        em.barrier()
    smem = ring_array(em, ring, dt)
    state = ring_state(em)
    group = b.value(ops.SlotReadOp(state.groups))
    b.emit(ops.SlotWriteOp(state.groups, b.value(ops.BinaryOp("add", group,
                                                                em.const(1, T.i32)))))
    slot = state.next_buffer[ring.ring]
    buffer = b.value(ops.SlotReadOp(slot))
    after = b.value(ops.BinaryOp("add", buffer, em.const(1, T.i32)))
    wrapped = b.value(ops.CompareOp("eq", after, em.const(ring.buffers, T.i32)))
    b.emit(ops.SlotWriteOp(slot, b.value(ops.SelectOp(wrapped, em.const(0, T.i32), after))))
    rows, cols = ring.shape
    size = dt.bits // 8
    per = CHUNK // size
    # each run of `per` is one chunk (a tile of fewer chunks than threads: replicas,
    # which `owner` leaves out)
    chunks = blocked((rows, cols), em.num_warps, per, whole_vectors=True)
    assert chunks.dims[1].spt % per == 0
    in_array = chunks.lead(len(index) - 2)  # a view's fixed dimensions first
    starts = em._starts(index, in_array)
    rooms = em._rooms(array, index, starts, in_array)
    coords = em.coords(chunks)
    owner = em.owner(chunks)
    if owner is None:
        owner = em.const(True, T.bool_)
    offsets = in_array.offsets()
    first_element = b.value(ops.BinaryOp("mul", b.cast(buffer, T.i64),
                                         em.const(rows * cols, T.i64)))
    for k in range(0, len(offsets), per):
        r, c = (b.cast(x, T.i64) for x in coords[k])
        at = b.value(ops.BinaryOp("add", first_element,
                                  swizzled_index(em, r, c, rows, cols, ring.width, size)))
        b.emit(ops.AsyncCopyOp(array, em._element(starts, offsets[k]),
                               em._slot_inside(rooms, offsets[k]), owner, smem, at))
    b.emit(ops.HopperOp("cp_async.commit", [], []))
    token = b.value(ops.BinaryOp("or", b.value(ops.BinaryOp(
        "shl", group, em.const(BUFFER_BITS, T.i32))), buffer))
    return Slots(dt, ring, (token,))


def buffer_start(em: Any, t: Slots) -> SSAValue:
    """The first element (i64) of the buffer token `t` names, in its ring's array."""
    ring = ring_of(t.layout)
    assert ring is not None
    rows, cols = ring.shape
    buffer = em.b.value(ops.BinaryOp("and", t.values[0],
                                     em.const((1 << BUFFER_BITS) - 1, T.i32)))
    return em.b.value(ops.BinaryOp("mul", em.b.cast(buffer, T.i64),
                                   em.const(rows * cols, T.i64)))


def wait_for(em: Any, tokens: list[Slots]) -> None:
    """This thread's copies of the tokens' groups landed: `cp.async.wait_group n` with n
    the fewest groups committed after any of them (at most MAX_WAIT), chosen by
    block-uniform branches (every thread committed the same groups)."""
    b = em.b
    if not any(ring_of(t.layout).pipelined for t in tokens):  # type: ignore[union-attr]
        b.emit(ops.HopperOp("cp_async.wait", [], [], imm=(0,)))  # issued just before
        return
    committed = b.value(ops.SlotReadOp(ring_state(em).groups))
    later = None
    for t in tokens:
        group = b.value(ops.BinaryOp("shr", t.values[0], em.const(BUFFER_BITS, T.i32)))
        n = b.value(ops.BinaryOp("sub", b.value(ops.BinaryOp("sub", committed, group)),
                                 em.const(1, T.i32)))
        later = n if later is None else b.value(ops.BinaryOp("min", later, n))
    assert later is not None
    join = b.new_block()
    for n in range(MAX_WAIT, 0, -1):
        here, other = b.new_block(), b.new_block()
        b.cond_br(b.value(ops.CompareOp("ge", later, em.const(n, T.i32))), here, other)
        b.set_block(here)
        b.emit(ops.HopperOp("cp_async.wait", [], [], imm=(n,)))
        b.br(join)
        b.set_block(other)
    b.emit(ops.HopperOp("cp_async.wait", [], [], imm=(0,)))
    b.br(join)
    b.set_block(join)

