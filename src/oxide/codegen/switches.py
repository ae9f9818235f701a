"""The environment switches that change a tile kernel's code, for comparisons, debugging
and tests: the compiler reads them, and a kernel's compiled specializations (in memory,
on the CPU's launch path, and in the disk cache's key) are remembered under them. This
module imports nothing heavy: the runtime's launch path reads it without the compiler."""

from __future__ import annotations

import os

from oxide.codegen import persistent_grid


def wgmma_enabled() -> bool:
    """Whether tile products may take the wgmma engine on sm_90 (OXIDE_TILE_WGMMA=0 keeps
    them on mma.sync, to compare the two)."""
    return os.environ.get("OXIDE_TILE_WGMMA", "1") != "0"


def tma_enabled() -> bool:
    """Whether a tile K loop's operands may be copied by TMA on sm_90 (OXIDE_TILE_TMA=0
    keeps every thread's cp.async copies, to compare the two)."""
    return os.environ.get("OXIDE_TILE_TMA", "1") != "0"


def producer_enabled() -> bool:
    """OXIDE_TILE_PRODUCER=0 keeps thread 0 of the consumers issuing a tile kernel's TMA
    copies (no producer warp group), to compare the two."""
    return os.environ.get("OXIDE_TILE_PRODUCER", "1") != "0"


def two_blocks_enabled() -> bool:
    """A 4-warp tile kernel with a pipelined product loop may be compiled for two blocks an
    SM on sm_90 (tile/frontend.py `_may_take_two_blocks`); OXIDE_TILE_TWO_BLOCKS=0 turns
    it off, to compare (H100, 2026-12-07: 128 x 128 x 64 at 3 stages 610 TFLOPS against
    454 one block with a producer; benchmarks/two_blocks.py)."""
    return os.environ.get("OXIDE_TILE_TWO_BLOCKS", "1") != "0"


def column_groups_enabled() -> bool:
    """A 64-row product tile on 8 warps splits its columns between the two warp groups on
    sm_90 and runs on wgmma (tile/mma_choice.py `column_groups`); OXIDE_TILE_COLUMN_GROUPS=0
    keeps it on mma.sync, as before, to compare (H100, 2026-12-07: 64 x 256 x 64 at 4
    stages 565 TFLOPS against 185 at 4096^3; benchmarks/column_groups.py)."""
    return os.environ.get("OXIDE_TILE_COLUMN_GROUPS", "1") != "0"


def hopper_on_cpu() -> bool:
    """OXIDE_TILE_CPU_HOPPER=1: the CPU target compiles tile kernels as sm_90 does (wgmma,
    TMA rings, a producer warp group, TMA stores, each in the CPU's meaning), to test that
    code without a GPU. Such CPU code is not kept in the disk cache."""
    return os.environ.get("OXIDE_TILE_CPU_HOPPER", "") == "1"


def pingpong_enabled() -> bool:
    """OXIDE_TILE_PINGPONG=1 or =issue: the consumer warp groups take turns at the tensor
    cores in loops of product -> work -> product (tile/pingpong.py; off by default until
    measured faster on the H200)."""
    return os.environ.get("OXIDE_TILE_PINGPONG", "0") in ("1", "issue")


def pingpong_issue_only() -> bool:
    """OXIDE_TILE_PINGPONG=issue: a warp group holds its turn only while it issues a
    product (FlashAttention-3's protocol), not from its second product's issue through
    that product's wait and the next step's first issue, as `=1` does."""
    return os.environ.get("OXIDE_TILE_PINGPONG", "0") == "issue"


def overlap_enabled() -> bool:
    """OXIDE_TILE_OVERLAP=1: a loop of product -> work -> product issues the next step's
    first product before its second one, so the work overlaps it (tile/overlap.py; off
    by default until measured faster on the H200)."""
    return os.environ.get("OXIDE_TILE_OVERLAP", "0") == "1"


def uniform_role_enabled() -> bool:
    """OXIDE_TILE_UNIFORM_ROLE=1: a kernel with a producer warp group tells its roles
    apart by a warp group index ptxas knows to be warp-uniform (broadcast from lane 0 by
    `shfl.sync`), so the consumers' code is not a divergent path to it, where a
    warp-group arrive it must inject serializes every wgmma (note C7519; tile/producer.py
    `_route`). Off by default until measured on the H200."""
    return os.environ.get("OXIDE_TILE_UNIFORM_ROLE", "0") == "1"


def row_staging_enabled() -> bool:
    """Whether a row too wide for the registers may wait out its reductions in shared
    memory (tile/row_staging.py; OXIDE_TILE_ROW_STAGING=0 leaves it to ptxas's spills,
    to compare the two)."""
    return os.environ.get("OXIDE_TILE_ROW_STAGING", "1") != "0"


def register_order_enabled() -> bool:
    """Whether a block holding more values than a thread's registers is put in an order
    that holds fewer (tile/register_order.py; OXIDE_TILE_REGISTER_ORDER=0 keeps the
    order of the lowering, to compare the two)."""
    return os.environ.get("OXIDE_TILE_REGISTER_ORDER", "1") != "0"


def register_order_everywhere() -> bool:
    """OXIDE_TILE_REGISTER_ORDER=always: every block of every tile kernel without products
    is reordered, whatever it holds: the fuzzer's way to put the pass under every kind of
    program (tests/test_tile_fuzz.py)."""
    return os.environ.get("OXIDE_TILE_REGISTER_ORDER", "1") == "always"


def exp2_ftz_enabled() -> bool:
    """OXIDE_TILE_EXP2_FTZ=1: an f32 `exp2` on the GPU is `ex2.approx.ftz.f32`, one MUFU
    (Triton's `tl.exp2`, libdevice built for flush-to-zero), instead of `ex2.approx.f32`
    (docs/language.md: a subnormal 2^x is kept, at a range test and two multiplies a
    call). It changes what `exp2` means below 2^-126 on the GPU only: for measuring what
    that meaning would buy (docs/performance.md, attention), not for use."""
    return os.environ.get("OXIDE_TILE_EXP2_FTZ", "0") == "1"


def codegen_switches() -> tuple[bool, ...]:
    """All of them, with the persistent schedule's (codegen/persistent_grid.py)."""
    return (wgmma_enabled(), tma_enabled(), producer_enabled(), hopper_on_cpu(),
            persistent_grid.enabled(), pingpong_enabled(), overlap_enabled(),
            uniform_role_enabled(), row_staging_enabled(), register_order_enabled(),
            register_order_everywhere(), exp2_ftz_enabled(), pingpong_issue_only(),
            two_blocks_enabled(), column_groups_enabled())
