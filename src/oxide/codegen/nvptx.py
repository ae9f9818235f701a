"""The NVPTX target: what a kernel's ops become on an NVIDIA GPU.

Registers are `llvm.nvvm.read.ptx.sreg.*`, math comes from libdevice (`__nv_*`,
linked at IR level), `print` is `vprintf`, barriers and warp collectives are
NVVM intrinsics. The module text it produces is handed to llvmlite for PTX.
"""

from __future__ import annotations

import re
from typing import Any

from oxide import types as T
from oxide.codegen.abi import DEFAULT_STACK_SIZE, RECURSION_LIMIT_SYMBOL
from oxide.codegen.atomics import emit_atomic
from oxide.codegen.switches import exp2_ftz_enabled
from oxide.codegen.warp_lanes import shuffle_source
from oxide.errors import TargetError
from oxide.ir.types import dtype_of_ir

ARCHES = ("sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_120")
TRIPLE = "nvptx64-nvidia-cuda"

# libdevice names that differ from `__nv_<fn>f` / `__nv_<fn>`.
_LIBDEVICE_F32 = {"isnan": "__nv_isnanf", "isinf": "__nv_isinff", "isfinite": "__nv_finitef",
                  "fabs": "__nv_fabsf"}
_LIBDEVICE_F64 = {"isnan": "__nv_isnand", "isinf": "__nv_isinfd", "isfinite": "__nv_isfinited"}
_LLVM_MATH = {"fma": "llvm.fma", "fabs": "llvm.fabs", "sqrt": "llvm.sqrt"}  # llvm.sqrt is IEEE sqrt.rn
# f32 functions whose libdevice definition (flush-to-zero off, as oxide links it) is this
# one NVVM intrinsic: called directly, the same instruction (`ex2.approx.f32`,
# `rsqrt.approx.f32`), so a kernel that needs nothing else of libdevice skips parsing and
# linking it (~70-90 ms of a cold compile of tile_softmax or tile_layernorm)
_NVVM_F32 = {"exp2": "llvm.nvvm.ex2.approx.f", "rsqrt": "llvm.nvvm.rsqrt.approx.f"}
_ASM_REGISTER = {"float": "f", "double": "d", "i32": "r", "i64": "l", "half": "h", "i16": "h"}
_SCOPES = {"block": "block", "device": "device", "system": ""}


def check_arch(arch: str) -> str:
    if arch not in ARCHES:
        raise TargetError(f"unknown GPU architecture `{arch}`",
                          hint=f"use one of {', '.join(ARCHES)}")
    return arch


def _negative_literal(text: str) -> bool:
    """Whether LLVM IR float literal `text` (`-1.000000e+00`, `0xC1E0000000000000`, a
    half's `0xH...` or a bfloat's `0xR...`) has its sign bit set; False for a value name."""
    if text.startswith("0x"):
        digits = text[2:].lstrip("HRKLM")  # the kinds of LLVM's hexadecimal float literals
        try:
            bits = int(digits, 16)
        except ValueError:
            return False
        width = 16 if text[2:3] in ("H", "R") else 64
        return bool(bits >> (width - 1) & 1)
    try:
        return text.startswith("-") and float(text) <= 0.0
    except ValueError:
        return False


