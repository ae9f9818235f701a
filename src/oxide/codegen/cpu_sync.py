"""Barriers and warp collectives on the CPU: each GPU thread is an LLVM coroutine.

A kernel with `sync_threads`, `sync_warp` or a warp collective compiles its
per-thread function as a presplit coroutine. Every synchronization point
stores why it stops (`STATE_BLOCK` or `STATE_WARP`) in the thread's context
and suspends (`llvm.coro.suspend`); LLVM's coroutine passes (part of the O3
pipeline) split the function and keep whatever lives across a suspension in
the coroutine frame. The driver's scheduler (`cpu_driver.SCHEDULER`) resumes
threads so that no thread passes a barrier before every thread it waits for
has reached it.

A warp collective is two warp points: each lane writes its value to its slot
of the warp's scratch area and suspends; once every lane has written, each
reads what it needs and suspends again, so no lane overwrites a slot another
lane has still to read.
"""

from __future__ import annotations

from typing import Any

from oxide import types as T
from oxide.codegen.cpu_driver import CTX_BYTES, STATE_BLOCK, STATE_DONE, STATE_WARP
from oxide.codegen.warp_lanes import shuffle_source

PROLOGUE = (
    "  %oxide.coro.id = call token @llvm.coro.id(i32 64, ptr null, ptr null, ptr null)",
    "  %oxide.coro.size = call i64 @llvm.coro.size.i64()",
    "  %oxide.coro.mem = call ptr @oxide.cpu.frame(ptr %oxide.ctx, i64 %oxide.coro.size)",
    "  %oxide.coro.hdl = call ptr @llvm.coro.begin(token %oxide.coro.id, ptr %oxide.coro.mem)",
    "  %oxide.state = getelementptr inbounds i8, ptr %oxide.ctx, i64 8",
    "  %oxide.scratch.p = getelementptr inbounds i8, ptr %oxide.ctx, i64 32",
    "  %oxide.scratch = load ptr, ptr %oxide.scratch.p",
)

EPILOGUE = f"""oxide.exit:
  store i32 {STATE_DONE}, ptr %oxide.state
  %oxide.final = call i8 @llvm.coro.suspend(token none, i1 true)
  switch i8 %oxide.final, label %oxide.suspend [ i8 0, label %oxide.resumed.after.end
                                                 i8 1, label %oxide.cleanup ]
oxide.resumed.after.end:
  unreachable
oxide.cleanup:
  br label %oxide.suspend
oxide.suspend:
  call void @llvm.coro.end(ptr %oxide.coro.hdl, i1 false, token none)
  ret ptr %oxide.coro.hdl"""

DECLARES = (
    "declare token @llvm.coro.id(i32, ptr, ptr, ptr)",
    "declare i64 @llvm.coro.size.i64()",
    "declare ptr @llvm.coro.begin(token, ptr)",
    "declare i8 @llvm.coro.suspend(token, i1)",
    "declare void @llvm.coro.end(ptr, i1, token)",
)


def suspend(em: Any, state: int) -> None:
    """Records why this thread stops, suspends, and continues in a fresh block when resumed."""
    em.raw(f"store i32 {state}, ptr %oxide.state")
    s = em.ins("call i8 @llvm.coro.suspend(token none, i1 false)")
    resumed = em.label()
    em.raw(f"switch i8 {s}, label %oxide.suspend [ i8 0, label %{resumed} "
           "i8 1, label %oxide.cleanup ]")
    em.start_block(resumed)


def barrier(em: Any, kind: str) -> None:
    suspend(em, STATE_BLOCK if kind == "block" else STATE_WARP)


def to_bits(em: Any, dt: T.DType, v: str) -> str:
    """A value as the i64 a scratch slot holds (floats by bits, ints extended by sign)."""
    if dt.is_float:
        it = f"i{dt.bits}"
        v = em.ins(f"bitcast {dt.llvm} {v} to {it}")
        return v if dt.bits == 64 else em.ins(f"zext {it} {v} to i64")
    if dt.bits == 64:
        return v
    ext = "sext" if dt.is_signed else "zext"
    return em.ins(f"{ext} {dt.llvm} {v} to i64")


