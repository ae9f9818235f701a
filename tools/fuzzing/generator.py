"""Random typed programs: expressions, branches, loops and `@ox.func` calls.

The generator is type-directed: `expr(ty)` builds an expression whose type under
docs/language.md is exactly `ty`, so every assignment keeps its variable's type
(the language refuses anything else) and a type disagreement between oxide and the
reference shows up as a compile error, never as a silent conversion.

It stays away, on purpose, from what the language page leaves undefined: float
literals next to integers, `i* + u64` and arithmetic on `bool_`. Loops are bounded by
construction; some step past the loop type's maximum (or minimum), which must end them.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from tools.fuzzing import semantics as S
from tools.fuzzing.nodes import (
    Assign,
    Bin,
    BoolOp,
    Call,
    Cmp,
    Conv,
    Expr,
    For,
    Function,
    If,
    IfExp,
    Jump,
    Lit,
    MinMax,
    Not,
    Pow,
    Return,
    Stmt,
    Unary,
    Var,
    While,
)

INT_LITERALS = (0, 1, 2, 3, 7, 8, 31, 32, 33, 63, 64, 100, 127, 128, 255, 1000, 65535,
                2**31 - 1, 2**32 - 1, -1, -2, -3, -7, -128, -32768, -(2**31))
FLOAT_LITERALS = (0.0, -0.0, 0.5, 1.0, -1.0, 2.0, 3.0, 0.1, -2.5, 1e10, 1e-3, 1e30, 1e-40,
                  1e-45, 3.4e38, 16777217.0, 1e300, 5e-324, 65504.0, 2049.0, 257.0, 6e-8,
                  1e-5, 0.333)
ARITH = ("add", "sub", "mul")
BITWISE = ("and", "or", "xor")


def _constant(e: object) -> bool:
    """Whether an expression reads no variable and calls nothing: the compiler folds it."""
    if isinstance(e, (Var, Call)):
        return False
    if isinstance(e, Expr):
        return all(_constant(v) for v in vars(e).values())
    if isinstance(e, (list, tuple)):
        return all(_constant(v) for v in e)
    return True


def literal_fits(v: int | float, ty: str) -> bool:
    """Whether a weak literal can take `ty` (docs/language.md: a literal must fit)."""
    if S.is_float(ty):
        return abs(float(v)) <= S.FORMATS[ty][2]
    if isinstance(v, float):
        return False
    lo, hi = S.int_range(ty)
    return lo <= v <= hi


class Generator:
    """Builds one module's programs and helpers from a seeded `random.Random`."""

    def __init__(self, rng: random.Random, types: tuple[str, ...] = S.NUMERIC) -> None:
        self.rng = rng
        self.types = types
        self.helpers: list[Function] = []
        self.scope: dict[str, str] = {}
        self.used_helpers: list[Function] = []
        self.counter = 0
        self.leaf_only = False  # chained comparisons: operands that cannot fault

    # -- names and leaves ----------------------------------------------------------------

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def pick_type(self) -> str:
        return self.rng.choice(self.types)

    def literal(self, ty: str) -> Lit:
        pool = FLOAT_LITERALS + INT_LITERALS if S.is_float(ty) else INT_LITERALS
        value = self.rng.choice([v for v in pool if literal_fits(v, ty)])
        return Lit(value, ty)

    def var(self, ty: str) -> Expr | None:
        names = [n for n, t in self.scope.items() if t == ty]
        return Var(self.rng.choice(names), ty) if names else None

    def leaf(self, ty: str) -> Expr:
        v = self.var(ty)
        if v is not None and self.rng.random() < 0.8:
            return v
        others = [(n, t) for n, t in self.scope.items() if t != "bool"]
        n, t = self.rng.choice(others)
        return Conv(Var(n, t), ty) if t != ty else Var(n, t)

    def operand(self, ty: str, depth: int) -> Expr:
        """An operand of an operation at type `ty`: a typed expression, or sometimes a literal."""
        if self.rng.random() < 0.2:
            return self.literal(ty)
        return self.expr(ty, depth)

    def narrower(self, ty: str) -> str | None:
        """A different type that promotes to `ty` (None when there is none)."""
        cands = [t for t in self.types if t != ty and S.can_promote(t, ty)
                 and S.promote(t, ty) == ty]
        return self.rng.choice(cands) if cands else None

    # -- expressions ---------------------------------------------------------------------

    def expr(self, ty: str, depth: int) -> Expr:
        if ty == "bool":
            return self.condition(depth)
        if depth <= 0 or self.leaf_only:
            return self.leaf(ty)
        makers: list[tuple[float, Callable[[str, int], Expr]]] = [
            (1.0, self.leaf_expr), (3.0, self.arith), (1.0, self.division), (1.0, self.floor_mod),
            (0.7, self.unary), (0.6, self.min_max), (0.8, self.conversion), (0.5, self.if_exp),
            (0.3, self.power), (0.6, self.call)]
        if S.is_int(ty):
            makers += [(1.0, self.bitwise), (1.0, self.shift)]
        weights = [w for w, _ in makers]
        maker = self.rng.choices([m for _, m in makers], weights)[0]
        return maker(ty, depth - 1)

    def leaf_expr(self, ty: str, depth: int) -> Expr:
        return self.leaf(ty)

    def arith(self, ty: str, depth: int) -> Expr:
        kind = self.rng.choice(ARITH)
        a = self.expr(ty, depth)
        other = self.narrower(ty) if self.rng.random() < 0.25 else None
        b = self.expr(other, depth) if other else self.operand(ty, depth)
        if self.rng.random() < 0.5:
            a, b = b, a
        return Bin(kind, a, b, ty, ty)

    def division(self, ty: str, depth: int) -> Expr:
        """`/`: float operands of `ty`, or integers whose `/` gives `ty`."""
        if S.is_float(ty) and self.rng.random() < 0.6:
            return Bin("div", self.expr(ty, depth), self.operand(ty, depth), ty, ty)
        ints = [t for t in S.INTS if t in self.types and S.div_type(t) == ty]
        if S.is_int(ty) or not ints:
            return Conv(self.division(self.rng.choice(("f32", "f64")), depth), ty)
        it = self.rng.choice(ints)
        return Bin("div", self.expr(it, depth), self.operand(it, depth), it, ty)

    def floor_mod(self, ty: str, depth: int) -> Expr:
        kind = self.rng.choice(("floordiv", "mod"))
        return Bin(kind, self.expr(ty, depth), self.divisor(ty, depth), ty, ty)

    def divisor(self, ty: str, depth: int) -> Expr:
        """An integer divisor is zero now and then, not half the time (a zero divisor
        takes its pair out of the clean launch; a few of those get fault launches)."""
        if S.is_float(ty) or self.rng.random() < 0.15:
            return self.operand(ty, depth)
        if self.rng.random() < 0.4:
            lit = self.literal(ty)
            return lit if lit.value != 0 else Lit(7, ty)
        return Bin("or", self.expr(ty, depth), Lit(self.rng.choice((1, 3, 5)), ty), ty, ty)

    def bitwise(self, ty: str, depth: int) -> Expr:
        return Bin(self.rng.choice(BITWISE), self.expr(ty, depth), self.operand(ty, depth), ty, ty)

    def shift(self, ty: str, depth: int) -> Expr:
        kind = self.rng.choice(("shl", "shr"))
        if self.rng.random() < 0.5:
            n = S.bits(ty)
            # no negative constant: Python refuses `x << -1`, and so do kernels (a
            # negative amount computed at run time still comes from `self.expr`)
            amounts = [a for a in (0, 1, 3, n - 1, n, n + 1, 2 * n, 63, 64, 100)
                       if literal_fits(a, ty)]
            b: Expr = Lit(self.rng.choice(amounts), ty)
        else:
            b = self.shift_amount(self.expr(ty, depth), ty)
        return Bin(kind, self.expr(ty, depth), b, ty, ty)

    def shift_amount(self, amount: Expr, ty: str) -> Expr:
        """`amount`, unless it is a negative literal: Python refuses `x << -1`, and so do
        kernels, where the amount is a constant (a negative amount computed from a
        variable at run time is still generated)."""
        if isinstance(amount, Lit) and amount.value < 0:
            return Lit(1 if not literal_fits(-amount.value, ty) else -amount.value, ty)
        if not isinstance(amount, Lit) and _constant(amount):
            return Lit(3, ty)  # `-(c)`, `c1 - c2`: folds to a constant of either sign
        return amount

    def unary(self, ty: str, depth: int) -> Expr:
        kinds = ["neg", "abs"] + (["invert"] if S.is_int(ty) else [])
        return Unary(self.rng.choice(kinds), self.expr(ty, depth), ty)

    def min_max(self, ty: str, depth: int) -> Expr:
        args = [self.expr(ty, depth), self.operand(ty, depth)]
        if self.rng.random() < 0.2:
            args.append(self.expr(ty, depth))
        self.rng.shuffle(args)
        if all(isinstance(a, Lit) for a in args):
            args[0] = self.leaf(ty)
        return MinMax(self.rng.choice(("min", "max")), args, ty)

    def conversion(self, ty: str, depth: int) -> Expr:
        src = self.rng.choice(self.types + ("bool",))
        return Conv(self.expr(src, depth), ty)

    def if_exp(self, ty: str, depth: int) -> Expr:
        return IfExp(self.condition(depth), self.expr(ty, depth), self.operand(ty, depth), ty)

    def power(self, ty: str, depth: int) -> Expr:
        return Pow(self.expr(ty, depth), self.rng.choice((0, 1, 2, 3, 4, 5)), ty)

    def call(self, ty: str, depth: int) -> Expr:
        fns = [f for f in self.helpers if f.ret == ty]
        if not fns:
            return self.arith(ty, depth)
        fn = self.rng.choice(fns)
        if fn not in self.used_helpers:
            self.used_helpers.append(fn)
        return Call(fn, [self.operand(t, depth) for _, t in fn.params], ty)

    # -- conditions ----------------------------------------------------------------------

    def condition(self, depth: int) -> Expr:
        r = self.rng.random()
        if depth <= 0 or r < 0.55:
            return self.comparison(depth)
        if r < 0.75:
            n = self.rng.choice((2, 2, 3))
            values = [self.comparison(depth - 1) if self.rng.random() < 0.7 else
                      self.expr(self.pick_type(), depth - 1) for _ in range(n)]
            return BoolOp(self.rng.choice(("and", "or")), values)
        if r < 0.85:
            return Not(self.condition(depth - 1))
        if r < 0.93:
            return self.chain()
        return Conv(self.expr(self.pick_type(), depth - 1), "bool")

    def comparison(self, depth: int) -> Expr:
        kind = self.rng.choice(("lt", "le", "gt", "ge", "eq", "ne"))
        t1 = self.pick_type()
        t2 = t1 if self.rng.random() < 0.6 else (self.narrower(t1) or t1)
        a = self.expr(t1, max(depth - 1, 0))
        b = self.literal(t1) if self.rng.random() < 0.3 else self.expr(t2, max(depth - 1, 0))
        if self.rng.random() < 0.5:
            a, b = b, a
        return Cmp([kind], [a, b])

    def chain(self) -> Expr:
        """`a < b <= c`: a false link skips the operands after it, so the later ones may
        fault (a division by zero there is reported only when it is reached)."""
        ty = self.pick_type()
        self.leaf_only = True
        try:
            ops = [self.leaf(ty)]
        finally:
            self.leaf_only = False
        ops += [self.expr(ty, 2) if self.rng.random() < 0.5 else self.leaf(ty)
                for _ in range(2)]
        kinds = [self.rng.choice(("lt", "le", "gt", "ge", "eq", "ne")) for _ in range(2)]
        return Cmp(kinds, ops)

    # -- statements ----------------------------------------------------------------------

    def block(self, n: int, depth: int, ret: str, in_loop: bool) -> list[Stmt]:
        return [self.statement(depth, ret, in_loop) for _ in range(n)]

    def statement(self, depth: int, ret: str, in_loop: bool) -> Stmt:
        r = self.rng.random()
        nested = depth < 2
        if r < 0.12 and nested:
            body = self.block(self.rng.randint(1, 3), depth + 1, ret, in_loop)
            orelse = self.block(self.rng.randint(0, 2), depth + 1, ret, in_loop)
            return If(self.condition(2), body, orelse)
        if r < 0.2 and nested:
            counter = self.fresh("c")
            return While(counter, self.rng.randint(1, 5), self.condition(1),
                         self.block(self.rng.randint(1, 3), depth + 1, ret, True))
        if r < 0.28 and nested:
            return self.for_loop(depth, ret)
        if r < 0.33 and in_loop:
            return If(self.condition(1), [Jump(self.rng.choice(("break", "continue")))])
        if r < 0.37:
            return If(self.condition(1), [Return(self.operand(ret, 2), ret)])
        name = self.rng.choice([n for n, t in self.scope.items() if t != "bool"])
        ty = self.scope[name]
        if self.rng.random() < 0.25:
            kinds = ARITH + ("floordiv", "mod") + (BITWISE + ("shl", "shr") if S.is_int(ty) else ())
            kind = self.rng.choice(kinds)
            value = self.divisor(ty, 2) if kind in ("floordiv", "mod") else self.operand(ty, 2)
            if kind in ("shl", "shr"):
                value = self.shift_amount(value, ty)
            return Assign(name, ty, value, aug=kind)
        return Assign(name, ty, self.operand(ty, 3))

    def for_loop(self, depth: int, ret: str) -> Stmt:
        """A range over small values: literals, or `x % 6` of an integer variable."""
        ints = [(n, t) for n, t in self.scope.items() if S.is_int(t) and t != "u64"]

        def bound() -> Expr:
            if ints and self.rng.random() < 0.5:
                n, t = self.rng.choice(ints)
                return Bin("mod", Var(n, t), Lit(6, t), t, t)
            return Lit(self.rng.randint(-2, 6), "i32")

        if self.rng.random() < 0.15:
            return self.edge_loop(depth, ret)
        nargs = self.rng.choice((1, 2, 3))
        args = [bound() for _ in range(min(nargs, 2))]
        signed = [(n, t) for n, t in ints if S.signed(t)]
        if nargs == 3 and signed and self.rng.random() < 0.3:
            # a run-time step in {-1, 0, 1}: 0 must be reported (KernelAssertionError)
            n, t = self.rng.choice(signed)
            args.append(Bin("sub", Bin("mod", Var(n, t), Lit(3, t), t, t), Lit(1, t), t, t))
        elif nargs == 3:
            args.append(Lit(self.rng.choice((1, 2, 3, -1, -2)), "i32"))
        ty: str | None = None
        for t in [a.ty for a in args if not isinstance(a, Lit)]:
            if ty is not None and not S.can_promote(ty, t):  # i8 with u8: no common type
                args, ty = [Lit(3, "i32")], None
                break
            ty = t if ty is None else S.promote(ty, t)
        ty = ty or "i32"
        args = [Lit(a.value, ty) if isinstance(a, Lit) else a for a in args]
        if any(isinstance(a, Lit) and not literal_fits(a.value, ty) for a in args):
            args = [Lit(abs(a.value), ty) if isinstance(a, Lit) else a for a in args]
            if len(args) == 3 and isinstance(args[2], Lit):
                args[2] = Lit(1, ty)
        return self.loop_over(ty, args, depth, ret)

    def edge_loop(self, depth: int, ret: str) -> Stmt:
        """A few steps up to the type's maximum (or down to a signed type's minimum), where
        `counter + step` wraps around: `range(127 - x % 13, 127, 5)` runs as in Python."""
        ty = self.rng.choice([t for t in self.types if S.is_int(t)])
        lo, hi = S.int_range(ty)
        down = S.signed(ty) and self.rng.random() < 0.5
        steps = [s for s in (2, 3, 5, 7, 100, hi // 2 + 1, hi) if s <= hi]
        step = self.rng.choice(steps)
        near = [(n, t) for n, t in self.scope.items() if t == ty]
        edge = lo if down else hi
        k = self.rng.randint(0, 12)
        start: Expr = Conv(Lit(edge + k if down else edge - k, ty), ty)  # typed: not i32
        if near and self.rng.random() < 0.7:  # a run-time start: the loop is not unrolled
            n, t = self.rng.choice(near)
            offset = Bin("mod", Var(n, t), Lit(13, t), t, t)  # 0..12, Python's sign
            start = Bin("add" if down else "sub", Lit(edge, ty), offset, ty, ty)
        stop = Lit(edge - self.rng.randint(0, 2) * (-1 if down else 1), ty)
        return self.loop_over(ty, [start, stop, Lit(-step if down else step, ty)], depth, ret)

    def loop_over(self, ty: str, args: list[Expr], depth: int, ret: str) -> Stmt:
        var = self.fresh("j")
        self.scope[var] = ty
        body = self.block(self.rng.randint(1, 3), depth + 1, ret, True)
        del self.scope[var]
        return For(var, ty, args, body)

    # -- functions -----------------------------------------------------------------------

    def function(self, name: str, params: list[tuple[str, str]], ret: str, size: int,
                 allow_calls: bool) -> Function:
        saved = self.helpers
        if not allow_calls:
            self.helpers = []
        self.scope = dict(params)
        self.used_helpers = []
        body: list[Stmt] = []
        for _ in range(self.rng.randint(1, 3)):  # locals, assigned before any branch
            ty = self.pick_type()
            local = self.fresh("v")
            value = self.expr(ty, 3)
            if isinstance(value, Lit):  # typed: a local bound once to a literal stays weak
                value = Conv(value, ty)
            body.append(Assign(local, ty, value))
            self.scope[local] = ty
        body += self.block(size, 0, ret, False)
        result = self.expr(ret, 3)
        fn = Function(name, params, ret, body, result, helpers=list(self.used_helpers))
        self.helpers = saved
        return fn

    def params(self) -> list[tuple[str, str]]:
        return [(f"a{k}", self.pick_type()) for k in range(self.rng.randint(1, 4))]

    def make_helpers(self, count: int) -> None:
        self.helpers = [self.function(f"h{k}", self.params(), self.pick_type(), 1, False)
                        for k in range(count)]
