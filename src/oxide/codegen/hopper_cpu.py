"""The CPU's meaning of TMA box copies and of mbarriers (codegen/hopper.py calls it).

mbarrier: the u64 in shared memory holds, on the CPU, the arrivals still pending in its
bits 0-15, the arrivals each phase expects in 16-31, the transaction bytes still pending
in 32-62 (modulo 2**31: a copy may complete before its bytes are expected, as on the
GPU) and the phase's parity in bit 63. A phase completes when both counts reach zero:
the parity flips and the pending arrivals are reset. A thread waiting on a phase that
has not completed suspends as at a block barrier (the CPU's threads are coroutines,
codegen/cpu_sync.py) and looks again when the scheduler resumes it, after the block's
other threads have run; a wait nothing completes never ends, as on the GPU. A block
barrier of other threads is therefore not held up by a waiting thread on the CPU (both
are resumed in the same phase): kernels that need it to be are wrong on the GPU too,
where the thread that would complete the phase also waits at the barrier.

TMA: `tma.load` copies the box at once, element by element, from the tensor map's
description (runtime/tensormap.py `CPU_LAYOUT`): elements past the array's edge (or
before it: coordinates are signed) are zero (or NaN with oob_fill="nan"), and each lands
where the hardware puts it: with a swizzle of S bytes, the 16-byte chunk bits of its
byte offset from the shared array's first element (bits 4 up) are XORed with the row
bits (7 up), as wgmma's CPU meaning reads them back. It then completes the mbarrier's
transaction by the whole box's bytes. `tma.store` copies back through the same
layout, dropping what falls outside the array, and `tma.reduce_add` adds each element
to the array's by a relaxed atomic (a TMA reduction). Bulk groups complete at once, so commit,
wait and prefetch do nothing. A box that does not fit the shared array from the element
given is reported as an index error (with checks on) and clipped.
"""

from __future__ import annotations

from typing import Any

from oxide.codegen.atomics import emit_atomic
from oxide.codegen.hopper_address import element_address, tma_address
from oxide.errors import TargetError
from oxide.ir import ops

_PENDING = 0xFFFF
_TX_MASK = 0x7FFFFFFF
_PHASE = -(1 << 63)  # bit 63 as an i64 literal
_NAN_BITS = {"f16": 0x7E00, "bf16": 0x7FC0, "f32": 0x7FC00000, "f64": 0x7FF8000000000000}
# runtime/tensormap.py CPU_LAYOUT offsets
_DIMS, _STRIDES, _BOX, _SWIZZLE, _OOB = 16, 56, 96, 116, 120


def _span(em: Any, op: Any) -> Any:
    where = em.origins.get(op)
    return where[-1] if where else None


# -- mbarrier ------------------------------------------------------------------------------

def _update(em: Any, bar: str, arrivals: str, tx_delta: str) -> str:
    """Arrive `arrivals` times and add `tx_delta` (i64) pending bytes; completes the phase
    when nothing is pending. Returns the state before (an arrive's token)."""
    s = em.ins(f"load i64, ptr {bar}")
    pending = em.ins(f"and i64 {s}, {_PENDING}")
    expected = em.ins(f"and i64 {em.ins(f'lshr i64 {s}, 16')}, {_PENDING}")
    tx = em.ins(f"and i64 {em.ins(f'lshr i64 {s}, 32')}, {_TX_MASK}")
    phase = em.ins(f"and i64 {s}, {_PHASE}")
    pending2 = em.ins(f"and i64 {em.ins(f'sub i64 {pending}, {arrivals}')}, {_PENDING}")
    tx2 = em.ins(f"and i64 {em.ins(f'add i64 {tx}, {tx_delta}')}, {_TX_MASK}")
    both = em.ins(f"or i64 {pending2}, {tx2}")
    complete = em.ins(f"icmp eq i64 {both}, 0")
    exp16 = em.ins(f"shl i64 {expected}, 16")
    flipped = em.ins(f"xor i64 {phase}, {_PHASE}")
    done = em.ins(f"or i64 {em.ins(f'or i64 {expected}, {exp16}')}, {flipped}")
    tx_bits = em.ins(f"or i64 {em.ins(f'shl i64 {tx2}, 32')}, {phase}")
    busy = em.ins(f"or i64 {em.ins(f'or i64 {pending2}, {exp16}')}, {tx_bits}")
    new = em.ins(f"select i1 {complete}, i64 {done}, i64 {busy}")
    em.raw(f"store i64 {new}, ptr {bar}")
    return s


def _completed(em: Any, bar: str, parity: str) -> str:
    """Whether the phase of this parity has completed (the current parity differs)."""
    s = em.ins(f"load i64, ptr {bar}")
    now = em.ins(f"trunc i64 {em.ins(f'lshr i64 {s}, 63')} to i32")
    return em.ins(f"icmp ne i32 {now}, {em.ins(f'and i32 {parity}, 1')}")


