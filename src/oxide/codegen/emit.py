"""oxide IR to LLVM IR text, for any target.

xDSL's own llvm dialect export cannot express what kernels need (the
`ptx_kernel` convention, address spaces, kernel attributes, see
TOOLCHAIN-NOTES), so oxide emits LLVM IR text itself: one pass over the CFG,
one LLVM instruction sequence per op. What differs per target (registers,
barriers, math, printf) is asked of a `Target`.
"""

from __future__ import annotations

from typing import Any

from xdsl.ir import Attribute, Block, Operation, SSAValue

from oxide import types as T
from oxide.codegen.abi import DEPTH_SITE, ParamABI
from oxide.codegen.coarsen_emit import CoarseningMixin
from oxide.codegen.emit_arith import ArithmeticMixin, float_literal
from oxide.codegen.emit_masked import MaskedAccessMixin
from oxide.codegen.emit_memory import MemoryMixin
from oxide.errors import TargetError, UnsupportedFeatureError
from oxide.ir import ops
from oxide.ir.sites import Site
from oxide.ir.types import SlotType, dtype_of_ir

_LOOP_METADATA_BASE = 1000  # loop metadata ids start here; targets number theirs from 0

# MathOp functions computed in integer code the same way on every target (`bit_math`).
BIT_MATH = frozenset({"popc", "clz", "ffs", "brev", "mulhi", "byte_perm", "frexp_mantissa",
                      "frexp_exponent"})


def llvm_type(t: Attribute) -> str:
    return dtype_of_ir(t).llvm


