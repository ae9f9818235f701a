"""`tile.mma(a, b, acc)` lowered into oxide's SIMT IR: tensor cores for 16-bit floats,
exact FMA loops otherwise.

What it assumes: `a` is (M, K), `b` is (K, N) and `acc` is (M, N), shapes powers of two,
`a` and `b` of one dtype and `acc` of the type they accumulate in (the frontend,
`tile/calls.py`, checked and reported all of that); every thread of the block reaches
the call (tile code has no thread-dependent control), so its barriers are reached by all.
(The module is not called `mma.py`: importing it would replace `oxide.tile.mma`, the
function kernels call, with the module.)

What it guarantees:
- the result is in the accumulator layout (`layout.mma_accumulator`) wherever the
  tile holds at least one 16 x 8 instruction tile, so `acc = tile.mma(a, b, acc)` in a
  loop keeps its registers across iterations (the frontend carries it in that layout);
  an accumulator in another layout is converted once (a constant one, `tile.zeros`, is
  simply made again in the new layout: nothing moves);
- bf16/f16 with M >= 16, N >= 8, K >= 16: the operands are written once to shared
  memory, row-major with 8 extra elements per row (rows of 16-byte ldmatrix reads then
  fall in distinct banks), and read as fragments with `ldmatrix` (`.trans` for B, which
  is K-major in memory; none for a `b_transposed` B, the (N, K) tile the layout pass
  folded a transpose into); each warp multiplies its share of the (M, N) tile with
  `mma.sync.m16n8k16` (f32 accumulate), the same `oxide.hopper` ops `ox.mma_sync` and
  `ox.ldmatrix` become, so the CPU target runs them through its exact emulation. An A
  operand already in the A-fragment layout (`layout.mma_operand_a`: a loop-invariant
  one the layout pass converted once, or a product's result with whole rows in each
  warp) goes to the instruction from registers, pairs of halves packed;
- anything else (f32, f64, tiles smaller than an instruction), and every product on the
  CPU target: the operands go to shared memory and each thread runs a loop over k of
  multiply-adds for its own elements, in the accumulator's type: f32 inputs are computed
  in f32, never silently in TF32. On the CPU this gives the bits the mma.sync emulation
  gave (products of halves are exact, and both add them to the accumulator one by one in
  k order) at a fraction of the compile time: LLVM vectorizes a loop, where the
  emulation was one warp collective per lane per instruction.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import SSAValue

from oxide import types as T
from oxide.ir import ops
from oxide.ir.types import ir_type
from oxide.tile.layout import Layout, mma_operand_a
from oxide.tile.lower import TileEmitter
from oxide.tile.mma_choice import HALVES, MMA_K
from oxide.tile.values import Slots
from oxide.tile.wgmma_lower import lower_wgmma

# extra elements at the end of each shared-memory row of an operand (16 bytes of halves):
# the 8 rows one ldmatrix matrix reads then start in 8 different groups of 4 banks
PAD = 8


def accumulate_dtype(dt: T.DType) -> T.DType:
    """The type `a @ b` accumulates in: f32 for 16-bit and 8-bit floats, the type itself
    else."""
    return T.f32 if dt.name in HALVES or dt.is_fp8 else dt


def constant_value(t: Slots) -> SSAValue | None:
    """The one constant every slot of `t` holds (`tile.zeros`, `tile.full(shape, 1.0)`),
    or None. Such a tile is the same in any layout, so re-laying it out moves nothing."""
    first = t.values[0] if t.values else None
    if first is None or any(v is not first for v in t.values):
        return None
    return first if isinstance(first.owner, ops.ConstantOp) else None


def relayout(em: TileEmitter, t: Slots, layout: Layout) -> Slots:
    """`t` in `layout`: a constant tile is made again, anything else converted."""
    if t.layout.key() == layout.key():
        return Slots(t.dtype, layout, t.values)
    c = constant_value(t)
    if c is not None:
        return Slots(t.dtype, layout, (c,) * layout.slots)
    return em.convert(t, layout)


def lower_mma(em: TileEmitter, a: Slots, b: Slots, acc: Slots, layout: Layout,
              engine: str, b_transposed: bool = False, in_flight: bool = False,
              turn: str | None = None, after_commit: Callable[[], None] | None = None,
              a_transposed: bool = False, swapped: bool = False) -> Slots:
    """`a @ b + acc` in `layout`, the result's (the layout pass's choice: the accumulator
    layout, or the accumulator's own for tiles smaller than one instruction; see the
    module docstring), on `engine` (tile/mma_choice.py). With `b_transposed`, `b` is the
    (N, K) tile whose transpose is the product's B (the layout pass folds
    `permute(x, (1, 0))` into it where tensor cores take the product); with
    `a_transposed` (wgmma only), `a` is the (K, M) tile whose transpose is A. With `in_flight`
    (tile/operand_rings.py), the wgmma may still run when this returns. `turn` ("head",
    "tail") marks a product of a loop whose warp groups take turns (tile/pingpong.py);
    `after_commit`, the head of a rotated loop (tile/overlap.py). With `swapped` (wgmma,
    few rows: tile/mma_choice.py `swapped_fits`), the product is computed transposed,
    `acc^T + b^T a^T`, B's tile the instruction's A and A's its B, into an accumulator
    whose layout is the transpose of wgmma's."""
    acc = relayout(em, acc, layout)
    if engine == "wgmma" and swapped:  # b^T's tile is (K, N) as `a @ b` has it: MN-major
        return lower_wgmma(em, b, a, acc, not a_transposed, in_flight, turn,
                           after_commit=after_commit, a_transposed=not b_transposed,
                           transposed_acc=True)
    assert not swapped, "a product computed transposed only on wgmma"
    if engine == "wgmma":
        return lower_wgmma(em, a, b, acc, b_transposed, in_flight, turn,
                           after_commit=after_commit, a_transposed=a_transposed)
    assert not a_transposed, "a transposed A only where wgmma takes the product"
    if engine == "mma.sync":
        return _tensor_cores(em, a, b, acc, b_transposed)
    assert not b_transposed, "a transposed B only where tensor cores take the product"
    return _fma_loop(em, a, b, acc)