def _yield(em: Any) -> None:
    """Suspend until the scheduler's next block phase (codegen/cpu_sync.py)."""
    em.t.barrier(em, "block")


def mbarrier(em: Any, name: str, op: ops.HopperOp) -> list[str]:
    bar = element_address(em, op)
    args = [em.v(a) for a in op.args]
    if name == "init":
        count = em.ins(f"and i64 {em.ins(f'zext i32 {args[0]} to i64')}, {_PENDING}")
        state = em.ins(f"or i64 {count}, {em.ins(f'shl i64 {count}, 16')}")
        em.raw(f"store i64 {state}, ptr {bar}")
        return []
    if name == "arrive":
        return [_update(em, bar, "1", "0")]
    if name == "arrive_cluster":  # a CPU launch's clusters have one block: rank 0, itself
        _update(em, bar, "1", "0")
        return []
    if name == "arrive_expect_tx":
        return [_update(em, bar, "1", em.ins(f"zext i32 {args[0]} to i64"))]
    if name == "try_wait_parity":  # looks, and if not yet, lets the others run once
        first = _completed(em, bar, args[0])
        wait, after = em.label(), em.label()
        before = em.current
        em.raw(f"br i1 {first}, label %{after}, label %{wait}")
        em.start_block(wait)
        _yield(em)
        again = _completed(em, bar, args[0])
        resumed = em.current
        em.raw(f"br label %{after}")
        em.start_block(after)
        return [em.ins(f"phi i1 [ true, %{before} ], [ {again}, %{resumed} ]")]
    if name == "wait_parity":
        head, wait, done = em.label(), em.label(), em.label()
        em.raw(f"br label %{head}")
        em.start_block(head)
        ready = _completed(em, bar, args[0])
        em.raw(f"br i1 {ready}, label %{done}, label %{wait}")
        em.start_block(wait)
        _yield(em)
        em.raw(f"br label %{head}")
        em.start_block(done)
        return []
    raise TargetError(f"oxide has no CPU meaning for `mbarrier.{name}`", _span(em, op))


# -- TMA -----------------------------------------------------------------------------------

def tma(em: Any, kind: str, op: ops.HopperOp) -> list[str]:
    parts = kind.split(".")
    name = parts[1]
    if name == "barrier":
        return [em.ins(f"ptrtoint ptr {element_address(em, op)} to i64")]
    if name in ("commit_group", "wait_group", "wait_group_read", "prefetch",
                "prefetch_descriptor"):
        return []  # copies complete at once on the CPU
    if kind.endswith(".multicast"):
        raise TargetError("ox.tma.load(multicast=...) runs only on the GPU: CPU launches "
                          "form no clusters, so there is no other block to multicast to",
                          _span(em, op),
                          hint="compile this kernel for a GPU (arch='sm_90'), or load "
                               "without multicast= on the CPU")
    rank = int(parts[2][:-1])
    _copy(em, op, rank, load=name == "load", add=name == "reduce_add")
    return []


def _field(em: Any, desc: str, offset: int, ty: str) -> str:
    p = em.ins(f"getelementptr inbounds i8, ptr {desc}, i64 {offset}")
    v = em.ins(f"load {ty}, ptr {p}")
    return v if ty == "i64" else em.ins(f"zext {ty} {v} to i64")


