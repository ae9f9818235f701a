"""Reads of shared cells that a thread which returned early never wrote.

CUDA lets a thread leave the kernel before a barrier (`if i >= n: return` then
`ox.sync_threads()`): the barrier waits for the threads that have not exited. The race
proof (passes/shared_races.py) accepts that, and this module keeps it sound: an exited
thread writes nothing more, so a read of a cell that only such a thread would have
written reads shared memory nobody wrote. numba's heat-equation and sessionize
examples return early and then read only their own or lower neighbours' cells, which is
fine; a tree reduction after an early return reads cells of threads that may be gone.

How, during the block run:

- Each lane (a thread along one path) carries its *history*: the shared cells it has
  written so far (an id into an interned table of frozen sets, so copying lanes is
  cheap). Lanes of one thread that merge keep what both wrote.
- Each lane carries the *bounds* its path took on run-time unknowns: at a branch on
  `a < b` (or `<=`, `>`, `>=`, `==`, and `w in arr` for a 1-D witness) whose difference
  `a - b` is `conc + S` with one symbolic part `S` for every undecided lane, the lanes
  that go one way record `conc + S < 0` and those that go the other `conc + S >= 0`.
  Two lanes are *compatible* when some value of each `S` satisfies both their bounds:
  thread 7 continuing past `if i >= n: return` (`7 + S < 0`) rules out thread 6
  returning there (`6 + S >= 0`).
- A safe read of shared cell `c` by a lane is fine when it wrote `c` itself, or some
  thread wrote `c` on every one of its paths compatible with the reader's. Otherwise,
  where a thread that left (or is on its way out of) the kernel could be the reason, it
  is a SafetyError naming the read, the writes of that array and the `return`.

Reads that no path of any thread writes, in kernels where no thread exits early, are
left alone (as before this check existed). The check runs only in kernels with an early
exit: a branch with one way to a `return` statement and one way on
(passes/uniformity.py's `leaving_blocks`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.ir import Block, Operation, SSAValue

from oxide.errors import SafetyError, Span
from oxide.ir import ops
from oxide.ir.sites import Site
from oxide.passes.cfg import successors
from oxide.passes.lane_values import Lanes
from oxide.passes.uniformity import leaving_blocks

# a bound `conc + S (pred) 0` taken the way `side` says (+1: true, -1: false)
_BOUNDS = ("lt", "le", "gt", "ge", "eq")


@dataclass
class Bound:
    """One branch's bound on the lanes of a world. Its condition is the conjunction of
    `(conc_k + S_k) pred_k 0` over its terms k (one for a comparison; one per dimension
    for `w in arr`): a lane that went the true way (`side` +1) holds all of them, one that
    went the false way (-1) the negation of one at least; 0: not through this branch
    undecided. `conc[k]` is per lane."""

    terms: list[tuple[str, tuple[tuple[int, int], ...]]]  # (pred, sig of S) per term
    side: np.ndarray
    conc: list[np.ndarray]

    def take(self, idx: np.ndarray | slice) -> Bound:
        """The bound over lanes `idx` (a copy, also for a slice)."""
        return Bound(self.terms, self.side[idx].copy(), [c[idx].copy() for c in self.conc])

    def clauses(self, lane: int) -> list[list[tuple[Any, float, float]]]:
        """What the bound says of `lane`: clauses (disjunctions) of `lo <= S <= hi`."""
        side = int(self.side[lane])
        if side == 0:
            return []
        literals = [(sig, *_interval(pred, side, int(c[lane])))
                    for (pred, sig), c in zip(self.terms, self.conc, strict=True)]
        return [[lit] for lit in literals] if side > 0 else [literals]


def _interval(pred: str, side: int, conc: int) -> tuple[float, float]:
    """The integers S with `(conc + S) pred 0` (side +1) or its negation (side -1)."""
    t = -conc
    if side < 0:
        pred = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne"}[pred]
    return {"lt": (-np.inf, t - 1), "le": (-np.inf, t), "gt": (t + 1, np.inf),
            "ge": (t, np.inf), "eq": (t, t), "ne": (-np.inf, np.inf)}[pred]


def _satisfiable(clauses: list[list[tuple[Any, float, float]]],
                 lo: dict[Any, float], hi: dict[Any, float]) -> bool:
    """Whether one literal of each clause can hold at once (a small backtracking search;
    clauses are few: the branches a path took on unknowns)."""
    if not clauses:
        return True
    for sig, low, high in clauses[0]:
        new_lo, new_hi = max(lo.get(sig, -np.inf), low), min(hi.get(sig, np.inf), high)
        if new_lo > new_hi:
            continue
        if _satisfiable(clauses[1:], {**lo, sig: new_lo}, {**hi, sig: new_hi}):
            return True
    return False


class ExitReads:
    """The histories' table, and the checks, for one kernel's block run."""

    def __init__(self, func: ops.FuncOp, sites: list[Site],
                 origins: dict[Operation, tuple[Span, ...]], excluded: set[Any],
                 thread_name: Any) -> None:
        self.sites = sites
        self.origins = origins
        self.excluded = excluded  # memories written where the run cannot see
        self.thread_name = thread_name
        self.exit_blocks = leaving_blocks(func)
        self.enabled = _has_early_exit(func, self.exit_blocks)
        self.table: list[frozenset[Any]] = [frozenset()]
        self.ids: dict[frozenset[Any], int] = {frozenset(): 0}
        self.writes: dict[Any, int] = {}  # memory -> the site of its first safe write
        self.imprecise: set[Any] = set()  # memories written at an unknown cell

    # ------------------------------------------------------------------ histories
    def _id(self, cells: frozenset[Any]) -> int:
        got = self.ids.get(cells)
        if got is None:
            got = self.ids[cells] = len(self.table)
            self.table.append(cells)
        return got

    def wrote(self, hist: np.ndarray, memory: Any, site: int, index: list[Lanes],
              lanes: np.ndarray) -> None:
        """Lanes `lanes` wrote the cells `index` gives them (index is over those lanes)."""
        self.writes.setdefault(memory, site)
        for k, lane in enumerate(lanes.tolist()):
            if any(ix.top[k] for ix in index):
                self.imprecise.add(memory)
                return
            cell = (memory, tuple((int(ix.conc[k]), ix.signature(k)) for ix in index))
            hist[lane] = self._id(self.table[hist[lane]] | {cell})

    def merged(self, hist: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
        """Lane a[k] now stands for a[k] or b[k]: it certainly wrote what both wrote."""
        for x, y in zip(a.tolist(), b.tolist(), strict=True):
            if hist[x] != hist[y]:
                hist[x] = self._id(self.table[hist[x]] & self.table[hist[y]])

    # ------------------------------------------------------------------ the check
    def check_read(self, w: Any, order: list[Block], memory: Any, site: int,
                   index: list[Lanes], lanes: np.ndarray) -> None:
        """SafetyError when a lane of `lanes` may read a cell only a departed thread would
        have written (see the module docstring)."""
        if memory in self.excluded or memory in self.imprecise:
            return
        leaving = (w.blk < 0) | np.isin(w.blk, [i for i, b in enumerate(order)
                                                if b in self.exit_blocks])
        if not leaving.any():
            return
        for k, lane in enumerate(lanes.tolist()):
            if any(ix.top[k] for ix in index):
                continue
            cell = (memory, tuple((int(ix.conc[k]), ix.signature(k)) for ix in index))
            if cell in self.table[w.hist[lane]]:
                continue
            compatible = np.array([self._compatible(w, lane, o) for o in range(w.size)])
            certain = False
            for t in np.unique(w.tid[compatible]).tolist():
                paths = compatible & (w.tid == t)
                if all(cell in self.table[w.hist[o]] for o in np.flatnonzero(paths).tolist()):
                    certain = True
                    break
            if certain:
                continue
            gone = compatible & leaving
            if gone.any():
                # name a thread that writes the cell on some path, where there is one
                writers = {int(w.tid[o]) for o in range(w.size)
                           if cell in self.table[w.hist[o]]}
                named = gone & np.isin(w.tid, list(writers)) if writers else gone
                pick = named if named.any() else gone
                raise self._error(w, lane, cell, site, int(np.flatnonzero(pick)[0]))

    def _compatible(self, w: Any, a: int, b: int) -> bool:
        """Whether lanes a and b can both be what happens (their bounds on the unknowns
        can hold at once)."""
        if a == b:
            return True
        if w.tid[a] == w.tid[b]:
            return False  # two paths of one thread never both happen
        clauses = [c for bound in w.bounds.values() for lane in (a, b)
                   for c in bound.clauses(lane)]
        return _satisfiable(clauses, {}, {})

    def _error(self, w: Any, reader: int, cell: Any, site: int, gone: int) -> SafetyError:
        memory, coords = cell
        read = self.sites[site]
        name = read.detail
        where = f"`{name}[{', '.join(str(c) for c, _ in coords)}]`"
        who = self.thread_name(int(w.tid[reader]))
        left = self.thread_name(int(w.tid[gone]))
        write = self.writes.get(memory)
        written = (f"the writes of `{name}` (line {self.sites[write].span.line}) "
                   if write is not None else f"no write of `{name}` ")
        return SafetyError(
            f"{who} may read {where}, which no live thread has written: {written}may never "
            f"run for it, since threads such as {left} return early and write nothing more",
            read.span, label="this read may see shared memory nobody wrote",
            hint="let the threads that return early write a neutral value first (e.g. "
                 "`sh[t] = x[i] if i < n else 0.0` before any `return`), or guard the read "
                 "so that it only reads cells of threads that are still running")


def _has_early_exit(func: ops.FuncOp, exit_blocks: set[Block]) -> bool:
    """A branch with one way to an early `return` and one way on."""
    for b in func.body.blocks:
        if b in exit_blocks or not isinstance(b.last_op, ops.CondBranchOp):
            continue
        if any(s in exit_blocks for s in successors(b)):
            return True
    return False


def comparison(cond: SSAValue) -> tuple[str, SSAValue, SSAValue, bool] | None:
    """`(pred, a, b, negated)` when the branch condition is `a pred b` (or its `not`)."""
    owner = cond.owner
    negated = False
    if isinstance(owner, ops.UnaryOp) and owner.kind.data == "not":
        negated = True
        owner = owner.operand.owner
    if isinstance(owner, ops.CompareOp) and owner.predicate.data in _BOUNDS:
        return owner.predicate.data, owner.lhs, owner.rhs, negated
    return None
