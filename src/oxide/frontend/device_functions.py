"""Recursive @ox.func: real device functions instead of inlined copies.

An @ox.func is inlined at each call (frontend/calls.py), which cannot end for a
function that calls itself. A function that can reach itself through the calls in
its body (directly, or through other @ox.funcs: `is_even` calls `is_odd` calls
`is_even`) is lowered instead once per specialization, the dtypes (and array types)
of its arguments, into its own `oxide.func`, and each call becomes an `oxide.call`
(ir/ops.py). Codegen emits it as an LLVM function of the kernel's module, with the
arrays flattened as in the kernel ABI and the error record pointer passed along, so
bounds checks and asserts inside report as they do in the kernel.

What a call cannot carry is refused here, with the reason: block barriers, warp
collectives and shared memory (every thread of a block or warp would have to make
the same calls in step, which recursion on per-thread values does not give), and
DisjointSlices (their writes are proved at the kernel's ThreadIndex). The return
type is the declared `-> dtype`, else the first `return` lowered: a recursive call
reached before any `return` is an error asking for the annotation.

Stack: each call takes a frame on the thread's stack. On the GPU that is local
memory sized by `@ox.kernel(stack_size=...)` (runtime/gpu.py sets the context's
CU_LIMIT_STACK_SIZE when such a kernel is loaded); on the CPU it is the OS thread's.
Each device function counts its call depth and reports a call deeper than the stack
holds as a failed assert at its `def` (`DEPTH_SITE`; codegen/emit.py `depth_guard`)
instead of overflowing the stack.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects.builtin import IntAttr
from xdsl.ir import Attribute, SSAValue

from oxide import types as T
from oxide.codegen.abi import DEPTH_SITE, RECURSIVE_SYMBOL_PREFIX
from oxide.errors import KernelTypeError, Span, UnsupportedFeatureError
from oxide.frontend.builder import IRBuilder, _remove_unreachable
from oxide.frontend.promote import literal_dtype
from oxide.frontend.return_target import ReturnTarget
from oxide.frontend.values import (
    Array,
    FixedArray,
    Lit,
    Slot,
    SlotTuple,
    Static,
    Tup,
    Val,
    Witness,
    describe,
)
from oxide.ir import ops
from oxide.ir.types import array_ir_type, ir_type

# the prefix of every device function's symbol: runtime/gpu.py finds it in a cubin to
# know the kernel calls one (and needs a stack), as the disk cache keeps no other mark
SYMBOL_PREFIX = RECURSIVE_SYMBOL_PREFIX

# access kinds of array parameters a recursive function may take
_PASSABLE = ("slice", "atomic", "raw")


@dataclass
class Specialization:
    """One recursive @ox.func lowered for one list of argument types."""

    fn: Any
    symbol: str
    params: tuple[Any, ...]  # T.DType or T.ArrayType, one per parameter
    func: ops.FuncOp
    return_target: Any  # the lowering's ReturnTarget: its slot gives the result type early
    done: bool = False


@dataclass
class DeviceFunctions:
    """The recursive @ox.funcs of one kernel compile (kept on its KernelContext)."""

    specs: dict[tuple[Any, ...], Specialization] = field(default_factory=dict)
    recursive: dict[Any, bool] = field(default_factory=dict)
    # every ox.ConstantArray a function of the kernel reads, by id: its first declaration
    constants: dict[int, FixedArray] = field(default_factory=dict)

    def lowered(self) -> list[Specialization]:
        return [s for s in self.specs.values() if s.done]


def table(ctx: Any) -> DeviceFunctions:
    """The compile's DeviceFunctions, made on first use."""
    found = getattr(ctx, "device_functions", None)
    if found is None:
        found = DeviceFunctions()
        ctx.device_functions = found
    return found


def specializations(ctx: Any) -> list[Specialization]:
    """The device functions a finished kernel lowering produced (none for most kernels)."""
    found = getattr(ctx, "device_functions", None)
    return found.lowered() if found is not None else []


# -- which @ox.funcs are recursive --------------------------------------------------------


def is_recursive(ctx: Any, fn: Any) -> bool:
    """Whether `fn` can reach itself through the @ox.funcs its body names in calls."""
    memo = table(ctx).recursive
    if fn not in memo:
        memo[fn] = fn in _reachable(fn)
    return memo[fn]


def _reachable(start: Any) -> set[Any]:
    seen: set[Any] = set()
    stack = list(_callees(start))
    while stack:
        fn = stack.pop()
        if fn in seen:
            continue
        seen.add(fn)
        stack.extend(_callees(fn))
    return seen