def from_bits_lines(dt: T.DType, bits: str, out: str) -> list[str]:
    """IR lines turning the i64 `bits` back into a `dt` named `out` (for helper templates)."""
    if dt.bits == 64:
        return [f"  {out} = bitcast i64 {bits} to {dt.llvm}"]
    if dt.is_float:
        return [f"  {out}.i = trunc i64 {bits} to i{dt.bits}",
                f"  {out} = bitcast i{dt.bits} {out}.i to {dt.llvm}"]
    return [f"  {out} = trunc i64 {bits} to {dt.llvm}"]


def from_bits(em: Any, dt: T.DType, bits: str) -> str:
    if dt.bits == 64:
        return em.ins(f"bitcast i64 {bits} to {dt.llvm}") if dt.is_float else bits
    if dt.is_float:
        narrow = em.ins(f"trunc i64 {bits} to i{dt.bits}")
        return em.ins(f"bitcast i{dt.bits} {narrow} to {dt.llvm}")
    return em.ins(f"trunc i64 {bits} to {dt.llvm}")


class WarpCollectives:
    """Emits warp collectives for one module; lane-loop helpers are defined once each."""

    def __init__(self, lane: Any, lanes_in_warp: Any) -> None:
        self.lane = lane  # em -> i32 lane id
        self.lanes_in_warp = lanes_in_warp  # em -> i32 number of lanes this warp has
        self.helpers: dict[str, str] = {}
        self.sites = 0  # activemask call sites numbered so far (from 1)

    def emit(self, em: Any, kind: str, args: list[tuple[T.DType, str]]) -> str:
        if kind == "sync":  # ox.sync_warp(mask): a warp point, as the full-warp barrier is
            barrier(em, "warp")
            return "0"
        if kind == "activemask":
            return self.activemask(em)
        lane = self.lane(em)
        nl = self.lanes_in_warp(em)
        (dt, v) = args[0]
        mask = args[-1][1]
        slot = em.ins(f"getelementptr inbounds i64, ptr %oxide.scratch, i32 {lane}")
        em.raw(f"store i64 {to_bits(em, dt, v)}, ptr {slot}")
        suspend(em, STATE_WARP)
        if kind.startswith("shuffle"):
            width = args[2][1] if len(args) == 4 else None  # `width=` below 32
            result = self.shuffle(em, kind, dt, v, args[1][1], lane, self.members(em, mask, nl),
                                  width)
        elif kind in ("ballot", "any", "all"):
            bits = self.call_helper(em, "ballot", None, mask, nl, "0")
            if kind == "ballot":
                result = bits
            elif kind == "any":
                result = em.ins(f"icmp ne i32 {bits}, 0")
            else:
                full = em.ins(f"icmp uge i32 {nl}, 32")
                shifted = em.ins(f"shl i32 1, {nl}")
                partial = em.ins(f"sub i32 {shifted}, 1")
                lanes = em.ins(f"select i1 {full}, i32 -1, i32 {partial}")
                want = em.ins(f"and i32 {mask}, {lanes}")
                result = em.ins(f"icmp eq i32 {bits}, {want}")
        elif kind == "match_any":
            result = self.call_helper(em, "match", None, mask, nl, to_bits(em, dt, v))
        elif kind == "match_all":  # the members when all hold this lane's value, else 0
            same = self.call_helper(em, "match", None, mask, nl, to_bits(em, dt, v))
            members = self.members(em, mask, nl)
            agree = em.ins(f"icmp eq i32 {same}, {members}")
            result = em.ins(f"select i1 {agree}, i32 {members}, i32 0")
        else:
            result = self.call_helper(em, kind, dt, mask, nl, v)
            if kind == "reduce_add" and dt.is_float:  # a whole warp sums as the GPU's tree
                tree = self.call_helper(em, "tree_add", dt, mask, nl, v)
                members = self.members(em, mask, nl)
                whole = em.ins(f"icmp eq i32 {members}, -1")
                result = em.ins(f"select i1 {whole}, {dt.llvm} {tree}, {dt.llvm} {result}")
        suspend(em, STATE_WARP)
        return result

    def float_min_max(self, op: str, dt: T.DType) -> str:
        """The name of this module's `min`/`max` helper for a float type (defined once)."""
        name = f"oxide.f{op}.{dt.name}"
        if name not in self.helpers:
            self.helpers[name] = _float_min_max(name, op, dt)
        return name

    def members(self, em: Any, mask: str, nl: str) -> str:
        """`mask` without the lanes past the end of a partial last warp."""
        full = em.ins(f"icmp uge i32 {nl}, 32")
        shifted = em.ins(f"shl i32 1, {nl}")  # poison when full, and then not selected
        partial = em.ins(f"sub i32 {shifted}, 1")
        lanes = em.ins(f"select i1 {full}, i32 -1, i32 {partial}")
        return em.ins(f"and i32 {mask}, {lanes}")

    def shuffle(self, em: Any, kind: str, dt: T.DType, v: str, arg: str, lane: str,
                members: str, width: str | None = None) -> str:
        """Reads another lane's slot; a source that is not a member gives this lane's value.

        The source is `arg & 31` (shuffle), `lane - arg`, `lane + arg` or `lane ^ arg`,
        `arg` read as unsigned, and it must lie in 0..31 and in `members` (the GPU target
        computes the same; docs/language.md)."""
        src, ok = shuffle_source(em, kind, lane, arg, members, width)
        src = em.ins(f"select i1 {ok}, i32 {src}, i32 {lane}")
        p = em.ins(f"getelementptr inbounds i64, ptr %oxide.scratch, i32 {src}")
        bits = em.ins(f"load i64, ptr {p}")
        return from_bits(em, dt, bits)

    def activemask(self, em: Any) -> str:
        """`activemask()`: the lanes of this warp that reach this call in the same warp step.

        The scheduler resumes, pass after pass, each lane waiting at a warp point, in lane
        order, and a lane runs to its next point. Each call site has an id; arriving, a lane
        records (site, arrived, group) in its context (bytes 40-51, which the driver zeroes)
        and suspends. Lanes arriving at one site in one pass share a group: a lane joins the
        group of a lower lane that arrived at this site and has not yet read (a lower lane
        that arrived in an earlier pass has read by then, having been resumed first in this
        pass), or else opens a new one, numbered above every group of the warp. Resumed,
        each lane marks itself read and collects the lanes of its group; it suspends once
        more before going on, so no lane of the group records a new arrival before every
        lane of the group has read.
        """
        self.sites += 1
        lane = self.lane(em)
        nl = self.lanes_in_warp(em)
        back = em.ins(f"mul i32 {lane}, -{CTX_BYTES}")
        base = em.ins(f"getelementptr inbounds i8, ptr %oxide.ctx, i32 {back}")
        for name, text in (("oxide.warp.active.arrive", _ACTIVE_ARRIVE),
                           ("oxide.warp.active.read", _ACTIVE_READ)):
            self.helpers.setdefault(name, text)
        em.declare("declare i32 @llvm.umax.i32(i32, i32)")
        group = em.ins(f"call i32 @oxide.warp.active.arrive(ptr {base}, i32 {lane}, i32 {nl}, "
                       f"i32 {self.sites})")
        suspend(em, STATE_WARP)
        mask = em.ins(f"call i32 @oxide.warp.active.read(ptr {base}, i32 {lane}, i32 {nl}, "
                      f"i32 {group})")
        suspend(em, STATE_WARP)
        return mask

    def call_helper(self, em: Any, kind: str, dt: T.DType | None, mask: str, nl: str,
                    own: str) -> str:
        name = f"oxide.warp.{kind}" + (f".{dt.name}" if dt is not None else "")
        if name not in self.helpers:
            self.helpers[name] = (_tree_add(name, dt) if kind == "tree_add" and dt is not None
                                  else _lane_loop(name, kind, dt))
        if dt is not None and not kind.endswith("add"):
            t = dt.llvm
            if dt.is_float:
                self.float_min_max(kind.split("_")[1], dt)
            else:
                em.declare(f"declare {t} @{_minmax(kind, dt)}({t}, {t})")
        ret = dt.llvm if dt is not None else "i32"
        own_t = dt.llvm if dt is not None else "i64"
        return em.ins(f"call {ret} @{name}(ptr %oxide.scratch, i32 {mask}, i32 {nl}, "
                      f"{own_t} {own})")


