"""Expressions: names, operators, comparisons, subscripts and attributes."""

from __future__ import annotations

import ast
import builtins
import difflib
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.dialects.builtin import IntAttr

from oxide import types as T
from oxide.errors import KernelSyntaxError, KernelTypeError, UnsupportedFeatureError
from oxide.frontend.constfold import (
    MAX_SEQUENCE_ITEMS,
    FoldError,
    convert,
    evaluate,
    int_division_by_zero,
    negative_shift,
)
from oxide.frontend.hint_names import witness_name
from oxide.frontend.promote import (
    PromotionError,
    bitwise_dtype,
    literal_dtype,
    literal_fits,
    literal_with,
    promote,
    storage_error,
    storage_hint,
)
from oxide.frontend.scope import is_number_tuple, wrap_python
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
    constant_int,
    describe,
    literal_text,
    unpack_hint,
)
from oxide.ir import ops
from oxide.lang.intrinsic import RegisterGroup

_BINOPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor",
    ast.LShift: "shl", ast.RShift: "shr",
}
_PY_BINOPS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
    "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow,
    "and": operator.and_, "or": operator.or_, "xor": operator.xor, "shl": operator.lshift,
    "shr": operator.rshift,
}
_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%",
            "pow": "**", "and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>"}
_CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_PY_CMPOPS = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
              "eq": operator.eq, "ne": operator.ne}
_UNSUPPORTED_EXPRS: dict[type, tuple[str, str]] = {
    ast.ListComp: ("list comprehensions are not supported in kernels",
                   "use a `for` loop writing into an array"),
    ast.SetComp: ("set comprehensions are not supported in kernels", ""),
    ast.DictComp: ("dict comprehensions are not supported in kernels", ""),
    ast.GeneratorExp: ("generator expressions are not supported in kernels",
                       "use a `for` loop with an accumulator"),
    ast.Lambda: ("lambdas are not supported in kernels", "define an @ox.func at module level"),
    ast.List: ("lists are not supported in kernels",
               "use a tuple for a few values, or ox.local.array(dtype, n)"),
    ast.Dict: ("dicts are not supported in kernels", ""),
    ast.Set: ("sets are not supported in kernels", ""),
    ast.JoinedStr: ("f-strings are not supported in kernels",
                    "pass values to print: `print(\"x =\", x)`"),
    ast.Await: ("await is not supported in kernels", ""),
    ast.Yield: ("generators (yield) are not supported in kernels", ""),
    ast.YieldFrom: ("generators (yield) are not supported in kernels", ""),
    ast.NamedExpr: ("the walrus operator is not supported in kernels",
                    "assign on a line of its own"),
    ast.Starred: ("starred expressions are not supported in kernels", ""),
    ast.Slice: ("slices are not supported in kernels", "index one element at a time"),
}


