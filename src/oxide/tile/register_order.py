"""Straight-line code put in an order that holds fewer values at once, where the order
the tile ops were lowered in holds more than a thread's registers.

Why (issue 31, rows of any width): ToSIMT lowers each tile op for every slot of a
thread before the next op, so a block reads its whole row, then takes its maxima, then
its exponentials: every value of the row is alive at once, and the temporaries of each
step beside them. LLVM's NVPTX backend keeps the order it is given (it schedules by
source order), and ptxas spills what it cannot hold: the whole-row `tile_layernorm` at
65536 f32 columns on 32 warps (64 values a thread, 64 registers) spilled 560 bytes a
thread although row staging (tile/row_staging.py) had moved a third of its row to shared
memory, because `d * d` was made for the whole row before it was summed, and the weight
and bias rows were loaded whole before the first result was stored.

What it does, in a kernel without products whose tiles live through a reduction take
more than the registers (row staging's estimate: tile/pipeline.py asks), in each block
where the values alive at once outnumber the registers the block's size leaves a thread
(`peak_values` > `cap`; every block with OXIDE_TILE_REGISTER_ORDER=always): the ops with
effects
(stores, barriers, shuffles, other shared memory, anything not known to be free of them)
stay in their order; every other op (pure arithmetic, loads from read-only `Slice`
arrays, the row-staging cells) is placed when an op needs it (a depth-first walk from
each op with effects, the operand with the longest chain behind it first, as Sethi and
Ullman order a tree's evaluation), or earlier where placing it frees as many values as
it makes (`t - mean` as soon as the mean is known, where it is `t`'s last use; a
sum's add as soon as both its terms are made). Row staging's cells keep
their order cell by cell, their stores before the op with effects that followed them
(the reduction they wait out) and their reads after the one before them. The new order
is kept only where it holds fewer values.

What it guarantees: each block's ops are a permutation of its ops in which every op
follows the ops whose results it uses, ops with effects keep their relative order, no
read of a `Slice` moves past anything that could write it (nothing can: a writable array
never overlaps another argument, runtime/args.py), and each staging cell is stored and
read in its original order: the same operations on the same values, so the same bits
where the target does not contract (where it does, it fuses `a * b + c` as the code's
shape lets it, docs/language.md). It runs where the registers bind: the GPU, and the CPU
compiling as sm_90 does (OXIDE_TILE_CPU_HOPPER=1), where the tests compare the bits of
uncontracted kernels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import Float64Type, IntegerType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.traits import IsTerminator, Pure

from oxide.ir import ops
from oxide.ir.types import ArrayType

Cell = tuple[SSAValue, int]  # a staging array and a cell's position in each thread's cells
OUTSIDE = -1  # a use of a value in another block


@dataclass
class _Facts:
    """One block's ops as numbers (xDSL hashes an op in Python: the pass keys on ints).
    Values are the block's results, numbered; an op's `operands` are the values of this
    block it reads (each once), `results` the values it makes."""

    ops: list[Operation]
    floating: list[bool]
    operands: list[list[int]]
    results: list[list[int]]
    cost: list[int]  # a value's registers
    made_by: list[int]  # a value's op
    users: list[list[int]]  # a value's ops (OUTSIDE for another block's), each once


def _facts(block: Block, cells: Mapping[Operation, Cell]) -> _Facts:
    block_ops = list(block.ops)
    at = {id(op): i for i, op in enumerate(block_ops)}
    number: dict[int, int] = {}  # id(value) -> its number
    facts = _Facts(block_ops, [], [], [], [], [], [])
    index: set[int] = set()  # the integers made of constants and values from outside
    for i, op in enumerate(block_ops):
        facts.floating.append(_floats(op, cells))
        mine = list(dict.fromkeys(number[id(v)] for v in op.operands if id(v) in number))
        facts.operands.append(mine)
        constant = isinstance(op, ops.ConstantOp)
        index_math = constant or (op.has_trait(Pure) and all(n in index for n in mine))
        made = []
        for r in op.results:
            n = number[id(r)] = len(facts.cost)
            made.append(n)
            facts.made_by.append(i)
            integer = isinstance(r.type, IntegerType)
            if constant or (integer and index_math):
                index.add(n)
            if n in index or (integer and r.type.width.data == 1):
                facts.cost.append(0)
            else:
                facts.cost.append(2 if isinstance(r.type, Float64Type) else 1)
            facts.users.append(list(dict.fromkeys(at.get(id(u.operation), OUTSIDE)
                                                  for u in r.uses)))
        facts.results.append(made)
    return facts


def _floats(op: Operation, cells: Mapping[Operation, Cell]) -> bool:
    """Whether `op` may move among the ops with effects: pure (a division that reports a
    zero divisor is not), a read of a read-only array, or a staging cell's access."""
    if op in cells:
        return True
    if isinstance(op, ops.BinaryOp):
        return op.site is None
    if isinstance(op, ops.LoadOp | ops.MaskedLoadOp):
        array = op.array.type
        return (isinstance(array, ArrayType) and array.access.data == "slice"
                and not (isinstance(op, ops.LoadOp) and op.checked.data))
    return op.has_trait(Pure) and not op.regions


def _peak(facts: _Facts, order: Sequence[int]) -> int:
    """The most registers the block's values take at once with its ops in `order`: a
    value from its op to its last use in the block, or to the block's end where another
    block uses it (a constant, a predicate, index arithmetic: none, `_facts`)."""
    end = len(order)
    pos = [0] * end
    for p, i in enumerate(order):
        pos[i] = p
    change = [0] * (end + 1)
    for n, cost in enumerate(facts.cost):
        if cost:
            last = max((end if u == OUTSIDE else pos[u] for u in facts.users[n]),
                       default=pos[facts.made_by[n]])
            change[pos[facts.made_by[n]]] += cost
            change[last] -= cost
    peak = live = 0
    for p in range(end):
        live += change[p]
        peak = max(peak, live)
    return peak


