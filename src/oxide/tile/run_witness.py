"""A block's contiguous run of rows as a TileIndex: `for r in range(b * R, min(b * R + R, n))`.

Liger-Kernel gives each program a run of rows, `row_start = pid * rows_per_program`,
`for row in range(row_start, min(row_start + rows_per_program, n_rows))`, and stores a
row's result at `row`. Block b's values of `r` lie in [b R, b R + R), so two blocks whose
`b` differ never hold one value of `r`: `r` is a witness of b's grid axis, where

- `b` is a witness itself (`tile.bid(axis)`, a `tile.tiles` variable, another run's
  variable: any whose values two blocks never share), widened or not;
- `R` is a constant (a `Const` or a literal) of at least 1, the same in every block;
- the loop ascends, from `b * R` to `b * R + R` or a minimum of it with anything;
- nothing wraps: computed in 64 bits, `b * R + R` stays far below 2**63 (`b` < 2**31,
  `R` < 2**31); in 32 bits it wraps once grid[axis] * R reaches 2**31, so the launch
  must stay below (a launch rule, runtime/witness_rules.py `run_rule`). Narrower
  integers are not taken.

It is a witness of its own kind, `Witness(axis, sizes=("run", R))`: block b's run holds
other blocks' `tile.bid(axis)` (block 1 of runs of 5 holds row 5, block 5's bid), so a
DisjointSlice indexed by both is refused as two witnesses in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from xdsl.ir import SSAValue

from oxide import types as T
from oxide.ir.tile_ops import kind_of
from oxide.tile.values import Tile, Witness

_LIMIT = (1 << 31) - 1


@dataclass(frozen=True)
class Run:
    """The witness a run's loop variable is, and the launch rule it needs, if any."""

    witness: Witness
    rows: int
    narrow: bool  # computed in 32 bits: grid[axis] * rows must stay below 2**31


def run_of(start: Tile, stop: Tile, witness_of: Mapping[SSAValue, Witness]) -> Run | None:
    """The Run of `range(start, stop)` (ascending), or None where it is not one."""
    head = _scaled(start.ssa, witness_of)
    end = _end(stop.ssa, witness_of)
    if head is None or end is None or head[:2] != end[:2]:
        return None
    w, rows = head[0], head[1]
    if not 1 <= rows <= _LIMIT:
        return None
    return Run(Witness(w.axis, None, ("run", rows)), rows, head[2] or end[2])


def _scaled(v: SSAValue, witness_of: Mapping[SSAValue, Witness]
            ) -> tuple[Witness, int, bool] | None:
    """(witness b, R, in 32 bits) where `v` is `b * R`, else None."""
    v = _widened(v)
    op = v.owner
    if kind_of(op) != "binary" or op.param("kind") != "mul":
        return None
    narrow = _narrow(op.results[0])
    if narrow is None:
        return None
    for x, c in ((op.operands[0], op.operands[1]), (op.operands[1], op.operands[0])):
        w, rows = witness_of.get(_widened(x)), _constant(c)
        if w is not None and w.part is None and rows is not None:
            return w, rows, narrow
    return None


def _end(v: SSAValue, witness_of: Mapping[SSAValue, Witness]
         ) -> tuple[Witness, int, bool] | None:
    """(witness b, R, in 32 bits) where `v` is at most `b * R + R` by its form: that sum,
    or a minimum of it with anything."""
    v = _widened(v)
    op = v.owner
    if kind_of(op) != "binary":
        return None
    if op.param("kind") == "min":
        return _end(op.operands[0], witness_of) or _end(op.operands[1], witness_of)
    if op.param("kind") != "add":
        return None
    narrow = _narrow(op.results[0])
    if narrow is None:
        return None
    for x, c in ((op.operands[0], op.operands[1]), (op.operands[1], op.operands[0])):
        head, rows = _scaled(x, witness_of), _constant(c)
        if head is not None and head[1] == rows:
            return head[0], rows, head[2] or narrow
    return None


def _widened(v: SSAValue) -> SSAValue:
    """`v` before what made it from one value without changing it: integer casts to types
    at least as wide (they keep the values, none of which is negative here), and the
    broadcasts of a 0-d tile to shape () that operands go through."""
    while True:
        kind = kind_of(v.owner)
        if kind == "broadcast" and not v.owner.param("shape"):
            v = v.owner.operands[0]
            continue
        if kind != "cast":
            return v
        src = v.owner.operands[0]
        a, b = _dtype(src), _dtype(v)
        if a is None or b is None or not (a.is_int and b.is_int and b.bits >= a.bits):
            return v
        v = src


def _narrow(v: SSAValue) -> bool | None:
    """Whether integer `v` is 32-bit (True) or 64-bit (False); None for other types."""
    dt = _dtype(v)
    if dt is None or not dt.is_int or dt.bits not in (32, 64):
        return None
    return dt.bits == 32


def _constant(v: SSAValue) -> int | None:
    """The integer of a 0-d `tile.full` (a literal or a `Const`), else None."""
    op = _widened(v).owner
    if kind_of(op) != "full":
        return None
    value = op.param("value")
    return value if type(value) is int else None


def _dtype(v: SSAValue) -> T.DType | None:
    return getattr(v.type, "dtype", None)