class ExprMixin:
    """Expression lowering; mixed into FunctionLowering."""

    # -- entry -----------------------------------------------------------------------

    def expr(self, node: ast.expr) -> Any:
        method = getattr(self, f"expr_{type(node).__name__}", None)
        if method is None:
            message, hint = _UNSUPPORTED_EXPRS.get(
                type(node), (f"`{type(node).__name__}` expressions are not supported in kernels",
                             ""))
            raise self.error(UnsupportedFeatureError, node, message, hint=hint)
        return method(node)

    def expr_Constant(self, node: ast.Constant) -> Any:
        v = node.value
        if isinstance(v, (bool, int, float)):
            return Lit(v)
        if v is None:
            return Static(None)
        if isinstance(v, str):
            raise self.error(UnsupportedFeatureError, node,
                             "strings are only supported as arguments of print() and assert",
                             hint="kernels compute on numbers")
        raise self.error(UnsupportedFeatureError, node,
                         f"{type(v).__name__} constants are not supported in kernels")

    def expr_Name(self, node: ast.Name) -> Any:
        return self.load_name(node.id, node)

    def load_name(self, name: str, node: ast.AST) -> Any:
        if name in self.unrolled:  # the loop variable of an unrolled copy: a constant
            return self.unrolled[name]
        if name in self.env:
            value = self.env[name]
            if isinstance(value, Slot):
                return Val(self.b.value(ops.SlotReadOp(value.ssa)), value.dtype, value.note)
            if isinstance(value, SlotTuple):
                return self.read_slot_tuple(value)
            return value
        found, obj = self.scope.lookup(name)
        if not found:
            raise self.error(KernelSyntaxError, node, f"name `{name}` is not defined",
                             hint="define it before use (in the kernel, or at module level)")
        if isinstance(obj, T.TypeVar) and obj in self.typevars:
            return Static(self.typevars[obj])
        if isinstance(obj, T.TypeVar):
            raise self.error(KernelTypeError, node,
                             f"type variable `{name}` is not bound by any parameter",
                             hint=f"annotate a parameter with `{name}` or `Slice[{name}]`")
        if isinstance(obj, (bool, int, float)) or is_number_tuple(obj):
            self.ctx.folded[name] = obj  # a tuple is not in the cache key: not cached
        return self.python_value(obj, node)

    def python_value(self, obj: Any, node: ast.AST) -> Any:
        """The frontend value of a Python object found by name, attribute or Const value.

        Python numbers fold into weak literals; NumPy scalars keep their dtype (a
        `np.float32` constant is an f32, as it would be on the host); anything else
        stays a static object, checked where it is used.
        """
        if isinstance(obj, np.generic) and not isinstance(obj, (np.void, np.str_, np.bytes_)):
            try:
                dt = T.dtype_of(obj.dtype)
            except TypeError:
                raise self.error(KernelTypeError, node,
                                 f"NumPy {obj.dtype} values are not supported in kernels") from None
            return Val(self.b.constant(obj.item(), dt), dt)
        from oxide.runtime.constant import ConstantArray

        if isinstance(obj, ConstantArray):
            return self.constant_array(obj, self.text(node), node)
        if isinstance(obj, np.ndarray):
            return self.constant_array(self.captured_array(obj, node), self.text(node), node)
        return wrap_python(obj)

    def captured_array(self, obj: np.ndarray, node: ast.AST) -> Any:
        """A NumPy array a kernel reads from module or closure scope, as numba does: its
        values, taken when a kernel first reads it, in constant memory (runtime/captured.py)."""
        from oxide.errors import ArgumentError
        from oxide.runtime.captured import capture

        try:
            return capture(obj)
        except ArgumentError as exc:
            raise self.error(KernelTypeError, node,
                             f"`{self.text(node)}` is a NumPy array kernels cannot capture: "
                             f"{exc}",
                             hint="pass it as a Slice parameter (any size, global memory), or "
                                  "declare an ox.ConstantArray and .set() it") from None

    def is_builtin(self, name: str, builtin: str) -> bool:
        if name in self.env:
            return False
        found, obj = self.scope.lookup(name)
        return found and obj is getattr(builtins, builtin)

    def expr_Tuple(self, node: ast.Tuple) -> Tup:
        return Tup(tuple(self.expr(e) for e in node.elts))

    def unpack_targets(self, target: ast.Tuple | ast.List, value: Any,
                       value_node: ast.AST) -> tuple[Any, ...]:
        """The values for the names of `a, b = value`, one per target.

        A starred target (`a, *rest = t`) takes the items the others leave, as a
        tuple (Python makes it a list; kernels have tuples only). Tuples exist at
        compile time, so this is exact and costs nothing at run time.
        """
        # (Python itself rejects two starred names, so there is at most one)
        stars = [i for i, t in enumerate(target.elts) if isinstance(t, ast.Starred)]
        if not stars:
            return self.unpack(value, len(target.elts), value_node)
        star, fixed = stars[0], len(target.elts) - 1
        if isinstance(value, Tup):
            items = value.items
        elif isinstance(value, SlotTuple):
            items = self.read_slot_tuple(value).items
        else:
            raise self.error(KernelTypeError, value_node, f"cannot unpack {describe(value)}",
                             hint=unpack_hint(value))
        if len(items) < fixed:
            raise self.error(KernelTypeError, value_node,
                             f"cannot unpack {len(items)} values into {fixed} names and a "
                             "starred name", hint="the starred name takes what is left, "
                             "possibly nothing; the others need one value each")
        after = fixed - star
        rest = Tup(tuple(items[star:len(items) - after]))
        return (*items[:star], rest, *items[len(items) - after:])

    # -- types and conversion --------------------------------------------------------

    def resolve_dtype(self, node: ast.expr) -> T.DType:
        value = self.expr(node)
        if isinstance(value, Static) and isinstance(value.obj, T.DType):
            return value.obj
        raise self.error(KernelTypeError, node, f"`{self.text(node)}` is not a scalar type",
                         hint="use one of f16, bf16, f8e4m3, f8e5m2, f32, f64, i8..i64, "
                              "u8..u64, bool_")

    def default_dtype(self, v: Any) -> T.DType:
        if isinstance(v, Lit):
            return literal_dtype(v.value)
        if isinstance(v, Val):
            return v.dtype
        if isinstance(v, Witness):
            return T.i64
        raise TypeError(v)

    def is_int_value(self, v: Any) -> bool:
        if isinstance(v, Lit):
            return isinstance(v.value, int) and not isinstance(v.value, bool)
        return isinstance(v, Witness) and v.rank == 1 or (isinstance(v, Val) and v.dtype.is_int)

    def common_dtype(self, values: list[Any], node: ast.AST) -> T.DType:
        typed = [self.scalar(v, node).dtype for v in values if not isinstance(v, Lit)]
        if not typed:
            lits = [v.value for v in values]
            if any(isinstance(x, float) for x in lits):
                return T.f32
            return T.i32 if all(literal_dtype(x) == T.i32 for x in lits) else T.i64
        dt = typed[0]
        for t in typed[1:]:
            dt = self.promote(dt, t, node)
        for v in values:
            if isinstance(v, Lit):
                dt2 = literal_with(v.value, dt)
                if dt2 != dt:
                    dt = self.promote(dt, dt2, node)
        return dt

    def promote(self, a: T.DType, b: T.DType, node: ast.AST) -> T.DType:
        try:
            return promote(a, b)
        except PromotionError as exc:
            raise self.error(KernelTypeError, node, str(exc),
                             hint=exc.hint or "convert one side explicitly, e.g. `i64(x)`"
                             ) from None

    def refuse_storage(self, dt: T.DType, node: ast.AST, what: str) -> None:
        """A KernelTypeError at `node` where `what` (arithmetic, a comparison, a math
        function) would compute on an 8-bit float: on its bits, as an integer, otherwise."""
        if dt.is_fp8:
            raise self.error(KernelTypeError, node, storage_error(dt, what),
                             hint=storage_hint(dt))

    def arithmetic_dtype(self, values: list[Any], node: ast.AST, what: str) -> T.DType:
        """`common_dtype` of operands that `what` computes on (no 8-bit floats)."""
        dt = self.common_dtype(values, node)
        self.refuse_storage(dt, node, what)
        return dt

    def scalar(self, v: Any, node: ast.AST) -> Val:
        """A run-time scalar for `v` (witnesses become plain i64 coordinates)."""
        if isinstance(v, Val):
            return v
        if isinstance(v, Lit):
            dt = literal_dtype(v.value)
            return Val(self.materialize(v, dt, node), dt)
        if isinstance(v, Witness):
            if v.rank != 1:
                raise self.error(KernelTypeError, node,
                                 "a 2-D ThreadIndex is not a number",
                                 hint="use its `.row` or `.col`")
            note = (f"`{self.text(node)}` is a plain integer; a ThreadIndex used as a number "
                    "loses the uniqueness guarantee")
            return Val(self.b.value(ops.IndexComponentOp(v.ssa, 0, _ir(T.i64))), T.i64, note)
        raise self.error(KernelTypeError, node, f"expected a number, got {describe(v)}")

    def materialize(self, v: Any, dt: T.DType, node: ast.AST) -> Any:
        """`v` as an SSA value of type `dt`, by implicit (safe) conversion only."""
        if isinstance(v, Lit):
            if not literal_fits(v.value, dt):
                hint = f"convert explicitly with `{dt.name}(...)`"
                wide = next((w for w in (T.i64, T.u64) if isinstance(v.value, int)
                             and not dt.is_float and not dt.is_fp8
                             and literal_fits(v.value, w)), None)
                if wide is not None:  # a 64-bit constant next to a narrower operand
                    hint = (f"it needs {wide.name}: write `{wide.name}({literal_text(v.value)})`, "
                            f"or make the other operand {wide.name}")
                if isinstance(v.value, int) and not -(2**63) <= v.value < 2**64:
                    hint = "kernel integers have at most 64 bits; use a float for larger values"
                raise self.error(KernelTypeError, node,
                                 f"the literal {literal_text(v.value)} does not fit in {dt.name}",
                                 hint=hint)
            return self.b.constant(v.value, dt)
        s = self.scalar(v, node)
        if s.dtype == dt:
            return s.ssa
        return self.b.cast(s.ssa, dt)

    def convert(self, v: Any, dt: T.DType, node: ast.AST) -> Val:
        """An explicit conversion (`f32(x)`): any number to any scalar type."""
        if isinstance(v, Lit):
            return Val(self.b.constant(self.convert_constant(v.value, dt, node), dt), dt)
        s = self.scalar(v, node)
        if dt.is_bool and not s.dtype.is_bool and not s.dtype.is_fp8:  # fp8: a cast's test
            zero = self.b.constant(0, s.dtype)
            return Val(self.b.value(ops.CompareOp("ne", s.ssa, zero)), T.bool_)
        note = None
        if isinstance(v, Witness) or s.note:
            note = (f"`{self.text(node)}` is a plain integer; converting a ThreadIndex drops "
                    "the uniqueness guarantee")
        return Val(self.b.cast(s.ssa, dt), dt, note)

    def convert_constant(self, value: int | float | bool, dt: T.DType,
                         node: ast.AST) -> int | float | bool:
        """`dt(value)` on a constant, as the host computes it (constfold.convert): a
        float type rounds (to infinity beyond its range); an integer type truncates,
        and a value it cannot hold (NaN, an infinity, `i32(3e10)`) is an error, as
        it is in Python and NumPy."""
        try:
            return convert(value, dt)
        except FoldError as exc:
            raise self.error(KernelTypeError, node,
                             f"the constant {literal_text(value)} {exc}",
                             hint=exc.hint) from None

    def truth(self, v: Any, node: ast.AST) -> Any:
        """An i1 SSA value for a condition (ints and floats compare against zero)."""
        if isinstance(v, Lit):
            return self.b.constant(bool(v.value), T.bool_)
        if isinstance(v, (Array, FixedArray, Tup, Static)):
            raise self.error(KernelTypeError, node, f"{describe(v)} has no truth value here",
                             hint="compare explicitly, e.g. `if n > 0:`")
        return self.convert(v, T.bool_, node).ssa

    # -- operators -------------------------------------------------------------------

    def fold(self, fn: Callable[..., Any], values: tuple[Any, ...], node: ast.AST) -> Lit:
        """Evaluate an operator on compile-time constants exactly as Python would.

        Constants fold before they are typed, so whatever Python rejects (`~1.5`,
        `1 / 0`) or turns into a non-number (`(-8) ** 0.5` is complex) is the user's
        error at `node` -- never an exception escaping the compiler.
        """
        try:
            result = evaluate(fn, values)
        except FoldError as exc:
            raise self.error(KernelTypeError, node,
                             f"constant expression `{self.text(node)}` {exc}",
                             hint=exc.hint) from None
        if not isinstance(result, (bool, int, float)):
            raise self.error(KernelTypeError, node,
                             f"constant expression `{self.text(node)}` gives a "
                             f"{type(result).__name__}, not a number kernels can use")
        return Lit(result)

    def expr_BinOp(self, node: ast.BinOp) -> Any:
        return self.binop(node.op, self.expr(node.left), self.expr(node.right), node)

    def binop(self, op: ast.operator, a: Any, b: Any, node: ast.AST) -> Any:
        kind = _BINOPS.get(type(op))
        if kind is None:
            raise self.error(UnsupportedFeatureError, node,
                             f"operator `{type(op).__name__}` is not supported in kernels")
        if kind in ("add", "mul") and (isinstance(a, Tup) or isinstance(b, Tup)):
            return self.tuple_binop(kind, a, b, node)
        if isinstance(a, Lit) and isinstance(b, Lit) and not int_division_by_zero(
                kind, a.value, b.value):
            return self.fold(_PY_BINOPS[kind], (a.value, b.value), node)
        for v in (a, b):
            if not isinstance(v, (Lit, Val, Witness)):
                raise self.error(KernelTypeError, node,
                                 f"`{_SYMBOLS[kind]}` needs numbers, not {describe(v)}")
        amount = constant_int(b)
        if isinstance(amount, Lit) and negative_shift(kind, amount.value) and not (
                isinstance(b, Val) and not b.dtype.is_signed):
            raise self.error(KernelTypeError, getattr(node, "right", getattr(node, "value", node)),
                             f"`{self.text(node)}` shifts by a negative constant "
                             f"({amount.value}): Python raises ValueError (negative shift count)",
                             label="a negative shift amount",
                             hint=f"shift the other way: `{'>>' if kind == 'shl' else '<<'}` by "
                                  f"{-amount.value}")
        dt = (self.shift_dtype(kind, a, b, node) or self.bitwise_mixed_dtype(kind, a, b)
              or self.arithmetic_dtype([a, b], node, f"`{_SYMBOLS[kind]}`"))
        if dt.is_bool and kind not in ("and", "or", "xor"):
            dt = T.i32
        if kind == "div" and not dt.is_float:
            dt = T.f64 if dt.bits == 64 else T.f32
        if kind in ("and", "or", "xor", "shl", "shr") and dt.is_float:
            raise self.error(KernelTypeError, node,
                             f"bitwise `{_SYMBOLS[kind]}` needs integers, not {dt.name}")
        if kind == "pow":
            return self.power(a, b, dt, node)
        x = self.materialize(a, dt, node)
        y = self.materialize(b, dt, node)
        bin_op = ops.BinaryOp(kind, x, y)
        if (kind in ("floordiv", "mod") and dt.is_int and self.ctx.checks
                and not (isinstance(b, Lit) and b.value != 0)):
            # a zero divisor is reported at this site (kind 3 in the error record)
            site = self.b.site("division", self.src.span(node), "integer division by zero")
            bin_op.properties["site"] = IntAttr(site)
        return Val(self.b.value(bin_op), dt, self.derived_note(node, a, b))

    def array_choice(self, cond: Any, node: ast.IfExp) -> Array | None:
        """`a if c else b` over two array parameters (ping-pong buffers), else None.

        Both must be names of arrays of one type (access, dtype, rank, layout). The result
        is one array; a DisjointSlice written through it counts as written in both
        (passes/disjoint_reads.py), and the launch already refuses overlapping arguments.
        """
        names = (node.body, node.orelse)
        if not all(isinstance(n, ast.Name) for n in names):
            return None
        a, b = (self.load_name(n.id, n) if isinstance(self.env.get(n.id), ArrayVar)  # type: ignore[attr-defined]
                else self.env.get(n.id) for n in names)  # type: ignore[attr-defined]
        if not (isinstance(a, Array) and isinstance(b, Array)):
            return None
        if a.type != b.type:
            raise self.error(KernelTypeError, node,
                             f"`{self.text(node)}` chooses between {describe(a)} and "
                             f"{describe(b)}: both sides must be arrays of one type",
                             hint=f"declare both parameters with the same type, e.g. "
                                  f"`{a.type!r}`")
        ssa = self.b.value(ops.ArraySelectOp(cond, a.ssa, b.ssa))
        return Array(ssa, a.type, self.text(node))

    def shift_dtype(self, kind: str, a: Any, b: Any, node: ast.AST) -> T.DType | None:
        """The type of a shift whose typed integer operands have no common type
        (`mask_u32 << lane_i32`): the value's. The amount is read in that type, as any
        shift amount is (a negative one reads as unsigned). None: the usual promotion."""
        if kind not in ("shl", "shr") or isinstance(a, Lit) or isinstance(b, Lit):
            return None
        # a ThreadIndex is an i64 as a number; reading the type emits nothing
        left, amount = (T.i64 if isinstance(v, Witness) else v.dtype for v in (a, b))
        if not (left.is_int and amount.is_int) or left == amount:
            return None
        try:
            promote(left, amount)
        except PromotionError:
            return left
        return None

    def bitwise_mixed_dtype(self, kind: str, a: Any, b: Any) -> T.DType | None:
        """`&`, `|`, `^` on typed integers of one width and different signedness
        (`active_u32 & lanes_i32`): the unsigned type (promote.bitwise_dtype). None: the
        usual promotion (literals adapt to the typed side anyway)."""
        if kind not in ("and", "or", "xor") or isinstance(a, Lit) or isinstance(b, Lit):
            return None
        left, right = (T.i64 if isinstance(v, Witness) else v.dtype for v in (a, b))
        return bitwise_dtype(left, right)

    def tuple_binop(self, kind: str, a: Any, b: Any, node: ast.AST) -> Tup:
        """`t + u` and `t * n` on compile-time tuples, as in Python (`(n,) * 3` as a shape).

        The repeat count must be a constant integer, and the result at most
        MAX_SEQUENCE_ITEMS long: `(0,) * 2**40` is a diagnostic, not a compiler that
        runs out of memory.
        """
        if kind == "add":
            if not (isinstance(a, Tup) and isinstance(b, Tup)):
                raise self.error(KernelTypeError, node,
                                 f"`+` joins two tuples, not {describe(a)} and {describe(b)}")
            size = len(a.items) + len(b.items)
        else:
            tup, count = (a, b) if isinstance(a, Tup) else (b, a)
            if not (isinstance(count, Lit) and isinstance(count.value, int)
                    and not isinstance(count.value, bool)):
                raise self.error(KernelTypeError, node,
                                 f"a tuple repeats a constant integer number of times, not "
                                 f"{describe(count)}", hint="write `(n,) * 3`")
            size = len(tup.items) * max(0, count.value)
        if size > MAX_SEQUENCE_ITEMS:
            raise self.error(KernelTypeError, node,
                             f"`{self.text(node)}` would have {literal_text(size)} items; "
                             f"kernel tuples have at most {MAX_SEQUENCE_ITEMS}")
        if kind == "add":
            return Tup(a.items + b.items)
        return Tup(tup.items * max(0, count.value))

    def derived_note(self, node: ast.AST, *operands: Any) -> str | None:
        """The safety note of a result computed from a witness (or from a value that was one).

        A DisjointSlice write at such a value is rejected; the note is what the
        diagnostic's caret says, so the user sees where the uniqueness was lost.
        """
        if any(isinstance(v, Witness) or (isinstance(v, Val) and v.note) for v in operands):
            return (f"`{self.text(node)}` is a plain integer; arithmetic drops the uniqueness "
                    "guarantee")
        return None

    def power(self, a: Any, b: Any, dt: T.DType, node: ast.AST) -> Val:
        if isinstance(b, Lit) and isinstance(b.value, int) and 0 <= b.value <= 16:
            x = self.materialize(a, dt, node)
            result = self.b.constant(1, dt)
            for _ in range(b.value):
                result = self.b.value(ops.BinaryOp("mul", result, x))
            return Val(result, dt)
        if not dt.is_float:
            raise self.error(KernelTypeError, node,
                             "integer `**` needs a constant exponent from 0 to 16",
                             hint="convert to a float type for a run-time exponent")
        x, y = self.materialize(a, dt, node), self.materialize(b, dt, node)
        return Val(self.b.value(ops.MathOp("pow", [x, y], _ir(dt))), dt)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Any:
        v = self.expr(node.operand)
        if isinstance(node.op, ast.Not):
            if isinstance(v, Lit):
                return Lit(not v.value)
            c = self.truth(v, node.operand)
            return Val(self.b.value(ops.UnaryOp("not", c)), T.bool_)
        if isinstance(v, Lit):
            return self.fold({ast.USub: operator.neg, ast.UAdd: operator.pos,
                              ast.Invert: operator.invert}[type(node.op)], (v.value,), node)
        s = self.scalar(v, node.operand)
        if isinstance(node.op, ast.UAdd):
            return s
        symbol = "~" if isinstance(node.op, ast.Invert) else "-"
        self.refuse_storage(s.dtype, node, f"unary `{symbol}`")
        note = self.derived_note(node, v)
        if isinstance(node.op, ast.Invert):
            if s.dtype.is_float:
                raise self.error(KernelTypeError, node, f"`~` needs an integer, not {s.dtype.name}")
            kind = "not" if s.dtype.is_bool else "invert"
            return Val(self.b.value(ops.UnaryOp(kind, s.ssa)), s.dtype, note)
        if s.dtype.is_bool:
            s = Val(self.b.cast(s.ssa, T.i32), T.i32)
        return Val(self.b.value(ops.UnaryOp("neg", s.ssa)), s.dtype, note)

    def expr_BoolOp(self, node: ast.BoolOp) -> Any:
        """`and`/`or` short-circuit: later operands run only when needed."""
        is_and = isinstance(node.op, ast.And)
        result = self.b.alloc(ops.SlotOp(_ir(T.bool_)))
        join = self.b.new_block()
        for i, operand in enumerate(node.values):
            v = self.expr(operand)
            if isinstance(v, Lit):
                if bool(v.value) != is_and:  # decides the result
                    self.b.emit(ops.SlotWriteOp(result, self.b.constant(bool(v.value), T.bool_)))
                    self.b.br(join)
                    self.b.set_block(self.b.new_block())
                    break
                if i == len(node.values) - 1:
                    self.b.emit(ops.SlotWriteOp(result, self.b.constant(bool(v.value), T.bool_)))
                    self.b.br(join)
                continue
            c = self.truth(v, operand)
            self.b.emit(ops.SlotWriteOp(result, c))
            if i == len(node.values) - 1:
                self.b.br(join)
                break
            nxt = self.b.new_block()
            if is_and:
                self.b.cond_br(c, nxt, join)
            else:
                self.b.cond_br(c, join, nxt)
            self.b.set_block(nxt)
        self.b.set_block(join)
        return Val(self.b.value(ops.SlotReadOp(result)), T.bool_)

    def expr_Compare(self, node: ast.Compare) -> Any:
        left = self.expr(node.left)
        if len(node.ops) > 1:
            return self.compare_chain(node, left)
        return self.compare(node.ops[0], left, self.expr(node.comparators[0]), node)

    def compare_chain(self, node: ast.Compare, left: Any) -> Any:
        """`a < b < c` is `(a < b) and (b < c)` with `b` evaluated once, and short-circuits
        as Python's does: a false link skips the operands after it (`1 < x < 7 // d` with
        `x = 0` does not divide), as `and` does (expr_BoolOp). Constant links fold."""
        result = join = None
        last = len(node.ops) - 1
        for i, (op, right_node) in enumerate(zip(node.ops, node.comparators, strict=True)):
            right = self.expr(right_node)
            link = self.compare(op, left, right, node)
            left = right
            if isinstance(link, Lit) and (link.value or join is None):
                if not link.value or (i == last and join is None):
                    return Lit(bool(link.value))  # what comes after is never evaluated
                if i < last:
                    continue
            if join is None:
                result, join = self.b.alloc(ops.SlotOp(_ir(T.bool_))), self.b.new_block()
            c = (self.b.constant(bool(link.value), T.bool_) if isinstance(link, Lit)
                 else self.truth(link, node))
            self.b.emit(ops.SlotWriteOp(result, c))
            if i == last or isinstance(link, Lit):  # the last link, or a constant false one
                self.b.br(join)
                break
            nxt = self.b.new_block()
            self.b.cond_br(c, nxt, join)
            self.b.set_block(nxt)
        self.b.set_block(join)
        return Val(self.b.value(ops.SlotReadOp(result)), T.bool_)

    def compare(self, op: ast.cmpop, a: Any, b: Any, node: ast.AST) -> Any:
        if isinstance(op, (ast.In, ast.NotIn)):
            if not isinstance(a, Witness) or not isinstance(b, (Array, FixedArray)):
                array = b.name if isinstance(b, Array) else "ARRAY"
                rank = b.type.rank if isinstance(b, Array) and b.type.rank <= 2 else 1
                name, bound = witness_name(self.src.tree, rank)
                where = "" if bound else f" with `{name} = thread.index_{rank}d()`"
                raise self.error(KernelTypeError, node,
                                 "`in` tests whether a ThreadIndex lies inside an array",
                                 hint=f"write `if {name} in {array}:`{where}")
            if isinstance(b, FixedArray):
                raise self.error(UnsupportedFeatureError, node,
                                 "`in` guards kernel array parameters, not shared arrays")
            if a.rank != b.type.rank:
                raise self.error(KernelTypeError, node,
                                 f"a {a.rank}-D ThreadIndex cannot index the rank-"
                                 f"{b.type.rank} array `{b.name}`",
                                 hint=f"use thread.index_{b.type.rank}d()"
                                 if b.type.rank <= 2 else "")
            c = self.b.value(ops.InBoundsOp(a.ssa, b.ssa))
            if isinstance(op, ast.NotIn):
                c = self.b.value(ops.UnaryOp("not", c))
            return Val(c, T.bool_)
        if isinstance(op, (ast.Is, ast.IsNot)):
            raise self.error(UnsupportedFeatureError, node, "`is` is not supported in kernels",
                             hint="compare numbers with `==`")
        pred = _CMPOPS[type(op)]
        if isinstance(a, Lit) and isinstance(b, Lit):
            return self.fold(_PY_CMPOPS[pred], (a.value, b.value), node)
        dt = self.arithmetic_dtype([a, b], node, "a comparison")
        x, y = self.materialize(a, dt, node), self.materialize(b, dt, node)
        return Val(self.b.value(ops.CompareOp(pred, x, y)), T.bool_)

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        """`a if c else b`, evaluating only the chosen side (reads there may be guarded by c)."""
        cond = self.expr(node.test)
        if isinstance(cond, Lit):
            return self.expr(node.body if cond.value else node.orelse)
        c = self.truth(cond, node.test)
        chosen = self.array_choice(c, node)
        if chosen is not None:
            return chosen
        then_block, else_block, join = self.b.new_block(), self.b.new_block(), self.b.new_block()
        self.b.cond_br(c, then_block, else_block)
        self.b.set_block(then_block)
        a = self.expr(node.body)
        then_end = self.b.block
        self.b.set_block(else_block)
        bv = self.expr(node.orelse)
        else_end = self.b.block
        if not all(isinstance(v, (Lit, Val, Witness)) for v in (a, bv)):
            raise self.error(KernelTypeError, node, "both sides of `if/else` must be numbers")
        dt = self.common_dtype([a, bv], node)
        slot = self.b.alloc(ops.SlotOp(_ir(dt)))
        self.b.set_block(then_end)
        self.b.emit(ops.SlotWriteOp(slot, self.materialize(a, dt, node.body)))
        self.b.br(join)
        self.b.set_block(else_end)
        self.b.emit(ops.SlotWriteOp(slot, self.materialize(bv, dt, node.orelse)))
        self.b.br(join)
        self.b.set_block(join)
        return Val(self.b.value(ops.SlotReadOp(slot)), dt, self.derived_note(node, a, bv))

    # -- attributes ------------------------------------------------------------------

    def expr_Attribute(self, node: ast.Attribute) -> Any:
        base = self.expr(node.value)
        attr = node.attr
        if isinstance(base, Static):
            obj = base.obj
            if isinstance(obj, RegisterGroup):
                if attr not in ("x", "y", "z"):
                    raise self.error(KernelSyntaxError, node,
                                     f"`{self.text(node.value)}` has `.x`, `.y` and `.z`, "
                                     f"not `.{attr}`")
                reg = {"thread_idx": "tid", "block_idx": "ctaid", "block_dim": "ntid",
                       "grid_dim": "nctaid"}[obj.reg]
                return Val(self.b.value(ops.RegisterOp(f"{reg}.{attr}", _ir(T.i32))), T.i32)
            try:
                value = getattr(obj, attr)
            except Exception:  # any failure (a raising __getattr__) is "no such"
                raise self.error(KernelSyntaxError, node,
                                 f"`{self.text(node.value)}` has no attribute `{attr}`",
                                 hint=_did_you_mean(attr, obj)) from None
            if isinstance(value, (bool, int, float)):
                self.ctx.folded[self.text(node)] = value
            return self.python_value(value, node)
        if isinstance(base, BlockPosition):
            got = base.field(attr)
            if got is None:
                raise self.error(KernelSyntaxError, node, f"a thread's block position has no "
                                 f"attribute `{attr}`", hint="it has `.row` and `.col`")
            return got
        if isinstance(base, Witness):
            if base.rank == 2 and attr in ("row", "col"):
                dim = 0 if attr == "row" else 1
                note = (f"`{self.text(node)}` is one coordinate, a plain integer; index with the "
                        "whole ThreadIndex")
                return Val(self.b.value(ops.IndexComponentOp(base.ssa, dim, _ir(T.i64))), T.i64,
                           note)
            raise self.error(KernelSyntaxError, node,
                             f"a {base.rank}-D ThreadIndex has no attribute `{attr}`",
                             hint="2-D indices have `.row` and `.col`" if base.rank == 2 else
                             "a 1-D ThreadIndex is used directly as an index")
        if isinstance(base, Array):
            if attr == "shape":
                return Tup(tuple(self.array_dim(base, d) for d in range(base.type.rank)))
            if attr == "ndim":
                return Lit(base.type.rank)
            raise self.error(KernelSyntaxError, node,
                             f"arrays in kernels have `.shape` and `.ndim`, not `.{attr}`",
                             hint=_array_attribute_hint(base, attr))
        if isinstance(base, FixedArray):
            if attr == "shape":
                return Tup(tuple(self.fixed_dim(base, d) for d in range(len(base.shape))))
            raise self.error(KernelSyntaxError, node,
                             f"shared, local and constant arrays have `.shape`, not `.{attr}`")
        raise self.error(KernelSyntaxError, node,
                         f"{describe(base)} has no attribute `{attr}`")

    def array_dim(self, arr: Array, dim: int) -> Val:
        return Val(self.b.value(ops.ArrayDimOp(arr.ssa, dim, _ir(T.i64))), T.i64)


