"""Generated programs as trees that both print as kernel source and run on the reference.

Each node knows its type (a name from `semantics`), how it renders as oxide source,
and how it evaluates under the reference semantics. The interpreter is this file's
`eval`/`run` methods; it never calls oxide.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tools.fuzzing import semantics as S

_SYM = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%",
        "and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>"}
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
TYPE_NAME = {t: t for t in S.NUMERIC} | {"bool": "bool_"}


class Env:
    """A running function's variables and the faults it has raised."""

    def __init__(self, values: dict[str, Any], faults: S.Faults) -> None:
        self.values = values
        self.faults = faults


def truth(ty: str, v: Any) -> bool:
    """A condition's value: numbers compare against zero (NaN is true)."""
    return bool(v) if ty == "bool" else bool(v != 0)


class Expr:
    ty: str

    def render(self) -> str:
        raise NotImplementedError

    def eval(self, env: Env) -> Any:
        raise NotImplementedError

    def children(self) -> list[Expr]:
        return []


@dataclass
class Var(Expr):
    name: str
    ty: str

    def render(self) -> str:
        return self.name

    def eval(self, env: Env) -> Any:
        return env.values[self.name]


@dataclass
class Lit(Expr):
    """A weak literal; `ty` is the type it takes next to its typed partner."""

    value: int | float
    ty: str

    def render(self) -> str:
        if isinstance(self.value, float):
            text = repr(self.value)
            return f"({text})" if text.startswith("-") else text
        return f"({self.value})" if self.value < 0 else str(self.value)

    def eval(self, env: Env) -> Any:
        return S.literal_value(self.value, self.ty)


def _at(e: Expr, ty: str, env: Env) -> Any:
    """`e`'s value converted to the operation type `ty` (implicit promotion)."""
    v = e.eval(env)
    return v if isinstance(e, Lit) or e.ty == ty else S.to_type(v, e.ty, ty)


@dataclass
class Bin(Expr):
    """`a op b`, computed at `opty`; the result has type `ty` (differs only for `/`)."""

    kind: str
    a: Expr
    b: Expr
    opty: str
    ty: str

    def render(self) -> str:
        return f"({self.a.render()} {_SYM[self.kind]} {self.b.render()})"

    def eval(self, env: Env) -> Any:
        x, y = _at(self.a, self.opty, env), _at(self.b, self.opty, env)
        if self.kind == "div" and S.is_int(self.opty):
            x, y = S.to_type(x, self.opty, self.ty), S.to_type(y, self.opty, self.ty)
            return S.binary("div", self.ty, x, y, env.faults)
        return S.binary(self.kind, self.opty, x, y, env.faults)

    def children(self) -> list[Expr]:
        return [self.a, self.b]


@dataclass
class Pow(Expr):
    """`a ** k` with a constant exponent: `k` multiplications, left to right, from 1."""

    a: Expr
    k: int
    ty: str

    def render(self) -> str:
        return f"({self.a.render()} ** {self.k})"

    def eval(self, env: Env) -> Any:
        x = self.a.eval(env)
        acc = S.to_type(1, "i32", self.ty)
        for _ in range(self.k):
            acc = S.binary("mul", self.ty, acc, x, env.faults)
        return acc

    def children(self) -> list[Expr]:
        return [self.a]


@dataclass
class Unary(Expr):
    kind: str  # neg, invert, abs
    a: Expr
    ty: str

    def render(self) -> str:
        if self.kind == "abs":
            return f"abs({self.a.render()})"
        return f"({'-' if self.kind == 'neg' else '~'}{self.a.render()})"

    def eval(self, env: Env) -> Any:
        return S.unary(self.kind, self.ty, self.a.eval(env))

    def children(self) -> list[Expr]:
        return [self.a]


@dataclass
class MinMax(Expr):
    kind: str
    args: list[Expr]
    ty: str

    def render(self) -> str:
        return f"{self.kind}({', '.join(a.render() for a in self.args)})"

    def eval(self, env: Env) -> Any:
        vals = [_at(a, self.ty, env) for a in self.args]
        acc = vals[0]
        for v in vals[1:]:
            acc = S.binary(self.kind, self.ty, acc, v, env.faults)
        return acc

    def children(self) -> list[Expr]:
        return list(self.args)


@dataclass
class Conv(Expr):
    a: Expr
    ty: str

    def render(self) -> str:
        return f"{TYPE_NAME[self.ty]}({self.a.render()})"

    def eval(self, env: Env) -> Any:
        return S.to_type(self.a.eval(env), self.a.ty, self.ty)

    def children(self) -> list[Expr]:
        return [self.a]


