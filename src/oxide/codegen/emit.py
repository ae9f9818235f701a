"""oxide IR to LLVM IR text, for any target.

xDSL's own llvm dialect export cannot express what kernels need (the
`ptx_kernel` convention, address spaces, kernel attributes, see
TOOLCHAIN-NOTES), so oxide emits LLVM IR text itself: one pass over the CFG,
one LLVM instruction sequence per op. What differs per target (registers,
barriers, math, printf) is asked of a `Target`.
"""

from __future__ import annotations

import struct
from typing import Any

from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue

from oxide import types as T
from oxide.codegen.abi import ParamABI
from oxide.errors import TargetError, UnsupportedFeatureError
from oxide.frontend.builder import Site
from oxide.ir import ops
from oxide.ir.types import SharedArrayType, SlotType, ThreadIndexType, dtype_of_ir

_ICMP = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}
_LOOP_METADATA_BASE = 1000  # loop metadata ids start here; targets number theirs from 0
_FCMP = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}


def llvm_type(t: Attribute) -> str:
    return dtype_of_ir(t).llvm


def float_literal(value: float, dt: T.DType) -> str:
    """LLVM's spelling of a float constant of type `dt` (hex, so it is exact)."""
    if dt.name == "f64":
        return f"0x{struct.unpack('<Q', struct.pack('<d', value))[0]:016X}"
    if dt.name == "f32":
        rounded = struct.unpack("<f", struct.pack("<f", value))[0] if abs(value) < 3.5e38 else value
        return f"0x{struct.unpack('<Q', struct.pack('<d', rounded))[0]:016X}"
    if dt.name == "f16":
        return f"0xH{struct.unpack('<H', struct.pack('<e', value))[0]:04X}"
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return "0xR%04X" % (rounded & 0xFFFF)


