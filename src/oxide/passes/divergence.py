"""Which values may differ between the threads (or the lanes of a warp) that compute them.

The fixpoint behind passes/uniformity.py. Every value gets a *fact*, from most to least
precise:

- `uniform(r)`: the same in every thread (of the block, the warp or the launch, by the
  question asked), known to be `r` modulo 32;
- `UNIFORM`: the same in every thread, residue unknown;
- `split(r)`: `thread_idx.x + u` with `u` uniform and `u % 32 == r` (only when asking
  about the lanes of a warp in a block whose x extent is a multiple of 32: then each
  warp holds 32 consecutive `thread_idx.x` starting at a multiple of 32, so
  `(thread_idx.x + u) // 32` and `thread_idx.x + u < c` for `c - r` a multiple of 32 are
  the same in every lane of a warp);
- `VARYING`: may differ.

Values start unknown (optimistic) and only move down the list, so the worklist ends.

Sources of variation: `thread_idx`, `lane_id()`, the lane masks, a ThreadIndex, warp
collectives (some are warp-uniform: full-mask votes and reductions), atomics, inline
PTX, loads of writable memory. Two loads are uniform though: those of read-only arrays
(`Slice`, constant memory) at uniform indices, and those of shared memory at uniform
indices that no write shares a phase with (passes/shared_phases.py; a flag thread 0 set
before the barrier). The frontend vouches for a few more (`ox.block.reduce_*` results).

Variables (`oxide.slot`) are flow-sensitive: a read is as uniform as the writes that
reach it (passes/slot_reaching.py) agree; a write in a divergent block is varying for
every read it reaches (after `if tid < 3: x = 1`, threads disagree on `x`).

Divergent blocks are those control-dependent (passes/uniformity.py's
`control_dependents`) on a branch whose condition is not uniform, or on a branch
inside a divergent block.
"""

from __future__ import annotations

import functools

from xdsl.dialects.builtin import IntegerAttr, IntegerType
from xdsl.ir import Block, Operation, SSAValue

from oxide.ir import ops
from oxide.ir.types import ArrayType, SharedArrayType

UNIFORM = 32  # uniform, residue unknown (0..31 are uniform with that residue)
SPLIT = 33  # 33 + r: thread_idx.x + (uniform with residue r)
VARYING = 99
_LANEMASKS = ("lanemask.lt", "lanemask.le", "lanemask.eq", "lanemask.gt", "lanemask.ge")
VARYING_REGISTERS = ("tid.x", "tid.y", "tid.z", "laneid", "warpid", *_LANEMASKS)
_LANE_VARYING_REGISTERS = ("tid.x", "tid.y", "tid.z", "laneid", *_LANEMASKS)
_GRID_VARYING_REGISTERS = (*VARYING_REGISTERS, "ctaid.x", "ctaid.y", "ctaid.z")
# Full-mask warp collectives whose result is the same in every lane of the warp.
_WARP_UNIFORM_RESULTS = ("ballot", "any", "all", "reduce_add", "reduce_min", "reduce_max",
                         "match_all")
FULL_MASK = 0xFFFFFFFF


# _fact's cases, in the order it tests them; an op class's case is found once
# (`_case`): xDSL's op classes are ABCs, whose isinstance costs ~0.4 us, and a GEMM's
# unrolled kernel asked ~20 of them for each of its ~20k ops, twice
_CASES: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("slot_write", ops.SlotWriteOp), ("cond_br", ops.CondBranchOp),
    ("constant", ops.ConstantOp), ("register", ops.RegisterOp),
    ("index_component", ops.IndexComponentOp), ("warp", ops.WarpOp),
    ("varying", (ops.ThreadIndexOp, ops.AtomicOp)),
    ("primitive", (ops.InlineAsmOp, ops.HopperOp, ops.CallOp)),
    ("slot_read", ops.SlotReadOp), ("load", (ops.LoadOp, ops.MaskedLoadOp)),
    ("binary", ops.BinaryOp), ("compare", ops.CompareOp), ("cast", ops.CastOp),
    ("unary", ops.UnaryOp), ("select", ops.SelectOp))