def _minmax(kind: str, dt: T.DType) -> str:
    """The function for reduce_min / reduce_max on `dt`: an intrinsic, or for floats the
    module's own helper (`_float_min_max`)."""
    op = kind.split("_")[1]
    if dt.is_float:
        return f"oxide.f{op}.{dt.name}"
    return f"llvm.{'s' if dt.is_signed else 'u'}{op}.{dt.llvm}"


def _float_min_max(name: str, op: str, dt: T.DType) -> str:
    """IEEE 754-2019 minimumNumber / maximumNumber in plain compares and selects.

    NaN loses to a number and -0.0 orders below +0.0 (equal operands merge their bits:
    `or` keeps a minus sign, `and` drops it), as PTX's min/max do. Not `llvm.minimumnum`:
    LLVM 22's x86 lowering of it returns NaN for max(NaN, x) when x is known not NaN.
    """
    t, it = dt.llvm, f"i{dt.bits}"
    first, second = ("olt", "ogt") if op == "min" else ("ogt", "olt")
    return "\n".join([
        f"define internal {t} @{name}({t} %a, {t} %b) alwaysinline {{",
        "entry:",
        f"  %a.wins = fcmp {first} {t} %a, %b",
        f"  %b.wins = fcmp {second} {t} %a, %b",
        f"  %a.bits = bitcast {t} %a to {it}",
        f"  %b.bits = bitcast {t} %b to {it}",
        f"  %same.bits = {'or' if op == 'min' else 'and'} {it} %a.bits, %b.bits",
        f"  %same = bitcast {it} %same.bits to {t}",
        f"  %r1 = select i1 %b.wins, {t} %b, {t} %same",
        f"  %r2 = select i1 %a.wins, {t} %a, {t} %r1",
        f"  %a.nan = fcmp uno {t} %a, 0.0",
        f"  %b.nan = fcmp uno {t} %b, 0.0",
        f"  %r3 = select i1 %b.nan, {t} %a, {t} %r2",
        f"  %r = select i1 %a.nan, {t} %b, {t} %r3",
        f"  ret {t} %r",
        "}",
    ])


