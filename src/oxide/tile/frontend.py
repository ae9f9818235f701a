"""The tile frontend: a `@ox.tile.kernel` body (Python AST) into oxide SIMT IR.

This module holds the statements and expressions; mixed in: `tile/operators.py` the
operators, `tile/calls.py` the `tile.*` operations, `tile/elementwise.py` the math
functions, `tile/shape_calls.py` sub-tiles and batched products, `tile/philox.py`
random numbers, `tile/memory.py` loads and stores, `tile/control.py` `if`, `while`
and the boolean operators, and `tile/loops.py` `for` loops.

It evaluates the body as values (`tile/values.py`): tiles, arrays, and Python
constants that fold as Python computes them. Each tile operation becomes an op of the
tile dialect (`ir/tile_ops.py`), between the scalar SIMT ops of the kernel's control
flow; this module does the typing (shapes, broadcasting, dtypes), the safety rules and
the diagnostics. Then the passes of `tile/pipeline.py`: `tile/layouts.py` picks every
tile's layout, `tile/ordering.py` orders the block's accesses of each array, and
`tile/to_simt.py` lowers the tile ops into SIMT IR (`tile/lower.py`). What it assumes:
every statement runs in every thread of the block (tile code has no thread-dependent
control flow), so the barriers of conversions and reductions are reached by all.

Safety: `tile.bid(axis)` is a TileIndex witness. A DisjointSlice is stored (and read)
only at indices whose witnesses tell blocks apart, the same way in every access of the
array, with one tile shape per array (`tile/disjoint.py`); the grid axes they do not
cover must be 1 at launch (`runtime/witness_rules.py`'s grid rule), so no two blocks
touch one element. Within a block, `tile/ordering.py` orders the accesses.
"""

from __future__ import annotations

import ast
import builtins
import math as pymath
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from oxide import types as T
from oxide.codegen import persistent_grid
from oxide.codegen.abi import OperandMap
from oxide.codegen.switches import two_blocks_enabled
from oxide.codegen.warp_roles import PRODUCER_THREADS
from oxide.errors import (
    CompileError,
    KernelSyntaxError,
    KernelTypeError,
    PerformanceWarning,
    UnsupportedFeatureError,
)
from oxide.frontend.entry import KernelContext, LoweredKernel
from oxide.frontend.parallel_calls import SM90A_STATIC_SHARED_BYTES, STATIC_SHARED_BYTES
from oxide.frontend.scope import Scope
from oxide.frontend.source import Source
from oxide.ir import ops
from oxide.ir.types import array_ir_type, ir_type
from oxide.kernel_types import DeviceFunction
from oxide.lang.intrinsic import Intrinsic
from oxide.specialize import ConstValue
from oxide.tile import lang
from oxide.tile.atomic_calls import TileAtomicsMixin
from oxide.tile.builder import TileBuilder
from oxide.tile.calls import TileCallsMixin
from oxide.tile.control import TileControlMixin
from oxide.tile.disjoint import DisjointUses, TileDisjointMixin
from oxide.tile.early_return import fold_returns
from oxide.tile.elementwise import TileMathMixin
from oxide.tile.held_warnings import held
from oxide.tile.layout import VECTOR, Layout, blocked, vector_elements
from oxide.tile.loops import TileLoopsMixin
from oxide.tile.lower import TileEmitter
from oxide.tile.memory import TileMemoryMixin
from oxide.tile.op_builder import TileOps
from oxide.tile.operand_rings import ring_budget
from oxide.tile.operators import TileOperatorsMixin, is_product
from oxide.tile.persistent_schedule import PersistentScheduleMixin, persistable
from oxide.tile.philox import TileRandomMixin
from oxide.tile.pingpong import PingPongRefused
from oxide.tile.pipeline import (
    ProducerRefused,
    RingsTooDeep,
    StoresRefused,
    Target,
    TwoBlocksDoNotPay,
    run_passes,
)
from oxide.tile.row_staging import StagingRefused
from oxide.tile.shape_calls import TileShapesMixin
from oxide.tile.values import Method, ShapeOf, Static, TArray, Tile, describe, shape_text

# elements one thread may hold in one tile (registers: a larger tile spills, then fails)
MAX_SLOTS = 256


@dataclass
class TileLowered(LoweredKernel):
    """A lowered tile kernel: the grid axes its DisjointSlice stores tell blocks apart by
    (the others must be 1 at launch), or None when it stores no DisjointSlice."""

    grid_axes: frozenset[str] | None = None
    tile_ir: str | None = None  # the tile dialect before lowering (OXIDE_DUMP=tile)
    launch_rules: tuple[int, ...] = ()  # what its witnesses need of a launch (witness_rules)
    # the hidden tensor maps its TMA rings read, in parameter order (codegen/abi.py)
    operand_maps: tuple[OperandMap, ...] = ()
    # threads a launch adds to each block: a producer warp group's (tile/producer.py)
    producer_threads: int = 0
    # the kernel walks its logical grid, passed as hidden parameters after its own
    # (tile/persistent_schedule.py, codegen/persistent_grid.py)
    persistent_grid: bool = False
    # blocks an SM the kernel was compiled to leave room for (`.minnctapersm`): the
    # kernel's `occupancy`, or 2 where the compiler chose it (`_may_take_two_blocks`)
    occupancy: int | None = None


