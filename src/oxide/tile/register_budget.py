"""A warning where one tile cannot fit a thread's registers: the row that spills.

What it assumes: the layout pass ran (every tile value has its layout), for a GPU target.
What it does: finds the tile value that gives a thread the most 32-bit registers; past
`LIMIT` (half of the 255 a thread may have: the kernel needs more than that one value
live), ptxas will spill it to local memory, and a kernel that reads a row once runs at a
fraction of the bandwidth (tile_layernorm at 32768 f32 columns on 8 warps: 0.2x Triton,
H200 2026-12-03). It changes nothing: it warns (`ox.PerformanceWarning`), at the line
that made the tile, with the two ways out: more warps per block, or the row in chunks
through a loop (the tile_wide_rows example). The CPU has no register file to overflow.
"""

from __future__ import annotations

import sys
from typing import Any

from oxide.errors import KernelTypeError, PerformanceWarning
from oxide.ir.tile_ops import TileType, kind_of
from oxide.tile.builder import TileBuilder
from oxide.tile.held_warnings import warn_at
from oxide.tile.layouts import layout_of
from oxide.tile.mma_choice import engine_of
from oxide.tile.operand_rings import ring_of

LIMIT = 128  # 32-bit registers one tile may take in each thread
LIVE_LIMIT = 200  # and the tiles live at once (the rest: addresses, indices, counters)
# ops whose tiles cost no registers of their own: constants and broadcasts (LLVM folds and
# rematerializes them), and views of another tile's registers
_FREE = frozenset({"full", "splat", "broadcast", "arange", "index", "expand", "squeeze",
                   "reshape", "permute", "var"})
# integer and boolean ops over free tiles and scalars: index arithmetic (`first_key +
# tile.arange(BN)[None, :]`, `keys <= rows`), which LLVM folds into each slot's constant
# offset and the predicate where the tile is used
_INDEX_MATH = frozenset({"binary", "compare", "cast"})


def free_ops(ops: Any) -> set[int]:
    """The ids of the ops in `ops` (in program order) whose tiles take no registers of
    their own: `_FREE` ops, and integer or boolean `_INDEX_MATH` over free tiles and
    scalars. (Counted as registers, attention's causal mask took 96 of a thread's 262
    estimated registers; ptxas gave the kernel 168 and no spills.)"""
    free: set[int] = set()
    for op in ops:
        kind = kind_of(op)
        if kind in _FREE:
            free.add(id(op))
        elif (kind in _INDEX_MATH and op.results
              and isinstance(op.results[0].type, TileType)
              and (op.results[0].type.dtype.is_int or op.results[0].type.dtype.is_bool)
              and all(not isinstance(v.type, TileType) or id(v.owner) in free
                      for v in op.operands)):
            free.add(id(op))
    return free