def _tree_add(name: str, dt: T.DType) -> str:
    """A whole warp's float sum in the order of the GPU's xor butterfly: at each step lane
    l adds lane l ^ off (off = 16, 8, 4, 2, 1), so lane 0 ends with this pairwise tree."""
    t = dt.llvm
    lines = [f"define internal {t} @{name}(ptr %s, i32 %mask, i32 %nl, {t} %own) alwaysinline {{",
             "entry:"]
    values = []
    for lane in range(32):
        lines.append(f"  %p{lane} = getelementptr inbounds i64, ptr %s, i32 {lane}")
        lines.append(f"  %b{lane} = load i64, ptr %p{lane}")
        lines += from_bits_lines(dt, f"%b{lane}", f"%v{lane}")
        values.append(f"%v{lane}")
    off = 16
    while off:
        for lane in range(off):
            lines.append(f"  %s{off}.{lane} = fadd {t} {values[lane]}, {values[lane + off]}")
        values = [f"%s{off}.{lane}" for lane in range(off)]
        off //= 2
    lines += [f"  ret {t} {values[0]}", "}"]
    return "\n".join(lines)


def _lane_loop(name: str, kind: str, dt: T.DType | None) -> str:
    """A helper folding the slots of the lanes in `mask` (and in the warp) into one value."""
    if dt is None:  # ballot / match: a u32 lane mask
        ret, own_t, init = "i32", "i64", "0"
        test = "icmp ne i64 %bits, 0" if kind == "ballot" else "icmp eq i64 %bits, %own"
        combine = [f"  %hit = {test}",
                   "  %one = shl i32 1, %l",
                   "  %bit = select i1 %hit, i32 %one, i32 0",
                   "  %acc.take = or i32 %acc, %bit"]
    else:
        ret = own_t = dt.llvm
        op = kind.split("_")[1]
        init = ("0.0" if dt.is_float else "0") if op == "add" else "%own"
        combine = from_bits_lines(dt, "%bits", "%v")
        if op == "add":
            combine.append(f"  %acc.take = {'fadd' if dt.is_float else 'add'} {ret} %acc, %v")
        else:
            combine.append(f"  %acc.take = call {ret} @{_minmax(kind, dt)}({ret} %acc, {ret} %v)")
    return "\n".join([
        f"define internal {ret} @{name}(ptr %s, i32 %mask, i32 %nl, {own_t} %own) alwaysinline {{",
        "entry:",
        "  br label %loop",
        "loop:",
        "  %l = phi i32 [ 0, %entry ], [ %l.next, %next ]",
        f"  %acc = phi {ret} [ {init}, %entry ], [ %acc.next, %next ]",
        "  %m = lshr i32 %mask, %l",
        "  %mb = and i32 %m, 1",
        "  %in.mask = icmp ne i32 %mb, 0",
        "  %in.warp = icmp ult i32 %l, %nl",
        "  %active = and i1 %in.mask, %in.warp",
        "  br i1 %active, label %take, label %next",
        "take:",
        "  %p = getelementptr inbounds i64, ptr %s, i32 %l",
        "  %bits = load i64, ptr %p",
        *combine,
        "  br label %next",
        "next:",
        f"  %acc.next = phi {ret} [ %acc, %loop ], [ %acc.take, %take ]",
        "  %l.next = add nuw i32 %l, 1",
        "  %more = icmp ult i32 %l.next, 32",
        "  br i1 %more, label %loop, label %done",
        "done:",
        f"  ret {ret} %acc.next",
        "}",
    ])


