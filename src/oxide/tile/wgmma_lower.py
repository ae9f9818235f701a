"""`tile.mma` on Hopper's warp-group tensor cores (wgmma), as the tile compiler emits it.

What it assumes (tile/mma_choice.py chose the `"wgmma"` engine only then): an sm_90
target; 16-bit float operands `a` (M, K) and `b` (K, N), or `b` as the (N, K) tile whose
transpose is the product's B (`b_transposed`, folded by the layout pass), or `a` as the
(K, M) tile whose transpose is A (`a_transposed`, likewise: read MN-major); or 8-bit float
ones (wgmma reads those K-major only: a (K, N) B is staged transposed); the block's
warps in whole warp groups with M = 16 * num_warps (warp group g owns rows 64g..64g+63,
one m64nNk16 instruction per k step, m64nNk32 for 8-bit floats: 32 bytes of each row),
or twice that (each warp group issues an instruction a block of 16 * num_warps rows,
rows 64g.. of each: `layout.wgmma_accumulator`, Triton's 128-row tiles on 4 warps), or
M = 64 on 8 warps (the two warp groups split the columns, each all 64 rows of N / 2 with
an m64nN/2 instruction, reading B from its band: `mma_choice.column_groups`);
N a multiple of 64 up to 256 (or 8, 16, 32: tile/mma_choice.py `supports`); K of one or
two instructions or a multiple of a 128-byte row; the accumulator in
`layout.mma_accumulator(..., rows_only=True)`, which is wgmma's own fragment layout (warp
w holds rows 16w + g and 16w + g + 8, columns 2t, 2t + 1 of every 8-column group).

What it does, per product:
- a 16-bit A in the A-fragment layout (`mma_operand_a`: every warp on 16 rows, a
  loop-invariant A or a product's result, as attention's `p`) goes to the instruction
  from registers (the `rs` form), pairs of halves packed;
- an operand in a ring (tile/operand_rings.py: its load copied it with cp.async) is read
  from its buffer once this thread's copies landed (`cp.async.wait_group`); one a TMA
  filled (tile/tma_rings.py) once its mbarrier's phase completed, and where both did,
  with no fence and no barrier (the barrier after the product frees their buffers); the
  others:
- a barrier (the previous product's reads of the operand arrays are over); each thread
  writes its elements of A and B into shared memory in the layout wgmma's descriptors
  read: rows of 32, 64 or 128 bytes with the matching swizzle (16-byte chunk `c` of row
  `r` stored at `c ^ (r * row_bytes / 128 % (swizzle / 16))`, what a TMA copy with that
  swizzle writes), K-major for A (and a transposed B), and for B as `a @ b` has it
  (K x N row-major: MN-major for the instruction; an `a_transposed` A's (K, M) tile
  the same) slabs of 64 columns, each K rows of
  128 bytes (a narrow N of 16 or 32: one slab, rows of 32 or 64 bytes); an 8-bit B as `a @ b` has it, element by element into the K-major layout
  of its transpose (8-bit wgmma has no MN-major operands);
- `fence.proxy.async` (the generic-proxy stores become visible to the tensor cores'
  async proxy) and a barrier;
- `wgmma.fence`, one `wgmma.mma_async` per k step (16 halves, 32 8-bit floats: 32 bytes
  of each row) with descriptors that walk the rows, `wgmma.commit_group`,
  `wgmma.wait_group 0` (1 where operand_rings.py leaves the product in flight: the next
  product waits for it, the epilogue's read waits for all).

What it guarantees: the result in the accumulator's layout, `acc + a @ b` with f32
accumulation, as the mma.sync engine gives it (the bits may differ from mma.sync's and
the CPU's in the last place: tensor cores sum a k step's products at their own precision;
for 8-bit operands by more, since Hopper keeps about 13 bits of a running sum between
k32 steps: docs/language.md).
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import SSAValue

from oxide import types as T
from oxide.ir import ops
from oxide.ir.types import ir_type
from oxide.tile import pingpong
from oxide.tile.layout import mma_operand_a
from oxide.tile.lower import TileEmitter
from oxide.tile.mma_choice import WGMMA_TYPES, column_groups, wgmma_k
from oxide.tile.operand_rings import (
    SLAB,
    buffer_start,
    ring_array,
    ring_of,
    row_elements,
    swizzled_index,
    wait_for,
)
from oxide.tile.tma_rings import consume, wait_tma
from oxide.tile.values import Slots

_SWIZZLE_CODE = {128: 1, 64: 2, 32: 3}  # the descriptor's layout field (bits 62-63)


def lower_wgmma(em: TileEmitter, a: Slots, b: Slots, acc: Slots, b_transposed: bool,
                in_flight: bool = False, turn: str | None = None, issue_only: bool = False,
                after_commit: Callable[[], None] | None = None,
                guard: SSAValue | None = None, a_transposed: bool = False,
                transposed_acc: bool = False) -> Slots:
    """`acc + a @ b` on wgmma (see the module docstring); an operand in a ring
    (tile/operand_rings.py) is read where its copies put it. With `in_flight` (both
    operands in rings with a buffer to spare, the result only the next product's
    accumulator), it waits for the previous product instead (`wgmma.wait_group 1`).
    A loop's `turn` product (tile/pingpong.py): the "tail" waits for the warp group's turn
    before it is issued, the "head" passes the turn on once it is. The overlap
    (tile/overlap.py): with `issue_only`, the instructions are issued and their
    results, still being written, returned (no commit, no wait: the caller commits,
    and waits before it reads them); with `after_commit`, that is emitted after this
    product's commit (another product's issue and commit), and the wait leaves one
    group, the newest, in flight (its rings are given back where it is waited for). With
    `guard` (an i32, with `issue_only`), each instruction is issued only where it is
    non-zero, predicated rather than branched around, and the caller has waited for the
    TMA fills it reads (where it issues). With `a_transposed` (16-bit), `a` is the (K, M)
    tile whose transpose is A, staged as it is (slabs of 64 columns, each K rows of 128
    bytes: warp group g's 64 rows of A are slab g) and read MN-major. With
    `transposed_acc`, `acc` holds the transpose of the instruction's (M, N) result (its
    layout is wgmma's `transposed()`): a product of few rows computed transposed, whose
    `a` and `b` the caller swapped (tile/mma_lower.py)."""
    assert not a_transposed or a.dtype.itemsize == 2
    (m, k) = a.shape[::-1] if a_transposed else a.shape
    n = b.shape[0] if b_transposed else b.shape[1]
    size, step = a.dtype.itemsize, wgmma_k(a.dtype)
    stage_transposed = not b_transposed and size == 1  # K-major only: B's transpose staged
    assert not stage_transposed or ring_of(b.layout) is None
    k_major_b = b_transposed or stage_transposed
    width_k = row_elements(k, a.dtype)  # a K-major operand's staging row
    row_bytes = width_k * size
    width_a = SLAB if a_transposed else width_k
    rings = [t for t in (a, b) if ring_of(t.layout) is not None]
    tma = [t for t in rings if ring_of(t.layout).tma]  # type: ignore[union-attr]
    # A in the A-fragment layout (the layout pass's choice for a loop-invariant A, and a
    # product's result such as attention's p): read from registers, the `rs` form
    # warp groups side by side over the columns (64 rows on 8 warps), each computing its
    # band of N / groups columns with instructions that N wide
    groups_n = 1 if transposed_acc else column_groups(m, n, em.num_warps) or 1
    n_i = n // groups_n  # the instruction's N
    span = 16 * em.num_warps // groups_n  # the rows one m64 instruction of each group covers
    blocks = m // span  # row blocks: m64 instructions a warp group issues a k step
    a_regs = size == 2 and not a_transposed and blocks == 1 and groups_n == 1 and \
        a.layout.key() == mma_operand_a((m, k), em.num_warps, em.num_warps).key()
    if (not a_regs and ring_of(a.layout) is None) or ring_of(b.layout) is None:
        em.barrier()  # the previous product's reads of the staging arrays are over
    sa, a_start = (None, None) if a_regs else _operand(em, a, width_a, "wa")
    width_b = width_k if k_major_b else min(SLAB, n)  # MN-major: slabs of 64, or all N
    sb, b_start = _operand(em, b, width_b, "wb", stage_transposed)
    if len(tma) < len(rings):
        wait_for(em, [t for t in rings if t not in tma])
    assert guard is None or issue_only
    if tma and guard is None:  # the mbarriers' phases: TMA's writes visible to each thread
        wait_tma(em, tma)
    staged = (not a_regs and ring_of(a.layout) is None) or ring_of(b.layout) is None
    if staged or len(tma) < len(rings):
        # the threads' stores and copies: into the async proxy, every thread's (what TMA
        # filled, the mbarriers' phases made visible; registers need neither)
        em.b.emit(ops.HopperOp("fence.proxy_async", [], []))
        em.barrier()
    _, warp = em._thread()
    group = em._entry(ops.BinaryOp("shr", warp, em.const(2, T.i32)))
    # warp group g's 64 rows of A start at row 64 g of every slab (K-major), or are slab
    # g, K rows of 64 (MN-major); where the groups split the columns, each reads all 64
    # rows, and B from its band: N / groups rows further (K-major), or as many slabs
    a_row0 = em.const(0, T.i64) if groups_n > 1 else em._entry(ops.CastOp(em._entry(
        ops.BinaryOp("mul", group, em.const(64 * (k if a_transposed else width_a), T.i32))),
        ir_type(T.i64)))
    if a_start is not None:
        a_row0 = em.b.value(ops.BinaryOp("add", a_row0, a_start))
    if groups_n > 1:
        band = em._entry(ops.CastOp(em._entry(ops.BinaryOp(
            "mul", group, em.const(n_i * (width_k if k_major_b else k), T.i32))),
            ir_type(T.i64)))
        b_start = band if b_start is None else em.b.value(ops.BinaryOp("add", band, b_start))
    slot = {offs: s for s, offs in enumerate(acc.layout.offsets())}
    # row block j's fragment register e of column group c: row span * j + 8 * (e // 2),
    # column 8 * c + e % 2 of the thread's share (the other way round in a transposed
    # accumulator)
    at = [[(span * j + 8 * (e // 2), 8 * c + e % 2) for c in range(n_i // 8) for e in range(4)]
          for j in range(blocks)]
    order = [[slot[(c, r) if transposed_acc else (r, c)] for r, c in block] for block in at]
    values = list(acc.values)
    regs = [[values[s] for s in block] for block in order]
    # block j's rows of A: `span * j` rows further (K-major), or `span / 64` slabs
    block_rows = span * (k if a_transposed else width_a)
    packed = _packed_a(em, a, k, step) if a_regs else []
    pingpong.before_issue(em, turn)
    em.b.emit(ops.HopperOp("wgmma.fence", [], []))
    one = em.const(1, T.i32)
    kind = f"wgmma.m64n{n_i}k{step}.{WGMMA_TYPES[a.dtype.name]}.{'rs' if a_regs else 'ss'}"
    for kk in range(k // step):
        col = step * kk
        if k_major_b:  # (N, K) K-major, like A, every warp group reads all N rows
            b_at = (col // width_k) * n * width_k + col % width_k
            db = _descriptor(em, sb, _at(em, b_start, b_at), row_bytes, lbo=16,
                             sbo=8 * row_bytes)
        else:  # K rows of slabs of width_b columns: MN-major, the next slab `lbo` further
            b_row = width_b * b.dtype.itemsize
            db = _descriptor(em, sb, _at(em, b_start, col * width_b), b_row, lbo=k * b_row,
                             sbo=8 * b_row)
        guarded = [] if guard is None else [guard]
        for j in range(blocks):
            if a_regs:
                a_in = packed[4 * kk:4 * kk + 4]
            elif a_transposed:  # K rows of the group's slab: MN-major, as B's slabs below
                a_row = SLAB * size
                a_in = [_descriptor(em, sa, _add(em, a_row0, block_rows * j + col * SLAB),
                                    a_row, lbo=k * a_row, sbo=8 * a_row)]
            else:
                a_at = _add(em, a_row0, block_rows * j + (col // width_k) * m * width_k
                            + col % width_k)
                a_in = [_descriptor(em, sa, a_at, row_bytes, lbo=16, sbo=8 * row_bytes)]
            op = ops.HopperOp(kind, [*a_in, db, one, *guarded, *regs[j]],
                              [ir_type(T.f32)] * len(regs[j]),
                              imm=(int(a_transposed), 0 if k_major_b else 1,
                                   int(guard is not None)))
            em.b.emit(op)
            regs[j] = list(op.results)
    flat_order = [s for block in order for s in block]
    flat = [v for block in regs for v in block]
    if issue_only:
        for s, v in zip(flat_order, flat, strict=True):
            values[s] = v
        return Slots(acc.dtype, acc.layout, tuple(values))
    em.b.emit(ops.HopperOp("wgmma.commit", [], []))
    pingpong.after_commit(em, turn)
    if after_commit is not None:
        after_commit()
    wait = ops.HopperOp("wgmma.wait", flat, [ir_type(T.f32)] * len(flat),
                        imm=(1 if in_flight or after_commit is not None else 0,))
    em.b.emit(wait)
    if tma and em.consumer_threads is not None:  # buffers back to the producer warp group
        consume(em, [ring_of(t.layout) for t in tma], in_flight)  # type: ignore[misc]
    for s, v in zip(flat_order, wait.results, strict=True):
        values[s] = v
    return Slots(acc.dtype, acc.layout, tuple(values))


def _packed_a(em: TileEmitter, a: Slots, k: int, step: int) -> list[SSAValue]:
    """A's registers for every k step of the product (four i32 a step: a0..a3 at (row, k)
    offsets (0, 0), (8, 0), (0, 8), (8, 8), two halves each), packed by one `wgmma.pack`
    before the chain's fence (codegen/hopper.py says why)."""
    a_slot = {offs: s for s, offs in enumerate(a.layout.offsets())}
    halves = [a.values[a_slot[(8 * (r & 1), col + 8 * (r >> 1) + e)]]
              for col in range(0, k, step) for r in range(4) for e in range(2)]
    op = ops.HopperOp("wgmma.pack", halves, [ir_type(T.i32)] * (len(halves) // 2))
    em.b.emit(op)
    return list(op.results)


def _operand(em: TileEmitter, t: Slots, width: int, role: str, transposed: bool = False
             ) -> tuple[SSAValue, SSAValue | None]:
    """The shared array holding operand `t` (its transpose, if `transposed`) and the
    element its tile starts at (None: element 0): its ring's buffer, or the staging
    array the threads store it into."""
    if ring_of(t.layout) is not None:
        return ring_array(em, ring_of(t.layout), t.dtype), buffer_start(em, t)
    return stage_swizzled(em, t, width, role, transposed), None


def _at(em: TileEmitter, start: SSAValue | None, offset: int) -> SSAValue:
    if start is None:
        return em.const(offset, T.i64)
    return _add(em, start, offset)


def _add(em: TileEmitter, x: SSAValue, offset: int) -> SSAValue:
    return x if offset == 0 else em.b.value(ops.BinaryOp("add", x, em.const(offset, T.i64)))


def _descriptor(em: TileEmitter, smem: SSAValue, at: SSAValue, row_bytes: int, lbo: int,
                sbo: int) -> SSAValue:
    """The shared-memory matrix descriptor of the operand starting at element `at`: rows
    of `row_bytes` with that swizzle, `lbo`/`sbo` in bytes (codegen/hopper.py encodes it
    and aligns the array to the swizzle's 1024 bytes)."""
    op = ops.HopperOp("wgmma.desc", [], [ir_type(T.u64)], smem, [at],
                      imm=(_SWIZZLE_CODE[row_bytes], lbo >> 4, sbo >> 4))
    em.b.emit(op)
    return op.results[0]


def stage_swizzled(em: TileEmitter, t: Slots, width: int, role: str, transposed: bool = False
           ) -> SSAValue:
    """`t` (rows, cols) into shared memory in slabs of `width` columns, each slab `rows`
    rows of `width` elements with the swizzle of that row size
    (`operand_rings.swizzled_index`); a thread's side-by-side elements go in vector
    stores within one 16-byte chunk (the swizzle moves whole chunks). With `transposed`,
    its transpose (cols, rows) so, one element at a time."""
    rows, cols = t.shape
    smem = em.staging(t.dtype, rows * cols, role)
    size = max(1, t.dtype.bits // 8)
    run = 1 if transposed else max(1, min(t.layout.dims[1].spt, 16 // size, width))
    coords = em.coords(t.layout)
    for k in range(0, len(t.values), run):
        r, c = (em.b.cast(x, T.i64) for x in coords[k])
        at = (swizzled_index(em, c, r, cols, rows, width, size) if transposed
              else swizzled_index(em, r, c, rows, cols, width, size))
        if run == 1:
            em.b.emit(ops.StoreOp(smem, [at], t.values[k], 0, False, True))
        else:
            em.b.emit(ops.VectorStoreOp(smem, [at], t.values[k:k + run], run * size))
    return smem
