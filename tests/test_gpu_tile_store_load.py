"""Program order inside a tile block on the GPU (tile/ordering.py): the CPU suite's
store-then-load kernels (tests/test_tile_store_load.py) against NumPy on GPU 0, where a
product's accumulator really has the tensor cores' layout (mma.sync, and wgmma on
sm_90 where a warp group owns 64 rows) and warps really run concurrently."""

from __future__ import annotations

import pytest
import test_tile_store_load as cases

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("bm", [32, 64])
def test_a_product_stored_then_loaded_back_on_gpu(bm: int) -> None:
    cases.check_product_then_reload(0, bm)


@pytest.mark.parametrize("check", [cases.check_overwrite_row, cases.check_row_sums_back,
                                   cases.check_store_twice, cases.check_loads_before_stores,
                                   cases.check_doubling_history],
                         ids=lambda f: f.__name__)
def test_store_load_order_on_gpu(check) -> None:
    for _ in range(20):  # a race shows only now and then: give it chances
        check(0)
