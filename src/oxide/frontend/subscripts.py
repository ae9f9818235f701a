"""Subscripts: reading and writing array elements, and the DisjointSlice index rule.

A write to a DisjointSlice must index with a ThreadIndex of the array's rank; a
plain integer derived from one carries a note saying why it no longer counts,
which the diagnostic shows at the caret.
"""

from __future__ import annotations

import ast
from typing import Any

from oxide import types as T
from oxide.errors import KernelTypeError, SafetyError
from oxide.frontend.hint_names import witness_name
from oxide.frontend.values import (
    Array,
    FixedArray,
    Lit,
    ShapeOf,
    Slot,
    SlotTuple,
    Tup,
    Val,
    Witness,
    article,
    constant_int,
    describe,
)
from oxide.ir import ops
from oxide.ir.types import ir_type


class SubscriptMixin:
    """Array element access; mixed into FunctionLowering with ExprMixin."""

    def expr_Subscript(self, node: ast.Subscript) -> Any:
        item = self.tuple_variable_item(node)
        if item is not None:
            return item
        return self.subscript_load(self.expr(node.value), self.expr(node.slice), node)

    def tuple_variable_item(self, node: ast.Subscript) -> Any:
        """`t[k]` of a tuple variable `t` and a constant `k`: that item alone, read from
        its slot (None where that is not the case). Reading every slot to pick one made
        the epilogue of a 128-value accumulator 16k slot reads (hopper_gemm)."""
        if not isinstance(node.value, ast.Name):
            return None
        name = node.value.id
        held = self.env.get(name)
        if name in self.unrolled or not isinstance(held, SlotTuple):
            return None
        index = constant_int(self.expr(node.slice))
        if not isinstance(index, Lit) or not isinstance(index.value, int) \
                or not -len(held.items) <= index.value < len(held.items):
            return None  # the general path says what is wrong
        self.check_assigned(name, node.value)
        item = held.items[index.value]
        if isinstance(item, Slot):
            return Val(self.b.value(ops.SlotReadOp(item.ssa)), item.dtype)
        if isinstance(item, SlotTuple):
            return self.read_slot_tuple(item)
        return item

    def index_values(self, container: Any, index: Any, node: ast.Subscript,
                     write: bool) -> list[Any]:
        rank = container.type.rank if isinstance(container, Array) else len(container.shape)
        if isinstance(index, Witness):
            if index.rank != rank:
                raise self.error(KernelTypeError, node.slice,
                                 f"a {index.rank}-D ThreadIndex cannot index a rank-{rank} array")
            return [index]
        items = list(index.items) if isinstance(index, Tup) else [index]
        if len(items) != rank:
            raise self.error(KernelTypeError, node.slice,
                             f"`{self.text(node.value)}` has rank {rank}; index it with "
                             + (f"{rank} integer{'s' if rank > 1 else ''}" if rank else "`()`")
                             + f", not {len(items)} integer{'s' if len(items) != 1 else ''}",
                             hint="partial indexing and slicing are not supported" if rank
                             else "a 0-d array holds one element: `x[()]`")
        out = []
        for item in items:
            if isinstance(item, Witness):
                item = self.scalar(item, node.slice)
            if not self.is_int_value(item):
                raise self.error(KernelTypeError, node.slice,
                                 f"array indices must be integers, not {describe(item)}")
            out.append(item)
        return out

    def index_ssa(self, items: list[Any], node: ast.AST) -> list[Any]:
        out = []
        for item in items:
            if isinstance(item, Witness):
                out.append(item.ssa)
            else:
                s = self.scalar(item, node) if not isinstance(item, Lit) else None
                if s is None:
                    if item.value < 0:
                        raise self.error(KernelTypeError, node,
                                         f"negative index {item.value}: kernels do not wrap "
                                         "indices around", hint="index from the start")
                    out.append(self.materialize(item, T.i64, node))  # `1 << 64`: an error
                elif s.dtype != T.i64:
                    out.append(self.b.cast(s.ssa, T.i64))
                else:
                    out.append(s.ssa)
        return out

    def subscript_load(self, container: Any, index: Any, node: ast.Subscript) -> Any:
        if isinstance(container, (Tup, ShapeOf)):
            index = constant_int(index)
            if not isinstance(index, Lit) or not isinstance(index.value, int):
                raise self.error(KernelTypeError, node.slice,
                                 "tuples are indexed with constant integers",
                                 hint="a constant, or the variable of a `for` over a constant "
                                      "range (that loop is unrolled): `for j in range(3): "
                                      "s += w[j]`")
            try:
                return container.items[index.value]
            except IndexError:
                raise self.error(KernelTypeError, node.slice,
                                 f"tuple index {index.value} out of range") from None
        if isinstance(container, FixedArray):
            return self.fixed_array_access(container, index, node, None)
        if not isinstance(container, Array):
            raise self.error(KernelTypeError, node.value, f"{describe(container)} is not indexable")
        arr = container
        if arr.type.access == "raw" and not self.unsafe_depth:
            raise self.error(SafetyError, node,
                             f"`{arr.name}` is a RawSlice: reading it needs `with ox.unsafe():`",
                             hint="wrap the access in `with ox.unsafe():`, or use a Slice")
        if arr.type.access == "atomic":
            raise self.error(SafetyError, node,
                             f"`{arr.name}` is an AtomicSlice: access it through ox.atomic.*",
                             hint=f"read the current value with `ox.atomic.add({arr.name}, "
                                  f"{self.text(node.slice)}, 0)`")
        idx = self.index_ssa(self.index_values(arr, index, node, write=False), node.slice)
        site = self.b.site("index", self.src.span(node), arr.name)
        checked = self.ctx.checks
        return Val(self.b.value(ops.LoadOp(arr.ssa, idx, ir_type(arr.type.dtype), site, checked,
                                           unsafe=self.unsafe_depth > 0)), arr.type.dtype)

    def subscript_store(self, container: Any, index: Any, value: Any, node: ast.Subscript,
                        base_node: ast.AST) -> None:
        if isinstance(container, FixedArray):
            self.fixed_array_access(container, index, node, value)
            return
        if not isinstance(container, Array):
            raise self.error(KernelTypeError, node.value,
                             f"cannot assign into {describe(container)}")
        arr = container
        access = arr.type.access
        if access == "slice":
            raise self.error(SafetyError, node,
                             f"`{arr.name}` is a Slice: it is read-only in kernels",
                             label="written here",
                             hint="declare it `DisjointSlice[...]` to write one element per "
                                  "thread, or `RawSlice[...]` with `with ox.unsafe():`")
        if access == "atomic":
            raise self.error(SafetyError, node,
                             f"`{arr.name}` is an AtomicSlice: plain writes would race",
                             hint=f"use `ox.atomic.exch({arr.name}, {self.text(node.slice)}, "
                                  "value)`, or another ox.atomic operation")
        if access == "raw" and not self.unsafe_depth:
            raise self.error(SafetyError, node,
                             f"`{arr.name}` is a RawSlice: writing it needs `with ox.unsafe():`",
                             hint="wrap the write in `with ox.unsafe():` and make sure no two "
                                  "threads write one element")
        if access == "disjoint" and not self.unsafe_depth:
            self.check_disjoint_index(arr, index, node)
        items = self.index_values(arr, index, node, write=True)
        v = self.materialize(value, arr.type.dtype, node) if isinstance(value, Lit) else None
        if v is None:
            s = self.scalar(value, node)
            if s.dtype != arr.type.dtype:
                raise self.error(KernelTypeError, node,
                                 f"`{arr.name}` holds {arr.type.dtype.name}; cannot store "
                                 f"{article(s.dtype.name)} into it",
                                 hint=f"convert explicitly: `{arr.type.dtype.name}(...)`")
            v = s.ssa
        site = self.b.site("index", self.src.span(node), arr.name)
        checked = self.ctx.checks  # RawSlice writes too: `unsafe` lifts the rules, not the bounds
        self.b.emit(ops.StoreOp(arr.ssa, self.index_ssa(items, node.slice), v, site, checked,
                                unsafe=self.unsafe_depth > 0))

    def check_disjoint_index(self, arr: Array, index: Any, node: ast.Subscript) -> None:
        if isinstance(index, Witness):
            if index.rank != arr.type.rank:
                raise self.error(
                    SafetyError, node.slice,
                    f"`{arr.name}` is a rank-{arr.type.rank} DisjointSlice: it can only be "
                    f"written at a {arr.type.rank}-D ThreadIndex",
                    label=f"this is a {index.rank}-D ThreadIndex",
                    hint=f"use thread.index_{arr.type.rank}d()" if arr.type.rank <= 2 else
                    "rank-3 DisjointSlices can only be written inside `with ox.unsafe():`")
            return
        if arr.type.rank == 0:
            raise self.error(
                SafetyError, node.slice,
                f"`{arr.name}` is a 0-d DisjointSlice: its one element belongs to no single "
                "thread, so every thread's write would race",
                label="every thread writes this element",
                hint=f"declare it `AtomicSlice[...]` and combine the threads' values with "
                     f"`ox.atomic.add({arr.name}, (), value)` (or another ox.atomic "
                     "operation), or write it from one thread inside `with ox.unsafe():`")
        if self.ctx.block is not None:
            return  # passes/shared_races.py proves the index map injective over the launch
        label = "this is not a ThreadIndex"
        if isinstance(index, Val) and index.note:
            label = index.note
        elif isinstance(index, Tup):
            notes = [v.note for v in index.items if isinstance(v, Val) and v.note]
            label = notes[0] if notes else "indices built from integers, not a ThreadIndex"
        elif isinstance(index, Lit):
            label = "a constant index: every thread would write it"
        rank = arr.type.rank
        if rank <= 2:
            name, bound = witness_name(self.src.tree, rank)
            where = "" if bound else f" with `{name} = thread.index_{rank}d()`"
            hint = (f"write `{arr.name}[{name}]`{where}, or take responsibility with "
                    "`with ox.unsafe():`")
        else:
            hint = ("there is no 3-D ThreadIndex: write it inside `with ox.unsafe():`, or "
                    "declare the block shape (`@ox.kernel(block=...)`) to have the index proved")
        raise self.error(
            SafetyError, node.slice,
            f"`{arr.name}` is a DisjointSlice: it can only be written at a ThreadIndex",
            label=label, hint=hint)