def peak_values(block: Block, cells: Mapping[Operation, Cell] | None = None) -> int:
    """The most registers `block`'s values take at once in its present order."""
    facts = _facts(block, cells or {})
    return _peak(facts, range(len(facts.ops)))


def _order(facts: _Facts, cells: Mapping[Operation, Cell]) -> list[int]:
    """The block's ops, by number, in the order the module docstring describes."""
    count = len(facts.ops)
    last_op = facts.ops[-1] if count else None
    body = count - 1 if last_op is not None and last_op.has_trait(IsTerminator) else count
    floating = facts.floating
    # an op's operands' ops first, the one with the longest chain of floating ops behind
    # it first, then the ops it must follow otherwise
    height = [0] * count
    deps: list[list[int]] = []
    for i in range(body):
        made_by = list(dict.fromkeys(facts.made_by[n] for n in facts.operands[i]))
        height[i] = 1 + max((height[d] for d in made_by if floating[d]), default=0)
        deps.append(sorted(made_by, key=lambda d: (-height[d], d)))
    after: list[list[int]] = [[] for _ in range(body)]
    anchors = [i for i in range(body) if not floating[i]]
    for previous, i in zip(anchors, anchors[1:], strict=False):
        after[i].append(previous)
    _order_cells(facts, body, cells, after)
    for i in range(body):
        deps[i] += sorted(set(after[i]) - set(deps[i]))
    users: list[list[int]] = [[] for _ in range(body)]
    for i in range(body):
        for d in deps[i]:
            users[d].append(i)
    free = [not any(facts.cost[n] for n in facts.results[i]) for i in range(body)]
    placed = [False] * count
    order: list[int] = []

    def ready(i: int) -> bool:
        """Whether op `i`'s inputs are placed, or free to place now: floating ops whose
        results take no register (a staging cell's index, say), their inputs so too."""
        return all(placed[d] or (floating[d] and free[d] and ready(d)) for d in deps[i])

    def frees_as_many(i: int) -> bool:
        """Whether op `i` ends the life of values taking as many registers as it makes."""
        freed = sum(facts.cost[n] for n in facts.operands[i]
                    if all(u == i or (u != OUTSIDE and placed[u]) for u in facts.users[n]))
        return freed >= sum(facts.cost[n] for n in facts.results[i])

    def place_with_inputs(root: int, settling: bool) -> list[int]:
        """Place op `root` after the inputs it still lacks (depth first), each op followed
        by what it lets `settle` place where `settling`; the ops placed for `root`."""
        newly: list[int] = []
        stack = [(root, 0)]
        while stack:
            i, k = stack.pop()
            if placed[i]:
                continue
            before = deps[i]
            while k < len(before) and placed[before[k]]:
                k += 1
            if k < len(before):
                stack.append((i, k + 1))
                stack.append((before[k], 0))
                continue
            placed[i] = True
            order.append(i)
            newly.append(i)
            if settling:
                settle([i])
        return newly

    def settle(work: list[int]) -> None:
        """After `work` was placed: place the floating ops near it that are ready and
        free as many values as they make, and the ones those enable in turn."""
        while work:
            i = work.pop()
            near = set(users[i])
            for d in deps[i]:
                near.update(users[d])
            for c in sorted(near):
                if not placed[c] and floating[c] and ready(c) and frees_as_many(c):
                    work.extend(place_with_inputs(c, settling=False))

    for anchor in anchors:
        place_with_inputs(anchor, settling=True)
    for i in range(body):  # what no op with effects needs: results other blocks use
        place_with_inputs(i, settling=True)
    order.extend(range(body, count))  # the terminator
    return order


def _order_cells(facts: _Facts, body: int, cells: Mapping[Operation, Cell],
                 after: list[list[int]]) -> None:
    """Row staging's accesses: in their order cell by cell; a store before the op with
    effects after it, a read after the one before it (the reduction between them)."""
    last: dict[tuple[int, int], int] = {}
    before: int | None = None
    waiting: list[int] = []  # stores since the last op with effects
    for i in range(body):
        if not facts.floating[i]:
            after[i] += waiting
            waiting = []
            before = i
            continue
        cell = cells.get(facts.ops[i])
        if cell is None:
            continue
        key = (id(cell[0]), cell[1])
        if key in last:
            after[i].append(last[key])
        last[key] = i
        if isinstance(facts.ops[i], ops.StoreOp):
            waiting.append(i)
        elif before is not None:
            after[i].append(before)


def reorder_for_registers(blocks: Iterable[Block], cap: int,
                          cells: Mapping[Operation, Cell], always: bool = False) -> int:
    """Reorder each of `blocks` whose values take more than `cap` registers at once,
    where that lowers the count (see the module docstring), or every block where
    `always` (to test the pass on any program); the blocks reordered."""
    changed = 0
    for block in blocks:
        facts = _facts(block, cells)
        if not always:
            before = _peak(facts, range(len(facts.ops)))
            if before <= cap:
                continue
        order = _order(facts, cells)
        if not always and _peak(facts, order) >= before:
            continue
        for op in facts.ops:
            op.detach()
        for i in order:
            block.add_op(facts.ops[i])
        changed += 1
    return changed
