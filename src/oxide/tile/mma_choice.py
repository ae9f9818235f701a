"""Choosing the instruction each product runs on: the first pass over the tile dialect.

What it assumes: the frontend built the kernel's tile ops (`TileBuilder.tile_ops`) and
checked each `tile.mma`'s shapes and dtypes. What it guarantees: every `tile.mma` op
carries an `engine` parameter that the later passes read instead of deciding again:

- `"mma.sync"`: 16-bit float operands, K >= 16 and an (M, N) tile at least one
  m16n8k16 instruction large for the kernel's warps (`layout.mma_accumulator`), on a
  target with tensor cores (the GPU). The layout pass gives the result the accumulator
  layout; `tile/mma_lower.py` stages the operands and reads them with `ldmatrix`.
- `"wgmma"`: the same on an sm_90 target where the shapes fit one m64nNk16 instruction
  per warp group and k step (`supports`: M = 16 * num_warps,
  N a multiple of 64 up to 256, or a narrow 8, 16 or 32 where B is K-major in shared
  memory (a `w.permute((1, 0))` the layout pass folds: its rows are N, so a narrow N is
  fewer rows of the same layout), 16 or 32 for a 16-bit MN-major B (`a @ b`: its one
  slab's rows are N columns, 32 or 64 bytes with that swizzle), K of 16, 32 or a
  multiple of 64; or M = 64 on 8 warps, each warp group all 64 rows of N / 2 columns,
  N / 2 a multiple of 64 up to 256: `column_groups`). The layout pass gives the result
  wgmma's accumulator layout (`layout.wgmma_accumulator`: every warp on whole rows of
  its group's columns). 8-bit
  float operands (f8e4m3, f8e5m2: m64nNk32, K of 32, 64 or a multiple of 128) take it
  too (wgmma reads them K-major only: a B written as `w.permute((1, 0))` of an (N, K)
  tile, which the layout pass folds, is; a (K, N) one is staged transposed). A 16-bit
  product of few rows (M of 8, 16 or 32, where wgmma's M is 64 a warp group) takes it
  computed transposed (`swapped`: `acc^T = b^T a^T`, N as the instruction's M and the
  rows as its narrow N; `swapped_fits`), its accumulator in the transpose of wgmma's
  layout; measured on decode steps against mma.sync in docs/performance.md;
- `"fma"`: everything else (f32 and f64, tiles smaller than an instruction, 8-bit floats
  off Hopper's wgmma) and every product on the CPU target: a loop over k of multiply-adds
  per thread, the same bits (products of halves and of 8-bit floats are exact in f32;
  both add them to the accumulator in k order).

The wgmma engine's operands reach shared memory by cp.async rings where their loads allow
(tile/operand_rings.py), else through the threads; TMA and warp specialization are issue
26's next steps.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from xdsl.ir import Operation, SSAValue

from oxide import types as T
from oxide.codegen.switches import column_groups_enabled
from oxide.errors import PerformanceWarning
from oxide.ir.tile_ops import TileType, kind_of
from oxide.tile.held_warnings import warn_at
from oxide.tile.layout import mma_accumulator

HALVES = ("bf16", "f16")
WGMMA_SLAB = 64  # elements of a 128-byte swizzle row of 16-bit floats
NARROW_N = (8, 16, 32)  # wgmma's N below a slab (tiles are powers of two)
SWIZZLE_ROW = 128  # bytes: the widest swizzle row, a wgmma operand's staging row
MMA_K = 16
# the most m64 instructions a warp group issues a k step (M = 128 a group: 128 of each
# thread's registers for 128 f32 columns, as Triton's 128-row tiles on 4 warps)
MAX_ROW_BLOCKS = 2
ENGINES = ("wgmma", "mma.sync", "fma")
# the PTX name of each operand type wgmma takes
WGMMA_TYPES = {"bf16": "bf16", "f16": "f16", "f8e4m3": "e4m3", "f8e5m2": "e5m2"}


def slab_elements(dt: T.DType) -> int:
    """Elements of `dt` in one 128-byte swizzle row (64 halves, 128 8-bit floats)."""
    return SWIZZLE_ROW // dt.itemsize


def wgmma_k(dt: T.DType) -> int:
    """The K of one wgmma instruction: 32 bytes of each row (k16 halves, k32 8-bit)."""
    return 32 // dt.itemsize


def supports(m: int, n: int, k: int, num_warps: int, dt: T.DType = T.bf16,
             b_k_major: bool = False) -> bool:
    """Whether tile/wgmma_lower.py takes an (M, K) @ (K, N) product of `dt` tiles on
    `num_warps` warps (`b_k_major`: B is an (N, K) tile's transpose)."""
    step = wgmma_k(dt)
    wide = n % WGMMA_SLAB == 0 and n <= 256
    # a K-major B's rows are N; an MN-major one's (16-bit) rows are N columns wide, with
    # the swizzle of that width (64 or 32 bytes: no swizzle takes rows of 16)
    narrow = n in NARROW_N and (b_k_major or dt.itemsize == 2 and n >= 16)
    splits = row_blocks(m, num_warps) > 0 and (wide or narrow) or column_groups(m, n, num_warps)
    return (num_warps % 4 == 0 and bool(splits)
            and (k in (step, 2 * step) or k % slab_elements(dt) == 0))


def row_blocks(m: int, num_warps: int) -> int:
    """How many m64 instructions each warp group issues a k step for M rows (1 where M is
    64 a group; 2 where it is 128 a group, as Triton's 128-row tiles on 4 warps); 0 where
    wgmma does not take M."""
    blocks, rest = divmod(m, 16 * num_warps)
    return blocks if not rest and 1 <= blocks <= MAX_ROW_BLOCKS else 0


def column_groups(m: int, n: int, num_warps: int) -> int:
    """How many warp groups split an (M, N) product's columns: where M is 64 (one m64
    instruction) and the block has several warp groups (8 warps: 2), each group computes
    all 64 rows of its own N / groups columns, an m64 instruction of N / groups (whole
    slabs of 64, up to 256), as Triton's 64-row tiles on 8 warps do; 0 where they do not
    (the groups split the rows instead: `row_blocks`), and where OXIDE_TILE_COLUMN_GROUPS=0
    keeps such products on mma.sync (codegen/switches.py)."""
    return _column_split(m, n, num_warps) if column_groups_enabled() else 0


def _column_split(m: int, n: int, num_warps: int) -> int:
    """`column_groups` as the shapes have it, whatever OXIDE_TILE_COLUMN_GROUPS says."""
    groups = 2  # (8 warps: a block of more warp groups is not built)
    if num_warps != 4 * groups or m != 64 or n % (groups * WGMMA_SLAB):
        return 0
    return groups if n // groups <= 256 else 0


def b_is_transposed(op: Operation) -> bool:
    """Whether a `tile.mma`'s B is `x.permute((1, 0))` used only there: the layout pass
    folds it into the product (`b_transposed`, tile/layouts.py), so B stays K-major."""
    return _transpose_used_once(op.operands[1])


def a_is_transposed(op: Operation) -> bool:
    """Whether a `tile.mma`'s A is `x.permute((1, 0))` of 16-bit floats used only there:
    on wgmma the layout pass folds it into the product (`a_transposed`, tile/layouts.py),
    and the instruction reads the (K, M) tile x as an MN-major A (its transpose bit), as
    `dW = dY.permute((1, 0)) @ X` and `C^T = W^T X^T` need. 8-bit A is read K-major
    only, so its transpose stays a permute (staged transposed)."""
    a = op.operands[0]
    return _transpose_used_once(a) and a.type.dtype.itemsize == 2  # type: ignore[attr-defined]


def _transpose_used_once(v: SSAValue) -> bool:
    owner = v.owner
    return (isinstance(owner, Operation) and kind_of(owner) == "permute"
            and owner.param("axes") == (1, 0) and v.has_one_use())  # type: ignore[attr-defined]


def engine_for(a: TileType, shape: tuple[int, ...], num_warps: int, tensor_cores: bool,
               wgmma: bool = False, b_k_major: bool = False) -> str:
    """The engine of a product of `a` (M, K) into an (M, N) `shape`."""
    k = a.dims[1]
    if not (tensor_cores and k >= MMA_K and mma_accumulator(shape, num_warps)):
        return "fma"
    fits = wgmma and supports(shape[0], shape[1], k, num_warps, a.dtype, b_k_major)
    if a.dtype.name in HALVES:
        return "wgmma" if fits else "mma.sync"
    return "wgmma" if a.dtype.is_fp8 and fits else "fma"


def swapped_fits(a: TileType, shape: tuple[int, ...], num_warps: int,
                 a_mn_major: bool) -> bool:
    """Whether wgmma takes an (M, K) @ (K, N) product of few rows computed transposed,
    `(b^T a^T)^T`: N as the instruction's M (16 * num_warps, or twice that: two
    instructions a warp group, `row_blocks`) and the M rows (8, 16 or 32) as its narrow
    N, 16-bit operands. B's tile becomes an A read MN-major (or K-major,
    where it is a folded `w.permute((1, 0))`), A's a B read K-major (MN-major where A is
    a folded transpose itself: `a_mn_major`, which needs 16 or 32 rows)."""
    m, n = shape
    return (a.dtype.name in HALVES and m in NARROW_N
            and supports(n, m, a.dims[1], num_warps, a.dtype, b_k_major=not a_mn_major))


def choose_engines(tile_ops: Iterable[Operation], num_warps: int, tensor_cores: bool,
                   wgmma: bool = False) -> None:
    """Set `engine` on every `tile.mma` of the kernel (see the module docstring), and
    `swapped` on a wgmma product of few rows computed transposed (`swapped_fits`). Such a
    product, one of two m64 instructions a warp group (`row_blocks`), and one whose warp
    groups split the columns (`column_groups`), keeps wgmma only where every product of
    its result's shape does so too: the layout pass gives the results of a shape one
    accumulator layout, and theirs is wgmma's own (the transpose's, rows interleaved by
    block, or warps split over columns: `layout.wgmma_accumulator`)."""
    products = [op for op in tile_ops if kind_of(op) == "mma"]
    # the products whose accumulator layout is wgmma's alone (computed transposed, two
    # m64 instructions a warp group, or columns split), with the engine each has without
    # wgmma
    special: dict[Operation, str] = {}
    for op in products:
        a, result = op.operands[0].type, op.results[0].type
        assert isinstance(a, TileType) and isinstance(result, TileType)
        shape = tuple(result.dims)
        engine = engine_for(a, shape, num_warps, tensor_cores, wgmma, b_is_transposed(op))
        if engine == "wgmma" and (row_blocks(shape[0], num_warps) > 1
                                  or column_groups(*shape, num_warps)):
            special[op] = engine_for(a, shape, num_warps, tensor_cores)
        elif (engine != "wgmma" and tensor_cores and wgmma
                and swapped_fits(a, shape, num_warps, a_is_transposed(op))):
            special[op], engine = engine, "wgmma"
            op.set_param("swapped", True)  # type: ignore[attr-defined]
        op.set_param("engine", engine)  # type: ignore[attr-defined]
    for op, without in special.items():
        shape = op.results[0].type.dims  # type: ignore[attr-defined]
        if any(p not in special for p in products if p.results[0].type.dims == shape):  # type: ignore[attr-defined]
            op.set_param("engine", without)  # type: ignore[attr-defined]
            op.set_param("swapped", False)  # type: ignore[attr-defined]


def swapped(op: Operation) -> bool:
    """Whether `choose_engines` computes a product transposed (`swapped_fits`)."""
    return bool(op.param("swapped", False))  # type: ignore[attr-defined]


def engine_of(op: Operation) -> str:
    """The engine `choose_engines` set on a `tile.mma` op."""
    engine = op.param("engine")  # type: ignore[attr-defined]
    assert engine in ENGINES, f"tile.mma without an engine: {op}"
    return engine  # type: ignore[no-any-return]


def _takes_wgmma(a: TileType, shape: tuple[int, int], num_warps: int, b_k_major: bool,
                 a_mn_major: bool) -> bool:
    """Whether wgmma takes the product on `num_warps` warps, as written or computed
    transposed."""
    return (supports(shape[0], shape[1], a.dims[1], num_warps, a.dtype, b_k_major)
            or swapped_fits(a, shape, num_warps, a_mn_major))


def warn_off_wgmma(tile_ops: Iterable[Operation], spans: dict[Operation, Any],
                   num_warps: int) -> None:
    """A PerformanceWarning at each 16-bit product that `choose_engines` kept on mma.sync
    on an sm_90 target, saying why and what takes wgmma: mma.sync runs such a product at a
    quarter to a third of wgmma's speed (H100, 2026-12-07: a 64 x 128 x 64 tile on 8 warps,
    on mma.sync before `column_groups`, 169 TFLOPS at 4096^3, on 4 warps' wgmma 478), and
    nothing else tells the user."""
    for op in tile_ops:
        if kind_of(op) != "mma" or engine_of(op) != "mma.sync":
            continue
        span = spans.get(op)
        a, result = op.operands[0].type, op.results[0].type
        assert isinstance(a, TileType) and isinstance(result, TileType)
        if span is None or a.dtype.name not in HALVES or len(a.dims) != 2:
            continue
        (m, k), n = a.dims, result.dims[1]
        groups = num_warps // 4
        majors = (b_is_transposed(op), a_is_transposed(op))
        warps = [w for w in (4, 8, 16) if _takes_wgmma(a, (m, n), w, *majors)]
        other_warps = f"`num_warps={warps[0]}` for this tile, or " if warps else ""
        if _takes_wgmma(a, (m, n), num_warps, *majors):
            why = ("another product of the same result shape cannot take it, and the "
                   "products of one shape share one accumulator layout")
            hint = "give that product a shape wgmma takes too"
        elif num_warps % 4:
            why = f"wgmma runs on whole warp groups of 4 warps, and the block has {num_warps}"
            hint = other_warps + "a multiple of 4 warps"
        elif _column_split(m, n, num_warps) and not column_groups(m, n, num_warps):
            why = ("OXIDE_TILE_COLUMN_GROUPS=0 keeps 64-row tiles on 8 warps off wgmma "
                   "(their warp groups would split the columns)")
            hint = other_warps + "OXIDE_TILE_COLUMN_GROUPS unset"
        elif m == 64 and num_warps == 8 and not column_groups(m, n, num_warps):
            why = (f"the block's {groups} warp groups ({num_warps} warps) split a 64-row "
                   f"tile's N columns, N / {groups} a multiple of 64 up to 256 each, and "
                   f"this product has N = {n}")
            hint = other_warps + f"N a multiple of {64 * groups} up to {256 * groups}"
        elif not column_groups(m, n, num_warps) and (m % (16 * num_warps)
                                                     or not row_blocks(m, num_warps)):
            why = (f"wgmma gives each warp group 64 or 128 of the tile's rows, and {m} rows "
                   f"do not make that for the block's {groups} warp group"
                   f"{'s' if groups != 1 else ''} ({num_warps} warps)")
            hint = other_warps + (f"a tile of {16 * num_warps} or {32 * num_warps} rows on "
                                  f"{num_warps} warps")
            if m in NARROW_N:  # few rows: computed transposed where N makes the rows
                hint += (f" (a tile of {m} rows takes wgmma computed transposed where N is "
                         f"{16 * num_warps} or {32 * num_warps})")
        else:
            why = (f"wgmma takes N a multiple of 64 up to 256 (or 16 or 32; 8 where B is "
                   f"`w.permute((1, 0))`) and K of {wgmma_k(a.dtype)}, "
                   f"{2 * wgmma_k(a.dtype)} or a multiple of {slab_elements(a.dtype)}, and "
                   f"this product has N = {n}, K = {k}")
            hint = "a tile shape wgmma takes (docs/language.md, `tile.mma`)"
        warn_at(f"this ({m}, {k}) @ ({k}, {n}) {a.dtype.name} product runs on mma.sync, "
                f"a quarter to a third of wgmma's speed on sm_90: {why}\n  help: {hint}",
                PerformanceWarning, span.file, span.line)
