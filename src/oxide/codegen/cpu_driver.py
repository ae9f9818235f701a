"""The host-side launch driver of a CPU kernel, as LLVM IR text.

A CPU kernel module exports one function, `void <symbol>_launch(ptr args,
ptr err, ptr cfg)`: `args` holds one 8-byte slot per machine parameter (the
kernel ABI of `codegen/abi.py`, minus the error pointer), `cfg` holds nine
i64: grid x/y/z, block x/y/z, dynamic shared bytes, and the half-open range of
linear block ids this call runs (so the runtime can split a grid across OS
threads). Each call allocates its own shared memory, so concurrent calls on
disjoint block ranges never share a block's state.

Two drivers exist:
- kernels without barriers or warp collectives: the per-thread function is
  inlined into a plain loop nest (blocks, then z/y/x threads), which LLVM
  optimizes and vectorizes like any loop;
- kernels with them: the per-thread function is a coroutine (see
  `codegen/cpu_sync.py`); the driver starts every thread of a block, then
  `@oxide.cpu.schedule` resumes them until all finish (see `SCHEDULER`).
"""

from __future__ import annotations

# Per-thread context of a coroutine kernel (CTX_BYTES each, one per thread of a block):
#   ptr handle @0   the thread's coroutine
#   i32 state  @8   where it is suspended: 1 block barrier, 2 warp point, 3 finished
#   ptr frame  @16  coroutine frame memory, reused from block to block
#   i64 cap    @24  its size
#   ptr scratch @32 the warp's exchange area: 32 lanes x 8 bytes
CTX_BYTES = 64
WARP_SCRATCH_BYTES = 32 * 8
STATE_BLOCK, STATE_WARP, STATE_DONE = 1, 2, 3
REGISTERS = ("tid.x", "tid.y", "tid.z", "ctaid.x", "ctaid.y", "ctaid.z",
             "ntid.x", "ntid.y", "ntid.z", "nctaid.x", "nctaid.y", "nctaid.z")
CFG_SLOTS = 9

DECLARES = (
    "declare ptr @malloc(i64)",
    "declare ptr @calloc(i64, i64)",
    "declare ptr @aligned_alloc(i64, i64)",
    "declare void @free(ptr)",
    "declare void @llvm.coro.resume(ptr)",
)

# Frame memory for a thread's coroutine: grown once, then reused by every block.
FRAME_ALLOC = """
define internal ptr @oxide.cpu.frame(ptr %ctx, i64 %size) {
entry:
  %fp = getelementptr inbounds i8, ptr %ctx, i64 16
  %cp = getelementptr inbounds i8, ptr %ctx, i64 24
  %cap = load i64, ptr %cp
  %fits = icmp uge i64 %cap, %size
  br i1 %fits, label %reuse, label %grow
reuse:
  %f = load ptr, ptr %fp
  ret ptr %f
grow:
  %old = load ptr, ptr %fp
  call void @free(ptr %old)
  %s63 = add i64 %size, 63
  %rounded = and i64 %s63, -64
  %new = call ptr @aligned_alloc(i64 64, i64 %rounded)
  store ptr %new, ptr %fp
  store i64 %rounded, ptr %cp
  ret ptr %new
}
"""

