"""Which lane a warp shuffle reads, computed the same way on every target.

A shuffle's source is `arg & 31` (shuffle), `lane - arg`, `lane + arg` or `lane ^ arg`,
with `arg` read as unsigned. The language (docs/language.md) says a source outside the
warp or outside the mask gives the caller's own value; the GPU and CPU targets both build
that rule from this one function, so they cannot drift apart.
"""

from __future__ import annotations

from typing import Any


def shuffle_source(em: Any, kind: str, lane: str, arg: str, members: str,
                   width: str | None = None) -> tuple[str, str]:
    """Returns `(src, valid)`: the source lane (0..31) and an i1 that holds where it lies
    inside the warp and in `members`.

    With `width` (an i32 power of two, CUDA's `width` argument) lanes work in groups of
    `width` consecutive lanes, as PTX's `shfl` computes with `c = (32 - width) << 8 | clamp`:
    `shuffle` reads lane `arg % width` of the caller's group, `shuffle_up`/`shuffle_down`
    give the caller's own value where the source leaves the group, and `shuffle_xor` may
    read an earlier group but not a later one."""
    if width is not None:
        return _grouped_source(em, kind, lane, arg, members, width)
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


def _grouped_source(em: Any, kind: str, lane: str, arg: str, members: str,
                    width: str) -> tuple[str, str]:
    """`shuffle_source` for a `width` below 32 (PTX's segmented `shfl`)."""
    low = em.ins(f"sub i32 {width}, 1")  # the lane's bits inside its group
    first = em.ins(f"xor i32 {low}, -1")
    start = em.ins(f"and i32 {lane}, {first}")  # the group's first lane
    offset = em.ins(f"and i32 {lane}, {low}")
    if kind == "shuffle":
        src = em.ins(f"or i32 {start}, {em.ins(f'and i32 {arg}, {low}')}")
        in_group = "true"
    elif kind == "shuffle_up":
        src = em.ins(f"sub i32 {lane}, {arg}")
        in_group = em.ins(f"icmp ule i32 {arg}, {offset}")
    elif kind == "shuffle_down":
        src = em.ins(f"add i32 {lane}, {arg}")
        room = em.ins(f"sub i32 {low}, {offset}")
        in_group = em.ins(f"icmp ule i32 {arg}, {room}")
    else:
        src = em.ins(f"xor i32 {lane}, {arg}")
        last = em.ins(f"or i32 {lane}, {low}")  # the group's last lane
        small = em.ins(f"icmp ult i32 {arg}, 32")
        below = em.ins(f"icmp ule i32 {src}, {last}")
        in_group = em.ins(f"and i1 {small}, {below}")
    src = em.ins(f"and i32 {src}, 31")
    bit = em.ins(f"lshr i32 {members}, {src}")
    bit = em.ins(f"trunc i32 {bit} to i1")
    return src, em.ins(f"and i1 {in_group}, {bit}")