# Names users bring from numba (`cuda.grid(2)`, `cuda.this_grid().sync()`) and CUDA C++.
_PORTING_HINTS = {
    "this_grid": "numba's `cuda.cg.this_grid()` is `ox.grid.this_grid()`; its `.sync()` is "
                 "`ox.grid.sync()`",
    "syncthreads": "use `ox.sync_threads()`",
    "gridsize": "the grid's size in threads is `ox.grid_dim.x * ox.block_dim.x`",
}


def _array_attribute_hint(arr: Array, attr: str) -> str:
    """What to write for NumPy's or torch's array attributes that kernels lack: the size
    from `len()` and `.shape`, the element type from the annotation."""
    name, rank = arr.name, arr.type.rank
    if attr in ("size", "numel", "length"):
        if rank == 1:
            return f"its length is `len({name})` (or `{name}.shape[0]`)"
        dims = " * ".join(f"{name}.shape[{d}]" for d in range(rank))
        return f"its element count is `{dims}`; `len({name})` is `{name}.shape[0]`"
    if attr in ("dtype", "itemsize"):
        return (f"its element type is the annotation's, `{arr.type.dtype.name}`: convert a "
                f"value to it with `{arr.type.dtype.name}(...)`")
    close = difflib.get_close_matches(attr, ["shape", "ndim"], n=1, cutoff=0.6)
    return f"did you mean `{name}.{close[0]}`?" if close else ""


def _did_you_mean(attr: str, obj: Any) -> str:
    """A hint naming the public attributes of `obj` closest to the misspelled `attr`."""
    if attr in _PORTING_HINTS and getattr(obj, "__name__", "") == "oxide":
        return _PORTING_HINTS[attr]
    names = [n for n in dir(obj) if not n.startswith("_")]
    close = difflib.get_close_matches(attr, names, n=3, cutoff=0.6)
    if not close:
        return ""
    return "did you mean " + " or ".join(f"`{n}`" for n in close) + "?"


def _ir(dt: T.DType) -> Any:
    from oxide.ir.types import ir_type

    return ir_type(dt)