class Emitter:
    """Emits one kernel; `target` supplies the target-specific pieces."""

    def __init__(self, func: ops.FuncOp, sites: list[Site], abi: list[ParamABI], target: Any,
                 contract: bool, prefetch: list[ops.LoadOp] | None = None) -> None:
        self.func = func
        # Block coarsening (codegen/coarsen.py): the body becomes a function of the logical
        # block index, and these loads arrive as parameters, issued early by the entry.
        self.prefetch = prefetch or []
        self.prefetched = {id(op): f"%oxide.pf{k}" for k, op in enumerate(self.prefetch)}
        self.register_overrides = ({"ctaid.x": "%oxide.ctaid.x", "nctaid.x": "%oxide.nctaid.x"}
                                   if self.prefetch else {})
        self.sites = sites
        self.abi = abi
        self.t = target
        self.fast = " contract" if contract else ""
        self.lines: list[str] = []
        self.current = "entry"
        self.names: dict[SSAValue, Any] = {}
        self.labels: dict[Block, str] = {}
        self.counter = 0
        self.globals: list[str] = []
        self.declares: set[str] = set()
        self.arrays: dict[SSAValue, dict[str, Any]] = {}

    # -- helpers ---------------------------------------------------------------------

    def tmp(self) -> str:
        self.counter += 1
        return f"%t{self.counter}"

    def label(self) -> str:
        self.counter += 1
        return f"L{self.counter}"

    def ins(self, text: str) -> str:
        name = self.tmp()
        self.lines.append(f"  {name} = {text}")
        return name

    def raw(self, text: str) -> None:
        self.lines.append(f"  {text}")

    def start_block(self, label: str) -> None:
        self.lines.append(f"{label}:")
        self.current = label

    def declare(self, decl: str) -> None:
        self.declares.add(decl)

    def v(self, ssa: SSAValue) -> Any:
        return self.names[ssa]

    # -- entry -----------------------------------------------------------------------

    def emit(self) -> str:
        params = self.bind_params()
        blocks = list(self.func.body.blocks)
        for i, block in enumerate(blocks):
            self.labels[block] = "entry" if i == 0 else f"bb{i}"
        body_start = len(self.lines)
        for block in blocks:
            self.start_block(self.labels[block])
            for op in block.ops:
                self.emit_op(op)
        body = self.lines[body_start:]
        if self.prefetch:
            return self.t.module_text(self, params, body, entry=self.coarsened_entry(params))
        return self.t.module_text(self, params, body)

    def coarsened_entry(self, params: list[str]) -> list[str]:
        """The kernel entry of a coarsened kernel: logical blocks F*b .. F*b+F-1, with the
        prefetchable reads of all of them issued before any body runs."""
        from oxide.codegen.coarsen import FACTOR

        saved, self.lines = self.lines, []
        self.start_block("entry")
        first = self.ins(f"mul nuw i32 {self.t.register(self, 'ctaid.x')}, {FACTOR}")
        blocks = [first] + [self.ins(f"add nuw i32 {first}, {k}") for k in range(1, FACTOR)]
        values = [self.prefetch_reads(lb) for lb in blocks]
        passed = ", ".join(f"{p.split()[0]} {p.split()[-1]}" for p in params)
        symbol = self.func.sym_name.data
        done = self.label()
        for k, (lb, vals) in enumerate(zip(blocks, values, strict=True)):
            if k:  # the last hardware block may hold fewer logical ones
                more, nxt = self.ins(f"icmp ult i32 {lb}, %oxide.grid.x"), self.label()
                self.raw(f"br i1 {more}, label %{nxt}, label %{done}")
                self.start_block(nxt)
            extra = "".join(f", {t} {v}" for t, v in vals)
            self.raw(f"call void @{symbol}.body({passed}, i32 {lb}, i32 %oxide.grid.x{extra})")
        self.raw(f"br label %{done}")
        self.start_block(done)
        self.raw("ret void")
        entry, self.lines = self.lines, saved
        return entry

    def prefetch_reads(self, ctaid_x: str) -> list[tuple[str, str]]:
        """Each prefetchable read for logical block `ctaid_x`, loaded through a select of its
        address and a dummy, so an out-of-range index reads nothing of the user's."""
        if "@oxide.dummy" not in "".join(self.globals):
            self.globals.append("@oxide.dummy = internal global [2 x i64] zeroinitializer, "
                                "align 16")
        witnesses: dict[int, list[str]] = {}
        out = []
        for op in self.prefetch:
            rank = op.indices[0].type.rank.data  # type: ignore[attr-defined]
            if rank not in witnesses:
                witnesses[rank] = self.witness_components(rank, ctaid_x)
            idx = witnesses[rank]
            dims = self.arrays[op.array]["dims"]
            ok = "true"
            for i, d in zip(idx, dims, strict=True):
                c = self.ins(f"icmp ult i64 {i}, {d}")
                ok = c if ok == "true" else self.ins(f"and i1 {ok}, {c}")
            addr = self.address(op.array, idx)
            safe = self.ins(f"select i1 {ok}, ptr {addr}, ptr @oxide.dummy")
            t = dtype_of_ir(op.result.type).llvm
            out.append((t, self.t.pin(self, t, self.ins(f"load {t}, ptr {safe}"))))
        return out

    def reg(self, name: str) -> str:
        """A hardware register, or its logical value in a coarsened body."""
        return self.register_overrides.get(name) or self.t.register(self, name)

    def bind_params(self) -> list[str]:
        """Names the flattened machine parameters and maps block arguments onto them."""
        params: list[str] = []
        args = list(self.func.body.blocks[0].args)
        for p, arg in zip(self.abi, args, strict=True):
            if p.is_array:
                spec = p.spec
                assert isinstance(spec, T.ArrayType)
                base = f"%{p.name}"
                # The launch rejects a writable array overlapping any other array argument,
                # so no array is reached through two parameters while one writes: `noalias`
                # (and `readonly` for a Slice) let LLVM keep loads in registers across
                # stores and use the GPU's read-only data cache (ld.global.nc).
                attrs = "noalias readonly " if spec.access == "slice" else "noalias "
                params.append(f"ptr {attrs}{base}")
                dims = [f"%{p.name}.n{d}" for d in range(spec.rank)]
                params += [f"i64 {d}" for d in dims]
                if spec.contiguous:
                    strides = None
                else:
                    strides = [f"%{p.name}.s{d}" for d in range(spec.rank)]
                    params += [f"i64 {s}" for s in strides]
                self.arrays[arg] = {"ptr": base, "dims": dims, "strides": strides,
                                    "dtype": spec.dtype, "space": "global"}
                self.names[arg] = base
            else:
                name = f"%{p.name}"
                params.append(f"{p.spec.llvm} {name}")
                self.names[arg] = name
        params.append("ptr %oxide.err")
        return params

    # -- ops -------------------------------------------------------------------------

    def emit_op(self, op: Operation) -> None:
        method = getattr(self, "op_" + type(op).__name__, None)
        if method is None:
            raise UnsupportedFeatureError(f"`{op.name}` is not supported on target {self.t.name}")
        method(op)

    def op_ConstantOp(self, op: ops.ConstantOp) -> None:
        dt = dtype_of_ir(op.result.type)
        value = op.value
        if isinstance(value, FloatAttr):
            text = float_literal(value.value.data, dt)
        else:
            assert isinstance(value, IntegerAttr)
            iv = value.value.data
            if dt.is_bool:
                text = "true" if iv else "false"
            else:
                iv = iv - (1 << dt.bits) if iv >= (1 << (dt.bits - 1)) else iv
                text = str(iv)
        self.names[op.result] = text

    def op_SlotOp(self, op: ops.SlotOp) -> None:
        assert isinstance(op.result.type, SlotType)
        self.names[op.result] = self.ins(f"alloca {llvm_type(op.result.type.elem)}")

    def op_SlotReadOp(self, op: ops.SlotReadOp) -> None:
        self.names[op.result] = self.ins(f"load {llvm_type(op.result.type)}, ptr {self.v(op.slot)}")

    def op_SlotWriteOp(self, op: ops.SlotWriteOp) -> None:
        self.raw(f"store {llvm_type(op.value.type)} {self.v(op.value)}, ptr {self.v(op.slot)}")

    def op_BranchOp(self, op: ops.BranchOp) -> None:
        if op.unroll is None:
            self.raw(f"br label %{self.labels[op.dest]}")
            return
        self.counter += 1
        loop = f"!{_LOOP_METADATA_BASE + self.counter}"
        self.globals.append(f'{loop} = distinct !{{{loop}, !{{!"llvm.loop.unroll.full"}}}}')
        self.raw(f"br label %{self.labels[op.dest]}, !llvm.loop {loop}")

    def op_CondBranchOp(self, op: ops.CondBranchOp) -> None:
        self.raw(f"br i1 {self.v(op.cond)}, label %{self.labels[op.then_block]}, "
                 f"label %{self.labels[op.else_block]}")

    def op_ReturnOp(self, op: ops.ReturnOp) -> None:
        self.raw(self.t.return_text)

    def op_UnreachableOp(self, op: ops.UnreachableOp) -> None:
        self.raw("unreachable")

    def op_SelectOp(self, op: ops.SelectOp) -> None:
        t = llvm_type(op.result.type)
        self.names[op.result] = self.ins(
            f"select i1 {self.v(op.cond)}, {t} {self.v(op.if_true)}, {t} {self.v(op.if_false)}")

    def op_CompareOp(self, op: ops.CompareOp) -> None:
        dt = dtype_of_ir(op.lhs.type)
        pred = op.predicate.data
        a, b = self.v(op.lhs), self.v(op.rhs)
        if dt.is_float:
            text = f"fcmp {_FCMP[pred]} {dt.llvm} {a}, {b}"
        else:
            if pred in ("eq", "ne"):
                p = pred
            else:
                p = ("s" if dt.is_signed else "u") + _ICMP[pred]
            text = f"icmp {p} {dt.llvm} {a}, {b}"
        self.names[op.result] = self.ins(text)

    def op_UnaryOp(self, op: ops.UnaryOp) -> None:
        dt = dtype_of_ir(op.result.type)
        x = self.v(op.operand)
        kind = op.kind.data
        if kind == "not":
            r = self.ins(f"xor i1 {x}, true")
        elif kind == "invert":
            r = self.ins(f"xor {dt.llvm} {x}, -1")
        elif kind == "neg":
            r = self.ins(f"fneg {dt.llvm} {x}") if dt.is_float else self.ins(f"sub {dt.llvm} 0, {x}")
        elif kind == "abs":
            if dt.is_float:
                r = self.intrinsic(f"llvm.fabs.{_suffix(dt)}", dt.llvm, [(dt.llvm, x)])
            else:
                r = self.intrinsic(f"llvm.abs.{dt.llvm}", dt.llvm, [(dt.llvm, x), ("i1", "false")])
        else:
            raise UnsupportedFeatureError(f"unary `{kind}`")
        self.names[op.result] = r

    def intrinsic(self, name: str, ret: str, args: list[tuple[str, str]]) -> str:
        self.declare(f"declare {ret} @{name}({', '.join(t for t, _ in args)})")
        call = f"call {ret} @{name}({', '.join(f'{t} {v}' for t, v in args)})"
        if ret == "void":
            self.raw(call)
            return ""
        return self.ins(call)

    def op_BinaryOp(self, op: ops.BinaryOp) -> None:
        dt = dtype_of_ir(op.result.type)
        a, b = self.v(op.lhs), self.v(op.rhs)
        kind = op.kind.data
        t = dt.llvm
        if dt.is_float:
            r = self.float_binary(kind, dt, a, b)
        elif kind in ("add", "sub", "mul", "and", "or", "xor"):
            r = self.ins(f"{kind} {t} {a}, {b}")
        elif kind in ("min", "max"):
            r = self.intrinsic(f"llvm.{'s' if dt.is_signed else 'u'}{kind}.{t}", t,
                               [(t, a), (t, b)])
        elif kind in ("shl", "shr"):
            ok = self.ins(f"icmp ult {t} {b}, {dt.bits}")
            if kind == "shl":
                s = self.ins(f"shl {t} {a}, {b}")
                r = self.ins(f"select i1 {ok}, {t} {s}, {t} 0")
            elif dt.is_signed:
                amt = self.ins(f"select i1 {ok}, {t} {b}, {t} {dt.bits - 1}")
                r = self.ins(f"ashr {t} {a}, {amt}")
            else:
                s = self.ins(f"lshr {t} {a}, {b}")
                r = self.ins(f"select i1 {ok}, {t} {s}, {t} 0")
        elif kind in ("floordiv", "mod"):
            r = self.int_division(kind, dt, a, b, op)
        else:
            raise UnsupportedFeatureError(f"integer `{kind}`")
        self.names[op.result] = r

    def float_binary(self, kind: str, dt: T.DType, a: str, b: str) -> str:
        t = dt.llvm
        if kind in ("add", "sub", "mul"):
            return self.ins(f"f{kind}{self.fast} {t} {a}, {b}")
        if kind == "div":
            return self.ins(f"fdiv {t} {a}, {b}")
        if kind in ("min", "max"):
            return self.intrinsic(f"llvm.{kind}num.{_suffix(dt)}", t, [(t, a), (t, b)])
        if kind == "floordiv":
            q = self.ins(f"fdiv {t} {a}, {b}")
            return self.intrinsic(f"llvm.floor.{_suffix(dt)}", t, [(t, q)])
        if kind == "mod":  # Python's modulo: the result takes the divisor's sign
            r = self.ins(f"frem {t} {a}, {b}")
            nz = self.ins(f"fcmp une {t} {r}, 0.0")
            rneg = self.ins(f"fcmp olt {t} {r}, 0.0")
            bneg = self.ins(f"fcmp olt {t} {b}, 0.0")
            diff = self.ins(f"xor i1 {rneg}, {bneg}")
            fix = self.ins(f"and i1 {nz}, {diff}")
            adj = self.ins(f"fadd {t} {r}, {b}")
            return self.ins(f"select i1 {fix}, {t} {adj}, {t} {r}")
        raise UnsupportedFeatureError(f"float `{kind}`")

    def int_division(self, kind: str, dt: T.DType, a: str, b: str, op: ops.BinaryOp) -> str:
        """Python's floor division and modulo; a zero divisor is reported, not a crash."""
        t = dt.llvm
        zero = self.ins(f"icmp eq {t} {b}, 0")
        site = op.properties.get("site")
        if site is not None:
            self.report_if(zero, 3, site.data, a, b)  # type: ignore[attr-defined]
        if dt.is_signed:
            minus1 = self.ins(f"icmp eq {t} {b}, -1")
            bad = self.ins(f"or i1 {zero}, {minus1}")
            safe_b = self.ins(f"select i1 {bad}, {t} 1, {t} {b}")
            q = self.ins(f"sdiv {t} {a}, {safe_b}")
            r = self.ins(f"srem {t} {a}, {safe_b}")
            rnz = self.ins(f"icmp ne {t} {r}, 0")
            rneg = self.ins(f"icmp slt {t} {r}, 0")
            bneg = self.ins(f"icmp slt {t} {safe_b}, 0")
            diff = self.ins(f"xor i1 {rneg}, {bneg}")
            fix = self.ins(f"and i1 {rnz}, {diff}")
            if kind == "floordiv":
                q1 = self.ins(f"sub {t} {q}, 1")
                res = self.ins(f"select i1 {fix}, {t} {q1}, {t} {q}")
                neg = self.ins(f"sub {t} 0, {a}")
                res = self.ins(f"select i1 {minus1}, {t} {neg}, {t} {res}")
            else:
                r1 = self.ins(f"add {t} {r}, {safe_b}")
                res = self.ins(f"select i1 {fix}, {t} {r1}, {t} {r}")
                res = self.ins(f"select i1 {minus1}, {t} 0, {t} {res}")
        else:
            safe_b = self.ins(f"select i1 {zero}, {t} 1, {t} {b}")
            res = self.ins(f"{'udiv' if kind == 'floordiv' else 'urem'} {t} {a}, {safe_b}")
        return self.ins(f"select i1 {zero}, {t} 0, {t} {res}")

    def op_CastOp(self, op: ops.CastOp) -> None:
        src = dtype_of_ir(op.operand.type)
        dst = dtype_of_ir(op.result.type)
        self.names[op.result] = self.cast(self.v(op.operand), src, dst)

    def cast(self, x: str, src: T.DType, dst: T.DType) -> str:
        if src == dst:
            return x
        if dst.is_bool:
            if src.is_float:
                return self.ins(f"fcmp une {src.llvm} {x}, 0.0")
            return self.ins(f"icmp ne {src.llvm} {x}, 0")
        if src.is_float and dst.is_float:
            if {src.name, dst.name} == {"f16", "bf16"}:
                return self.cast(self.cast(x, src, T.f32), T.f32, dst)
            op = "fpext" if dst.bits > src.bits else "fptrunc"
            return self.ins(f"{op} {src.llvm} {x} to {dst.llvm}")
        if src.is_float:
            kind = "fptosi" if dst.is_signed else "fptoui"
            return self.intrinsic(f"llvm.{kind}.sat.{dst.llvm}.{_suffix(src)}", dst.llvm,
                                  [(src.llvm, x)])
        if dst.is_float:
            op = "sitofp" if src.is_signed else "uitofp"
            return self.ins(f"{op} {src.llvm} {x} to {dst.llvm}")
        if dst.bits < src.bits:
            return self.ins(f"trunc {src.llvm} {x} to {dst.llvm}")
        if dst.bits == src.bits:
            return x
        op = "sext" if src.is_signed else "zext"
        return self.ins(f"{op} {src.llvm} {x} to {dst.llvm}")

    def op_MathOp(self, op: ops.MathOp) -> None:
        dt = dtype_of_ir(op.args[0].type)
        ret = dtype_of_ir(op.result.type)
        self.names[op.result] = self.t.math(self, op.fn.data, dt, ret, [self.v(a) for a in op.args])

    # -- indexing --------------------------------------------------------------------

    def op_RegisterOp(self, op: ops.RegisterOp) -> None:
        self.names[op.result] = self.reg(op.reg.data)

    def op_ThreadIndexOp(self, op: ops.ThreadIndexOp) -> None:
        self.names[op.result] = self.witness_components(op.rank.data)

    def witness_components(self, rank: int, ctaid_x: str | None = None) -> list[str]:
        """A witness's coordinates as i64: (x) or (row = y, col = x)."""
        def axis(a: str) -> str:
            tid = self.cast(self.reg(f"tid.{a}"), T.u32, T.i64)
            block = ctaid_x if (a == "x" and ctaid_x) else self.reg(f"ctaid.{a}")
            cta = self.cast(block, T.u32, T.i64)
            nt = self.cast(self.reg(f"ntid.{a}"), T.u32, T.i64)
            m = self.ins(f"mul nuw nsw i64 {cta}, {nt}")
            return self.ins(f"add nuw nsw i64 {m}, {tid}")

        return [axis("x")] if rank == 1 else [axis("y"), axis("x")]

    def op_IndexComponentOp(self, op: ops.IndexComponentOp) -> None:
        self.names[op.result] = self.v(op.witness)[op.dim.data]

    def op_ArrayDimOp(self, op: ops.ArrayDimOp) -> None:
        self.names[op.result] = self.arrays[op.array]["dims"][op.dim.data]

    def op_InBoundsOp(self, op: ops.InBoundsOp) -> None:
        comps = self.v(op.witness)
        dims = self.arrays[op.array]["dims"]
        result = "true"
        for c, d in zip(comps, dims, strict=True):
            ok = self.ins(f"icmp ult i64 {c}, {d}")
            result = ok if result == "true" else self.ins(f"and i1 {result}, {ok}")
        self.names[op.result] = result

    def op_FixedArrayOp(self, op: ops.FixedArrayOp) -> None:
        t = op.result.type
        assert isinstance(t, SharedArrayType)
        dt = dtype_of_ir(t.elem)
        space = t.space.data
        if t.shape.data == "?":  # dynamic shared memory: the target knows its length
            ptr, length = self.target_hook("dynamic_shared", "dynamic shared memory")(self, dt)
            self.arrays[op.result] = {"ptr": ptr, "dims": [length], "strides": None,
                                      "dtype": dt, "space": space}
            self.names[op.result] = ptr
            return
        shape = [int(s) for s in t.shape.data.split("x")]
        count = 1
        for s in shape:
            count *= s
        if space == "local":
            ptr = self.ins(f"alloca [{count} x {dt.llvm}], align 16")
        elif space == "constant":
            assert op.sym is not None
            hook = self.target_hook("constant_array", "constant memory")
            ptr = hook(self, dt, count, op.sym.data)
        else:
            ptr = self.t.shared_array(self, dt, count)
        self.arrays[op.result] = {"ptr": ptr, "dims": [str(s) for s in shape],
                                  "strides": None, "dtype": dt, "space": space}
        self.names[op.result] = ptr

    def target_hook(self, name: str, what: str) -> Any:
        """An optional target hook; a target without it does not support `what`."""
        hook = getattr(self.t, name, None)
        if hook is None:
            raise UnsupportedFeatureError(f"{what} is not supported on target {self.t.name} yet")
        return hook

    def index_list(self, indices: list[SSAValue]) -> list[str]:
        if len(indices) == 1 and isinstance(indices[0].type, ThreadIndexType):
            return list(self.v(indices[0]))
        return [self.v(i) for i in indices]

    def address(self, array: SSAValue, idx: list[str]) -> str:
        info = self.arrays[array]
        dims, strides = info["dims"], info["strides"]
        offset = None
        if strides is None:
            for d, i in enumerate(idx):
                if offset is None:
                    offset = i
                else:
                    m = self.ins(f"mul nsw i64 {offset}, {dims[d]}")
                    offset = self.ins(f"add nsw i64 {m}, {i}")
        else:
            for i, s in zip(idx, strides, strict=True):
                term = self.ins(f"mul nsw i64 {i}, {s}")
                offset = term if offset is None else self.ins(f"add nsw i64 {offset}, {term}")
        ptr_t = self.t.pointer_type(info["space"])
        return self.ins(f"getelementptr inbounds {info['dtype'].llvm}, {ptr_t} {info['ptr']}, "
                        f"i64 {offset}")

    def bounds_check(self, array: SSAValue, idx: list[str], site: int) -> tuple[str, str] | None:
        """Branches to a report when an index is out of range; returns (ok_label, bad_label)."""
        dims = self.arrays[array]["dims"]
        ok = "true"
        fail_idx, fail_len, fail_dim = idx[-1], dims[-1], str(len(idx) - 1)
        for d in reversed(range(len(idx))):
            c = self.ins(f"icmp ult i64 {idx[d]}, {dims[d]}")
            ok = c if ok == "true" else self.ins(f"and i1 {ok}, {c}")
            if d != len(idx) - 1:
                fail_idx = self.ins(f"select i1 {c}, i64 {fail_idx}, i64 {idx[d]}")
                fail_len = self.ins(f"select i1 {c}, i64 {fail_len}, i64 {dims[d]}")
                fail_dim = self.ins(f"select i1 {c}, i32 {fail_dim}, i32 {d}")
        good, bad = self.label(), self.label()
        self.raw(f"br i1 {ok}, label %{good}, label %{bad}, !prof !0")
        self.start_block(bad)
        self.call_report(1, site, fail_idx, fail_len, fail_dim)
        return good, bad

    def call_report(self, kind: int, site: int, index: str, length: str, dim: str = "0") -> None:
        self.raw(f"call void @oxide.report(ptr %oxide.err, i32 {kind}, i32 {site}, i32 {dim}, "
                 f"i64 {index}, i64 {length})")

    def report_if(self, cond: str, kind: int, site: int, a: str, b: str) -> None:
        bad, cont = self.label(), self.label()
        self.raw(f"br i1 {cond}, label %{bad}, label %{cont}, !prof !1")
        self.start_block(bad)
        self.call_report(kind, site, "0", "0")
        self.raw(f"br label %{cont}")
        self.start_block(cont)

    def op_LoadOp(self, op: ops.LoadOp) -> None:
        dt = dtype_of_ir(op.result.type)
        idx = self.index_list(list(op.indices))
        info = self.arrays[op.array]
        ptr_t = self.t.pointer_type(info["space"])
        early = self.prefetched.get(id(op))
        if early is not None:  # read at entry; the check and its report stay here
            if not op.checked.data:
                self.names[op.result] = early
                return
            good, bad = self.bounds_check(op.array, idx, op.site.data)
            join = self.label()
            self.raw(f"br label %{join}")
            self.start_block(good)
            self.raw(f"br label %{join}")
            self.start_block(join)
            zero = "0.0" if dt.is_float else ("false" if dt.is_bool else "0")
            self.names[op.result] = self.ins(
                f"phi {dt.llvm} [ {early}, %{good} ], [ {zero}, %{bad} ]")
            return
        if not op.checked.data:
            addr = self.address(op.array, idx)
            self.names[op.result] = self.ins(f"load {dt.llvm}, {ptr_t} {addr}")
            return
        good, bad = self.bounds_check(op.array, idx, op.site.data)
        join = self.label()
        self.raw(f"br label %{join}")
        self.start_block(good)
        addr = self.address(op.array, idx)
        value = self.ins(f"load {dt.llvm}, {ptr_t} {addr}")
        good = self.current
        self.raw(f"br label %{join}")
        self.start_block(join)
        zero = "0.0" if dt.is_float else ("false" if dt.is_bool else "0")
        self.names[op.result] = self.ins(f"phi {dt.llvm} [ {value}, %{good} ], [ {zero}, %{bad} ]")

    def op_StoreOp(self, op: ops.StoreOp) -> None:
        dt = dtype_of_ir(op.value.type)
        idx = self.index_list(list(op.indices))
        info = self.arrays[op.array]
        ptr_t = self.t.pointer_type(info["space"])
        value = self.v(op.value)
        if not op.checked.data:
            addr = self.address(op.array, idx)
            self.raw(f"store {dt.llvm} {value}, {ptr_t} {addr}")
            return
        good, bad = self.bounds_check(op.array, idx, op.site.data)
        join = self.label()
        self.raw(f"br label %{join}")
        self.start_block(good)
        addr = self.address(op.array, idx)
        self.raw(f"store {dt.llvm} {value}, {ptr_t} {addr}")
        self.raw(f"br label %{join}")
        self.start_block(join)

    def op_AtomicOp(self, op: ops.AtomicOp) -> None:
        dt = dtype_of_ir(op.result.type)
        idx = self.index_list(list(op.indices))
        info = self.arrays[op.array]
        good, bad = self.bounds_check(op.array, idx, op.site.data)
        join = self.label()
        self.raw(f"br label %{join}")
        self.start_block(good)
        addr = self.address(op.array, idx)
        compare = self.v(op.compare[0]) if op.compare else None
        old = self.t.atomic(self, op.kind.data, op.scope.data, dt, addr, self.v(op.value),
                            compare, info["space"])
        good_end = self.current
        self.raw(f"br label %{join}")
        self.start_block(join)
        zero = "0.0" if dt.is_float else "0"
        self.names[op.result] = self.ins(
            f"phi {dt.llvm} [ {old}, %{good_end} ], [ {zero}, %{bad} ]")

    # -- effects ---------------------------------------------------------------------

    def op_AssertOp(self, op: ops.AssertOp) -> None:
        bad = self.ins(f"xor i1 {self.v(op.cond)}, true")
        self.report_if(bad, 2, op.site.data, "0", "0")

    def op_PrintOp(self, op: ops.PrintOp) -> None:
        self.t.printf(self, op.format.data, [(dtype_of_ir(a.type), self.v(a)) for a in op.args])

    def op_BarrierOp(self, op: ops.BarrierOp) -> None:
        self.t.barrier(self, op.kind.data)

    def op_WarpOp(self, op: ops.WarpOp) -> None:
        args = [(dtype_of_ir(a.type), self.v(a)) for a in op.args]
        self.names[op.result] = self.t.warp(self, op.kind.data, args,
                                            dtype_of_ir(op.result.type))

    def printf_values(self, args: list[tuple[T.DType, str]]) -> list[tuple[str, str]]:
        """printf's view of `print` arguments: C's default promotions (floats to double,
        small ints to 32 bits) and bools as "True"/"False" strings, as Python prints them."""
        values = []
        for dt, v in args:
            if dt.is_bool:
                t_str, f_str = self.string_constant("True"), self.string_constant("False")
                values.append(("ptr", self.ins(f"select i1 {v}, ptr {t_str}, ptr {f_str}")))
            elif dt.is_float:
                values.append(("double", self.cast(v, dt, T.f64)))
            elif dt.bits < 32:
                values.append(("i32", self.cast(v, dt, T.i32 if dt.is_signed else T.u32)))
            else:
                values.append((dt.llvm, v))
        return values

    def string_constant(self, text: str) -> str:
        data = text.encode() + b"\0"
        self.counter += 1
        name = f"@oxide.str{self.counter}"
        esc = "".join(chr(c) if 32 <= c < 127 and c not in (34, 92) else f"\\{c:02X}"
                      for c in data)
        self.globals.append(f"{name} = private unnamed_addr constant [{len(data)} x i8] "
                            f"c\"{esc}\", align 1")
        return name


