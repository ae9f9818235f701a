"""Atomic read-modify-write as LLVM IR, shared by the GPU and CPU targets.

LLVM's `atomicrmw`/`cmpxchg` mean the same on every target; only the
synchronization scope (`syncscope("block")` on NVPTX, none on the host) and
the pointer type (a shared-memory address space on NVPTX) differ, so the
targets pass those in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from oxide import types as T


def emit_atomic(em: Any, kind: str, sync: str, dt: T.DType, addr: str, value: str,
                compare: str | None, ptr_t: str, flush_f32: bool = False) -> str:
    """Emits `kind` (add, sub, min, max, exch, cas, and, or, xor); returns the old value.

    `flush_f32`: an f32 add or sub flushes subnormal inputs and results to zeros of their
    sign, as the GPU's `atom.add.f32` on global memory does (the PTX ISA: "current
    implementation"; measured on an H100, docs/language.md), so that a target without
    that instruction (the CPU) agrees with it bit for bit."""
    t = dt.llvm
    if flush_f32 and dt.name == "f32" and kind in ("add", "sub"):
        step = em.ins(f"fneg {t} {value}") if kind == "sub" else value
        step = em.flush_subnormal(step, dt)
        return _float_cas_loop(em, dt, addr, sync, ptr_t, lambda cur: em.flush_subnormal(
            em.ins(f"fadd {t} {em.flush_subnormal(cur, dt)}, {step}"), dt))
    if kind == "cas":  # cmpxchg takes integers: floats compare and swap their bits
        it = f"i{dt.bits}" if dt.is_float else t
        cmp_i, val_i = ((em.ins(f"bitcast {t} {x} to {it}") for x in (compare, value))
                        if dt.is_float else (compare, value))
        pair = em.ins(f"cmpxchg {ptr_t} {addr}, {it} {cmp_i}, {it} {val_i}{sync} "
                      "monotonic monotonic")
        old = em.ins(f"extractvalue {{ {it}, i1 }} {pair}, 0")
        return em.ins(f"bitcast {it} {old} to {t}") if dt.is_float else old
    if dt.is_float and kind in ("min", "max", "sub"):
        if kind == "sub":
            neg = em.ins(f"fneg {t} {value}")
            return em.ins(f"atomicrmw fadd {ptr_t} {addr}, {t} {neg}{sync} monotonic")
        # the language's `min`/`max` (docs/language.md: IEEE 754-2019 minimumNumber/
        # maximumNumber, the emitter's `float_binary`), so both targets agree on signed
        # zeros; `llvm.minnum` leaves `min(+0.0, -0.0)` to the target
        return _float_cas_loop(em, dt, addr, sync, ptr_t,
                               lambda cur: em.float_binary(kind, dt, cur, value))
    op = {"add": "fadd" if dt.is_float else "add", "sub": "sub", "exch": "xchg",
          "and": "and", "or": "or", "xor": "xor",
          "min": "min" if dt.is_signed else "umin",
          "max": "max" if dt.is_signed else "umax"}[kind]
    return em.ins(f"atomicrmw {op} {ptr_t} {addr}, {t} {value}{sync} monotonic")


def _float_cas_loop(em: Any, dt: T.DType, addr: str, sync: str, ptr_t: str,
                    combine: Callable[[str], str]) -> str:
    """A float atomic no instruction does (min/max; a flushed add on the CPU) as a
    compare-and-swap loop: the new value is `combine(current)`; returns the old value."""
    it = "i32" if dt.bits == 32 else "i64"
    t = dt.llvm
    init = em.ins(f"load atomic {it}, {ptr_t} {addr}{sync} monotonic, align {dt.bits // 8}")
    head, done = em.label(), em.label()
    pre = em.current
    em.raw(f"br label %{head}")
    em.start_block(head)
    cur = em.tmp()
    nxt_name = em.tmp()
    em.lines.append(f"  {cur} = phi {it} [ {init}, %{pre} ], [ {nxt_name}, %{head} ]")
    curf = em.ins(f"bitcast {it} {cur} to {t}")
    bbits = em.ins(f"bitcast {t} {combine(curf)} to {it}")
    pair = em.ins(f"cmpxchg {ptr_t} {addr}, {it} {cur}, {it} {bbits}{sync} "
                  "monotonic monotonic")
    em.lines.append(f"  {nxt_name} = extractvalue {{ {it}, i1 }} {pair}, 0")
    ok = em.ins(f"extractvalue {{ {it}, i1 }} {pair}, 1")
    em.raw(f"br i1 {ok}, label %{done}, label %{head}")
    em.start_block(done)
    return em.ins(f"bitcast {it} {cur} to {t}")
