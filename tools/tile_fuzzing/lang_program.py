"""How the ops of issue 28's tile language render in a generated program: elementwise
math (`tile.exp`, `ox.math.*`, Python's `math.*` and `abs`, `**`, `tile.fma`),
conditional expressions on scalar conditions built with `and`, `or` and `not`, and loops
(`for` and `while`) that carry a tile or a scalar.

Node attributes (`Node.attr`), by op:
- "math": (function, spelling): the spelling "tile", "ox" or "math" (the module called;
  "tile_ftz" calls `tile.exp2(x, flush_to_zero=True)`),
  or "abs" (the builtin) or "**" (`x ** y` for pow);
- "power": the constant integer exponent of `x ** k`;
- "ifexp": the condition, a `Cond`;
- "loop": a `Loop`: its kind, trip count, the carried operation and its operand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools.tile_fuzzing.program import Node, Operand, Program

STATEMENTS = ("loop",)  # ops rendered as statements of their own, not `vK = <expr>`
BINARY_LOOP = {"add": "+", "sub": "-", "mul": "*", "xor": "^", "maximum": "tile.maximum",
               "minimum": "tile.minimum"}


@dataclass(frozen=True)
class Cond:
    """A scalar condition: `left <pred> right` (0-d operands and literals), optionally
    combined with a second one by `and`/`or` (`join`), optionally negated (`negate`)."""

    left: Operand
    pred: str
    right: Operand
    join: str | None = None
    other: Cond | None = None
    negate: bool = False

    def render(self) -> str:
        from tools.tile_fuzzing.program import COMPARE

        text = f"{self.left.render()} {COMPARE[self.pred]} {self.right.render()}"
        if self.join is not None and self.other is not None:
            text = f"({text}) {self.join} ({self.other.render()})"
        return f"not ({text})" if self.negate else text

    def operands(self) -> list[Operand]:
        own = [self.left, self.right]
        return own + (self.other.operands() if self.other is not None else [])


@dataclass(frozen=True)
class Loop:
    """`for c in range(trips)` or `while c < trips` (`kind`), whose body rebinds the
    carried value to `value <op> operand` (`op` a BINARY_LOOP key). `trips` is a
    literal, or `tile.max(<i32 node>) % 3` (data-dependent, the same in every thread)
    for `trip_node`."""

    kind: str
    trips: int
    op: str
    operand: Operand
    trip_node: Node | None = None

    def trips_text(self) -> str:
        if self.trip_node is not None:
            return f"tile.max({self.trip_node.render()}) % 3"
        return str(self.trips)


def render_lang_op(p: Program, n: Node, a: list[str]) -> str:
    """The right-hand side of statement `n`, an op of this module."""
    if n.op == "math":
        fn, spelling = n.attr  # type: ignore[misc]
        if spelling == "abs":
            return f"abs({a[0]})"
        if spelling == "**":
            return f"{a[0]} ** {a[1]}"
        if spelling == "tile_ftz":
            return f"tile.{fn}({a[0]}, flush_to_zero=True)"
        module = {"tile": "tile", "ox": "ox.math", "math": "math"}[spelling]
        return f"{module}.{fn}({', '.join(a)})"
    if n.op == "power":
        return f"{a[0]} ** {n.attr}"
    if n.op == "ifexp":
        cond: Cond = n.attr  # type: ignore[assignment]
        return f"({a[0]}) if {cond.render()} else ({a[1]})"
    raise AssertionError(n.op)


def render_statements(p: Program, n: Node) -> list[str]:
    """The statements of a loop node: its start value, the counter, the loop."""
    loop: Loop = n.attr  # type: ignore[assignment]
    (start,) = n.args
    counter = f"c{n.name[1:]}"
    step = loop.operand.render()
    value = (f"{BINARY_LOOP[loop.op]}({n.name}, {step})" if loop.op in ("maximum", "minimum")
             else f"{n.name} {BINARY_LOOP[loop.op]} {step}")
    lines = [f"{n.name} = {start.render()}"]
    if loop.kind == "for":
        return lines + [f"for {counter} in range({loop.trips_text()}):",
                        f"    {n.name} = {value}"]
    return lines + [f"{counter} = 0", f"while {counter} < {loop.trips_text()}:",
                    f"    {n.name} = {value}", f"    {counter} += 1"]