# Runs one block of suspended threads to completion. Barrier semantics come from
# the order of resumption: a warp phase resumes the lanes of each warp that wait
# at a warp point, pass after pass, until none does (every lane of a warp crosses
# a warp point in the same pass, so a collective sees all lanes' values); then a
# block phase resumes, once each, the threads waiting at a block barrier, which
# all reached it before any of them continues.
SCHEDULER = """
define internal void @oxide.cpu.schedule(ptr %ctxs, i32 %n) {
entry:
  br label %round
round:
  br label %warp
warp:
  %w0 = phi i32 [ 0, %round ], [ %w0.next, %warp.next ]
  %w1.raw = add nuw i32 %w0, 32
  %w1.lt = icmp ult i32 %w1.raw, %n
  %w1 = select i1 %w1.lt, i32 %w1.raw, i32 %n
  br label %pass
pass:
  br label %lane
lane:
  %t = phi i32 [ %w0, %pass ], [ %t.next, %lane.next ]
  %prog = phi i1 [ false, %pass ], [ %prog.next, %lane.next ]
  %t64 = zext i32 %t to i64
  %off = mul nuw i64 %t64, 64
  %ctx = getelementptr inbounds i8, ptr %ctxs, i64 %off
  %st.p = getelementptr inbounds i8, ptr %ctx, i64 8
  %st = load i32, ptr %st.p
  %at.warp = icmp eq i32 %st, 2
  br i1 %at.warp, label %lane.resume, label %lane.next
lane.resume:
  %h = load ptr, ptr %ctx
  call void @llvm.coro.resume(ptr %h)
  br label %lane.next
lane.next:
  %prog.next = phi i1 [ %prog, %lane ], [ true, %lane.resume ]
  %t.next = add nuw i32 %t, 1
  %lane.more = icmp ult i32 %t.next, %w1
  br i1 %lane.more, label %lane, label %pass.end
pass.end:
  br i1 %prog.next, label %pass, label %warp.next
warp.next:
  %w0.next = add nuw i32 %w0, 32
  %warp.more = icmp ult i32 %w0.next, %n
  br i1 %warp.more, label %warp, label %blk
blk:
  br label %bt
bt:
  %u = phi i32 [ 0, %blk ], [ %u.next, %bt.next ]
  %alive = phi i1 [ false, %blk ], [ %alive.next, %bt.next ]
  %u64 = zext i32 %u to i64
  %uoff = mul nuw i64 %u64, 64
  %uctx = getelementptr inbounds i8, ptr %ctxs, i64 %uoff
  %ust.p = getelementptr inbounds i8, ptr %uctx, i64 8
  %ust = load i32, ptr %ust.p
  %at.block = icmp eq i32 %ust, 1
  br i1 %at.block, label %bt.resume, label %bt.next
bt.resume:
  %uh = load ptr, ptr %uctx
  call void @llvm.coro.resume(ptr %uh)
  br label %bt.next
bt.next:
  %alive.next = phi i1 [ %alive, %bt ], [ true, %bt.resume ]
  %u.next = add nuw i32 %u, 1
  %bt.more = icmp ult i32 %u.next, %n
  br i1 %bt.more, label %bt, label %round.end
round.end:
  br i1 %alive.next, label %round, label %done
done:
  ret void
}
"""