def thread_registers(r: Any) -> int:
    """The 32-bit registers tile value `r` takes in each thread: none for a tile copied
    into an operand ring (tile/operand_rings.py), which lives in shared memory (the
    thread holds a token)."""
    layout = layout_of(r)
    if ring_of(layout) is not None:
        return 0
    return -(-layout.slots * r.type.dtype.itemsize // 4)


def live_registers(b: TileBuilder) -> tuple[int, int, list[tuple[int, Any]]]:
    """The most 32-bit registers a thread's tiles take at once, estimated over the tile
    ops in program order: a tile is live from the op that makes it to its last use (an
    op's operand that dies there gives its registers to the result). Returns (the most,
    the op index where, the tiles live there as (registers, op that made it)). Loops
    are taken in order, once: a tile made before a loop and used early in its body is
    live through it, which this undercounts (a lower bound, for a warning)."""
    order = {id(op): i for i, op in enumerate(b.tile_ops)}
    free = free_ops(b.tile_ops)
    tiles: list[tuple[int, int, int, Any]] = []  # (made at, last use, registers, op)
    for i, op in enumerate(b.tile_ops):
        if id(op) in free:
            continue
        for r in op.results:
            if not isinstance(r.type, TileType) or r.type.layout.data is None or not r.type.dims:
                continue
            last = max((order.get(id(use.operation), i) for use in r.uses), default=i)
            tiles.append((i, last, thread_registers(r), op))
    events: dict[int, int] = {}
    for made, last, regs, _ in tiles:
        if last > made:
            events[made] = events.get(made, 0) + regs
            events[last] = events.get(last, 0) - regs
    worst, at, running = 0, -1, 0
    for i in sorted(events):
        running += events[i]
        if running > worst:
            worst, at = running, i
    live = sorted(((regs, op) for made, last, regs, op in tiles if made <= at < last),
                  key=lambda x: -x[0])
    return worst, at, live


def register_cap(num_warps: int, occupancy: int | None) -> int:
    """The registers a thread may have: 255, or fewer where `occupancy` blocks of the
    block's threads must share an SM's 64K registers (ptxas caps them so)."""
    if occupancy is None:
        return 255
    return min(255, 65536 // (occupancy * 32 * num_warps) // 8 * 8)


# registers a wgmma needs beside its accumulator (its descriptors, addresses, the loop's
# counters): ptxas asked for 154 where a 128-register accumulator met a cap of 128
# (`occupancy=2` on 8 warps; ptxas 13.0, sm_90a, 2026-12-07)
WGMMA_BESIDES = 16


def check_wgmma_fits(b: TileBuilder, num_warps: int, occupancy: int | None) -> None:
    """Refuse a wgmma whose accumulator cannot fit the registers `occupancy` leaves a
    thread: a wgmma reads and writes its whole accumulator in registers, which ptxas
    cannot spill, so it would stop at "Insufficient registers" with no line of the
    kernel's; here the error names the product and the ways out."""
    cap = register_cap(num_warps, occupancy)
    if cap >= 255:
        return
    for op in b.tile_ops:
        if kind_of(op) != "mma" or engine_of(op) != "wgmma":
            continue
        regs = thread_registers(op.results[0])
        if regs + WGMMA_BESIDES > cap:
            acc = op.results[0].type
            shape = " x ".join(str(d) for d in acc.dims)
            raise KernelTypeError(
                f"this product's {shape} {acc.dtype.name} accumulator takes {regs} registers "
                f"in each of the block's {32 * num_warps} threads, and `occupancy={occupancy}` "
                f"leaves a thread {cap}: a wgmma keeps its whole accumulator in registers",
                b.spans.get(op), hint=f"a lower `occupancy` than {occupancy}, or a smaller "
                f"tile (fewer columns)")


def check_register_budget(b: TileBuilder, num_warps: int, occupancy: int | None = None
                          ) -> None:
    """Warn once: for the kernel's largest tile if it takes over LIMIT registers a
    thread; else where its live tiles together take over LIVE_LIMIT, or over half again
    the cap an `occupancy` sets (measured on the H200, 2026-12-04: tile_layernorm's 64
    registers at occupancy 4 spill 256 bytes at 8192 f32 columns, at Triton's speed,
    and 4.7 KB at 32768, at a fifth of it; its live tiles take 64 and 256 registers)."""
    worst, worst_op, worst_type = 0, None, None
    free = free_ops(b.tile_ops)
    for op in b.tile_ops:
        if id(op) in free:
            continue
        for r in op.results:
            if not isinstance(r.type, TileType) or r.type.layout.data is None:
                continue
            regs = thread_registers(r)
            if regs > worst:
                worst, worst_op, worst_type = regs, op, r.type
    if worst > LIMIT and worst_op is not None and worst_type is not None:
        shape = " x ".join(str(d) for d in worst_type.dims)
        _warn(b, worst_op, f"a {shape} {worst_type.dtype.name} tile takes {worst} registers "
                           f"in each of the block's {32 * num_warps} threads: more than fit "
                           "beside the rest of the kernel", num_warps, None)
        return
    cap = register_cap(num_warps, occupancy)
    live, at, tiles = live_registers(b)
    limit = LIVE_LIMIT if occupancy is None else min(LIVE_LIMIT, cap * 3 // 2)
    if live <= limit or not tiles:
        return
    made = ", ".join(f"{regs} registers from {_place(b, op)}" for regs, op in tiles[:4])
    # an occupancy whose cap is a thread's 255 anyway (4 warps, two blocks) limits nothing
    capping = occupancy if cap < 255 else None
    capped = f" (`occupancy={occupancy}` caps a thread at {cap} registers)" if capping else ""
    _warn(b, b.tile_ops[at], f"the tiles live here take {live} registers in each of the "
                             f"block's {32 * num_warps} threads{capped}; the largest: {made}",
          num_warps, capping)


def _place(b: TileBuilder, op: Any) -> str:
    span = b.spans.get(op)
    return "?" if span is None else f"line {span.line}"


def _warn(b: TileBuilder, op: Any, what: str, num_warps: int, occupancy: int | None) -> None:
    """The warning, at the user's line that made `op` as a compile error is shown."""
    ways = [] if num_warps >= 32 else [  # a block holds at most 32 warps
        f"give the block more warps (`@tile.kernel(num_warps={2 * num_warps})`, "
        f"`num_warps=\"auto\"`, or ox.autotune over num_warps)"]
    if occupancy is not None:
        ways.append(f"a lower `occupancy` than {occupancy}")
    more = "".join(f"{way}, " for way in ways) + ("or " if ways else "")
    message = (
        f"{what}, so ptxas spills to local memory, which can slow the kernel down several "
        f"times.\n"
        f"  help: {more}walk the row in chunks through a loop:\n"
        f"      for c in range(tile.num_tiles(x, 1, BN)):\n"
        f"          t = tile.load(x, (row, c), (1, BN))\n"
        f"          ...\n"
        f"  with BN a few thousand columns (`oxide show tile_wide_rows`: softmax and layer "
        f"norm that way)")
    span = b.spans.get(op)
    if span is None:  # no line of the user's: the frame `stacklevel=4` named before
        caller = sys._getframe(3)
        warn_at(message, PerformanceWarning, caller.f_code.co_filename, caller.f_lineno)
    else:
        warn_at(message, PerformanceWarning, span.file, span.line)