def _copy(em: Any, op: ops.HopperOp, rank: int, load: bool, add: bool = False) -> None:
    """The box copy between global memory (through the description) and shared memory;
    with `add`, a reduction: each shared element added to its global one by a relaxed
    atomic (the CPU's `ox.atomic.add`, f32 subnormals flushed as on the GPU)."""
    array = op.array[0]
    info = em.arrays[array]
    dt = info["dtype"]
    item = dt.itemsize
    ity = f"i{8 * item}"
    args = [em.v(a) for a in op.args]
    desc = args[0]
    coords = args[2:2 + rank] if load else args[1:1 + rank]
    coords = list(reversed(coords))  # innermost first, as the description
    start = tma_address(em, op)
    base = em.ins(f"ptrtoint ptr {info['ptr']} to i64")
    rel0 = em.ins(f"sub i64 {em.ins(f'ptrtoint ptr {start} to i64')}, {base}")
    gbase = _field(em, desc, 0, "i64")
    dims = [_field(em, desc, _DIMS + 8 * k, "i64") for k in range(rank)]
    strides = [_field(em, desc, _STRIDES + 8 * k, "i64") for k in range(rank)]
    box = [_field(em, desc, _BOX + 4 * k, "i32") for k in range(rank)]
    swizzle = _field(em, desc, _SWIZZLE, "i32")
    total = box[0]
    for b in box[1:]:
        total = em.ins(f"mul i64 {total}, {b}")
    # the shared array's bytes from the start element: the box must fit
    count = "1"
    for d in info["dims"]:
        count = em.ins(f"mul i64 {count}, {d}")
    room = em.ins(f"sub i64 {em.ins(f'mul i64 {count}, {item}')}, {rel0}")
    need = em.ins(f"mul i64 {total}, {item}")
    fits = em.ins(f"icmp ule i64 {need}, {room}")
    if op.site is not None:
        ok, bad = em.label(), em.label()
        em.raw(f"br i1 {fits}, label %{ok}, label %{bad}, !prof !0")
        em.start_block(bad)
        end = em.ins(f"udiv i64 {em.ins(f'add i64 {rel0}, {need}')}, {item}")
        last = em.ins(f"sub i64 {end}, 1")
        em.call_report(1, op.site.data, last, count)
        em.raw(f"br label %{ok}")
        em.start_block(ok)
    n = em.ins(f"select i1 {fits}, i64 {total}, i64 {em.ins(f'udiv i64 {room}, {item}')}")
    # what the row bits XOR into the chunk bits: (swizzle / 16) - 1 (0 without a swizzle)
    mask = em.ins(f"sub i64 {em.ins(f'lshr i64 {swizzle}, 4')}, 1")
    mask = em.ins(f"select i1 {em.ins(f'icmp eq i64 {swizzle}, 0')}, i64 0, i64 {mask}")
    fill = "0"
    if load and dt.name in _NAN_BITS:
        oob = _field(em, desc, _OOB, "i32")
        fill = em.ins(f"select i1 {em.ins(f'icmp ne i64 {oob}, 0')}, {ity} "
                      f"{_NAN_BITS[dt.name]}, {ity} 0")
    stack = em.intrinsic("llvm.stacksave.p0", "ptr", [])
    counter = em.ins("alloca i64, align 8")
    em.raw(f"store i64 0, ptr {counter}")
    head, body, done = em.label(), em.label(), em.label()
    em.raw(f"br label %{head}")
    em.start_block(head)
    e = em.ins(f"load i64, ptr {counter}")
    em.raw(f"br i1 {em.ins(f'icmp ult i64 {e}, {n}')}, label %{body}, label %{done}")
    em.start_block(body)
    rest, inside, offset = e, "true", "0"
    for k in range(rank):
        b = em.ins(f"urem i64 {rest}, {box[k]}") if k < rank - 1 else rest
        if k < rank - 1:
            rest = em.ins(f"udiv i64 {rest}, {box[k]}")
        g = em.ins(f"add i64 {em.ins(f'sext i32 {coords[k]} to i64')}, {b}")
        ok = em.ins(f"icmp ult i64 {g}, {dims[k]}")  # negative coordinates wrap: outside
        inside = ok if inside == "true" else em.ins(f"and i1 {inside}, {ok}")
        offset = em.ins(f"add i64 {offset}, {em.ins(f'mul i64 {g}, {strides[k]}')}")
    rel = em.ins(f"add i64 {rel0}, {em.ins(f'mul i64 {e}, {item}')}")
    row = em.ins(f"and i64 {em.ins(f'lshr i64 {rel}, 7')}, {mask}")
    rel = em.ins(f"xor i64 {rel}, {em.ins(f'shl i64 {row}, 4')}")
    sptr = em.ins(f"getelementptr inbounds i8, ptr {info['ptr']}, i64 {rel}")
    safe = em.ins(f"select i1 {inside}, i64 {offset}, i64 0")
    gptr = em.ins(f"inttoptr i64 {em.ins(f'add i64 {gbase}, {safe}')} to ptr")
    if load:
        v = em.ins(f"load {ity}, ptr {gptr}")
        em.raw(f"store {ity} {em.ins(f'select i1 {inside}, {ity} {v}, {ity} {fill}')}, "
               f"ptr {sptr}")
    else:
        store, skip = em.label(), em.label()
        em.raw(f"br i1 {inside}, label %{store}, label %{skip}")
        em.start_block(store)
        if add:  # as the CPU's ox.atomic.add: f32 flushes, as the GPU's FTZ map does
            emit_atomic(em, "add", "", dt, gptr, em.ins(f"load {dt.llvm}, ptr {sptr}"),
                        None, "ptr", flush_f32=True)
        else:
            em.raw(f"store {ity} {em.ins(f'load {ity}, ptr {sptr}')}, ptr {gptr}")
        em.raw(f"br label %{skip}")
        em.start_block(skip)
    em.raw(f"store i64 {em.ins(f'add i64 {e}, 1')}, ptr {counter}")
    em.raw(f"br label %{head}")
    em.start_block(done)
    em.intrinsic("llvm.stackrestore.p0", "void", [("ptr", stack)])
    if load:  # the transaction: the whole box's bytes, as on the GPU
        bar = em.ins(f"inttoptr i64 {args[1]} to ptr")
        _update(em, bar, "0", em.ins(f"sub i64 0, {need}"))
