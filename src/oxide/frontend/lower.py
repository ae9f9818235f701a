"""Statements: Python AST of a kernel (and the @ox.funcs it calls) into oxide IR.

`FunctionLowering` walks one function body. Kernels are lowered at the top; a
call to an @ox.func inlines a new `FunctionLowering` over the same builder, its
`return`s branching to a continuation block.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from xdsl.ir import Block

from oxide import types as T
from oxide.errors import (
    CompileError,
    KernelSyntaxError,
    KernelTypeError,
    SafetyError,
    Span,
    UnsupportedFeatureError,
)
from oxide.frontend.builder import IRBuilder
from oxide.frontend.calls import CallsMixin, is_function
from oxide.frontend.definite import (
    bound_once_by_assign,
    copy_assigned,
    copy_sources,
    local_names,
    meet_paths,
)
from oxide.frontend.exprs import ExprMixin
from oxide.frontend.hint_names import WITNESS_NAMES, free_name
from oxide.frontend.loops import LoopsMixin, LoopTargets
from oxide.frontend.promote import literal_fits
from oxide.frontend.return_target import ReturnTarget
from oxide.frontend.scope import Scope
from oxide.frontend.source import Source
from oxide.frontend.subscripts import SubscriptMixin
from oxide.frontend.values import (
    Array,
    ArrayVar,
    BlockPosition,
    FixedArray,
    Lit,
    Slot,
    SlotTuple,
    Static,
    Tup,
    Val,
    Witness,
    article,
    describe,
    literal_text,
    unpack_hint,
)
from oxide.ir import ops
from oxide.ir.types import ir_type
from oxide.lang.grid import GridGroup, grid

_AUG_SYMBOLS = {ast.Add: "+=", ast.Sub: "-=", ast.Mult: "*=", ast.Div: "/=", ast.FloorDiv: "//=",
                ast.Mod: "%=", ast.Pow: "**=", ast.BitAnd: "&=", ast.BitOr: "|=",
                ast.BitXor: "^=", ast.LShift: "<<=", ast.RShift: ">>="}

_UNSUPPORTED_STMTS: dict[type, tuple[str, str]] = {
    ast.ClassDef: ("classes cannot be defined in kernels", "define the class outside the kernel"),
    ast.FunctionDef: ("nested functions are not supported in kernels",
                      "define it at module level with @ox.func"),
    ast.AsyncFunctionDef: ("async functions are not supported in kernels", ""),
    ast.Try: ("try/except is not supported in kernels",
              "kernels cannot raise; check conditions with `if` or `assert`"),
    ast.Raise: ("raise is not supported in kernels", "use `assert cond, \"message\"`"),
    ast.Global: ("`global` is not supported in kernels",
                 "pass the value as a parameter, or write results into an array"),
    ast.Nonlocal: ("`nonlocal` is not supported in kernels", "pass the value as a parameter"),
    ast.Delete: ("`del` is not supported in kernels", ""),
    ast.Import: ("imports are not supported inside kernels", "import at module level"),
    ast.ImportFrom: ("imports are not supported inside kernels", "import at module level"),
    ast.AsyncFor: ("async for is not supported in kernels", ""),
    ast.AsyncWith: ("async with is not supported in kernels", ""),
    ast.Match: ("match statements are not supported in kernels", "use if/elif/else"),
}


@dataclass(frozen=True)
class _Chain:
    """An unevaluated `and`/`or`/`not` condition, lowered to branches by `branch_on`."""

    node: ast.expr


class FunctionLowering(ExprMixin, SubscriptMixin, CallsMixin, LoopsMixin):
    """Lowers one Python function body into the shared builder."""

    def __init__(self, b: IRBuilder, source: Source, scope: Scope, ctx: Any,
                 env: dict[str, Any], typevars: dict[Any, T.DType],
                 return_target: ReturnTarget | None = None,
                 call_stack: tuple[Any, ...] = ()) -> None:
        self.b = b
        self.src = source
        self.scope = scope
        self.ctx = ctx  # the KernelContext: options and compile-wide state
        self.env = env
        self.typevars = typevars
        self.loops: list[LoopTargets] = []
        self.return_target = return_target
        self.call_stack = call_stack
        self.unsafe_depth = 0
        # the spans of the calls that inlined this function, outermost first
        self.call_spans: tuple[Span, ...] = ()
        # Definite assignment (frontend/definite.py): the locals every path to the
        # current point has assigned; None where no path reaches it.
        self.local_names = local_names(source.tree)
        self.constant_names = bound_once_by_assign(source.tree)
        # loop variables of unrolled loops (unroll_range): their typed constant per copy
        self.unrolled: dict[str, Val] = {}
        self.assigned: set[str] | None = set()
        # Array names rebound in the body (ArrayVar): what each name may copy, the
        # function's parameters, and their arrays before the body runs
        self.copy_sources = copy_sources(source.tree)
        args = source.tree.args
        self.arg_names = tuple(a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs))
        self.initial_arrays: dict[str, Array] | None = None
        self.array_reuse_off = 0  # > 0 inside loops with break/continue

    # -- diagnostics -----------------------------------------------------------------

    def error(self, cls: type[CompileError], node: ast.AST, message: str, label: str = "",
              hint: str = "") -> CompileError:
        return cls(message, self.src.span(node), label, hint)

    def text(self, node: ast.AST) -> str:
        return self.src.segment(node) or ast.dump(node)

    # -- statements ------------------------------------------------------------------

    def lower_body(self, body: list[ast.stmt]) -> None:
        if self.initial_arrays is None:  # the function's own body: it starts here
            self.bind_rebound_parameters()
        for stmt in body:
            if self.b.terminated:
                # Code after return/break/continue: still checked, never reached.
                self.b.set_block(self.b.new_block())
            self.lower_stmt(stmt)

    def lower_stmt(self, node: ast.stmt) -> None:
        method = getattr(self, f"stmt_{type(node).__name__}", None)
        if method is None:
            message, hint = _UNSUPPORTED_STMTS.get(
                type(node), (f"`{type(node).__name__}` statements are not supported in kernels", ""))
            raise self.error(UnsupportedFeatureError, node, message, hint=hint)
        outer = self.b.where
        self.b.where = (*self.call_spans, self.src.span(node))
        loop = isinstance(node, (ast.For, ast.While))
        jumps = loop and any(isinstance(n, (ast.Break, ast.Continue)) for n in ast.walk(node))
        if loop:
            # an array read before the loop may be stale in its second iteration, and a
            # `continue` joins paths the dominance test cannot see yet in unrolled copies
            self.forget_array_reads()
            self.array_reuse_off += jumps
        method(node)
        if loop:
            self.forget_array_reads()
            self.array_reuse_off -= jumps
        self.b.where = outer

    def stmt_Pass(self, node: ast.Pass) -> None:
        pass

    def stmt_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring or a bare string: no effect
        value = self.expr(node.value)
        if isinstance(value, Static) and is_function(value.obj):
            # `ox.sync_threads` without `()` would silently do nothing
            text = self.text(node.value)
            raise self.error(KernelSyntaxError, node.value,
                             f"`{text}` is not called; write `{text}()`",
                             label="a function named alone does nothing",
                             hint="add the parentheses (and the arguments it takes)")

    def stmt_Assign(self, node: ast.Assign) -> None:
        value = self.expr(node.value)
        target = node.targets[0]
        if (isinstance(value, Lit) and isinstance(target, ast.Name)
                and target.id in self.constant_names and target.id not in self.env
                and not (isinstance(value.value, int) and not -(1 << 63) <= value.value < 1 << 64)):
            # bound once, to a constant: the name stays the weak literal it names (an
            # integer no kernel type holds is refused here, at its binding, as before)
            if self.assigned is not None:
                self.assigned.add(target.id)
            self.env[target.id] = value
            return
        if (isinstance(value, Val) and isinstance(target, ast.Name) and not self.loops
                and target.id in self.constant_names and target.id not in self.env):
            # bound once, outside any loop: the name is the value itself (definite
            # assignment makes the binding dominate every read), so guards see through
            # it: `n = len(out)` then `if i < n:` proves `out[i]` in bounds
            if self.assigned is not None:
                self.assigned.add(target.id)
            self.env[target.id] = value
            return
        for target in node.targets:
            self.assign(target, value, node.value)

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.error(KernelSyntaxError, node.target,
                             "only plain names can carry a type annotation")
        dt = self.resolve_dtype(node.annotation)
        if node.value is None:
            raise self.error(KernelSyntaxError, node, "a declared local needs a value",
                             hint=f"write `{node.target.id}: {dt.name} = 0`")
        value = self.convert(self.expr(node.value), dt, node.value)
        self.assign(node.target, value, node.value, declared=dt)

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            current = self.load_name(node.target.id, node.target)
            result = self.binop(node.op, current, self.expr(node.value), node)
            self.assign(node.target, self.bitwise_in_place(node.op, current, result), node)
        elif isinstance(node.target, ast.Subscript):
            container = self.expr(node.target.value)
            if isinstance(container, Array) and container.type.access == "atomic":
                raise self.atomic_update_error(node, container)
            index = self.expr(node.target.slice)
            current = self.subscript_load(container, index, node.target)
            result = self.binop(node.op, current, self.expr(node.value), node)
            result = self.bitwise_in_place(node.op, current, result)
            self.subscript_store(container, index, result, node.target, node.target.value)
        else:
            raise self.error(KernelSyntaxError, node.target, "cannot assign to this expression")

    def bitwise_in_place(self, op: ast.operator, current: Any, result: Any) -> Any:
        """`x &= m` (and `|=`, `^=`) with `x: i32` and `m: u32`: the result, unsigned by the
        mixed-signedness rule, goes back in `x`'s type, as C's compound assignment converts
        it. Nothing changes: the bits are the same in either type."""
        if (isinstance(op, (ast.BitAnd, ast.BitOr, ast.BitXor)) and isinstance(current, Val)
                and isinstance(result, Val) and current.dtype != result.dtype
                and current.dtype.is_int and result.dtype.is_int
                and current.dtype.bits == result.dtype.bits):
            return Val(self.b.cast(result.ssa, current.dtype), current.dtype, result.note)
        return result

    def atomic_update_error(self, node: ast.AugAssign, arr: Array) -> CompileError:
        """`out[i] += v` on an AtomicSlice: name the atomic call that does it."""
        names = {ast.Add: "add", ast.Sub: "sub", ast.BitAnd: "and_", ast.BitOr: "or_",
                 ast.BitXor: "xor"}
        fn = names.get(type(node.op))
        index = self.text(node.target.slice)  # type: ignore[attr-defined]
        value = self.text(node.value)
        hint = (f"write `ox.atomic.{fn}({arr.name}, {index}, {value})`" if fn else
                f"no atomic does this update; use `ox.atomic.cas({arr.name}, {index}, old, new)`"
                " in a loop")
        return self.error(SafetyError, node,
                          f"`{arr.name}` is an AtomicSlice: `{self.text(node.target)} "
                          f"{_AUG_SYMBOLS.get(type(node.op), '?=')} ...` would race", hint=hint)

    def branch_on(self, test: ast.expr, value: Any, if_true: Block, if_false: Block) -> None:
        """Branch on a condition; `and`/`or`/`not` become branches, so each comparison
        is a branch of its own and the guard analysis sees it."""
        if not isinstance(value, _Chain):
            if isinstance(value, Lit):
                self.b.br(if_true if value.value else if_false)
                return
            self.b.cond_br(self.truth(value, test), if_true, if_false)
            self.b.origins[self.b.block.last_op] = (*self.call_spans, self.src.span(test))
            return
        node = value.node
        if isinstance(node, ast.Compare):  # a < b < c: branch on each link, b evaluated once
            left = self.expr(node.left)
            for i, (op, right_node) in enumerate(zip(node.ops, node.comparators, strict=True)):
                right = self.expr(right_node)
                link = self.compare(op, left, right, node)
                last = i == len(node.ops) - 1
                nxt = if_true if last else self.b.new_block()
                self.branch_on(node, link, nxt, if_false)
                if not last:
                    self.b.set_block(nxt)
                left = right
            return
        if isinstance(node, ast.UnaryOp):  # not (a and b)
            self.branch_on(node.operand, self.condition(node.operand), if_false, if_true)
            return
        is_and = isinstance(node.op, ast.And)
        for i, operand in enumerate(node.values):
            last = i == len(node.values) - 1
            nxt = if_true if last else self.b.new_block()
            v = self.condition(operand)
            if is_and:
                self.branch_on(operand, v, nxt, if_false)
            else:
                self.branch_on(operand, v, if_true, nxt if not last else if_false)
            if not last:
                self.b.set_block(nxt)

    def condition(self, test: ast.expr) -> Any:
        """Evaluate a condition; `and`/`or`/`not` chains and chained comparisons
        (`0 <= i < len(out)`) stay unevaluated (`_Chain`) so that `branch_on` lowers them
        to branches, one comparison each, which the guard analysis can see."""
        if isinstance(test, ast.BoolOp) or (isinstance(test, ast.UnaryOp)
                                            and isinstance(test.op, ast.Not)
                                            and isinstance(test.operand, (ast.BoolOp,
                                                                          ast.Compare))):
            return _Chain(test)
        if isinstance(test, ast.Compare) and len(test.ops) > 1:
            return _Chain(test)
        return self.expr(test)

    def stmt_If(self, node: ast.If) -> None:
        cond = self.condition(node.test)
        if isinstance(cond, Lit) or (isinstance(cond, Static)):
            # A compile-time condition (constants, Const parameters): lower one branch.
            taken = bool(cond.value if isinstance(cond, Lit) else cond.obj)
            self.lower_body(node.body if taken else node.orelse)
            return
        then_block, else_block, join = self.b.new_block(), self.b.new_block(), self.b.new_block()
        self.branch_on(node.test, cond, then_block, else_block if node.orelse else join)
        before = copy_assigned(self.assigned)
        self.b.set_block(then_block)
        self.lower_body(node.body)
        self.b.br(join)
        then_out, self.assigned = self.assigned, copy_assigned(before)
        if node.orelse:
            self.b.set_block(else_block)
            self.lower_body(node.orelse)
            self.b.br(join)
        self.assigned = meet_paths(then_out, self.assigned)
        self.b.set_block(join)

    def leave_path(self, into: list[set[str]] | None = None) -> None:
        """The current path jumps away (`break`, `continue`, `return`): what it assigned
        goes to where it lands (`into`), and the code after it is unreachable."""
        if into is not None and self.assigned is not None:
            into.append(self.assigned)
        self.assigned = None

    def load_name(self, name: str, node: ast.AST) -> Any:
        """A name's value, once definite assignment allows the read (frontend/definite.py)."""
        self.check_assigned(name, node)
        value = super().load_name(name, node)
        if isinstance(value, ArrayVar):
            return self.read_array_var(value)
        return value

    def check_assigned(self, name: str, node: ast.AST) -> None:
        """Refuse a read of `name` that some path reaches before assigning it."""
        if (self.assigned is not None and name in self.local_names
                and name not in self.assigned):
            if name not in self.env:  # no assignment lowered yet: Python's UnboundLocalError
                raise self.error(
                    KernelSyntaxError, node, f"`{name}` is not defined yet here",
                    label=f"the kernel assigns `{name}` only further down",
                    hint=f"assign `{name}` before this read")
            raise self.error(
                KernelSyntaxError, node,
                f"`{name}` may be read before it is assigned",
                label=f"some path to here does not assign `{name}`",
                hint=f"assign `{name}` before the `if` or loop that sets it (a loop over a "
                     f"run-time range, or a `while`, may run zero times), or on every path")

    def stmt_Return(self, node: ast.Return) -> None:
        target = self.return_target
        if target is None:  # the kernel itself
            if node.value is not None:
                value = self.expr(node.value)
                if not (isinstance(value, Static) and value.obj is None):
                    raise self.error(KernelTypeError, node.value, "kernels cannot return a value",
                                     hint="write results into a DisjointSlice parameter")
            self.b.emit(ops.ReturnOp(early=True))
            self.leave_path()
            return
        value = self.expr(node.value) if node.value is not None else Static(None)
        self.store_return(target, value, node)
        self.b.br(target.block)
        self.leave_path()

    def stmt_Assert(self, node: ast.Assert) -> None:
        cond = self.expr(node.test)
        message = ""
        if node.msg is not None:
            if not (isinstance(node.msg, ast.Constant) and isinstance(node.msg.value, str)):
                raise self.error(KernelTypeError, node.msg,
                                 "an assert message must be a string literal")
            message = node.msg.value
        if isinstance(cond, Lit):
            if not cond.value:
                raise self.error(KernelTypeError, node.test, "this assertion is always false")
            return
        site = self.b.site("assert", self.src.span(node.test), message or self.text(node.test))
        self.b.emit(ops.AssertOp(self.truth(cond, node.test), site))

    def stmt_With(self, node: ast.With) -> None:
        if len(node.items) != 1:
            raise self.error(UnsupportedFeatureError, node,
                             "only `with ox.unsafe():` is supported in kernels")
        item = node.items[0]
        ctx = item.context_expr
        callee = self.expr(ctx.func) if isinstance(ctx, ast.Call) else None
        from oxide.lang import unsafe

        if (not (isinstance(callee, Static) and callee.obj is unsafe) or item.optional_vars
                or ctx.args or ctx.keywords):  # type: ignore[union-attr]
            raise self.error(UnsupportedFeatureError, ctx,
                             "only `with ox.unsafe():` is supported in kernels",
                             hint="context managers cannot run on the GPU")
        self.unsafe_depth += 1
        self.lower_body(node.body)
        self.unsafe_depth -= 1

    # -- grid-wide sync (lang/grid.py) -------------------------------------------------

    def intr_grid_sync(self, node: ast.Call) -> Static:
        """`ox.grid.sync()`: a barrier over every thread of the launch (an `oxide.barrier`
        of kind "grid"; codegen emits a block barrier around a grid-wide one on a hidden
        counter, passes/uniformity.py checks every thread of the launch reaches it)."""
        self.args_exact(node, 0, "ox.grid.sync()")
        op = self.b.emit(ops.BarrierOp("grid"))
        self.b.origins[op] = (*self.call_spans, self.src.span(node))
        self.ctx.uses_barriers = True
        return Static(None)

    def intr_grid_this_grid(self, node: ast.Call) -> Static:
        """numba's `cuda.cg.this_grid()`: the group whose `.sync()` is `ox.grid.sync()`."""
        self.args_exact(node, 0, "ox.grid.this_grid()")
        return Static(grid)

    def intr_grid(self, node: ast.Call) -> Any:
        """`ox.grid(2)`: numba's `cuda.grid(n)` spelled with oxide's namespace."""
        raise self.error(
            KernelSyntaxError, node, f"`{self.text(node)}` is not a function: `ox.grid` is the "
            "launch's grid as a group (`ox.grid.sync()`)",
            hint="numba's `cuda.grid(1)` / `cuda.grid(2)` is `thread.index_1d()` / "
                 "`thread.index_2d()` (`.row` is y, `.col` is x)")

    # -- assignment ------------------------------------------------------------------

    def assign(self, target: ast.expr, value: Any, value_node: ast.AST,
               declared: T.DType | None = None) -> None:
        if isinstance(target, ast.Name):
            self.assign_name(target.id, value, target, declared)
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = self.unpack_targets(target, value, value_node)
            for t, v in zip(target.elts, items, strict=True):
                self.assign(t.value if isinstance(t, ast.Starred) else t, v, value_node)
        elif isinstance(target, ast.Subscript):
            container = self.expr(target.value)
            index = self.expr(target.slice)
            self.subscript_store(container, index, value, target, target.value)
        elif isinstance(target, ast.Attribute):
            raise self.error(KernelSyntaxError, target,
                             f"cannot assign to the attribute `{self.text(target)}`",
                             hint="kernels assign to local names and array elements only")
        else:
            raise self.error(KernelSyntaxError, target, "cannot assign to this expression")

    def unpack(self, value: Any, n: int, node: ast.AST) -> tuple[Any, ...]:
        if isinstance(value, Tup):
            items = value.items
        elif isinstance(value, SlotTuple):
            items = self.read_slot_tuple(value).items
        else:
            raise self.error(KernelTypeError, node, f"cannot unpack {describe(value)}",
                             hint=unpack_hint(value))
        if len(items) != n:
            raise self.error(KernelTypeError, node,
                             f"cannot unpack {len(items)} values into {n} names")
        return items

    def assign_name(self, name: str, value: Any, node: ast.AST,
                    declared: T.DType | None = None) -> None:
        if self.assigned is not None:
            self.assigned.add(name)
        current = self.env.get(name)
        if isinstance(current, Witness):
            raise self.error(
                SafetyError, node, f"`{name}` holds a ThreadIndex and cannot be rebound",
                label="a witness variable is bound once",
                hint=f"use another name for the new value; `{name}` must keep naming this "
                     "thread's unique index")
        if isinstance(current, ArrayVar):
            self.write_array_var(current, value, node)
            return
        if (current is None and isinstance(value, Array) and name in self.copy_sources
                and name not in self.constant_names):
            # an array name assigned more than once: a slot saying which array it is
            var = self.new_array_var(name, value)
            self.env[name] = var
            self.write_array_var(var, value, node)
            return
        if isinstance(current, FixedArray):
            raise self.error(KernelTypeError, node,
                             f"`{name}` is {describe(current)} and cannot be rebound",
                             hint="only array parameters (and arrays an @ox.func receives) of "
                                  "one type can be rebound; shared, local and constant arrays "
                                  "are bound once: use another name")
        if isinstance(current, Array):
            raise self.error(KernelTypeError, node, f"`{name}` is an array and cannot be rebound",
                             label="bound once here (a loop the compiler unrolls repeats it)",
                             hint=f"assign `{name}` on every path instead (`if c: {name} = a` / "
                                  f"`else: {name} = b`), or choose in one expression: "
                                  f"`{name} = a if cond else b`")
        if isinstance(value, (Witness, Array, FixedArray, Static)):
            if isinstance(current, Slot):
                if isinstance(value, Witness):
                    fresh_name = free_name(self.src.tree, WITNESS_NAMES[value.rank])
                    raise self.error(
                        SafetyError, node,
                        f"`{name}` is a plain {current.dtype.name} variable; storing a "
                        "ThreadIndex in it drops the uniqueness guarantee",
                        hint=f"bind the ThreadIndex to a name of its own: `{fresh_name} = "
                             f"thread.index_{value.rank}d()`")
                raise self.error(KernelTypeError, node,
                                 f"`{name}` is {current.dtype.name}; cannot rebind it to "
                                 f"{describe(value)}")
            if isinstance(value, Static) and not isinstance(value.obj, (T.DType, GridGroup)):
                raise self.error(KernelTypeError, node,
                                 f"cannot store {describe(value)} in a variable")
            self.env[name] = value
            return
        if isinstance(value, BlockPosition) and (current is None or current == value):
            self.env[name] = value  # the thread's registers: the same at every read
            return
        if isinstance(value, (Tup, SlotTuple)):
            if isinstance(value, SlotTuple):
                value = self.read_slot_tuple(value)
            if current is None:
                self.env[name] = self.new_slot_tuple(value, node)
            elif isinstance(current, SlotTuple):
                self.write_slot_tuple(current, value, node, name)
            else:
                raise self.error(KernelTypeError, node,
                                 f"`{name}` is {describe(current)}; cannot rebind it to a tuple")
            return
        if current is None or isinstance(current, Lit):
            dt = declared or self.default_dtype(value)
            slot = self.b.alloc(ops.SlotOp(ir_type(dt)))
            self.env[name] = Slot(slot, dt)
            current = self.env[name]
        if not isinstance(current, Slot):
            raise self.error(KernelTypeError, node,
                             f"`{name}` is {describe(current)}; cannot rebind it to "
                             f"{describe(value)}")
        v = self.coerce_to_slot(value, current, name, node)
        if isinstance(value, Val) and value.note and current.note is None:
            current.note = (f"`{name}` is a plain integer variable; a value derived from a "
                            "ThreadIndex loses the uniqueness guarantee")
        self.b.emit(ops.SlotWriteOp(current.ssa, v))

    # -- array names rebound in the body (values.ArrayVar) -----------------------------

    def bind_rebound_parameters(self) -> None:
        """Array parameters the body assigns (`a, b = b, a` in a loop) become ArrayVars
        before the first statement, so that reads before the rebinding select too."""
        self.initial_arrays = {n: v for n, v in self.env.items() if isinstance(v, Array)}
        for name in self.arg_names:
            value = self.env.get(name)
            if isinstance(value, Array) and name in self.copy_sources:
                var = self.new_array_var(name, value)
                self.env[name] = var
                self.write_array_var(var, value, self.src.tree)

    def new_array_var(self, name: str, first: Array) -> ArrayVar:
        """An ArrayVar for `name`: its candidates are the arrays of `first`'s type that the
        body's copies (`x = y`, `x = a if c else b`, tuple swaps) can bring into it."""
        initial = self.initial_arrays or {}
        candidates: list[Array] = []
        seen: set[str] = set()
        queue = [name]
        while queue:
            n = queue.pop(0)
            if n in seen:
                continue
            seen.add(n)
            leaf = initial.get(n) if n in initial else (
                self.env.get(n) if n not in self.copy_sources else None)
            if (isinstance(leaf, Array) and leaf.type == first.type
                    and all(c.ssa is not leaf.ssa for c in candidates)):
                candidates.append(leaf)
            queue.extend(self.copy_sources.get(n) or ())
        var = ArrayVar(self.b.alloc(ops.SlotOp(ir_type(T.i32))), first.type, (), name)
        var.candidates = tuple(candidates)
        if self.array_index(var, first.ssa, emit=False) is None:
            var.candidates = (*candidates, Array(first.ssa, first.type, first.name))
        return var

    def array_index(self, var: ArrayVar, ssa: Any, emit: bool = True) -> Any:
        """Which of `var`'s candidates the array `ssa` is: an int, an i32 SSA value (through
        `a if c else b` choices and other ArrayVars' selects), or None (not one of them)."""
        for k, c in enumerate(var.candidates):
            if c.ssa is ssa:
                return k
        owner = ssa.owner
        if not isinstance(owner, ops.ArraySelectOp):
            return None
        t = self.array_index(var, owner.if_true, emit)
        f = self.array_index(var, owner.if_false, emit)
        if t is None or f is None or not emit:
            return None if t is None or f is None else 0
        if isinstance(t, int) and t == f:
            return t
        tv, fv = (self.b.constant(x, T.i32) if isinstance(x, int) else x for x in (t, f))
        return self.b.value(ops.SelectOp(owner.cond, tv, fv))

    def write_array_var(self, var: ArrayVar, value: Any, node: ast.AST) -> None:
        if not isinstance(value, Array):
            raise self.error(KernelTypeError, node,
                             f"`{var.name}` is an array ({var.type!r}) and cannot be rebound "
                             f"to {describe(value)}", hint="use another name for the new value")
        if value.type != var.type:
            raise self.error(
                KernelTypeError, node,
                f"`{var.name}` is an array of type {var.type!r} and cannot be rebound to "
                f"{value.type!r}",
                label=f"this is {value.type!r}",
                hint="an array name is rebound only to arrays of one type (element type, "
                     "rank, access and layout): declare the parameters alike, or use "
                     "another name")
        k = self.array_index(var, value.ssa)
        if k is None:
            names = ", ".join(f"`{c.name}`" for c in var.candidates)
            raise self.error(
                KernelTypeError, node,
                f"`{var.name}` holds one of {names}; cannot rebind it to `{value.name}` here",
                hint=f"assign `{var.name}` from array names (`{var.name} = a`, "
                     f"`{var.name} = a if c else b`, `{var.name}, b = b, {var.name}`)")
        index = self.b.constant(k, T.i32) if isinstance(k, int) else k
        self.b.emit(ops.SlotWriteOp(var.slot, index))
        var.gen += 1
        known = var.candidates[k] if isinstance(k, int) else value
        var.known = (Array(known.ssa, var.type, var.name), self.b.block, var.gen)

    def read_array_var(self, var: ArrayVar) -> Array:
        """The array `var` names here: the last read or write when it still holds (same
        value, and made in a block that dominates this one), else a chain of selects on
        its slot."""
        if var.known is not None and not self.array_reuse_off:
            arr, block, gen = var.known
            if gen == var.gen and self.dominates(block, self.b.block):
                return arr
        idx = self.b.value(ops.SlotReadOp(var.slot))
        result = var.candidates[-1].ssa
        for k in range(len(var.candidates) - 2, -1, -1):
            cond = self.b.value(ops.CompareOp("eq", idx, self.b.constant(k, T.i32)))
            result = self.b.value(ops.ArraySelectOp(cond, var.candidates[k].ssa, result))
        arr = Array(result, var.type, var.name)
        var.known = (arr, self.b.block, var.gen)
        return arr

    def forget_array_reads(self) -> None:
        for v in self.env.values():
            if isinstance(v, ArrayVar):
                v.known = None

    def dominates(self, a: Block, b: Block) -> bool:
        """Whether every path from the body's start to `b` passes `a`, on the graph built
        so far (the edges still missing are back edges and jumps into blocks not yet
        entered, which do not change what dominates the current block)."""
        start = self.b.func.body.blocks[1]
        if a is b or a is start:
            return True
        seen = {id(start)}
        stack = [start]
        while stack:
            block = stack.pop()
            if block is b:
                return False
            for succ in (block.last_op.successors if block.last_op is not None else ()):
                if succ is not a and id(succ) not in seen:
                    seen.add(id(succ))
                    stack.append(succ)
        return True

    def coerce_to_slot(self, value: Any, slot: Slot, name: str, node: ast.AST) -> Any:
        """`value` as the slot's type: a variable (or a function's return value, a tuple
        item) keeps the type of its first assignment; literals adapt, typed values must
        match exactly (an implicit narrowing or widening would hide a bug)."""
        named = name.isidentifier()
        what = f"`{name}`" if named else name
        keep = (f"a name keeps one type: use another name, or convert explicitly with "
                f"`{slot.dtype.name}(...)`" if named else
                f"every assignment gives it the same type: convert explicitly with "
                f"`{slot.dtype.name}(...)`")
        if isinstance(value, Lit):
            if not literal_fits(value.value, slot.dtype):
                raise self.error(
                    KernelTypeError, node,
                    f"{what} is {slot.dtype.name}; the literal {literal_text(value.value)} "
                    "does not fit in it", hint=keep)
            return self.materialize(value, slot.dtype, node)
        if isinstance(value, Val):
            if value.dtype != slot.dtype:
                if named and value.dtype.is_float and not slot.dtype.is_float:
                    # `acc = 0` then `acc += x` with a float x: the start was the mistake
                    keep = (f"`{name}` took its type from its first value; to accumulate "
                            f"{value.dtype.name}, start it as one: `{name} = "
                            f"{value.dtype.name}(0)`{' or `' + name + ' = 0.0`' if value.dtype.name == 'f32' else ''}"
                            f" (or convert this value: `{slot.dtype.name}(...)`)")
                raise self.error(
                    KernelTypeError, node,
                    f"{what} is {slot.dtype.name}; cannot assign {article(value.dtype.name)} "
                    "to it", label=f"this is {value.dtype.name}", hint=keep)
            return value.ssa
        raise self.error(KernelTypeError, node, f"cannot assign {describe(value)} to {what}")

    def new_slot_tuple(self, value: Tup, node: ast.AST) -> SlotTuple:
        items = []
        for v in value.items:
            if isinstance(v, Tup):
                items.append(self.new_slot_tuple(v, node))
            elif isinstance(v, (Val, Lit)):
                dt = self.default_dtype(v)
                s = Slot(self.b.alloc(ops.SlotOp(ir_type(dt))), dt)
                self.b.emit(ops.SlotWriteOp(s.ssa, self.coerce_to_slot(v, s, "tuple item", node)))
                items.append(s)
            else:
                items.append(v)  # witnesses, arrays: immutable, kept as they are
        return SlotTuple(tuple(items))

    def write_slot_tuple(self, st: SlotTuple, value: Tup, node: ast.AST, name: str) -> None:
        if len(st.items) != len(value.items):
            raise self.error(KernelTypeError, node,
                             f"`{name}` holds {len(st.items)} values; cannot assign "
                             f"{len(value.items)}")
        for s, v in zip(st.items, value.items, strict=True):
            if isinstance(s, Slot):
                self.b.emit(ops.SlotWriteOp(s.ssa, self.coerce_to_slot(v, s, name, node)))
            elif isinstance(s, SlotTuple) and isinstance(v, Tup):
                self.write_slot_tuple(s, v, node, name)
            elif s is not v:
                raise self.error(KernelTypeError, node, f"cannot reassign this item of `{name}`")

    def read_slot_tuple(self, st: SlotTuple) -> Tup:
        out = []
        for s in st.items:
            if isinstance(s, Slot):
                out.append(Val(self.b.value(ops.SlotReadOp(s.ssa)), s.dtype))
            elif isinstance(s, SlotTuple):
                out.append(self.read_slot_tuple(s))
            else:
                out.append(s)
        return Tup(tuple(out))

    def store_return(self, target: ReturnTarget, value: Any, node: ast.Return) -> None:
        if isinstance(value, SlotTuple):
            value = self.read_slot_tuple(value)
        nothing = isinstance(value, Static) and value.obj is None
        if target.returned and target.returned[0][0] != nothing:
            # Whichever comes first in the source, a function that returns a value on
            # one path and nothing on another would hand its caller an unset value.
            raise self.error(KernelTypeError, node,
                             "this function returns a value on some paths and nothing on "
                             "others", label="returns nothing" if nothing else "returns a value",
                             hint="return a value on every path")
        target.returned.append((nothing, node))
        if nothing:
            if target.slot is not None:  # only a declared `-> dtype` sets it this early
                raise self.error(KernelTypeError, node,
                                 f"this function declares `-> {target.slot.dtype.name}` but "
                                 "returns nothing here", hint="return a value on every path")
            return
        if target.slot is None:
            if isinstance(value, Tup):
                target.slot = self.new_slot_tuple(value, node)
                return
            if not isinstance(value, (Val, Lit)):
                if isinstance(value, (Witness, Array)):
                    raise self.error(UnsupportedFeatureError, node,
                                     f"an @ox.func cannot return {describe(value)}")
                raise self.error(KernelTypeError, node, f"cannot return {describe(value)}")
            dt = self.default_dtype(value)
            target.slot = Slot(self.b.alloc(ops.SlotOp(ir_type(dt))), dt)
        if isinstance(target.slot, SlotTuple):
            if not isinstance(value, Tup):
                raise self.error(KernelTypeError, node, "returns disagree: a tuple and a scalar")
            self.write_slot_tuple(target.slot, value, node, "the return value")
        else:
            self.b.emit(ops.SlotWriteOp(target.slot.ssa, self.coerce_to_slot(
                value, target.slot, "the return value", node)))
