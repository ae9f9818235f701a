"""The DisjointSlice rule of tile kernels: no two blocks touch one element of a
DisjointSlice, through any two of its accesses (mixed into `TileLowering`).

Why the rule is sound. An item of a tile index counts tiles: item w along a dimension
where the tile's extent is e covers elements [w e, w e + e). Two accesses whose tiles
have the same extent along a dimension therefore touch a common element there only at
equal items; the accesses of one DisjointSlice may use different tile shapes as long as
they agree along the dimensions their separators sit in (Liger's cross entropy reads
the element (row, y) as a (1, 1) tile beside (1, BN) tiles of the row). An index of constants only
tells no blocks apart: a kernel whose accesses of an array are all such runs as one block
(the launch rule below); an index with a computed item and no witness is refused. A *separator* of an index
is what of it tells blocks apart: a witness (`Witness`, a TileIndex of grid axis a) at
position k, or the two parts of one `tile.grouped` pair at positions k0 and k1. Each
takes different values in two blocks that differ along its axis a, and only the
separators matter: every other item may be any integer (a loop index over a wide row, a
value read from data). The kernel keeps, per array, the separators that every access
has, at the same positions (after `order=` moves the items to the array's dimension
order); an access that shares none with the earlier ones is refused. The grid axes no
array's common separators cover must be 1 at launch (`grid_axes`, enforced by
`runtime/witness_rules.py`). Then any two blocks differ along a covered axis a, and a
separator of a that every access holds at the same positions gives their indices
different items there: two accesses in two blocks never meet, writes or reads (a read
by another block would race with this block's write).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from xdsl.ir import SSAValue

from oxide.errors import CompileError, SafetyError
from oxide.ir.tile_ops import kind_of
from oxide.tile.values import TArray, Tile, Witness, shape_text

# One separator: its (position, witness) pairs, one for a whole witness, two for a pair.
Separator = tuple[tuple[int, Witness], ...]


@dataclass(frozen=True)
class Access:
    """An access of a DisjointSlice as a diagnostic names it."""

    line: int
    text: str  # the index as written
    positions: dict[Witness, list[int]]  # where each of its witnesses sits, array order


@dataclass
class ArrayRule:
    """What every access of one DisjointSlice so far has in common: the separators, and
    the tile shapes they were taken with."""

    shapes: set[tuple[int, ...]]
    separators: frozenset[Separator]
    first: Access


@dataclass
class DisjointUses:
    """The DisjointSlice accesses of a kernel so far (shared with the @ox.tile.funcs it
    inlines), and what the diagnostics need to know of its integers."""

    arrays: dict[str, ArrayRule] = field(default_factory=dict)
    witnesses: set[SSAValue] = field(default_factory=set)  # the values that are witnesses
    witness_of: dict[SSAValue, Witness] = field(default_factory=dict)  # and what each is
    # launch rules the witnesses need (runtime/witness_rules.py: `run_rule`)
    launch_rules: set[int] = field(default_factory=set)
    # values that would be witnesses but for a reason, and the node that shows it
    notes: dict[SSAValue, tuple[str, ast.AST]] = field(default_factory=dict)
    # for `oxide bench`'s grid (tile/grid.py): grid axis -> (array, its dimension, the
    # tile's extent there) of each store with a TileIndex of that axis; whether a store
    # used a tile.grouped pair, or a `for t in tile.tiles(...)` loop hands out the tiles
    tiled: dict[int, set[tuple[str, int, int]]] = field(default_factory=dict)
    grouped: bool = False
    persistent: bool = False

    def grid_axes(self) -> frozenset[int] | None:
        """The grid axes every DisjointSlice's accesses tell blocks apart along (the
        others must be 1 at launch), or None where the kernel has no such access."""
        axes: frozenset[int] | None = None
        for rule in self.arrays.values():
            mine = frozenset(sep[0][1].axis for sep in rule.separators)
            axes = mine if axes is None else axes & mine
        return axes


def separators(items: Sequence[Any]) -> frozenset[Separator]:
    """The separators of a tile index (its items in array order)."""
    out: set[Separator] = set()
    parts: dict[tuple[int, Witness], list[int]] = {}
    for k, item in enumerate(items):
        w = item.witness if isinstance(item, Tile) else None
        if w is None:
            continue
        if w.part is None:
            out.add(((k, w),))
        else:
            parts.setdefault((w.part, w), []).append(k)
    for (part, w), where in parts.items():
        if part != 0:
            continue
        partner = Witness(w.axis, 1, w.sizes)
        for k0 in where:
            for k1 in parts.get((1, partner), []):
                out.add(((k0, w), (k1, partner)))
    return frozenset(out)


class TileDisjointMixin:
    """`check_disjoint`, for `tile.load` and `tile.store` of a DisjointSlice."""

    def witness(self, t: Tile, w: Witness) -> Tile:
        """`t` as a TileIndex (recorded, so that diagnostics know arithmetic on it)."""
        self.stores.witnesses.add(t.ssa)
        self.stores.witness_of[t.ssa] = w
        return Tile(t.dtype, t.shape, t.ssa, w)

    def check_disjoint(self, arr: TArray, items: list[Any], nodes: list[ast.AST],
                       shape: tuple[int, ...], node: ast.Call, index_node: ast.AST,
                       verb: str, order: tuple[int, ...] | None) -> None:
        """An access of DisjointSlice `arr` at `items` (array order; `nodes` their
        source): refused unless it has a separator (or holds constants only), its tile
        shape is the array's, and it shares a separator with every earlier access (or
        they all hold constants only; see the module docstring)."""
        seps = separators(items)
        if not seps and any(isinstance(i, Tile) for i in items):
            raise self._no_separator(arr, items, nodes, index_node, verb)
        rule = self.stores.arrays.get(arr.name)
        if rule is not None and shape not in rule.shapes:
            # a separator still separates where every shape has its extents
            agreeing = frozenset(sep for sep in rule.separators & seps if all(
                shape[k] == seen[k] for seen in rule.shapes for k, _ in sep))
            if not agreeing and (rule.separators or seps):
                first = min(rule.shapes)
                raise self.error(SafetyError, node,
                                 f"`{arr.name}` is a DisjointSlice already accessed with tiles "
                                 f"of shape {shape_text(first)}; this tile is "
                                 f"{shape_text(shape)}, and the two differ along the dimension "
                                 "their TileIndex indexes, so two blocks' tiles could overlap",
                                 hint="give every access of the array the same extent along "
                                      "the dimensions its TileIndexes index (the others may "
                                      "differ: a (1, 1) tile beside (1, 256) tiles of a row), "
                                      "or one tile shape")
            rule.shapes.add(shape)
            rule.separators = agreeing
        positions: dict[Witness, list[int]] = {}
        for k, item in enumerate(items):
            if isinstance(item, Tile) and item.witness is not None:
                positions.setdefault(item.witness, []).append(k)
                if verb != "written":
                    continue
                if item.witness.part is None and item.witness.sizes is None:
                    self.stores.tiled.setdefault(item.witness.axis, set()).add(
                        (arr.name, k, shape[k]))  # (a run of rows says nothing of the grid)
                else:
                    self.stores.grouped = True
        here = Access(self.src.span(index_node).line, self.text(index_node), positions)
        if rule is None:
            self.stores.arrays[arr.name] = ArrayRule({shape}, seps, here)
            return
        common = rule.separators & seps
        if not common and (rule.separators or seps):
            raise self._misplaced(arr, rule.first, here, nodes, index_node, verb, order)
        rule.separators = common

    def _misplaced(self, arr: TArray, first: Access, here: Access, nodes: list[ast.AST],
                   index_node: ast.AST, verb: str, order: tuple[int, ...] | None
                   ) -> CompileError:
        """An access whose witnesses sit where no earlier access has them: two blocks
        can reach one tile (block a at `(a, b)` and block b at `(b, a)`)."""
        at, label = index_node, ("no TileIndex of this index sits where the earlier accesses "
                                 "have one")
        if not here.positions:
            label = "constants only: every block would reach this tile"
        elif not first.positions:
            label = f"the index on line {first.line} has constants only: every block reaches it"
        for w, ks in here.positions.items():
            there = first.positions.get(w)
            if there is not None and there != ks:
                at = nodes[ks[0]]
                label = (f"`{self.text(at)}` ({w.describe()}) indexes dimension {ks[0]} of "
                         f"`{arr.name}` here, dimension {there[0]} on line {first.line}")
                break
            other = next((o for o, at_o in first.positions.items()
                          if o.axis == w.axis and o != w and at_o == ks), None)
            if there is None and other is not None and w.part is None and other.part is None:
                at = nodes[ks[0]]
                label = (f"`{self.text(at)}` is {w.describe()}, and line {first.line} has "
                         f"{other.describe()} there: two TileIndexes of one axis that "
                         "blocks can share values of (a block's run of rows holds other "
                         "blocks' tile.bid)")
                break
            if there is None and w.part is not None and any(
                    o.part == w.part and o.axis == w.axis for o in first.positions):
                at = nodes[ks[0]]
                label = (f"`{self.text(at)}` comes from a tile.grouped call with other sizes "
                         f"than the pair on line {first.line}: two different orders")
                break
        moved = (" (`order=` sends tile item k to array dimension order[k])"
                 if order is not None else "")
        return self.error(
            SafetyError, at,
            f"`{arr.name}` is a DisjointSlice {verb} at `{here.text}`{moved} and accessed at "
            f"`{first.text}` on line {first.line}: their TileIndex witnesses index different "
            "dimensions, so two blocks can reach one tile", label=label,
            hint=f"index every access of `{arr.name}` with each TileIndex in the same array "
                 "dimension (e.g. `(i, j)` everywhere), or use a separate array")

    def _no_separator(self, arr: TArray, items: list[Any], nodes: list[ast.AST],
                      index_node: ast.AST, verb: str) -> CompileError:
        """Why an index with a computed item tells no blocks apart, naming the real
        cause."""
        message = (f"`{arr.name}` is a DisjointSlice: it is {verb} only at a tile index built "
                   "from this block's TileIndex witnesses (tile.bid(axis)), which tell blocks "
                   "apart, and any other integers")
        raw_hint = "or take responsibility with a RawSlice and `with ox.unsafe():`"
        parts = [i.witness for i in items if isinstance(i, Tile) and i.witness is not None]
        if parts:  # parts of grouped pairs, but no whole pair
            if len(parts) == 2 and parts[0] == parts[1]:
                return self.error(SafetyError, index_node,
                                  f"`{arr.name}` is a DisjointSlice: its tile index uses the "
                                  "same part of tile.grouped_bid's pair twice",
                                  hint="index with both parts: `i, j = tile.grouped_bid(...)`"
                                       ", then `(i, j)`")
            return self.error(SafetyError, index_node,
                              f"`{arr.name}` is a DisjointSlice: its tile index uses one part "
                              "of tile.grouped_bid's pair; only the two together are unique "
                              "to the block",
                              hint="index with both parts: `(i, j)` from "
                                   "`i, j = tile.grouped_bid(...)`")
        item, at = next((i, n) for i, n in zip(items, nodes, strict=True)
                        if isinstance(i, Tile))
        note = self.stores.notes.get(item.ssa)
        if note is not None:
            why, where = note
            return self.error(SafetyError, where,
                              f"`{arr.name}` is a DisjointSlice {verb} at a tile.grouped pair "
                              "whose sizes can differ between blocks: two blocks can compute "
                              "one pair", label=why,
                              hint="compute the sizes from Const and scalar parameters, array "
                                   "extents (`arr.shape[d]`) and `tile.num_blocks(axis)` only")
        cause = self._derivation(item.ssa)
        text = self.text(at)
        if cause == "cast":
            return self.error(SafetyError, at, message,
                              label=f"`{text}` is a TileIndex cast to a narrower type, which "
                                    "can wrap: the cast drops the uniqueness guarantee",
                              hint="cast to a type at least as wide (`.astype(i64)`), "
                                   + raw_hint)
        if cause == "arithmetic":
            return self.error(SafetyError, at, message,
                              label=f"`{text}` is a computed integer; arithmetic drops the "
                                    "uniqueness guarantee",
                              hint="write at `(tile.bid(0), ...)`; for Triton's grouped "
                                   "(L2-swizzled) order of a 1-D grid, `pid_m, pid_n = "
                                   "tile.grouped_bid(num_m, num_n, group)` gives the same "
                                   "tiles and keeps them witnesses; " + raw_hint)
        return self.error(SafetyError, at, message,
                          label=f"`{text}` is not derived from a TileIndex, and no other item "
                                "of the index is one",
                          hint=f"put the block's TileIndex in the index, e.g. "
                               f"`(tile.bid(0), {text})`; the variable of a loop over the "
                               "block's run of rows, `for r in range(b * R, min(b * R + R, "
                               "n))` with b = tile.bid(0) and R a Const, is one too; "
                               + raw_hint)

    def _derivation(self, v: SSAValue) -> str | None:
        """How `v` comes from a witness: "cast" (a narrowing cast of one), "arithmetic"
        (computed from one otherwise), or None (from none)."""
        owner = v.owner
        if kind_of(owner) == "cast" and owner.operands[0] in self.stores.witnesses:
            return "cast"
        seen: set[int] = set()
        stack = [v]
        while stack:
            x = stack.pop()
            if x in self.stores.witnesses:
                return "arithmetic"
            op = x.owner
            if id(op) in seen or kind_of(op) is None:
                continue
            seen.add(id(op))
            stack.extend(op.operands)
        return None
