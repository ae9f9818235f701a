"""Shared-memory reads every thread of a block sees alike: no write in their phase.

cuda-samples' threadFenceReduction has thread 0 decide whether its block is the last
one, store the answer to `__shared__ bool amLast`, and every thread read it after a
barrier to decide whether to run a second reduction, barriers included. The read is
block-uniform: between the barrier before it and the barrier after it nothing writes
the flag, so every thread reads the same bits whenever it gets there.

A *phase* is the code between two block barriers (`ox.sync_threads()`, the barriers
inside `ox.block.*`, `ox.grid.sync()`). A load of a shared array is *clean* when no
write to that memory (a store or atomic, in `ox.unsafe()` or not) can run in the same
phase, before it or after it, on any path: a forward and a backward may-analysis of
"memories written since the last barrier" and "memories written before the next one".
Whether its index is the same in every thread is the caller's question
(passes/divergence.py). That every barrier is reached by every thread is checked by
the uniformity pass itself; a kernel failing it is refused whatever this answers.

Memories are the arrays `race_check.memory` names (all `ox.shared.dynamic()` views are
one memory). A shared array that flows anywhere but into plain loads, stores, atomics
and extents (a select between arrays, inline PTX, a TMA or tensor-core primitive, a
call) may be written where this cannot see: no load of it is clean.
"""

from __future__ import annotations

from typing import Any

from xdsl.ir import Block, Operation

from oxide.ir import ops
from oxide.passes.cfg import predecessors, successors
from oxide.passes.race_check import is_shared
from oxide.passes.race_check import memory as memory_of

_WRITES = (ops.StoreOp, ops.AtomicOp, ops.VectorStoreOp, ops.MaskedStoreOp)
_READS = (ops.LoadOp, ops.MaskedLoadOp, ops.ArrayDimOp)


def clean_shared_loads(func: ops.FuncOp) -> set[Operation]:
    """The shared-array loads of `func` that no write to their memory shares a phase with."""
    opaque: set[Any] = set()
    writes: dict[Operation, Any] = {}
    loads: list[Operation] = []
    for op in func.walk():
        for operand in op.operands:
            if not is_shared(operand):
                continue
            mem = memory_of(operand)
            if isinstance(op, _WRITES) and operand is op.array:  # type: ignore[attr-defined]
                writes[op] = mem
            elif isinstance(op, _READS) and operand is op.array:  # type: ignore[attr-defined]
                if isinstance(op, ops.LoadOp):
                    loads.append(op)
            else:
                opaque.add(mem)
    candidates = [op for op in loads if memory_of(op.array) not in opaque]  # type: ignore[attr-defined]
    if not candidates:
        return set()
    if not writes:
        return set(candidates)
    before = _written(func, writes, forward=True)
    after = _written(func, writes, forward=False)
    return {op for op in candidates
            if memory_of(op.array) not in before[op] | after[op]}  # type: ignore[attr-defined]


def _is_barrier(op: Operation) -> bool:
    return isinstance(op, ops.BarrierOp) and op.kind.data in ("block", "grid")


def _written(func: ops.FuncOp, writes: dict[Operation, Any], forward: bool
             ) -> dict[Operation, frozenset[Any]]:
    """Per op, the memories some path may write, since the last barrier before it
    (`forward`) or after it, before the next barrier (backward)."""
    blocks = list(func.body.blocks)
    if forward:
        preds = predecessors(func)
        flows_in = {b: preds[b] for b in blocks}
    else:
        flows_in = {b: list(successors(b)) for b in blocks}

    def in_order(block: Block) -> list[Operation]:
        return list(block.ops) if forward else list(reversed(list(block.ops)))

    out: dict[Block, frozenset[Any]] = {b: frozenset() for b in blocks}
    changed = True
    while changed:
        changed = False
        for block in blocks if forward else reversed(blocks):
            state = frozenset().union(*(out[p] for p in flows_in[block]))
            for op in in_order(block):
                state = _step(op, state, writes)
            if state != out[block]:
                out[block] = state
                changed = True
    at: dict[Operation, frozenset[Any]] = {}
    for block in blocks:
        state = frozenset().union(*(out[p] for p in flows_in[block]))
        for op in in_order(block):
            at[op] = state
            state = _step(op, state, writes)
    return at


def _step(op: Operation, state: frozenset[Any], writes: dict[Operation, Any]
          ) -> frozenset[Any]:
    if _is_barrier(op):
        return frozenset()
    mem = writes.get(op)
    return state | {mem} if mem is not None else state
