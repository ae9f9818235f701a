"""Early `return` in a tile kernel, as the statements after it in the other arm.

Triton kernels end a block early (Liger's cross entropy: `if y == ignore_index:` zero
the row's gradient, then `return`). Tile code is block-uniform (every condition is a
0-d tile every thread holds alike), so a return is taken by the whole block, and
`if c: A; return` followed by `B` means `if c: A else: B`. `fold_returns` rewrites a
kernel's body so: an `if` holding a return gets the statements after it appended to
each arm (deep copies, same source lines), and each arm is folded in turn; a return
drops what follows it. A branch that falls through then runs the rest, one that
returned does not, and no `return` is left. The cost is code size: the rest is
compiled once per arm that can fall through.

What stays refused (UnsupportedFeatureError, at the return): a return inside a loop
(it would leave the loop's iterations and carried tiles mid-way; the loop refuses it)
and inside `with ox.unsafe():` (the rest would move into the unsafe block).
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable

from oxide.errors import CompileError, KernelSyntaxError, UnsupportedFeatureError

ErrorAt = Callable[..., CompileError]  # TileLowering.error(cls, node, message, hint=...)


def fold_returns(body: list[ast.stmt], error: ErrorAt) -> list[ast.stmt]:
    """`body` with no `return` left (see the module docstring)."""
    out: list[ast.stmt] = []
    for i, stmt in enumerate(body):
        if isinstance(stmt, ast.Return):
            if stmt.value is not None:
                raise error(KernelSyntaxError, stmt, "a tile kernel returns nothing",
                            hint="store results with `tile.store(...)`")
            return out
        if isinstance(stmt, ast.If) and _holds_return(stmt):
            rest = body[i + 1:]
            folded = ast.If(test=stmt.test,
                            body=fold_returns(stmt.body + copy.deepcopy(rest), error),
                            orelse=fold_returns(stmt.orelse + copy.deepcopy(rest), error))
            out.append(ast.copy_location(folded, stmt))
            return out
        if isinstance(stmt, ast.With) and _holds_return(stmt):
            raise error(UnsupportedFeatureError, _first_return(stmt),
                        "`return` inside `with ox.unsafe():` is not supported",
                        hint="end the `with` block first, then return under an `if`")
        out.append(stmt)
    return out


def _holds_return(stmt: ast.stmt) -> bool:
    """Whether `stmt` holds a `return` outside loops (a loop refuses its own)."""
    return _first_return(stmt) is not None


def _first_return(node: ast.AST) -> ast.Return | None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Return):
            return child
        if isinstance(child, (ast.For, ast.While, ast.FunctionDef, ast.Lambda)):
            continue
        found = _first_return(child)
        if found is not None:
            return found
    return None
