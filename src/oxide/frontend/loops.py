"""Loops: `while`, `for` over `range` (exact trip counts, wrap-safe increments, unrolling
where a tuple is indexed by the loop variable), `break` and `continue`.

Mixed into FunctionLowering. Definite assignment follows each loop: after a constant
range that runs at least once, what every iteration assigns is assigned; after any
other loop, only what was assigned before it or on every path out through a `break`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from xdsl.ir import Block, SSAValue

from oxide import types as T
from oxide.errors import KernelSyntaxError, KernelTypeError, UnsupportedFeatureError
from oxide.frontend.builder import IRBuilder
from oxide.frontend.definite import LoopAssignments, copy_assigned, meet_paths
from oxide.frontend.values import Lit, ShapeOf, SlotTuple, Tup, Val, describe
from oxide.ir import ops
from oxide.ir.types import ir_type

UNROLL_MAX_TRIPS = 32


def _wraps(start: Any, stop: Any, step: Any, dt: T.DType) -> bool:
    """Whether `counter + step` may pass the type's range: unknown unless all are constant."""
    if not all(isinstance(v, Lit) for v in (start, stop, step)) or step.value == 0:
        return True
    lo, hi = ((-(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1) if dt.is_signed
              else (0, (1 << dt.bits) - 1))
    return not lo <= start.value + _trips(start, stop, step) * step.value <= hi


def _unroll_fully(start: Any, stop: Any, step: Any) -> bool:
    """Whether a `range` loop has constant bounds and at most UNROLL_MAX_TRIPS iterations.

    Such loops are unrolled fully, as nvcc does for small constant loops: a local
    array indexed by the loop variable then has constant indices and lives in
    registers (LLVM's own threshold gives up on bodies of a few dozen FMAs).
    """
    if not all(isinstance(v, Lit) for v in (start, stop, step)):
        return False
    return _trips(start, stop, step) <= UNROLL_MAX_TRIPS


def _trips(start: Any, stop: Any, step: Any) -> int:
    """The iterations of a `range` with constant bounds; -1 when they are not constants."""
    if not all(isinstance(v, Lit) for v in (start, stop, step)):
        return -1
    a, b, s = start.value, stop.value, step.value  # len(range()) overflows past 2**63
    return max(0, (b - a + s - (1 if s > 0 else -1)) // s) if s else 0


def next_counter(b: IRBuilder, iv: SSAValue, stop: SSAValue, step: int | None,
                 step_v: SSAValue, dt: T.DType) -> SSAValue:
    """A `range` counter's next value: `iv + step`, or `stop` where that would pass it, so
    a loop runs as many times as Python's `range` (SIMT and tile loops alike).

    `iv + step` may wrap around the type (`range(120, i8(127), i8(5))` would run 155
    times, `range(0, 2**31 - 1, 2**30)` in i32 forever), so the step is compared first
    with the distance left, which is exact as an unsigned number (the counter is still
    short of `stop` here). A step of 1 or -1 (`step`, where it is a constant) cannot
    pass `stop` without meeting it: the plain increment.
    """
    nxt = b.value(ops.BinaryOp("add", iv, step_v))
    if step in (1, -1):
        return nxt
    udt = T.SCALARS[f"u{dt.bits}"]
    ahead = b.value(ops.BinaryOp("sub", stop, iv))
    behind = b.value(ops.BinaryOp("sub", iv, stop))
    back = b.value(ops.UnaryOp("neg", step_v)) if dt.is_signed else step_v
    if step is not None:
        left, stride = (ahead, step_v) if step > 0 else (behind, back)
    else:
        up = b.value(ops.CompareOp("gt", step_v, b.constant(0, dt)))
        left = b.value(ops.SelectOp(up, ahead, behind))
        stride = b.value(ops.SelectOp(up, step_v, back))
    done = b.value(ops.CompareOp("le", b.cast(left, udt), b.cast(stride, udt)))
    return b.value(ops.SelectOp(done, stop, nxt))


@dataclass
class LoopTargets:
    continue_block: Block
    break_block: Block
    assigned: LoopAssignments = field(default_factory=LoopAssignments)


class LoopsMixin:
    """Loop statements; mixed into FunctionLowering."""

    def stmt_While(self, node: ast.While) -> None:
        if node.orelse:
            raise self.error(UnsupportedFeatureError, node, "`while ... else` is not supported",
                             hint="use a flag variable")
        header, body, exit_ = self.b.new_block(), self.b.new_block(), self.b.new_block()
        self.b.br(header)
        self.b.set_block(header)
        cond = self.condition(node.test)
        entry = copy_assigned(self.assigned)
        if isinstance(cond, Lit) and not cond.value:
            self.b.br(exit_)
            self.assigned = None  # the body never runs
        elif isinstance(cond, Lit):
            self.b.br(body)
        else:
            self.branch_on(node.test, cond, body, exit_)
        self.b.set_block(body)
        loop = LoopTargets(header, exit_)
        self.loops.append(loop)
        self.lower_body(node.body)
        self.loops.pop()
        self.b.br(header)
        self.b.set_block(exit_)
        # `while True` leaves only through `break`; any other loop may run zero times.
        exits = loop.assigned.breaks if isinstance(cond, Lit) and cond.value else [
            entry, *loop.assigned.breaks]
        self.assigned = meet_paths(*exits)

    def stmt_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.error(UnsupportedFeatureError, node, "`for ... else` is not supported",
                             hint="use a flag variable")
        it = node.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                and self.is_builtin(it.func.id, "range")):
            raise self.error(UnsupportedFeatureError, it,
                             "kernels loop only over `range(...)`",
                             hint="write `for i in range(n):` and index arrays with `i`")
        if it.keywords or not 1 <= len(it.args) <= 3:
            raise self.error(KernelSyntaxError, it, "range() takes 1 to 3 positional arguments")
        if not isinstance(node.target, ast.Name):
            raise self.error(KernelSyntaxError, node.target, "the loop variable must be a name")
        args = [self.expr(a) for a in it.args]
        for a, n in zip(args, it.args, strict=True):
            if not self.is_int_value(a):
                raise self.error(KernelTypeError, n, f"range() needs integers, got {describe(a)}")
        start, stop, step = (
            (Lit(0), args[0], Lit(1)) if len(args) == 1 else
            (args[0], args[1], Lit(1)) if len(args) == 2 else tuple(args))
        if isinstance(step, Lit) and step.value == 0:
            raise self.error(KernelSyntaxError, it.args[2], "range() step must not be zero")
        dt = self.common_dtype([start, stop, step], it)
        if (0 <= _trips(start, stop, step) <= UNROLL_MAX_TRIPS
                and self.indexes_a_tuple(node)):
            self.unroll_range(node, range(start.value, stop.value, step.value), dt)
            return
        counter = self.b.alloc(ops.SlotOp(ir_type(dt)))
        self.b.emit(ops.SlotWriteOp(counter, self.materialize(start, dt, it)))
        stop_v = self.materialize(stop, dt, it)
        step_v = self.materialize(step, dt, it)
        step_ok = None
        if not isinstance(step, Lit):  # a zero step is reported, and the loop runs no times
            step_ok = self.b.value(ops.CompareOp("ne", step_v, self.b.constant(0, dt)))
            site = self.b.site("assert", self.src.span(it.args[2]), "range() step must not be zero")
            self.b.emit(ops.AssertOp(step_ok, site))
        header, body, latch, exit_ = (self.b.new_block() for _ in range(4))
        self.b.br(header)
        self.b.set_block(header)
        iv = self.b.value(ops.SlotReadOp(counter))
        if isinstance(step, Lit):
            cond = self.b.value(ops.CompareOp("lt" if step.value > 0 else "gt", iv, stop_v))
        else:
            zero = self.b.constant(0, dt)
            up = self.b.value(ops.CompareOp("gt", step_v, zero))
            lt = self.b.value(ops.CompareOp("lt", iv, stop_v))
            gt = self.b.value(ops.CompareOp("gt", iv, stop_v))
            cond = self.b.value(ops.SelectOp(up, lt, gt))
            cond = self.b.value(ops.SelectOp(step_ok, cond, self.b.constant(False, T.bool_)))
        self.b.cond_br(cond, body, exit_)
        self.b.origins[self.b.block.last_op] = (*self.call_spans, self.src.span(it))
        self.b.set_block(body)
        entry = copy_assigned(self.assigned)
        self.assign(node.target, Val(iv, dt), node.target)
        loop = LoopTargets(latch, exit_)
        self.loops.append(loop)
        self.lower_body(node.body)
        self.loops.pop()
        # The loop leaves through a `break`, or from its header: after at least one whole
        # iteration when a constant range is not empty, else perhaps before any.
        if _trips(start, stop, step) > 0:
            self.assigned = meet_paths(self.assigned, *loop.assigned.continues,
                                  *loop.assigned.breaks)
        else:
            self.assigned = meet_paths(entry, *loop.assigned.breaks)
        self.b.br(latch)
        self.b.set_block(latch)
        self.b.emit(ops.SlotWriteOp(counter, self.range_next(counter, stop_v, step, step_v, dt,
                                                             _wraps(start, stop, step, dt))))
        self.b.emit(ops.BranchOp(header, unroll=_unroll_fully(start, stop, step)))
        self.b.set_block(exit_)

    def indexes_a_tuple(self, node: ast.For) -> bool:
        """Whether the loop body indexes a tuple (or a shape) with the loop variable, which
        it never assigns: such a loop is unrolled, so each copy's index is a constant."""
        name = node.target.id  # type: ignore[attr-defined]
        found = False
        for stmt in node.body:
            for sub in ast.walk(stmt):
                if isinstance(sub, ast.Name) and sub.id == name and isinstance(sub.ctx, ast.Store):
                    return False
                if (isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Name)
                        and sub.slice.id == name):
                    v = sub.value
                    while isinstance(v, ast.Subscript):  # `W[dy][dx]`: a tuple of tuples
                        v = v.value
                    if isinstance(v, ast.Attribute) and v.attr == "shape":
                        found = True
                    elif isinstance(v, ast.Name):
                        bound = self.env.get(v.id)
                        if bound is None and v.id not in self.local_names:
                            bound = self.scope.lookup(v.id)[1]
                        found = found or isinstance(bound, (Tup, SlotTuple, ShapeOf, tuple))
        return found

    def unroll_range(self, node: ast.For, values: range, dt: T.DType) -> None:
        """`for j in range(3): s += w[j]` over a tuple `w`: one copy of the body per value,
        `j` a typed constant in each (a `continue` goes to the next copy, a `break` past
        the last). `j` is still assigned, as Python leaves it after the loop."""
        name = node.target.id  # type: ignore[attr-defined]
        entry = copy_assigned(self.assigned)
        exit_ = self.b.new_block()
        breaks: list[set[str] | None] = []
        for k in values:
            value = Val(self.b.constant(k, dt), dt)
            self.assign(node.target, value, node.target)
            self.unrolled[name] = value
            loop = LoopTargets(self.b.new_block(), exit_)
            self.loops.append(loop)
            self.lower_body(node.body)
            self.loops.pop()
            breaks += loop.assigned.breaks
            self.b.br(loop.continue_block)
            self.b.set_block(loop.continue_block)
            self.assigned = meet_paths(self.assigned, *loop.assigned.continues)
        self.unrolled.pop(name, None)
        self.b.br(exit_)
        self.b.set_block(exit_)
        self.assigned = meet_paths(self.assigned, *breaks) if len(values) else entry

    def range_next(self, counter: SSAValue, stop: SSAValue, step: Any, step_v: SSAValue,
                   dt: T.DType, may_wrap: bool) -> SSAValue:
        """The counter's next value (`next_counter`). A constant range whose last
        increment fits (`may_wrap` false) keeps the plain increment LLVM's loop analyses
        (and full unrolling) know."""
        iv = self.b.value(ops.SlotReadOp(counter))
        if not may_wrap:
            return self.b.value(ops.BinaryOp("add", iv, step_v))
        return next_counter(self.b, iv, stop, step.value if isinstance(step, Lit) else None,
                            step_v, dt)

    def stmt_Break(self, node: ast.Break) -> None:
        if not self.loops:
            raise self.error(KernelSyntaxError, node, "`break` outside a loop")
        self.b.br(self.loops[-1].break_block)
        self.leave_path(self.loops[-1].assigned.breaks)

    def stmt_Continue(self, node: ast.Continue) -> None:
        if not self.loops:
            raise self.error(KernelSyntaxError, node, "`continue` outside a loop")
        self.b.br(self.loops[-1].continue_block)
        self.leave_path(self.loops[-1].assigned.continues)
