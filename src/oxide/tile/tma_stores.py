"""Tile stores by TMA: a tile written to shared memory, then copied out by the tensor
memory accelerator while the kernel goes on.

Without this pass a `tile.store` is each thread's masked global stores of the elements
it holds: for a product's accumulator (a GEMM's epilogue), 8-byte pieces of eight rows
per warp instruction, issued on the kernel's critical path. With it, on sm_90, a store
of a 2-d tile of 16- or 32-bit floats in the accumulator's layout (a product's result,
cast or computed on elementwise: an epilogue) into an array the launch can map
(`operand_rings.mappable`: a C-contiguous 2-d parameter with rows of whole 16-byte
vectors) is:

- each thread waits until its previous TMA stores are complete (`cp.async.bulk.wait_group
  0`: thread 0 issued them; the shared tile is then free, and two stores of one element
  land in program order), then a barrier;
- every thread writes its elements into a shared tile in slabs of 128-byte rows with
  the 128-byte swizzle (`wgmma_lower.stage_swizzled`, the layout TMA reads: a warp's
  writes of an accumulator hit every bank once), fences them into the async proxy, and
  a barrier;
- thread 0 issues one TMA store per slab (boxes of (rows, 128 bytes); the tensor map is
  a hidden parameter the launch builds, `TileEmitter.operand_map`) and commits them: the
  copy runs while the kernel goes on (a persistent loop's next tile). Elements past the
  array's edge are not written (TMA clips them), as the masked stores did not write them;
- before the kernel ends, thread 0 waits until its stores have read the shared tile.

Where each consumer warp group of a producer kernel holds a band of the tile's rows
(`row_bands`: wgmma's accumulator of 8 warps, 64 rows a group), each group does the
above alone for its band: its own named barrier of 128 threads
(`named_barriers.sync_group`), its first thread's waits and copies (boxes of the band's
rows). A group that finishes its products first stores while the other's last products
still run, instead of both idling the tensor cores behind one barrier. A slab ring
stored so costs a few registers more, which spilled where the tiles already crowd the
registers (a bias + GELU epilogue, 384 live registers a thread estimated: 828 bytes of
spills and 14% slower at 4 stages, H100 2026-12-05): there (`live_registers` past
LIVE_LIMIT) the groups store a slab ring together.

The store's buffers take what the rings leave of the block's whole shared memory less
BARRIER_BYTES; where the kernel's other shared arrays then do not fit, it is lowered
again with what the rings leave of RING_BYTES (tile/pipeline.py `StoresRefused`).
Where the whole tile does not fit beside the rings (a 128 x 256 bf16 accumulator is 64 KB;
four stages of 128 x 256 x 64 rings leave 35 KB), the tile goes out through a ring of two
slab buffers instead (`SlabPlan`, CUTLASS's epilogue does the same with its subtiles):
slabs of 64, 32 or 16 columns, the widest whose two buffers fit, each written, fenced and
copied in turn (one bulk group a slab); before a buffer is written again, every thread
waits until only the previous slab's group may still be reading (`cp.async.bulk.wait_group
.read 1`), then a barrier. That takes each slot's slab to be the same for every thread
(`slab_of_slots`), as in wgmma's accumulator, where a thread's columns come in groups of 8.

A tile atomic that adds such a tile (`reducible`: `tile.atomic_add(c, idx, acc,
sem="relaxed")` of f32, at block or device scope, its old values unread; split K's
partial tiles) goes out the same way, with a TMA reduction (`cp.reduce.async.bulk.tensor
.add`) in place of the TMA store: the copy adds each element to the array's in L2, each
addition a relaxed atomic at device scope (the PTX ISA's words), the elements past the
array's edge untouched, as each thread's atomics left them. Its tensor map is f32 with
flushed subnormals (`OperandMap.ftz`): each thread's `atom.add.f32` on global memory
flushes subnormal inputs and results to zeros of their sign, a plain f32 map's reduction
keeps them (both measured on an H100), and the path a tile atomic takes must not change
its result (docs/language.md says the flush). Instead of 32k `red.global`
a 128 x 256 tile, the block issues one copy a slab. Other orderings keep each thread's
atomics: a release or acquire orders the block's other accesses around the atomic by
fences and barriers of the generic proxy, which a copy in the async proxy would not
follow without more fences (not built); old values are each thread's by definition.

What it assumes: the layout pass and the rings ran (the rings' shared memory comes
first: `place_tma_stores` takes what they leave); the store (or atomic) is the array's
only access in the kernel (no load, atomic or other store of it: the ordering pass then
has nothing to order, and no access can see the copy in flight). What it guarantees: the
array ends as the masked stores (or each thread's relaxed atomics) would have left it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.ir import Operation, SSAValue

from oxide import types as T
from oxide.frontend.parallel_calls import sm90_block_shared_bytes
from oxide.ir import ops
from oxide.ir.tile_ops import TileType, kind_of
from oxide.tile import named_barriers
from oxide.tile.builder import TileBuilder
from oxide.tile.layout import Layout, mma_accumulator, wgmma_accumulator
from oxide.tile.layouts import layout_of
from oxide.tile.operand_rings import (
    TMA_MAX_BOX,
    mappable,
    ring_budget,
    ring_bytes,
    ring_of,
    row_elements,
    swizzled_index,
)
from oxide.tile.register_budget import LIVE_LIMIT, live_registers
from oxide.tile.tma_rings import box_start, first_thread, only_if
from oxide.tile.values import Slots
from oxide.tile.wgmma_lower import stage_swizzled

_DTYPES = ("bf16", "f16", "f32")
_ROLE = "tma_store"  # the shared tile's staging role (one per size, `TileEmitter.staging`)
SLAB_BUFFERS = 2  # a slab ring's buffers: one written while the other's copy reads it
# what `place_tma_stores` leaves of the block's shared memory for the kernel's mbarriers
# (rings: 16 bytes a buffer) and the alignment of its arrays
BARRIER_BYTES = 2048


@dataclass(frozen=True)
class SlabPlan:
    """How one store goes out: slabs of `width` columns (a swizzled row of `width`
    elements each), through `buffers` shared slab buffers (the slab count: the whole tile
    at once)."""

    width: int
    buffers: int

    def bytes(self, rows: int, dt: T.DType) -> int:
        return self.buffers * rows * self.width * dt.itemsize


def plan_slabs(rows: int, cols: int, dt: T.DType, layout: Layout, left: int
               ) -> SlabPlan | None:
    """The whole tile where it fits in `left` bytes, else the widest slab ring that does
    (slab rows of at least 32 bytes, what a TMA swizzle takes), else None."""
    width = row_elements(cols, dt)
    whole = SlabPlan(width, cols // width)
    if whole.bytes(rows, dt) <= left:
        return whole
    while width * dt.itemsize >= 32:
        ring = SlabPlan(width, SLAB_BUFFERS)
        if (cols // width > SLAB_BUFFERS and ring.bytes(rows, dt) <= left
                and slab_of_slots(layout, width) is not None):
            return ring
        width //= 2
    return None


def slab_of_slots(layout: Layout, width: int) -> list[int] | None:
    """The slab of `width` columns each slot's element lies in, the same for every
    thread; None where a slot's column crosses a slab boundary from thread to thread
    (or the layout wraps around the tile's columns)."""
    m = layout.dims[1]
    if m.span > layout.shape[1]:
        return None
    reach = ((m.wpc - 1) * m.inner * m.tpw + m.tpw - 1) * m.spt  # a thread's column offset
    slabs = []
    for _, col in layout.offsets():
        if col // width != (col + reach) // width:
            return None
        slabs.append(col // width)
    return slabs


def place_tma_stores(b: TileBuilder, whole_block: bool, occupancy: int | None = None) -> bool:
    """Mark the stores that go by TMA (`tma` param; see the module docstring), as many as
    the shared memory the rings leave allows: of the block's whole shared memory less
    BARRIER_BYTES (`whole_block`), else of RING_BYTES, which leaves 16 KB for the
    kernel's other shared arrays (conversions, reductions). Whether a store took more
    than RING_BYTES would have let it: where the kernel's other arrays then do not fit,
    it is lowered again without `whole_block` (tile/frontend.py).

    Why the whole block: four stages of 128 x 256 x 64 rings leave 35 KB, enough for two
    64-column slabs of the 128 x 256 result (32 KB) where RING_BYTES gives 19 KB, two
    32-column ones: half the slabs, half the barriers (measured 1% faster on an H100,
    docs/performance.md). With `occupancy`, both budgets are of the shared memory that
    leaves room for that many blocks an SM (`sm90_block_shared_bytes`)."""
    accesses: dict[SSAValue, int] = {}
    for op in b.tile_ops:
        if kind_of(op) in ("load", "store", "atomic"):
            accesses[op.operands[0]] = accesses.get(op.operands[0], 0) + 1
    rings = {r.ring: r for op in b.tile_ops if kind_of(op) == "load"
             for r in (ring_of(layout_of(op.results[0])),) if r is not None}
    rings_bytes = sum(ring_bytes(r) for r in rings.values())
    block, rings_budget = sm90_block_shared_bytes(occupancy), ring_budget(occupancy)
    left = (block - BARRIER_BYTES if whole_block else rings_budget) - rings_bytes
    narrow = rings_budget - rings_bytes  # what the rings' budget would have left
    staged: set[tuple[str, int]] = set()  # one shared tile per dtype and size
    beyond = False
    crowded: bool | None = None  # whether the tiles crowd the registers (asked once)
    for op in b.tile_ops:
        if kind_of(op) not in ("store", "atomic") or not _qualifies(b, op, accesses):
            continue
        t = op.operands[1].type
        assert isinstance(t, TileType)
        rows, cols = t.dims
        plan = plan_slabs(rows, cols, t.dtype, layout_of(op.operands[1]), left)
        if plan is None:
            continue
        key = (t.dtype.name, plan.bytes(rows, t.dtype))
        if key not in staged:
            left -= key[1]
            narrow -= key[1]
            beyond = beyond or narrow < 0
            staged.add(key)
        groups_alone = plan.buffers == cols // plan.width
        if not groups_alone:
            # a slab ring stored by each warp group alone costs the threads a few
            # registers more: where the tiles already crowd them, the groups store together
            if crowded is None:
                crowded = live_registers(b)[0] > LIVE_LIMIT
            groups_alone = not crowded
        op.set_param("tma", (plan.width, plan.buffers, groups_alone))  # type: ignore[attr-defined]
    return beyond


def _qualifies(b: TileBuilder, op: Operation, accesses: dict[SSAValue, int]) -> bool:
    array, value = op.operands[0], op.operands[1]
    t = value.type
    if not isinstance(t, TileType) or len(t.dims) != 2 or t.dtype.name not in _DTYPES:
        return False
    if kind_of(op) == "atomic" and not reducible(op):
        return False
    rows, cols = t.dims
    width = row_elements(cols, t.dtype)
    layout = layout_of(value)
    accumulator = any(a is not None and a.key() == layout.key()
                      for a in (mma_accumulator((rows, cols), layout.num_warps, False),
                                mma_accumulator((rows, cols), layout.num_warps, True),
                                wgmma_accumulator((rows, cols), layout.num_warps)))
    return (accumulator and accesses.get(array) == 1
            and mappable(b, array, op.param("drop") or 0) and op.param("vectors") is True
            and rows <= TMA_MAX_BOX and cols % width == 0
            and width * t.dtype.itemsize % 16 == 0)


def reducible(op: Operation) -> bool:
    """Whether a tile atomic may go out as a TMA reduction (`cp.reduce.async.bulk.tensor
    .add`, see the module docstring): a relaxed f32 add whose old values nothing reads,
    at block or device scope (each of the copy's additions is a relaxed atomic at device
    scope: at least what was asked)."""
    return (op.param("kind") == "add" and op.param("sem") == "relaxed"
            and op.param("scope") in ("block", "device") and op.param("values") == 1
            and not op.results[0].uses and op.operands[1].type.dtype.name == "f32")


def store_tma(em: Any, array: SSAValue, index: list[SSAValue], t: Slots,
              plan: tuple[int, int, bool], reduce: bool = False) -> None:
    """A tile store by TMA (see the module docstring) in slabs of `plan` = (width,
    buffers, whether the warp groups may store alone); with `reduce`, a TMA reduction
    that adds the tile to the array's elements instead. An index longer than 2 leads
    with a view's fixed dimensions (extent 1 in the box). Where each consumer warp group
    holds a band of the tile's rows (`row_bands`) and may, each group stores its band
    alone: its own barriers, its first thread's copies."""
    b = em.b
    rows, cols = t.shape
    width, buffers, groups_alone = plan
    slabs = cols // width
    verb = "reduce_add" if reduce else "store"
    bands = (row_bands(t.layout) if em.consumer_threads is not None and groups_alone
             else 1)
    band_rows = rows // bands

    def sync() -> None:
        if bands == 1:
            em.barrier()
        else:
            named_barriers.sync_group(em)
            # counted as a barrier: a ping-pong turn around the store is refused
            # (tile/to_simt.py), as it was with the consumers' barrier
            em.barriers += 1

    # every thread waits for its stores (thread 0 has some): under a branch, the wait
    # makes ptxas run every wgmma of the kernel one at a time (its C7514 note)
    b.emit(ops.HopperOp("tma.wait_group", [], [], imm=(0,)))
    sync()  # the shared tile's last copy is complete

    def box() -> tuple[list[SSAValue], SSAValue, SSAValue, SSAValue, SSAValue]:
        """The box's coordinates, its tensor map and where the band starts in a slab
        (elements)."""
        fixed, row0, col0 = box_start(em, index, rows, cols)
        start = em.const(0, T.i64)
        if bands > 1:
            group = named_barriers.warp_group(em)
            row0 = b.value(ops.BinaryOp("add", row0, b.value(ops.BinaryOp(
                "mul", group, em.const(band_rows, T.i32)))))
            start = b.value(ops.BinaryOp("mul", b.cast(group, T.i64),
                                         em.const(band_rows * width, T.i64)))
        tmap = em.operand_map(array, (1,) * len(fixed) + (band_rows, width),
                              width * t.dtype.itemsize, ftz=reduce)
        return fixed, row0, col0, tmap, start

    def copy(slab_range: range, smem: SSAValue, at: Any) -> None:
        """The first thread (of the block, or of each band's warp group) copies slabs
        `slab_range` out (one bulk group), from box `at`."""
        fixed, row0, col0, tmap, band_start = at

        def issue() -> None:
            for s in slab_range:
                col = col0 if s == 0 else b.value(ops.BinaryOp("add", col0,
                                                               em.const(s * width, T.i32)))
                start = b.value(ops.BinaryOp("add", band_start,
                                             em.const(s % buffers * rows * width, T.i64)))
                b.emit(ops.HopperOp(f"tma.{verb}.{len(index)}d", [tmap, *fixed, row0, col],
                                    [], smem, [start], imm=()))
            b.emit(ops.HopperOp("tma.commit_group", [], []))

        only_if(em, first_thread(em) if bands == 1 else named_barriers.group_leader(em),
                issue)

    if buffers == slabs:  # the whole tile at once
        smem = stage_swizzled(em, t, width, _ROLE)
        b.emit(ops.HopperOp("fence.proxy_async", [], []))
        sync()
        copy(range(slabs), smem, box())
    else:
        smem = em.staging(t.dtype, buffers * rows * width, _ROLE)
        of_slot = slab_of_slots(t.layout, width)
        assert of_slot is not None, "plan_slabs checked the layout"
        at = box()
        for s in range(slabs):
            if s >= buffers:  # the buffer's last copy has read it
                b.emit(ops.HopperOp("tma.wait_group_read", [], [], imm=(buffers - 1,)))
                sync()
            _stage_slab(em, t, width, smem, s % buffers * rows * width,
                        [k for k, slab in enumerate(of_slot) if slab == s])
            b.emit(ops.HopperOp("fence.proxy_async", [], []))
            sync()
            copy(range(s, s + 1), smem, at)
    em.tma_stores = True


def row_bands(layout: Layout) -> int:
    """How many warp groups hold the tile's rows in bands, each group's threads all of
    their rows in its own band of rows / groups (wgmma's accumulator of 8 warps: 2, of
    64 rows each), so that each group may store its band alone; 1 where they do not.

    Why: behind one barrier of all the consumers, the tensor cores idle while both
    groups stage their rows; a group that stores alone starts while the other's last
    products still run, and goes on to its next tile (measured against the hand-written
    kernel's per-group epilogue, docs/performance.md)."""
    rows, cols = layout.dims
    groups = layout.num_warps // 4
    if (groups < 2 or layout.num_warps % 4 or rows.wpc != layout.num_warps
            or rows.warp_shift != 0 or layout.reps(0) != 1 or cols.wpc != 1):
        return 1
    return groups


def _stage_slab(em: Any, t: Slots, width: int, smem: SSAValue, start: int,
                slots: list[int]) -> None:
    """Slots `slots` of `t` (one slab's) into the slab buffer at element `start`, rows of
    `width` elements swizzled as the TMA copy of that row size reads them; a thread's
    side-by-side elements in one vector store (they stay in one 16-byte chunk, and a
    slab holds whole runs of them: `slot_of_slots` compares a run's first column and
    the thread's reach past its last)."""
    rows = t.shape[0]
    size = t.dtype.itemsize
    run = max(1, min(t.layout.dims[1].spt, 16 // size, width))
    coords = em.coords(t.layout)
    mask, base = em.const(width - 1, T.i64), em.const(start, T.i64)
    for k in slots[::run]:
        r, c = (em.b.cast(x, T.i64) for x in coords[k])
        c = em.b.value(ops.BinaryOp("and", c, mask))
        at = em.b.value(ops.BinaryOp("add", swizzled_index(em, r, c, rows, width, width,
                                                           size), base))
        if run == 1:
            em.b.emit(ops.StoreOp(smem, [at], t.values[k], 0, False, True))
        else:
            em.b.emit(ops.VectorStoreOp(smem, [at], t.values[k:k + run], run * size))


def drain_stores(em: Any) -> None:
    """At the kernel's end: thread 0's stores have read their shared tiles (the block's
    shared memory may then go to another block)."""
    if em.tma_stores:
        em.b.emit(ops.HopperOp("tma.wait_group_read", [], [], imm=(0,)))
