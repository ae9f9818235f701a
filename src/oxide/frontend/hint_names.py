"""Names for the code a hint suggests: the kernel's own ThreadIndex, or a name it leaves free.

A hint such as "write `out[i]` with `i = thread.index_1d()`" is a fix only where `i` is
free. In a kernel whose `i` is a loop counter or a plain variable it tells the user to
give their `i` a second meaning, which the compiler then refuses. So a hint names the
kernel's own ThreadIndex variable where it has one (`tid = thread.index_1d()` makes
the hint say `out[tid]`), else the first of a few usual names the kernel does not use.
"""

from __future__ import annotations

import ast

# Usual names for a ThreadIndex of each rank, in the order a hint tries them.
WITNESS_NAMES = {1: ("i", "tid", "idx", "gid"), 2: ("ij", "pos", "rc", "cell")}


def witness_name(fn: ast.FunctionDef, rank: int) -> tuple[str, bool]:
    """(name, bound): the variable `fn` binds to `thread.index_{rank}d()` and True, else a
    name `fn` does not use at all (parameters, locals, globals it reads) and False."""
    call = f"index_{rank}d"
    for node in ast.walk(fn):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == call):
            return node.targets[0].id, True
    return free_name(fn, WITNESS_NAMES.get(rank, WITNESS_NAMES[1])), False


def free_name(fn: ast.FunctionDef, candidates: tuple[str, ...]) -> str:
    """The first of `candidates` that `fn` never mentions (else the first, numbered)."""
    used = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
    used |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    for name in candidates:
        if name not in used:
            return name
    n = 2
    while f"{candidates[0]}{n}" in used:
        n += 1
    return f"{candidates[0]}{n}"

