"""Definite assignment: a kernel reads a local only where every path has assigned it.

In Python a read of a local that no path has assigned raises UnboundLocalError.
In a kernel it would read whatever the variable's register holds: another
thread's value on the GPU, a stale one on the CPU. So the frontend follows
Python's rule statically, as Java and C# do: `FunctionLowering` keeps the set of
names assigned on every path to the current point, and a read of a local
outside it is a KernelSyntaxError.

The lowering drives the sets (it knows which branches a constant condition
keeps); this module holds the pieces that need no lowering state.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field


def local_names(fn: ast.FunctionDef) -> frozenset[str]:
    """The names `fn`'s body binds (its locals, as Python decides them), parameters aside."""
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    bound: set[str] = set()
    for stmt in fn.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
    return frozenset(bound - params)


def bound_once_by_assign(fn: ast.FunctionDef) -> frozenset[str]:
    """The locals bound exactly once, by a plain `name = value` statement.

    Such a name bound to a constant stays a weak literal, like the constant itself
    (docs/language.md, "Local constants"): `VEC = 32` then `tid & (VEC - 1)` keeps
    `tid`'s type, and `N = 100` can size a shared array.
    """
    stores: dict[str, int] = {}
    plain: set[str] = set()
    for stmt in fn.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                stores[node.id] = stores.get(node.id, 0) + 1
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)):
                plain.add(node.targets[0].id)
    return frozenset(n for n in plain if stores.get(n) == 1)


def meet(sets: list[set[str]]) -> set[str] | None:
    """The names assigned on every one of the paths that meet (None: no path reaches)."""
    if not sets:
        return None
    out = set(sets[0])
    for s in sets[1:]:
        out &= s
    return out


@dataclass
class LoopAssignments:
    """The assigned-name sets at a loop's `break`s and `continue`s."""

    breaks: list[set[str]] = field(default_factory=list)
    continues: list[set[str]] = field(default_factory=list)


def copy_assigned(assigned: set[str] | None) -> set[str] | None:
    """A copy of the assigned set at a point (None: no path reaches it)."""
    return None if assigned is None else set(assigned)


def meet_paths(*paths: set[str] | None) -> set[str] | None:
    """The names assigned on every path that reaches a join (None: no path does)."""
    return meet([p for p in paths if p is not None])


def copy_sources(fn: ast.FunctionDef) -> dict[str, list[str] | None]:
    """For each name `fn`'s body stores: the names its assignments copy, in source order.

    A copy is `x = y`, `x = a if c else b` (each side a copy) and the items of a tuple
    assignment (`src, dst = dst, src`). None: some store of the name is not a copy (an
    arithmetic value, a loop target). Why: an array name rebound in the body is a small
    integer saying which array it is (frontend/lower.py, `ArrayVar`), and that integer
    must know every array the name may hold before the first read, which in a loop comes
    before the rebinding it depends on.
    """
    out: dict[str, list[str] | None] = {}

    def add(name: str, sources: list[str] | None) -> None:
        if name in out and out[name] is None:
            return
        if sources is None:
            out[name] = None
            return
        have = out.setdefault(name, [])
        assert have is not None
        have.extend(s for s in sources if s not in have)

    def names_of(value: ast.expr) -> list[str] | None:
        if isinstance(value, ast.Name):
            return [value.id]
        if isinstance(value, ast.IfExp):
            a, b = names_of(value.body), names_of(value.orelse)
            return None if a is None or b is None else a + b
        return None

    def bind(target: ast.expr, value: ast.expr | None) -> None:
        if isinstance(target, ast.Name):
            add(target.id, None if value is None else names_of(value))
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = (value.elts if isinstance(value, (ast.Tuple, ast.List))
                     and len(value.elts) == len(target.elts)
                     and not any(isinstance(t, ast.Starred) for t in target.elts) else None)
            for i, t in enumerate(target.elts):
                bind(t.value if isinstance(t, ast.Starred) else t,
                     None if items is None else items[i])

    for stmt in fn.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    bind(target, node.value)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                bind(node.target, None)
            elif isinstance(node, (ast.For, ast.comprehension)):
                bind(node.target, None)
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                bind(node.optional_vars, None)
            elif isinstance(node, ast.NamedExpr):
                bind(node.target, None)
    return out
