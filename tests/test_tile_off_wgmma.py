"""A 16-bit product that sm_90 keeps on mma.sync says so (tile/mma_choice.py
`warn_off_wgmma`): it runs at a quarter to a third of wgmma's speed, and before this
warning nothing told the user why (a 64 x 128 tile on 8 warps: 169 TFLOPS, on 4 warps 478;
H100, 2026-12-07). Compiled for sm_90 without a GPU."""

from __future__ import annotations

import warnings

from test_tile_two_blocks import SIG

from oxide.errors import PerformanceWarning
from oxide.examples.tile_matmul import tile_matmul
from oxide.tile.kernel import tile_options


def compiled(warps: int, tiles: tuple[int, int, int], arch: str = "sm_90") -> tuple[str, list[str]]:
    """(the PTX, the PerformanceWarnings about mma.sync) of tile_matmul at `tiles`."""
    kernel = tile_matmul.with_options(tile_options(warps, num_stages=3))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        ptx = kernel.compile(*SIG, *tiles, arch=arch).ptx
    return ptx, [str(w.message) for w in said if issubclass(w.category, PerformanceWarning)
                 and "runs on mma.sync" in str(w.message)]


def test_columns_the_warp_groups_cannot_split() -> None:
    """64 rows on 8 warps take wgmma where the two warp groups split N into whole slabs
    (tests/test_tile_column_groups.py); N = 64 does not split."""
    ptx, said = compiled(8, (64, 64, 64))
    assert "mma.sync" in ptx and "wgmma" not in ptx
    assert len(said) == 1  # once, though the kernel is lowered more than once
    assert ("the block's 2 warp groups (8 warps) split a 64-row tile's N columns, N / 2 a "
            "multiple of 64 up to 256 each, and this product has N = 64") in said[0]
    assert "`num_warps=4` for this tile, or N a multiple of 128 up to 512" in said[0]


def test_with_the_column_split_off_the_warning_names_its_switch(monkeypatch) -> None:
    monkeypatch.setenv("OXIDE_TILE_COLUMN_GROUPS", "0")
    ptx, said = compiled(8, (64, 128, 64))
    assert "wgmma" not in ptx and len(said) == 1
    assert "OXIDE_TILE_COLUMN_GROUPS=0 keeps 64-row tiles on 8 warps off wgmma" in said[0]
    assert "`num_warps=4` for this tile, or OXIDE_TILE_COLUMN_GROUPS unset" in said[0]


def test_rows_the_warp_groups_cannot_share() -> None:
    ptx, said = compiled(8, (32, 64, 64))
    assert "mma.sync" in ptx and "wgmma" not in ptx
    assert len(said) == 1
    assert "32 rows do not make that for the block's 2 warp groups (8 warps)" in said[0]


def test_a_shape_wgmma_does_not_take() -> None:
    _, said = compiled(8, (128, 512, 64))
    assert len(said) == 1 and "N = 512, K = 64" in said[0]


def test_quiet_where_the_product_takes_wgmma_or_mma_sync_is_all_there_is() -> None:
    for warps, tiles, arch in [(4, (64, 128, 64), "sm_90"), (8, (128, 256, 64), "sm_90"),
                               (8, (64, 128, 64), "sm_90"), (8, (64, 128, 64), "sm_80")]:
        ptx, said = compiled(warps, tiles, arch)
        assert said == [], (warps, tiles, arch)
        assert ("wgmma" in ptx) is (arch == "sm_90")


def test_few_rows_name_the_warps_and_columns_that_take_wgmma() -> None:
    """16 rows on 8 warps need N of 128 or 256 to be computed transposed; on 4 warps N = 64
    does."""
    _, said = compiled(8, (16, 64, 64))
    assert len(said) == 1 and "`num_warps=4` for this tile" in said[0]
    assert "computed transposed where N is 128 or 256" in said[0]
