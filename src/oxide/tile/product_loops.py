"""The loops of product -> work -> product: what ping-pong (tile/pingpong.py) and the
overlap of a step's softmax with the previous step's product (tile/overlap.py) apply to.

A *product loop* is an innermost natural loop whose body has exactly two wgmma products,
the *head* and the *tail*, in one block that runs once per iteration (it dominates every
back edge), the tail's A operand computed from the head's result by ops of that block
(attention's `q @ k.T` -> softmax -> `p @ v`); with one block before the loop (its
preheader, which only enters it) and one after it (its exit, entered only from the
loop). The rule reads the data flow, not a kernel's name or shape.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Block, Operation, SSAValue

from oxide.ir import ops
from oxide.ir.tile_ops import kind_of
from oxide.passes.cfg import dominators_of, immediate_dominators, predecessors, successors
from oxide.tile.builder import TileBuilder
from oxide.tile.mma_choice import engine_of


@dataclass(frozen=True)
class ProductLoop:
    """One product loop: its blocks, its preheader and exit, and its two products."""

    header: Block
    body: frozenset[Block]
    before: Block  # the preheader: it ends in the branch into the loop
    after: Block  # the exit
    head: Operation
    tail: Operation


def product_loops(b: TileBuilder) -> list[ProductLoop]:
    """The kernel's product loops (see the module docstring), outermost code first."""
    func = b.func
    # the entry block holds declarations and falls into the body once the builder seals it
    idom = immediate_dominators(func, func.body.blocks[1])
    preds = predecessors(func)
    loops = natural_loops(func, idom, preds)
    products = [op for op in b.tile_ops if kind_of(op) == "mma" and engine_of(op) == "wgmma"]
    found = []
    for header, body in loops.items():
        pair = _pair(header, body, loops, products, idom)
        if pair is None:
            continue
        outside = [p for p in preds[header] if p not in body]
        exits = {s for x in body for s in successors(x) if s not in body}
        if len(outside) != 1 or len(exits) != 1:
            continue
        before, (after,) = outside[0], exits
        # code before the branch into the loop runs exactly when the loop is entered,
        # code at the exit's start exactly when it is left
        if successors(before) != (header,) or any(p not in body for p in preds[after]):
            continue
        found.append(ProductLoop(header, frozenset(body), before, after, *pair))
    return found


def natural_loops(func: ops.FuncOp, idom: dict[Block, Block],
                  preds: dict[Block, list[Block]]) -> dict[Block, set[Block]]:
    """Header -> the blocks of its loop (every back edge to it), for each loop."""
    loops: dict[Block, set[Block]] = {}
    for u in func.body.blocks:
        if u not in idom:
            continue  # unreachable
        doms = dominators_of(u, idom)
        for h in successors(u):
            if h not in doms:
                continue
            body = loops.setdefault(h, {h})
            stack = [u]
            while stack:
                x = stack.pop()
                if x not in body:
                    body.add(x)
                    stack.extend(preds[x])
    return loops


def _pair(header: Block, body: set[Block], loops: dict[Block, set[Block]],
          products: list[Operation], idom: dict[Block, Block]
          ) -> tuple[Operation, Operation] | None:
    """The loop's (head, tail): its only two wgmma products, one block of the loop and of
    no loop inside it, run once per iteration, the tail's A computed from the head."""
    mine = [op for op in products if op.parent_block() in body]
    if len(mine) != 2:
        return None
    block = mine[0].parent_block()
    assert block is not None
    if mine[1].parent_block() is not block:
        return None
    if any(h is not header and block in inner and inner < body
           for h, inner in loops.items()):
        return None  # in a loop inside this one
    latches = [u for u in body if header in successors(u)]
    if not all(block in dominators_of(u, idom) for u in latches):
        return None  # not run once per iteration
    ordered = [op for op in block.ops if op in mine]
    head, tail = ordered
    if not derived(tail.operands[0], head.results[0], block):
        return None
    return head, tail


def derived(value: SSAValue, source: SSAValue, block: Block) -> bool:
    """Whether `value` is computed from `source` by ops of `block`."""
    seen: set[SSAValue] = set()
    stack = [value]
    while stack:
        v = stack.pop()
        if v is source:
            return True
        if v in seen or not isinstance(v.owner, Operation) or v.owner.parent_block() is not block:
            continue
        seen.add(v)
        stack.extend(v.owner.operands)
    return False
