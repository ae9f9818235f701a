"""Which lane a warp shuffle reads, computed the same way on every target.

A shuffle's source is `arg & 31` (shuffle), `lane - arg`, `lane + arg` or `lane ^ arg`,
with `arg` read as unsigned. The language (docs/language.md) says a source outside the
warp or outside the mask gives the caller's own value; the GPU and CPU targets both build
that rule from this one function, so they cannot drift apart.
"""

from __future__ import annotations

from typing import Any


def shuffle_source(em: Any, kind: str, lane: str, arg: str, members: str) -> tuple[str, str]:
    """Returns `(src, valid)`: the source lane (0..31) and an i1 that holds where it lies
    inside the warp and in `members`."""
    if kind == "shuffle":
        src, in_warp = em.ins(f"and i32 {arg}, 31"), "true"
    elif kind == "shuffle_up":
        src = em.ins(f"sub i32 {lane}, {arg}")
        in_warp = em.ins(f"icmp ule i32 {arg}, {lane}")
    elif kind == "shuffle_down":
        src = em.ins(f"add i32 {lane}, {arg}")
        room = em.ins(f"sub i32 31, {lane}")
        in_warp = em.ins(f"icmp ule i32 {arg}, {room}")
    else:
        src = em.ins(f"xor i32 {lane}, {arg}")
        in_warp = em.ins(f"icmp ult i32 {arg}, 32")
    src = em.ins(f"and i32 {src}, 31")
    bit = em.ins(f"lshr i32 {members}, {src}")
    bit = em.ins(f"trunc i32 {bit} to i1")
    return src, em.ins(f"and i1 {in_warp}, {bit}")