@dataclass
class Cmp(Expr):
    """`a < b` or a chain `a < b <= c`; each pair compares at its promoted type."""

    kinds: list[str]
    operands: list[Expr]
    ty: str = "bool"

    def render(self) -> str:
        parts = [self.operands[0].render()]
        for k, o in zip(self.kinds, self.operands[1:], strict=True):
            parts += [_CMP[k], o.render()]
        return f"({' '.join(parts)})"

    def eval(self, env: Env) -> Any:
        """Each operand at most once, and a false link skips the operands after it (as
        Python's chains do; docs/language.md), so their faults are never reported."""
        left = self.operands[0].eval(env)
        for i, k in enumerate(self.kinds):
            a, b = self.operands[i], self.operands[i + 1]
            right = b.eval(env)
            t = pair_type(a, b)
            x = left if isinstance(a, Lit) or a.ty == t else S.to_type(left, a.ty, t)
            y = right if isinstance(b, Lit) or b.ty == t else S.to_type(right, b.ty, t)
            if isinstance(a, Lit):
                x = S.literal_value(a.value, t)
            if isinstance(b, Lit):
                y = S.literal_value(b.value, t)
            if not S.compare(k, x, y):
                return False
            left = right
        return True

    def children(self) -> list[Expr]:
        return list(self.operands)


def pair_type(a: Expr, b: Expr) -> str:
    """The type two comparison operands meet at (a literal takes its partner's type)."""
    if isinstance(a, Lit):
        return b.ty
    if isinstance(b, Lit):
        return a.ty
    return S.promote(a.ty, b.ty)


@dataclass
class BoolOp(Expr):
    kind: str  # and, or
    values: list[Expr]
    ty: str = "bool"

    def render(self) -> str:
        return "(" + f" {self.kind} ".join(v.render() for v in self.values) + ")"

    def eval(self, env: Env) -> Any:
        for v in self.values:
            t = truth(v.ty, v.eval(env))
            if t != (self.kind == "and"):
                return t
        return self.kind == "and"

    def children(self) -> list[Expr]:
        return list(self.values)


@dataclass
class Not(Expr):
    a: Expr
    ty: str = "bool"

    def render(self) -> str:
        return f"(not {self.a.render()})"

    def eval(self, env: Env) -> Any:
        return not truth(self.a.ty, self.a.eval(env))

    def children(self) -> list[Expr]:
        return [self.a]


@dataclass
class IfExp(Expr):
    cond: Expr
    a: Expr
    b: Expr
    ty: str

    def render(self) -> str:
        return f"({self.a.render()} if {self.cond.render()} else {self.b.render()})"

    def eval(self, env: Env) -> Any:
        side = self.a if truth(self.cond.ty, self.cond.eval(env)) else self.b
        return _at(side, self.ty, env)

    def children(self) -> list[Expr]:
        return [self.cond, self.a, self.b]


@dataclass
class Call(Expr):
    fn: Function
    args: list[Expr]
    ty: str

    def render(self) -> str:
        return f"{self.fn.name}({', '.join(a.render() for a in self.args)})"

    def eval(self, env: Env) -> Any:
        vals = [a.eval(env) if not isinstance(a, Lit) else S.literal_value(a.value, p[1])
                for a, p in zip(self.args, self.fn.params, strict=True)]
        return self.fn.call(vals, env.faults)

    def children(self) -> list[Expr]:
        return list(self.args)


# -- statements ----------------------------------------------------------------------------

class BreakSignal(Exception):
    pass


class ContinueSignal(Exception):
    pass


