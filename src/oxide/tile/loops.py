"""Tile kernel loops: `for k in range(...)`, the persistent `for t in tile.tiles(n)`, and
`num_stages` software pipelining of the loads in a loop body.

`TileLoopsMixin` is mixed into `tile/frontend.py`'s TileLowering (it uses its `env`,
builder `b`, emitter `em` and expression evaluation). What a loop assumes: every thread
runs every iteration (the bounds are block-uniform: Const values, scalars, extents, bids),
so the barriers inside are reached by all. What it guarantees: the tiles the body rebinds
keep their shape and dtype, carried in slots in the layout they had before the loop; a
pipelined load reads only names the body does not assign, from an array the body does
not store to, so issuing it iterations ahead reads the same values.
"""

from __future__ import annotations

import ast
import builtins
import copy
from typing import Any

from oxide import types as T
from oxide.errors import CompileError, KernelSyntaxError, KernelTypeError, UnsupportedFeatureError
from oxide.frontend.loops import next_counter
from oxide.ir import ops
from oxide.ir.types import ir_type
from oxide.runtime.witness_rules import run_rule
from oxide.tile import lang
from oxide.tile.control import names_stored
from oxide.tile.run_witness import run_of
from oxide.tile.values import Static, Tile, Witness, describe


class TileLoopsMixin:
    """`stmt_For` and the pipelining it does (mixed into TileLowering)."""

    def _persistent_loop(self, it: ast.expr) -> bool:
        """Whether `it` is `tile.tiles(n)` (the persistent loop)."""
        if not (isinstance(it, ast.Call) and _is_dotted_name(it.func)):
            return False
        try:
            fn = self.expr(it.func)  # a name or attribute lookup: no IR
        except CompileError:
            return False
        return isinstance(fn, Static) and fn.obj is lang.tiles

    def stmt_For(self, node: ast.For) -> None:
        """`for k in range(start, stop, step)` with run-time bounds and a constant step.

        `for t in tile.tiles(n)` is the persistent loop: `range(tile.bid(0), n,
        tile.num_blocks(0))`, whose `t` is a TileIndex of grid axis 0 (each t in [0, n)
        is visited by exactly one block, once), so a DisjointSlice is stored at `t` (or
        at `tile.grouped(t, ...)`) as at `tile.bid(0)`.

        The tiles the body rebinds are carried in slots, one per element a thread holds,
        in the layout they had before the loop (a body value in another layout is
        converted back), so the loop is one CFG loop over the SIMT IR. Every thread runs
        every iteration: the bounds are block-uniform (Const, scalars, extents, bids).
        """
        if node.orelse:
            raise self.error(UnsupportedFeatureError, node, "`for ... else` is not supported "
                             "in tile kernels")
        it = node.iter
        persistent = self._persistent_loop(it)
        if persistent and (it.keywords or len(it.args) != 1):
            raise self.error(KernelTypeError, it, "`tile.tiles(n)` takes the number of tiles")
        if not persistent and not (
                isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                and self.load_name(it.func.id, it.func) == Static(builtins.range)
                and not it.keywords and 1 <= len(it.args) <= 3):
            raise self.error(UnsupportedFeatureError, it, "tile kernels loop over `range(...)` "
                             "only", hint="e.g. `for k in range(tile.num_tiles(a, 1, BK)):`")
        if not isinstance(node.target, ast.Name):
            raise self.error(KernelSyntaxError, node.target, "the loop variable is one name")
        self.refuse_jumps(node.body, "a tile kernel loop")
        args = [self.expr(a) for a in it.args]
        start, stop, step = ((Static(0), args[0], Static(1)) if len(args) == 1 else
                             (args[0], args[1], args[2] if len(args) == 3 else Static(1)))
        if not persistent and len(args) == 3 and _grid_stride(start, step):
            # `range(tile.bid(0), n, tile.num_blocks(0))`, Triton's persistent loop as its
            # tutorials write it: the same loop as `tile.tiles(n)`, and its variable the
            # same witness
            persistent, it = True, ast.Call(func=it.func, args=[it.args[1]], keywords=[])
            ast.copy_location(it, node.iter)
        if persistent:  # from this block's index, by the grid's size: each t in one block
            start = self.scalar_tile(self.b.value(ops.RegisterOp("ctaid.x", ir_type(T.i32))),
                                     T.i32)
            step = self.scalar_tile(self.b.value(ops.RegisterOp("nctaid.x", ir_type(T.i32))),
                                    T.i32)
        step_node = it.args[2] if len(it.args) == 3 else it
        if not persistent and not (isinstance(step.obj if isinstance(step, Static) else None,
                                              int) and step.obj != 0):
            raise self.error(UnsupportedFeatureError, step_node,
                             "the step of a tile kernel loop is a non-zero constant",
                             hint="a stride of the grid's size is the persistent loop: "
                                  "`range(tile.bid(0), n, tile.num_blocks(0))` or "
                                  "`tile.tiles(n)`, whose variable a DisjointSlice may "
                                  "also be stored at")
        for v, n in zip((start, stop), it.args if len(it.args) > 1 and not persistent
                        else (it, it.args[0]), strict=False):
            if not ((isinstance(v, Static) and isinstance(v.obj, int)
                     and not isinstance(v.obj, bool))
                    or (isinstance(v, Tile) and v.ndim == 0 and v.dtype.is_int)):
                raise self.error(KernelTypeError, n, f"range() takes integers, not "
                                 f"{describe(v)}")
        dt = T.i32
        for v in (start, stop):
            if isinstance(v, Tile):
                dt = self.promote(Tile(dt, v.shape, v.ssa), v, it)
        if dt == T.i32 and any(isinstance(v, Static) and not -(2**31) <= v.obj < 2**31
                               for v in (start, stop, step)):
            dt = T.i64  # `range(0, n, 2**40)`: counted in i64, as Python counts it
        if persistent:  # t + num_blocks must not wrap past a stop near 2**31
            dt = T.i64
        run = (run_of(start, stop, self.stores.witness_of)
               if not persistent and isinstance(start, Tile) and isinstance(stop, Tile)
               and step.obj > 0 else None)
        if run is not None and run.narrow:  # `b * R` in 32 bits: the grid must keep it
            self.stores.launch_rules.add(run_rule(run.witness.axis, run.rows))
        # the names the body rebinds that hold tiles now: carried in slots
        assigned = names_stored(node.body)
        if not persistent and self.num_stages >= 2:
            node = _inline_load_indices(node, assigned, lambda n: self._calls(n, lang.load))
            node = self._hoist_nested_loads(node, assigned)
            assigned += [n for n in names_stored(node.body) if n not in assigned]
        piped = ([] if persistent or self.num_stages < 2 else
                 self._pipelined_loads(node, assigned))
        ahead = self.num_stages - 1
        # the first iterations' tiles, loaded before the loop into names no code can spell
        first_pipe, self.pipes = self.pipes, self.pipes + len(piped)
        # a pipe names its loop inside the pipelined loops around it: rings of loops
        # that do not nest may share their buffers (tile/operand_rings.py)
        enclosing = self.pipe_loops
        loops = (*enclosing, first_pipe) if piped else enclosing
        # a load issued ahead is live where its iteration runs: the copy of one that does
        # not is skipped (tile/tma_rings.py), so a loop ends with no fill nobody reads
        bound = (self.t.cast(self.as_tile(stop, it, dt), dt), step.obj > 0) if piped else None
        orders: dict[str, tuple[int, ...] | None] = {}  # a piped load's `order=`
        for n, (stmt, name) in enumerate(piped):
            for j in range(ahead):
                first = self._with_index(node.target.id, start, step.obj * j, dt, stmt.value,
                                         (first_pipe + n, ahead, j == 0, loops), bound)
                orders[name] = self.piped_order
                self.env[_ahead(name, j)] = first
                assigned.append(_ahead(name, j))
        carried = self.carry(node, assigned, node.target.id)
        counter = self.b.alloc(ops.SlotOp(ir_type(dt)))
        self.b.emit(ops.SlotWriteOp(counter, self.t.extract(self.as_tile(start, it, dt))
                                    if isinstance(start, Static)
                                    else self.b.cast(self.t.extract(start), dt)))
        stop_v = (self.t.extract(self.as_tile(stop, it, dt)) if isinstance(stop, Static)
                  else self.b.cast(self.t.extract(stop), dt))
        header, body, done = self.b.new_block(), self.b.new_block(), self.b.new_block()
        self.b.br(header)
        self.b.set_block(header)
        k = self.b.value(ops.SlotReadOp(counter))
        ascending = persistent or step.obj > 0
        go = self.b.value(ops.CompareOp("lt" if ascending else "gt", k, stop_v))
        # bounds are 0-d tiles (every thread holds them alike) and the counter starts and
        # steps alike: for passes/uniformity.py, the loop runs as often in every thread (a
        # bound reduced over a layout replicated across warps is the same in each warp,
        # which the lattice there cannot see)
        self.b.uniform.add(go)
        self.b.cond_br(go, body, done)
        self.b.set_block(body)
        outside = dict(self.env)
        for name, (t, var) in carried.items():
            self.env[name] = self.t.var_read(var, t.shape, t.dtype)
        index = self.scalar_tile(k, dt)
        if persistent:
            index = self.witness(index, Witness(0))
        elif run is not None:  # a block's run of rows (tile/run_witness.py)
            index = self.witness(index, run.witness)
        self.env[node.target.id] = index
        self.stores.persistent |= persistent
        skipped = set()
        # this iteration's tile, and a later one's load issued now
        for n, (stmt, name) in enumerate(piped):
            skipped.add(id(stmt))
            self.env[name] = self.env[_ahead(name, 0)]
            if orders[name] is not None:  # loaded as the array lays it out (tile/memory.py)
                self.env[name] = self.t.permute(self.env[name], orders[name])
            later = self._with_index(node.target.id, index, step.obj * ahead, dt, stmt.value,
                                     (first_pipe + n, ahead, False, loops), bound)
            for j in range(ahead - 1):
                self.env[_ahead(name, j)] = self.env[_ahead(name, j + 1)]
            self.env[_ahead(name, ahead - 1)] = later
            self.env[node.target.id] = index
        self.pipe_loops = loops
        self.loop_depth += 1
        try:
            for stmt in node.body:
                if id(stmt) not in skipped:
                    self.lower_stmt(stmt)
        finally:
            self.pipe_loops = enclosing
            self.loop_depth -= 1
        self.write_carried(node, carried)
        step_v = (self.b.cast(self.t.extract(step), dt) if persistent
                  else self.t.extract(self.as_tile(step, step_node, dt)))
        # `k + step` may wrap past `stop` (`range(0, 2**31 - 1, 2**30)` in i32 would run
        # forever): the next value is `stop` where the step would pass it, as in SIMT loops
        self.b.emit(ops.SlotWriteOp(counter, next_counter(
            self.b, k, stop_v, None if persistent else step.obj, step_v, dt)))
        self.b.br(header)
        self.b.set_block(done)
        # after the loop: the carried tiles' last values; names first bound in the body
        # are not visible (they may never have been assigned)
        self.env = outside
        for name, (t, var) in carried.items():
            self.env[name] = self.t.var_read(var, t.shape, t.dtype)

    def _hoist_nested_loads(self, node: ast.For, assigned: list[str]) -> ast.For:
        """The loop with each `tile.load(...)` that sits inside a top-level statement's
        expression (`acc = tile.mma(tile.load(a, ...), ..., acc)`) moved into a statement
        of its own just before it, `<load k> = tile.load(...)` (a name no code can spell),
        so that `_pipelined_loads` can issue it ahead like a named one. Only a load whose
        arguments read the loop variable and names the body does not assign moves: it
        reads the same values earlier, and a load has no effect but its result (it
        cannot fault); one under a conditional expression stays put. The kernel's own
        tree is not changed (its statements are copied)."""
        loop_var = node.target.id  # type: ignore[attr-defined]
        lowering = self

        class Hoist(ast.NodeTransformer):
            def __init__(self) -> None:
                self.hoisted: list[ast.stmt] = []

            def visit_IfExp(self, n: ast.IfExp) -> ast.AST:
                return n  # evaluated only on one arm: stays put

            def visit_Call(self, n: ast.Call) -> ast.AST:
                if not lowering._calls(n, lang.load):
                    return self.generic_visit(n)
                reads = {r.id for r in ast.walk(n) if isinstance(r, ast.Name)}
                if any(r != loop_var and r in assigned for r in reads):
                    return n
                name = f"load\0{count[0]}"
                count[0] += 1
                target = ast.copy_location(ast.Name(name, ast.Store()), n)
                self.hoisted.append(ast.copy_location(ast.Assign([target], n), n))
                return ast.copy_location(ast.Name(name, ast.Load()), n)

        count = [0]
        body: list[ast.stmt] = []
        for stmt in node.body:
            named = isinstance(stmt, ast.Assign) and self._calls(stmt.value, lang.load)
            if named or isinstance(stmt, (ast.For, ast.If, ast.With)):
                body.append(stmt)  # already `x = tile.load(...)`, or not a simple statement
                continue
            hoist = Hoist()
            stmt = hoist.visit(copy.deepcopy(stmt))
            body += hoist.hoisted + [stmt]
        if not count[0]:
            return node
        return ast.copy_location(ast.For(node.target, node.iter, body, node.orelse,
                                         node.type_comment), node)

    def _calls(self, node: ast.AST, fn: Any) -> bool:
        """Whether `node` is a call of the tile operation `fn`, by a name or attribute
        lookup of its callee (which evaluates nothing and emits no IR)."""
        if not (isinstance(node, ast.Call) and _is_dotted_name(node.func)):
            return False
        try:
            found = self.expr(node.func)
        except CompileError:
            return False
        return isinstance(found, Static) and found.obj is fn

    def _pipelined_loads(self, node: ast.For, assigned: list[str]
                         ) -> list[tuple[ast.Assign, str]]:
        """The `x = tile.load(...)` statements at the top level of the loop body that
        `num_stages` issues ahead: x neither read nor bound by a statement before it in
        the body (the iteration's tile is bound to x as the iteration starts; a later
        statement may rebind x, as `x = x.astype(f32)` or `if SCALE: x = x * s` do), the
        arguments reading only the loop variable and names the body does not assign, and
        the array one the body does not store to (a later iteration's tile read early
        could miss this iteration's store: a RawSlice written in the loop)."""
        loop_var = node.target.id  # type: ignore[attr-defined]
        written = {n.args[0].id for n in ast.walk(ast.Module(body=node.body, type_ignores=[]))
                   if self._calls(n, lang.store) and n.args and isinstance(n.args[0], ast.Name)}
        out = []
        for at, stmt in enumerate(node.body):
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name) and self._calls(stmt.value,
                                                                              lang.load)):
                continue
            name = stmt.targets[0].id
            before = {n.id for n in ast.walk(ast.Module(body=node.body[:at], type_ignores=[]))
                      if isinstance(n, ast.Name)}
            reads = {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)}
            array = stmt.value.args[0] if stmt.value.args else None
            if isinstance(array, ast.Name) and array.id in written:
                continue
            if name not in before and name != loop_var and all(
                    r == loop_var or r not in assigned for r in reads):
                out.append((stmt, name))
        return out

    def _with_index(self, loop_var: str, base: Any, offset: int, dt: T.DType,
                    expr: ast.expr, pipe: tuple[int, int, bool, tuple[int, ...]],
                    bound: tuple[Tile, bool] | None = None) -> Any:
        """`expr` evaluated with the loop variable bound to `base + offset` (a scalar), its
        loads tagged with `pipe` (`TileLowering.load_pipe`); with `bound` (the loop's stop
        and whether it ascends), also with whether that iteration runs (`load_live`). A
        load with `order=` comes back as the array lays it out, its order in
        `piped_order`: the body permutes it where it binds the name, so a product sees
        `permute(load)` there, which wgmma reads as it lies (tile/layouts.py)."""
        saved = self.env.get(loop_var)
        k = self.as_tile(base, expr, dt) if not isinstance(base, Tile) else base
        k = self.t.cast(k, dt)
        if offset:
            k = self.t.binary("add", k, self.t.full((), offset, dt))
        self.env[loop_var] = k
        self.load_pipe = pipe
        self.piped_order = None
        if bound is not None:
            self.load_live = self.t.compare("lt" if bound[1] else "gt", k, bound[0])
        try:
            return self.expr(expr)
        finally:
            self.load_pipe = None
            self.load_live = None
            if saved is None:
                self.env.pop(loop_var, None)
            else:
                self.env[loop_var] = saved


