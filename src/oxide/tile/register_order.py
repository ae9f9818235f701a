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

What it does, in each block of the kernel where the values alive at once outnumber the
registers the block's size leaves a thread (`peak_values` > `cap`): the ops with effects
(stores, barriers, shuffles, other shared memory, anything not known to be free of them)
stay in their order; every other op (pure arithmetic, loads from read-only `Slice`
arrays, the row-staging cells) is placed when an op needs it (a depth-first walk from
each op with effects, the operand with the longest chain behind it first, as Sethi and
Ullman order a tree's evaluation), or earlier where placing it frees as many values as
it makes (a value's last use: `d - mean` right after `d`'s last
other use, a sum's add as soon as both its terms are made). Row staging's cells keep
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

from collections.abc import Iterable, Mapping

from xdsl.dialects.builtin import Float64Type, IntegerType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.traits import IsTerminator, Pure

from oxide.ir import ops
from oxide.ir.types import ArrayType

Cell = tuple[SSAValue, int]  # a staging array and a cell's position in each thread's cells


def register_costs(order: Iterable[Operation]) -> dict[SSAValue, int]:
    """The 32-bit registers each result of `order`'s ops (one block's) takes: none for a
    predicate, a constant (an immediate where it is used) or an integer computed from
    constants and values from outside the block alone (a staging cell's index, a column's
    offset: ptxas folds them into the addresses), two for a 64-bit float, one otherwise."""
    costs: dict[SSAValue, int] = {}
    index: set[SSAValue] = set()  # the integers made of constants and outside values
    for op in order:
        constant = isinstance(op, ops.ConstantOp)
        index_math = constant or (op.has_trait(Pure) and all(
            v in index or v not in costs for v in op.operands))
        for r in op.results:
            if constant or (isinstance(r.type, IntegerType) and index_math):
                index.add(r)
            if r in index or (isinstance(r.type, IntegerType) and r.type.width.data == 1):
                costs[r] = 0
            else:
                costs[r] = 2 if isinstance(r.type, Float64Type) else 1
    return costs


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


def peak_values(order: Iterable[Operation], block: Block) -> int:
    """The most register-valued results of `block`'s ops alive at once with its ops in
    `order`: a value from its op to its last use in the block, or to the block's end
    where another block uses it."""
    order = list(order)
    at = {op: i for i, op in enumerate(order)}
    costs = register_costs(block.ops)
    end = len(order)
    change = [0] * (end + 1)
    for i, op in enumerate(order):
        for r in op.results:
            cost = costs[r]
            if not cost:
                continue
            last = i
            for use in r.uses:
                j = at.get(use.operation)
                last = end if j is None else max(last, j)
            change[i] += cost
            change[last] -= cost
    peak = live = 0
    for i in range(end):
        live += change[i]
        peak = max(peak, live)
    return peak


def reorder_block(block: Block, cells: Mapping[Operation, Cell]) -> list[Operation]:
    """`block`'s ops in the order described in the module docstring (the block is not
    changed)."""
    original = list(block.ops)
    index = {op: i for i, op in enumerate(original)}
    terminator = original[-1] if original and original[-1].has_trait(IsTerminator) else None
    body = original[:-1] if terminator is not None else original
    floating = {op for op in body if _floats(op, cells)}
    costs = register_costs(original)
    # an op's operands' ops first, the one with the longest chain of floating ops behind
    # it first, then the ops it must follow otherwise
    height: dict[Operation, int] = {}
    operands: dict[Operation, list[Operation]] = {}
    for op in body:
        made_by = {v.owner for v in op.operands if v.owner in index}
        height[op] = 1 + max((height[d] for d in made_by if d in floating), default=0)
        operands[op] = sorted(made_by, key=lambda d: (-height[d], index[d]))
    after: dict[Operation, list[Operation]] = {op: [] for op in body}
    previous: Operation | None = None
    anchors = []
    for op in body:  # the ops with effects, in their order; staging cells around them
        if op in floating:
            continue
        if previous is not None:
            after[op].append(previous)
        anchors.append(op)
        previous = op
    _order_cells(body, floating, cells, after)
    deps = {op: operands[op] + sorted(set(after[op]) - set(operands[op]),
                                      key=index.__getitem__) for op in body}
    users: dict[Operation, list[Operation]] = {op: [] for op in body}
    for op, before in deps.items():
        for d in before:
            users[d].append(op)
    placed: set[Operation] = set()
    order: list[Operation] = []

    def place(op: Operation) -> None:
        order.append(op)
        placed.add(op)

    def ready(op: Operation) -> bool:
        """Whether `op`'s inputs are placed, or are free to place now: floating ops
        whose results take no register (a staging cell's index, say) and whose own
        inputs are so."""
        return all(d in placed or (d in floating and not any(costs[r] for r in d.results)
                                   and ready(d)) for d in deps[op])

    def frees_as_many(op: Operation) -> bool:
        made = sum(costs[r] for r in op.results)
        freed = sum(costs[v] for v in set(op.operands)
                    if v.owner in deps and _last_use(v, op, placed))
        return freed >= made

    def place_with_inputs(root: Operation, settling: bool) -> list[Operation]:
        """Place `root` after the inputs it still lacks (depth first), each op followed
        by what it lets `settle` place where `settling`; the ops placed for `root`."""
        newly: list[Operation] = []
        stack: list[tuple[Operation, int]] = [(root, 0)]
        while stack:
            op, k = stack.pop()
            if op in placed:
                continue
            before = deps[op]
            while k < len(before) and before[k] in placed:
                k += 1
            if k < len(before):
                stack.append((op, k + 1))
                stack.append((before[k], 0))
                continue
            place(op)
            newly.append(op)
            if settling:
                settle([op])
        return newly

    def settle(work: list[Operation]) -> None:
        """After `work` was placed: place the floating ops near it that are ready and
        free as many values as they make, and the ones those enable in turn."""
        while work:
            op = work.pop()
            near = set(users[op])
            for d in deps[op]:
                near.update(users[d])
            for c in sorted(near, key=index.__getitem__):
                if c not in placed and c in floating and ready(c) and frees_as_many(c):
                    work.extend(place_with_inputs(c, settling=False))

    for anchor in anchors:
        place_with_inputs(anchor, settling=True)
    for op in body:  # what no op with effects needs: results other blocks use
        place_with_inputs(op, settling=True)
    if terminator is not None:
        order.append(terminator)
    return order


def _last_use(v: SSAValue, op: Operation, placed: set[Operation]) -> bool:
    """Whether `op` is the last use of `v` left to place (a use in another block is
    never placed here: the value outlives the block)."""
    return all(use.operation is op or use.operation in placed for use in v.uses)


def _order_cells(body: list[Operation], floating: set[Operation],
                 cells: Mapping[Operation, Cell], deps: dict[Operation, list[Operation]]
                 ) -> None:
    """Row staging's accesses: in their order cell by cell; a store before the op with
    effects after it, a read after the one before it (the reduction between them)."""
    last: dict[Cell, Operation] = {}
    before: Operation | None = None
    waiting: list[Operation] = []  # stores since the last op with effects
    for op in body:
        if op not in floating:
            for store in waiting:
                deps[op].append(store)
            waiting = []
            before = op
            continue
        cell = cells.get(op)
        if cell is None:
            continue
        if cell in last:
            deps[op].append(last[cell])
        last[cell] = op
        if isinstance(op, ops.StoreOp):
            waiting.append(op)
        elif before is not None:
            deps[op].append(before)


def reorder_for_registers(blocks: Iterable[Block], cap: int,
                          cells: Mapping[Operation, Cell]) -> int:
    """Reorder each of `blocks` whose ops hold more than `cap` values at once where that
    lowers the count (see the module docstring); the number of blocks reordered."""
    changed = 0
    for block in blocks:
        ops_now = list(block.ops)
        before = peak_values(ops_now, block)
        if before <= cap:
            continue
        order = reorder_block(block, cells)
        if peak_values(order, block) >= before:
            continue
        for op in ops_now:
            op.detach()
        for op in order:
            block.add_op(op)
        changed += 1
    return changed
