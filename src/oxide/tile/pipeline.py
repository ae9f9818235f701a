"""The tile compiler's passes, in the order they run: the one place that names them.

The frontend (tile/frontend.py) turns a tile kernel's body into the tile dialect
(ir/tile_ops.py); then, over `TileBuilder.tile_ops`:

1. `choose_engines` (tile/mma_choice.py): each `tile.mma` gets the instruction it runs
   on (wgmma on sm_90, mma.sync on tensor cores, or an FMA loop; the CPU target has no
   tensor cores);
2. `LayoutPass` (tile/layouts.py): every tile value gets its layout, and conversions
   stand where layouts must agree;
3. `place_operand_rings` (tile/operand_rings.py), on sm_90: a load that only feeds a
   wgmma operand copies its tile straight into a ring of shared buffers (cp.async; a K
   loop's by TMA, tile/tma_rings.py; with `Target.producer_rings`, a single pipelined
   operand's and a loop-invariant operand's too, for a producer); then `plan_producer`
   (tile/producer.py): whether a producer warp group issues those TMA copies (where it
   is not and the rings need one, `ProducerRefused`; where a pipelined loop's rings do
   not fit shared memory at `num_stages`, `RingsTooDeep`: lowered again at the depth
   that fits); and `place_tma_stores` (tile/tma_stores.py): which 2-d tile stores go
   through shared memory and TMA; then, in a two-blocks trial whose products do not all
   read TMA rings or include one of few rows computed transposed, `TwoBlocksDoNotPay`;
4. `check_layouts` (tile/layouts.py), where the IR is verified: the layout pass's
   guarantees, checked; on the GPU, `check_register_budget` (tile/register_budget.py)
   warns of a tile too large for a thread's registers;
5. `place_barriers` (tile/ordering.py): block barriers where two accesses of one array
   hand an element between threads (a load after a store in another layout);
6. `split_roles` (tile/producer.py), where `plan_producer` said yes: the producer's copy
   of the body, and the block that sends each thread to its role; then `plan_overlap`
   (tile/overlap.py): the product loops rotated so that a step's softmax overlaps the
   previous step's second product; then `plan_pingpong` (tile/pingpong.py): the loops
   whose two consumer warp groups take turns at the tensor cores (where a turn meets a
   barrier of theirs in the lowering, `PingPongRefused`);
7. `ToSIMT` (tile/to_simt.py): each tile op becomes the SIMT ops of one thread.

Where `plan_producer` said yes, `lower_tile_kernel` (tile/frontend.py) lowers the body
once more, inside a loop over the logical grid's blocks (tile/persistent_schedule.py),
and runs these passes over that: the kernel walks its grid with the blocks that fit.

Each file's docstring says what its pass assumes and guarantees.
"""

from __future__ import annotations

from dataclasses import dataclass

from oxide.codegen.switches import (
    register_order_enabled,
    register_order_everywhere,
    row_staging_enabled,
)
from oxide.errors import UnsupportedFeatureError
from oxide.frontend.parallel_calls import SM90A_STATIC_SHARED_BYTES, STATIC_SHARED_BYTES
from oxide.ir.tile_ops import kind_of
from oxide.tile.builder import TileBuilder
from oxide.tile.layouts import LayoutPass, check_layouts
from oxide.tile.lower import TileEmitter
from oxide.tile.mma_choice import choose_engines, swapped, warn_off_wgmma
from oxide.tile.operand_rings import (
    needs_producer,
    place_operand_rings,
    products_on_tma_rings,
)
from oxide.tile.ordering import place_barriers
from oxide.tile.overlap import plan_overlap
from oxide.tile.pingpong import plan_pingpong
from oxide.tile.producer import plan_producer, split_roles
from oxide.tile.register_budget import check_register_budget, check_wgmma_fits, register_cap
from oxide.tile.register_order import reorder_for_registers
from oxide.tile.row_staging import STAGE_BYTES, STAGE_BYTES_SM90, Stager, plan_staging
from oxide.tile.tma_stores import place_tma_stores
from oxide.tile.to_simt import ToSIMT


@dataclass(frozen=True)
class Target:
    """What the passes need to know of the target and the kernel's options."""

    num_warps: int
    vector: int  # elements per thread along rows (16-byte accesses where they fit)
    tensor_cores: bool  # the GPU: products of halves on mma.sync
    wgmma: bool = False  # an sm_90 GPU: on wgmma where the shapes fit
    occupancy: int | None = None  # `@tile.kernel(occupancy=...)`: it caps the registers
    rings: bool = True  # wgmma operands may take cp.async rings (tile/operand_rings.py)
    tma: bool = True  # a K loop's rings may be filled by TMA (tile/tma_rings.py)
    # rings only a producer warp group fills (tile/operand_rings.py `producer_only`) may
    # be placed: where the producer is then not planned, `ProducerRefused`
    producer_rings: bool = False
    pingpong: bool = True  # loops may take turns (tile/pingpong.py), where it is enabled
    # rows past the registers may wait in shared memory (tile/row_staging.py), where it is
    # enabled and the shared memory the target allows has room
    row_staging: bool = True
    # a TMA store's shared buffers may take what the rings leave of the block's whole
    # shared memory (tile/tma_stores.py `place_tma_stores`); where the kernel's other
    # arrays then do not fit, `StoresRefused`
    whole_block_stores: bool = True
    # a lowering for two blocks an SM that the compiler chose, not the kernel's own
    # `occupancy` (tile/frontend.py `_may_take_two_blocks`): `TwoBlocksDoNotPay` where a
    # product reads an operand from elsewhere than TMA rings, or is one of few rows
    # computed transposed
    two_blocks_trial: bool = False


