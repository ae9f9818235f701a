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

What it assumes: the layout pass and the rings ran (the rings' shared memory comes
first: `place_tma_stores` takes what they leave); the store is the array's only access in
the kernel (no load, atomic or other store of it: the ordering pass then has nothing to
order, and no access can see the copy in flight). What it guarantees: the array ends as
the masked stores would have left it.
"""

from __future__ import annotations

from typing import Any

from xdsl.ir import Operation, SSAValue

from oxide import types as T
from oxide.ir import ops
from oxide.ir.tile_ops import TileType, kind_of
from oxide.tile.builder import TileBuilder
from oxide.tile.layout import mma_accumulator
from oxide.tile.layouts import layout_of
from oxide.tile.operand_rings import (
    RING_BYTES,
    TMA_MAX_BOX,
    mappable,
    ring_bytes,
    ring_of,
    row_elements,
)
from oxide.tile.tma_rings import box_start, first_thread, only_if
from oxide.tile.values import Slots
from oxide.tile.wgmma_lower import stage_swizzled

_DTYPES = ("bf16", "f16", "f32")
_ROLE = "tma_store"  # the shared tile's staging role (one per size, `TileEmitter.staging`)


def place_tma_stores(b: TileBuilder) -> int:
    """Mark the stores that go by TMA (`tma` param; see the module docstring), as many as
    the shared memory the rings leave allows; how many."""
    accesses: dict[SSAValue, int] = {}
    for op in b.tile_ops:
        if kind_of(op) in ("load", "store", "atomic"):
            accesses[op.operands[0]] = accesses.get(op.operands[0], 0) + 1
    rings = {r.ring: r for op in b.tile_ops if kind_of(op) == "load"
             for r in (ring_of(layout_of(op.results[0])),) if r is not None}
    left = RING_BYTES - sum(ring_bytes(r) for r in rings.values())
    staged: set[tuple[str, int]] = set()  # one shared tile per dtype and size
    count = 0
    for op in b.tile_ops:
        if kind_of(op) != "store" or not _qualifies(b, op, accesses):
            continue
        t = op.operands[1].type
        assert isinstance(t, TileType)
        key = (t.dtype.name, t.dims[0] * t.dims[1])
        size = key[1] * t.dtype.itemsize
        if key not in staged:
            if size > left:
                continue
            left -= size
            staged.add(key)
        op.set_param("tma", True)  # type: ignore[attr-defined]
        count += 1
    return count


def _qualifies(b: TileBuilder, op: Operation, accesses: dict[SSAValue, int]) -> bool:
    array, value = op.operands[0], op.operands[1]
    t = value.type
    if not isinstance(t, TileType) or len(t.dims) != 2 or t.dtype.name not in _DTYPES:
        return False
    rows, cols = t.dims
    width = row_elements(cols, t.dtype)
    layout = layout_of(value)
    accumulator = any(a is not None and a.key() == layout.key()
                      for a in (mma_accumulator((rows, cols), layout.num_warps, r)
                                for r in (False, True)))
    return (accumulator and accesses.get(array) == 1
            and mappable(b, array, op.param("drop") or 0) and op.param("vectors") is True
            and rows <= TMA_MAX_BOX and cols % width == 0
            and width * t.dtype.itemsize % 16 == 0)


def store_tma(em: Any, array: SSAValue, index: list[SSAValue], t: Slots) -> None:
    """A tile store by TMA (see the module docstring). An index longer than 2 leads with
    a view's fixed dimensions (extent 1 in the box)."""
    b = em.b
    rows, cols = t.shape
    width = row_elements(cols, t.dtype)
    # every thread waits for its stores (thread 0 has some): under a branch, the wait
    # makes ptxas run every wgmma of the kernel one at a time (its C7514 note)
    b.emit(ops.HopperOp("tma.wait_group", [], [], imm=(0,)))
    em.barrier()  # the shared tile's last copy is complete
    smem = stage_swizzled(em, t, width, _ROLE)
    b.emit(ops.HopperOp("fence.proxy_async", [], []))
    em.barrier()
    fixed, row0, col0 = box_start(em, index, rows, cols)
    tmap = em.operand_map(array, (1,) * len(fixed) + (rows, width), width * t.dtype.itemsize)

    def copy() -> None:
        for s in range(cols // width):
            col = col0 if s == 0 else b.value(ops.BinaryOp("add", col0,
                                                           em.const(s * width, T.i32)))
            b.emit(ops.HopperOp(f"tma.store.{len(index)}d", [tmap, *fixed, row0, col], [],
                                smem, [em.const(s * rows * width, T.i64)], imm=()))
        b.emit(ops.HopperOp("tma.commit_group", [], []))

    only_if(em, first_thread(em), copy)
    em.tma_stores = True


def drain_stores(em: Any) -> None:
    """At the kernel's end: thread 0's stores have read their shared tiles (the block's
    shared memory may then go to another block)."""
    if em.tma_stores:
        em.b.emit(ops.HopperOp("tma.wait_group_read", [], [], imm=(0,)))
