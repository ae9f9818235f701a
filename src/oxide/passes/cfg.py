"""Control-flow graph utilities over an `oxide.func`: predecessors and dominators."""

from __future__ import annotations

from xdsl.ir import Block

from oxide.ir import ops


def successors(block: Block) -> tuple[Block, ...]:
    term = block.last_op
    return tuple(term.successors) if term is not None else ()


def predecessors(func: ops.FuncOp) -> dict[Block, list[Block]]:
    preds: dict[Block, list[Block]] = {b: [] for b in func.body.blocks}
    for block in func.body.blocks:
        for succ in successors(block):
            preds[succ].append(block)
    return preds


def reverse_postorder(func: ops.FuncOp, entry: Block | None = None) -> list[Block]:
    """The blocks reachable from `entry` (the function's first block by default)."""
    if entry is None:
        entry = func.body.blocks[0]
    seen: set[Block] = {entry}
    order: list[Block] = []
    stack: list[tuple[Block, int]] = [(entry, 0)]
    while stack:
        block, i = stack.pop()
        succs = successors(block)
        if i < len(succs):
            stack.append((block, i + 1))
            nxt = succs[i]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, 0))
        else:
            order.append(block)
    order.reverse()
    return order


def immediate_dominators(func: ops.FuncOp, entry: Block | None = None) -> dict[Block, Block]:
    """Cooper, Harvey and Kennedy's iterative algorithm; the entry (the function's first
    block by default) maps to itself."""
    rpo = reverse_postorder(func, entry)
    index = {b: i for i, b in enumerate(rpo)}
    preds = predecessors(func)
    entry = rpo[0]
    idom: dict[Block, Block] = {entry: entry}

    def intersect(a: Block, b: Block) -> Block:
        while a is not b:
            while index[a] > index[b]:
                a = idom[a]
            while index[b] > index[a]:
                b = idom[b]
        return a

    changed = True
    while changed:
        changed = False
        for block in rpo[1:]:
            done = [p for p in preds[block] if p in idom and p in index]
            if not done:
                continue
            new = done[0]
            for p in done[1:]:
                new = intersect(p, new)
            if idom.get(block) is not new:
                idom[block] = new
                changed = True
    return idom


def dominators_of(block: Block, idom: dict[Block, Block]) -> list[Block]:
    """`block` and every block that dominates it, innermost first."""
    chain = [block]
    while idom.get(chain[-1], chain[-1]) is not chain[-1]:
        chain.append(idom[chain[-1]])
    return chain