class _Text:
    """A tiny IR text builder with fresh names, for the driver's straight-line parts."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.n = 0

    def ins(self, text: str) -> str:
        self.n += 1
        name = f"%d{self.n}"
        self.lines.append(f"  {name} = {text}")
        return name

    def raw(self, text: str) -> None:
        self.lines.append(text if text.endswith(":") else f"  {text}")


def launch_driver(symbol: str, arg_types: list[str], coroutine: bool, shared_bytes: int) -> str:
    """The exported `<symbol>_launch`; `arg_types` are the machine parameters' LLVM types."""
    t = _Text()
    t.raw("entry:")
    args = []
    for k, ty in enumerate(arg_types):
        slot = t.ins(f"getelementptr inbounds i64, ptr %args, i64 {k}")
        if ty == "i1":
            byte = t.ins(f"load i8, ptr {slot}")
            args.append(f"i1 {t.ins(f'trunc i8 {byte} to i1')}")
        else:
            args.append(f"{ty} {t.ins(f'load {ty}, ptr {slot}')}")
    cfg = []
    for k in range(CFG_SLOTS):
        slot = t.ins(f"getelementptr inbounds i64, ptr %cfg, i64 {k}")
        cfg.append(t.ins(f"load i64, ptr {slot}"))
    gx, gy, gz, bx, by, bz, dyn, b0, b1 = cfg
    g32 = [t.ins(f"trunc i64 {v} to i32") for v in (gx, gy, gz)]
    b32 = [t.ins(f"trunc i64 {v} to i32") for v in (bx, by, bz)]
    smem_size = t.ins(f"add i64 {dyn}, {shared_bytes + 16}")
    smem = t.ins(f"call ptr @aligned_alloc(i64 64, i64 {_round64(t, smem_size)})")
    dsmem = t.ins(f"getelementptr inbounds i8, ptr {smem}, i64 {shared_bytes}")
    shared = [f"ptr {smem}", f"ptr {dsmem}", f"i64 {dyn}"]
    gxy = t.ins(f"mul i64 {gx}, {gy}")
    nt = t.ins(f"mul i32 {b32[0]}, {b32[1]}")
    nt = t.ins(f"mul i32 {nt}, {b32[2]}")
    prologue_end = "entry"
    if coroutine:
        prologue_end, ctxs, scratch = _coroutine_setup(t, nt)
    go = t.ins(f"icmp ult i64 {b0}, {b1}")
    t.raw(f"br i1 {go}, label %block, label %exit")

    t.raw("block:")
    t.raw(f"  %b = phi i64 [ {b0}, %{prologue_end} ], [ %b.next, %block.end ]")
    cx = t.ins(f"urem i64 %b, {gx}")
    q = t.ins(f"udiv i64 %b, {gx}")
    cy = t.ins(f"urem i64 {q}, {gy}")
    cz = t.ins(f"udiv i64 %b, {gxy}")
    c32 = [t.ins(f"trunc i64 {v} to i32") for v in (cx, cy, cz)]
    fixed_regs = c32 + b32 + g32  # ctaid, ntid, nctaid

    if coroutine:
        _spawn_and_schedule(t, symbol, args, fixed_regs, b32, nt, shared, ctxs)
    else:
        _thread_loops(t, symbol, args, fixed_regs, b32, shared)

    t.raw("block.end:")
    claim = t.ins("load atomic i32, ptr %err monotonic, align 4")
    ok = t.ins(f"icmp eq i32 {claim}, 0")
    t.raw("  %b.next = add nuw i64 %b, 1")
    more = t.ins(f"icmp ult i64 %b.next, {b1}")
    cont = t.ins(f"and i1 {ok}, {more}")
    t.raw(f"br i1 {cont}, label %block, label %exit")

    t.raw("exit:")
    if coroutine:
        _coroutine_teardown(t, nt, ctxs, scratch)
    t.raw(f"call void @free(ptr {smem})")
    t.raw("ret void")
    head = f"define void @{symbol}_launch(ptr %args, ptr %err, ptr %cfg) {{"
    parts = [head, *t.lines, "}"]
    if coroutine:
        parts += [FRAME_ALLOC, SCHEDULER]
    return "\n".join(parts)


def _round64(t: _Text, size: str) -> str:
    s = t.ins(f"add i64 {size}, 63")
    return t.ins(f"and i64 {s}, -64")


def _thread_loops(t: _Text, symbol: str, args: list[str], fixed_regs: list[str],
                  b32: list[str], shared: list[str]) -> None:
    """z, y, x loops over the block's threads, calling the (always-inlined) thread body."""
    t.raw("  br label %tz")
    t.raw("tz:")
    t.raw("  %tz.i = phi i32 [ 0, %block ], [ %tz.next, %tz.latch ]")
    t.raw("  br label %ty")
    t.raw("ty:")
    t.raw("  %ty.i = phi i32 [ 0, %tz ], [ %ty.next, %ty.latch ]")
    t.raw("  br label %tx")
    t.raw("tx:")
    t.raw("  %tx.i = phi i32 [ 0, %ty ], [ %tx.next, %tx ]")
    regs = ["%tx.i", "%ty.i", "%tz.i"] + fixed_regs
    call_args = args + ["ptr %err"] + [f"i32 {r}" for r in regs] + shared + ["ptr null"]
    t.raw(f"call void @{symbol}.thread({', '.join(call_args)})")
    for axis, nxt, dim in (("tx", "ty.latch", b32[0]), ("ty", "tz.latch", b32[1]),
                           ("tz", "block.end", b32[2])):
        if axis != "tx":
            t.raw(f"{axis}.latch:")
        t.raw(f"  %{axis}.next = add nuw i32 %{axis}.i, 1")
        more = t.ins(f"icmp ult i32 %{axis}.next, {dim}")
        t.raw(f"br i1 {more}, label %{axis}, label %{nxt}")