# what a substituted index may hold: names, constants, + - * and unary minus (no division,
# which a load issued ahead for an iteration that does not run could evaluate by zero)
_INDEX_EXPR = (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.Add, ast.Sub, ast.Mult,
               ast.USub, ast.UAdd, ast.expr_context)


def _inline_load_indices(node: ast.For, assigned: list[str], is_load: Any) -> ast.For:
    """The loop with each name the body binds once to sums and products of the loop
    variable, constants and names the body does not assign (`k = s * STEPS + kk`, a split K loop's
    step) replaced by that arithmetic inside the `tile.load(...)` calls of the statements
    after it, so that `_hoist_nested_loads` and `_pipelined_loads` can issue those loads
    ahead as they would `tile.load(a, (i, s * STEPS + kk), ...)`.

    Why it means the same: the arithmetic's operands hold the same values wherever the
    iteration reads them (the loop variable is the iteration's, the other names are not
    assigned in the body), and it has no effects, so a load reads the same element
    through the substituted expression as through the name. A definition that reads an
    earlier one is substituted in turn (`k0 = s * STEPS; k = k0 + kk`). Only top-level
    `name = expr` statements with a name assigned nowhere else in the body count; the
    statements themselves stay (the names keep their other uses). The kernel's own tree
    is not changed (the statements that change are copies)."""
    loop_var = node.target.id  # type: ignore[attr-defined]
    stores: dict[str, int] = {}
    for n in ast.walk(ast.Module(body=node.body, type_ignores=[])):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            stores[n.id] = stores.get(n.id, 0) + 1
    subs: dict[str, ast.expr] = {}

    class Substitute(ast.NodeTransformer):
        def visit_Name(self, n: ast.Name) -> ast.AST:
            if isinstance(n.ctx, ast.Load) and n.id in subs:
                return ast.copy_location(copy.deepcopy(subs[n.id]), n)
            return n

    class InLoads(ast.NodeTransformer):
        def visit_Call(self, n: ast.Call) -> ast.AST:
            return Substitute().visit(n) if is_load(n) else self.generic_visit(n)

    body: list[ast.stmt] = []
    for stmt in node.body:
        if subs:
            stmt = InLoads().visit(copy.deepcopy(stmt))
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and stores.get(stmt.targets[0].id) == 1
                and stmt.targets[0].id != loop_var):
            value = Substitute().visit(copy.deepcopy(stmt.value))
            parts = list(ast.walk(value))
            if all(isinstance(p, _INDEX_EXPR) for p in parts) and all(
                    p.id == loop_var or p.id not in assigned
                    for p in parts if isinstance(p, ast.Name)):
                subs[stmt.targets[0].id] = value
        body.append(stmt)
    if not subs:
        return node
    return ast.copy_location(ast.For(node.target, node.iter, body, node.orelse,
                                     node.type_comment), node)


def _ahead(name: str, j: int) -> str:
    """The loop-carried name of the tile `name` loads j + 1 iterations ahead (num_stages):
    no Python name holds a NUL, so no user name can clash."""
    return f"{name}\0ahead{j}"


def _is_dotted_name(node: ast.expr) -> bool:
    """`name` or `name.attr.attr`: looking it up evaluates nothing."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _grid_stride(start: Any, step: Any) -> bool:
    """Whether `start` is `tile.bid(0)` itself and `step` `tile.num_blocks(0)` (a
    `tile.from_scalar` of the `nctaid.x` register)."""
    if not (isinstance(start, Tile) and start.witness == Witness(0) and isinstance(step, Tile)
            and step.ndim == 0):
        return False
    owner = step.ssa.owner
    if getattr(owner, "name", None) != "tile.from_scalar":
        return False
    reg = owner.operands[0].owner
    return isinstance(reg, ops.RegisterOp) and reg.reg.data == "nctaid.x"