# activemask's records in each lane's context (`WarpCollectives.activemask`): i32 site @40,
# i32 arrived @44 (1 from arrival until the lane reads), i32 group @48.
_ACTIVE_ARRIVE = """define internal i32 @oxide.warp.active.arrive(ptr %base, i32 %lane, i32 %nl, i32 %site) {
entry:
  br label %loop
loop:
  %l = phi i32 [ 0, %entry ], [ %l.next, %next ]
  %top = phi i32 [ 0, %entry ], [ %top.next, %next ]
  %join = phi i32 [ 0, %entry ], [ %join.next, %next ]
  %off = mul nuw i32 %l, {CTX}
  %c = getelementptr inbounds i8, ptr %base, i32 %off
  %gp = getelementptr inbounds i8, ptr %c, i64 48
  %g = load i32, ptr %gp
  %top.next = call i32 @llvm.umax.i32(i32 %top, i32 %g)
  %sp = getelementptr inbounds i8, ptr %c, i64 40
  %s = load i32, ptr %sp
  %ap = getelementptr inbounds i8, ptr %c, i64 44
  %a = load i32, ptr %ap
  %at.site = icmp eq i32 %s, %site
  %waiting = icmp ne i32 %a, 0
  %lower = icmp ult i32 %l, %lane
  %same.0 = and i1 %at.site, %waiting
  %same = and i1 %same.0, %lower
  %none.yet = icmp eq i32 %join, 0
  %take = and i1 %same, %none.yet
  %join.next = select i1 %take, i32 %g, i32 %join
  br label %next
next:
  %l.next = add nuw i32 %l, 1
  %more = icmp ult i32 %l.next, %nl
  br i1 %more, label %loop, label %done
done:
  %fresh = add i32 %top.next, 1
  %found = icmp ne i32 %join.next, 0
  %group = select i1 %found, i32 %join.next, i32 %fresh
  %moff = mul nuw i32 %lane, {CTX}
  %me = getelementptr inbounds i8, ptr %base, i32 %moff
  %msp = getelementptr inbounds i8, ptr %me, i64 40
  store i32 %site, ptr %msp
  %map = getelementptr inbounds i8, ptr %me, i64 44
  store i32 1, ptr %map
  %mgp = getelementptr inbounds i8, ptr %me, i64 48
  store i32 %group, ptr %mgp
  ret i32 %group
}""".replace("{CTX}", str(CTX_BYTES))

_ACTIVE_READ = """define internal i32 @oxide.warp.active.read(ptr %base, i32 %lane, i32 %nl, i32 %group) {
entry:
  %moff = mul nuw i32 %lane, {CTX}
  %me = getelementptr inbounds i8, ptr %base, i32 %moff
  %map = getelementptr inbounds i8, ptr %me, i64 44
  store i32 0, ptr %map
  br label %loop
loop:
  %l = phi i32 [ 0, %entry ], [ %l.next, %loop ]
  %acc = phi i32 [ 0, %entry ], [ %acc.next, %loop ]
  %off = mul nuw i32 %l, {CTX}
  %c = getelementptr inbounds i8, ptr %base, i32 %off
  %gp = getelementptr inbounds i8, ptr %c, i64 48
  %g = load i32, ptr %gp
  %hit = icmp eq i32 %g, %group
  %one = shl i32 1, %l
  %bit = select i1 %hit, i32 %one, i32 0
  %acc.next = or i32 %acc, %bit
  %l.next = add nuw i32 %l, 1
  %more = icmp ult i32 %l.next, %nl
  br i1 %more, label %loop, label %done
done:
  ret i32 %acc.next
}""".replace("{CTX}", str(CTX_BYTES))
