"""Control flow on scalars in a tile kernel: `if`, `while`, `a if c else b`, and `and`,
`or`, `not` (mixed into `TileLowering`).

A condition is a compile-time value (a `Const`, a folded expression: the arm taken is
the only one compiled, as Python would run it) or a 0-d tile. Every 0-d tile holds the
same value in every thread of the block (a parameter, a bid, a reduction's result, and
whatever is computed from them), so a branch on one is block-uniform: the whole block
takes one way, and the barriers of the conversions and reductions inside are reached by
all threads or by none (the uniformity pass is told so: `TileBuilder.uniform`). Names
that either way rebinds meet at the join through a tile variable, in the layout of the
first way's value, as loops carry them (`tile/loops.py`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from oxide import types as T
from oxide.errors import KernelTypeError, UnsupportedFeatureError
from oxide.tile.values import Static, Tile, describe

Arm = Callable[[], Any]  # evaluates one way of a branch, returns its value


class TileControlMixin:
    """`stmt_If`, `stmt_While`, `expr_IfExp`, `expr_BoolOp` and `not`."""

    # -- conditions ---------------------------------------------------------------------

    def condition(self, v: Any, node: ast.AST, what: str) -> Static | Tile:
        """A condition: a compile-time number (as it is), or a 0-d tile as a bool (numbers
        compare against zero, as Python's truth does)."""
        if isinstance(v, Static) and isinstance(v.obj, (bool, int, float)):
            return v
        if not (isinstance(v, Tile) and v.ndim == 0):
            raise self.error(KernelTypeError, node,
                             f"{what} needs a scalar condition, not {describe(v)}",
                             hint="select elementwise with `tile.where(cond, a, b)`, or reduce "
                                  "to a scalar first (`tile.max(x) > 0`)")
        if v.dtype.is_bool:
            return v
        if v.dtype.is_fp8:  # the conversion's test (-0.0 is false), not the bits'
            return self.t.cast(v, T.bool_)
        return self.t.compare("ne", v, self.as_tile(Static(0), node, v.dtype))

    def two_ways(self, cond: Tile, arms: tuple[Arm, Arm]) -> tuple[list[tuple[Any, Any]], Any]:
        """Branch on a 0-d bool tile: each arm evaluated in its own block. Returns each
        arm's (end block, value) and the join block (the arms' ends are left open: `join`
        closes them)."""
        scalar = self.t.extract(cond)
        self.b.uniform.add(scalar)  # for passes/uniformity.py: block-uniform
        then_b, else_b, join = self.b.new_block(), self.b.new_block(), self.b.new_block()
        self.b.cond_br(scalar, then_b, else_b)
        ends = []
        for block, arm in zip((then_b, else_b), arms, strict=True):
            self.b.set_block(block)
            value = arm()
            ends.append((self.b.block, value))
        return ends, join

    def join(self, ends: list[tuple[Any, Any]], join: Any) -> None:
        for end, _ in ends:
            self.b.set_block(end)
            self.b.br(join)
        self.b.set_block(join)

    def merge(self, what: str, ends: list[tuple[Any, Any]], node: ast.AST) -> Any:
        """The value a name (or an expression) has after a branch whose arms end with
        `ends`' values: one of them where they are the same, else a tile variable each
        arm's end writes (a number takes the other arm's dtype, as weak literals do, and
        its shape).
        Returns the value, or (its tile, its variable) to read at the join."""
        (then_end, tv), (else_end, ev) = ends
        if tv is ev or (isinstance(tv, Static) and isinstance(ev, Static)
                        and type(tv.obj) is type(ev.obj) and tv.obj == ev.obj):
            return tv
        numbers = [isinstance(v, Static) and isinstance(v.obj, (bool, int, float))
                   for v in (tv, ev)]
        if all(numbers):  # two literals: the type they meet in
            dt = (T.bool_ if all(isinstance(v.obj, bool) for v in (tv, ev)) else
                  T.f32 if any(isinstance(v.obj, float) for v in (tv, ev)) else
                  T.i32 if all(-2**31 <= v.obj < 2**31 for v in (tv, ev)) else T.i64)
            tv = self._in_block(then_end, lambda: self.as_tile(tv, node, dt))
            ev = self._in_block(else_end, lambda: self.as_tile(ev, node, dt))
        elif numbers[0] and isinstance(ev, Tile):  # a number: a tile like the other arm's
            tv = self._in_block(then_end, lambda: self.t.broadcast(
                self.as_tile(tv, node, ev.dtype), ev.shape))
        elif numbers[1] and isinstance(tv, Tile):
            ev = self._in_block(else_end, lambda: self.t.broadcast(
                self.as_tile(ev, node, tv.dtype), tv.shape))
        if not (isinstance(tv, Tile) and isinstance(ev, Tile) and tv.shape == ev.shape
                and tv.dtype == ev.dtype):
            raise self.error(KernelTypeError, node,
                             f"{what} is {describe(tv)} after one arm of this "
                             f"`{'if' if isinstance(node, ast.If) else 'if-else'}` and "
                             f"{describe(ev)} after the other", hint="give it one shape and dtype in both arms "
                                                "(`.astype`, `tile.broadcast_to`)")
        var = self.t.var(tv.shape, tv.dtype)  # in the then-arm's layout (tile/layouts.py)
        for end, v in ((then_end, tv), (else_end, ev)):
            self._in_block(end, lambda v=v: self.t.var_write(var, v))
        return (tv, var)

    def _in_block(self, block: Any, emit: Callable[[], Any]) -> Any:
        """Run `emit` with `block` (an arm's end, not yet terminated) as the insertion point."""
        here = self.b.block
        self.b.set_block(block)
        try:
            return emit()
        finally:
            self.b.set_block(here)

    def read_merged(self, v: Any) -> Any:
        if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], Tile):
            like, var = v
            return self.t.var_read(var, like.shape, like.dtype)
        return v

    # -- statements ---------------------------------------------------------------------

    def stmt_If(self, node: ast.If) -> None:
        cond = self.condition(self.expr(node.test), node.test, "`if`")
        if isinstance(cond, Static):
            for stmt in (node.body if cond.obj else node.orelse):
                self.lower_stmt(stmt)
            return
        self.branch(node, cond)

    def branch(self, node: ast.If, cond: Tile) -> None:
        """`if` on a 0-d tile (see the module docstring): names either arm rebinds are
        merged at the join."""
        before = dict(self.env)

        def arm(body: list[ast.stmt]) -> Arm:
            def run() -> dict[str, Any]:
                self.env = dict(before)
                for stmt in body:
                    self.lower_stmt(stmt)
                return self.env
            return run

        ends, join = self.two_ways(cond, (arm(node.body), arm(node.orelse)))
        (then_end, then_env), (else_end, else_env) = ends
        merged = {name: self.merge(f"`{name}`", [(then_end, then_env[name]),
                                                 (else_end, else_env[name])], node)
                  for name in then_env if name in else_env}
        self.join(ends, join)
        self.env = dict(before)
        for name, v in merged.items():
            self.env[name] = self.read_merged(v)

    def stmt_While(self, node: ast.While) -> None:
        """`while cond:` with a 0-d condition, block-uniform (the whole block runs every
        iteration). The names the body rebinds are carried in tile variables, as a `for`
        carries them; a number bound before the loop becomes a 0-d tile of its default
        type (`i = 0`: i32; start it `i64(0)` for another)."""
        if node.orelse:
            raise self.error(UnsupportedFeatureError, node, "`while ... else` is not supported "
                             "in tile kernels")
        self.refuse_jumps(node.body, "a tile kernel loop")
        carried = self.carry(node, names_stored(node.body))
        header, body, done = self.b.new_block(), self.b.new_block(), self.b.new_block()
        self.b.br(header)
        self.b.set_block(header)
        outside = dict(self.env)
        for name, (t, var) in carried.items():
            self.env[name] = self.t.var_read(var, t.shape, t.dtype)
        at_header = dict(self.env)
        cond = self.condition(self.expr(node.test), node.test, "`while`")
        if isinstance(cond, Static):
            if cond.obj:
                raise self.error(UnsupportedFeatureError, node.test,
                                 "this `while` never ends: its condition is always true and "
                                 "tile kernels have no `break` yet",
                                 hint="loop on a scalar the body changes")
            self.b.br(done)
        else:
            scalar = self.t.extract(cond)
            self.b.uniform.add(scalar)
            self.b.cond_br(scalar, body, done)
            self.b.set_block(body)
            self.loop_depth += 1
            try:
                for stmt in node.body:
                    self.lower_stmt(stmt)
            finally:
                self.loop_depth -= 1
            self.write_carried(node, carried)
            self.b.br(header)
        self.b.set_block(done)
        # after the loop: the values the header read last; names first bound in the body
        # are not visible (it may never have run)
        self.env = outside
        for name in carried:
            self.env[name] = at_header[name]

    def refuse_jumps(self, body: list[ast.stmt], where: str) -> None:
        for n in ast.walk(ast.Module(body=body, type_ignores=[])):
            if isinstance(n, (ast.Break, ast.Continue, ast.Return)):
                raise self.error(UnsupportedFeatureError, n,
                                 f"`{type(n).__name__.lower()}` in {where} is not supported "
                                 "yet", hint="put the condition in the loop's own test "
                                             "(`while`), or loop over the range you need")

    def carry(self, node: ast.stmt, assigned: list[str], loop_var: str | None = None
              ) -> dict[str, tuple[Tile, Any]]:
        """The names a loop body rebinds that hold tiles (or numbers, made 0-d tiles)
        before it: each gets a tile variable holding its value before the loop."""
        carried: dict[str, tuple[Tile, Any]] = {}
        for name in assigned:
            cur = self.env.get(name)
            if isinstance(cur, Static) and isinstance(cur.obj, (bool, int, float)):
                cur = self.as_tile(cur, node)  # `acc = 0.0` before the loop: a 0-d tile
            if isinstance(cur, Tile):
                # its layout: this first write's, or the accumulator layout where the body
                # writes it from a product (tile/layouts.py)
                var = self.t.var(cur.shape, cur.dtype)
                self.t.var_write(var, cur)
                carried[name] = (cur, var)
            elif cur is not None and name != loop_var:
                raise self.error(UnsupportedFeatureError, node,
                                 f"`{name}` is {describe(cur)}; only tiles and numbers can "
                                 "change in a loop")
        return carried

    def write_carried(self, node: ast.stmt, carried: dict[str, tuple[Tile, Any]]) -> None:
        """The carried names' values at the end of the body, into their variables (in the
        variable's layout); each keeps its shape and dtype."""
        for name, (t, var) in carried.items():
            new = self.env.get(name)
            if isinstance(new, Static) and isinstance(new.obj, (bool, int, float)):
                new = self.as_tile(new, node, t.dtype)
            if not isinstance(new, Tile) or new.shape != t.shape or new.dtype != t.dtype:
                raise self.error(KernelTypeError, node,
                                 f"`{name}` is {t.describe()} before the loop and "
                                 f"{describe(new)} at the end of its body",
                                 hint="a value carried through a loop keeps its shape and "
                                      "dtype: convert with `.astype(...)` or "
                                      "`tile.broadcast_to(...)`, or start it with its type "
                                      "(`f32(0)`, `0.0`)")
            self.t.var_write(var, new)  # converted to the variable's layout where it differs

    # -- expressions --------------------------------------------------------------------

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        """`a if c else b`: on a compile-time `c`, only the arm taken is compiled; on a 0-d
        tile, only the arm taken runs (the block takes one way), and the two values meet
        as an `if`'s names do. Elementwise selection is `tile.where(c, a, b)`."""
        c = self.condition(self.expr(node.test), node.test, "`a if c else b`")
        if isinstance(c, Static):
            return self.expr(node.body if c.obj else node.orelse)
        ends, join = self.two_ways(c, (lambda: self.expr(node.body),
                                       lambda: self.expr(node.orelse)))
        merged = self.merge("the value", ends, node)
        self.join(ends, join)
        return self.read_merged(merged)

    def expr_BoolOp(self, node: ast.BoolOp) -> Any:
        """`and` / `or` as Python evaluates them: left to right, stopping at the first
        operand that decides. Compile-time operands decide at compile time (so `FLAG or
        other` on a Const compiles only what runs, and gives the operand itself, as
        Python); a 0-d tile decides at run time, block-uniformly, and the result is a
        `bool_` 0-d tile (as SIMT kernels give `bool_`)."""
        return self._bool_chain(isinstance(node.op, ast.And), node.values, node)

    def _bool_chain(self, is_and: bool, values: list[ast.expr], node: ast.BoolOp) -> Any:
        first = self.expr(values[0])
        if len(values) == 1:
            if isinstance(first, Static) and not isinstance(first.obj, (bool, int, float)):
                raise self.error(KernelTypeError, values[0], f"`{'and' if is_and else 'or'}` "
                                 f"takes conditions, not {describe(first)}")
            return first
        cond = self.condition(first, values[0], f"`{'and' if is_and else 'or'}`")
        if isinstance(cond, Static):
            if bool(cond.obj) != is_and:  # `False and ...`, `True or ...`: decided
                return cond
            return self._bool_chain(is_and, values[1:], node)

        def rest() -> Tile:
            v = self.condition(self._bool_chain(is_and, values[1:], node), values[1],
                               f"`{'and' if is_and else 'or'}`")
            return self.as_tile(Static(bool(v.obj)), node, T.bool_) \
                if isinstance(v, Static) else v

        def decided() -> Tile:
            return self.as_tile(Static(not is_and), node, T.bool_)

        ends, join = self.two_ways(cond, (rest, decided) if is_and else (decided, rest))
        merged = self.merge("the condition", ends, node)
        self.join(ends, join)
        return self.read_merged(merged)

    def logical_not(self, v: Any, node: ast.UnaryOp) -> Any:
        """`not c` of a 0-d tile: a bool 0-d tile (`~x` is elementwise on bool tiles)."""
        if isinstance(v, Tile) and v.ndim:
            raise self.error(KernelTypeError, node, f"`not` needs a scalar, not {v.describe()}",
                             hint="use `~x` on bool tiles (elementwise)")
        cond = self.condition(v, node.operand, "`not`")
        assert isinstance(cond, Tile)
        return self.t.binary("xor", cond, self.t.full((), True, T.bool_))


def names_stored(body: list[ast.stmt]) -> list[str]:
    """The names `body` assigns, in order of first assignment."""
    out: list[str] = []
    for n in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id not in out:
            out.append(n.id)
    return out