def is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def lower_tile_kernel(kernel: Any, sig: tuple[Any, ...], symbol: str,
                      keep_tile_ir: bool = False, verify: bool = False,
                      tensor_cores: bool = True, wgmma: bool = False,
                      tma: bool = True, cpu: bool = False) -> TileLowered:
    """Lower a tile kernel's body for one signature into oxide IR through the passes of
    tile/pipeline.py; with `keep_tile_ir`, keep the text of its tile-dialect form as the
    layout and ordering passes leave it; with `verify`, check what the layout pass guarantees. Without
    `tensor_cores` (the CPU target), every product is an FMA loop. Where a pipelined
    loop's operand rings do not fit shared memory at the kernel's `num_stages`
    (`RingsTooDeep`), it is lowered at the deepest `num_stages` whose rings fit, with a
    PerformanceWarning that says so (the results are the same at any depth). A kernel
    of one warp group with a pipelined product loop is compiled for two blocks an SM
    where that keeps its pipeline (`_may_take_two_blocks`)."""
    if wgmma and tma and _may_take_two_blocks(kernel):
        two = kernel.with_options(replace(kernel.tile_options, occupancy=2))
        try:
            return _lower_tile_kernel(two, sig, symbol, keep_tile_ir, verify, tensor_cores,
                                      wgmma, tma, cpu, two_blocks=True)
        except (RingsTooDeep, TwoBlocksDoNotPay):  # (RingsTooDeep: half an SM's shared
            pass  # memory holds too shallow a pipeline)
    asked = kernel.tile_options.num_stages
    while True:
        try:
            lowered = _lower_tile_kernel(kernel, sig, symbol, keep_tile_ir, verify,
                                         tensor_cores, wgmma, tma, cpu)
        except RingsTooDeep as deep:
            kernel = kernel.with_options(replace(kernel.tile_options, num_stages=deep.stages))
            continue
        if kernel.tile_options.num_stages != asked:
            _warn_stages(kernel, asked)
        return lowered


def _may_take_two_blocks(kernel: Any) -> bool:
    """Whether a kernel is worth a lowering for two blocks an SM (occupancy 2): one warp
    group (4 warps), a pipelined loop (`num_stages` >= 2), no `occupancy` of its own.

    Why. One consumer warp group leaves the tensor cores idle wherever it waits (for a
    product, a fill, its epilogue's stores); a producer warp group hides the fills but
    not the rest, and measured nothing on 4 warps (H100, 2026-12-07: 128 x 128 x 64,
    4096^3, 452 / 574 TFLOPS with it at 3 / 4 stages, 486 / 599 without). A second
    block on the SM fills those gaps, as Triton's 4-warp kernels get it (their rings
    leave room): the rings and the store's buffers are then kept within half the SM's
    shared memory (`sm90_block_shared_bytes`), and the kernel has no producer (H100,
    2026-12-07, 4096^3: 128 x 128 x 64 at 3 stages 610 TFLOPS against 454, Triton 673;
    128 x 64 x 64 at 4 stages 399 against 382, Triton 394). Where its rings at
    `num_stages` do not fit that (`RingsTooDeep`), or it has no TMA ring, it is compiled
    as before, as it is where a product reads an operand from registers or staged by the
    threads (`products_on_tma_rings`: attention's rings, which only a producer fills) or
    is one of few rows computed transposed (a decode step's, which lost 11-18% on two
    blocks: `TwoBlocksDoNotPay`). OXIDE_TILE_TWO_BLOCKS=0 turns it off
    (codegen/switches.py)."""
    options = kernel.tile_options
    return (two_blocks_enabled() and options.num_warps == 4 and options.occupancy is None
            and options.num_stages >= 2)


def _warn_stages(kernel: Any, asked: int) -> None:
    """The PerformanceWarning of a pipeline made shallower than `num_stages` asked, at the
    kernel's `def` line."""
    stages = kernel.tile_options.num_stages
    code = kernel.fn.__code__
    warnings.warn_explicit(
        f"`{kernel.__name__}`: num_stages={asked} needs operand rings larger than the "
        f"{ring_budget(kernel.tile_options.occupancy) // 1024} KB of shared memory they may "
        f"take{_at_occupancy(kernel.tile_options.occupancy)}; compiled with "
        f"num_stages={stages}, the deepest whose rings fit\n"
        f"  help: write `num_stages={stages}` (or smaller tiles) to keep this pipeline "
        f"without the warning", PerformanceWarning, code.co_filename, code.co_firstlineno)


def _at_occupancy(occupancy: int | None) -> str:
    return f" at occupancy={occupancy}" if occupancy and occupancy > 1 else ""


