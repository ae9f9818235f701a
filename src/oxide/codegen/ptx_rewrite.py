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
"""

from __future__ import annotations

import re

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
