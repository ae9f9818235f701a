"""The CPU target: what a kernel's ops become in host code.

The kernel body becomes `<symbol>.thread`, a function of one GPU thread: the
machine parameters of the kernel ABI, then the twelve registers (`tid`,
`ctaid`, `ntid`, `nctaid`, x/y/z, as i32), the block's static and dynamic
shared memory (with the dynamic size in bytes) and the thread's scheduling
context. `cpu_driver` wraps it in an exported
`<symbol>_launch` that runs a range of blocks. Kernels that synchronize
(block or warp barriers, warp collectives) make the thread function a
coroutine (`cpu_sync`); the rest inline it into plain loops.

Math comes from LLVM intrinsics and the C math library, `print` is `printf`,
atomics are LLVM atomics on host memory.
"""

from __future__ import annotations

from typing import Any

from oxide import types as T
from oxide.codegen import cpu_driver, cpu_sync
from oxide.codegen.atomics import emit_atomic
from oxide.codegen.emit import BIT_MATH

# ox.math functions LLVM has intrinsics for (lowered to instructions or libm calls).
_INTRINSICS = {"sqrt", "exp", "exp2", "log", "log2", "log10", "sin", "cos", "pow", "fabs",
               "floor", "ceil", "trunc", "round", "fma", "copysign"}
_INF = "0x7FF0000000000000"

# compiler-rt's f32 -> bf16 rounding (nearest, ties to even, subnormals kept, NaN quiet),
# which x86 code calls wherever it moves a bf16 through f32 (a `select` or `phi` of bf16)
# once codegen/host.py turns off AVX512-BF16, whose vcvtneps2bf16 flushed subnormals.
# The host JIT has no compiler-rt, so each module that holds bf16 values defines it.
TRUNC_SF_BF2 = """define bfloat @__truncsfbf2(float %x) {
entry:
  %bits = bitcast float %x to i32
  %high = lshr i32 %bits, 16
  %lsb = and i32 %high, 1
  %bias = add i32 %lsb, 32767
  %sum = add i32 %bits, %bias
  %rounded = lshr i32 %sum, 16
  %nan = fcmp uno float %x, 0.0
  %quiet = or i32 %high, 64
  %r32 = select i1 %nan, i32 %quiet, i32 %rounded
  %r16 = trunc i32 %r32 to i16
  %r = bitcast i16 %r16 to bfloat
  ret bfloat %r
}"""


