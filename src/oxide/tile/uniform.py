"""Launch-uniform values of a tile kernel: the same in every block of a launch, for its
whole run.

`tile.grouped`'s pair tells blocks apart only when every block computes it with the same
sizes (`tile/calls.py`): with sizes read from data, two blocks map their indices through
two different functions, and their pairs can meet. So the frontend asks here, while it
builds the kernel, whether a 0-d tile is launch-uniform, and for a key that is equal for
two such values computed alike (two `tile.grouped_bid(M, N, G)` calls give one pair
function).

What counts: compile-time constants, scalar parameters, array extents (`arr.shape[d]`),
`tile.num_blocks(axis)`, and casts, arithmetic, comparisons and selections of those.
Not: `tile.bid`, loop variables (they change over time), anything loaded from an array
or reduced from a tile, and names an `if` or a loop merges (conservatively).
"""

from __future__ import annotations

from collections.abc import Hashable

from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from oxide.ir import ops
from oxide.ir.tile_ops import TileType, kind_of

_FOLLOWED = ("binary", "unary", "compare", "where", "cast")


def uniform_key(v: SSAValue, entry: Block) -> Hashable | None:
    """A key of `v`'s computation when `v` (a 0-d tile or a scalar of the kernel) is
    launch-uniform, else None. Equal keys: equal values in every block. A cast that
    widens an integer keeps the key (it keeps the value)."""
    if isinstance(v, BlockArgument):
        return ("param", v.index) if v.block is entry else None
    owner = v.owner
    if not isinstance(owner, Operation):
        return None
    if isinstance(owner, ops.RegisterOp):
        reg = owner.reg.data
        return ("register", reg) if reg.startswith("nctaid.") else None
    if isinstance(owner, ops.ArrayDimOp):
        array = uniform_key(owner.array, entry)
        return None if array is None else ("extent", array, owner.dim.data)
    kind = kind_of(owner)
    if kind == "full":
        return ("constant", owner.param("value"))
    if kind in ("from_scalar", "broadcast"):  # (a broadcast's other operands: layout only)
        return uniform_key(owner.operands[0], entry)
    if kind not in _FOLLOWED:
        return None
    keys = [uniform_key(x, entry) for x in owner.operands]
    if any(k is None for k in keys):
        return None
    if kind == "cast" and _widens(owner):
        return keys[0]
    # the op's compile-time parameters but its diagnostic site (`//` checks its divisor)
    params = tuple(p for p in owner.params.data if p[0] != "site")  # type: ignore[attr-defined]
    return (kind, params, *keys)


def _widens(cast: Operation) -> bool:
    """Whether a `tile.cast` turns an integer into an integer type at least as wide."""
    src, dst = cast.operands[0].type, cast.results[0].type
    assert isinstance(src, TileType) and isinstance(dst, TileType)
    a, b = src.dtype, dst.dtype
    return a.is_int and b.is_int and not a.is_bool and not b.is_bool and b.bits >= a.bits