class NVPTXTarget:
    """Target hooks for the Emitter, for one GPU architecture."""

    name = "nvptx"
    return_text = "ret void"

    def __init__(self, arch: str, max_threads: int | None, min_blocks: int | None = None,
                 block_size: int | None = None) -> None:
        self.arch = check_arch(arch)
        self.max_threads = max_threads
        self.min_blocks = min_blocks  # `.minnctapersm`: @ox.tile.kernel(occupancy=N)
        # every block's thread count where the kernel fixes it (compiler.declared_block_size)
        self.block_size = block_size
        self.shared_count = 0

    @property
    def sm(self) -> int:
        return int(self.arch[3:].rstrip("a"))

    def unsupported(self, op: Any) -> str | None:
        kind = getattr(op, "kind", None)
        dt = getattr(getattr(op, "result", None), "type", None)
        if op.name == "oxide.atomic" and kind is not None:
            from oxide.ir.types import dtype_of_ir

            t = dtype_of_ir(dt)
            if t.name == "bf16" and self.sm < 90 and kind.data != "add":
                return f"bf16 atomics need sm_90 (target is {self.arch})"
        return None

    # -- pieces the Emitter asks for -------------------------------------------------

    # ptxas (CUDA 13, H200) mishandles two integer edge cases that LLVM's PTX leaves to
    # it; the fuzzer found both (seed 14), and tests/test_gpu_trust_compile.py pins them.

    def int_abs(self, em: Any, dt: Any, x: str) -> str:
        """`abs` as setp/neg/selp in inline PTX: ptxas takes its own `abs.s16/s32/s64` to
        be non-negative, so `abs(INT_MIN) < 0` was false and its conversions positive."""
        n, t = dt.bits, dt.llvm
        reg = {16: "h", 32: "r", 64: "l"}[n]
        return em.ins(f'call {t} asm "{{ .reg .pred p; setp.lt.s{n} p, $1, 0; neg.s{n} $0, $1; '
                      f'selp.b{n} $0, $0, $1, p; }}", "={reg},{reg}"({t} {x})')

    def wrapping_16(self, em: Any, kind: str, dt: Any, a: str, b: str) -> str:
        """A 16-bit `add`/`sub`/`mul`/`shl` done in 32 bits and cut to 16 in inline PTX.

        ptxas keeps 16-bit values in 32-bit registers and folds a 16-bit op into the
        widening that follows it (`-x` then sign-extend became one `I2I -x`), losing the
        wrap: `-(-32768)` read back as 32768. An asm truncation keeps LLVM from narrowing
        the 32-bit op back to 16 bits.
        """
        ext = "sext" if dt.is_signed else "zext"
        wa = em.ins(f"{ext} i16 {a} to i32")
        wb = em.ins(f"{ext} i16 {b} to i32")
        wide = em.ins(f"{kind} i32 {wa}, {wb}")
        return em.ins(f'call i16 asm "cvt.u16.u32 $0, $1;", "=h,r"(i32 {wide})')

    def narrow_min_max(self, em: Any, kind: str, dt: Any, a: str, b: str) -> str:
        """An 8- or 16-bit `min`/`max` done in 32 bits.

        ptxas fused a `min.s16` and a test of its result (`min(x, 0) == 0`) into one
        `VIMNMX.S16x2` whose predicate output also reads the register's upper half, which
        for a 16-bit value holds its sign extension: the test came out true for negative
        x (fuzzer seed 62, H100; right at ptxas -O0, wrong at -O1 and up). A 32-bit
        min/max leaves it no 16-bit pair to fuse; the operands are widened in inline PTX
        so that LLVM cannot narrow the op back to 16 bits.
        """
        signed = dt.is_signed
        wa, wb = (self._widen_opaque(em, dt, x) for x in (a, b))
        wide = em.intrinsic(f"llvm.{'s' if signed else 'u'}{kind}.i32", "i32",
                            [("i32", wa), ("i32", wb)])
        return em.ins(f"trunc i32 {wide} to {dt.llvm}")

    def nan_guarded_compare(self, em: Any, pred: str, dt: Any, a: str, b: str,
                            fcmp: str) -> str | None:
        """An ordered `x > c` / `x >= c` (or `c < x`, `c <= x`) against a negative constant
        c, as `fcmp` and a test that x is a number which LLVM cannot see through; None
        for every other comparison (emitted as it is).

        ptxas 13.0 drops `setp.gt.f32 p, x, c` for c < 0 where it knows x >= 0 (x = y * y,
        x = |y|), taking p to be true, which is wrong when x is NaN (tile fuzzer, seed 74,
        H100: `-2147483648 < v * v` came out true for a NaN v). An explicit NaN test
        joined to the comparison keeps the answer whatever ptxas folds: the comparison is
        true only for numbers, as IEEE's ordered `>` is. LLVM would drop a plain
        `fcmp ord` joined to an ordered compare (one implies the other), so the test is
        inline PTX."""
        if pred in ("gt", "ge"):
            x, c = a, b
        elif pred in ("lt", "le"):
            x, c = b, a
        else:
            return None
        if not _negative_literal(c) or not x.startswith("%"):  # x a literal too: folded
            return None
        compared = em.ins(fcmp)
        wide = x if dt.bits >= 32 else em.ins(f"fpext {dt.llvm} {x} to float")
        kind, reg = ("f64", "d") if dt.bits == 64 else ("f32", "f")
        ty = "double" if dt.bits == 64 else "float"
        flag = em.ins(f'call i32 asm "{{ .reg .pred p; setp.num.{kind} p, $1, $1; '
                      f'selp.u32 $0, 1, 0, p; }}", "=r,{reg}"({ty} {wide})')
        number = em.ins(f"icmp ne i32 {flag}, 0")
        return em.ins(f"and i1 {compared}, {number}")

    @staticmethod
    def _widen_opaque(em: Any, dt: Any, x: str) -> str:
        """`x` (8 or 16 bits) sign- or zero-extended to 32 bits by inline PTX, which LLVM
        cannot see through: an op on it stays a 32-bit op."""
        x16 = x if dt.bits == 16 else em.ins(f"{'sext' if dt.is_signed else 'zext'} "
                                              f"{dt.llvm} {x} to i16")
        cvt = "cvt.s32.s16" if dt.is_signed else "cvt.u32.u16"
        return em.ins(f'call i32 asm "{cvt} $0, $1;", "=r,h"(i16 {x16})')

    def register(self, em: Any, reg: str) -> str:
        if reg == "warpid":
            lin = self.linear_tid(em)
            return em.ins(f"lshr i32 {lin}, 5")
        name = reg.replace(".", ".")
        return em.intrinsic(f"llvm.nvvm.read.ptx.sreg.{name}", "i32", [])

    def linear_tid(self, em: Any) -> str:
        x = em.intrinsic("llvm.nvvm.read.ptx.sreg.tid.x", "i32", [])
        y = em.intrinsic("llvm.nvvm.read.ptx.sreg.tid.y", "i32", [])
        z = em.intrinsic("llvm.nvvm.read.ptx.sreg.tid.z", "i32", [])
        nx = em.intrinsic("llvm.nvvm.read.ptx.sreg.ntid.x", "i32", [])
        ny = em.intrinsic("llvm.nvvm.read.ptx.sreg.ntid.y", "i32", [])
        zy = em.ins(f"mul i32 {z}, {ny}")
        zy = em.ins(f"add i32 {zy}, {y}")
        zyx = em.ins(f"mul i32 {zy}, {nx}")
        return em.ins(f"add i32 {zyx}, {x}")

    def pin(self, em: Any, llvm_type: str, value: str) -> str:
        """Keep `value`'s load where it is: LLVM would sink a load used on one path only into
        that path, after a branch, which undoes issuing the reads early. An empty asm
        statement (no instructions) that uses the value pins it."""
        reg = _ASM_REGISTER.get(llvm_type)
        if reg is None:
            return value
        return em.ins(f'call {llvm_type} asm sideeffect "", "={reg},0"({llvm_type} {value})')

    def pointer_type(self, space: str) -> str:
        return {"shared": "ptr addrspace(3)", "constant": "ptr addrspace(4)"}.get(space, "ptr")

    def constant_array(self, em: Any, dt: T.DType, count: int, symbol: str) -> str:
        """A visible `.const` global, so the runtime finds it (cuModuleGetGlobal) and fills it."""
        name = f"@{symbol}"
        em.globals.append(f"{name} = addrspace(4) externally_initialized global "
                          f"[{count} x {dt.llvm}] zeroinitializer, align 16")
        return name

    def dynamic_shared(self, em: Any, dt: T.DType) -> tuple[str, str]:
        """The launch's dynamic shared memory and its length in elements.

        The length comes from the `%dynamic_smem_size` register, so accesses are
        checked against what the launch really allocated, with no hidden parameter.
        """
        name = "@oxide_dynamic_shared"
        decl = f"{name} = external addrspace(3) global [0 x i8], align 16"
        if decl not in em.globals:
            em.globals.append(decl)
        size = em.ins('call i32 asm "mov.u32 $0, %dynamic_smem_size;", "=r"()')
        size64 = em.ins(f"zext i32 {size} to i64")
        return name, em.ins(f"udiv i64 {size64}, {dt.itemsize}")

    def shared_array(self, em: Any, dt: T.DType, count: int) -> str:
        """A static shared array, visible (not internal) so LLVM cannot assume its contents.

        With internal linkage and an undef initializer, a cell read before any write
        folded to undef, and a check on it (a division by zero) vanished from the GPU
        code while the CPU, which reads real memory, reported it.
        """
        self.shared_count += 1
        name = f"@oxide_shared{self.shared_count}"
        em.globals.append(f"{name} = addrspace(3) global [{count} x {dt.llvm}] "
                          "undef, align 16")
        return name

    def math(self, em: Any, fn: str, dt: T.DType, ret: T.DType, args: list[str]) -> str:
        from oxide.codegen.emit import BIT_MATH

        if fn == "byte_perm":  # CUDA's __byte_perm is this one instruction
            x, y, s = args
            return em.ins(f'call i32 asm "prmt.b32 $0, $1, $2, $3;", "=r,r,r,r"'
                          f"(i32 {x}, i32 {y}, i32 {s})")
        if fn in BIT_MATH:  # ox.popc & co., frexp: integer code shared with the CPU
            return em.bit_math(fn, dt, ret, args)
        t = dt.llvm
        if fn == "ldexp":  # libdevice's, with its i32 exponent
            name = "__nv_ldexpf" if dt.name == "f32" else "__nv_ldexp"
            return em.intrinsic(name, t, [(t, args[0]), ("i32", args[1])])
        if fn == "exp2" and dt.name == "f32" and exp2_ftz_enabled():  # a measuring switch
            fn = "exp2_ftz"  # (codegen/switches.py): every f32 exp2 as if it flushed
        if fn == "exp2_ftz":  # tile.exp2(x, flush_to_zero=True)
            if dt.name == "f32":  # one MUFU.EX2: subnormal inputs and results are 0
                return em.intrinsic("llvm.nvvm.ex2.approx.ftz.f", t, [(t, args[0])])
            return em.flush_subnormal(self.math(em, "exp2", dt, ret, args), dt)
        if fn in _NVVM_F32 and dt.name == "f32":
            return em.intrinsic(_NVVM_F32[fn], t, [(t, a) for a in args])
        if fn in _LLVM_MATH:
            sfx = "f32" if dt.name == "f32" else "f64"
            return em.intrinsic(f"{_LLVM_MATH[fn]}.{sfx}", t, [(t, a) for a in args])
        table = _LIBDEVICE_F32 if dt.name == "f32" else _LIBDEVICE_F64
        name = table.get(fn, f"__nv_{fn}{'f' if dt.name == 'f32' else ''}")
        if fn in ("isnan", "isinf", "isfinite"):
            r = em.intrinsic(name, "i32", [(t, a) for a in args])
            return em.ins(f"icmp ne i32 {r}, 0")
        return em.intrinsic(name, t, [(t, a) for a in args])

    def printf(self, em: Any, fmt: str, args: list[tuple[T.DType, str]]) -> None:
        fmt_name = em.string_constant(fmt)
        if not args:
            em.declare("declare i32 @vprintf(ptr, ptr)")
            em.raw(f"call i32 @vprintf(ptr {fmt_name}, ptr null)")
            return
        values = em.printf_values(args)
        fields = [t for t, _ in values]
        struct_t = "{ " + ", ".join(fields) + " }"
        buf = em.ins(f"alloca {struct_t}, align 8")
        for i, (t, v) in enumerate(values):
            p = em.ins(f"getelementptr inbounds {struct_t}, ptr {buf}, i32 0, i32 {i}")
            em.raw(f"store {t} {v}, ptr {p}")
        em.declare("declare i32 @vprintf(ptr, ptr)")
        em.raw(f"call i32 @vprintf(ptr {fmt_name}, ptr {buf})")

    def barrier(self, em: Any, kind: str) -> None:
        if kind == "block":
            em.intrinsic("llvm.nvvm.barrier.cta.sync.aligned.all", "void", [("i32", "0")])
        elif kind == "block.after_exit":  # some threads may have returned: not `.aligned`
            em.intrinsic("llvm.nvvm.barrier.cta.sync.all", "void", [("i32", "0")])
        elif kind == "warp":
            em.intrinsic("llvm.nvvm.bar.warp.sync", "void", [("i32", "-1")])
        elif kind == "grid":  # ox.grid.sync(): codegen/grid_sync.py
            from oxide.codegen import grid_sync

            grid_sync.emit(em, self, lambda: self.barrier(em, "block"), cpu=False)
        else:
            scope = {"fence.block": ' syncscope("block")', "fence.device": ' syncscope("device")',
                     "fence.system": ""}[kind]
            em.raw(f"fence{scope} seq_cst")

    def atomic(self, em: Any, kind: str, scope: str, dt: T.DType, addr: str, value: str,
               compare: str | None, space: str) -> str:
        sc = _SCOPES[scope]
        sync = f' syncscope("{sc}")' if sc else ""
        if kind in ("inc", "dec"):  # CUDA's atomicInc/atomicDec: atom.inc/dec.u32
            op = "uinc_wrap" if kind == "inc" else "udec_wrap"
            return em.ins(f"atomicrmw {op} {self.pointer_type(space)} {addr}, i32 {value}{sync} "
                          "monotonic")
        return emit_atomic(em, kind, sync, dt, addr, value, compare, self.pointer_type(space))

    def warp(self, em: Any, kind: str, args: list[tuple[T.DType, str]], ret: T.DType) -> str:
        """Warp collectives over `mask` less the lanes a partial last warp lacks (`members`).

        Every hardware instruction gets that member mask, and nothing reads a lane outside
        it: a shuffle whose source is not a member returns the caller's own value (as on the
        CPU), and reductions use `redux.sync` (32-bit ints) or, for floats and 64-bit
        values, the xor butterfly on a whole warp and a loop over the members otherwise.
        """
        if kind == "activemask":  # not a collective: it names the lanes here together
            return em.intrinsic("llvm.nvvm.activemask", "i32", [])
        mask = args[-1][1]
        members = self.members(em, mask)
        if kind == "sync":  # ox.sync_warp(mask): bar.warp.sync over the members
            em.intrinsic("llvm.nvvm.bar.warp.sync", "void", [("i32", members)])
            return "0"
        if kind == "match_all":  # match.all.sync: the member mask when all agree, else 0
            (dt, v), _ = args
            it = "i64" if dt.bits == 64 else "i32"
            x = em.ins(f"bitcast {dt.llvm} {v} to {it}") if dt.is_float else (
                em.cast(v, dt, T.u32) if dt.bits < 32 else v)
            pair = em.intrinsic(f"llvm.nvvm.match.all.sync.{it}p", "{ i32, i1 }",
                                [("i32", members), (it, x)])
            return em.ins(f"extractvalue {{ i32, i1 }} {pair}, 0")
        if kind.startswith("shuffle") and len(args) == 4:  # `width=` below 32
            (dt, v), (_, lane), (_, width), _ = args
            return self.member_shuffle(em, kind, dt, v, lane, members, width)
        if kind in ("ballot", "any", "all"):
            (_, pred), _ = args
            rt = "i32" if kind == "ballot" else "i1"
            return em.intrinsic(f"llvm.nvvm.vote.{kind}.sync", rt, [("i32", members),
                                                                     ("i1", pred)])
        if kind.startswith("shuffle"):
            (dt, v), (_, lane), _ = args
            return self.member_shuffle(em, kind, dt, v, lane, members)
        if kind == "match_any":
            (dt, v), _ = args
            it = "i64" if dt.bits == 64 else "i32"
            x = em.ins(f"bitcast {dt.llvm} {v} to {it}") if dt.is_float else (
                em.cast(v, dt, T.u32) if dt.bits < 32 else v)
            return em.intrinsic(f"llvm.nvvm.match.any.sync.{it}", "i32",
                                [("i32", members), (it, x)])
        (dt, v), _ = args
        op = kind.split("_")[1]
        if not dt.is_float and dt.bits == 32:  # sm_80+: one instruction, any member mask
            name = op if op == "add" or dt.is_signed else f"u{op}"
            return em.intrinsic(f"llvm.nvvm.redux.sync.{name}", "i32", [("i32", v),
                                                                        ("i32", members)])
        return self.reduce_members(em, op, dt, v, members)

    def members(self, em: Any, mask: str) -> str:
        """`mask` without the lanes past the end of the block (its last warp may be partial).

        Where every block is a whole number of warps (a declared block shape, as every tile
        kernel has), that is `mask` itself: a constant full mask then reaches `shfl.sync` as
        an immediate, and ptxas emits no fallback for lanes that might be missing (a mask in
        a register cost layernorm's reductions a WARPSYNC loop and registers)."""
        if self.block_size is not None and self.block_size % 32 == 0:
            return mask
        nx = em.intrinsic("llvm.nvvm.read.ptx.sreg.ntid.x", "i32", [])
        ny = em.intrinsic("llvm.nvvm.read.ptx.sreg.ntid.y", "i32", [])
        nz = em.intrinsic("llvm.nvvm.read.ptx.sreg.ntid.z", "i32", [])
        n = em.ins(f"mul i32 {nx}, {ny}")
        n = em.ins(f"mul i32 {n}, {nz}")
        first = em.ins(f"and i32 {self.linear_tid(em)}, -32")
        left = em.ins(f"sub i32 {n}, {first}")
        whole = em.ins(f"icmp uge i32 {left}, 32")
        low = em.ins(f"shl i32 1, {left}")  # poison when whole, and then not selected
        low = em.ins(f"sub i32 {low}, 1")
        lanes = em.ins(f"select i1 {whole}, i32 -1, i32 {low}")
        return em.ins(f"and i32 {mask}, {lanes}")

    def member_shuffle(self, em: Any, kind: str, dt: T.DType, v: str, arg: str,
                       members: str, width: str | None = None) -> str:
        """A shuffle that returns `v` itself where its source lane is not a member.

        The source is `arg & 31` (shuffle), `lane - arg`, `lane + arg` or `lane ^ arg`,
        with `arg` read as unsigned; where it is in the warp and a member, `arg` is below
        32, so the hardware (which reads only `arg`'s low 5 bits) reads that same lane.
        """
        lane = em.intrinsic("llvm.nvvm.read.ptx.sreg.laneid", "i32", [])
        _, valid = shuffle_source(em, kind, lane, arg, members, width)
        moved = self.shuffle(em, kind, dt, v, arg, members, width)
        return em.ins(f"select i1 {valid}, {dt.llvm} {moved}, {dt.llvm} {v}")

    def combine(self, em: Any, op: str, dt: T.DType, a: str, b: str) -> str:
        if op == "add":
            return em.ins(f"{'fadd' if dt.is_float else 'add'} {dt.llvm} {a}, {b}")
        if dt.is_float:
            return em.intrinsic(f"llvm.{op}imumnum.{'f32' if dt.bits == 32 else 'f64'}", dt.llvm,
                                [(dt.llvm, a), (dt.llvm, b)])
        return em.intrinsic(f"llvm.{'s' if dt.is_signed else 'u'}{op}.{dt.llvm}", dt.llvm,
                            [(dt.llvm, a), (dt.llvm, b)])

    def reduce_members(self, em: Any, op: str, dt: T.DType, v: str, members: str) -> str:
        """A float or 64-bit reduction: the xor butterfly when all 32 lanes are members
        (5 shuffles; every lane ends with the same value), else a loop that reads each
        member in lane order (what the CPU target computes, in the same order)."""
        t = dt.llvm
        tree, pre, head, body, join = (em.label() for _ in range(5))
        whole = em.ins(f"icmp eq i32 {members}, -1")
        em.raw(f"br i1 {whole}, label %{tree}, label %{pre}")
        em.start_block(tree)
        acc = v
        for off in (16, 8, 4, 2, 1):
            other = self.shuffle(em, "shuffle_xor", dt, acc, str(off), "-1")
            acc = self.combine(em, op, dt, acc, other)
        tree_end = em.current
        em.raw(f"br label %{join}")
        em.start_block(pre)
        em.raw(f"br label %{head}")
        em.start_block(head)
        # the phis name values the body defines below: their text is filled in after it
        left, total = em.tmp(), em.tmp()
        phis = len(em.lines)
        em.raw("")
        em.raw("")
        more = em.ins(f"icmp ne i32 {left}, 0")
        em.raw(f"br i1 {more}, label %{body}, label %{join}")
        em.start_block(body)  # the shuffles add no blocks: the body ends where it starts
        src = em.intrinsic("llvm.cttz.i32", "i32", [("i32", left), ("i1", "true")])
        x = self.shuffle(em, "shuffle", dt, v, src, members)
        total_next = self.combine(em, op, dt, total, x)
        below = em.ins(f"sub i32 {left}, 1")
        left_next = em.ins(f"and i32 {left}, {below}")
        em.raw(f"br label %{head}")
        init = v if op != "add" else ("0.0" if dt.is_float else "0")
        em.lines[phis] = f"  {left} = phi i32 [ {members}, %{pre} ], [ {left_next}, %{body} ]"
        em.lines[phis + 1] = (f"  {total} = phi {t} [ {init}, %{pre} ], "
                              f"[ {total_next}, %{body} ]")
        em.start_block(join)
        return em.ins(f"phi {t} [ {acc}, %{tree_end} ], [ {total}, %{head} ]")

    def shuffle(self, em: Any, kind: str, dt: T.DType, v: str, lane: str, mask: str,
                width: str | None = None) -> str:
        """One `shfl.sync`; with `width` (CUDA's, below 32) its `c` operand segments the warp
        into groups of `width` lanes: `(32 - width) << 8 | clamp`, as CUDA's headers build it."""
        mode = {"shuffle": "idx", "shuffle_up": "up", "shuffle_down": "down",
                "shuffle_xor": "bfly"}[kind]
        clamp = "0" if mode == "up" else "31"
        if width is not None:
            seg = em.ins(f"sub i32 32, {width}")
            seg = em.ins(f"shl i32 {seg}, 8")
            clamp = em.ins(f"or i32 {seg}, {clamp}")
        if dt.bits == 64:
            bits = em.ins(f"bitcast {dt.llvm} {v} to i64") if dt.is_float else v
            lo = em.ins(f"trunc i64 {bits} to i32")
            hi64 = em.ins(f"lshr i64 {bits}, 32")
            hi = em.ins(f"trunc i64 {hi64} to i32")
            lo2 = self.shuffle(em, kind, T.i32, lo, lane, mask, width)
            hi2 = self.shuffle(em, kind, T.i32, hi, lane, mask, width)
            lo64 = em.ins(f"zext i32 {lo2} to i64")
            hh = em.ins(f"zext i32 {hi2} to i64")
            hs = em.ins(f"shl i64 {hh}, 32")
            r = em.ins(f"or i64 {hs}, {lo64}")
            return em.ins(f"bitcast i64 {r} to {dt.llvm}") if dt.is_float else r
        sfx = "f32" if dt.is_float else "i32"
        return em.intrinsic(f"llvm.nvvm.shfl.sync.{mode}.{sfx}", dt.llvm,
                            [("i32", mask), (dt.llvm, v), ("i32", lane), ("i32", clamp)])

    def tensormap_param(self, name: str) -> str:
        """A TensorMap parameter: the 128-byte CUtensorMap by value, 64-byte aligned, and a
        grid constant, so TMA takes its address in the parameter space (without
        `nvvm.grid_constant` LLVM copies it to local memory, where TMA cannot read it)."""
        return f'ptr byval([128 x i8]) align 64 "nvvm.grid_constant" {name}'

    def call_context_params(self) -> list[str]:
        """A device function's trailing parameters: none (registers are read directly)."""
        return []

    def call_context(self) -> list[str]:
        return []

    def recursion_limit(self, em: Any, frame_bound: int) -> str:
        """The deepest call allowed: an i32 in constant memory that the runtime sets when it
        loads the module, from the stack limit and ptxas's frame sizes (runtime/gpu.py).
        Its initial value assumes 64-byte frames in the default stack."""
        decl = (f"@{RECURSION_LIMIT_SYMBOL} = addrspace(4) externally_initialized global i32 "
                f"{DEFAULT_STACK_SIZE // 64}, align 4")
        if decl not in em.globals:
            em.globals.append(decl)
        return em.ins(f"load i32, ptr addrspace(4) @{RECURSION_LIMIT_SYMBOL}, align 4")

    def module_text(self, em: Any, params: list[str], body: list[str],
                    entry: list[str] | None = None) -> str:
        """The module; with `entry` (a coarsened kernel) the body becomes an inlined function
        of the logical block and `entry` the kernel, taking the logical grid.x last."""
        from oxide.codegen.emit import REPORT_FUNCTION
        from oxide.codegen.llvm import nvptx_machine

        attrs = []
        if self.max_threads:
            attrs.append(f'"nvvm.maxntid"="{self.max_threads}"')
        if self.min_blocks:
            attrs.append(f'"nvvm.minctasm"="{self.min_blocks}"')
        # The datalayout must be in the text: the parser gives loads and stores without an
        # explicit `align` the ABI alignment of the layout it sees (the default one has
        # 4-byte i64/f64, which splits every 64-bit access in two).
        layout = str(nvptx_machine(self.arch).target_data)
        head = [f'target datalayout = "{layout}"', f'target triple = "{TRIPLE}"', ""]
        head += shared_last_by_alignment(em.globals)
        head += sorted(em.declares)
        symbol = em.func.sym_name.data
        kernel_attrs = " ".join(attrs)
        table = em.line_table  # lineinfo: each function that holds located code gets `!dbg`
        body_dbg = f" !dbg {table.body_scope}" if table is not None else ""
        if entry is None:
            functions = [f"define ptx_kernel void @{symbol}({', '.join(params)}) {kernel_attrs}"
                         f"{body_dbg} {{", *body, "}"]
        else:
            logical = ["i32 %oxide.ctaid.x", "i32 %oxide.nctaid.x"] + [
                f"{dtype_of_ir(op.result.type).llvm} %oxide.pf{k}"
                for k, op in enumerate(em.prefetch)]
            entry_dbg = f" !dbg {table.entry_scope}" if table is not None else ""
            functions = [
                f"define internal void @{symbol}.body({', '.join(params + logical)}) "
                f"alwaysinline{body_dbg} {{", *body, "}",
                f"define ptx_kernel void @{symbol}({', '.join(params + ['i32 %oxide.grid.x'])}) "
                f"{kernel_attrs}{entry_dbg} {{", *entry, "}"]
        functions += em.function_texts  # recursive @ox.funcs (`.func` in the PTX)
        report = REPORT_FUNCTION
        if em.inline_reports:  # wgmma: no call in the function (see Emitter.inline_reports)
            report = report.replace("noinline cold", "alwaysinline")
        tail = [report, '!0 = !{!"branch_weights", i32 1000000, i32 1}',
                '!1 = !{!"branch_weights", i32 1, i32 1000000}']
        if table is not None:
            tail += table.module_lines()
        return "\n".join(head + functions + tail) + "\n"


_SHARED_ALIGN = re.compile(r"^@\S+ = addrspace\(3\) global \[\d+ x .*, align (\d+)$")


def shared_last_by_alignment(globals_: list[str]) -> list[str]:
    """The module's globals with its static shared arrays last, the most aligned first
    (stable). ptxas lays the arrays out in this order: a 16-byte mbarrier array between
    two 1024-aligned TMA buffers cost up to 1008 bytes of padding, and the tile compiler
    counts the arrays' bytes, not the padding (tile_attention_any_length at D128 needed
    233,472 bytes so laid out, past sm_90's 232,448: the driver refused its PTX; sorted,
    229,472)."""
    shared = [(k, g) for k, g in enumerate(globals_) if _SHARED_ALIGN.match(g)]
    taken = {k for k, _ in shared}
    ordered = sorted(shared, key=lambda kg: -int(_SHARED_ALIGN.match(kg[1]).group(1)))  # type: ignore[union-attr]
    return [g for k, g in enumerate(globals_) if k not in taken] + [g for _, g in ordered]

