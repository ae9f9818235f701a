"""Shrinking a mismatching program to a small repro.

Greedy delta debugging on the program tree: delete a statement, or replace an
expression by a same-typed sub-expression, keep the edit when the one-program,
one-vector kernel still disagrees with the reference in the same way, and repeat
until no edit helps (or the attempt budget is spent). Each attempt compiles one
small kernel.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

from tools.fuzzing.harness import Batch, Mismatch, load_kernel, module_source, reference, run_batch
from tools.fuzzing.nodes import Call, Expr, Function, Lit, Stmt


def _slots(node: Any) -> Iterator[tuple[Any, str, int | None, Any]]:
    """Every (owner, field, index, value) below `node` holding an Expr or a statement list item."""
    if not dataclasses.is_dataclass(node):
        return
    for f in dataclasses.fields(node):
        if f.name in ("fn", "helpers", "columns"):
            continue
        value = getattr(node, f.name)
        if isinstance(value, (Expr, Stmt)):
            yield node, f.name, None, value
            yield from _slots(value)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, (Expr, Stmt)):
                    yield node, f.name, i, item
                    yield from _slots(item)


def _edits(fn: Function) -> list[Callable[[], bool]]:
    """The candidate edits of `fn` and the helpers it calls (applied in place)."""
    edits: list[Callable[[], bool]] = []
    slots = [slot for root in [fn, *_used_helpers(fn)] for slot in _slots(root)]
    for owner, name, index, value in slots:
        if isinstance(value, Stmt) and index is not None:
            def delete(owner: Any = owner, name: str = name, index: int = index) -> bool:
                del getattr(owner, name)[index]
                return True
            edits.append(delete)
        if isinstance(value, Expr):
            for child in _typed_children(value):
                def replace(owner: Any = owner, name: str = name, index: int | None = index,
                            child: Expr = child) -> bool:
                    if index is None:
                        setattr(owner, name, child)
                    else:
                        getattr(owner, name)[index] = child
                    return True
                edits.append(replace)
    return edits


def _typed_children(e: Expr) -> list[Expr]:
    out = []
    for c in e.children():
        if c.ty == e.ty and not isinstance(c, Lit):
            out.append(c)
    return out


def _used_helpers(fn: Function) -> list[Function]:
    seen: dict[str, Function] = {}
    for _, _, _, value in _slots(fn):
        if isinstance(value, Call):
            seen.setdefault(value.fn.name, value.fn)
    return list(seen.values())


def _single(b: Batch, fn: Function, vector: int) -> Batch:
    fn.helpers = _used_helpers(fn)
    inputs = {t: b.inputs[t][vector:vector + 1] for t in b.inputs}
    return Batch(b.seed, b.index, [fn], fn.helpers, inputs)


def _signature(m: Mismatch) -> str:
    return m.what.split(":")[0]


def still_fails(b: Batch, device: str, want: str) -> Mismatch | None:
    """Run the one-program batch `b`; its mismatch if it fails like `want`."""
    try:
        kernel = load_kernel(b, module_source(b))
        expected = reference(b)
        out = run_batch(b, device, expected, kernel, fault_samples=1)
    except Exception:  # an edit that breaks the program is not a repro
        return None
    for m in out.mismatches:
        if _signature(m) == want:
            return m
    return None


def minimize(m: Mismatch, budget: int = 120) -> Mismatch:
    """A smaller program that still shows mismatch `m` on its device and vector."""
    if m.vector is None:
        return m
    want = _signature(m)
    best_fn = copy.deepcopy(m.batch.programs[m.program])
    best = m
    attempts = 0
    progress = True
    while progress and attempts < budget:
        progress = False
        count = len(_edits(best_fn))
        j = 0
        while j < count and attempts < budget:
            trial = copy.deepcopy(best_fn)
            edits = _edits(trial)
            if j >= len(edits):
                break
            edits[j]()
            attempts += 1
            found = still_fails(_single(m.batch, trial, m.vector), m.device, want)
            if found is not None:
                best_fn, best, progress = trial, found, True
                count = len(_edits(best_fn))
                continue  # the same index now names the next edit
            j += 1
    if best is not m:
        best = dataclasses.replace(best, vector=0)
    return best
