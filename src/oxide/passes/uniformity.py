"""Uniformity: every block barrier is reached by every live thread of the block, or none.

`ox.sync_threads()` and the block collectives (`ox.block.*`, which contain it)
wait for all threads of the block that have not exited. Under a condition that differs
between the threads of a block, some live threads never arrive: on the GPU that is
undefined behaviour (wrong results or a hang), so DESIGN.md makes it a compile error.
There is no `ox.unsafe()` escape: no schedule makes such a barrier correct.

Which values and blocks may differ between threads is passes/divergence.py's fixpoint
(thread-dependent values, variables through their reaching writes, shared-memory flags
read in a phase no write shares, divergent blocks by control dependence). Here:

- **Early exit.** CUDA's rule since Volta (Independent Thread Scheduling):
  `bar.sync` waits for the threads of the block that have not exited. So a thread that
  returns early is not waited for: `if i >= n: return` then `ox.sync_threads()` is
  defined. For block barriers, control dependence is taken on the graph without the
  blocks from which no path reaches a barrier (a thread that enters them only leaves the
  kernel), so the code after an early return is not divergent. Warp collectives and
  `ox.grid.sync()` keep the whole graph: a lane that has exited is still named in a
  full mask, and the block-uniform rule for shared memory (shared_races.py) checks that
  nothing reads what an exited thread would have written.
- A block barrier in a divergent block is a SafetyError pointing at the barrier (or at
  the `ox.block.*` call that inlined it) and naming the condition.
- `ox.grid.sync()` waits for every thread of the launch, so the same analysis runs one
  level up: `block_idx` varies too, and so do the results of the block collectives,
  while parameters, `grid_dim`, `block_dim`, extents, constants and reads of read-only
  arrays at such indices stay uniform.
- Warp collectives get the same analysis one level down. `ox.sync_warp()` and a warp
  collective whose mask is the full warp (the default) wait for every lane of the warp:
  CUDA leaves it undefined when one does not arrive. Warp-uniform, beyond everything
  block-uniform: `warp_id()`, the results of full-mask `ballot`, `any`, `all` and
  `reduce_*`, a full-mask `shuffle` from lane 0, and, in a block whose x extent is a
  multiple of 32, `thread_idx.y`/`.z` and conditions such as `thread_idx.x < 32 * k` or
  `thread_idx.x // 32 == c` (divergence.py's split values). A kernel that needs that
  extent and does not declare its block shape records a launch rule
  (runtime/witness_rules.py), checked before anything runs. A collective with an
  explicit mask that is not the constant full mask is the user's statement of which
  lanes take part, and is not checked; `ox.warp.activemask()` is no collective.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects.builtin import IntAttr
from xdsl.ir import Block, Operation, SSAValue

from oxide.errors import SafetyError, Span
from oxide.ir import ops
from oxide.passes.cfg import reverse_postorder, successors
from oxide.passes.divergence import Divergence, has_full_mask
from oxide.passes.shared_phases import clean_shared_loads
from oxide.passes.slot_reaching import reaching_writes


def leaving_blocks(func: ops.FuncOp) -> set[Block]:
    """The blocks a thread only leaves the kernel from by a `return` statement: no path
    from them reaches a block barrier or the end of the kernel's body. A thread there has,
    for the barriers after it, exited; one that skips a barrier and runs on to the end of
    the body has not (it is a live thread that skipped it)."""
    blocks = list(func.body.blocks)
    preds: dict[Block, list[Block]] = {b: [] for b in blocks}
    for b in blocks:
        for s in successors(b):
            preds[s].append(b)
    stays = {b for b in blocks
             if any(isinstance(op, ops.BarrierOp) and op.kind.data in ("block", "grid")
                    for op in b.ops)
             or (isinstance(b.last_op, ops.ReturnOp) and not b.last_op.is_early())}
    stack = list(stays)
    while stack:
        for p in preds[stack.pop()]:
            if p not in stays:
                stays.add(p)
                stack.append(p)
    return set(blocks) - stays


def control_dependents(func: ops.FuncOp, exits_leave: bool = False
                       ) -> dict[Block, set[Block]]:
    """For each conditional branch's block A, the blocks control-dependent on A: those
    post-dominating a successor of A without strictly post-dominating A.

    Post-dominators are bit sets over block numbers, with a virtual exit (bit
    `n`) that every `return` reaches. Blocks from which no path returns (a loop
    without exit) get an edge to the exit too, so every block has
    post-dominators; that only makes the analysis more cautious in such loops.

    `exits_leave`: the graph as block barriers see it, where the edges into the blocks a
    thread only leaves from by a `return` statement (`leaving_blocks`) lead straight out
    (PTX's barriers do not wait for exited threads), and a branch with one way left into
    the rest of the kernel is no branch.
    """
    blocks = list(func.body.blocks)
    index = {id(b): k for k, b in enumerate(blocks)}
    n = len(blocks)
    live = set(blocks) - leaving_blocks(func) if exits_leave else None
    succ = []
    branching = []  # still a choice of two ways
    for b in blocks:
        targets = list(dict.fromkeys(successors(b)))
        kept = [t for t in targets if live is None or b not in live or t in live]
        branching.append(len(kept) >= 2)
        # a way into the exit-only blocks leads, for the barriers, out of the kernel
        succ.append([index[id(t)] for t in kept] + ([n] if len(kept) < len(targets)
                                                       or not targets else []))
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
        if not isinstance(a.last_op, ops.CondBranchOp) or not branching[k]:
            continue
        deps = 0
        for s in succ[k]:
            deps |= pdom[s]
        deps &= ~(pdom[k] & ~(1 << k)) & ~(1 << n)
        out[a] = {blocks[d] for d in range(n) if deps >> d & 1}
    return out


class _Facts:
    """What every question about one kernel shares: reaching writes, clean shared loads,
    the two control-dependence graphs; and the questions (`Divergence`) asked so far."""

    def __init__(self, func: ops.FuncOp, uniform: set[SSAValue]) -> None:
        self.func = func
        self.uniform = uniform
        self.reaching = reaching_writes(func)
        self.clean = clean_shared_loads(func)
        self.cd = control_dependents(func)
        self.early_exits = bool(leaving_blocks(func))
        self._cd_exits: dict[Block, set[Block]] | None = None
        self._asked: dict[tuple[str, bool], Divergence] = {}

    @property
    def cd_exits(self) -> dict[Block, set[Block]]:
        if self._cd_exits is None:
            self._cd_exits = (control_dependents(self.func, exits_leave=True)
                              if self.early_exits else self.cd)
        return self._cd_exits

    def _ask(self, key: tuple[str, bool], make: Callable[[], Divergence]) -> Divergence:
        found = self._asked.get(key)
        if found is None:
            found = self._asked[key] = make()
        return found

    def block(self, exits_leave: bool = True) -> Divergence:
        """Threads of one block, with early exits leaving (the question `ox.sync_threads()`
        asks) or not (the one oxide's block collectives ask); the same question where the
        kernel has no early `return`."""
        leave = exits_leave and self.early_exits
        return self._ask(("block", leave), lambda: Divergence(
            self.func, self.uniform, self.cd_exits if leave else self.cd, self.reaching,
            self.clean))

    def lanes(self, aligned: bool) -> Divergence:
        return self._ask(("lanes", aligned), lambda: Divergence(
            self.func, self.uniform, self.cd, self.reaching, self.clean, lanes=True,
            aligned=aligned))

    def grid(self) -> Divergence:
        return self._ask(("grid", False), lambda: Divergence(
            self.func, self.uniform, self.cd, self.reaching, self.clean, grid=True))


@dataclass
class UniformityResult:
    """What the compile does next: `deferred`, a block barrier this analysis could not
    show every thread reaches, left to the lane-by-lane run of shared_races.py; and
    whether the warp collectives are proved only for blocks whose x extent is a multiple
    of 32 (a launch rule, runtime/witness_rules.py)."""

    deferred: SafetyError | None = None
    needs_whole_warp_rows: bool = False


def _user_span(chain: tuple[Span, ...]) -> Span | None:
    """The innermost span of `chain` in the user's code (not inside oxide's own
    @ox.func library, such as the block collectives)."""
    for span in reversed(chain):
        if "/oxide/lang/" not in span.file.replace("\\", "/"):
            return span
    return chain[-1] if chain else None


def from_library(op: Operation, origins: dict[Operation, tuple[Span, ...]]) -> bool:
    """Whether `op` was inlined from oxide's own @ox.func library (the block
    collectives), rather than written by the user."""
    return any("/oxide/lang/" in span.file.replace("\\", "/")
               for span in origins.get(op, ()) if span is not None)


def _snippet(span: Span) -> str:
    text = span.text[span.col:span.end_col].strip()
    return text if text and span.end_col <= len(span.text) else span.text.strip()


def _condition_label(u: Divergence, block: Block, origins: dict[Operation, tuple[Span, ...]],
                     who: str, default: str) -> str:
    """The label naming the condition that makes `block` divergent, where it is known."""
    branch = u.culprit(block)
    cond_span = _user_span(origins.get(branch.last_op, ()))  # type: ignore[arg-type]
    if cond_span is None:
        return default
    return (f"whether a {who} gets here depends on `{_snippet(cond_span)}` "
            f"(line {cond_span.line})")


def varying_values(func: ops.FuncOp, uniform: set[SSAValue]) -> set[SSAValue]:
    """The values that may differ between the live threads of one block (the rest are the
    same in every thread at any one point of the run)."""
    return _Facts(func, uniform).block().varying


def is_warp_wide(op: Operation) -> bool:
    """A collective every lane of the warp must reach: `ox.sync_warp()`, a full-mask
    `ox.warp.*`, a warp-collective tensor-core primitive."""
    return ((isinstance(op, ops.BarrierOp) and op.kind.data == "warp")
            or (isinstance(op, ops.WarpOp) and has_full_mask(op))
            or (isinstance(op, ops.HopperOp) and op.is_warp_collective()))


def check_barrier_uniformity(func: ops.FuncOp, origins: dict[Operation, tuple[Span, ...]],
                             uniform: set[SSAValue], lanes_proved: bool = False,
                             whole_warp_rows: bool | None = None) -> UniformityResult:
    """Raise SafetyError for a block barrier that some live threads of a block may not
    reach, or a full-warp collective (`ox.sync_warp()`, `ox.warp.*` without an explicit
    mask) that some lanes of a warp may not reach.

    `lanes_proved`: the kernel declares its block shape, and passes/shared_races.py checks
    its warp collectives lane by lane instead (so `if thread_idx.x < 32:
    ox.warp.reduce_add(v)` passes where warps are whole), and a block barrier this
    analysis cannot show uniform is returned, not raised: the lane-by-lane run decides it
    (a flag every thread reads from one shared cell is the same in all of them), and
    raises this error if the threads do split. `whole_warp_rows`: whether the declared
    block's x extent is a multiple of 32 (None: not declared, so a launch rule may ask
    for it)."""
    barriers = [(block, op) for block in func.body.blocks for op in block.ops
                if isinstance(op, ops.BarrierOp) and op.kind.data == "block"]
    warp_wide = [] if lanes_proved else [(block, op) for block in func.body.blocks
                                         for op in block.ops if is_warp_wide(op)]
    grid_wide = [(block, op) for block in func.body.blocks for op in block.ops
                 if isinstance(op, ops.BarrierOp) and op.kind.data == "grid"]
    result = UniformityResult()
    if not barriers and not warp_wide and not grid_wide:
        return result
    facts = _Facts(func, uniform)
    if grid_wide:
        _check_grid_barriers(facts.grid(), grid_wide, origins)
    if barriers:
        # oxide's own block collectives (`ox.block.*`, `ox.sync_threads_or`) shuffle with
        # masks naming every thread and read every thread's slot: no thread may have left
        plain = [(b, op) for b, op in barriers if not from_library(op, origins)]
        library = [(b, op) for b, op in barriers if from_library(op, origins)]
        try:
            _check_block_barriers(facts.block(), plain, origins)
            _mark_after_exit(facts, plain)
            _refuse_divergent(
                facts.block(exits_leave=False), library, origins, "a block collective",
                "not every thread of the block reaches this",
                "waits for every thread of the block, but it sits under a condition that "
                "depends on the thread",
                "oxide's block collectives (`ox.block.*`, `ox.sync_threads_and/or/count`) "
                "combine a value from every thread of the block, so every thread must call "
                "them, also those that would return early: instead of `return`, put the work "
                "under the condition (`if i < n: ...`) and give the collective a neutral value "
                "(`ox.block.reduce_add(x[i] if i < n else 0.0)`)")
        except SafetyError as exc:
            if not lanes_proved:
                raise
            result.deferred = exc
    if warp_wide:
        plain = facts.lanes(aligned=False)
        if any(block in plain.divergent for block, _ in warp_wide) \
                and whole_warp_rows is not False:
            # Whole warps in rows of the block: conditions such as `thread_idx.x < 32`
            # are the same in every lane of a warp. Where that proves what the plain
            # question could not, the launch must give such blocks.
            aligned = facts.lanes(aligned=True)
            if not any(block in aligned.divergent for block, _ in warp_wide):
                result.needs_whole_warp_rows = whole_warp_rows is None
                return result
        _check_warp_collectives(plain, warp_wide, origins)
    return result


def _mark_after_exit(facts: _Facts, barriers: list[tuple[Block, Operation]]) -> None:
    """Barriers that some threads may reach after others returned: PTX's plain
    `barrier.sync` rather than `.aligned` (ops.BarrierOp)."""
    if not barriers or not facts.early_exits:
        return
    whole = facts.block(exits_leave=False)
    for block, op in barriers:
        if block in whole.divergent:
            op.properties["after_exit"] = IntAttr(1)


def _check_block_barriers(u: Divergence, barriers: list[tuple[Block, Operation]],
                          origins: dict[Operation, tuple[Span, ...]]) -> None:
    _refuse_divergent(
        u, barriers, origins, "a block barrier", "not every thread of the block reaches this",
        "waits for every thread of the block, but it sits under a condition that depends on "
        "the thread", _hoist_hint)


def _hoist_hint(u: Divergence, block: Block, origins: dict[Operation, tuple[Span, ...]],
                what: str) -> str:
    """The rewrite for a barrier under a thread-dependent condition: hoisted out of the
    `if` (or a loop every thread runs alike), with the condition's own text."""
    branch = u.culprit(block)
    span = _user_span(origins.get(branch.last_op, ()))  # type: ignore[arg-type]
    cond = _snippet(span) if span is not None else "cond"
    barrier = what.strip("`") if what.startswith("`") else "ox.sync_threads()"
    if _in_cycle(branch):
        return (f"every thread must run the loop the same number of times to reach "
                f"`{barrier}` together: loop to a bound that is the same in the whole block "
                f"and test `{cond}` inside, around the work only. A thread that is done may "
                "also `return` before the barrier (barriers do not wait for exited threads)")
    return (f"move `{barrier}` out of the `if`, so that every thread reaches it, and keep "
            f"only the work under the condition:\n    if {cond}:\n        ...\n    "
            f"{barrier}\nA thread that is done may `return` early instead (barriers do not "
            "wait for exited threads). A flag the block must agree on comes uniform from "
            "`ox.sync_threads_or(flag)`, or from a shared cell written before a barrier and "
            "read after it")