class TwoBlocksDoNotPay(Exception):
    """A two-blocks trial (`Target.two_blocks_trial`) found a product whose operands do
    not all come from TMA rings, or one of few rows computed transposed (a decode step's:
    H100, 2026-12-07, 16 x 4096 x 4096 at 16 x 64 x 128, 4 stages: 16.1 us on two blocks
    against 14.4 on one with a producer): the kernel is to be lowered as it asked, one
    block an SM. Raised once the rings and the TMA stores are placed, before the passes
    that warn."""


class StoresRefused(Exception):
    """The TMA stores' buffers took shared memory past the rings' budget, and the
    kernel's other arrays then did not fit: it is to be lowered again without
    `Target.whole_block_stores`."""


class ProducerRefused(Exception):
    """Rings for a producer warp group were placed (`Target.producer_rings`) and the
    producer was not planned: the kernel is to be lowered again without them."""


class RingsTooDeep(Exception):
    """A pipelined loop's operand rings did not fit shared memory at the kernel's
    `num_stages`, and would at `stages` (tile/operand_rings.py `_too_deep`): the kernel is
    to be lowered again at that depth, rather than keep the loop's tiles in registers,
    `num_stages` deep, where they spill (H100, 2026-12-06: a 64 x 64 x 128 product of K =
    4096 at 8 stages so took 568 us, at 6 stages with its rings 16.6 us)."""

    def __init__(self, stages: int) -> None:
        super().__init__(stages)
        self.stages = stages


def run_passes(b: TileBuilder, em: TileEmitter, target: Target, verify: bool = False,
               dump: list[str] | None = None, need_producer: bool = False) -> bool:
    """Run the passes over `b`'s tile ops; with `dump`, append the dialect's text as the
    layout and ordering passes leave it (OXIDE_DUMP=tile). Whether a producer warp group
    fills the rings; with `need_producer` (a walked grid), `ProducerRefused` where none
    does."""
    choose_engines(b.tile_ops, target.num_warps, target.tensor_cores, target.wgmma)
    if target.wgmma:
        warn_off_wgmma(b.tile_ops, b.spans, target.num_warps)
    LayoutPass(b, target.num_warps, target.vector, target.tensor_cores).run()
    producer = False
    stores_beyond = False  # a TMA store's buffers took more than the rings' budget
    if target.wgmma and target.rings:
        em.rings_placed = place_operand_rings(b, target.tma, target.producer_rings,
                                               target.occupancy)
        if b.stages_that_fit is not None:
            raise RingsTooDeep(b.stages_that_fit)
        em.products_on_tma = products_on_tma_rings(b)
        producer = target.tma and plan_producer(b, target.num_warps, target.occupancy)
        if not producer and (need_producer or needs_producer(b)):
            raise ProducerRefused
        if target.tma:
            stores_beyond = place_tma_stores(b, target.whole_block_stores, target.occupancy)
    if target.two_blocks_trial and (not em.products_on_tma or any(
            kind_of(op) == "mma" and swapped(op) for op in b.tile_ops)):
        raise TwoBlocksDoNotPay
    if verify:
        check_layouts(b.tile_ops)
    if target.tensor_cores:  # the GPU: a register file to overflow
        check_wgmma_fits(b, target.num_warps, target.occupancy)
        check_register_budget(b, target.num_warps, target.occupancy)
    place_barriers(b)
    if producer:
        split_roles(b, em)
        em.overlap = plan_overlap(b, em)
        if target.pingpong:
            em.turns = plan_pingpong(b, em)
    if dump is not None:
        dump.append(str(b.func))
    stager = None
    over_budget = False  # tiles live across a reduction take more than the registers
    everywhere = False
    if target.tensor_cores:  # the GPU, and the CPU compiling as sm_90 does
        stages = plan_staging(b, target.num_warps, target.occupancy,
                              STAGE_BYTES_SM90 if target.wgmma else STAGE_BYTES)
        over_budget = stages.over_budget and register_order_enabled()
        everywhere = register_order_everywhere() and not stages.has_products
        if stages.at and target.row_staging and row_staging_enabled():
            # rows past the registers: shared memory, within the target's
            stager = Stager(em, stages, 32 * target.num_warps,
                            SM90A_STATIC_SHARED_BYTES if target.wgmma else STATIC_SHARED_BYTES)
    try:
        ToSIMT(b, em, stager).run()
    except UnsupportedFeatureError:
        if stores_beyond:
            raise StoresRefused from None
        raise
    if over_budget or everywhere:  # the lowered code in an order that holds fewer values
        reorder_for_registers(b.func.body.blocks,
                              register_cap(target.num_warps, target.occupancy or 1),
                              stager.cells if stager is not None else {}, everywhere)
    return producer
