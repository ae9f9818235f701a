"""Rewrites of LLVM's PTX that keep ptxas from wrong code (codegen/llvm.py `to_ptx`).

Each rewrite replaces an instruction by an equivalent spelling that ptxas does not fuse
into the instruction it miscompiles. They work on the PTX text because LLVM forms the
instructions in question itself, from many sources (a `sub 0, x` of the user's `-x`,
`0 - x`, `x * -1`, its own canonical forms), after oxide's emitter has had its say.

- `neg.s32`: ptxas 13.0 (the toolkit's and nvJitLink's) fuses `min.s32 t, a, -b` and a
  `min.s32 r, t, c` into one three-input `VIMNMX3 r, a, b, c`, dropping the negation of
  b (also for `max`, and for `mul.lo.s32 x, b, -1`), so `min(min(a, -b), c)` computed
  `min(min(a, b), c)` (tile fuzzer, seed 81 program 122, H100; reduced to five PTX
  instructions and read in the SASS of ptxas 13.0). `not.b32` then `add.s32 1`, the
  same two's-complement negation, is kept as it is: ptxas adds the 1 in a `VIADD` or a
  `VIADDMNMX` and the three-input min reads the negated value.
- 16-bit float arithmetic (`halves_in_f32`): ptxas 13.0 pairs two f16 or bf16 operations
  into one two-half instruction and reads the first one's operands after a predicated
  write to one of their registers (tile fuzzer, seed 124 program 58, H100). Each such
  operation becomes its f32 one between exact conversions, which LLVM would fold back
  into the 16-bit operation if it were done before its optimizer (InstCombine shrinks
  `fptrunc(fadd(fpext a, fpext b))`).
"""

from __future__ import annotations

import re

from oxide.errors import InternalCompilerError

# `neg.s32 %rA, %rB;`, with its predicate guard if any (LLVM prints one per line)
_NEG_S32 = re.compile(r"^(?P<indent>[ \t]*)(?P<guard>@!?%p\d+[ \t]+)?neg\.s32[ \t]+"
                      r"(?P<dst>%r\d+),[ \t]*(?P<src>%r\d+);$", re.MULTILINE)


def keep_negations(ptx: str) -> str:
    """`ptx` with each `neg.s32 d, s` spelled `not.b32 d, s; add.s32 d, d, 1` (see the
    module docstring)."""
    def spelled(m: re.Match[str]) -> str:
        head = f"{m['indent']}{m['guard'] or ''}"
        return (f"{head}not.b32 \t{m['dst']}, {m['src']};\n"
                f"{head}add.s32 \t{m['dst']}, {m['dst']}, 1;")

    return _NEG_S32.sub(spelled, ptx)


# -- 16-bit float arithmetic, in f32 -----------------------------------------------------
#
# ptxas 13.0 pairs two independent scalar f16 (or bf16) operations into one two-half
# instruction (HFMA2, HADD2, HMUL2, HMNMX2), reading the first one's operands where the
# second one stands. Where a select chain between them had been turned into a predicated
# in-place write of one of those operands' registers (`selp(selp(b, a, p), a, q)` becomes
# `@q SEL Ra, Rb, Ra, p`), the pair read the new value: `v6 * v6` computed
# `where(c, v9, v6) * where(c, v9, v6)` (tile fuzzer, seed 124 program 58, H100; reduced
# to ten PTX instructions and read in the SASS). Explicit `.f16x2` instructions fare no
# better: ptxas splits them and pairs the halves again. So no 16-bit float arithmetic
# reaches ptxas: each operation is its f32 operation between exact conversions, rounded
# once to the type (for add, sub and mul exactly the 16-bit result: f32 has at least 2p + 2
# bits for both types; min and max return an operand), as the CPU computes them; an fma
# is an f32 fma rounded to the type, as `tile.fma` is on every target; negation and
# absolute value are the sign bit's `xor` and `and`; comparisons compare the f32 values.

_HALF_OPS = "add|sub|mul|fma|min|max|neg|abs"
_HALF_TYPES = r"(?P<type>bf16|f16)(?P<x2>x2)?"
_GUARD = r"^(?P<indent>[ \t]*)(?P<guard>@!?%p\d+[ \t]+)?"
_HALF_ARITH = re.compile(_GUARD + rf"(?P<op>{_HALF_OPS})(?P<mods>(?:\.[A-Za-z]+)*?)\."
                         + _HALF_TYPES + r"[ \t]+(?P<operands>[^;]*);$", re.MULTILINE)
_HALF_SETP = re.compile(_GUARD + r"setp\.(?P<cmp>[a-z]+)(?P<mods>(?:\.[A-Za-z]+)*?)\."
                        + _HALF_TYPES + r"[ \t]+(?P<operands>[^;]*);$", re.MULTILINE)
# what is left of a 16-bit float operation after the rewrite: a form it does not know
_HALF_LEFT = re.compile(rf"^[ \t]*(?:@!?%p\d+[ \t]+)?(?:{_HALF_OPS}|setp)"
                        r"(?:\.[A-Za-z0-9]+)*\.b?f16(?:x2)?[ \t]", re.MULTILINE)
