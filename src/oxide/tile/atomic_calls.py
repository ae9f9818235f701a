"""Atomics in a tile kernel: `tile.atomic_add/max/min/xchg/cas/and/or/xor` (mixed into
`TileLowering`), Triton's `tl.atomic_*` on oxide's AtomicSlice.

`tile.atomic_add(arr, index, value)` updates the elements of the tile at tile index
`index` (the tile `value`'s shape, as `tile.store` writes it; a scalar updates one
element, as a scalar store does) and returns their old values (0 where the element
lies outside the array, which is skipped). Each element is updated once (by its owner
thread), so a tile update is one atomic per element, in no particular order between
elements. `sem=` is Triton's: "acq_rel" (its default), "acquire", "release" or
"relaxed"; `scope=` is the SIMT atomics': "device" (the default), "block" or "system".
A release orders every access the block made before the atomic (all its threads) before
it; an acquire orders every access the block makes after it after it, so a lock taken
with `atomic_cas` and given back with `atomic_xchg` protects the tiles between, as in
Triton's layer norm backward (`tile/atomic_lower.py` says how).

An AtomicSlice is updated only through these; `RawSlice` and `DisjointSlice` arrays
take them inside `with ox.unsafe():`, as `ox.atomic.*` does in SIMT kernels.
"""

from __future__ import annotations

import ast
from typing import Any

from oxide import types as T
from oxide.errors import KernelTypeError, SafetyError
from oxide.tile.values import Static, TArray, Tile, describe

ATOMICS = ("add", "max", "min", "xchg", "cas", "and", "or", "xor")
SEMANTICS = ("relaxed", "acquire", "release", "acq_rel")
SCOPES = ("block", "device", "system")
_TYPES = {"i32", "u32", "i64", "u64", "f32", "f64"}  # as ox.atomic (frontend/parallel_calls)


class TileAtomicsMixin:
    """`tile.atomic_*` (see the module docstring)."""

    def call_atomic(self, kind: str, node: ast.Call) -> Tile:
        name = f"tile.atomic_{kind}"
        cas = kind == "cas"
        shape = "(arr, index, compare, value)" if cas else "(arr, index, value)"
        args = self.positional(node, 4 if cas else 3, f"{name}{shape}", ("sem", "scope"))
        arr = self._atomic_array(args[0], node.args[0], name)
        dt = arr.dtype
        allowed = _TYPES | ({"f16", "bf16"} if kind == "add" else set())
        if kind in ("and", "or", "xor"):
            allowed -= {"f32", "f64"}
        if dt.name not in allowed:
            raise self.error(KernelTypeError, node.args[0], f"{name} does not support "
                             f"{dt.name}", hint="atomics support i32, u32, i64, u64, f32, f64 "
                             "(add also f16 and bf16; bitwise ones integers only)")
        items = self._index(arr, args[1], node.args[1])
        values = [self._atomic_value(v, n, dt, name) for v, n in zip(args[2:], node.args[2:],
                                                                      strict=True)]
        shape = values[0].shape
        for v in values[1:]:
            shape = self.broadcast_shape(shape, v.shape, node)
        values = [self.t.broadcast(v, shape, *values) for v in values]
        scalar = not shape
        if scalar and arr.type.rank:  # one element, as a scalar store writes it
            rank = arr.type.rank
            values = [self.t.expand(v, tuple(range(rank)), (1,) * rank) for v in values]
        elif len(shape) != arr.type.rank:
            raise self.error(KernelTypeError, node.args[-1],
                             f"`{arr.name}` has rank {arr.type.rank}; {name} updates a tile of "
                             f"that rank or one element, not a tile of shape {shape}")
        sem = self._atomic_keyword(node, "sem", SEMANTICS, "acq_rel")
        scope = self._atomic_keyword(node, "scope", SCOPES, "device")
        op = "exch" if kind == "xchg" else kind  # the SIMT op's name (ox.atomic.exch)
        # a view's update is the parameter's, its fixed indices first (tile/memory.py)
        old = self.t.atomic(arr.ssa, op, sem, scope, values,
                            self._index_i64([*arr.fixed, *items], node.args[1]),
                            self.b.site("index", self.src.span(node), arr.name),
                            len(arr.fixed), arr.type.vectors)
        return self.t.squeeze(old) if scalar and arr.type.rank else old

    def _atomic_array(self, v: Any, at: ast.AST, name: str) -> TArray:
        arr = self._array_arg(v, at, name)
        access = arr.type.access
        if access == "atomic" or (access in ("raw", "disjoint") and self.unsafe_depth):
            return arr
        raise self.error(SafetyError, at, f"`{arr.name}` is a {arr.type.title}; atomics need "
                         "an AtomicSlice parameter",
                         hint=f"declare it `AtomicSlice[{arr.dtype.name}]`, or use a RawSlice "
                              "inside `with ox.unsafe():`")

    def _atomic_value(self, v: Any, at: ast.AST, dt: T.DType, name: str) -> Tile:
        """An operand in the array's dtype: a tile or scalar of it exactly (as ox.atomic),
        or a number converted to it."""
        if isinstance(v, Static) and isinstance(v.obj, (bool, int, float)):
            return self.as_tile(v, at, dt)
        if not isinstance(v, Tile):
            raise self.error(KernelTypeError, at, f"{name} takes a tile or a scalar, not "
                             f"{describe(v)}")
        if v.dtype != dt:
            raise self.error(KernelTypeError, at, f"the array holds {dt.name}; the value is "
                             f"{v.describe()}", hint=f"convert it: `.astype({dt.name})`")
        return v

    def _atomic_keyword(self, node: ast.Call, key: str, allowed: tuple[str, ...],
                        default: str) -> str:
        v, at = self.keyword(node, key)
        if v is None:
            return default
        if not (isinstance(v, Static) and v.obj in allowed):
            hint = ('Triton\'s "gpu", "cta" and "sys" are "device", "block" and "system"'
                    if key == "scope" else "Triton's default is \"acq_rel\"")
            got = repr(v.obj) if isinstance(v, Static) else describe(v)
            raise self.error(KernelTypeError, at, f"{key}= is one of "
                             f"{', '.join(repr(a) for a in allowed)}, not {got}", hint=hint)
        return v.obj