@functools.cache
def _case(cls: type) -> str:
    """Which of `_CASES` ops of class `cls` fall in ("other": none)."""
    return next((name for name, classes in _CASES if issubclass(cls, classes)), "other")


def is_uniform(fact: int | None) -> bool:
    return fact is None or fact <= UNIFORM


def join(a: int | None, b: int | None) -> int | None:
    """The least precise fact covering both (a value that may be either)."""
    if a is None or a == b:
        return b
    if b is None:
        return a
    if is_uniform(a) and is_uniform(b):
        return UNIFORM
    return VARYING


def constant_int(value: SSAValue) -> int | None:
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
    mask = constant_int(op.args[-1])
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
    source = constant_int(op.args[1]) if kind == "shuffle" and len(op.args) == 3 else None
    return source is not None and source & 31 == 0


def _is_int(v: SSAValue) -> bool:
    return isinstance(v.type, IntegerType) and v.type.width.data > 1  # type: ignore[attr-defined]


class Divergence:
    """The fixpoint of facts, varying slot writes and divergent blocks.

    `lanes=False` asks whether threads of one block may disagree; `lanes=True` whether
    lanes of one warp may (warp ids and full-mask votes and reductions are then
    uniform), and `aligned` adds that the block's x extent is a multiple of 32
    (`thread_idx.x < 32 * k` is then warp-uniform). `grid=True` asks about the whole
    launch (`block_idx` varies too, and so do block collectives). `clean_loads` are the
    shared loads no write shares a phase with; `reaching` the slot writes each slot
    read may see.
    """

    def __init__(self, func: ops.FuncOp, uniform: set[SSAValue],
                 cd: dict[Block, set[Block]],
                 reaching: dict[ops.SlotReadOp, list[ops.SlotWriteOp]],
                 clean_loads: set[Operation], lanes: bool = False, grid: bool = False,
                 aligned: bool = False) -> None:
        self.blocks = list(func.body.blocks)
        self.uniform = set() if grid else uniform  # block collectives differ between blocks
        self.cd = cd
        self.reaching = reaching
        self.reads_of: dict[ops.SlotWriteOp, list[ops.SlotReadOp]] = {}
        for read, ws in reaching.items():
            for w in ws:
                self.reads_of.setdefault(w, []).append(read)
        self.clean_loads = set() if grid else clean_loads
        self.lanes = lanes
        self.aligned = lanes and aligned
        # residues mod 32 matter only for split values (aligned lanes): elsewhere every
        # uniform value is just UNIFORM, and facts settle in one change
        self.residues = self.aligned
        self.registers = (_GRID_VARYING_REGISTERS if grid else
                          _LANE_VARYING_REGISTERS if lanes else VARYING_REGISTERS)
        self.facts: dict[SSAValue, int] = {}
        self.write_facts: dict[ops.SlotWriteOp, int] = {}
        self.divergent: set[Block] = set()
        self.because: dict[Block, Block] = {}  # divergent block -> the branch block why
        self._solve()

    @property
    def varying(self) -> set[SSAValue]:
        """The values that may differ (split values included: they differ by lane)."""
        return {v for v, f in self.facts.items() if not is_uniform(f)}

    def is_varying(self, v: SSAValue) -> bool:
        return not is_uniform(self.facts.get(v))

    def _solve(self) -> None:
        """A worklist: each op once, then again whenever something it reads changes (an
        op already waiting is not queued twice)."""
        work = [op for block in self.blocks for op in block.ops]
        work.reverse()
        waiting = set(work)
        while work:
            op = work.pop()
            waiting.discard(op)
            for again in self._visit(op):
                if again not in waiting:
                    waiting.add(again)
                    work.append(again)

    def _visit(self, op: Operation) -> list[Operation]:
        """Update the facts `op` decides; return the ops to revisit."""
        block = op.parent_block()
        case = _case(type(op))
        if case == "slot_write":
            assert isinstance(op, ops.SlotWriteOp)
            fact = VARYING if block in self.divergent else self._of(op.value)
            old = self.write_facts.get(op)
            new = join(old, fact)
            if fact is None or new == old:
                return []
            self.write_facts[op] = new  # type: ignore[assignment]
            return list(self.reads_of.get(op, []))
        if case == "cond_br":
            assert isinstance(op, ops.CondBranchOp)
            if self.is_varying(op.cond) or block in self.divergent:
                new_blocks = self.cd.get(block, set()) - self.divergent  # type: ignore[arg-type]
                for d in new_blocks:
                    self.because[d] = block  # type: ignore[assignment]
                self.divergent |= new_blocks
                return [o for d in new_blocks for o in d.ops
                        if isinstance(o, (ops.SlotWriteOp, ops.CondBranchOp))]
            return []
        revisit: list[Operation] = []
        for r in op.results:
            if r in self.uniform:
                continue
            fact = self._fact(op, case)
            if fact is None:
                continue
            old = self.facts.get(r)
            new = join(old, fact)
            if new != old:
                self.facts[r] = new  # type: ignore[assignment]
                revisit.extend(use.operation for use in r.uses)
        return revisit

    def _of(self, v: SSAValue) -> int | None:
        """`v`'s fact; kernel parameters and vouched values are uniform; None: not yet."""
        fact = self.facts.get(v)
        if fact is None and (isinstance(v.owner, Block) or v in self.uniform):
            return UNIFORM
        return fact

    # ------------------------------------------------------------------ transfer
    def _fact(self, op: Operation, case: str) -> int | None:
        """The fact of `op`'s result from its operands' facts (None: nothing known yet);
        `case` is `op`'s class's (`_case`)."""
        if case == "constant":
            value = constant_int(op.results[0])
            return value % 32 if value is not None and self.residues else UNIFORM
        if case == "register":
            reg = op.reg.data  # type: ignore[attr-defined]
            if self.aligned and reg == "tid.x":
                return SPLIT
            if self.aligned and reg in ("tid.y", "tid.z"):
                return UNIFORM  # whole warps lie in one row of the block
            if reg in self.registers:
                return VARYING
            return 0 if self.aligned and reg == "ntid.x" else UNIFORM
        if case == "index_component":
            if not self.aligned:
                return VARYING
            rank = op.witness.type.rank.data  # type: ignore[attr-defined]
            return SPLIT if rank == 1 or op.dim.data == 1 else UNIFORM  # type: ignore[attr-defined]  # x: the column
        if case == "warp":
            return UNIFORM if self.lanes and _warp_uniform_result(op) else VARYING  # type: ignore[arg-type]
        if case == "varying":
            return VARYING
        if case == "primitive":
            return VARYING if op.varies_per_thread() else self._combine(op)  # type: ignore[attr-defined]
        if case == "slot_read":
            writes = self.reaching.get(op, [])  # type: ignore[call-overload]
            if not writes:
                return UNIFORM  # read before any write: on no path a thread takes
            fact: int | None = None
            for w in writes:
                fact = join(fact, self.write_facts.get(w))
            return fact
        if case == "load":
            t = op.array.type  # type: ignore[attr-defined]
            read_only = ((isinstance(t, ArrayType) and t.access.data == "slice")
                         or (isinstance(t, SharedArrayType) and t.space.data == "constant")
                         or op in self.clean_loads)
            # through a choice of arrays (`a if c else b`, a rebound name), which array
            # is read can differ between threads too
            return self._combine(op) if read_only else VARYING
        if case == "binary" and _is_int(op.results[0]):
            return self._binary(op)  # type: ignore[arg-type]
        if case == "compare" and _is_int(op.lhs):  # type: ignore[attr-defined]
            return self._compare(op)  # type: ignore[arg-type]
        if case == "cast" and _is_int(op.operand) and _is_int(op.results[0]):  # type: ignore[attr-defined]
            return self._of(op.operand)  # type: ignore[attr-defined]  # residues survive
        if case == "unary" and op.kind.data == "neg" and _is_int(op.results[0]):  # type: ignore[attr-defined]
            f = self._of(op.operand)  # type: ignore[attr-defined]
            if f is None or f >= UNIFORM:
                return f if f is None or f == UNIFORM else VARYING
            return (-f) % 32
        if case == "select":
            c = self._of(op.cond)  # type: ignore[attr-defined]
            if c is not None and not is_uniform(c):
                return VARYING
            a, b = self._of(op.if_true), self._of(op.if_false)  # type: ignore[attr-defined]
            if c is None or a is None or b is None:
                return None
            return join(a, b)
        return self._combine(op)

    def _combine(self, op: Operation) -> int | None:
        """Uniform when every operand is, varying when one is not, None while one is
        not known yet."""
        pending = False
        for o in op.operands:
            f = self._of(o)
            if f is None:
                pending = True
            elif not is_uniform(f):
                return VARYING
        return None if pending else UNIFORM

    def _binary(self, op: ops.BinaryOp) -> int | None:
        a, b = self._of(op.lhs), self._of(op.rhs)
        if VARYING in (a, b):
            return VARYING
        if a is None or b is None:
            return None
        kind = op.kind.data
        if a < UNIFORM and b < UNIFORM:  # both residues known
            return _residue(kind, a, b, op)
        if is_uniform(a) and is_uniform(b):
            if kind in ("mul", "and") and 0 in (a, b):
                return 0
            if kind == "shl" and (c := constant_int(op.rhs)) is not None and 5 <= c < 64:
                return 0
            return UNIFORM
        # one side is split: thread_idx.x + u
        if kind == "add" and b < UNIFORM and a > UNIFORM:
            return SPLIT + (a - SPLIT + b) % 32
        if kind == "add" and a < UNIFORM and b > UNIFORM:
            return SPLIT + (b - SPLIT + a) % 32
        if kind == "sub" and b < UNIFORM and a > UNIFORM:
            return SPLIT + (a - SPLIT - b) % 32
        if a == SPLIT:  # 32 lanes hold 32 consecutive values from a multiple of 32
            c = constant_int(op.rhs)
            width = op.result.type.width.data  # type: ignore[attr-defined]
            if kind == "floordiv" and c is not None and c > 0 and c % 32 == 0:
                return UNIFORM
            if kind == "shr" and c is not None and 5 <= c < width:
                return UNIFORM
            if kind == "and" and b == 0:
                return UNIFORM
        return VARYING

    def _compare(self, op: ops.CompareOp) -> int | None:
        a, b = self._of(op.lhs), self._of(op.rhs)
        if VARYING in (a, b):
            return VARYING
        if a is None or b is None:
            return None
        if is_uniform(a) and is_uniform(b):
            return UNIFORM
        pred = op.predicate.data
        if is_uniform(a):  # `c < split` is `split > c`
            a, b = b, a
            pred = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}.get(pred, pred)
        if b >= UNIFORM:  # split against split, or a bound of unknown residue
            return VARYING
        # thread_idx.x + u against c is thread_idx.x against c - u, of residue b - r
        boundary = (b - (a - SPLIT)) % 32
        if pred in ("lt", "ge") and boundary == 0:
            return UNIFORM
        if pred in ("le", "gt") and boundary == 31:
            return UNIFORM
        return VARYING

    # ------------------------------------------------------------------ diagnostics
    def culprit(self, block: Block) -> Block:
        """The branch whose thread-dependent condition makes `block` divergent."""
        seen: set[Block] = set()
        branch = self.because[block]
        while branch not in seen:
            seen.add(branch)
            term = branch.last_op
            if isinstance(term, ops.CondBranchOp) and self.is_varying(term.cond):
                return branch
            if branch not in self.because:
                return branch
            branch = self.because[branch]
        return branch


def _residue(kind: str, a: int, b: int, op: ops.BinaryOp) -> int:
    """The residue mod 32 of `a kind b` for uniform operands of known residues."""
    if kind == "add":
        return (a + b) % 32
    if kind == "sub":
        return (a - b) % 32
    if kind == "mul":
        return (a * b) % 32
    if kind == "and":
        return a & b
    if kind == "or":
        return a | b
    if kind == "xor":
        return a ^ b
    c = constant_int(op.rhs)
    if kind == "shl" and c is not None and 0 <= c < 64:
        return (a << c) % 32
    return UNIFORM