def host_stack_bytes() -> int:
    """The stack of the threads a CPU launch runs on: RLIMIT_STACK, which Linux's threads
    (the launch's worker threads too) get by default; 2 MiB (glibc's thread stack without
    a limit) where it is unlimited or unknown."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_STACK)[0]
    except (ImportError, OSError, ValueError):
        return 2 << 20
    if soft <= 0 or soft == resource.RLIM_INFINITY:
        return 2 << 20
    return min(soft, 1 << 30)


class CPUTarget:
    """Target hooks for the Emitter, for the host CPU (any LLVM host triple)."""

    name = "cpu"
    return_text = "br label %oxide.exit"
    # LLVM rounds to bf16 with vcvtneps2bf16 where the CPU has AVX512-BF16, which flushes
    # subnormals; the emitter rounds in integer code instead, as the GPU would (exactly)
    soft_bf16 = True
    # `fptrunc double to half` is a call to compiler-rt's __truncdfhf2 on x86, a symbol the
    # host JIT does not resolve (the process crashed); the emitter rounds through f32 to odd
    soft_f16 = True

    def __init__(self) -> None:
        self.shared_bytes = 0
        self.coroutine = False
        self.warps = cpu_sync.WarpCollectives(self.lane_id, self.lanes_in_warp)

    def unsupported(self, op: Any) -> str | None:
        return None

    # -- registers -------------------------------------------------------------------

    def register(self, em: Any, reg: str) -> str:
        if reg == "laneid":
            return self.lane_id(em)
        if reg == "warpid":
            return em.ins(f"lshr i32 {self.linear_tid(em)}, 5")
        if reg.startswith("lanemask."):
            return self.lanemask(em, reg[9:])
        return f"%oxide.{reg}"

    def lanemask(self, em: Any, which: str) -> str:
        """PTX's `%lanemask_lt/le/eq/gt/ge` from the lane id (`le` of lane 31 is all ones:
        `2 << 31` wraps to 0)."""
        lane = self.lane_id(em)
        shift = "2" if which in ("le", "gt") else "1"
        one = em.ins(f"shl i32 {shift}, {lane}")
        if which == "eq":
            return one
        below = em.ins(f"sub i32 {one}, 1")  # lt (shift 1) or le (shift 2)
        return below if which in ("lt", "le") else em.ins(f"xor i32 {below}, -1")

    def linear_tid(self, em: Any) -> str:
        zy = em.ins("mul i32 %oxide.tid.z, %oxide.ntid.y")
        zy = em.ins(f"add i32 {zy}, %oxide.tid.y")
        zyx = em.ins(f"mul i32 {zy}, %oxide.ntid.x")
        return em.ins(f"add i32 {zyx}, %oxide.tid.x")

    def lane_id(self, em: Any) -> str:
        return em.ins(f"and i32 {self.linear_tid(em)}, 31")

    def lanes_in_warp(self, em: Any) -> str:
        """How many lanes this thread's warp has (the block's last warp may be partial)."""
        n = em.ins("mul i32 %oxide.ntid.x, %oxide.ntid.y")
        n = em.ins(f"mul i32 {n}, %oxide.ntid.z")
        first = em.ins(f"and i32 {self.linear_tid(em)}, -32")
        left = em.ins(f"sub i32 {n}, {first}")
        return em.intrinsic("llvm.umin.i32", "i32", [("i32", left), ("i32", "32")])

    # -- memory ----------------------------------------------------------------------

    def pointer_type(self, space: str) -> str:
        return "ptr"

    def shared_array(self, em: Any, dt: T.DType, count: int) -> str:
        """A slice of the block's shared memory, which the driver allocates per block range."""
        offset = self.shared_bytes
        self.shared_bytes += -(-count * dt.itemsize // 16) * 16
        return em.ins(f"getelementptr inbounds i8, ptr %oxide.smem, i64 {offset}")

    def dynamic_shared(self, em: Any, dt: T.DType) -> tuple[str, str]:
        """The launch's dynamic shared memory (after the static arrays) and its length."""
        return "%oxide.dsmem", em.ins(f"udiv i64 %oxide.dsmem.bytes, {dt.itemsize}")

    def constant_array(self, em: Any, dt: T.DType, count: int, symbol: str) -> str:
        """A visible global: the runtime finds it in the JIT-compiled module and fills it."""
        em.globals.append(f"@{symbol} = externally_initialized global [{count} x {dt.llvm}] "
                          "zeroinitializer, align 16")
        return f"@{symbol}"

    def atomic(self, em: Any, kind: str, scope: str, dt: T.DType, addr: str, value: str,
               compare: str | None, space: str) -> str:
        if kind in ("inc", "dec"):  # CUDA's atomicInc/atomicDec wrap (u32 only)
            op = "uinc_wrap" if kind == "inc" else "udec_wrap"
            return em.ins(f"atomicrmw {op} ptr {addr}, i32 {value} monotonic")
        # f32 adds to global memory flush subnormals, as the GPU's atom.add.f32 does there
        return emit_atomic(em, kind, "", dt, addr, value, compare, "ptr",
                           flush_f32=space == "global")

    # -- math and printf -------------------------------------------------------------

    def math(self, em: Any, fn: str, dt: T.DType, ret: T.DType, args: list[str]) -> str:
        if fn in BIT_MATH:  # ox.popc & co., frexp: integer code (byte_perm as prmt computes)
            return em.bit_math(fn, dt, ret, args)
        if fn == "ldexp":  # libm's, with its i32 exponent
            return em.intrinsic("ldexp" + ("f" if dt.name == "f32" else ""), dt.llvm,
                                [(dt.llvm, args[0]), ("i32", args[1])])
        if dt.name == "bf16":  # in f32, rounded once (LLVM's own bf16 math flushes subnormals)
            r = self.math(em, fn, T.f32, T.f32 if ret.is_float else ret,
                          [em.cast(a, dt, T.f32) for a in args])
            return em.cast(r, T.f32, ret) if ret.is_float else r
        if fn == "exp2_ftz":  # tile.exp2(x, flush_to_zero=True): the GPU's ex2.approx.ftz
            return em.flush_subnormal(self.math(em, "exp2", dt, ret, args), dt)
        t = dt.llvm
        sfx = dt.name
        typed = [(t, a) for a in args]
        if fn in ("fmin", "fmax"):
            return self.float_min_max(em, fn[1:], dt, args[0], args[1])
        if fn in _INTRINSICS:
            return em.intrinsic(f"llvm.{fn}.{sfx}", t, typed)
        if fn == "fmod":
            # `frem` is C's fmod, and x86 lowers it to the libm call. Calling libm's
            # `fmod` by name lets InstCombine fold `fmod(nan, select(c, k1, k2))` to
            # poison (LLVM 20), and a branch on it made a fuzzer kernel loop forever.
            return em.ins(f"frem {t} {args[0]}, {args[1]}")
        if fn == "rsqrt":
            root = em.intrinsic(f"llvm.sqrt.{sfx}", t, typed)
            return em.ins(f"fdiv {t} 1.0, {root}")
        if fn == "isnan":
            return em.ins(f"fcmp uno {t} {args[0]}, 0.0")
        if fn in ("isinf", "isfinite"):
            mag = em.intrinsic(f"llvm.fabs.{sfx}", t, typed)
            return em.ins(f"fcmp {'oeq' if fn == 'isinf' else 'olt'} {t} {mag}, {_INF}")
        return em.intrinsic(fn + ("f" if dt.name == "f32" else ""), t, typed)  # libm

    def float_min_max(self, em: Any, op: str, dt: T.DType, a: str, b: str) -> str:
        """Float `min`/`max` (docs/language.md): NaN loses, -0.0 orders below +0.0."""
        if dt.name == "bf16":  # exact in f32 (the result is an operand), no bf16 fcmp
            r = self.float_min_max(em, op, T.f32, em.cast(a, dt, T.f32), em.cast(b, dt, T.f32))
            return em.cast(r, T.f32, dt)
        name = self.warps.float_min_max(op, dt)
        return em.ins(f"call {dt.llvm} @{name}({dt.llvm} {a}, {dt.llvm} {b})")

    def printf(self, em: Any, fmt: str, args: list[tuple[T.DType, str]]) -> None:
        fmt_name = em.string_constant(fmt)
        values = em.printf_values(args)
        em.declare("declare i32 @printf(ptr, ...)")
        rest = "".join(f", {t} {v}" for t, v in values)
        em.raw(f"call i32 (ptr, ...) @printf(ptr {fmt_name}{rest})")

    # -- synchronization -------------------------------------------------------------

    def barrier(self, em: Any, kind: str) -> None:
        if kind == "block.after_exit":  # the scheduler never waits for finished threads
            kind = "block"
        if kind in ("block", "warp"):
            self.coroutine = True
            cpu_sync.barrier(em, kind)
        elif kind == "grid":  # ox.grid.sync(): codegen/grid_sync.py
            from oxide.codegen import grid_sync

            self.coroutine = True
            grid_sync.emit(em, self, lambda: cpu_sync.barrier(em, "block"), cpu=True)
        else:
            em.raw("fence seq_cst")

    def warp(self, em: Any, kind: str, args: list[tuple[T.DType, str]], ret: T.DType) -> str:
        self.coroutine = True
        return self.warps.emit(em, kind, args)

    # -- recursive @ox.func calls (codegen/emit.py FunctionEmitter) --------------------

    def call_context_params(self) -> list[str]:
        """A device function's trailing parameters: the registers, which the CPU target
        passes as values (barriers, warp collectives and shared memory, which would need
        the context and the block's memory, are refused in recursive functions)."""
        return [f"i32 %oxide.{r}" for r in cpu_driver.REGISTERS]

    def call_context(self) -> list[str]:
        """The caller's side of `call_context_params`."""
        return self.call_context_params()

    def recursion_limit(self, em: Any, frame_bound: int) -> str:
        """The deepest call allowed: the OS thread's stack, less 1 MiB for the kernel, the
        launch driver and Python below it, over a generous frame bound (codegen/emit.py
        `frame_estimate`). A deeper call is reported instead of crashing the process."""
        return str(max(0, (host_stack_bytes() - (1 << 20)) // max(frame_bound, 1)))

    # -- the module ------------------------------------------------------------------

    def module_text(self, em: Any, params: list[str], body: list[str]) -> str:
        from oxide.codegen.emit import REPORT_FUNCTION

        symbol = em.func.sym_name.data
        regs = [f"i32 %oxide.{r}" for r in cpu_driver.REGISTERS]
        sig = ", ".join(params + regs + ["ptr %oxide.smem", "ptr %oxide.dsmem",
                                         "i64 %oxide.dsmem.bytes", "ptr %oxide.ctx"])
        declares = set(em.declares) | set(cpu_driver.DECLARES)
        if self.coroutine:
            declares |= set(cpu_sync.DECLARES)
            fn = [f"define internal ptr @{symbol}.thread({sig}) presplitcoroutine {{",
                  body[0], *cpu_sync.PROLOGUE, *body[1:], cpu_sync.EPILOGUE, "}"]
        else:
            fn = [f"define internal void @{symbol}.thread({sig}) alwaysinline {{",
                  *body, "oxide.exit:", "  ret void", "}"]
        arg_types = [p.split()[0] for p in params[:-1]]  # all but the error pointer
        driver = cpu_driver.launch_driver(symbol, arg_types, self.coroutine, self.shared_bytes)
        bf16 = [TRUNC_SF_BF2] if any("bfloat" in text for text in
                                     (*body, *self.warps.helpers.values(),
                                      *em.function_texts)) else []
        parts = [*em.globals, *sorted(declares), "", *fn, "", *em.function_texts, driver,
                 *self.warps.helpers.values(), *bf16, REPORT_FUNCTION,
                 '!0 = !{!"branch_weights", i32 1000000, i32 1}',
                 '!1 = !{!"branch_weights", i32 1, i32 1000000}']
        return "\n".join(parts) + "\n"
