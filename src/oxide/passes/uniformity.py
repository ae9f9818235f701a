"""Uniformity: every block barrier is reached by every thread of the block, or none.

`ox.sync_threads()` and the block collectives (`ox.block.*`, which contain it)
wait for all threads of the block. Under a condition that differs between the
threads of a block, some threads never arrive: on the GPU that is undefined
behaviour (wrong results or a hang), so DESIGN.md makes it a compile error.
There is no `ox.unsafe()` escape: no schedule makes such a barrier correct.

The analysis, on oxide IR:

- Thread-dependent ("varying") values: `thread_idx`, `lane_id()`, `warp_id()`,
  the lanemasks (`ox.warp.lanemask_*()`), a ThreadIndex, warp collectives (and
  `ox.warp.activemask()`) and atomics, and anything computed from a
  varying value. A load is varying unless it reads an array no thread writes
  during the launch (a `Slice` or an `ox.ConstantArray`) at uniform indices:
  writable arrays (DisjointSlice, RawSlice, shared and local memory) can hold
  different values for different threads at the same index. The exception the
  frontend vouches for is the result of `ox.block.reduce_*`, which every thread
  reads from one shared slot after a barrier. `block_idx`, `block_dim`,
  `grid_dim`, kernel parameters, array extents and constants are uniform.
- A variable (slot) is varying when any assignment stores a varying value, or
  happens in a divergent block (below): after `if tid < 3: x = 1`, threads
  disagree on `x`.
- Divergent blocks: those control-dependent on a branch whose condition is
  varying, or on a branch inside a divergent block. Control dependence is the
  classic one (Ferrante, Ottenstein and Warren) from post-dominators, so a
  block after a thread-dependent early `return`, `break` or loop exit counts,
  and the code after a thread-dependent `if` or loop has rejoined does not.

A block barrier in a divergent block is a SafetyError pointing at the barrier
(or at the `ox.block.*` call that inlined it) and naming the condition.

`ox.grid.sync()` waits for every thread of the launch, so the same analysis runs
one level up: `block_idx` varies too, and so do the results of the block
collectives (each block has its own), while parameters, `grid_dim`,
`block_dim`, extents, constants and reads of read-only arrays at such indices
stay uniform. A grid barrier under a condition on any of the varying values is
a SafetyError; on the GPU it would hang the launch.

Warp collectives get the same analysis one level down. `ox.sync_warp()` and a
warp collective (`ox.warp.*`) whose mask is the full warp (the default) wait
for every lane of the warp: CUDA leaves it undefined when one does not arrive.
So they must not sit under a condition that can differ between the lanes of one
warp. Warp-uniform, beyond everything block-uniform: `warp_id()`, the results
of full-mask `ballot`, `any`, `all` and `reduce_*` (every member gets the same
value), a full-mask `shuffle` from lane 0, and anything computed only from
these. `thread_idx` stays lane-varying even where `thread_idx.x // 32` would
be warp-uniform: that depends on the launch's block shape. A collective with
an explicit mask that is not the constant full mask (from `ballot`,
`match_any`, a parameter, a constant naming some lanes) is the user's statement
of which lanes take part, and is not checked; `ox.sync_warp(mask)` likewise.
`ox.warp.activemask()` is no collective (it has no mask) and is never checked. A
full-mask `match_all` gives every lane the same result; a shuffle with a `width`
operand reads lane 0 of each group, so it is not warp-uniform.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Block, Operation, SSAValue

from oxide.errors import SafetyError, Span
from oxide.ir import ops
from oxide.ir.types import ArrayType, SharedArrayType
from oxide.passes.cfg import reverse_postorder, successors

_LANEMASKS = ("lanemask.lt", "lanemask.le", "lanemask.eq", "lanemask.gt", "lanemask.ge")
_VARYING_REGISTERS = ("tid.x", "tid.y", "tid.z", "laneid", "warpid", *_LANEMASKS)
_LANE_VARYING_REGISTERS = ("tid.x", "tid.y", "tid.z", "laneid", *_LANEMASKS)
_GRID_VARYING_REGISTERS = (*_VARYING_REGISTERS, "ctaid.x", "ctaid.y", "ctaid.z")
# Full-mask warp collectives whose result is the same in every lane of the warp.
_WARP_UNIFORM_RESULTS = ("ballot", "any", "all", "reduce_add", "reduce_min", "reduce_max",
                         "match_all")
FULL_MASK = 0xFFFFFFFF


def _constant_int(value: SSAValue) -> int | None:
    """The integer `value` holds when an `oxide.constant` defines it, else None."""
    owner = value.owner
    if isinstance(owner, ops.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return int(owner.value.value.data)
    return None


def has_full_mask(op: ops.WarpOp) -> bool:
    """Whether the collective's mask (its last operand) is the constant full warp.
    `activemask` has none: any lanes may call it, so it is never checked."""
    if not op.args:
        return False
    mask = _constant_int(op.args[-1])
    return mask is not None and mask & FULL_MASK == FULL_MASK


def _warp_uniform_result(op: ops.WarpOp) -> bool:
    """Whether every lane of the warp gets the same result from `op` (reached by all lanes)."""
    if not has_full_mask(op):
        return False
    kind = op.kind.data
    if kind in _WARP_UNIFORM_RESULTS:
        return True
    # lane 0 exists in every warp, partial last warps too, so every lane reads it (with a
    # `width` operand, lanes read lane 0 of their own group instead)
    source = _constant_int(op.args[1]) if kind == "shuffle" and len(op.args) == 3 else None
    return source is not None and source & 31 == 0


def control_dependents(func: ops.FuncOp) -> dict[Block, set[Block]]:
    """For each conditional branch's block A, the blocks control-dependent on A: those
    post-dominating a successor of A without strictly post-dominating A.

    Post-dominators are bit sets over block numbers, with a virtual exit (bit
    `n`) that every `return` reaches. Blocks from which no path returns (a loop
    without exit) get an edge to the exit too, so every block has
    post-dominators; that only makes the analysis more cautious in such loops.
    """
    blocks = list(func.body.blocks)
    index = {id(b): k for k, b in enumerate(blocks)}
    n = len(blocks)
    succ = [[index[id(s)] for s in dict.fromkeys(successors(b))] or [n] for b in blocks]
    reaches = 1 << n
    changed = True
    while changed:
        changed = False
        for k in range(n):
            if not reaches >> k & 1 and any(reaches >> s & 1 for s in succ[k]):
                reaches |= 1 << k
                changed = True
    for k in range(n):
        if not reaches >> k & 1:
            succ[k].append(n)
    full = (1 << (n + 1)) - 1
    pdom = [full] * n + [1 << n]
    order = [index[id(b)] for b in reversed(reverse_postorder(func))]
    ordered = set(order)
    order += [k for k in range(n) if k not in ordered]
    changed = True
    while changed:
        changed = False
        for k in order:
            new = full
            for s in succ[k]:
                new &= pdom[s]
            new |= 1 << k
            if new != pdom[k]:
                pdom[k] = new
                changed = True
    out: dict[Block, set[Block]] = {}
    for k, a in enumerate(blocks):
        if not isinstance(a.last_op, ops.CondBranchOp):
            continue
        deps = 0
        for s in succ[k]:
            deps |= pdom[s]
        deps &= ~(pdom[k] & ~(1 << k)) & ~(1 << n)
        out[a] = {blocks[d] for d in range(n) if deps >> d & 1}
    return out


class _Uniformity:
    """The fixpoint of varying values, varying slots and divergent blocks.

    `lanes=False` asks whether threads of one block may disagree; `lanes=True`
    whether lanes of one warp may (warp ids and full-mask votes and reductions
    are then uniform).
    """

    def __init__(self, func: ops.FuncOp, uniform: set[SSAValue],
                 cd: dict[Block, set[Block]], lanes: bool = False, grid: bool = False) -> None:
        self.blocks = list(func.body.blocks)
        self.uniform = set() if grid else uniform  # block collectives differ between blocks
        self.cd = cd
        self.lanes = lanes
        self.registers = (_GRID_VARYING_REGISTERS if grid else
                          _LANE_VARYING_REGISTERS if lanes else _VARYING_REGISTERS)
        self.varying: set[SSAValue] = set()
        self.varying_slots: set[SSAValue] = set()
        self.divergent: set[Block] = set()
        self.because: dict[Block, Block] = {}  # divergent block -> the branch block why
        self._solve()

    def _solve(self) -> None:
        """A worklist: each op once, then again whenever something it reads changes."""
        work = [op for block in self.blocks for op in block.ops]
        work.reverse()
        while work:
            work.extend(self._visit(work.pop()))

    def _visit(self, op: Operation) -> list[Operation]:
        """Update the facts `op` decides; return the ops to revisit."""
        block = op.parent_block()
        if isinstance(op, ops.SlotWriteOp):
            if op.slot not in self.varying_slots and (
                    op.value in self.varying or block in self.divergent):
                self.varying_slots.add(op.slot)
                return [use.operation for use in op.slot.uses]
            return []
        if isinstance(op, ops.CondBranchOp):
            if op.cond in self.varying or block in self.divergent:
                new = self.cd.get(block, set()) - self.divergent  # type: ignore[arg-type]
                for d in new:
                    self.because[d] = block  # type: ignore[assignment]
                self.divergent |= new
                return [o for d in new for o in d.ops
                        if isinstance(o, (ops.SlotWriteOp, ops.CondBranchOp))]
            return []
        revisit: list[Operation] = []
        for r in op.results:
            if r not in self.varying and r not in self.uniform and self._is_varying(op):
                self.varying.add(r)
                revisit.extend(use.operation for use in r.uses)
        return revisit

    def _is_varying(self, op: Operation) -> bool:
        if isinstance(op, ops.RegisterOp):
            return op.reg.data in self.registers
        if isinstance(op, ops.WarpOp):
            return not (self.lanes and _warp_uniform_result(op))
        if isinstance(op, (ops.ThreadIndexOp, ops.AtomicOp)):
            return True
        if isinstance(op, (ops.InlineAsmOp, ops.HopperOp)):
            return op.varies_per_thread() or any(o in self.varying for o in op.operands)
        if isinstance(op, ops.SlotReadOp):
            return op.slot in self.varying_slots
        if isinstance(op, (ops.LoadOp, ops.MaskedLoadOp)):
            t = op.array.type
            read_only = ((isinstance(t, ArrayType) and t.access.data == "slice")
                         or (isinstance(t, SharedArrayType) and t.space.data == "constant"))
            # through a choice of arrays (`a if c else b`, a rebound name), which array
            # is read can differ between threads too
            return not read_only or any(o in self.varying for o in op.operands)
        return any(o in self.varying for o in op.operands)

    def culprit(self, block: Block) -> Block:
        """The branch whose thread-dependent condition makes `block` divergent."""
        seen: set[Block] = set()
        branch = self.because[block]
        while branch not in seen:
            seen.add(branch)
            term = branch.last_op
            if isinstance(term, ops.CondBranchOp) and term.cond in self.varying:
                return branch
            if branch not in self.because:
                return branch
            branch = self.because[branch]
        return branch


def _user_span(chain: tuple[Span, ...]) -> Span | None:
    """The innermost span of `chain` in the user's code (not inside oxide's own
    @ox.func library, such as the block collectives)."""
    for span in reversed(chain):
        if "/oxide/lang/" not in span.file.replace("\\", "/"):
            return span
    return chain[-1] if chain else None


def _snippet(span: Span) -> str:
    text = span.text[span.col:span.end_col].strip()
    return text if text and span.end_col <= len(span.text) else span.text.strip()


def _condition_label(u: _Uniformity, block: Block, origins: dict[Operation, tuple[Span, ...]],
                     who: str, default: str) -> str:
    """The label naming the condition that makes `block` divergent, where it is known."""
    branch = u.culprit(block)
    cond_span = _user_span(origins.get(branch.last_op, ()))  # type: ignore[arg-type]
    if cond_span is None:
        return default
    return (f"whether a {who} gets here depends on `{_snippet(cond_span)}` "
            f"(line {cond_span.line})")


def varying_values(func: ops.FuncOp, uniform: set[SSAValue]) -> set[SSAValue]:
    """The values that may differ between the threads of one block (the rest are the
    same in every thread at any one point of the run)."""
    return _Uniformity(func, uniform, control_dependents(func)).varying


def is_warp_wide(op: Operation) -> bool:
    """A collective every lane of the warp must reach: `ox.sync_warp()`, a full-mask
    `ox.warp.*`, a warp-collective tensor-core primitive."""
    return ((isinstance(op, ops.BarrierOp) and op.kind.data == "warp")
            or (isinstance(op, ops.WarpOp) and has_full_mask(op))
            or (isinstance(op, ops.HopperOp) and op.is_warp_collective()))


def check_barrier_uniformity(func: ops.FuncOp, origins: dict[Operation, tuple[Span, ...]],
                             uniform: set[SSAValue], lanes_proved: bool = False
                             ) -> SafetyError | None:
    """Raise SafetyError for a block barrier that some threads of a block may not reach,
    or a full-warp collective (`ox.sync_warp()`, `ox.warp.*` without an explicit mask)
    that some lanes of a warp may not reach. `lanes_proved`: the kernel declares its block
    shape, and passes/shared_races.py checks its warp collectives lane by lane instead
    (so `if thread_idx.x < 32: ox.warp.reduce_add(v)` passes where warps are whole), and
    a block barrier this analysis cannot show uniform is returned, not raised: the
    lane-by-lane run decides it (a flag every thread reads from one shared cell is the
    same in all of them), and raises this error if the threads do split."""
    barriers = [(block, op) for block in func.body.blocks for op in block.ops
                if isinstance(op, ops.BarrierOp) and op.kind.data == "block"]
    warp_wide = [] if lanes_proved else [(block, op) for block in func.body.blocks
                                         for op in block.ops if is_warp_wide(op)]
    grid_wide = [(block, op) for block in func.body.blocks for op in block.ops
                 if isinstance(op, ops.BarrierOp) and op.kind.data == "grid"]
    if not barriers and not warp_wide and not grid_wide:
        return None
    cd = control_dependents(func)
    if grid_wide:
        _check_grid_barriers(_Uniformity(func, uniform, cd, grid=True), grid_wide, origins)
    deferred = None
    if barriers:
        try:
            _check_block_barriers(_Uniformity(func, uniform, cd), barriers, origins)
        except SafetyError as exc:
            if not lanes_proved:
                raise
            deferred = exc
    if warp_wide:
        _check_warp_collectives(_Uniformity(func, uniform, cd, lanes=True), warp_wide,
                                origins)
    return deferred


def _check_block_barriers(u: _Uniformity, barriers: list[tuple[Block, Operation]],
                          origins: dict[Operation, tuple[Span, ...]]) -> None:
    _refuse_divergent(
        u, barriers, origins, "a block barrier", "not every thread of the block reaches this",
        "waits for every thread of the block, but it sits under a condition that depends on "
        "the thread",
        "a condition on thread_idx, lane_id(), a ThreadIndex or a value loaded per thread (an "
        "early `return`, `break` or loop bound too) differs between threads; let every "
        "thread reach the barrier or block collective, and put only the work under the "
        "condition. A flag the block must agree on (a value read from shared memory counts "
        "as per-thread) comes uniform from `ox.sync_threads_or(flag)` or "
        "`ox.block.reduce_max(...)`")


def _check_grid_barriers(u: _Uniformity, barriers: list[tuple[Block, Operation]],
                         origins: dict[Operation, tuple[Span, ...]]) -> None:
    _refuse_divergent(
        u, barriers, origins, "ox.grid.sync()", "not every thread of the launch reaches this",
        "waits for every thread of the launch, but it sits under a condition that can "
        "differ between threads or blocks: the launch would hang",
        "a condition on thread_idx, block_idx, a ThreadIndex, a value loaded per thread or a "
        "block collective's result (an early `return`, `break` or loop bound too) differs "
        "across the grid; let every thread reach ox.grid.sync() and put only the work under "
        "the condition (conditions on parameters, grid_dim and block_dim are fine)")


def _refuse_divergent(u: _Uniformity, barriers: list[tuple[Block, Operation]],
                      origins: dict[Operation, tuple[Span, ...]], default: str, label: str,
                      waits: str, hint: str) -> None:
    """SafetyError at the first barrier some of the threads it waits for may not reach."""
    for block, op in barriers:
        if block not in u.divergent:
            continue
        where = _user_span(origins.get(op, ()))
        what = f"`{_snippet(where)}`" if where is not None else default
        raise SafetyError(f"{what} {waits}", where,
                          label=_condition_label(u, block, origins, "thread", label),
                          hint=hint)

def _check_warp_collectives(u: _Uniformity, collectives: list[tuple[Block, Operation]],
                            origins: dict[Operation, tuple[Span, ...]]) -> None:
    for block, op in collectives:
        if block not in u.divergent:
            continue
        where = _user_span(origins.get(op, ()))
        barrier = isinstance(op, ops.BarrierOp)
        if where is not None:
            what = f"`{_snippet(where)}`"
        else:
            what = "ox.sync_warp()" if barrier else f"ox.warp.{op.kind.data}()"  # type: ignore[attr-defined]
        label = _condition_label(u, block, origins, "lane",
                                 "not every lane of the warp reaches this")
        if barrier:
            hint = ("let every lane of the warp reach ox.sync_warp(), and put only the work "
                    "under the condition")
        else:
            hint = ("let every lane of the warp reach it and put only the work under the "
                    "condition, or name the lanes that take part: `m = ox.warp.ballot(cond)` "
                    "before the `if`, then pass `m` as the mask inside it")
        raise SafetyError(
            f"{what} needs every lane of the warp (its mask is the full warp), but it sits "
            "under a condition that can differ between the lanes of a warp: undefined "
            "behaviour on the GPU",
            where, label=label,
            hint=hint + "; conditions on ox.warp_id(), block_idx, parameters and full-mask "
                        "ballot/any/all/reduce results are the same in every lane and are fine")
