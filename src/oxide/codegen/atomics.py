"""Atomic read-modify-write as LLVM IR, shared by the GPU and CPU targets.

LLVM's `atomicrmw`/`cmpxchg` mean the same on every target; only the
synchronization scope (`syncscope("block")` on NVPTX, none on the host) and
the pointer type (a shared-memory address space on NVPTX) differ, so the
targets pass those in.
"""

from __future__ import annotations

from typing import Any

from oxide import types as T


def emit_atomic(em: Any, kind: str, sync: str, dt: T.DType, addr: str, value: str,
                compare: str | None, ptr_t: str) -> str:
    """Emits `kind` (add, sub, min, max, exch, cas, and, or, xor); returns the old value."""
    t = dt.llvm
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
        return _float_minmax_loop(em, kind, dt, addr, value, sync, ptr_t)
    op = {"add": "fadd" if dt.is_float else "add", "sub": "sub", "exch": "xchg",
          "and": "and", "or": "or", "xor": "xor",
          "min": "min" if dt.is_signed else "umin",
          "max": "max" if dt.is_signed else "umax"}[kind]
    return em.ins(f"atomicrmw {op} {ptr_t} {addr}, {t} {value}{sync} monotonic")


def _float_minmax_loop(em: Any, kind: str, dt: T.DType, addr: str, value: str, sync: str,
                       ptr_t: str) -> str:
    """Float atomic min/max as a compare-and-swap loop (no hardware instruction).

    The new value is the language's `min`/`max` (docs/language.md: IEEE 754-2019
    minimumNumber/maximumNumber, the emitter's `float_binary`), so both targets agree on
    signed zeros; `llvm.minnum` leaves `min(+0.0, -0.0)` to the target.
    """
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
    best = em.float_binary(kind, dt, curf, value)  # as `min`/`max`: -0.0 < +0.0, NaN loses
    bbits = em.ins(f"bitcast {t} {best} to {it}")
    pair = em.ins(f"cmpxchg {ptr_t} {addr}, {it} {cur}, {it} {bbits}{sync} "
                  "monotonic monotonic")
    em.lines.append(f"  {nxt_name} = extractvalue {{ {it}, i1 }} {pair}, 0")
    ok = em.ins(f"extractvalue {{ {it}, i1 }} {pair}, 1")
    em.raw(f"br i1 {ok}, label %{done}, label %{head}")
    em.start_block(done)
    return em.ins(f"bitcast {it} {cur} to {t}")