class Emitter(ArithmeticMixin, MemoryMixin, MaskedAccessMixin, CoarseningMixin):
    """Emits one kernel; `target` supplies the target-specific pieces.

    The ops live in mixins by subject: arithmetic (emit_arith.py), memory
    (emit_memory.py), the coarsened entry (coarsen_emit.py); control flow,
    registers and effects are here."""

    def __init__(self, func: ops.FuncOp, sites: list[Site], abi: list[ParamABI], target: Any,
                 contract: bool, prefetch: list[ops.LoadOp] | None = None,
                 lines: Any = None, origins: dict[Operation, tuple[Any, ...]] | None = None
                 ) -> None:
        self.func = func
        # lineinfo (codegen/lineinfo.py): the module's LineTable, each op's statement, and
        # the `!dbg` suffix of the instructions being emitted now
        self.line_table = lines
        self.origins = origins or {}
        self.dbg = ""
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
        # recursive @ox.func specializations (frontend/device_functions.py) the kernel calls,
        # and their LLVM definitions once emitted (targets put them in the module)
        self.device_functions: list[ops.FuncOp] = []
        self.function_texts: list[str] = []
        self.frame_bound = 0  # bytes: the largest device function frame (frame_estimate)
        self.depth_next = "1"  # the call depth a device function called from here runs at
        # set by code that a call in its function slows down (wgmma: ptxas serializes it,
        # note C7509): the module then inlines the failed-check report instead of calling it
        self.inline_reports = False
        # the same for f32 division, whose `div.rn.f32` has a slow path ptxas calls: in a
        # kernel with wgmma it is computed without one (emit_arith.py `call_free_divide`)
        self.call_free_division = target.name == "nvptx" and any(
            isinstance(op, ops.HopperOp) and op.kind.data.startswith("wgmma.m")
            for op in func.walk())

    # -- helpers ---------------------------------------------------------------------

    def tmp(self) -> str:
        self.counter += 1
        return f"%t{self.counter}"

    def label(self) -> str:
        self.counter += 1
        return f"L{self.counter}"

    def ins(self, text: str) -> str:
        name = self.tmp()
        self.lines.append(f"  {name} = {text}{self.dbg}")
        return name

    def raw(self, text: str) -> None:
        self.lines.append(f"  {text}{self.dbg}")

    def start_block(self, label: str) -> None:
        self.lines.append(f"{label}:")
        self.current = label

    def declare(self, decl: str) -> None:
        self.declares.add(decl)

    def struct_type(self, members: list[str]) -> str:
        """An LLVM struct type of `members`: spelled out where short, named where its
        members are many of one type (`%oxide.floatx128` for wgmma's accumulators), so
        that the extractvalue of each member does not repeat a 128-member type: that
        was 1.5 MB of tile_attention's 1.9 MB of IR text, built here and parsed by LLVM."""
        if len(members) < 8 or len(set(members)) > 1:
            return "{ " + ", ".join(members) + " }"
        name = f"%oxide.{members[0]}x{len(members)}"
        self.declare(f"{name} = type {{ {', '.join(members)} }}")
        return name

    def v(self, ssa: SSAValue) -> Any:
        return self.names[ssa]

    # -- entry -----------------------------------------------------------------------

    def emit(self) -> str:
        params = self.bind_params()
        blocks = list(self.func.body.blocks)
        for i, block in enumerate(blocks):
            self.labels[block] = "entry" if i == 0 else f"bb{i}"
        body_start = len(self.lines)
        # the depth guards (`op_CallOp`, `depth_guard`) divide the CPU's stack by this
        self.frame_bound = max((frame_estimate(f) for f in self.device_functions), default=0)
        for block in blocks:
            self.start_block(self.labels[block])
            for op in block.ops:
                self.dbg = self.debug_location(op)
                self.emit_op(op)
        self.dbg = ""
        body = self.lines[body_start:]
        for f in self.device_functions:
            self.function_texts.append(FunctionEmitter(self, f).function_text())
        if self.prefetch:
            return self.t.module_text(self, params, body, entry=self.coarsened_entry(params))
        return self.t.module_text(self, params, body)

    def debug_location(self, op: Operation) -> str:
        """`, !dbg !N` for the instructions of `op` (its innermost statement), or ""."""
        table = self.line_table
        where = self.origins.get(op)
        if table is None or not where:
            return ""
        return f", !dbg {table.location(where[-1], table.body_scope, table.body_file)}"

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
                                    "dtype": spec.dtype, "space": "global",
                                    "readonly": spec.access == "slice"}
                self.names[arg] = base
            elif isinstance(p.spec, T.TensorMapType):  # the TMA descriptor (codegen/hopper.py)
                name = f"%{p.name}"
                params.append(self.t.tensormap_param(name) if self.t.name == "nvptx"
                              else f"ptr noalias readonly {name}")
                self.names[arg] = name
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

    def intrinsic(self, name: str, ret: str, args: list[tuple[str, str]]) -> str:
        self.declare(f"declare {ret} @{name}({', '.join(t for t, _ in args)})")
        call = f"call {ret} @{name}({', '.join(f'{t} {v}' for t, v in args)})"
        if ret == "void":
            self.raw(call)
            return ""
        return self.ins(call)

    # smallest normal f32 and f64 (2^-126, 2^-1022), as LLVM's hex doubles
    _MIN_NORMAL = {"f32": "0x3810000000000000", "f64": "0x0010000000000000"}

    def flush_subnormal(self, value: str, dt: T.DType) -> str:
        """`value` with a subnormal magnitude replaced by a zero of its sign: what a
        flush-to-zero instruction gives (`tile.exp2(x, flush_to_zero=True)` where the
        target has no such instruction: the CPU, and f64 on the GPU)."""
        t = dt.llvm
        mag = self.intrinsic(f"llvm.fabs.{dt.name}", t, [(t, value)])
        tiny = self.ins(f"fcmp olt {t} {mag}, {self._MIN_NORMAL[dt.name]}")
        zero = self.intrinsic(f"llvm.copysign.{dt.name}", t, [(t, "0.0"), (t, value)])
        return self.ins(f"select i1 {tiny}, {t} {zero}, {t} {value}")

    # -- bit-level math (ox.popc & co., frexp), shared by the targets ------------------

    def bit_math(self, fn: str, dt: T.DType, ret: T.DType, args: list[str]) -> str:
        """An integer intrinsic or frexp, from LLVM's bit intrinsics (which NVPTX selects as
        popc/clz/brev and x86 as popcnt/lzcnt/tzcnt or short sequences), so both targets
        compute the same bits. `byte_perm` here is the CPU's: the GPU uses `prmt`."""
        t = dt.llvm
        if fn in ("frexp_mantissa", "frexp_exponent"):
            m, e = self.frexp_parts(dt, args[0])
            return m if fn == "frexp_mantissa" else e
        if fn == "byte_perm":
            return self.soft_byte_perm(*args)
        x = args[0]
        if fn == "popc":
            if dt.bits < 32:  # x.bit_count() of a narrow value: its own bits, zero-extended
                x, t, dt = self.ins(f"zext {t} {x} to i32"), "i32", T.u32
            r = self.intrinsic(f"llvm.ctpop.{t}", t, [(t, x)])
        elif fn == "clz":
            r = self.intrinsic(f"llvm.ctlz.{t}", t, [(t, x), ("i1", "false")])
        elif fn == "ffs":
            tz = self.intrinsic(f"llvm.cttz.{t}", t, [(t, x), ("i1", "false")])
            one = self.ins(f"add {t} {tz}, 1")
            zero = self.ins(f"icmp eq {t} {x}, 0")
            r = self.ins(f"select i1 {zero}, {t} 0, {t} {one}")
        elif fn == "brev":
            return self.intrinsic(f"llvm.bitreverse.{t}", t, [(t, x)])
        elif fn == "mulhi":
            wide = f"i{2 * dt.bits}"
            ext = "sext" if dt.is_signed else "zext"
            a = self.ins(f"{ext} {t} {x} to {wide}")
            b = self.ins(f"{ext} {t} {args[1]} to {wide}")
            p = self.ins(f"mul {wide} {a}, {b}")
            high = self.ins(f"lshr {wide} {p}, {dt.bits}")
            return self.ins(f"trunc {wide} {high} to {t}")
        else:
            raise UnsupportedFeatureError(f"integer intrinsic `{fn}`")
        # popc, clz and ffs count at most 64: their i32 result is the count's low bits
        if dt.bits == 64:
            return self.ins(f"trunc i64 {r} to i32")
        return r

    def soft_byte_perm(self, x: str, y: str, s: str) -> str:
        """PTX `prmt.b32` (CUDA's __byte_perm) in integer code: result byte n is byte
        `s >> 4n & 7` of the 8 bytes y:x, or, where bit 3 of that nibble is set, that byte's
        sign bit copied into all 8 bits."""
        lo = self.ins(f"zext i32 {x} to i64")
        hi = self.ins(f"zext i32 {y} to i64")
        hi = self.ins(f"shl i64 {hi}, 32")
        both = self.ins(f"or i64 {hi}, {lo}")
        result = "0"
        for n in range(4):
            nib = self.ins(f"lshr i32 {s}, {4 * n}")
            nib = self.ins(f"and i32 {nib}, 15")
            sel = self.ins(f"and i32 {nib}, 7")
            shift = self.ins(f"shl i32 {sel}, 3")
            shift = self.ins(f"zext i32 {shift} to i64")
            byte = self.ins(f"lshr i64 {both}, {shift}")
            byte = self.ins(f"trunc i64 {byte} to i32")
            byte = self.ins(f"and i32 {byte}, 255")
            neg = self.ins(f"icmp uge i32 {byte}, 128")
            fill = self.ins(f"select i1 {neg}, i32 255, i32 0")
            flag = self.ins(f"and i32 {nib}, 8")
            use_fill = self.ins(f"icmp ne i32 {flag}, 0")
            byte = self.ins(f"select i1 {use_fill}, i32 {fill}, i32 {byte}")
            placed = self.ins(f"shl i32 {byte}, {8 * n}")
            result = self.ins(f"or i32 {result}, {placed}")
        return result

    def frexp_parts(self, dt: T.DType, x: str) -> tuple[str, str]:
        """C's frexp of an f32/f64 in integer code: (mantissa in [0.5, 1) with x's sign, i32
        exponent), exact; subnormals are scaled into the normal range first; 0, inf and NaN
        give (x, 0). Neither target has a pointer-free library frexp."""
        t = dt.llvm
        it, mbits, emask = ("i64", 52, 0x7FF) if dt.bits == 64 else ("i32", 23, 0xFF)
        bias = emask // 2 - 1  # 1022 or 126: frexp's mantissa is in [0.5, 1)
        scale_bits = mbits + 2  # 2**54 or 2**25 lifts the smallest subnormal to a normal
        width = 64 if dt.bits == 64 else 32
        signed = lambda v: v - (1 << width) if v >= 1 << (width - 1) else v  # noqa: E731
        mag = self.intrinsic(f"llvm.fabs.{dt.name}", t, [(t, x)])
        tiny = self.ins(f"fcmp olt {t} {mag}, {float_literal(2.0 ** -bias, dt)}")
        scaled = self.ins(f"fmul {t} {x}, {float_literal(2.0 ** scale_bits, dt)}")
        norm = self.ins(f"select i1 {tiny}, {t} {scaled}, {t} {x}")
        bits = self.ins(f"bitcast {t} {norm} to {it}")
        field = self.ins(f"lshr {it} {bits}, {mbits}")
        field = self.ins(f"and {it} {field}, {emask}")
        adjust = self.ins(f"select i1 {tiny}, {it} {-scale_bits - bias}, {it} {-bias}")
        exp = self.ins(f"add {it} {field}, {adjust}")
        if it == "i64":
            exp = self.ins(f"trunc i64 {exp} to i32")
        keep = signed(((1 << width) - 1) ^ (emask << mbits))
        mbits_v = self.ins(f"and {it} {bits}, {keep}")
        mbits_v = self.ins(f"or {it} {mbits_v}, {bias << mbits}")
        mant = self.ins(f"bitcast {it} {mbits_v} to {t}")
        finite = self.ins(f"fcmp olt {t} {mag}, {float_literal(float('inf'), dt)}")
        nonzero = self.ins(f"fcmp one {t} {x}, {float_literal(0.0, dt)}")
        regular = self.ins(f"and i1 {finite}, {nonzero}")
        mant = self.ins(f"select i1 {regular}, {t} {mant}, {t} {x}")
        exp = self.ins(f"select i1 {regular}, i32 {exp}, i32 0")
        return mant, exp

    def op_ArraySelectOp(self, op: ops.ArraySelectOp) -> None:
        """One of two array parameters: its pointer, shape and strides, each a select."""
        a, b = self.arrays[op.if_true], self.arrays[op.if_false]
        c = self.v(op.cond)

        def pick(t: str, x: str, y: str) -> str:
            return self.ins(f"select i1 {c}, {t} {x}, {t} {y}")

        ptr = pick("ptr", a["ptr"], b["ptr"])
        dims = [pick("i64", x, y) for x, y in zip(a["dims"], b["dims"], strict=True)]
        strides = None if a["strides"] is None else [
            pick("i64", x, y) for x, y in zip(a["strides"], b["strides"], strict=True)]
        self.arrays[op.result] = {**a, "ptr": ptr, "dims": dims, "strides": strides}
        self.names[op.result] = ptr

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

    def op_AssertOp(self, op: ops.AssertOp) -> None:
        bad = self.ins(f"xor i1 {self.v(op.cond)}, true")
        self.report_if(bad, 2, op.site.data, "0", "0")

    def op_PrintOp(self, op: ops.PrintOp) -> None:
        self.t.printf(self, op.format.data, [(dtype_of_ir(a.type), self.v(a)) for a in op.args])

    def op_BarrierOp(self, op: ops.BarrierOp) -> None:
        kind = op.kind.data
        self.t.barrier(self, "block.after_exit" if kind == "block" and op.is_after_exit()
                       else kind)

    def op_WarpOp(self, op: ops.WarpOp) -> None:
        args = [(dtype_of_ir(a.type), self.v(a)) for a in op.args]
        self.names[op.result] = self.t.warp(self, op.kind.data, args,
                                            dtype_of_ir(op.result.type))

    def op_InlineAsmOp(self, op: ops.InlineAsmOp) -> None:
        from oxide.codegen.hopper import emit_inline_asm

        emit_inline_asm(self, op)

    def op_HopperOp(self, op: ops.HopperOp) -> None:
        from oxide.codegen.hopper import emit_hopper

        emit_hopper(self, op)

    def op_CallOp(self, op: ops.CallOp) -> None:
        """A call of a recursive @ox.func: arrays flattened as in the kernel ABI (pointer,
        extents, strides), then the error record and what the target adds (the CPU's
        registers); several results come back as a struct.

        The callee checks its own depth (`depth_guard`), after its frame is on the stack.
        So the kernel's calls first check that the stack holds a frame at all: where the
        limit is negative (a frame larger than the stack left), the call is not made; it
        is reported as the callee's guard reports it, and gives zeros."""
        if self.depth_next != "1":
            value = self.emit_call(op)
            if value is not None:
                self.bind_results(op, value)
            return
        limit = self.t.recursion_limit(self, self.frame_bound)
        no_room = self.ins(f"icmp slt i32 {limit}, 0")
        deep, call, join = self.label(), self.label(), self.label()
        self.raw(f"br i1 {no_room}, label %{deep}, label %{call}, !prof !1")
        self.start_block(deep)
        callee = next(f for f in self.device_functions if f.sym_name.data == op.callee.data)
        self.call_report(2, callee.attributes[DEPTH_SITE].data, "0", "0")  # type: ignore[attr-defined]
        deep_end = self.current
        self.raw(f"br label %{join}")
        self.start_block(call)
        value = self.emit_call(op)
        call_end = self.current
        self.raw(f"br label %{join}")
        self.start_block(join)
        if value is None:
            return
        ret = return_type([r.type for r in op.res])
        self.bind_results(op, self.ins(
            f"phi {ret} [ zeroinitializer, %{deep_end} ], [ {value}, %{call_end} ]"))

    def emit_call(self, op: ops.CallOp) -> str | None:
        """The `call`; its value (a scalar or a struct), or None for no result."""
        args: list[str] = []
        for a in op.args:
            if a in self.arrays:
                arr = self.arrays[a]
                args.append(f"ptr {arr['ptr']}")
                args += [f"i64 {d}" for d in arr["dims"]]
                args += [f"i64 {s}" for s in arr["strides"] or ()]
            else:
                args.append(f"{llvm_type(a.type)} {self.v(a)}")
        args += ["ptr %oxide.err", f"i32 {self.depth_next}"]
        args += self.t.call_context()
        ret = return_type([r.type for r in op.res])
        call = f"call {ret} @{op.callee.data}({', '.join(args)})"
        if not op.res:
            self.raw(call)
            return None
        return self.ins(call)

    def bind_results(self, op: ops.CallOp, value: str) -> None:
        """`op`'s results from the call's value: itself, or the items of its struct."""
        if len(op.res) == 1:
            self.names[op.res[0]] = value
            return
        ret = return_type([r.type for r in op.res])
        for k, r in enumerate(op.res):
            self.names[r] = self.ins(f"extractvalue {ret} {value}, {k}")

    def op_FuncReturnOp(self, op: ops.FuncReturnOp) -> None:
        values = list(op.values)
        if not values:
            self.raw("ret void")
            return
        ret = return_type([v.type for v in values])
        if len(values) == 1:
            self.raw(f"ret {ret} {self.v(values[0])}")
            return
        agg = "undef"
        for k, v in enumerate(values):
            agg = self.ins(f"insertvalue {ret} {agg}, {llvm_type(v.type)} {self.v(v)}, {k}")
        self.raw(f"ret {ret} {agg}")

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