def _suffix(dt: T.DType) -> str:
    return {"f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64"}[dt.name]


REPORT_FUNCTION = """
define internal void @oxide.report(ptr %err, i32 %kind, i32 %site, i32 %dim, i64 %index, i64 %length) noinline cold {
entry:
  %pair = cmpxchg ptr %err, i32 0, i32 1 monotonic monotonic
  %won = extractvalue { i32, i1 } %pair, 1
  br i1 %won, label %write, label %done
write:
  %p.site = getelementptr inbounds i8, ptr %err, i64 8
  store volatile i32 %site, ptr %p.site
  %p.dim = getelementptr inbounds i8, ptr %err, i64 12
  store volatile i32 %dim, ptr %p.dim
  %p.index = getelementptr inbounds i8, ptr %err, i64 16
  store volatile i64 %index, ptr %p.index
  %p.length = getelementptr inbounds i8, ptr %err, i64 24
  store volatile i64 %length, ptr %p.length
  fence seq_cst
  %p.kind = getelementptr inbounds i8, ptr %err, i64 4
  store volatile i32 %kind, ptr %p.kind
  br label %done
done:
  ret void
}
"""


def check_supported(target: Any, func: ops.FuncOp) -> None:
    """Reject, before LLVM sees it, what the target cannot select (LLVM would abort)."""
    for op in func.walk():
        reason = target.unsupported(op)
        if reason:
            raise TargetError(reason)