class ReturnSignal(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


class Stmt:
    def render(self, indent: str) -> list[str]:
        raise NotImplementedError

    def run(self, env: Env) -> None:
        raise NotImplementedError


@dataclass
class Assign(Stmt):
    name: str
    ty: str
    value: Expr
    aug: str | None = None  # `+=` and friends: the operator kind

    def render(self, indent: str) -> list[str]:
        op = f" {_SYM[self.aug]}= " if self.aug else " = "
        return [f"{indent}{self.name}{op}{self.value.render()}"]

    def run(self, env: Env) -> None:
        v = self.value.eval(env)
        if isinstance(self.value, Lit):
            v = S.literal_value(self.value.value, self.ty)
        if self.aug:
            v = S.binary(self.aug, self.ty, env.values[self.name], v, env.faults)
        env.values[self.name] = v


@dataclass
class If(Stmt):
    cond: Expr
    body: list[Stmt]
    orelse: list[Stmt] = field(default_factory=list)

    def render(self, indent: str) -> list[str]:
        lines = [f"{indent}if {self.cond.render()}:"]
        lines += render_block(self.body, indent + "    ")
        if self.orelse:
            lines.append(f"{indent}else:")
            lines += render_block(self.orelse, indent + "    ")
        return lines

    def run(self, env: Env) -> None:
        run_block(self.body if truth(self.cond.ty, self.cond.eval(env)) else self.orelse, env)


@dataclass
class While(Stmt):
    """`c = 0; while c < limit and cond: c += 1; body` (bounded by construction)."""

    counter: str
    limit: int
    cond: Expr
    body: list[Stmt]

    def render(self, indent: str) -> list[str]:
        inner = indent + "    "
        return ([f"{indent}{self.counter} = 0",
                 f"{indent}while {self.counter} < {self.limit} and {self.cond.render()}:",
                 f"{inner}{self.counter} += 1"] + render_block(self.body, inner))

    def run(self, env: Env) -> None:
        env.values[self.counter] = 0
        while env.values[self.counter] < self.limit and truth(self.cond.ty, self.cond.eval(env)):
            env.values[self.counter] += 1
            try:
                run_block(self.body, env)
            except BreakSignal:
                break
            except ContinueSignal:
                continue


@dataclass
class For(Stmt):
    var: str
    ty: str  # the loop variable's type: the common type of the range arguments
    args: list[Expr]  # 1 to 3 range() arguments
    body: list[Stmt]

    def render(self, indent: str) -> list[str]:
        head = f"{indent}for {self.var} in range({', '.join(a.render() for a in self.args)}):"
        return [head] + render_block(self.body, indent + "    ")

    def run(self, env: Env) -> None:
        vals = [S.literal_value(a.value, self.ty) if isinstance(a, Lit) else
                S.to_type(a.eval(env), a.ty, self.ty) for a in self.args]
        start, stop, step = ((0, vals[0], 1) if len(vals) == 1 else
                             (vals[0], vals[1], 1) if len(vals) == 2 else vals)
        if step == 0:  # reported, and the loop runs no iteration (docs/language.md)
            env.faults.add("range() step must not be zero")
            return
        for j in range(start, stop, step):
            env.values[self.var] = j
            try:
                run_block(self.body, env)
            except BreakSignal:
                break
            except ContinueSignal:
                continue


@dataclass
class Jump(Stmt):
    kind: str  # break, continue

    def render(self, indent: str) -> list[str]:
        return [f"{indent}{self.kind}"]

    def run(self, env: Env) -> None:
        raise BreakSignal() if self.kind == "break" else ContinueSignal()


@dataclass
class Return(Stmt):
    value: Expr
    ty: str

    def render(self, indent: str) -> list[str]:
        return [f"{indent}return {self.value.render()}"]

    def run(self, env: Env) -> None:
        v = self.value.eval(env)
        if isinstance(self.value, Lit):
            v = S.literal_value(self.value.value, self.ty)
        raise ReturnSignal(v)


def render_block(stmts: list[Stmt], indent: str) -> list[str]:
    lines = [line for s in stmts for line in s.render(indent)]
    return lines or [f"{indent}pass"]


def run_block(stmts: list[Stmt], env: Env) -> None:
    for s in stmts:
        s.run(env)


@dataclass
class Function:
    """An `@ox.func`: a generated program (called by the kernel) or a helper it calls."""

    name: str
    params: list[tuple[str, str]]
    ret: str
    body: list[Stmt]
    result: Expr
    columns: list[int] = field(default_factory=list)  # programs: the input column per param
    helpers: list[Function] = field(default_factory=list)  # the helpers it calls

    def render(self) -> list[str]:
        sig = ", ".join(f"{n}: {TYPE_NAME[t]}" for n, t in self.params)
        lines = ["@ox.func", f"def {self.name}({sig}) -> {TYPE_NAME[self.ret]}:"]
        lines += [line for s in self.body for line in s.render("    ")]
        lines.append(f"    return {self.result.render()}")
        return lines

    def call(self, args: list[Any], faults: S.Faults) -> Any:
        env = Env({n: v for (n, _), v in zip(self.params, args, strict=True)}, faults)
        try:
            run_block(self.body, env)
            v = self.result.eval(env)
            if isinstance(self.result, Lit):
                v = S.literal_value(self.result.value, self.ret)
            return v
        except ReturnSignal as r:
            return r.value


def coerce(v: Any, ty: str) -> Any:
    """A value read from a NumPy array as the reference holds it."""
    if S.is_float(ty):
        return S.NP[ty](v)
    if ty == "bool":
        return bool(v)
    return int(np.asarray(v).item())