def return_type(types: list[Attribute]) -> str:
    """The LLVM return type of a device function: void, a scalar, or a struct of them."""
    if not types:
        return "void"
    if len(types) == 1:
        return llvm_type(types[0])
    return "{ " + ", ".join(llvm_type(t) for t in types) + " }"


def frame_estimate(func: ops.FuncOp) -> int:
    """A generous bound on a device function's stack frame in host code, in bytes: its
    local arrays, 8 bytes per local variable and 256 for saved registers and spills (the
    CPU target's depth limit divides its stack by it; the GPU's comes from ptxas)."""
    from oxide.ir.types import SharedArrayType

    total = 256
    for op in func.walk():
        if isinstance(op, ops.SlotOp):
            total += 8
        elif isinstance(op, ops.FixedArrayOp) and isinstance(op.result.type, SharedArrayType):
            t = op.result.type
            if t.space.data == "local":
                count = 1
                for d in t.shape.data.split("x"):
                    count *= int(d)
                total += count * max(1, dtype_of_ir(t.elem).bits // 8)
    return total


class FunctionEmitter(Emitter):
    """Emits one recursive @ox.func specialization (an `oxide.func` ending in
    `oxide.func_return`) as an internal LLVM function of the kernel's module.

    It shares the kernel emitter's globals, declarations and counter (string constants and
    loop metadata are module-wide names) and its site table. Parameters are the kernel
    ABI's (arrays flattened, without `noalias`: one array may come in twice), then the
    error record, then the target's context (`call_context_params`). No `!dbg`: the
    function has no debug scope of its own."""

    def __init__(self, parent: Emitter, func: ops.FuncOp) -> None:
        super().__init__(func, parent.sites, [], parent.t, bool(parent.fast))
        self.globals = parent.globals
        self.declares = parent.declares
        self.counter = parent.counter
        self.parent = parent

    def bind_params(self) -> list[str]:
        from oxide.ir.types import ArrayType as IRArrayType

        params: list[str] = []
        for k, arg in enumerate(self.func.body.blocks[0].args):
            t = arg.type
            base = f"%p{k}"
            if isinstance(t, IRArrayType):
                rank = t.rank.data
                attrs = "readonly " if t.access.data == "slice" else ""
                params.append(f"ptr {attrs}{base}")
                dims = [f"{base}.n{d}" for d in range(rank)]
                params += [f"i64 {d}" for d in dims]
                strides = None
                if not t.contiguous.data:
                    strides = [f"{base}.s{d}" for d in range(rank)]
                    params += [f"i64 {s}" for s in strides]
                self.arrays[arg] = {"ptr": base, "dims": dims, "strides": strides,
                                    "dtype": dtype_of_ir(t.elem), "space": "global"}
            else:
                params.append(f"{llvm_type(t)} {base}")
            self.names[arg] = base
        params += ["ptr %oxide.err", "i32 %oxide.depth"]
        return params + self.t.call_context_params()

    def op_BranchOp(self, op: ops.BranchOp) -> None:
        """The entry block's jump into the body comes after the depth guard (the allocas
        stay first, where LLVM promotes them to registers)."""
        if op.parent_block() is self.func.body.blocks[0]:
            self.depth_guard()
        super().op_BranchOp(op)

    def depth_guard(self) -> None:
        """Report a call deeper than the stack holds (as a failed assert of the function's
        `oxide.depth_site`) and return zeros, instead of overflowing the stack: a device
        fault on the GPU, a crash on the CPU. The limit is the target's
        (`recursion_limit`): set per loaded module on the GPU, from the stack on the CPU."""
        self.raw("%oxide.depth.next = add i32 %oxide.depth, 1")
        self.depth_next = "%oxide.depth.next"
        limit = self.t.recursion_limit(self, self.parent.frame_bound)
        over = self.ins(f"icmp ugt i32 %oxide.depth, {limit}")
        self.raw(f"br i1 {over}, label %oxide.too.deep, label %oxide.depth.ok, !prof !1")
        self.start_block("oxide.too.deep")
        site = self.func.attributes[DEPTH_SITE]
        self.call_report(2, site.data, "0", "0")  # type: ignore[attr-defined]
        ret = return_type(list(self.func.function_type.outputs.data))
        self.raw("ret void" if ret == "void" else f"ret {ret} zeroinitializer")
        self.start_block("oxide.depth.ok")

    def op_FixedArrayOp(self, op: ops.FixedArrayOp) -> None:
        """A constant array the kernel (or another device function) declared too names the
        same global: define it once."""
        known = len(self.globals)
        super().op_FixedArrayOp(op)
        added = self.globals[known:]
        del self.globals[known:]
        self.globals.extend(g for g in added if g not in self.globals)

    def function_text(self) -> str:
        params = self.bind_params()
        blocks = list(self.func.body.blocks)
        for i, block in enumerate(blocks):
            self.labels[block] = "entry" if i == 0 else f"bb{i}"
        for block in blocks:
            self.start_block(self.labels[block])
            for op in block.ops:
                self.emit_op(op)
        self.parent.counter = self.counter
        ret = return_type(list(self.func.function_type.outputs.data))
        return "\n".join([f"define internal {ret} @{self.func.sym_name.data}"
                          f"({', '.join(params)}) {{", *self.lines, "}"])


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
