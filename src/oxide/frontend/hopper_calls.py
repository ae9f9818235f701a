"""Calls of inline PTX (`ox.asm`), the tensor-core primitives and the Hopper primitives.

Every primitive becomes one `oxide.inline_asm` or `oxide.hopper` op; codegen/hopper.py
emits it and checks the target (GPU only, and the architecture each one needs), with the
call's span from `origins`. The checks here are those of the Python surface: argument
counts, dtypes, compile-time constants, and `with ox.unsafe():` where a primitive can
break oxide's guarantees (inline PTX, raw shared-memory matrix loads and stores,
mbarrier initialization, register reallocation).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from oxide import types as T
from oxide.errors import KernelSyntaxError, KernelTypeError, SafetyError
from oxide.frontend.values import FixedArray, Lit, Static, Tup, Val, Witness, describe
from oxide.ir import ops
from oxide.ir.types import ir_type

# The LLVM inline-asm register class of each dtype (NVPTX): 16-bit values travel in `h`.
ASM_LETTERS = {"f32": "f", "f64": "d", "i32": "r", "u32": "r", "i64": "l", "u64": "l",
               "i16": "h", "u16": "h", "f16": "h", "bf16": "h"}
_PLACEHOLDER = re.compile(r"\$(\d+)|\$\{(\d+)(?::[a-z]+)?\}")
_AXES = {"x": "x", "y": "y", "z": "z", 0: "x", 1: "y", 2: "z"}
_HALVES = ("bf16", "f16")
_B16 = ("bf16", "f16", "i16", "u16")
# swizzle bytes -> the layout code of a wgmma shared-memory matrix descriptor (bits 62-63)
WGMMA_SWIZZLE = {128: 1, 64: 2, 32: 3}


@dataclass(frozen=True)
class TensorMapArg:
    """A kernel's `ox.TensorMap[dt, rank]` parameter: the by-value 128-byte tensor map,
    which only `ox.tma.*` take (it is not an array: it cannot be indexed or copied)."""

    ssa: Any
    type: T.TensorMapType
    name: str


# what diagnostics call it (frontend/values.py `describe` names other values by their type)
TensorMapArg.__name__ = "an ox.TensorMap parameter"


def tensormap_param(ssa: Any, spec: T.TensorMapType, name: str) -> TensorMapArg:
    """The frontend value of a TensorMap parameter (frontend/entry.py)."""
    return TensorMapArg(ssa, spec, name)


def tensormap_ir_type(spec: T.TensorMapType) -> Any:
    """Its IR type: an `oxide.array` of access "tensormap" (no load or store takes it;
    codegen/emit.py makes it the by-value grid-constant parameter)."""
    from oxide.ir.types import array_ir_type

    return array_ir_type(T.ArrayType("tensormap", spec.dtype, spec.rank, True))


class HopperCallsMixin:
    """`intr_*` handlers of lang/hopper.py; mixed into CallsMixin."""

    # -- helpers ---------------------------------------------------------------------

    def _gpu_op(self, op: Any, node: ast.AST) -> Any:
        """Emit `op`, remembering the call's span (codegen/hopper.py reports through it)."""
        self.b.emit(op)
        self.b.origins[op] = (*self.call_spans, self.src.span(node))
        return op

    def _need_unsafe(self, node: ast.Call, what: str, why: str) -> None:
        if not self.unsafe_depth:
            raise self.error(SafetyError, node, f"{what} {why}: it needs `with ox.unsafe():`",
                             hint=f"wrap the call in `with ox.unsafe():` and make sure the "
                                  f"use is correct; oxide cannot check {what}")

    def _string_literal(self, node: ast.AST, what: str) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        raise self.error(KernelTypeError, node, f"{what} must be a string literal",
                         hint="write the text in the call (it is part of the compiled code)")

    def _bool_literal(self, node: ast.AST, what: str) -> bool:
        v = self.expr(node)
        if isinstance(v, Lit) and isinstance(v.value, bool):
            return v.value
        raise self.error(KernelTypeError, node, f"{what} must be True or False, a constant")

    def _int_constant(self, node: ast.AST, what: str, hint: str) -> int:
        v = self.expr(node)
        if isinstance(v, Lit) and isinstance(v.value, int) and not isinstance(v.value, bool):
            return v.value
        raise self.error(KernelTypeError, node, f"{what} must be a compile-time integer, not "
                         f"{describe(v)}", hint=hint)

    def _u32(self, v: Any, node: ast.AST, what: str) -> Any:
        """An integer argument as u32 (literals must fit; other integer types convert)."""
        if isinstance(v, Lit):
            return self.materialize(v, T.u32, node)
        if isinstance(v, Witness):
            v = self.scalar(v, node)
        if isinstance(v, Val) and not v.dtype.is_float and not v.dtype.is_bool:
            return self.b.cast(v.ssa, T.u32)
        raise self.error(KernelTypeError, node, f"{what} must be an integer, not {describe(v)}")

    def _kwargs(self, node: ast.Call, allowed: tuple[str, ...], what: str) -> dict[str, ast.expr]:
        out: dict[str, ast.expr] = {}
        for kw in node.keywords:
            if kw.arg not in allowed:
                raise self.error(KernelSyntaxError, kw.value,
                                 f"unexpected keyword argument `{kw.arg}` of {what}",
                                 hint=f"{what} takes {', '.join(allowed) or 'no keywords'}")
            out[kw.arg] = kw.value
        return out

    def _positional(self, node: ast.Call, lo: int, hi: int, what: str) -> list[ast.expr]:
        if not lo <= len(node.args) <= hi:
            count = str(lo) if lo == hi else f"{lo} to {hi}"
            raise self.error(KernelTypeError, node,
                             f"{what} takes {count} positional argument"
                             f"{'s' if hi != 1 else ''}, got {len(node.args)}")
        return list(node.args)

    def _shared_element(self, arg: ast.expr, what: str, dtypes: tuple[str, ...],
                        example: str) -> tuple[FixedArray, list[Any], int | None]:
        """The shared-array element `s[i, ...]` a primitive works on: (array, i64 indices,
        bounds-check site or None)."""
        if not isinstance(arg, ast.Subscript):
            raise self.error(KernelTypeError, arg,
                             f"{what} takes an element of a shared array, such as `{example}`",
                             hint="index the shared array in the call")
        base = self.expr(arg.value)
        if not (isinstance(base, FixedArray) and base.space == "shared"):
            raise self.error(KernelTypeError, arg.value,
                             f"{what} works on shared memory; `{self.text(arg.value)}` is "
                             f"{describe(base)}",
                             hint="declare it with ox.shared.array(dtype, shape)")
        if base.dtype.name not in dtypes:
            raise self.error(KernelTypeError, arg.value,
                             f"{what} needs a shared array of {' or '.join(dtypes)}, not "
                             f"{base.dtype.name}")
        items = self.index_values(base, self.expr(arg.slice), arg, write=False)
        idx = self.index_ssa(items, arg.slice)
        site = (self.b.site("index", self.src.span(arg), base.name or self.text(arg.value))
                if self.ctx.checks else None)
        return base, idx, site

    def _fragment(self, v: Any, node: ast.AST, n: int, dtypes: tuple[T.DType, ...],
                  what: str) -> list[Any]:
        """A tuple of `n` scalars of one of `dtypes` (literals take the first)."""
        items = list(v.items) if isinstance(v, Tup) else None
        if items is None or len(items) != n:
            got = f"{len(items)} values" if items is not None else describe(v)
            raise self.error(KernelTypeError, node, f"{what} is a tuple of {n} values, got {got}")
        out = []
        for item in items:
            if isinstance(item, Lit):
                out.append(self.materialize(item, dtypes[0], node))
                continue
            if not isinstance(item, Val) or item.dtype not in dtypes:
                raise self.error(KernelTypeError, node,
                                 f"{what} holds {' or '.join(d.name for d in dtypes)} values, "
                                 f"not {describe(item)}")
            out.append(item.ssa)
        return out

    # -- inline PTX ------------------------------------------------------------------

    def intr_asm(self, node: ast.Call) -> Any:
        """`ox.asm(template, returns, *inputs, constraints=None, volatile=True)`."""
        self._need_unsafe(node, "inline PTX (ox.asm)", "is not checked by oxide")
        kw = self._kwargs(node, ("constraints", "volatile"), "ox.asm()")
        if len(node.args) < 2:
            raise self.error(KernelTypeError, node,
                             "ox.asm() takes a template, the result dtype(s), then the inputs",
                             hint='e.g. `ox.asm("add.u32 $0, $1, $2;", u32, a, b)`; pass '
                                  "None as the result dtype for no result")
        template = self._string_literal(node.args[0], "the template of ox.asm()")
        outs, as_tuple = self._asm_returns(node.args[1])
        inputs: list[Any] = []
        in_types: list[T.DType] = []
        for a in node.args[2:]:
            v = self.expr(a)
            if isinstance(v, Lit) and not isinstance(v.value, bool):
                dt = T.f32 if isinstance(v.value, float) else (
                    T.i32 if -(1 << 31) <= v.value < (1 << 31) else T.i64)
                inputs.append(self.materialize(v, dt, a))
                in_types.append(dt)
                continue
            if isinstance(v, Witness):
                v = self.scalar(v, a)
            if not isinstance(v, Val) or v.dtype.name not in ASM_LETTERS:
                raise self.error(KernelTypeError, a,
                                 f"an input of ox.asm() cannot be {describe(v)}",
                                 hint="inputs are 16-, 32- or 64-bit integers or floats "
                                      "(registers h, r, l, f, d); convert others, e.g. "
                                      "`u32(flag)`")
            inputs.append(v.ssa)
            in_types.append(v.dtype)
        letters = [ASM_LETTERS[d.name] for d in outs + in_types]
        if "constraints" in kw:
            text = self._string_literal(kw["constraints"], "the constraints of ox.asm()")
            constraints = self._check_constraints(text, outs, in_types, kw["constraints"])
        else:
            constraints = ",".join([f"={c}" for c in letters[:len(outs)]] +
                                   letters[len(outs):])
        template = re.sub(r"%(\d+)", r"$\1", template)
        total = len(outs) + len(inputs)
        for m in _PLACEHOLDER.finditer(template):
            k = int(m.group(1) or m.group(2))
            if k >= total:
                raise self.error(KernelTypeError, node.args[0],
                                 f"the template names operand ${k}, but ox.asm() has {total} "
                                 f"operand{'s' if total != 1 else ''} ({len(outs)} output"
                                 f"{'s' if len(outs) != 1 else ''}, then {len(inputs)} input"
                                 f"{'s' if len(inputs) != 1 else ''})",
                                 hint="outputs are numbered first ($0...), then the inputs")
        volatile = self._bool_literal(kw["volatile"], "volatile=") if "volatile" in kw else True
        op = self._gpu_op(ops.InlineAsmOp(template, constraints, inputs,
                                          [ir_type(d) for d in outs], volatile or not outs),
                          node)
        vals = [Val(r, d) for r, d in zip(op.results, outs, strict=True)]
        if as_tuple:
            return Tup(tuple(vals))
        return vals[0] if vals else Static(None)

    def _asm_returns(self, arg: ast.expr) -> tuple[list[T.DType], bool]:
        """The result dtypes, and whether they were given as a tuple (then the call
        returns a tuple, even of one value)."""
        v = self.expr(arg)
        if isinstance(v, Static) and v.obj is None:
            return [], False
        items = v.items if isinstance(v, Tup) else (v,)
        out = []
        for item in items:
            if not (isinstance(item, Static) and isinstance(item.obj, T.DType)
                    and item.obj.name in ASM_LETTERS):
                raise self.error(KernelTypeError, arg,
                                 f"the results of ox.asm() are dtypes, not {describe(item)}",
                                 hint="None, a dtype (`u32`) or a tuple of dtypes "
                                      "(`(f32, f32)`), each 16, 32 or 64 bits wide")
            out.append(item.obj)
        return out, isinstance(v, Tup)

    def _check_constraints(self, text: str, outs: list[T.DType], ins: list[T.DType],
                           node: ast.AST) -> str:
        """A user constraint string: one entry per output (`=r`...), then one per input (a
        register letter matching its dtype, `n` for a constant, or a tied output number),
        then clobbers (`~{memory}`)."""
        entries = [e.strip() for e in text.split(",") if e.strip()]
        operands = [e for e in entries if not e.startswith("~")]
        if len(operands) != len(outs) + len(ins):
            raise self.error(KernelTypeError, node,
                             f"the constraints name {len(operands)} operands, but ox.asm() "
                             f"has {len(outs)} outputs and {len(ins)} inputs",
                             hint="one entry per output (`=r`), then one per input (`r`), "
                                  "then clobbers (`~{memory}`)")
        for k, (entry, dt) in enumerate(zip(operands, outs + ins, strict=True)):
            want = ASM_LETTERS[dt.name]
            is_out = k < len(outs)
            body = entry[1:].lstrip("&") if is_out else entry
            ok = (entry.startswith("=") and body == want) if is_out else (
                body == want or body.isdigit() or body in ("n", "i"))
            if not ok:
                role = f"output {k}" if is_out else f"input {k - len(outs)}"
                raise self.error(KernelTypeError, node,
                                 f"constraint `{entry}` does not fit {role}, a {dt.name}",
                                 hint=f"a {dt.name} uses `{'=' if is_out else ''}{want}`")
        return ",".join(entries)

    # -- tensor cores ----------------------------------------------------------------

    def intr_mma_sync(self, node: ast.Call) -> Tup:
        """`ox.mma_sync(a, b, c, dtype=bf16)`: D = A @ B + C for one warp (PTX mma.sync)."""
        kw = self._kwargs(node, ("dtype",), "ox.mma_sync()")
        args = self._positional(node, 3, 3, "ox.mma_sync(a, b, c, dtype=...)")
        dt = T.bf16
        if "dtype" in kw:
            d = self.expr(kw["dtype"])
            if not (isinstance(d, Static) and isinstance(d.obj, T.DType)
                    and d.obj.name in ("bf16", "f16", "f32")):
                raise self.error(KernelTypeError, kw["dtype"],
                                 f"ox.mma_sync() multiplies bf16, f16 or f32 (as tf32), not "
                                 f"{describe(d)}")
            dt = d.obj
        a, b, c = (self.expr(x) for x in args)
        if dt.name in _HALVES:
            kind = f"mma.m16n8k16.{dt.name}"
            packed = isinstance(a, Tup) and len(a.items) == 4
            a_ops = (self._fragment(a, args[0], 4, (T.u32, T.i32), "A (4 packed u32)")
                     if packed else
                     self._fragment(a, args[0], 8, (dt,), f"A (8 {dt.name} or 4 packed u32)"))
            packed = isinstance(b, Tup) and len(b.items) == 2
            b_ops = (self._fragment(b, args[1], 2, (T.u32, T.i32), "B (2 packed u32)")
                     if packed else
                     self._fragment(b, args[1], 4, (dt,), f"B (4 {dt.name} or 2 packed u32)"))
        else:
            kind = "mma.m16n8k8.tf32"
            a_ops = self._fragment(a, args[0], 4, (T.f32, T.u32, T.i32), "A (4 tf32 as f32)")
            b_ops = self._fragment(b, args[1], 2, (T.f32, T.u32, T.i32), "B (2 tf32 as f32)")
        c_ops = self._fragment(c, args[2], 4, (T.f32,), "C (4 f32)")
        op = self._gpu_op(ops.HopperOp(kind, a_ops + b_ops + c_ops, [ir_type(T.f32)] * 4),
                          node)
        return Tup(tuple(Val(r, T.f32) for r in op.results))

    def intr_ldmatrix(self, node: ast.Call) -> Tup:
        """`ox.ldmatrix(s[i, j], num=4, trans=False)`: PTX ldmatrix.m8n8.x{num}.b16."""
        self._need_unsafe(node, "ox.ldmatrix()", "reads shared memory other threads write")
        kw = self._kwargs(node, ("num", "trans"), "ox.ldmatrix()")
        args = self._positional(node, 1, 2, "ox.ldmatrix(s[i, j], num=4, trans=False)")
        num_node = args[1] if len(args) > 1 else kw.get("num")
        num = 4 if num_node is None else self._int_constant(
            num_node, "the matrix count of ox.ldmatrix()", "1, 2 or 4")
        if num not in (1, 2, 4):
            raise self.error(KernelTypeError, num_node or node,
                             f"ox.ldmatrix() loads 1, 2 or 4 matrices, not {num}")
        trans = self._bool_literal(kw["trans"], "trans=") if "trans" in kw else False
        arr, idx, site = self._shared_element(args[0], "ox.ldmatrix()", _B16, "s[row, col]")
        kind = f"ldmatrix.x{num}{'.trans' if trans else ''}"
        op = self._gpu_op(ops.HopperOp(kind, [], [ir_type(T.u32)] * num, arr.ssa, idx,
                                       site=site), node)
        return Tup(tuple(Val(r, T.u32) for r in op.results))

    def intr_stmatrix(self, node: ast.Call) -> Static:
        """`ox.stmatrix(s[i, j], frags, trans=False)`: PTX stmatrix.m8n8.x{n}.b16 (sm_90)."""
        self._need_unsafe(node, "ox.stmatrix()", "writes shared memory other threads read")
        kw = self._kwargs(node, ("trans",), "ox.stmatrix()")
        args = self._positional(node, 2, 2, "ox.stmatrix(s[i, j], frags, trans=False)")
        trans = self._bool_literal(kw["trans"], "trans=") if "trans" in kw else False
        arr, idx, site = self._shared_element(args[0], "ox.stmatrix()", _B16, "s[row, col]")
        frags = self.expr(args[1])
        n = len(frags.items) if isinstance(frags, Tup) else 0
        if n not in (1, 2, 4):
            raise self.error(KernelTypeError, args[1],
                             f"ox.stmatrix() stores a tuple of 1, 2 or 4 u32, not "
                             f"{describe(frags) if n == 0 else f'{n} values'}")
        vals = self._fragment(frags, args[1], n, (T.u32, T.i32), "the fragments")
        kind = f"stmatrix.x{n}{'.trans' if trans else ''}"
        self._gpu_op(ops.HopperOp(kind, vals, [], arr.ssa, idx, site=site), node)
        return Static(None)

    # -- mbarrier --------------------------------------------------------------------

    def _mbarrier(self, node: ast.Call, name: str, n_args: int, result: T.DType | None,
                  arg_names: tuple[str, ...] = (), keywords: tuple[str, ...] = (),
                  imm: tuple[int, ...] = ()) -> Any:
        what = f"ox.mbarrier.{name}()"
        self._kwargs(node, keywords, what)
        args = self._positional(node, 1 + n_args, 1 + n_args,
                                f"ox.mbarrier.{name}(bars[i]{''.join(', ' + a for a in arg_names)})")
        arr, idx, site = self._shared_element(args[0], what, ("u64", "i64"), "bars[0]")
        scalars = [self._u32(self.expr(a), a, f"the {n} of {what}")
                   for a, n in zip(args[1:], arg_names, strict=True)]
        results = [ir_type(result)] if result is not None else []
        op = self._gpu_op(ops.HopperOp(f"mbarrier.{name}", scalars, results, arr.ssa, idx,
                                       imm=imm, site=site), node)
        return Val(op.results[0], result) if result is not None else Static(None)

    def intr_mbarrier_init(self, node: ast.Call) -> Any:
        self._need_unsafe(node, "ox.mbarrier.init()", "writes the barrier other threads use")
        return self._mbarrier(node, "init", 1, None, ("count",))

    def intr_mbarrier_arrive(self, node: ast.Call) -> Any:
        return self._mbarrier(node, "arrive", 0, T.u64)

    def intr_mbarrier_arrive_expect_tx(self, node: ast.Call) -> Any:
        return self._mbarrier(node, "arrive_expect_tx", 1, T.u64, ("nbytes",))

    def intr_mbarrier_arrive_cluster(self, node: ast.Call) -> Any:
        """`scope="cluster"` (the default) releases this thread's earlier memory accesses
        to the whole cluster; `scope="cta"` orders them only within its own block, as a
        stage handed back after reads needs, without the GPU-wide fence ptxas emits for
        the cluster scope (codegen/hopper.py `_mbarrier`)."""
        what = "ox.mbarrier.arrive_cluster()"
        scope = self._kwargs(node, ("scope",), what).get("scope")
        cta = False
        if scope is not None:
            if not (isinstance(scope, ast.Constant) and scope.value in ("cluster", "cta")):
                raise self.error(KernelTypeError, scope,
                                 f'scope= of {what} is the string "cluster" or "cta"',
                                 hint='"cta" where the block only read what it hands back')
            cta = scope.value == "cta"
        return self._mbarrier(node, "arrive_cluster", 1, None, ("rank",), ("scope",),
                              imm=(int(cta),))

    def intr_mbarrier_try_wait_parity(self, node: ast.Call) -> Any:
        return self._mbarrier(node, "try_wait_parity", 1, T.bool_, ("parity",))

    def intr_mbarrier_wait_parity(self, node: ast.Call) -> Any:
        return self._mbarrier(node, "wait_parity", 1, None, ("parity",))

    # -- fences, election, registers, named barriers ----------------------------------

    def _simple(self, node: ast.Call, kind: str, result: T.DType | None = None,
                args: list[Any] | None = None, imm: tuple[int, ...] = ()) -> Any:
        op = self._gpu_op(ops.HopperOp(kind, args or [], [ir_type(result)] if result else [],
                                       imm=imm), node)
        return Val(op.results[0], result) if result is not None else Static(None)

    def intr_fence_proxy_async(self, node: ast.Call) -> Any:
        self.args_exact(node, 0, "ox.fence_proxy_async()")
        return self._simple(node, "fence.proxy_async")

    def intr_fence_mbarrier_init(self, node: ast.Call) -> Any:
        self.args_exact(node, 0, "ox.fence_mbarrier_init()")
        return self._simple(node, "fence.mbarrier_init")

    def intr_elect_sync(self, node: ast.Call) -> Any:
        self.args_exact(node, 0, "ox.elect_sync()")
        return self._simple(node, "elect_sync", T.bool_)

    def intr_setmaxnreg(self, node: ast.Call) -> Any:
        """`ox.setmaxnreg(n, inc=True)`: setmaxnreg.{inc,dec}.sync.aligned.u32 n (sm_90a)."""
        self._need_unsafe(node, "ox.setmaxnreg()", "changes the registers of the whole warp "
                          "group, which must all call it together")
        kw = self._kwargs(node, ("inc",), "ox.setmaxnreg()")
        (arg,) = self._positional(node, 1, 1, "ox.setmaxnreg(n, inc=True)")
        hint = "a register count from 24 to 256, a multiple of 8 (e.g. 232 or 40)"
        n = self._int_constant(arg, "the register count of ox.setmaxnreg()", hint)
        if not (24 <= n <= 256 and n % 8 == 0):
            raise self.error(KernelTypeError, arg,
                             f"ox.setmaxnreg() takes {hint}, not {n}", hint=hint)
        inc = self._bool_literal(kw["inc"], "inc=") if "inc" in kw else True
        return self._simple(node, f"setmaxnreg.{'inc' if inc else 'dec'}", imm=(n,))

    def intr_named_barrier_sync(self, node: ast.Call) -> Any:
        """`ox.named_barrier_sync(id, nthreads)`: `barrier.sync id, nthreads` (a subset of
        the block meets at barrier `id`; barrier 0 is the one sync_threads uses)."""
        args = self._positional(node, 2, 2, "ox.named_barrier_sync(id, nthreads)")
        self._kwargs(node, (), "ox.named_barrier_sync()")
        bid, count = self.expr(args[0]), self.expr(args[1])
        if isinstance(bid, Lit) and not (isinstance(bid.value, int) and 0 <= bid.value < 16):
            raise self.error(KernelTypeError, args[0],
                             f"a named barrier's id is 0 to 15, not {bid.value!r}",
                             hint="ids 1 to 15 are free; 0 is the one ox.sync_threads() uses")
        if isinstance(count, Lit) and not (isinstance(count.value, int) and count.value > 0
                                           and count.value % 32 == 0):
            raise self.error(KernelTypeError, args[1],
                             f"a named barrier counts whole warps: nthreads is a positive "
                             f"multiple of 32, not {count.value!r}")
        operands = [self._u32(bid, args[0], "the barrier id"),
                    self._u32(count, args[1], "the thread count")]
        return self._simple(node, "named_barrier", args=operands)

    # -- clusters ----------------------------------------------------------------------

    def _cluster_reg(self, node: ast.Call, reg: str, axis_arg: bool) -> Val:
        what = f"ox.cluster.{node.func.attr if isinstance(node.func, ast.Attribute) else reg}()"
        if not axis_arg:
            self.args_exact(node, 0, what)
            return self._simple(node, f"sreg.{reg}", T.i32)
        args = self._positional(node, 1, 1, f"{what[:-2]}(axis)")
        a = args[0]
        key = a.value if isinstance(a, ast.Constant) else None
        if key not in _AXES or isinstance(key, bool):
            raise self.error(KernelTypeError, a, f"the axis of {what} is 'x', 'y' or 'z'",
                             hint="a string literal (or 0, 1, 2)")
        return self._simple(node, f"sreg.{reg}.{_AXES[key]}", T.i32)

    def intr_cluster_rank(self, node: ast.Call) -> Val:
        return self._cluster_reg(node, "cluster.ctarank", False)

    def intr_cluster_size(self, node: ast.Call) -> Val:
        return self._cluster_reg(node, "cluster.nctarank", False)

    def intr_cluster_block_idx(self, node: ast.Call) -> Val:
        return self._cluster_reg(node, "cluster.ctaid", True)

    def intr_cluster_block_dim(self, node: ast.Call) -> Val:
        return self._cluster_reg(node, "cluster.nctaid", True)

    def intr_cluster_cluster_idx(self, node: ast.Call) -> Val:
        return self._cluster_reg(node, "clusterid", True)

    def intr_cluster_grid_dim(self, node: ast.Call) -> Val:
        return self._cluster_reg(node, "nclusterid", True)

    def intr_cluster_arrive(self, node: ast.Call) -> Any:
        self.args_exact(node, 0, "ox.cluster.arrive()")
        return self._simple(node, "cluster.arrive")

    def intr_cluster_wait(self, node: ast.Call) -> Any:
        self.args_exact(node, 0, "ox.cluster.wait()")
        return self._simple(node, "cluster.wait")

    def intr_cluster_sync(self, node: ast.Call) -> Any:
        self.args_exact(node, 0, "ox.cluster.sync()")
        self._simple(node, "cluster.arrive")
        return self._simple(node, "cluster.wait")

    # -- wgmma (warp-group tensor cores, sm_90a) -----------------------------------------

    def intr_wgmma(self, node: ast.Call) -> Tup:
        """`ox.wgmma(acc, a, b, dtype=bf16, scale_d=True, trans_a=False, trans_b=False)`:
        one `wgmma.mma_async` m64nNk16 of the warp group, N = 2 * len(acc). A is a
        descriptor (SS form) or this thread's register fragment (RS form); B a descriptor."""
        kw = self._kwargs(node, ("dtype", "scale_d", "trans_a", "trans_b"), "ox.wgmma()")
        args = self._positional(node, 3, 3, "ox.wgmma(acc, a, b, dtype=...)")
        dt = T.bf16
        if "dtype" in kw:
            d = self.expr(kw["dtype"])
            if not (isinstance(d, Static) and isinstance(d.obj, T.DType)
                    and d.obj.name in _HALVES):
                raise self.error(KernelTypeError, kw["dtype"],
                                 f"ox.wgmma() multiplies bf16 or f16 (into f32), not "
                                 f"{describe(d)}",
                                 hint="dtype=ox.bf16 or dtype=ox.f16: the element type of "
                                      "A and B")
            dt = d.obj
        acc_v, a_v = self.expr(args[0]), self.expr(args[1])
        acc = self._accumulators(acc_v, args[0], "ox.wgmma()")
        count = len(acc)
        if not (count and count % 4 == 0 and count <= 128):
            raise self.error(KernelTypeError, args[0],
                             f"the accumulator of ox.wgmma() is N/2 f32 per thread for an "
                             f"m64nNk16 with N a multiple of 8 from 8 to 256; got {count} "
                             f"values (N = {2 * count})",
                             hint="e.g. `(0.0,) * 32` for N = 64, `((0.0,) * 32,) * 2` for "
                                  "128, `* 3` for 192, `* 4` for 256 (tuples of up to 32 "
                                  "values index in unrolled loops)")
        trans_a = self._bool_literal(kw["trans_a"], "trans_a=") if "trans_a" in kw else False
        trans_b = self._bool_literal(kw["trans_b"], "trans_b=") if "trans_b" in kw else False
        if isinstance(a_v, Tup):  # RS: A from registers
            if trans_a:
                raise self.error(KernelTypeError, kw["trans_a"],
                                 "trans_a=True needs A in shared memory: a register A "
                                 "fragment is always K-major",
                                 hint="pass A as an ox.wgmma_desc(..., major='mn')")
            packed = len(a_v.items) == 4
            a_ops = (self._fragment(a_v, args[1], 4, (T.u32, T.i32), "A (4 packed u32)")
                     if packed else
                     self._fragment(a_v, args[1], 8, (dt,), f"A (8 {dt.name} or 4 packed u32)"))
            form = "rs"
        else:
            a_ops = [self._descriptor(a_v, args[1], "A")]
            form = "ss"
        b_op = self._descriptor(self.expr(args[2]), args[2], "B")
        scale = self._scale_d(kw.get("scale_d"))
        kind = f"wgmma.m64n{2 * count}k16.{dt.name}.{form}"
        op = self._gpu_op(ops.HopperOp(kind, a_ops + [b_op, scale] + acc,
                                       [ir_type(T.f32)] * count,
                                       imm=(int(trans_a), int(trans_b))), node)
        return _regroup(acc_v, [Val(r, T.f32) for r in op.results])

    def _accumulators(self, v: Any, node: ast.AST, what: str) -> list[Any]:
        """The f32 SSA values of an accumulator: a tuple of f32, or a tuple of such tuples
        (N = 256 as 4 x 32 values, each indexable in an unrolled loop), flattened in order."""
        if isinstance(v, Tup):
            out: list[Any] = []
            for item in v.items:
                out += self._accumulators(item, node, what)
            return out
        if isinstance(v, Lit) and isinstance(v.value, (int, float)) and not isinstance(
                v.value, bool):
            return [self.materialize(Lit(float(v.value)), T.f32, node)]
        if isinstance(v, Val) and v.dtype == T.f32:
            return [v.ssa]
        raise self.error(KernelTypeError, node,
                         f"the accumulators of {what} are f32 values in tuples, not "
                         f"{describe(v)}", hint="convert with `f32(x)`")

    def _descriptor(self, v: Any, node: ast.AST, which: str) -> Any:
        if isinstance(v, Witness):
            v = self.scalar(v, node)
        if isinstance(v, Val) and v.dtype.name in ("u64", "i64"):
            return v.ssa
        raise self.error(KernelTypeError, node,
                         f"{which} of ox.wgmma() is a shared-memory matrix descriptor (u64), "
                         f"not {describe(v)}",
                         hint="build it with ox.wgmma_desc(s[i, j], swizzle=128)"
                              + (", or pass A's 4 packed u32 (RS form)" if which == "A" else ""))

    def _scale_d(self, node: ast.expr | None) -> Any:
        """scale-d as an i32 (0: D = A @ B, ignoring acc; else D = A @ B + acc)."""
        if node is None:
            return self.materialize(Lit(1), T.i32, None)
        v = self.expr(node)
        if isinstance(v, Lit) and isinstance(v.value, bool):
            return self.materialize(Lit(int(v.value)), T.i32, node)
        if isinstance(v, Witness):
            v = self.scalar(v, node)
        if isinstance(v, Val) and v.dtype.is_bool:
            return self.b.cast(v.ssa, T.i32)
        raise self.error(KernelTypeError, node,
                         f"scale_d= of ox.wgmma() is a bool, not {describe(v)}",
                         hint="False for the first k-step (D = A @ B), True after "
                              "(D = A @ B + acc)")

    def intr_wgmma_desc(self, node: ast.Call) -> Val:
        """`ox.wgmma_desc(s[i, j], swizzle=128, major='k')`: a shared-memory matrix
        descriptor; the strides come from the array's shape (docs/language.md)."""
        kw = self._kwargs(node, ("swizzle", "major"), "ox.wgmma_desc()")
        (arg,) = self._positional(node, 1, 1, "ox.wgmma_desc(s[i, j], swizzle=128)")
        swizzle = 128 if "swizzle" not in kw else self._int_constant(
            kw["swizzle"], "swizzle=", "128, 64 or 32 (bytes)")
        if swizzle not in WGMMA_SWIZZLE:
            raise self.error(KernelTypeError, kw["swizzle"],
                             f"ox.wgmma_desc() takes swizzle=128, 64 or 32 (bytes), not "
                             f"{swizzle}", hint="128 is the fastest, and what TMA writes "
                                               "with a 128-byte box row")
        major = "k"
        if "major" in kw:
            major = self._string_literal(kw["major"], "major=")
            if major not in ("k", "mn"):
                raise self.error(KernelTypeError, kw["major"],
                                 f"major= is 'k' or 'mn', not {major!r}")
        arr, idx, site = self._shared_element(arg, "ox.wgmma_desc()", _HALVES, "s[0, 0]")
        shape = arr.shape
        if len(shape) < 2 or any(s is None for s in shape):
            raise self.error(KernelTypeError, arg.value,
                             "ox.wgmma_desc() needs a static shared array of at least 2 "
                             "dimensions (rows, one swizzle row of elements)",
                             hint=f"e.g. ox.shared.array({arr.dtype.name}, (64, "
                                  f"{swizzle // arr.dtype.itemsize}))")
        rows, width = shape[-2], shape[-1]
        if width * arr.dtype.itemsize != swizzle or rows % 8:
            raise self.error(KernelTypeError, arg.value,
                             f"with swizzle={swizzle}, ox.wgmma_desc() needs rows of "
                             f"{swizzle} bytes ({swizzle // arr.dtype.itemsize} "
                             f"{arr.dtype.name}) in groups of 8; `{self.text(arg.value)}` "
                             f"has shape {tuple(shape)}",
                             hint=f"declare it as (..., rows, "
                                  f"{swizzle // arr.dtype.itemsize}) with rows a multiple "
                                  "of 8; wider operands take more slabs in a leading "
                                  "dimension")
        row_bytes = width * arr.dtype.itemsize
        sbo = 8 * row_bytes              # the next 8-row group (K-major: rows of M/N)
        lbo = rows * row_bytes if major == "mn" else 16  # the next slab (MN-major)
        op = self._gpu_op(ops.HopperOp("wgmma.desc", [], [ir_type(T.u64)], arr.ssa, idx,
                                       imm=(WGMMA_SWIZZLE[swizzle], lbo >> 4, sbo >> 4),
                                       site=site), node)
        return Val(op.results[0], T.u64)

    def intr_wgmma_fence(self, node: ast.Call) -> Any:
        self.args_exact(node, 0, "ox.wgmma_fence()")
        return self._simple(node, "wgmma.fence")

    def intr_wgmma_commit(self, node: ast.Call) -> Any:
        self.args_exact(node, 0, "ox.wgmma_commit()")
        return self._simple(node, "wgmma.commit")

    def intr_wgmma_wait(self, node: ast.Call) -> Any:
        """`ox.wgmma_wait(n, acc=())`: wgmma.wait_group n, carrying `acc` (a tuple of f32,
        or a tuple of such tuples) through the wait as tied asm operands."""
        self._kwargs(node, (), "ox.wgmma_wait()")
        args = self._positional(node, 1, 2, "ox.wgmma_wait(n, acc)")
        hint = "the number of wgmma groups that may stay pending, 0 to 7"
        n = self._int_constant(args[0], "the count of ox.wgmma_wait()", hint)
        if not 0 <= n <= 7:
            raise self.error(KernelTypeError, args[0],
                             f"ox.wgmma_wait() takes {hint}, not {n}", hint=hint)
        acc_v = self.expr(args[1]) if len(args) > 1 else Tup(())
        flat = self._accumulators(acc_v, args[1] if len(args) > 1 else node, "ox.wgmma_wait()")
        op = self._gpu_op(ops.HopperOp("wgmma.wait", flat, [ir_type(T.f32)] * len(flat),
                                       imm=(n,)), node)
        return _regroup(acc_v, [Val(r, T.f32) for r in op.results])

    # -- TMA (sm_90) -------------------------------------------------------------------

    def _tensormap(self, arg: ast.expr, what: str) -> TensorMapArg:
        v = self.expr(arg)
        if isinstance(v, TensorMapArg):
            return v
        raise self.error(KernelTypeError, arg,
                         f"the first argument of {what} is an ox.TensorMap parameter, not "
                         f"{describe(v)}",
                         hint="declare the parameter `m: ox.TensorMap[dtype, rank]` and pass "
                              "ox.TensorMap(array, box=...) at the launch")

    def _coords(self, tm: TensorMapArg, nodes: list[ast.expr], store: bool = False
                ) -> list[Any]:
        """The box's coordinates as i32, outermost first as written (codegen reverses
        them into TMA's innermost-first order).

        What the H200 faults on (CUDA_ERROR_ILLEGAL_INSTRUCTION, which kills the context):
        an innermost coordinate below 0 or off a 16-byte boundary of the row (-5 and -4
        f32 fault, 56 f32 = 224 bytes copies), and for a store (`store`) any coordinate
        below 0 (-3 rows faults a store, while a load there reads zeros as documented).
        A constant that breaks the rule is a compile error; a run-time one is a failed
        assertion (a kernel error; with checks on) and the copy goes to the coordinate
        clamped to 0 (the innermost one also rounded down to the boundary): always, so it
        never faults, and a load still completes its mbarrier and the kernel ends."""
        values = [self.expr(c) for c in nodes]
        coords = [self._i32(v, c, "a TMA coordinate") for v, c in zip(values, nodes, strict=True)]
        per = 16 // max(1, tm.type.dtype.bits // 8)  # elements in 16 bytes
        last = len(nodes) - 1
        for axis, (node, v) in enumerate(zip(nodes, values, strict=True)):
            inner = axis == last and per > 1
            if inner or store:
                coords[axis] = self._coord_rule(tm, node, v, coords[axis],
                                                per if inner else 1, store)
        return coords

    def _coord_rule(self, tm: TensorMapArg, node: ast.expr, v: Any, x: Any, per: int,
                    store: bool) -> Any:
        """Coordinate `x` held to "0 or more, a multiple of `per`" (see `_coords`)."""
        what = "innermost TMA coordinate" if per > 1 else "TMA store coordinate"
        rule = (f"a multiple of {per}, 0 or more ({tm.type.dtype.name}: a 16-byte boundary "
                f"in the row)" if per > 1 else "0 or more (a store box starts inside the "
                                               "array; only its far edges are clipped)")
        if isinstance(v, Lit):
            if isinstance(v.value, int) and (v.value % per or v.value < 0):
                raise self.error(KernelTypeError, node,
                                 f"the {what} {v.value} breaks TMA's rule: it must be {rule}",
                                 hint=f"start the box at a multiple of {per} inside the array "
                                      "(a load's edges are padded anyway)" if per > 1 else
                                      "store boxes that start inside the array")
            return x
        zero = self.b.constant(0, T.i32)
        if self.ctx.checks:  # checks=False kernels (wgmma) must not call the report
            ok = self.b.value(ops.CompareOp("ge", x, zero))
            if per > 1:
                low = self.b.value(ops.BinaryOp("and", x, self.b.constant(per - 1, T.i32)))
                ok = self.b.value(ops.BinaryOp("and", ok,
                                               self.b.value(ops.CompareOp("eq", low, zero))))
            site = self.b.site("assert", self.src.span(node), f"the {what} is {rule}")
            self.b.emit(ops.AssertOp(ok, site))
        clamped = self.b.value(ops.BinaryOp("max", x, zero))
        if per > 1:
            clamped = self.b.value(ops.BinaryOp("and", clamped, self.b.constant(-per, T.i32)))
        return clamped

    def _i32(self, v: Any, node: ast.AST, what: str) -> Any:
        if isinstance(v, Lit):
            return self.materialize(v, T.i32, node)
        if isinstance(v, Witness):
            v = self.scalar(v, node)
        if isinstance(v, Val) and not v.dtype.is_float and not v.dtype.is_bool:
            return self.b.cast(v.ssa, T.i32)
        raise self.error(KernelTypeError, node, f"{what} must be an integer, not {describe(v)}")

    def _tma_shared(self, arg: ast.expr, tm: TensorMapArg, what: str
                    ) -> tuple[FixedArray, list[Any], int | None, tuple[int, ...]]:
        """The shared array a TMA copy reads or writes (all of it, or from `s[i, ...]`),
        of the tensor map's element type; the last item is the `imm` of the op: the site
        of the run-time check that an element computed at run time starts at a 128-byte
        boundary (codegen/hopper.py), where checks are on."""
        if isinstance(arg, ast.Subscript):
            arr, idx, site = self._shared_element(arg, what, (tm.type.dtype.name,), "s[0, 0]")
            if any(n is None for n in arr.shape):
                raise self.error(KernelTypeError, arg.value,
                                 f"{what} needs a static shared array (its alignment is "
                                 "raised for TMA); dynamic shared memory is not supported "
                                 "here", hint="declare ox.shared.array(dtype, shape)")
            if self._check_tma_alignment(arg, arr, what) or not self.ctx.checks:
                return arr, idx, site, ()
            align = self.b.site("assert", self.src.span(arg),
                                f"{what}: `{self.text(arg)}` is not at a 128-byte boundary "
                                "of the shared array (TMA's rule)")
            return arr, idx, site, (align,)
        base = self.expr(arg)
        if not (isinstance(base, FixedArray) and base.space == "shared"):
            raise self.error(KernelTypeError, arg,
                             f"{what} copies to or from a shared array; `{self.text(arg)}` is "
                             f"{describe(base)}",
                             hint="declare it with ox.shared.array(dtype, box shape)")
        if base.dtype != tm.type.dtype:
            raise self.error(KernelTypeError, arg,
                             f"{what}: the tensor map `{tm.name}` moves {tm.type.dtype.name}, "
                             f"the shared array is {base.dtype.name}")
        if any(n is None for n in base.shape):
            raise self.error(KernelTypeError, arg,
                             f"{what} needs a static shared array (its alignment is raised "
                             "for TMA); dynamic shared memory is not supported here")
        zero = self.materialize(Lit(0), T.i64, arg)
        site = (self.b.site("index", self.src.span(arg), base.name or self.text(arg))
                if self.ctx.checks else None)  # the CPU's copy checks the box fits
        return base, [zero] * len(base.shape), site, ()

    def _check_tma_alignment(self, arg: ast.Subscript, arr: FixedArray, what: str) -> bool:
        """TMA's shared address is a multiple of 128 bytes: checked here where the element
        is written with constants (the array itself is aligned to 1024); whether it was."""
        items = arg.slice.elts if isinstance(arg.slice, ast.Tuple) else [arg.slice]
        consts = [i.value for i in items if isinstance(i, ast.Constant)
                  and isinstance(i.value, int) and not isinstance(i.value, bool)]
        if len(consts) != len(items) or len(items) != len(arr.shape):
            return False
        linear = 0
        for i, n in zip(consts, arr.shape, strict=True):
            linear = linear * int(n or 1) + i
        offset = linear * arr.dtype.itemsize
        if offset % 128:
            raise self.error(KernelTypeError, arg,
                             f"{what}: TMA's shared address is a multiple of 128 bytes; "
                             f"`{self.text(arg)}` is {offset} bytes into the array",
                             hint="start the box at a 128-byte boundary (a leading "
                                  "dimension per stage keeps each stage aligned)")
        return True

    def _coord_count(self, node: ast.Call, tm: TensorMapArg, given: int, what: str) -> None:
        if given != tm.type.rank:
            raise self.error(KernelTypeError, node,
                             f"{what}: `{tm.name}` is {tm.type!r}, so it takes {tm.type.rank} "
                             f"coordinate{'s' if tm.type.rank > 1 else ''} (outermost first); "
                             f"got {given}")

    def intr_tma_load(self, node: ast.Call) -> Static:
        """`ox.tma.load(tmap, s, *coords, barrier, multicast=None)`: cp.async.bulk.tensor
        global -> shared::cluster, completing the mbarrier by the box's bytes."""
        what = "ox.tma.load()"
        self._need_unsafe(node, what, "writes shared memory asynchronously, ordered only "
                          "by the mbarrier")
        kw = self._kwargs(node, ("multicast",), what)
        if len(node.args) < 4:
            raise self.error(KernelTypeError, node,
                             f"{what} takes the tensor map, the shared array, one coordinate "
                             "per dimension, then the mbarrier (`bars[i]`)")
        tm = self._tensormap(node.args[0], what)
        coords_nodes = list(node.args[2:-1])
        self._coord_count(node, tm, len(coords_nodes), what)
        arr, idx, site, imm = self._tma_shared(node.args[1], tm, what)
        coords = self._coords(tm, coords_nodes)
        bar = self._barrier_address(node.args[-1], what)
        ops_in = [tm.ssa, bar, *coords]
        kind = f"tma.load.{tm.type.rank}d"
        if "multicast" in kw:
            mask = self.expr(kw["multicast"])
            if isinstance(mask, Lit) and not (isinstance(mask.value, int)
                                              and 0 < mask.value < 1 << 16):
                raise self.error(KernelTypeError, kw["multicast"],
                                 f"multicast= is a 16-bit mask of the cluster's blocks, not "
                                 f"{mask.value!r}")
            ops_in.append(self.b.cast(self._u32(mask, kw["multicast"], "multicast="), T.u16))
            kind += ".multicast"
        self._gpu_op(ops.HopperOp(kind, ops_in, [], arr.ssa, idx, imm=imm, site=site), node)
        return Static(None)

    def _barrier_address(self, arg: ast.expr, what: str) -> Any:
        """The mbarrier element's address, as a u64 (bounds-checked like the others)."""
        arr, idx, site = self._shared_element(arg, f"the mbarrier of {what}", ("u64", "i64"),
                                              "bars[0]")
        op = self._gpu_op(ops.HopperOp("tma.barrier", [], [ir_type(T.u64)], arr.ssa, idx,
                                       site=site), arg)
        return op.results[0]

    def intr_tma_store(self, node: ast.Call) -> Static:
        """`ox.tma.store(tmap, s, *coords)`: cp.async.bulk.tensor shared::cta -> global,
        in the current bulk group."""
        what = "ox.tma.store()"
        self._need_unsafe(node, what, "writes global memory asynchronously, ordered only by "
                          "ox.tma.wait_group()")
        self._kwargs(node, (), what)
        if len(node.args) < 3:
            raise self.error(KernelTypeError, node,
                             f"{what} takes the tensor map, the shared array, then one "
                             "coordinate per dimension")
        tm = self._tensormap(node.args[0], what)
        self._coord_count(node, tm, len(node.args) - 2, what)
        arr, idx, site, imm = self._tma_shared(node.args[1], tm, what)
        coords = self._coords(tm, list(node.args[2:]), store=True)
        self._gpu_op(ops.HopperOp(f"tma.store.{tm.type.rank}d", [tm.ssa, *coords], [],
                                  arr.ssa, idx, imm=imm, site=site), node)
        return Static(None)

    def intr_tma_prefetch(self, node: ast.Call) -> Static:
        what = "ox.tma.prefetch()"
        self._kwargs(node, (), what)
        if not node.args:
            raise self.error(KernelTypeError, node, f"{what} takes the tensor map and one "
                             "coordinate per dimension")
        tm = self._tensormap(node.args[0], what)
        self._coord_count(node, tm, len(node.args) - 1, what)
        coords = self._coords(tm, list(node.args[1:]))
        self._gpu_op(ops.HopperOp(f"tma.prefetch.{tm.type.rank}d", [tm.ssa, *coords], []),
                     node)
        return Static(None)

    def intr_tma_prefetch_descriptor(self, node: ast.Call) -> Static:
        what = "ox.tma.prefetch_descriptor()"
        self._kwargs(node, (), what)
        (arg,) = self._positional(node, 1, 1, f"{what[:-2]}(tmap)")
        tm = self._tensormap(arg, what)
        self._gpu_op(ops.HopperOp("tma.prefetch_descriptor", [tm.ssa], []), node)
        return Static(None)

    def intr_tma_commit_group(self, node: ast.Call) -> Any:
        self.args_exact(node, 0, "ox.tma.commit_group()")
        return self._simple(node, "tma.commit_group")

    def _tma_wait(self, node: ast.Call, kind: str) -> Any:
        what = f"ox.{kind}()"
        self._kwargs(node, (), what)
        (arg,) = self._positional(node, 1, 1, f"{what[:-2]}(n)")
        hint = "the number of bulk groups that may stay pending, 0 to 63"
        n = self._int_constant(arg, f"the count of {what}", hint)
        if not 0 <= n <= 63:
            raise self.error(KernelTypeError, arg, f"{what} takes {hint}, not {n}", hint=hint)
        return self._simple(node, kind, imm=(n,))

    def intr_tma_wait_group(self, node: ast.Call) -> Any:
        return self._tma_wait(node, "tma.wait_group")

    def intr_tma_wait_group_read(self, node: ast.Call) -> Any:
        return self._tma_wait(node, "tma.wait_group_read")


def _regroup(shape: Any, vals: list[Val]) -> Any:
    """`vals` in the tuple nesting of `shape` (the accumulators as they were passed)."""
    it = iter(vals)

    def build(v: Any) -> Any:
        if isinstance(v, Tup):
            return Tup(tuple(build(x) for x in v.items))
        return next(it)
    return build(shape)
