"""On a GPU: the warp pieces of issue 15 item 9, with tests/test_warp_pieces.py's checks.

Shuffles with `width=`, lanemasks, `match_all` and `sync_warp(mask)` must give exactly
the Python model of CUDA's semantics that the CPU matches. `activemask` is checked as
CUDA defines it (the caller's bit is set, and only lanes of the caller's branch): a GPU
may run a branch's lanes in more than one group, so the exact CPU mask is not required.
Warp-aggregated atomics are correct for any such grouping.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import test_warp_pieces as wp

import oxide as ox
from oxide import f32, f64, i32, i64, u32, u64

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _gpu() -> Iterator[None]:
    with ox.device(0):
        yield


@pytest.mark.parametrize("width", wp.WIDTHS)
@pytest.mark.parametrize("kind", wp.SHUFFLES)
def test_shuffle_width_matches_cuda(kind: str, width: int) -> None:
    wp.check_shuffle_width(kind, width, i32, 64, None)
    wp.check_shuffle_width(kind, width, f32, 96, None)


@pytest.mark.parametrize("kind", wp.SHUFFLES)
def test_shuffle_width_64_bit_masked_partial_warp(kind: str) -> None:
    for dt in (i64, f64, u64):
        wp.check_shuffle_width(kind, 8, dt, 45, None)
        wp.check_shuffle_width(kind, 4, dt, 64, 0x0F0F_F0F0)


@pytest.mark.parametrize("block", [(64,), (45,), (8, 4, 3)])
def test_lanemasks_match_ptx_registers(block: tuple[int, ...]) -> None:
    wp.check_lanemasks(block)


@pytest.mark.parametrize("block, mod", [(64, 3), (45, 2), (96, 1), (33, 5), ((8, 9), 4)])
def test_activemask_names_the_callers_branch(block: Any, mod: int) -> None:
    wp.check_activemask(block, mod, exact=False)


@pytest.mark.parametrize("dtype", [i32, u32, i64, u64, f32, f64], ids=lambda d: d.name)
def test_match_all_matches_cuda(dtype: Any) -> None:
    wp.check_match_all(dtype, 96, None)
    wp.check_match_all(dtype, 70, None)
    wp.check_match_all(dtype, 64, 0x00FF_FF00)


def test_sync_warp_with_a_mask_orders_the_members() -> None:
    for _ in range(20):
        wp.check_sync_warp_mask()


@pytest.mark.parametrize("n, block", [(1000, 128), (4099, 96), (77, 45), (1 << 20, 256)])
def test_warp_aggregated_atomics_match_numpy(n: int, block: int) -> None:
    wp.check_warp_aggregated_atomics(n, block)