def _coroutine_setup(t: _Text, nt: str) -> tuple[str, str, str]:
    """Per-call thread contexts and warp scratch; each context points at its warp's scratch."""
    nt64 = t.ins(f"zext i32 {nt} to i64")
    ctxs = t.ins(f"call ptr @calloc(i64 {nt64}, i64 {CTX_BYTES})")
    w = t.ins(f"add i64 {nt64}, 31")
    nw = t.ins(f"lshr i64 {w}, 5")
    scratch = t.ins(f"call ptr @calloc(i64 {nw}, i64 {WARP_SCRATCH_BYTES})")
    t.raw("br label %init")
    t.raw("init:")
    t.raw("  %it = phi i64 [ 0, %entry ], [ %it.next, %init ]")
    off = t.ins(f"mul nuw i64 %it, {CTX_BYTES}")
    ctx = t.ins(f"getelementptr inbounds i8, ptr {ctxs}, i64 {off}")
    warp = t.ins("lshr i64 %it, 5")
    woff = t.ins(f"mul nuw i64 {warp}, {WARP_SCRATCH_BYTES}")
    sp = t.ins(f"getelementptr inbounds i8, ptr {scratch}, i64 {woff}")
    slot = t.ins(f"getelementptr inbounds i8, ptr {ctx}, i64 32")
    t.raw(f"store ptr {sp}, ptr {slot}")
    t.raw("  %it.next = add nuw i64 %it, 1")
    more = t.ins(f"icmp ult i64 %it.next, {nt64}")
    t.raw(f"br i1 {more}, label %init, label %init.done")
    t.raw("init.done:")
    return "init.done", ctxs, scratch


def _spawn_and_schedule(t: _Text, symbol: str, args: list[str], fixed_regs: list[str],
                        b32: list[str], nt: str, shared: list[str], ctxs: str) -> None:
    """Starts each thread of the block (it runs to its first suspension), then schedules."""
    t.raw("  br label %spawn")
    t.raw("spawn:")
    t.raw("  %s = phi i32 [ 0, %block ], [ %s.next, %spawn ]")
    tx = t.ins(f"urem i32 %s, {b32[0]}")
    r = t.ins(f"udiv i32 %s, {b32[0]}")
    ty = t.ins(f"urem i32 {r}, {b32[1]}")
    tz = t.ins(f"udiv i32 {r}, {b32[1]}")
    s64 = t.ins("zext i32 %s to i64")
    off = t.ins(f"mul nuw i64 {s64}, {CTX_BYTES}")
    ctx = t.ins(f"getelementptr inbounds i8, ptr {ctxs}, i64 {off}")
    regs = [tx, ty, tz] + fixed_regs
    call_args = args + ["ptr %err"] + [f"i32 {x}" for x in regs] + shared + [f"ptr {ctx}"]
    h = t.ins(f"call ptr @{symbol}.thread({', '.join(call_args)})")
    t.raw(f"store ptr {h}, ptr {ctx}")
    t.raw("  %s.next = add nuw i32 %s, 1")
    more = t.ins(f"icmp ult i32 %s.next, {nt}")
    t.raw(f"br i1 {more}, label %spawn, label %run")
    t.raw("run:")
    t.raw(f"call void @oxide.cpu.schedule(ptr {ctxs}, i32 {nt})")
    t.raw("br label %block.end")


def _coroutine_teardown(t: _Text, nt: str, ctxs: str, scratch: str) -> None:
    t.raw("br label %fr")
    t.raw("fr:")
    t.raw("  %f = phi i32 [ 0, %exit ], [ %f.next, %fr ]")
    f64 = t.ins("zext i32 %f to i64")
    off = t.ins(f"mul nuw i64 {f64}, {CTX_BYTES}")
    ctx = t.ins(f"getelementptr inbounds i8, ptr {ctxs}, i64 {off}")
    fp = t.ins(f"getelementptr inbounds i8, ptr {ctx}, i64 16")
    frame = t.ins(f"load ptr, ptr {fp}")
    t.raw(f"call void @free(ptr {frame})")
    t.raw("  %f.next = add nuw i32 %f, 1")
    more = t.ins(f"icmp ult i32 %f.next, {nt}")
    t.raw(f"br i1 {more}, label %fr, label %fr.done")
    t.raw("fr.done:")
    t.raw(f"call void @free(ptr {ctxs})")
    t.raw(f"call void @free(ptr {scratch})")