def _callees(fn: Any) -> list[Any]:
    """The @ox.funcs `fn`'s body calls by a free name or a module attribute (`f(x)`,
    `mod.f(x)`); a function reached otherwise (a Const argument) is found when the inlined
    copies meet it again (`FunctionLowering.call_stack`)."""
    from oxide.kernel_types import DeviceFunction

    out = []
    local = {a.arg for a in fn.source.tree.args.args}
    for node in ast.walk(fn.source.tree):
        if not isinstance(node, ast.Call):
            continue
        obj = _resolve(fn, node.func, local)
        if isinstance(obj, DeviceFunction):
            out.append(obj)
    return out


def _resolve(fn: Any, node: ast.expr, local: set[str]) -> Any:
    if isinstance(node, ast.Name):
        if node.id in local:
            return None
        found, obj = fn.scope.lookup(node.id)
        return obj if found else None
    if isinstance(node, ast.Attribute):
        base = _resolve(fn, node.value, local)
        return getattr(base, node.attr, None) if base is not None else None
    return None


# -- calls ------------------------------------------------------------------------------


def call(lowering: Any, fn: Any, node: ast.Call) -> Any:
    """Lower `fn(args)` as an `oxide.call` of `fn`'s specialization for these argument
    types (lowering it first if this is its first call)."""
    params = fn.source.tree.args.args
    values, types = [], []
    for p, a in zip(params, node.args, strict=True):
        v = lowering.expr(a)
        if p.annotation is not None:
            v = lowering.bind_annotated(fn, p, v, a)
        ssa, spec = _argument(lowering, fn, p.arg, v, a)
        values.append(ssa)
        types.append(spec)
    tab = table(lowering.ctx)
    key = (fn, tuple(types))
    spec = tab.specs.get(key)
    if spec is None:
        spec = _lower(lowering, tab, fn, tuple(types), node)
    results = _result_types(lowering, spec, node)
    thread = lowering.b.value(ops.RegisterOp("tid.x", ir_type(T.i32)))
    op = lowering.b.emit(ops.CallOp(spec.symbol, thread, values,
                                    [ir_type(dt) for dt in _flatten(results)]))
    if results is None:
        return Static(None)
    return _regroup(results, iter(op.results))


def _argument(lowering: Any, fn: Any, name: str, v: Any, node: ast.AST
              ) -> tuple[SSAValue, Any]:
    """The SSA value and parameter type of one argument of a recursive call."""
    what = f"`{fn.__name__}` is recursive, so it is a real function call: its parameter `{name}`"
    if isinstance(v, Lit):
        dt = literal_dtype(v.value)
        return lowering.materialize(v, dt, node), dt
    if isinstance(v, Witness):
        s = lowering.scalar(v, node)  # a plain i64 coordinate in the callee
        return s.ssa, s.dtype
    if isinstance(v, Val):
        return v.ssa, v.dtype
    if isinstance(v, Array):
        if v.type.access not in _PASSABLE:
            raise lowering.error(
                UnsupportedFeatureError, node,
                f"{what} cannot take the DisjointSlice `{v.name}`: its writes are proved "
                "at the kernel's ThreadIndex, which a call does not carry",
                hint=f"return the value from `{fn.__name__}` and store it in the kernel, or "
                     "pass a RawSlice and write inside `with ox.unsafe():`")
        return v.ssa, v.type
    if isinstance(v, FixedArray):
        raise lowering.error(
            UnsupportedFeatureError, node,
            f"{what} takes numbers and kernel array parameters, not {describe(v)}",
            hint="pass a Slice, AtomicSlice or RawSlice parameter of the kernel, or read the "
                 "values you need before the call")
    if isinstance(v, (Tup, SlotTuple)):
        raise lowering.error(UnsupportedFeatureError, node,
                             f"{what} takes numbers and arrays, not a tuple",
                             hint="pass the tuple's items as separate arguments")
    raise lowering.error(UnsupportedFeatureError, node,
                         f"{what} takes numbers and arrays, not {describe(v)}",
                         hint="only run-time values cross a call; use a non-recursive "
                              "@ox.func (inlined) for static arguments")


def _result_types(lowering: Any, spec: Specialization, node: ast.Call) -> Any:
    """The return type of `spec`: None (nothing), a DType, or a tuple of them (nested),
    known once its lowering has reached a `return` (or from `-> dtype`)."""
    target = spec.return_target
    if target.slot is not None:
        return _slot_types(target.slot)
    if target.returned and target.returned[0][0]:
        return None  # `return` without a value
    if spec.done:
        return None  # never returns a value (and never falls off the end with one)
    raise lowering.error(
        KernelTypeError, node,
        f"`{spec.fn.__name__}` calls itself before any `return` gives its return type",
        label="the type of this call is not known yet",
        hint=f"declare it (`def {spec.fn.__name__}(...) -> i32:`), or return the base case "
             "first (`if n <= 1: return 1`)")


