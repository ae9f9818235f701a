"""Shared memory without `unsafe`: prove at compile time that no two threads race.

DESIGN.md, "Safe shared memory". A kernel that declares its block shape
(`@ox.kernel(block=(32, 8))`) may read and write shared arrays outside `ox.unsafe()`;
this pass proves, for the declared shape, that

- in each *phase* (the code between two `ox.sync_threads()`), no shared cell is written
  by two threads, and no cell one thread writes is read or written by another thread
  (loop-carried phases included: the end of one iteration and the start of the next);
- shared atomics never conflict with each other, but do with plain accesses of another
  thread in the same phase.

How: the IR runs over every thread of one block at once (`lane_values.Lanes`), as a GPU
would run it, with the block-uniform unknowns (parameters, `block_idx`, extents, values
loaded at uniform indices) kept as symbols. Threads that branch apart are scheduled as
the hardware does (the earliest block in reverse postorder first), so they meet again
where their paths join, and wait for each other at barriers. Each access in a phase is
recorded with the thread and the cell; when every thread has reached the barrier (or
the end), the phase's accesses are compared.

What the run cannot know, it over-approximates, so a proof is a proof:
- a branch on a thread-dependent unknown (`if i < n`) sends that thread both ways;
- a branch on a block-uniform unknown splits the whole run in two (both outcomes);
- a loop whose trip count is unknown runs its body from the entry state, then twice
  more from a *widened* state in which everything the loop assigns is unknown (a fresh
  symbol where it is block-uniform), and exits either without running or after that;
- an index that is unknown in some thread cannot be proved distinct: that is reported.
Loops with known trip counts (constant bounds, `block_dim`, a tree's `s //= 2`) simply
run, so a tree reduction is proved phase by phase.

What it assumes: the uniformity pass ran first (every block barrier is reached by all
threads), and `block` is the launch's block shape (the runtime refuses other shapes).
What it guarantees: a SafetyError naming both accesses (file:line:col), the cell and two
threads that collide, or that it could not prove the accesses apart and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.ir import Block, Operation, SSAValue

from oxide.errors import SafetyError, Span
from oxide.ir import ops
from oxide.ir.sites import Site
from oxide.ir.types import ArrayType, ThreadIndexType, is_fp8_type
from oxide.passes.cfg import (
    dominators_of,
    immediate_dominators,
    predecessors,
    reverse_postorder,
    successors,
)
from oxide.passes.exit_reads import Bound, ExitReads, comparison
from oxide.passes.lane_values import (
    Lanes,
    affine,
    clip_to,
    compare,
    concrete,
    fresh_atom,
    is_float_type,
)
from oxide.passes.race_check import Access, Atoms, RaceChecker, is_shared
from oxide.passes.race_check import memory as _memory_of
from oxide.passes.uniformity import control_dependents, from_library, is_warp_wide

_MAX_WORLDS = 64  # whole-block splits on uniform unknowns
_MAX_LANE_COPIES = 4  # virtual threads per real thread
_MAX_TRIPS = 4096  # iterations of one loop with known bounds before giving up
_SYMBOLIC_TRIPS = 3  # body runs of a loop with an unknown trip count


def needs_proof(func: ops.FuncOp) -> bool:
    """Whether the kernel touches a shared array outside `ox.unsafe()`, writes a
    DisjointSlice at an index other than its ThreadIndex, or has a warp collective."""
    for op in func.walk():
        if is_warp_wide(op):
            return True
        if isinstance(op, (ops.LoadOp, ops.StoreOp, ops.AtomicOp)) and not _unsafe(op):
            if is_shared(op.array) or _is_mapped_write(op):
                return True
    return False


def check_shared_races(func: ops.FuncOp, sites: list[Site],
                       origins: dict[Operation, tuple[Span, ...]], varying: set[SSAValue],
                       block: tuple[int, int, int], divergent: SafetyError | None = None
                       ) -> frozenset[str] | None:
    """Raise SafetyError unless every shared access outside `ox.unsafe()` is race-free
    for a block of shape `block` (x, y, z), and every DisjointSlice write at an index map
    (not the ThreadIndex) writes one element per thread of the launch.

    `divergent` is the uniformity pass's error for a block barrier it could not show every
    thread reaches: raised if this run finds threads that split at a barrier (waiting at
    different ones, or some gone while others wait), dropped if they never do.

    Returns the grid axes those maps tell blocks apart by (a launch must leave the other
    grid axes at 1: runtime/witness_rules.py), or None where there are no such writes."""
    return _Prover(func, sites, origins, varying, block, divergent).run()


def _is_mapped_write(op: Operation) -> bool:
    """A DisjointSlice store at an index map rather than at the ThreadIndex."""
    if not isinstance(op, ops.StoreOp) or not isinstance(op.array.type, ArrayType):
        return False
    t = op.array.type
    indices = list(op.indices)
    return t.access.data == "disjoint" and not (
        len(indices) == 1 and isinstance(indices[0].type, ThreadIndexType))


def _unsafe(op: Operation) -> bool:
    flag = op.properties.get("unsafe")
    return flag is not None and bool(flag.data)  # type: ignore[attr-defined]


@dataclass
class _World:
    """The state of every (virtual) thread of the block, along one run."""

    tid: np.ndarray  # the real thread (linear id) each lane stands for
    blk: np.ndarray  # current block (index in reverse postorder), -1 when returned
    pos: np.ndarray  # op index to resume at in that block
    waiting: np.ndarray  # at a barrier
    env: dict[SSAValue, Lanes] = field(default_factory=dict)
    slots: dict[SSAValue, Lanes] = field(default_factory=dict)
    visits: dict[Block, np.ndarray] = field(default_factory=dict)  # loop header -> count
    symbolic: dict[Block, np.ndarray] = field(default_factory=dict)  # unknown trip count
    records: list[Access] = field(default_factory=list)  # this phase's shared accesses
    mapped: list[Access] = field(default_factory=list)  # DisjointSlice writes at index maps
    # (loop header, slot) -> the slot's value when the threads last reached the header of a
    # loop of unknown length: what an iteration adds (an induction step) is told from it
    snaps: dict[tuple[Block, SSAValue], Lanes] = field(default_factory=dict)
    # join block -> (threads that ran the arm of a one-armed `if` undecided, the slots the
    # arm assigns): at the join those slots become unknown for those threads
    pending: dict[Block, tuple[np.ndarray, set[SSAValue]]] = field(default_factory=dict)
    phase: int = 0  # barriers passed
    # the shared cells each lane has written, and the bounds its path took on unknowns
    # (passes/exit_reads.py: reads of what a thread that returned early never wrote)
    hist: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    bounds: dict[Operation, Bound] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.tid)

    def copy(self) -> _World:
        return _World(self.tid.copy(), self.blk.copy(), self.pos.copy(), self.waiting.copy(),
                      {k: v.copy() for k, v in self.env.items()},
                      {k: v.copy() for k, v in self.slots.items()},
                      {k: v.copy() for k, v in self.visits.items()},
                      {k: v.copy() for k, v in self.symbolic.items()}, list(self.records),
                      list(self.mapped), {k: v.copy() for k, v in self.snaps.items()},
                      {k: (m.copy(), set(f)) for k, (m, f) in self.pending.items()},
                      self.phase, self.hist.copy(),
                      {k: b.take(slice(None)) for k, b in self.bounds.items()})

    def take(self, idx: np.ndarray) -> None:
        """Keep (or duplicate) lanes: lane k of the result is lane idx[k] now."""
        self.tid, self.blk, self.pos = self.tid[idx], self.blk[idx], self.pos[idx]
        self.waiting = self.waiting[idx]
        self.env = {k: v.take(idx) for k, v in self.env.items()}
        self.slots = {k: v.take(idx) for k, v in self.slots.items()}
        self.visits = {k: v[idx] for k, v in self.visits.items()}
        self.symbolic = {k: v[idx] for k, v in self.symbolic.items()}
        self.snaps = {k: v.take(idx) for k, v in self.snaps.items()}
        self.pending = {k: (m[idx], f) for k, (m, f) in self.pending.items()}
        self.hist = self.hist[idx]
        self.bounds = {k: b.take(idx) for k, b in self.bounds.items()}


class _Prover:
    def __init__(self, func: ops.FuncOp, sites: list[Site],
                 origins: dict[Operation, tuple[Span, ...]], varying: set[SSAValue],
                 block: tuple[int, int, int], divergent: SafetyError | None = None) -> None:
        self.func = func
        self.divergent = divergent
        # shared memories some `ox.unsafe()` code writes: a value read from them is never
        # taken as block-uniform (the unchecked write may race with the read)
        self.unsafe_written = {_memory_of(op.array) for op in func.walk()
                               if isinstance(op, (ops.StoreOp, ops.AtomicOp))
                               and is_shared(op.array) and _unsafe(op)}
        # shared memories written where the run cannot see (inline PTX, TMA, calls...)
        opaque = {_memory_of(v) for op in func.walk() for v in op.operands if is_shared(v)
                  and not (isinstance(op, (ops.LoadOp, ops.StoreOp, ops.AtomicOp,
                                           ops.ArrayDimOp)) and v is op.array)}
        self.uniform_cells: dict[Any, int] = {}  # (memory, cell, phase) -> its value's atom
        self.sites = sites
        self.origins = origins
        self.varying = varying
        self.shape = block
        self.threads = block[0] * block[1] * block[2]
        self.order = reverse_postorder(func)
        self.index = {b: i for i, b in enumerate(self.order)}
        self.unknowns = Atoms()
        self.checker = RaceChecker(sites, block, self.unknowns)
        self.exits = ExitReads(func, sites, origins, self.unsafe_written | opaque,
                               self.checker.thread_name)
        # DisjointSlices written at index maps: all their writes are checked together
        self.mapped_arrays = {op.array for op in func.walk()
                              if _is_mapped_write(op) and not _unsafe(op)}
        self.mapped_writes: dict[int, Access] = {}  # over every run, by identity
        self._find_loops()
        # a branch whose region (the blocks control-dependent on it) holds a barrier or a
        # tracked access: an unknown block-uniform condition there splits the run (every
        # thread takes the same arm); elsewhere threads take both ways as copies, which
        # meet again where the paths join
        dependents = _regions(control_dependents(func))
        self.fork_regions = {b for b, region in dependents.items()
                             if any(_has_barrier(r) or not self._inert(r) for r in region)}
        # an `if` whose region touches nothing the proof tracks: threads that cannot tell
        # which way they go jump to the join, with what the region assigns unknown
        self.skip_if: dict[Block, tuple[Block, set[SSAValue]]] = {}
        self.one_armed: dict[Block, tuple[Block, Block, set[SSAValue]]] = {}
        for b, region in dependents.items():
            if b in self.loop_blocks or b in region:
                continue
            joins = {t for r in region | {b} for t in successors(r)} - region - {b}
            if len(joins) == 1 and all(self._inert(r) for r in region):
                slots = {op.slot for r in region for op in r.ops
                         if isinstance(op, ops.SlotWriteOp)}
                self.skip_if[b] = (next(iter(joins)), slots)
            elif len(joins) == 1 and next(iter(joins)) in successors(b) and region and all(
                    not _has_barrier(r) and not isinstance(r.last_op, (ops.ReturnOp,
                                                                       ops.UnreachableOp))
                    and not any(is_warp_wide(op) for op in r.ops) for r in region):
                # a one-armed `if` (no `else`): a thread that cannot tell runs the arm, and
                # at the join what the arm assigns becomes unknown, as if it had skipped it
                join = next(iter(joins))
                arm = next(t for t in successors(b) if t is not join)
                slots = {op.slot for r in region for op in r.ops
                         if isinstance(op, ops.SlotWriteOp)}
                self.one_armed[b] = (arm, join, slots)
        # values used outside the block that makes them: the others are dropped once
        # their block has run, so lane copies and merges stay cheap
        self.escaping = {r for b in self.order for op in b.ops for r in op.results
                         if any(u.operation.parent_block() is not b for u in r.uses)}

    # ------------------------------------------------------------------ structure
    def _find_loops(self) -> None:
        """Natural loops: header -> its blocks, the slots they assign, its body successor."""
        idom = immediate_dominators(self.func)
        preds = predecessors(self.func)
        self.loop_blocks: dict[Block, set[Block]] = {}
        for block in self.order:
            for p in preds[block]:
                if p in self.index and block in dominators_of(p, idom):  # p -> block: back edge
                    body = self.loop_blocks.setdefault(block, {block})
                    stack = [p]
                    while stack:
                        b = stack.pop()
                        if b not in body:
                            body.add(b)
                            stack.extend(q for q in preds[b] if q in self.index)
        self.loop_slots = {h: {op.slot for b in body for op in b.ops
                               if isinstance(op, ops.SlotWriteOp)}
                           for h, body in self.loop_blocks.items()}
        self.live_in = _live_slots(self.order)
        self.clamped = self._clamped_steps()
        self.skip_to = {h: exit_ for h, body in self.loop_blocks.items()
                        if (exit_ := self._skippable(h, body)) is not None}

    def _clamped_steps(self) -> dict[Operation, SSAValue]:
        """The step of a `for` over `range(start, stop, step)`: the counter's next value is
        `stop if the step would pass it else counter + step` (no overflow), and the loop
        then ends. Inside the loop the counter is never `stop`, so the proof takes the
        sum (where the counter is not read after the loop)."""
        out: dict[Operation, SSAValue] = {}
        for header, body in self.loop_blocks.items():
            term = header.last_op
            if not isinstance(term, ops.CondBranchOp):
                continue
            exits = [s for s in successors(header) if s not in body]
            for cmp in _compares_in(term.cond):  # with a step of unknown sign: two of them
                if not isinstance(cmp.lhs.owner, ops.SlotReadOp):
                    continue
                counter, bound = cmp.lhs.owner.slot, cmp.rhs
                if any(counter in self.live_in[e] for e in exits):
                    continue
                for b in body:
                    for op in b.ops:
                        sel = op.value.owner if isinstance(op, ops.SlotWriteOp) and \
                            op.slot is counter else None
                        if isinstance(sel, ops.SelectOp) and sel.if_true is bound:
                            out[sel] = sel.if_false
                        elif isinstance(sel, ops.SelectOp) and sel.if_false is bound:
                            out[sel] = sel.if_true
        return out

    def _inert(self, block: Block) -> bool:
        """A block with no barrier, tracked access or way out of the kernel."""
        for op in block.ops:
            if _has_barrier_op(op) or isinstance(op, (ops.ReturnOp, ops.UnreachableOp)):
                return False
            if self._tracked(op) or is_warp_wide(op):
                return False
        return True

    def _tracked(self, op: Operation) -> bool:
        """An access the proof records: to a shared array, or to a DisjointSlice written
        at an index map (its reads too), outside `ox.unsafe()`."""
        return (isinstance(op, (ops.LoadOp, ops.StoreOp, ops.AtomicOp)) and not _unsafe(op)
                and (is_shared(op.array) or op.array in self.mapped_arrays))

    def _skippable(self, header: Block, body: set[Block]) -> Block | None:
        """The exit of a loop the proof need not run, or None. Such a loop touches no
        tracked array, waits at no barrier, leaves only through its header, and nothing
        it computes is read after it (a thread's own register tile, say): running it
        could change no proof obligation."""
        exits = {s for b in body for s in successors(b) if s not in body}
        if len(exits) != 1 or any(s not in body for b in body - {header}
                                  for s in successors(b)):
            return None
        for b in body:
            for op in b.ops:
                if _has_barrier_op(op) or self._tracked(op) or is_warp_wide(op):
                    return None
                if any(u.operation.parent_block() not in body for r in op.results
                       for u in r.uses):
                    return None
        exit_ = next(iter(exits))
        if self.loop_slots[header] & self.live_in[exit_]:
            return None
        return exit_

    # ------------------------------------------------------------------ driver
    def run(self) -> frozenset[str] | None:
        n = self.threads
        first = _World(np.arange(n), np.zeros(n, np.int64), np.zeros(n, np.int64),
                       np.zeros(n, bool), hist=np.zeros(n, np.int64))
        worlds = [first]
        started = 1
        while worlds:
            forks = self._run_world(worlds.pop())
            started += len(forks)
            if started > _MAX_WORLDS:
                raise self._give_up(None, "its control flow splits on too many values known "
                                          "only at run time")
            worlds.extend(forks)
        # blocks take different ways at a branch on block_idx: the runs' writes at index
        # maps are checked together (the records a split run shares are kept once)
        self.checker.check_mapped(list(self.mapped_writes.values()))
        return frozenset(self.checker.grid_axes) if self.mapped_arrays else None

    def _run_world(self, w: _World) -> list[_World]:
        while True:
            runnable = (w.blk >= 0) & ~w.waiting
            if not runnable.any():
                self.checker.check_phase(w.records)
                w.records = []
                if not w.waiting.any():
                    self.mapped_writes.update((id(a), a) for a in w.mapped)
                    return []
                self._release(w)
                continue
            keys = np.where(runnable, w.blk * (1 << 20) + w.pos, np.iinfo(np.int64).max)
            key = keys.min()
            mask = keys == key
            mask = self._merge_copies(w, mask)
            block = self.order[int(key >> 20)]
            forks = self._execute(w, block, int(key & ((1 << 20) - 1)), mask)
            if forks:
                return forks

    def _release(self, w: _World) -> None:
        """Every live thread waits at a barrier: they must all wait at the same one. A
        thread that has left the kernel is not waited for (`bar.sync` counts the threads
        that have not exited, CUDA's rule since Volta)."""
        live = w.blk >= 0
        places = {(int(b), int(p)) for b, p in zip(w.blk[live], w.pos[live], strict=True)}
        if (w.blk == -2).any():  # a thread ran on to the end past the others' barrier
            if self.divergent is not None:
                raise self.divergent
            b, p = min(places)
            barrier = list(self.order[b].ops)[p - 1]
            raise self._give_up(barrier, "some threads of the block skip this barrier and "
                                         "run on to the end of the kernel")
        if not live.all() and len(places) == 1:
            b, p = next(iter(places))
            barrier = list(self.order[b].ops)[p - 1]
            if from_library(barrier, self.origins):  # ox.block.*: every thread takes part
                raise self._collective_after_exit(barrier, w)
        if len(places) > 1:
            if self.divergent is not None:
                raise self.divergent
            b, p = min(places)
            barrier = list(self.order[b].ops)[p - 1]
            raise self._give_up(barrier, "threads of the block wait at different barriers")
        self._merge_copies(w, live)
        w.waiting[:] = False
        w.phase += 1

    def _merge_copies(self, w: _World, mask: np.ndarray) -> np.ndarray:
        """Lanes of one real thread that meet at one place become one lane again; values
        they disagree on become unknown. Returns `mask` over the compacted lanes."""
        if w.size == self.threads:
            return mask
        idx = np.flatnonzero(mask)
        tids = w.tid[idx]
        if len(np.unique(tids)) == len(tids):
            return mask
        keep = np.ones(w.size, bool)
        first: dict[int, int] = {}
        pairs_a, pairs_b = [], []
        for lane, t in zip(idx.tolist(), tids.tolist(), strict=True):
            if t in first:
                pairs_a.append(first[t])
                pairs_b.append(lane)
                keep[lane] = False
            else:
                first[t] = lane
        a, b = np.array(pairs_a), np.array(pairs_b)
        self.exits.merged(w.hist, a, b)
        for bound in w.bounds.values():
            bound.side[a[bound.side[a] != bound.side[b]]] = 0
        for store in (w.env, w.slots):
            for v in store.values():
                differ = ~v.lanes_equal(a, b)
                if differ.any():
                    np.logical_or.at(v.top, a[differ], True)
        for arr in w.visits.values():
            np.maximum.at(arr, a, arr[b])
        for arr in w.symbolic.values():
            np.logical_or.at(arr, a, arr[b])
        kept = np.flatnonzero(keep)
        w.take(kept)
        return mask[kept]

    # ------------------------------------------------------------------ execution
    def _execute(self, w: _World, block: Block, start: int, mask: np.ndarray
                 ) -> list[_World] | None:
        for i, op in enumerate(list(block.ops)[start:], start=start):
            if _has_barrier_op(op):
                w.pos[mask] = i + 1
                w.waiting[mask] = True
                return None
            if is_warp_wide(op):
                self._whole_warps(w, op, mask)
            if op is block.last_op:
                keep = self._branch_operands(op)
                for dead in [v for v in w.env if v.owner.parent_block() is block
                             and v not in self.escaping and v not in keep]:
                    del w.env[dead]
                return self._branch(w, block, op, mask)
            self._eval(w, op, mask)
        return None

    def _whole_warps(self, w: _World, op: Operation, mask: np.ndarray) -> None:
        """A full-warp collective: every lane of each warp that reaches it must reach it
        here, together (the block's last warp may be partial: its lanes that exist)."""
        here = w.tid[mask]
        elsewhere = set(w.tid[~mask & (w.blk >= 0)].tolist()) | set(
            w.tid[~mask & (w.blk < 0)].tolist())
        present = set(here.tolist())
        for warp in sorted({t // 32 for t in present}):
            lanes = range(warp * 32, min(warp * 32 + 32, self.threads))
            missing = [t for t in lanes if t not in present or t in elsewhere]
            if missing:
                spans = self.origins.get(op, ())
                span = next((s for s in spans if s is not None), None)
                raise SafetyError(
                    f"a warp collective waits for every lane of warp {warp}, but "
                    f"{self._lanes_text(missing)} may not reach it with the others",
                    span, label="not every lane of the warp reaches this",
                    hint="let the whole warp reach it (a condition that is the same for the 32 "
                         "lanes of each warp, such as `thread_idx.x < 32` in a declared block, "
                         "is fine), or give the lanes that take part as an explicit mask")

    def _lanes_text(self, lanes: list[int]) -> str:
        names = [self.checker.thread_name(t) for t in lanes[:3]]
        more = f" and {len(lanes) - 3} more" if len(lanes) > 3 else ""
        return ", ".join(names) + more

    def _goto(self, w: _World, src: Block, dst: Block, mask: np.ndarray) -> None:
        if not mask.any():
            return
        pending = w.pending.get(dst)
        if pending is not None:  # threads that ran a one-armed `if` they could not decide
            lanes_at, forget = pending
            hit = mask & lanes_at
            if hit.any():
                for slot in forget:
                    if slot in w.slots:
                        w.slots[slot].forget(hit)
                lanes_at[hit] = False
        body = self.loop_blocks.get(dst)
        if body is not None:
            visits = w.visits.setdefault(dst, np.zeros(w.size, np.int64))
            sym = w.symbolic.setdefault(dst, np.zeros(w.size, bool))
            if src in body:  # the back edge: one more iteration
                visits[mask] += 1
                if (visits[mask & ~sym] > _MAX_TRIPS).any():
                    raise self._give_up(dst.first_op, "a loop runs more than "
                                        f"{_MAX_TRIPS} times for the proof to follow")
                self._widen(w, dst, mask & sym)
            elif dst in self.skip_to:  # nothing in it matters to the proof
                self._goto(w, src, self.skip_to[dst], mask)
                return
            else:  # entering the loop anew
                visits[mask] = 1
                sym[mask] = False
        w.blk[mask] = self.index[dst]
        w.pos[mask] = 0

    def _widen(self, w: _World, header: Block, mask: np.ndarray) -> None:
        """Everything a loop of unknown trip count assigns becomes unknown: one fresh
        symbol where all these lanes agree (a block-uniform variable), else top."""
        if not mask.any():
            return
        for slot in self.loop_slots[header]:
            v = w.slots.get(slot)
            if v is None:
                continue
            before = w.snaps.get((header, slot))
            step = affine("sub", v, before) if before is not None else None
            if v.uniform_over(mask) and not v.is_float:
                v.assign(mask, Lanes.atom(fresh_atom(), w.size))
            elif step is not None and not v.is_float and step.known()[mask].all():
                # an induction variable (`c += block_dim.x`): after some more trips it is
                # this value plus `step` times a count of the thread's own
                count = fresh_atom()
                self.unknowns.free.add(count)
                stepped = affine("add", v, affine("mul", step, Lanes.atom(count, w.size)))
                v.assign(mask, stepped)
            elif step is not None and (grid := self._grid_stride(step, mask)) is not None:
                # a grid-stride loop (`j += grid_dim.x * B`): `grid_dim.x * count` is one
                # unknown of the thread's own, scaled by B, that _blocks_apart understands
                count = fresh_atom()
                self.unknowns.free.add(count)
                self.unknowns.grid_strides[count] = grid
                axis, scale = grid
                stepped = affine("add", v, affine("mul", Lanes.const(scale, w.size),
                                                  Lanes.atom(count, w.size)))
                v.assign(mask, stepped)
            else:
                v.forget(mask)
            self._snapshot(w, header, slot, mask)

    def _grid_stride(self, step: Lanes, mask: np.ndarray) -> tuple[str, int] | None:
        """(axis, scale) when `step` is `grid_dim.<axis> * scale` in every lane of `mask`."""
        if step.top[mask].any() or step.conc[mask].any():
            return None
        used = {a: c for a, c in step.coef.items() if c[mask].any()}
        if len(used) != 1:
            return None
        (atom, coef), = used.items()
        scales = np.unique(coef[mask])
        axis = next((k[1][-1] for k, a in self.unknowns.ids.items()
                     if a == atom and k[0] == "reg" and k[1].startswith("nctaid.")), None)
        if axis is None or len(scales) != 1 or scales[0] <= 0:
            return None
        return axis, int(scales[0])

    def _snapshot(self, w: _World, header: Block, slot: SSAValue, mask: np.ndarray) -> None:
        v = w.slots.get(slot)
        if v is None:
            return
        snap = w.snaps.get((header, slot))
        if snap is None:
            snap = w.snaps[(header, slot)] = Lanes.unknown(w.size, v.is_float)
        snap.assign(mask, v)

    def _branch(self, w: _World, block: Block, op: Operation, mask: np.ndarray
                ) -> list[_World] | None:
        if isinstance(op, ops.BranchOp):
            self._goto(w, block, op.successors[0], mask)
            return None
        if not isinstance(op, ops.CondBranchOp):  # return, unreachable
            # -1: left by a `return` statement (barriers do not wait for it); -2: ran to
            # the end of the body, so if others wait at a barrier, it skipped theirs
            early = isinstance(op, ops.ReturnOp) and op.is_early()
            w.blk[mask] = -1 if early else -2
            return None
        then, other = op.successors[0], op.successors[1]
        c = w.env[op.cond]
        known = c.known()
        unknown = mask & ~known
        self._goto(w, block, then, mask & known & (c.conc != 0))
        self._goto(w, block, other, mask & known & (c.conc == 0))
        if not unknown.any():
            return None
        ways = (then, other)
        body = self.loop_blocks.get(block)
        if body is not None and (then in body) != (other in body):
            inside, outside = (then, other) if then in body else (other, then)
            w.symbolic[block][unknown] = True
            trips = int(w.visits[block][unknown].max())
            if trips == 1:
                for slot in self.loop_slots[block]:
                    self._snapshot(w, block, slot, unknown)
            if 1 < trips <= _SYMBOLIC_TRIPS:
                ways = (inside,)
            elif trips > _SYMBOLIC_TRIPS:
                ways = (outside,)
        if len(ways) == 1:
            self._goto(w, block, ways[0], unknown)
            return None
        if block in self.skip_if:
            join, slots = self.skip_if[block]
            for slot in slots:
                if slot in w.slots:
                    w.slots[slot].forget(unknown)
            self._goto(w, block, join, unknown)
            return None
        if block in self.fork_regions and c.uniform_over(unknown):
            # the whole block goes one way, past a barrier or a tracked access: split the run
            other_world = w.copy()
            self._goto(w, block, ways[0], unknown)
            self._goto(other_world, block, ways[1], unknown)
            return [w, other_world]
        if block in self.one_armed:
            arm, join, slots = self.one_armed[block]
            lanes_at, forget = w.pending.get(join, (np.zeros(w.size, bool), set()))
            w.pending[join] = (lanes_at | unknown, forget | slots)
            self._goto(w, block, arm, unknown)
            return None
        lanes = np.flatnonzero(unknown)
        if np.bincount(w.tid, minlength=self.threads).max() >= _MAX_LANE_COPIES:
            raise self._give_up(op, "threads take too many paths that depend on values "
                                    "known only at run time")
        n = w.size
        w.take(np.concatenate([np.arange(n), lanes]))
        copies = np.zeros(w.size, bool)
        copies[n:] = True
        if self.exits.enabled:
            self._bound(w, op, np.concatenate([unknown, np.zeros(len(lanes), bool)]), copies)
        self._goto(w, block, ways[0], np.concatenate([unknown, np.zeros(len(lanes), bool)]))
        self._goto(w, block, ways[1], copies)
        return None

    # ------------------------------------------------------------------ values
    def _atom(self, key: Any, n: int) -> Lanes:
        """The atom for a named unknown, the same one each time it is met."""
        ids = self.unknowns.ids
        if key not in ids:
            ids[key] = fresh_atom()
            if not (key[0] == "reg" and key[1].startswith("ctaid.")):
                self.unknowns.grid_uniform.add(ids[key])  # parameters, extents, grid_dim
        return Lanes.atom(ids[key], n)

    def _register(self, reg: str, n: int, tid: np.ndarray) -> Lanes:
        bx, by, _ = self.shape
        coords = {"tid.x": tid % bx, "tid.y": (tid // bx) % by, "tid.z": tid // (bx * by)}
        if reg in coords:
            return Lanes(coords[reg].astype(np.int64))
        if reg == "laneid":
            return Lanes((tid % 32).astype(np.int64))
        if reg == "warpid":  # oxide's warp id: the linear thread index // 32
            return Lanes((tid // 32).astype(np.int64))
        if reg.startswith("ntid."):
            return Lanes.const(self.shape["xyz".index(reg[-1])], n)
        if reg.startswith(("ctaid.", "nctaid.")):
            return self._atom(("reg", reg), n)
        return Lanes.unknown(n)

    def _value(self, w: _World, v: SSAValue) -> Lanes:
        got = w.env.get(v)
        if got is not None:
            return got
        if isinstance(v.owner, Block):  # a scalar kernel parameter
            got = self._atom(("param", v.index), w.size)  # type: ignore[attr-defined]
            w.env[v] = got
            return got
        return Lanes.unknown(w.size, is_float_type(v.type))

    def _eval(self, w: _World, op: Operation, mask: np.ndarray) -> None:
        n = w.size
        val = self._value
        result: Lanes | None = None
        if isinstance(op, ops.ConstantOp):
            attr = op.value
            if isinstance(attr, IntegerAttr):
                result = Lanes.const(int(attr.value.data), n)
            elif isinstance(attr, FloatAttr):
                result = Lanes.const(float(attr.value.data), n)
        elif isinstance(op, ops.BinaryOp):
            a, b = val(w, op.lhs), val(w, op.rhs)
            kind = op.kind.data
            result = affine(kind, a, b) if kind in ("add", "sub", "mul") else concrete(kind, a, b)
        elif isinstance(op, ops.UnaryOp):
            x = val(w, op.operand)
            kind = op.kind.data
            if kind == "neg":
                result = affine("sub", Lanes.const(0.0 if x.is_float else 0, n), x)
            elif kind == "not":
                result = affine("sub", Lanes.const(1, n), x)
            elif kind == "invert":
                result = affine("sub", Lanes.const(-1, n), x)
            else:
                result = Lanes(np.abs(x.conc), None, ~x.known())
        elif isinstance(op, ops.CompareOp):
            result = compare(op.predicate.data, val(w, op.lhs), val(w, op.rhs), mask)
        elif isinstance(op, ops.CastOp):
            x = val(w, op.operand)
            if is_fp8_type(op.result.type):  # rounded to 3 or 2 bits: the value is not followed
                result = Lanes.unknown(n, True)
            elif is_float_type(op.result.type):
                result = Lanes(x.conc.astype(np.float64), None, ~x.known())
            elif x.is_float:
                with np.errstate(all="ignore"):
                    ok = x.known() & np.isfinite(x.conc)
                    result = Lanes(np.trunc(np.where(ok, x.conc, 0)).astype(np.int64), None, ~ok)
            else:
                result = x.copy()
        elif isinstance(op, ops.SelectOp) and op in self.clamped:
            result = val(w, self.clamped[op]).copy()
        elif isinstance(op, ops.SelectOp):
            c, a, b = val(w, op.cond), val(w, op.if_true), val(w, op.if_false)
            result = b.copy()
            result.assign(c.known() & (c.conc != 0), a)
            result.forget(~c.known() & ~_same(a, b))
        elif isinstance(op, ops.RegisterOp):
            result = self._register(op.reg.data, n, w.tid)
        elif isinstance(op, ops.IndexComponentOp):
            result = self._witness_component(w, op)
        elif isinstance(op, ops.ArrayDimOp):
            result = self._atom(("dim", op.array, op.dim.data), n)
        elif isinstance(op, ops.SlotOp):
            elem = op.result.type.elem  # type: ignore[attr-defined]
            w.slots[op.result] = Lanes.unknown(n, is_float_type(elem))
            return
        elif isinstance(op, ops.SlotReadOp):
            result = w.slots[op.slot].copy()
        elif isinstance(op, ops.SlotWriteOp):
            w.slots[op.slot].assign(mask, val(w, op.value))
            return
        elif isinstance(op, (ops.LoadOp, ops.StoreOp, ops.AtomicOp)):
            self._record(w, op, mask)
            if isinstance(op, ops.LoadOp):
                result = self._uniform_load(w, op, mask)
        for r in op.results:
            out = result if result is not None else Lanes.unknown(n, is_float_type(r.type))
            out = clip_to(out, r.type)
            unknown = mask & out.top
            if unknown.any() and r not in self.varying:
                # the uniformity pass proves every thread holds one value here
                out.assign(unknown, Lanes.atom(fresh_atom(), n))
            w.env[r] = out

    def _uniform_load(self, w: _World, op: ops.LoadOp, mask: np.ndarray) -> Lanes | None:
        """Every thread here reading one cell of a shared array reads one value: no thread
        writes it in this phase (that would be a race the checks report), and no unchecked
        `unsafe` code writes the array. So the value is block-uniform: a flag thread 0 set
        before the barrier (`if am_last[0]:`) may guard barriers."""
        if not is_shared(op.array) or _unsafe(op) or is_float_type(op.result.type):
            return None  # floats: no atoms (the flags and counters that matter are ints)
        memory = _memory_of(op.array)
        if memory in self.unsafe_written:
            return None
        index = [self._value(w, i) for i in op.indices]
        if not mask.any() or not all(ix.uniform_over(mask) for ix in index):
            return None
        lane = int(np.flatnonzero(mask)[0])
        cell = tuple((int(ix.conc[lane]), ix.signature(lane)) for ix in index)
        key = (memory, cell, w.phase)
        if key not in self.uniform_cells:
            self.uniform_cells[key] = fresh_atom()
        out = Lanes.unknown(w.size)
        out.assign(mask, Lanes.atom(self.uniform_cells[key], w.size))
        return out

    def _witness_component(self, w: _World, op: ops.IndexComponentOp) -> Lanes:
        """A ThreadIndex coordinate (dimension 0 is the row: y in a 2-D index)."""
        rank = op.witness.type.rank.data  # type: ignore[attr-defined]
        return self._witness_axis("x" if rank == 1 or op.dim.data == 1 else "y", w)

    def _witness_axis(self, axis: str, w: _World) -> Lanes:
        """block_idx * block_dim + thread_idx along one axis."""
        n = w.size
        block = self._atom(("reg", f"ctaid.{axis}"), n)
        scale = Lanes.const(self.shape["xyz".index(axis)], n)
        return affine("add", affine("mul", block, scale),
                      self._register(f"tid.{axis}", n, w.tid))

    def _record(self, w: _World, op: Operation, mask: np.ndarray) -> None:
        if _unsafe(op):
            return
        shared = is_shared(op.array)
        if not shared and not (isinstance(op, (ops.StoreOp, ops.LoadOp))
                               and op.array in self.mapped_arrays):
            return  # reads of an array written at index maps are checked against those
        kind = ("read" if isinstance(op, ops.LoadOp) else
                "write" if isinstance(op, ops.StoreOp) else "atomic")
        idx = np.flatnonzero(mask)
        indices = list(op.indices)
        if len(indices) == 1 and isinstance(indices[0].type, ThreadIndexType):
            rank = indices[0].type.rank.data  # type: ignore[attr-defined]
            index = [self._witness_axis("xy"[rank - 1 - d], w).take(idx) for d in range(rank)]
        else:
            index = [self._value(w, i).take(idx) for i in indices]
        access = Access(op.array, kind, op.site.data, w.tid[idx].tolist(), index)
        (w.records if shared else w.mapped).append(access)
        if shared and self.exits.enabled:
            memory = _memory_of(op.array)
            if kind == "read":
                self.exits.check_read(w, self.order, memory, op.site.data, index, idx)
            else:
                self.exits.wrote(w.hist, memory, op.site.data, index, idx)

    def _collective_after_exit(self, barrier: Operation, w: _World) -> SafetyError:
        spans = self.origins.get(barrier, ())
        user = next((s for s in reversed(spans) if s is not None
                     and "/oxide/lang/" not in s.file.replace("\\", "/")), None)
        gone = self.checker.thread_name(int(w.tid[np.flatnonzero(w.blk < 0)[0]]))
        what = f"`{user.text[user.col:user.end_col].strip()}`" if user is not None else \
            "a block collective"
        return SafetyError(
            f"{what} combines a value from every thread of the block, but threads such as "
            f"{gone} may have returned before it", user,
            label="threads that returned early never reach this",
            hint="let every thread call it: instead of `return`, put the work under the "
                 "condition (`if i < n: ...`) and give the collective a neutral value "
                 "(`ox.block.reduce_add(x[i] if i < n else 0.0)`)")

    def _branch_operands(self, term: Operation) -> set[SSAValue]:
        """The values a branch's bound is read from (kept past the end of their block)."""
        cond = getattr(term, "cond", None)
        if cond is None:
            return set()
        got = comparison(cond)
        return {cond} if got is None else {cond, got[1], got[2]}

    def _bound(self, w: _World, op: Operation, taken: np.ndarray, other: np.ndarray) -> None:
        """Record the bound the undecided lanes took at branch `op` (exit_reads.py): lanes
        `taken` found its condition true, lanes `other` false."""
        terms = self._bound_terms(w, op.cond)  # type: ignore[attr-defined]
        if terms is None:
            return
        parts, negated = terms
        lanes = np.flatnonzero(taken | other)
        preds, concs = [], []
        for pred, d in parts:
            if d.is_float or d.top[lanes].any():
                return
            sigs = {d.signature(int(k)) for k in lanes}
            if len(sigs) != 1:
                return
            preds.append((pred, sigs.pop()))
            concs.append(d.conc.astype(np.int64))
        side = np.zeros(w.size, np.int8)
        side[taken] = -1 if negated else 1
        side[other] = 1 if negated else -1
        w.bounds[op] = Bound(preds, side, concs)

    def _bound_terms(self, w: _World, cond: SSAValue
                     ) -> tuple[list[tuple[str, Lanes]], bool] | None:
        """A branch condition as terms `(pred, a - b)` whose conjunction it is, and whether
        it is negated: a comparison, or `w in arr` for a ThreadIndex `w`."""
        negated = False
        owner = cond.owner
        if isinstance(owner, ops.UnaryOp) and owner.kind.data == "not":
            negated, owner = True, owner.operand.owner
        got = comparison(cond)
        if got is not None:
            pred, a, b, negated = got
            if a not in w.env or b not in w.env:
                return None
            return [(pred, affine("sub", w.env[a], w.env[b]))], negated
        if isinstance(owner, ops.InBoundsOp):
            rank = owner.witness.type.rank.data  # type: ignore[attr-defined]
            axes = "x" if rank == 1 else "yx"
            return [("lt", affine("sub", self._witness_axis(axis, w),
                                  self._atom(("dim", owner.array, d), w.size)))
                    for d, axis in enumerate(axes)], negated
        return None

    def _give_up(self, op: Operation | None, why: str) -> SafetyError:
        spans = self.origins.get(op, ()) if op is not None else ()
        span = next((s for s in spans if s is not None), None)
        if span is None:  # the first safe shared access
            for o in self.func.walk():
                if isinstance(o, (ops.LoadOp, ops.StoreOp, ops.AtomicOp)) and is_shared(
                        o.array) and not _unsafe(o):
                    span = self.sites[o.site.data].span
                    break
        return SafetyError(f"cannot prove this kernel's shared-memory accesses race-free: "
                           f"{why}", span, hint="simplify the control flow around shared "
                           "accesses, or take responsibility with `with ox.unsafe():`")


def _compares_in(cond: SSAValue) -> list[ops.CompareOp]:
    """The comparisons a loop condition is chosen from (through `select`s)."""
    owner = cond.owner
    if isinstance(owner, ops.CompareOp):
        return [owner]
    if isinstance(owner, ops.SelectOp):
        return _compares_in(owner.if_true) + _compares_in(owner.if_false)
    return []










def _live_slots(blocks: list[Block]) -> dict[Block, set[SSAValue]]:
    """The slots each block may read before writing, on some path from its entry."""
    use: dict[Block, set[SSAValue]] = {}
    kill: dict[Block, set[SSAValue]] = {}
    for b in blocks:
        u, k = set(), set()
        for op in b.ops:
            if isinstance(op, ops.SlotReadOp) and op.slot not in k:
                u.add(op.slot)
            elif isinstance(op, ops.SlotWriteOp):
                k.add(op.slot)
        use[b], kill[b] = u, k
    live = {b: set(use[b]) for b in blocks}
    changed = True
    while changed:
        changed = False
        for b in reversed(blocks):
            out: set[SSAValue] = set()
            for s in successors(b):
                out |= live.get(s, set())
            new = use[b] | (out - kill[b])
            if new != live[b]:
                live[b] = new
                changed = True
    return live


def _regions(dependents: dict[Block, set[Block]]) -> dict[Block, set[Block]]:
    """Each branch's whole region: the blocks control-dependent on it and, transitively, on
    the branches among them (`if a and b:` puts the arm under the second test)."""
    out: dict[Block, set[Block]] = {}
    for b in dependents:
        region: set[Block] = set()
        stack = list(dependents[b])
        while stack:
            r = stack.pop()
            if r not in region:
                region.add(r)
                stack.extend(dependents.get(r, ()))
        out[b] = region
    return out


def _has_barrier_op(op: Operation) -> bool:
    """A barrier every thread of the block waits at (a grid barrier holds block ones)."""
    return isinstance(op, ops.BarrierOp) and op.kind.data in ("block", "grid")


def _has_barrier(block: Block) -> bool:
    return any(_has_barrier_op(op) for op in block.ops)


def _same(a: Lanes, b: Lanes) -> np.ndarray:
    """Lane by lane: `a` and `b` certainly hold one value."""
    same = ~a.top & ~b.top & (a.conc == b.conc)
    for k in set(a.coef) | set(b.coef):
        ca = a.coef.get(k)
        cb = b.coef.get(k)
        za = ca if ca is not None else np.zeros(len(a.conc), np.int64)
        zb = cb if cb is not None else np.zeros(len(b.conc), np.int64)
        same &= za == zb
    return same
