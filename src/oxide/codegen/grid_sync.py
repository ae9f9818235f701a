"""`ox.grid.sync()`: a barrier over every thread of the launch, for both targets.

The algorithm is the one CUDA's cooperative groups use for `grid_group::sync()`: a
block barrier; then thread (0, 0, 0) of each block fences its block's writes at device
scope and adds to a 32-bit counter, block (0, 0, 0) adding `0x80000000 - (blocks - 1)`
and the others 1, so that the last arrival flips the top bit and the low bits are back
where they were; each adding thread spins until it sees the top bit differ from the
value its add returned, fences again, and a second block barrier releases its block.
The counter is one global per kernel (`<symbol>_grid_barrier`), zero when its module
is loaded; since every completed barrier restores its low bits, it needs no reset
between launches, and a launch's barriers can follow each other at once (a block
still spinning on barrier k sees the flip of k, which barrier k + 1 cannot undo before
that block arrives there).

Every block must be running at once for the spin to end: on the GPU the launch is
cooperative and its size checked against the occupancy (runtime/gpu.py); on the CPU
each block runs on an OS thread of its own (runtime/cpu.py), its spin yields the
core (`sched_yield`) and also ends once the launch's error record is claimed, since a
block whose check failed stops there and would never arrive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

TOP_BIT = "-2147483648"  # 0x80000000 as an i32


def counter_symbol(kernel_symbol: str) -> str:
    """The counter global of the kernel compiled as `kernel_symbol` (the runtimes look it
    up to tell a grid-synchronizing kernel from others, and the CPU resets it)."""
    return f"{kernel_symbol}_grid_barrier"


def emit(em: Any, target: Any, block_barrier: Callable[[], None], *, cpu: bool) -> None:
    """Emit the grid barrier at the current point of `em`, with `block_barrier` emitting
    the target's block barrier."""
    symbol = counter_symbol(em.func.sym_name.data)
    if cpu:
        ptr, scope = "ptr", ""
        decl = f"@{symbol} = global i32 0, align 4"
    else:
        ptr, scope = "ptr addrspace(1)", ' syncscope("device")'
        decl = f"@{symbol} = addrspace(1) externally_initialized global i32 0, align 4"
    if decl not in em.globals:
        em.globals.append(decl)
    block_barrier()
    reg = target.register
    tids = [reg(em, f"tid.{a}") for a in "xyz"]
    t_or = em.ins(f"or i32 {tids[0]}, {tids[1]}")
    t_or = em.ins(f"or i32 {t_or}, {tids[2]}")
    leader = em.ins(f"icmp eq i32 {t_or}, 0")
    arrive, spin, done, after = em.label(), em.label(), em.label(), em.label()
    em.raw(f"br i1 {leader}, label %{arrive}, label %{after}")
    em.start_block(arrive)
    blocks = [reg(em, f"ctaid.{a}") for a in "xyz"]
    b_or = em.ins(f"or i32 {blocks[0]}, {blocks[1]}")
    b_or = em.ins(f"or i32 {b_or}, {blocks[2]}")
    first = em.ins(f"icmp eq i32 {b_or}, 0")
    dims = [reg(em, f"nctaid.{a}") for a in "xyz"]
    count = em.ins(f"mul i32 {dims[0]}, {dims[1]}")
    count = em.ins(f"mul i32 {count}, {dims[2]}")
    opener = em.ins(f"sub i32 -2147483647, {count}")  # 0x80000000 - (count - 1)
    add = em.ins(f"select i1 {first}, i32 {opener}, i32 1")
    em.raw(f"fence{scope} seq_cst")
    old = em.ins(f"atomicrmw add {ptr} @{symbol}, i32 {add}{scope} seq_cst")
    em.raw(f"br label %{spin}")
    em.start_block(spin)
    # the GPU reads with ld.volatile between the two fences, as cooperative groups do
    load = "load atomic i32" if cpu else "load volatile i32"
    order = " acquire" if cpu else ""
    now = em.ins(f"{load}, {ptr} @{symbol}{order}, align 4")
    diff = em.ins(f"xor i32 {old}, {now}")
    top = em.ins(f"and i32 {diff}, {TOP_BIT}")
    flipped = em.ins(f"icmp ne i32 {top}, 0")
    if cpu:
        # a block whose check failed stops, and would never arrive: leave with the error
        kind_ptr = em.ins("getelementptr inbounds i8, ptr %oxide.err, i64 4")
        kind = em.ins(f"load atomic i32, ptr {kind_ptr} monotonic, align 4")
        failed = em.ins(f"icmp ne i32 {kind}, 0")
        leave = em.ins(f"or i1 {flipped}, {failed}")
        wait = em.label()
        em.raw(f"br i1 {leave}, label %{done}, label %{wait}")
        em.start_block(wait)
        em.declare("declare i32 @sched_yield()")
        em.raw("call i32 @sched_yield()")
        em.raw(f"br label %{spin}")
    else:
        em.raw(f"br i1 {flipped}, label %{done}, label %{spin}")
    em.start_block(done)
    em.raw(f"fence{scope} seq_cst")
    em.raw(f"br label %{after}")
    em.start_block(after)
    block_barrier()