def _lower_tile_kernel(kernel: Any, sig: tuple[Any, ...], symbol: str, keep_tile_ir: bool,
                       verify: bool, tensor_cores: bool, wgmma: bool, tma: bool, cpu: bool,
                       two_blocks: bool = False) -> TileLowered:
    """`lower_tile_kernel` at the kernel's own `num_stages`; `two_blocks`: a trial at the
    occupancy of two blocks the compiler chose (`TwoBlocksDoNotPay` where it does not
    pay)."""
    tried: list[TileLowering] = []

    # rings a producer warp group alone fills are worth a try where a loop is pipelined
    producer_rings = wgmma and tma and kernel.tile_options.num_stages >= 2

    def lower(rings: bool, persistent: bool = False, producer: bool = producer_rings
              ) -> tuple[TileBuilder, TileLowering, KernelContext, list[str] | None]:
        # turns where a loop can take them (tile/pingpong.py), and rows staged in shared
        # memory (tile/row_staging.py): each dropped where it is refused
        pingpong, staging, whole_block_stores = True, True, True
        while True:
            try:
                with held():
                    b, low, ctx = evaluate_body(kernel, sig, symbol, persistent)
                    if persistent and low.stores.persistent:
                        raise _NotWalked  # it walks its tiles itself (`tile.tiles`)
                    low.em.cpu = cpu
                    tried.append(low)
                    dump: list[str] | None = [] if keep_tile_ir else None
                    run_passes(b, low.em,
                               Target(low.num_warps, low.vector, tensor_cores, wgmma,
                                      kernel.tile_options.occupancy, rings, tma, producer,
                                      pingpong, staging, whole_block_stores, two_blocks),
                               verify, dump, need_producer=persistent)
            except PingPongRefused:
                assert pingpong, "a lowering without turns refuses none"
                tried.pop()
                pingpong = False
                continue
            except StagingRefused:
                assert staging, "a lowering without staging refuses none"
                tried.pop()
                staging = False
                continue
            except StoresRefused:
                assert whole_block_stores, "stores within the rings' budget refuse none"
                tried.pop()
                whole_block_stores = False
                continue
            return b, low, ctx, dump

    walked = None
    if _may_walk_the_grid(kernel, wgmma, tma):
        walked = _lowered_or_none(lambda: lower(True, persistent=True))
    if (walked is not None and walked[1].em.consumer_threads is not None
            and persistable(walked[0].func, walked[1].own_registers)):
        b, low, ctx, dump = walked
    else:
        b, low, ctx, dump = _first_lowering(lower, tried, producer_rings)
    tile_ir = dump[0] if dump else None
    ctx.uses_barriers = low.em.uses_barriers
    func = b.finish()
    covered = low.stores.grid_axes()
    axes = None if covered is None else frozenset("xyz"[a] for a in covered)
    return TileLowered(func, b.sites, ctx, b, axes, tile_ir, tuple(sorted(low.stores.launch_rules)),
                       tuple(low.em.operand_maps),
                       PRODUCER_THREADS if low.em.consumer_threads is not None else 0,
                       low.grid_params is not None, kernel.tile_options.occupancy)


def _first_lowering(lower: Callable[..., Any], tried: list[TileLowering],
                    producer_rings: bool) -> Any:
    """The kernel lowered one block per logical block: with the rings only a producer
    fills where they were worth a try, else (`ProducerRefused`, or their shared memory
    not fitting) with the rings a kernel without a producer has, else with no rings: the
    operand rings' buffers and the kernel's other shared memory may not fit together
    where the threads' staging did, and the kernel compiles as it did before them (if
    that fails too, its own error says why)."""
    attempts = [(True, True)] if producer_rings else []
    attempts += [(True, False), (False, False)]
    for n, (rings, producer) in enumerate(attempts):
        tried.clear()
        try:
            return lower(rings, producer=producer)
        except ProducerRefused:
            continue
        except UnsupportedFeatureError:
            last = n == len(attempts) - 1
            if last or not (tried and tried[0].em.rings_placed):
                raise
    raise AssertionError("the last lowering has no rings: it raises or returns")


class _NotWalked(Exception):
    """The kernel walks its own tiles (`tile.tiles`): the grid is not walked for it."""


def _may_walk_the_grid(kernel: Any, wgmma: bool, tma: bool) -> bool:
    """Whether the kernel may walk its logical grid (tile/persistent_schedule.py): a
    kernel that can have a producer warp group (a pipelined loop on TMA, no `occupancy`)
    with two consumer warp groups (8 warps). With one (4 warps), walking the grid was
    measured slower (H200, 2026-12-04: a 64 x 256 x 64 GEMM 356 against 480 TFLOPS one
    block per tile; 8 warps gained 2-11% at 128 x 256 x 64). The walked lowering itself
    then decides: it is given up (`_lowered_or_none`) where the kernel walks its tiles
    itself (`_NotWalked`, after the frontend) or its products get no producer
    (`ProducerRefused`, at the pass that plans one), and not taken where the body reads
    the hardware grid (`persistable`)."""
    options = kernel.tile_options
    return (wgmma and tma and persistent_grid.enabled() and options.num_stages >= 2
            and options.num_warps == 8 and options.occupancy is None)


def _lowered_or_none(lower: Callable[[], Any]) -> Any:
    """`lower()`, or None where it fails (the kernel is then lowered as written)."""
    try:
        return lower()
    except (CompileError, ProducerRefused, _NotWalked):
        return None


def evaluate_body(kernel: Any, sig: tuple[Any, ...], symbol: str, persistent: bool = False
                  ) -> tuple[TileBuilder, TileLowering, KernelContext]:
    """The body evaluated for one signature: its tile ops in the builder, before the
    passes, and what its stores used (`TileLowering.stores`); with `persistent`, walking
    the logical grid (tile/persistent_schedule.py)."""
    _refuse_other_parameters(kernel, sig)
    runtime = [(p, s) for p, s in zip(kernel.params, sig, strict=True)
               if not isinstance(s, ConstValue)]
    arg_types = [array_ir_type(s) if isinstance(s, T.ArrayType) else ir_type(s)
                 for _, s in runtime]
    b = TileBuilder(symbol, arg_types)
    ctx = KernelContext({p.name for p in kernel.params}, kernel.options.checks)
    low = TileLowering(b, kernel.source, kernel.scope, ctx, kernel.tile_options.num_warps,
                       kernel.tile_options.num_stages)
    low.typevars = _bound_typevars(kernel.params, sig)
    low.vector = vector_elements([s.dtype.itemsize for s in sig if isinstance(s, T.ArrayType)])
    args = iter(b.args)
    for p, s in zip(kernel.params, sig, strict=True):
        if isinstance(s, ConstValue):
            v = s.value.item() if hasattr(s.value, "item") else s.value
            low.env[p.name] = Static(v)
        elif isinstance(s, T.ArrayType):
            low.env[p.name] = TArray(next(args), s, p.name)
        else:
            low.env[p.name] = low.scalar_tile(next(args), s)
    low.lower_body(kernel.source.tree.body, persistent)
    return b, low, ctx