def _slot_types(slot: Any) -> Any:
    if isinstance(slot, Slot):
        return slot.dtype
    items = []
    for s in slot.items:
        if isinstance(s, (Slot, SlotTuple)):
            items.append(_slot_types(s))
        else:
            raise UnsupportedFeatureError("a recursive @ox.func returns numbers or tuples of "
                                          f"numbers, not {describe(s)}")
    return tuple(items)


def _flatten(types: Any) -> list[T.DType]:
    if types is None:
        return []
    if isinstance(types, T.DType):
        return [types]
    return [dt for t in types for dt in _flatten(t)]


def _regroup(types: Any, results: Any) -> Any:
    if isinstance(types, T.DType):
        return Val(next(results), types)
    return Tup(tuple(_regroup(t, results) for t in types))


# -- lowering one specialization ---------------------------------------------------------


def _lower(caller: Any, tab: DeviceFunctions, fn: Any, params: tuple[Any, ...],
           node: ast.Call) -> Specialization:
    """Lower `fn`'s body for `params` into a new `oxide.func` (registered first, so the
    calls to itself inside find it)."""
    symbol = f"{SYMBOL_PREFIX}{fn.__name__}_{len(tab.specs)}"  # one kernel per module
    arg_types: list[Attribute] = [array_ir_type(p) if isinstance(p, T.ArrayType) else ir_type(p)
                                  for p in params]
    b = IRBuilder(symbol, arg_types)
    b.sites = caller.b.sites  # one site table per kernel: the error record indexes it
    source = fn.source
    # where a call deeper than the stack allows is reported (codegen's depth guard)
    site = b.site("assert", source.span(source.tree),
                  f"`{fn.__name__}` recursed deeper than the stack allows; on the GPU, "
                  "@ox.kernel(stack_size=...) makes room for more")
    b.func.attributes[DEPTH_SITE] = IntAttr(site)
    # the caller's lowering class (frontend/lower.py's FunctionLowering), not imported:
    # lower.py imports the call lowering, which imports this module
    lowering = type(caller)(b, source, fn.scope, caller.ctx, {}, caller.typevars,
                            None, (fn,))
    target = ReturnTarget(b.new_block(), lowering.declared_return_slot(fn))
    lowering.return_target = target
    spec = Specialization(fn, symbol, params, b.func, target)
    tab.specs[(fn, params)] = spec
    ctx = caller.ctx
    ctx.functions.add(fn)
    if not isinstance(ctx.constant_values, ConstantViews):
        ctx.constant_values = ConstantViews(caller.b, tab.constants, ctx.constant_values)
    outer_constants = ctx.constant_values
    ctx.constant_values = ConstantViews(b, tab.constants)
    try:
        _lower_body(lowering, b, fn, params, target)
    finally:
        ctx.constant_values = outer_constants
    _refuse_collectives(fn, b, caller, node)
    spec.done = True
    return spec


def _lower_body(lowering: Any, b: IRBuilder, fn: Any, params: tuple[Any, ...],
                target: Any) -> None:
    source = fn.source
    for p, arg, t in zip(source.tree.args.args, b.args, params, strict=True):
        if isinstance(t, T.ArrayType):
            lowering.env[p.arg] = Array(arg, t, p.arg)
        else:
            lowering.assign_name(p.arg, Val(arg, t), source.tree)  # parameters are mutable
    lowering.lower_body(source.tree.body)
    returns_value = target.slot is not None or (
        bool(target.returned) and not target.returned[0][0])
    if returns_value and not b.terminated and b.reachable(b.block):
        raise lowering.error(KernelTypeError, source.tree.body[-1],
                             f"`{fn.__name__}` returns a value, but can reach its end without "
                             "one", label="control can fall off the end after this",
                             hint="return a value on every path")
    b.br(target.block)
    b.set_block(target.block)
    values: list[SSAValue] = []
    if target.slot is not None:
        values = _read_slots(b, target.slot)
    b.emit(ops.FuncReturnOp(values))
    _finish(b, [v.type for v in values])