_ROUNDED = {"add", "sub", "mul", "fma"}  # f32 instructions that take `.rn`
_SIGN = {"neg": ("xor", 0x8000), "abs": ("and", 0x7FFF)}  # the sign bit's operation, mask


def halves_in_f32(ptx: str) -> str:
    """`ptx` with every 16-bit float operation done in f32 (see the comment above):
    `add`, `sub`, `mul`, `fma`, `min`, `max`, `neg`, `abs` and `setp` on `.f16`, `.bf16`
    and their `x2` forms. A 16-bit float instruction of another form raises
    InternalCompilerError: left as it is, ptxas could pair it."""
    ptx = _HALF_SETP.sub(_compare_in_f32, _HALF_ARITH.sub(_arith_in_f32, ptx))
    left = _HALF_LEFT.search(ptx)
    if left is not None:
        raise _unknown(left.group(0))
    return ptx


def _unknown(instruction: str) -> InternalCompilerError:
    return InternalCompilerError(f"a 16-bit float instruction that oxide does not keep from "
                                 f"ptxas's pairing: `{instruction.strip()}`")


def _operands(m: re.Match[str], count: int) -> list[str]:
    ops = [o.strip() for o in m["operands"].split(",")]
    if len(ops) != count or not all(o.startswith("%") for o in ops):
        raise _unknown(m.group(0))
    return ops


def _arith_in_f32(m: re.Match[str]) -> str:
    op, t, x2 = m["op"], m["type"], bool(m["x2"])
    mods = set(m["mods"].split(".")) - {""}
    if mods - {"rn", "NaN"} or ("NaN" in mods and op not in ("min", "max")):
        raise _unknown(m.group(0))
    ins, guard = m["indent"], m["guard"] or ""
    if op in _SIGN:
        d, a = _operands(m, 2)
        bit_op, mask = _SIGN[op]
        if x2:
            return f"{ins}{guard}{bit_op}.b32 \t{d}, {a}, 0x{mask * 0x10001:X};"
        return f"{ins}{guard}{bit_op}.b16 \t{d}, {a}, 0x{mask:X};"
    regs = _operands(m, 4 if op == "fma" else 3)
    d, sources = regs[0], regs[1:]
    f32_op = f"{op}{'.rn' if op in _ROUNDED else ''}{'.NaN' if 'NaN' in mods else ''}.f32"
    n = len(sources)
    if not x2:
        body = [f"cvt.f32.{t} %oxw{k}, {s};" for k, s in enumerate(sources)]
        body += [f"{f32_op} %oxw{n}, {', '.join(f'%oxw{k}' for k in range(n))};",
                 f"{guard}cvt.rn.{t}.f32 {d}, %oxw{n};"]
        return f"{ins}{{ .reg .f32 %oxw<{n + 1}>; {' '.join(body)} }}"
    body = [f"mov.b32 {{%oxh{2 * k}, %oxh{2 * k + 1}}}, {s};" for k, s in enumerate(sources)]
    for lane in (0, 1):
        body += [f"cvt.f32.{t} %oxw{k}, %oxh{2 * k + lane};" for k in range(n)]
        body += [f"{f32_op} %oxw{n}, {', '.join(f'%oxw{k}' for k in range(n))};",
                 f"cvt.rn.{t}.f32 %oxd{lane}, %oxw{n};"]
    body.append(f"{guard}mov.b32 {d}, {{%oxd0, %oxd1}};")
    return (f"{ins}{{ .reg .f32 %oxw<{n + 1}>; .reg .b16 %oxh<{2 * n}>, %oxd<2>; "
            f"{' '.join(body)} }}")


def _compare_in_f32(m: re.Match[str]) -> str:
    """A comparison's predicate from the f32 values (`setp.lt.and.f16`, a bool-op form,
    has modifiers and is refused)."""
    if m["mods"]:
        raise _unknown(m.group(0))
    t, ins, guard, cmp = m["type"], m["indent"], m["guard"] or "", m["cmp"]
    dest, a, b = _operands(m, 3)
    if not m["x2"]:
        return (f"{ins}{{ .reg .f32 %oxw<2>; cvt.f32.{t} %oxw0, {a}; cvt.f32.{t} %oxw1, {b}; "
                f"{guard}setp.{cmp}.f32 {dest}, %oxw0, %oxw1; }}")
    lanes = dest.split("|")
    if len(lanes) != 2:
        raise _unknown(m.group(0))
    body = [f"mov.b32 {{%oxh0, %oxh1}}, {a};", f"mov.b32 {{%oxh2, %oxh3}}, {b};"]
    for lane, p in enumerate(lanes):
        body += [f"cvt.f32.{t} %oxw0, %oxh{lane};", f"cvt.f32.{t} %oxw1, %oxh{2 + lane};",
                 f"{guard}setp.{cmp}.f32 {p.strip()}, %oxw0, %oxw1;"]
    return f"{ins}{{ .reg .f32 %oxw<2>; .reg .b16 %oxh<4>; {' '.join(body)} }}"