def _refuse_other_parameters(kernel: Any, sig: tuple[Any, ...]) -> None:
    """Tile kernels take arrays, scalars and Const values; any other parameter type
    (`ox.TensorMap`, which SIMT kernels hand to `ox.tma.*`) is an error at its
    annotation, not an internal error where the body first meets it."""
    for p, s in zip(kernel.params, sig, strict=True):
        if isinstance(s, (ConstValue, T.ArrayType, T.DType)):
            continue
        tree = kernel.source.tree
        arg = next((a for a in (*tree.args.posonlyargs, *tree.args.args) if a.arg == p.name),
                   tree)
        where = getattr(arg, "annotation", None) or arg
        hint = ("tile loads and stores choose their own memory instructions: pass the array "
                "itself (a Slice), or use ox.tma.* in a SIMT kernel"
                if isinstance(s, T.TensorMapType) else
                "pass arrays (Slice, DisjointSlice, RawSlice), scalars or Const values")
        raise UnsupportedFeatureError(f"tile kernels do not take `{p.name}: {s!r}` parameters",
                                      kernel.source.span(where), hint=hint)


def _bound_typevars(params: Any, sig: tuple[Any, ...]) -> dict[T.TypeVar, T.DType]:
    """The dtype each ox.TypeVar of the parameters stands for in this signature (the
    launch bound them consistently: specialize.py)."""
    bound: dict[T.TypeVar, T.DType] = {}
    for p, s in zip(params, sig, strict=True):
        ann = p.annotation
        if isinstance(ann, T.ArrayType) and isinstance(ann.dtype, T.TypeVar):
            bound[ann.dtype] = s.dtype
        elif isinstance(ann, T.TypeVar) and isinstance(s, T.DType):
            bound[ann] = s
    return bound