class ConstantViews(dict):  # type: ignore[type-arg]
    """`KernelContext.constant_values` for one function's builder, once a kernel has device
    functions. parallel_calls.py caches each ox.ConstantArray's frontend value there, but an
    SSA value belongs to one function: a ConstantArray that another function of the kernel
    declared already gets a declaration in this builder with the same symbol (one global,
    one entry in `ctx.constants`)."""

    def __init__(self, b: IRBuilder, registry: dict[int, FixedArray],
                 initial: dict[int, Any] | None = None) -> None:
        super().__init__()
        self.b = b
        self.registry = registry
        for key, arr in (initial or {}).items():
            self[key] = arr

    def __setitem__(self, key: int, arr: Any) -> None:
        super().__setitem__(key, arr)
        self.registry.setdefault(key, arr)

    def get(self, key: int, default: Any = None) -> Any:
        if key in self:
            return self[key]
        first = self.registry.get(key)
        if first is None:
            return default
        owner = first.ssa.owner
        assert isinstance(owner, ops.FixedArrayOp) and owner.sym is not None
        ssa = self.b.alloc(ops.FixedArrayOp(first.ssa.type, owner.sym.data))
        arr = FixedArray(ssa, first.dtype, first.shape, first.space, first.name)
        self[key] = arr
        return arr


def _read_slots(b: IRBuilder, slot: Any) -> list[SSAValue]:
    if isinstance(slot, Slot):
        return [b.value(ops.SlotReadOp(slot.ssa))]
    out: list[SSAValue] = []
    for s in slot.items:
        out += _read_slots(b, s)
    return out


def _finish(b: IRBuilder, results: list[Attribute]) -> None:
    """`IRBuilder.finish` for a function that ends in `oxide.func_return`: allocas and the
    jump into the body in the entry block, dead blocks gone, the result types recorded."""
    from xdsl.dialects.builtin import FunctionType

    first_body = b.func.body.blocks[1]
    for op in b._entry_allocs:
        b.entry.add_op(op)
    b.entry.add_op(ops.BranchOp(first_body))
    _remove_unreachable(b.func)
    args = list(b.func.function_type.inputs.data)
    b.func.properties["function_type"] = FunctionType.from_lists(args, results)


_REFUSED = {
    "block": ("ox.sync_threads() (or a block collective)",
              "every thread of the block must reach each barrier together"),
    "warp": ("ox.sync_warp()", "every lane of the warp must reach it together"),
    "grid": ("ox.grid.sync()", "every thread of the launch must reach it together"),
}


def _refuse_collectives(fn: Any, b: IRBuilder, caller: Any, node: ast.Call) -> None:
    """UnsupportedFeatureError for what a recursive function cannot contain: barriers, warp
    collectives, shared memory and the warp-wide tensor-core primitives. Threads recurse to
    different depths, so no schedule brings a block or warp to such a point in step."""
    # shared arrays are declared in the entry block: report a barrier (a block collective
    # has both) or a collective first
    found = sorted(b.func.walk(), key=lambda op: (not isinstance(op, ops.BarrierOp))
                   + isinstance(op, ops.FixedArrayOp))
    for op in found:
        what = None
        if isinstance(op, ops.BarrierOp) and op.kind.data in _REFUSED:
            what, why = _REFUSED[op.kind.data]
        elif isinstance(op, ops.WarpOp) and op.kind.data != "activemask":
            what, why = (f"a warp collective (ox.warp.{op.kind.data})",
                         "every lane of the warp must execute it together")
        elif isinstance(op, ops.HopperOp):
            what, why = (f"`{op.kind.data}`", "tensor-core, mbarrier and cluster primitives "
                         "work on shared memory or the whole warp")
        elif isinstance(op, ops.FixedArrayOp) and op.result.type.space.data == "shared":
            what, why = ("shared memory", "a shared array belongs to the whole block, not "
                         "to one call")
        if what is None:
            continue
        span = _span(b, op)
        raise UnsupportedFeatureError(
            f"`{fn.__name__}` is recursive, so it cannot use {what}: {why}", span
            or caller.src.span(node),
            hint="keep barriers, warp collectives and shared memory in the kernel (or in "
                 "a non-recursive @ox.func) and make the recursive part a function of "
                 "numbers and arrays; or rewrite the recursion as a loop")


def _span(b: IRBuilder, op: Any) -> Span | None:
    """Where `op` comes from, in the user's code (not oxide's @ox.func library, such as the
    block collectives); for a declaration (emitted in the entry block, without an origin),
    its first use in the source."""
    chain = b.origins.get(op)
    if not chain:
        uses = [_user_span(b.origins.get(u.operation, ())) for r in op.results for u in r.uses]
        spans = sorted((s for s in uses if s is not None), key=lambda s: (s.line, s.col))
        return spans[0] if spans else None
    return _user_span(chain)


def _user_span(chain: tuple[Span, ...]) -> Span | None:
    for span in reversed(chain):
        if "/oxide/lang/" not in span.file.replace("\\", "/"):
            return span
    return chain[-1] if chain else None
