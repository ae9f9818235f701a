"""Reaching definitions of local variables (`oxide.slot`): which writes a read may see.

The uniformity analysis (passes/divergence.py) asks, for each `slot_read`, which
`slot_write`s can have stored the value it reads. Asking per read, rather than per
variable, is what lets a kernel reuse a name: cuda-samples' `shfl_scan` counts `i` up to
`width` in a loop every thread runs, then reuses `i` for a second loop under
`if warp_id == 0:`. The second loop's writes cannot reach the first loop's reads, so
they do not make the first loop's condition thread-dependent.

Classic forward may-analysis over the control-flow graph, with one bit per write:
`out(b) = gen(b) | (in(b) - kill(b))`, `in(b) = union of out(p)` over predecessors.
A read with no reaching write reads the variable before any assignment (the frontend
refuses that where some path leaves it unassigned), so an empty set is possible only
on paths no thread takes.
"""

from __future__ import annotations

from xdsl.ir import Block, SSAValue

from oxide.ir import ops
from oxide.passes.cfg import predecessors, reverse_postorder


def reaching_writes(func: ops.FuncOp) -> dict[ops.SlotReadOp, list[ops.SlotWriteOp]]:
    """For every slot read of `func`, the slot writes whose value it may read."""
    writes: list[ops.SlotWriteOp] = []
    bit: dict[ops.SlotWriteOp, int] = {}
    by_slot: dict[SSAValue, int] = {}  # slot -> the bits of all its writes
    for block in func.body.blocks:
        for op in block.ops:
            if isinstance(op, ops.SlotWriteOp):
                bit[op] = len(writes)
                writes.append(op)
                by_slot[op.slot] = by_slot.get(op.slot, 0) | 1 << bit[op]
    blocks = list(func.body.blocks)
    gen: dict[Block, int] = {}
    kill: dict[Block, int] = {}
    for block in blocks:
        g = k = 0
        for op in block.ops:
            if isinstance(op, ops.SlotWriteOp):
                mask = by_slot[op.slot]
                g = (g & ~mask) | 1 << bit[op]
                k |= mask
        gen[block], kill[block] = g, k
    preds = predecessors(func)
    order = reverse_postorder(func)
    order += [b for b in blocks if b not in set(order)]
    ins = {b: 0 for b in blocks}
    outs = {b: gen[b] for b in blocks}
    changed = True
    while changed:
        changed = False
        for block in order:
            i = 0
            for p in preds[block]:
                i |= outs[p]
            o = gen[block] | (i & ~kill[block])
            if i != ins[block] or o != outs[block]:
                ins[block], outs[block] = i, o
                changed = True
    out: dict[ops.SlotReadOp, list[ops.SlotWriteOp]] = {}
    for block in blocks:
        live = ins[block]
        for op in block.ops:
            if isinstance(op, ops.SlotWriteOp):
                live = (live & ~by_slot[op.slot]) | 1 << bit[op]
            elif isinstance(op, ops.SlotReadOp):
                mask = live & by_slot.get(op.slot, 0)
                out[op] = [writes[k] for k in _bits(mask)]
    return out


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out