class TileLowering(TileOperatorsMixin, TileCallsMixin, TileMathMixin, TileControlMixin,
                   TileShapesMixin, TileRandomMixin, TileAtomicsMixin, TileMemoryMixin,
                   TileDisjointMixin, TileLoopsMixin, PersistentScheduleMixin):
    """Evaluates one tile kernel body, emitting IR for its tile operations."""

    def __init__(self, b: TileBuilder, source: Source, scope: Scope, ctx: KernelContext,
                 num_warps: int, num_stages: int = 1) -> None:
        self.b = b
        self.num_stages = num_stages  # loop iterations of tile loads in flight (stmt_For)
        # the pipelined load statement being evaluated (tile/loops.py), and how many
        # there were: the `pipe` of the loads it makes
        self.load_pipe: tuple[int, int, bool, tuple[int, ...]] | None = None
        self.load_live: Tile | None = None  # whether a load issued ahead's iteration runs
        # the `order=` of the load `_with_index` just issued ahead (applied at its use)
        self.piped_order: tuple[int, ...] | None = None
        # the kernel's own loops around the statement being lowered (`for`, `while`; not
        # the persistent schedule's walk of the grid): a load in none is `lone`
        self.loop_depth = 0
        self.pipes = 0
        # the pipelined loops being lowered, outermost first (each by its first pipe)
        self.pipe_loops: tuple[int, ...] = ()
        self.src = source
        self.scope = scope
        self.ctx = ctx
        self.num_warps = num_warps
        self.env: dict[str, Any] = {}
        self.typevars: dict[T.TypeVar, T.DType] = {}  # what `T` names in the body
        self.vector = VECTOR  # contiguous elements per thread of the default layouts
        self.em = TileEmitter(b, num_warps, self._reserve_shared)  # used by the lowering
        self.t = TileOps(b, lambda: self.src.span(self._node))
        self.stores = DisjointUses()
        self.unsafe_depth = 0
        self._node: ast.AST = source.tree
        self.call_stack: tuple[Any, ...] = ()  # the @ox.tile.funcs being inlined

    # -- diagnostics ----------------------------------------------------------------

    def error(self, cls: type[CompileError], node: ast.AST, message: str, label: str = "",
              hint: str = "") -> CompileError:
        return cls(message, self.src.span(node), label, hint)

    def text(self, node: ast.AST) -> str:
        return self.src.segment(node) or ast.dump(node)

    def _reserve_shared(self, nbytes: int) -> None:
        """Count `nbytes` of shared memory against the block's limit: 48 KiB of static
        shared memory on every GPU, or 227 KiB where the kernel is compiled for sm_90a
        (the compiler does that for an sm_90 target when the kernel needs more than 48
        KiB, and refuses other targets then: `compiler._compile`)."""
        self.ctx.shared_bytes += nbytes
        total = self.ctx.shared_bytes
        if total <= STATIC_SHARED_BYTES:
            return
        message = (f"this tile kernel needs {total} bytes of shared memory for its layout "
                   f"conversions, reductions and tensor-core operands; at most "
                   f"{STATIC_SHARED_BYTES} are available")
        hint = ("use smaller tiles, or more warps (`num_warps=`), so that reductions need "
                "fewer cross-warp cells")
        span = self.b.span_now  # the statement of the tile op being lowered
        if total > SM90A_STATIC_SHARED_BYTES:
            raise UnsupportedFeatureError(message + f" ({SM90A_STATIC_SHARED_BYTES} on sm_90)",
                                          span, "", hint)
        if self.ctx.big_shared is None:
            self.ctx.big_shared = UnsupportedFeatureError(
                message + f" ({SM90A_STATIC_SHARED_BYTES} on sm_90, where the kernel is "
                "compiled for sm_90a)", span, "", hint)

    def blocked(self, shape: tuple[int, ...]) -> Layout:
        """The kernel's default layout of a tile of `shape` (`layout.blocked` with the
        kernel's vector run)."""
        return blocked(shape, self.num_warps, self.vector)

    # -- statements -----------------------------------------------------------------

    def lower_body(self, body: list[ast.stmt], persistent: bool = False) -> None:
        """The kernel's body; a `return` may end a branch early (tile/early_return.py).
        With `persistent`, inside the loop over the logical grid's blocks
        (tile/persistent_schedule.py)."""
        folded = fold_returns(body, self.error)
        if persistent:
            self.lower_persistent(folded)
            return
        for stmt in folded:
            self.lower_stmt(stmt)

    def lower_stmt(self, node: ast.stmt) -> None:
        self._node = node
        outer = self.b.where
        self.b.where = (self.src.span(node),)
        method = getattr(self, f"stmt_{type(node).__name__}", None)
        if method is None:
            hint = ("tile kernels support assignments, calls (tile.store, atomics), `for` "
                    "over `range` or `tile.tiles`, `while`, `if` on scalars and compile-time "
                    "values, and `with ox.unsafe():`")
            raise self.error(UnsupportedFeatureError, node,
                             f"`{type(node).__name__}` statements are not supported in tile "
                             "kernels", hint=hint)
        method(node)
        self.b.where = outer

    def stmt_Pass(self, node: ast.Pass) -> None:
        pass

    def stmt_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return
        value = self.expr(node.value)
        if isinstance(value, Static) and isinstance(value.obj, lang.TileFunction):
            text = self.text(node.value)
            raise self.error(KernelSyntaxError, node.value, f"`{text}` is not called; write "
                             f"`{text}(...)`")

    def stmt_Assign(self, node: ast.Assign) -> None:
        value = self.expr(node.value)
        for target in node.targets:
            self.assign(target, value, node.value)

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        raise self.error(UnsupportedFeatureError, node, "annotated assignments are not "
                         "supported in tile kernels", hint="tiles carry their dtype: write "
                         "`x = ...` (and `.astype(dtype)` to convert)")

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.error(KernelSyntaxError, node.target,
                             "tiles are immutable values: only names can be updated",
                             hint="store into arrays with `tile.store(arr, index, t)`")
        current = self.load_name(node.target.id, node.target)
        if isinstance(node.op, ast.Add) and is_product(node.value):
            value = self.add_product(node, node.value, None, True, current)
        else:
            value = self.binop(node.op, current, self.expr(node.value), node)
        self.assign(node.target, value, node)

    def assign(self, target: ast.expr, value: Any, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            if isinstance(value, TArray) and target.id != value.name and not value.fixed:
                raise self.error(UnsupportedFeatureError, target,
                                 "arrays cannot be renamed in tile kernels",
                                 hint=f"use `{value.name}` itself")
            self.env[target.id] = value
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            items = value.obj if isinstance(value, Static) and isinstance(value.obj, tuple) \
                else value
            if not isinstance(items, tuple):
                raise self.error(KernelTypeError, node, f"cannot unpack {describe(value)}")
            if len(items) != len(target.elts):
                raise self.error(KernelTypeError, node,
                                 f"cannot unpack {len(items)} values into "
                                 f"{len(target.elts)} names")
            for t, v in zip(target.elts, items, strict=True):
                self.assign(t, v if not isinstance(value, Static) else Static(v), node)
            return
        if isinstance(target, ast.Subscript):
            raise self.error(KernelSyntaxError, target,
                             "tile kernels do not assign to elements",
                             hint="write tiles with `tile.store(arr, index, t)`; tiles "
                                  "themselves are immutable values")
        raise self.error(KernelSyntaxError, target, "cannot assign to this expression")

    def stmt_With(self, node: ast.With) -> None:
        if len(node.items) != 1 or node.items[0].optional_vars is not None:
            raise self.error(UnsupportedFeatureError, node,
                             "tile kernels support only `with ox.unsafe():`")
        from oxide.lang import unsafe

        item = node.items[0].context_expr
        ctx = self.expr(item.func) if isinstance(item, ast.Call) and not item.args else None
        if not (isinstance(ctx, Static) and ctx.obj is unsafe):
            raise self.error(UnsupportedFeatureError, node.items[0].context_expr,
                             "tile kernels support only `with ox.unsafe():`")
        self.unsafe_depth += 1
        try:
            for stmt in node.body:
                self.lower_stmt(stmt)
        finally:
            self.unsafe_depth -= 1

    # -- expressions ----------------------------------------------------------------

    def expr(self, node: ast.expr) -> Any:
        method = getattr(self, f"expr_{type(node).__name__}", None)
        if method is None:
            raise self.error(UnsupportedFeatureError, node,
                             f"`{type(node).__name__}` expressions are not supported in tile "
                             "kernels")
        return method(node)

    def expr_Constant(self, node: ast.Constant) -> Any:
        if isinstance(node.value, (bool, int, float, str)) or node.value is None:
            # strings only ever reach Python calls that fold (`float("inf")`)
            return Static(node.value)
        raise self.error(KernelTypeError, node, f"tile kernels have no {type(node.value).__name__}"
                         " values")

    def expr_Name(self, node: ast.Name) -> Any:
        return self.load_name(node.id, node)

    def load_name(self, name: str, node: ast.AST) -> Any:
        if name in self.env:
            return self.env[name]
        found, obj = self.scope.lookup(name)
        if found and isinstance(obj, T.TypeVar):
            if obj not in self.typevars:
                raise self.error(KernelTypeError, node,
                                 f"type variable `{name}` is not bound by any parameter",
                                 hint=f"annotate a parameter with `{name}` or "
                                      f"`Slice[{name}]`")
            return Static(self.typevars[obj])  # `x.astype(T)`: the dtype T stands for
        if found:
            return Static(obj)
        if hasattr(builtins, name):
            return Static(getattr(builtins, name))
        raise self.error(KernelSyntaxError, node, f"`{name}` is not defined")

    def expr_Tuple(self, node: ast.Tuple) -> Any:
        items = tuple(self.expr(e) for e in node.elts)
        if all(isinstance(i, Static) for i in items):
            return Static(tuple(i.obj for i in items))
        return items

    expr_List = expr_Tuple

    def expr_Attribute(self, node: ast.Attribute) -> Any:
        base = self.expr(node.value)
        attr = node.attr
        if isinstance(base, Static):
            try:
                return Static(getattr(base.obj, attr))
            except AttributeError:
                raise self.error(KernelSyntaxError, node,
                                 f"`{self.text(node.value)}` has no attribute `{attr}`") from None
        if isinstance(base, Tile):
            if attr == "shape":
                return Static(base.shape)
            if attr == "dtype":
                return Static(base.dtype)
            if attr == "ndim":
                return Static(base.ndim)
            if attr in ("astype", "reshape", "permute", "extract"):
                return Method(base, attr)
        if isinstance(base, TArray):
            if attr == "shape":
                return ShapeOf(base)
            if attr == "dtype":
                return Static(base.dtype)
            if attr == "ndim":
                return Static(base.type.rank)
        raise self.error(KernelSyntaxError, node,
                         f"{describe(base)} has no attribute `{attr}` in a tile kernel")

    def expr_Subscript(self, node: ast.Subscript) -> Any:
        base = self.expr(node.value)
        if isinstance(base, ShapeOf):
            d = self.expr(node.slice)
            if not (isinstance(d, Static) and isinstance(d.obj, int)
                    and -base.array.type.rank <= d.obj < base.array.type.rank):
                rank = base.array.type.rank
                raise self.error(KernelTypeError, node.slice,
                                 f"`{base.array.name}.shape` is indexed with a constant from 0 "
                                 f"to {rank - 1}" if rank else
                                 f"`{base.array.name}` is a 0-d array: its `shape` is `()`")
            return self.extent(base.array, d.obj % base.array.type.rank)
        if isinstance(base, Static) and isinstance(base.obj, tuple):
            d = self.expr(node.slice)
            if isinstance(d, Static) and isinstance(d.obj, int) and -len(base.obj) <= d.obj < len(base.obj):
                return Static(base.obj[d.obj])
            raise self.error(KernelTypeError, node.slice, "tuples are indexed with constants "
                             "in range")
        if isinstance(base, tuple):
            d = self.expr(node.slice)
            if isinstance(d, Static) and isinstance(d.obj, int) and -len(base) <= d.obj < len(base):
                return base[d.obj]
            raise self.error(KernelTypeError, node.slice, "tuples are indexed with constants "
                             "in range")
        if isinstance(base, Tile):
            return self.tile_subscript(base, node)
        if isinstance(base, TArray):
            return self.array_view(base, node)
        raise self.error(KernelTypeError, node, f"cannot index {describe(base)}")

    def array_view(self, arr: TArray, node: ast.Subscript) -> TArray:
        """`arr[i]`, `arr[i, j]`: the view of `arr` at leading integer indices, an array
        of the remaining dimensions (values.TArray); its tiles are read and written with
        tile.load and tile.store as any array's."""
        v = self.expr(node.slice)
        items = list(v.obj) if isinstance(v, Static) and isinstance(v.obj, tuple) else (
            list(v) if isinstance(v, tuple) else [v])
        items = [i if isinstance(i, (Tile, Static, TArray, ShapeOf)) else Static(i)
                 for i in items]
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        nodes = list(elts) if len(elts) == len(items) else [node.slice] * len(items)
        if len(items) > arr.type.rank:
            raise self.error(KernelTypeError, node,
                             f"`{arr.name}` has rank {arr.type.rank}: `{arr.name}[...]` takes "
                             f"at most {arr.type.rank} index{'es' if arr.type.rank != 1 else ''}"
                             f", not {len(items)}",
                             hint=f"`{arr.name}[i]` is the array at leading index i; with every "
                                  "index given it is the 0-d array of one element, read with "
                                  "`tile.load(view, (), ())`")
        for item, at in zip(items, nodes, strict=True):
            constant = (isinstance(item, Static) and isinstance(item.obj, int)
                        and not isinstance(item.obj, bool))
            if not (constant or (isinstance(item, Tile) and item.ndim == 0
                                 and item.dtype.is_int)):
                raise self.error(KernelTypeError, at, f"`{arr.name}[...]` takes integer "
                                 f"scalars (a view at leading indices), not {describe(item)}",
                                 hint="slices are not views here: load the tile you need "
                                      "with `tile.load`")
            if constant and item.obj < 0:
                raise self.error(KernelTypeError, at, f"`{arr.name}[{item.obj}]`: negative "
                                 "indices do not wrap around in kernels",
                                 hint=f"write the index from the start: "
                                      f"`{arr.name}[{arr.name}.shape[0] - {-item.obj}]`")
        view_type = replace(arr.type, rank=arr.type.rank - len(items))
        # the items as written (a TileIndex keeps its witness for the DisjointSlice rules)
        return TArray(arr.ssa, view_type, arr.name, (*arr.fixed, *items),
                      (*arr.fixed_nodes, *nodes))

    def tile_subscript(self, t: Tile, node: ast.Subscript) -> Tile:
        """`x[:, None]`, `x[None, :]`, `x[None]`: new dimensions of extent 1."""
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        shape, axes = t.shape, []
        d = 0
        for item in items:
            if isinstance(item, ast.Constant) and item.value is None:
                shape = (*shape[:d], 1, *shape[d:])
                axes.append(d)
                d += 1
            elif isinstance(item, ast.Slice) and item.lower is None and item.upper is None \
                    and item.step is None:
                d += 1
            elif isinstance(item, ast.Constant) and item.value is Ellipsis:
                raise self.error(UnsupportedFeatureError, item, "`...` in tile indexing is "
                                 "not supported", hint="write the `:` of each dimension")
            else:
                raise self.error(UnsupportedFeatureError, item,
                                 "tiles are indexed only with `:` and `None` (new axes)",
                                 hint="elements of a tile are not addressable one by one; "
                                      "use reductions, `tile.where`, or store the tile")
        kept = d - (len(shape) - t.ndim)
        if kept > t.ndim:
            raise self.error(KernelTypeError, node,
                             f"too many `:` for {t.describe()}")
        if not axes:
            return Tile(t.dtype, t.shape, t.ssa)
        return self.t.expand(t, tuple(axes), shape)

    def expr_Call(self, node: ast.Call) -> Any:
        fn = self.expr(node.func)
        if isinstance(fn, Method):
            return self.call_method(fn, node)
        if not isinstance(fn, Static):
            raise self.error(KernelTypeError, node.func, f"{describe(fn)} is not callable")
        obj = fn.obj
        if isinstance(obj, lang.TileFunction):
            name = obj.__name__
            if name in lang.NOT_BUILT:
                raise self.error(UnsupportedFeatureError, node,
                                 f"`tile.{name}` is not built yet",
                                 hint="this first slice of the Tile model has loads, stores, "
                                      "elementwise math, broadcasting and sum/max/min")
            return self.call_tile(name, node)
        if isinstance(obj, T.DType):
            (arg,) = self.positional(node, 1, f"{obj.name}(x)")
            if isinstance(arg, Static):
                return self.t.full((), self.convert_constant(arg, obj, node), obj)
            return self.cast(self.as_tile(arg, node.args[0]), obj)
        if obj in (builtins.min, builtins.max):
            return self.builtin_min_max(obj, node)
        if obj is builtins.abs:
            (x,) = self.positional(node, 1, "abs(x)")
            return self.tile_abs(x, node.args[0])
        if isinstance(obj, Intrinsic) and obj.name.startswith("math."):
            return self.call_ox_math(obj.name[5:], node, "ox.math")
        if getattr(obj, "__self__", None) is pymath:
            return self.call_ox_math(obj.__name__, node, "math")
        if obj in (builtins.float, builtins.int, builtins.bool) and len(node.args) == 1 \
                and not node.keywords:
            arg = self.expr(node.args[0])
            if isinstance(arg, Static):
                return self.fold(obj, (arg.obj,), node)
            raise self.error(KernelTypeError, node,
                             f"`{obj.__name__}(...)` converts compile-time values only",
                             hint="convert tiles with `.astype(dtype)`")
        if obj is builtins.len:
            raise self.error(UnsupportedFeatureError, node, "`len` is not supported in tile "
                             "kernels", hint="use `arr.shape[0]`")
        from oxide.tile.func_def import TileFunctionDef

        if isinstance(obj, TileFunctionDef):
            return self.call_tile_func(obj, node)
        name = getattr(obj, "__qualname__", getattr(obj, "__name__", repr(obj)))
        hint = ""
        if isinstance(obj, DeviceFunction):
            hint = "@ox.func is for SIMT kernels; write tile helpers with @ox.tile.func"
        raise self.error(UnsupportedFeatureError, node,
                         f"`{self.text(node.func)}` ({name}) cannot be called in a tile kernel",
                         hint=hint or "tile kernels call the `tile.*` operations")

    def call_tile_func(self, f: Any, node: ast.Call) -> Any:
        """Inline an @ox.tile.func: its parameters bound to the argument values, its body
        lowered into this kernel, its final `return` the call's value."""
        if f in self.call_stack:
            raise self.error(UnsupportedFeatureError, node,
                             f"`{f.__name__}` calls itself; tile helpers cannot recurse")
        tree = f.source.tree
        # the helper's own lowering: its diagnostics point into its source
        sub = TileLowering(self.b, f.source, f.scope, self.ctx, self.num_warps)
        params = [a.arg for a in (*tree.args.posonlyargs, *tree.args.args)]
        if tree.args.vararg or tree.args.kwarg or tree.args.kwonlyargs or tree.args.defaults:
            raise sub.error(UnsupportedFeatureError, tree,
                             "@ox.tile.func parameters are plain names (no defaults, *args, "
                             "keyword-only or **kwargs)")
        values: dict[str, Any] = {}
        for name, a in zip(params, node.args, strict=False):
            values[name] = self.expr(a)
        for kw in node.keywords:
            if kw.arg not in params or kw.arg in values:
                raise self.error(KernelTypeError, kw.value, f"`{f.__name__}` has no parameter "
                                 f"`{kw.arg}` left to bind")
            values[kw.arg] = self.expr(kw.value)
        if len(node.args) > len(params) or set(values) != set(params):
            raise self.error(KernelTypeError, node,
                             f"`{f.__name__}` takes {len(params)} argument"
                             f"{'s' if len(params) != 1 else ''} ({', '.join(params)}), got "
                             f"{len(node.args) + len(node.keywords)}")
        sub.em, sub.stores, sub.unsafe_depth = self.em, self.stores, self.unsafe_depth
        sub.vector, sub.loop_depth = self.vector, self.loop_depth
        sub.call_stack = (*self.call_stack, f)
        sub.env = values
        body = list(tree.body)
        result: Any = Static(None)
        last = body[-1] if body else None
        if isinstance(last, ast.Return):
            body = body[:-1]
        for stmt in body:
            for n in ast.walk(stmt):
                if isinstance(n, ast.Return):
                    raise sub.error(UnsupportedFeatureError, n,
                                    "an @ox.tile.func returns with its last statement only",
                                    hint="assign the result in each arm and return it once, "
                                         "at the end (`r = a if cond else b` ... `return r`)")
            sub.lower_stmt(stmt)
        if isinstance(last, ast.Return) and last.value is not None:
            result = sub.expr(last.value)
        return result

    # -- helpers ----------------------------------------------------------------------

    def positional(self, node: ast.Call, n: int | tuple[int, int], what: str,
                   keywords: tuple[str, ...] = ()) -> list[Any]:
        lo, hi = (n, n) if isinstance(n, int) else n
        if not lo <= len(node.args) <= hi:
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            raise self.error(KernelTypeError, node, f"`{what}` takes {want} positional "
                             f"argument{'s' if hi != 1 else ''}, got {len(node.args)}")
        for kw in node.keywords:
            if kw.arg not in keywords:
                raise self.error(KernelTypeError, kw.value if kw.arg else node,
                                 f"`{what}` has no keyword argument `{kw.arg}`")
        return [self.expr(a) for a in node.args]

    def keyword(self, node: ast.Call, name: str, position: int | None = None) -> Any:
        for kw in node.keywords:
            if kw.arg == name:
                return self.expr(kw.value), kw.value
        if position is not None and position < len(node.args):
            return self.expr(node.args[position]), node.args[position]
        return None, None

    def scalar_tile(self, ssa: Any, dt: T.DType) -> Tile:
        return self.t.scalar(ssa, dt)

    def extent(self, arr: TArray, d: int) -> Tile:
        """`arr.shape[d]` (of a view: the parameter's dimension past its fixed ones); where
        the launch specialized on 16-byte row vectors, a row's length is known to be a
        multiple of 16 bytes' worth of elements."""
        d += len(arr.fixed)
        ssa = self.b.value(ops.ArrayDimOp(arr.ssa, d, ir_type(T.i64)))
        divisor = None
        if arr.type.vectors and d == arr.base_rank - 1:
            divisor = T.VECTOR_BYTES // arr.type.dtype.itemsize
        return self.t.scalar(ssa, T.i64, divisor)

    def static_shape(self, v: Any, node: ast.AST, what: str) -> tuple[int, ...]:
        obj = v.obj if isinstance(v, Static) else None
        if isinstance(obj, int) and not isinstance(obj, bool):
            obj = (obj,)
        if not (isinstance(obj, tuple) and all(isinstance(n, int) and not isinstance(n, bool)
                                               for n in obj)):
            raise self.error(KernelTypeError, node,
                             f"{what} must be a tuple of compile-time integers, not "
                             f"{describe(v)}", hint="use literals or Const[int] parameters")
        bad = [n for n in obj if not is_power_of_two(n)]
        if bad:
            raise self.error(KernelTypeError, node,
                             f"tile shapes are powers of two; {shape_text(obj)} has {bad[0]}",
                             hint="round up to a power of two; loads pad and stores clip the "
                                  "elements past the array's edge")
        if len(obj) > 3:
            raise self.error(UnsupportedFeatureError, node,
                             f"tiles of rank {len(obj)} are not supported (rank 0 to 3)",
                             hint="read a rank-4 array through a view, its leading indices "
                                  "fixed: `tile.load(q[b, h], (i, 0), (BM, D))` for "
                                  "(batch, heads, seq, D); or fold dimensions together with "
                                  "`reshape`")
        layout = self.blocked(obj)
        if layout.slots > MAX_SLOTS:
            raise self.error(KernelTypeError, node,
                             f"a tile of shape {shape_text(obj)} puts {layout.slots} elements "
                             f"in each of the block's {layout.threads} threads; at most "
                             f"{MAX_SLOTS} fit in registers",
                             hint="use a smaller tile, or more warps (`num_warps=`)")
        return obj