def _in_cycle(block: Block) -> bool:
    """Whether `block` can reach itself (a loop's test)."""
    seen: set[Block] = set()
    stack = list(successors(block))
    while stack:
        b = stack.pop()
        if b is block:
            return True
        if b not in seen:
            seen.add(b)
            stack.extend(successors(b))
    return False


def _check_grid_barriers(u: Divergence, barriers: list[tuple[Block, Operation]],
                         origins: dict[Operation, tuple[Span, ...]]) -> None:
    _refuse_divergent(
        u, barriers, origins, "ox.grid.sync()", "not every thread of the launch reaches this",
        "waits for every thread of the launch, but it sits under a condition that can "
        "differ between threads or blocks: the launch would hang",
        "a condition on thread_idx, block_idx, a ThreadIndex, a value loaded per thread or a "
        "block collective's result (an early `return`, `break` or loop bound too) differs "
        "across the grid; let every thread reach ox.grid.sync() and put only the work under "
        "the condition (conditions on parameters, grid_dim and block_dim are fine)")


def _refuse_divergent(u: Divergence, barriers: list[tuple[Block, Operation]],
                      origins: dict[Operation, tuple[Span, ...]], default: str, label: str,
                      waits: str, hint: str | Callable[..., str]) -> None:
    """SafetyError at the first barrier some of the threads it waits for may not reach.
    `hint` may be a function of (analysis, block, origins, the barrier's text)."""
    for block, op in barriers:
        if block not in u.divergent:
            continue
        where = _user_span(origins.get(op, ()))
        what = f"`{_snippet(where)}`" if where is not None else default
        raise SafetyError(f"{what} {waits}", where,
                          label=_condition_label(u, block, origins, "thread", label),
                          hint=hint if isinstance(hint, str) else hint(u, block, origins, what))


def _check_warp_collectives(u: Divergence, collectives: list[tuple[Block, Operation]],
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
                    "before the `if`, then pass `m` as the mask inside it; or, for the lanes "
                    "that got here together (the aggregated-atomics idiom), "
                    "`m = ox.warp.activemask()` inside the `if` and `m` as the mask")
        raise SafetyError(
            f"{what} needs every lane of the warp (its mask is the full warp), but it sits "
            "under a condition that can differ between the lanes of a warp: undefined "
            "behaviour on the GPU",
            where, label=label,
            hint=hint + "; conditions on ox.warp_id(), block_idx, parameters and full-mask "
                        "ballot/any/all/reduce results are the same in every lane and are fine")