# -- shared memory ---------------------------------------------------------------------

def _to_shared(em: TileEmitter, t: Slots, stride: int, role: str) -> SSAValue:
    """`t` written row-major into a new shared array whose rows are `stride` apart
    (called between two barriers). A thread's `spt` side-by-side elements of a row go in
    vector stores of up to 16 bytes: the array starts 16-byte aligned, `stride` keeps each
    row's start a multiple of the vector (`PAD` and the power-of-two extents), and the
    run starts at a multiple of `spt`. Replicas write the same value to the same cell."""
    smem = em.staging(t.dtype, t.shape[0] * stride, role)
    size = max(1, t.dtype.bits // 8)
    width = 1
    if t.shape[1] > 1:
        width = max(1, min(t.layout.dims[1].spt, 16 // size))
        while (stride * size) % (width * size):  # rows keep vector alignment
            width //= 2
    coords = em.coords(t.layout)
    for k in range(0, len(t.values), width):
        r, c = coords[k]
        at = em.b.value(ops.BinaryOp("mul", em.b.cast(r, T.i64), em.const(stride, T.i64)))
        at = em.b.value(ops.BinaryOp("add", at, em.b.cast(c, T.i64)))
        if width == 1:
            em.b.emit(ops.StoreOp(smem, [at], t.values[k], 0, False, True))
        else:
            em.b.emit(ops.VectorStoreOp(smem, [at], t.values[k:k + width], width * size))
    return smem


def _operands(em: TileEmitter, a: Slots, b: Slots, pad: int) -> tuple[SSAValue, SSAValue]:
    """Both operands in shared memory: a barrier first (the previous use of these arrays,
    an earlier loop iteration's reads, is over), the writes, a barrier after."""
    em.barrier()
    sa = _to_shared(em, a, a.shape[1] + pad, "a")
    sb = _to_shared(em, b, b.shape[1] + pad, "b")
    em.barrier()
    return sa, sb


# -- tensor cores ----------------------------------------------------------------------

def _entry_i64(em: TileEmitter, x: SSAValue, scale: int, add: SSAValue | None = None
               ) -> SSAValue:
    """`x * scale (+ add)` as i64, computed once in the entry block."""
    v = em._entry(ops.CastOp(x, ir_type(T.i64)))
    if scale != 1:
        v = em._entry(ops.BinaryOp("mul", v, em.const(scale, T.i64)))
    if add is not None:
        v = em._entry(ops.BinaryOp("add", v, add))
    return v


def _ldmatrix(em: TileEmitter, smem: SSAValue, base: SSAValue, offset: int, num: int,
              trans: bool) -> list[SSAValue]:
    at = base if offset == 0 else em.b.value(ops.BinaryOp("add", base,
                                                          em.const(offset, T.i64)))
    kind = f"ldmatrix.x{num}{'.trans' if trans else ''}"
    op = ops.HopperOp(kind, [], [ir_type(T.u32)] * num, smem, [at])
    em.b.emit(op)
    return list(op.results)


def _tensor_cores(em: TileEmitter, a: Slots, b: Slots, acc: Slots, b_transposed: bool
                  ) -> Slots:
    """Each warp's share of `acc += a @ b` with ldmatrix fragments and mma.sync. An `a`
    already in the A-fragment layout (`mma_operand_a`) is read from registers."""
    (m, k), n = a.shape, b.shape[0] if b_transposed else b.shape[1]
    rows, cols = acc.layout.dims
    wm_tile, wn_tile = m // rows.wpc, n // cols.wpc
    sa_stride, sb_stride = k + PAD, (k if b_transposed else n) + PAD
    a_in_registers = a.layout.key() == mma_operand_a((m, k), rows.wpc, em.num_warps).key()
    if a_in_registers or b_transposed:
        em.barrier()
        sa = None if a_in_registers else _to_shared(em, a, sa_stride, "a")
        sb = _to_shared(em, b, sb_stride, "b")
        em.barrier()
    else:
        sa, sb = _operands(em, a, b, PAD)
    lane, warp = em._thread()
    warp_m = em._field(warp, rows.warp_shift, rows.wpc)
    warp_n = em._field(warp, cols.warp_shift, cols.wpc)
    # ldmatrix: lane l gives the address of row l & 7 of matrix l >> 3
    r = em._field(lane, 0, 8)
    j_lo = em._field(lane, 3, 2)   # matrix bit 0: rows (A) or k (B) + 8
    j_hi = em._field(lane, 4, 2)   # matrix bit 1: k (A) or columns (B) + 8
    eight = em.const(8, T.i32)
    # A (M x K, row-major): matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (0-7, 8-15),
    # (8-15, 8-15) are a0..a3 of m16n8k16
    a_row = em._entry(ops.BinaryOp("add", r, em._entry(ops.BinaryOp("mul", j_lo, eight))))
    a_row = em._entry(ops.BinaryOp("add", a_row, em._entry(ops.BinaryOp(
        "mul", warp_m, em.const(wm_tile, T.i32)))))
    a_col = _entry_i64(em, j_hi, 8)
    a_base = _entry_i64(em, a_row, sa_stride, a_col)
    if b_transposed:
        # B^T (N x K, row-major: the instruction's column-major B, no `.trans`): matrices
        # (n 0-7, k 0-7), (n 0-7, k 8-15) are b0, b1 of one n8 tile; x4 adds n 8-15
        b_row = em._entry(ops.BinaryOp("add", r, em._entry(ops.BinaryOp("mul", j_hi, eight))))
        b_row = em._entry(ops.BinaryOp("add", b_row, em._entry(ops.BinaryOp(
            "mul", warp_n, em.const(wn_tile, T.i32)))))
        b_base = _entry_i64(em, b_row, sb_stride, _entry_i64(em, j_lo, 8))
    else:
        # B (K x N, row-major: K-major for the instruction, so `.trans`): matrices (k 0-7,
        # n 0-7), (k 8-15, n 0-7) are b0, b1 of one n8 tile; x4 adds the next n8 tile
        b_row = em._entry(ops.BinaryOp("add", r, em._entry(ops.BinaryOp("mul", j_lo, eight))))
        b_col = em._entry(ops.BinaryOp("add", em._entry(ops.BinaryOp("mul", j_hi, eight)),
                                       em._entry(ops.BinaryOp("mul", warp_n,
                                                              em.const(wn_tile, T.i32)))))
        b_base = _entry_i64(em, b_row, sb_stride, _entry_i64(em, b_col, 1))
    a_slot = {offs: s for s, offs in enumerate(a.layout.offsets())}
    slot = {offs: s for s, offs in enumerate(acc.layout.offsets())}
    values = list(acc.values)
    kind = f"mma.m16n8k16.{a.dtype.name}"
    n_mi, n_ni = wm_tile // 16, wn_tile // 8
    for kk in range(k // MMA_K):
        if sa is None:  # a0..a3: (row, k) offsets (0, 0), (8, 0), (0, 8), (8, 8), 2 each
            a_frags = [[a.values[a_slot[(16 * mi + 8 * (r & 1), 16 * kk + 8 * (r >> 1) + s)]]
                        for r in range(4) for s in range(2)] for mi in range(n_mi)]
        else:
            a_frags = [_ldmatrix(em, sa, a_base, 16 * mi * sa_stride + 16 * kk, 4, False)
                       for mi in range(n_mi)]
        b_frags: list[list[SSAValue]] = []
        for nj in range(0, n_ni, 2):
            offset = (8 * nj * sb_stride + 16 * kk if b_transposed
                      else 16 * kk * sb_stride + 8 * nj)
            if nj + 1 < n_ni:
                regs = _ldmatrix(em, sb, b_base, offset, 4, not b_transposed)
                b_frags += [regs[:2], regs[2:]]
            else:
                b_frags.append(_ldmatrix(em, sb, b_base, offset, 2, not b_transposed))
        for mi in range(n_mi):
            for ni in range(n_ni):
                # element e of the instruction tile: row 8 (e // 2) + g, column 2t + e % 2
                ks = [slot[(16 * mi + 8 * (e // 2), 8 * ni + e % 2)] for e in range(4)]
                op = ops.HopperOp(kind, a_frags[mi] + b_frags[ni] + [values[s] for s in ks],
                                  [ir_type(T.f32)] * 4)
                em.b.emit(op)
                for s, v in zip(ks, op.results, strict=True):
                    values[s] = v
    return Slots(acc.dtype, acc.layout, tuple(values))


# -- exact multiply-add loops ------------------------------------------------------------

def _fma_loop(em: TileEmitter, a: Slots, b: Slots, acc: Slots) -> Slots:
    """`acc += a @ b` as a run-time loop over k: each thread reads the a row and b column
    elements its slots need from shared memory (once per distinct row and column) and
    multiply-adds them in the accumulator's type."""
    k, n = a.shape[1], b.shape[1]
    dt = acc.dtype
    sa, sb = _operands(em, a, b, 0)
    layout = acc.layout
    coords = em.coords(layout)
    row_of: dict[int, SSAValue] = {}
    col_of: dict[int, SSAValue] = {}
    for (ro, co), (r, c) in zip(layout.offsets(), coords, strict=True):
        row_of.setdefault(ro, r)
        col_of.setdefault(co, c)
    # i64 row starts in A and column positions in B, computed before the loop
    a_rows = {ro: em.b.value(ops.BinaryOp("mul", em.b.cast(r, T.i64), em.const(k, T.i64)))
              for ro, r in row_of.items()}
    b_cols = {co: em.b.cast(c, T.i64) for co, c in col_of.items()}
    slots = [em.b.alloc(ops.SlotOp(ir_type(dt))) for _ in acc.values]
    for s, v in zip(slots, acc.values, strict=True):
        em.b.emit(ops.SlotWriteOp(s, v))
    counter = em.b.alloc(ops.SlotOp(ir_type(T.i64)))
    em.b.emit(ops.SlotWriteOp(counter, em.const(0, T.i64)))
    header, body, done = em.b.new_block(), em.b.new_block(), em.b.new_block()
    em.b.br(header)
    em.b.set_block(header)
    kv = em.b.value(ops.SlotReadOp(counter))
    em.b.cond_br(em.b.value(ops.CompareOp("lt", kv, em.const(k, T.i64))), body, done)
    em.b.set_block(body)
    b_row = em.b.value(ops.BinaryOp("mul", kv, em.const(n, T.i64)))
    av = {ro: em.b.cast(em.b.value(ops.LoadOp(sa, [em.b.value(ops.BinaryOp("add", at, kv))],
                                              ir_type(a.dtype), 0, False, True)), dt)
          for ro, at in a_rows.items()}
    bv = {co: em.b.cast(em.b.value(ops.LoadOp(sb, [em.b.value(ops.BinaryOp("add", b_row, c))],
                                              ir_type(b.dtype), 0, False, True)), dt)
          for co, c in b_cols.items()}
    for s, (ro, co) in zip(slots, layout.offsets(), strict=True):
        cur = em.b.value(ops.SlotReadOp(s))
        em.b.emit(ops.SlotWriteOp(s, em.b.value(ops.MathOp("fma", [av[ro], bv[co], cur],
                                                           ir_type(dt)))))
    em.b.emit(ops.SlotWriteOp(counter, em.b.value(ops.BinaryOp("add", kv,
                                                              em.const(1, T.i64)))))
    em.b.br(header)
    em.b.set_block(done)
    return Slots(dt, layout, tuple(em.b.value(ops.SlotReadOp(s)) for s in slots))
