"""On an H100/H200: examples/gemm_hopper for each option and both B layouts, at ragged and
tile-aligned sizes, against NumPy (f32 products of the bf16 inputs) and torch.matmul.

tests/test_gemm_hopper.py checks the same kernel's PTX and cubin and runs it on the CPU.
Tolerance: the output is bf16 (8 significant bits), so each element may differ from the
f32 reference by 2^-7 relative (the rounding of C, plus the order of the f32 sums).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import oxide as ox
from oxide.examples import gemm_hopper as g

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _gpu() -> Iterator[None]:
    with ox.device(0):
        yield


def gpu0_sms() -> int:
    with ox.device(0) as dev:
        return g.sm_count(dev)


D = g.DEFAULT
VARIANTS = {
    "default": D,
    "b_nxk": g.replace(D, b_mn=False),
    "no_setmaxnreg": g.replace(D, setmaxnreg=False),
    "not_persistent": g.replace(D, persistent=False),
    "one_consumer": g.replace(D, consumers=1, bn=128, stages=4),
    "bn128": g.replace(D, bn=128, stages=4),
    "bn192_b_nxk": g.replace(D, bn=192, stages=3, b_mn=False),
    "stages2_group1": g.replace(D, stages=2, group_m=1),
    "cpu_config": g.CPU,
    "tma_store": g.replace(D, tma_store=True, stages=3),
    "tma_store_b_nxk_bn128": g.replace(D, tma_store=True, b_mn=False, bn=128),
    "cluster2": g.replace(D, cluster=2),
    "cluster2_b_nxk_tma_store": g.replace(D, cluster=2, b_mn=False, tma_store=True, stages=3),
    "cluster2_not_persistent": g.replace(D, cluster=2, persistent=False),
    "cluster2_128_blocks": g.replace(D, cluster=2, blocks=128, group_m=16),
}
SIZES = [(1000, 1500, 700), (128, 256, 64), (1, 8, 8), (257, 129, 1000), (2048, 2048, 2048)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", list(VARIANTS))
def test_variant_matches_numpy(name: str, size: tuple[int, int, int]) -> None:
    m, n, k = size
    passed, _ = g.check(0, m, n, k, VARIANTS[name], seed=m + n + k, repeats=1)
    assert passed


@pytest.mark.parametrize("b_mn", [True, False], ids=["b_kxn", "b_nxk"])
def test_4096_cubed(b_mn: bool) -> None:
    passed, seconds = g.check(0, 4096, 4096, 4096, g.replace(D, b_mn=b_mn), seed=3)
    assert passed
    print(f"4096^3 {'K x N' if b_mn else 'N x K'} B: {2 * 4096 ** 3 / seconds / 1e12:.0f} TFLOPS")


def test_exact_for_small_integers() -> None:
    """Values whose products and sums bf16 holds exactly: every element must match."""
    import ml_dtypes

    m, n, k = 777, 1000, 520
    rng = np.random.default_rng(11)
    a = rng.integers(-2, 3, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-2, 3, (k, n)).astype(ml_dtypes.bfloat16)
    d_a, d_b = ox.to_device(g.padded(a)), ox.to_device(g.padded(b))
    d_c = ox.to_device(np.full((m, n), np.nan, ml_dtypes.bfloat16))
    g.matmul(d_a, d_b, d_c, m, n, k, D, sms=gpu0_sms())
    np.testing.assert_array_equal(d_c.to_numpy().astype(np.float32),
                                  a.astype(np.float32) @ b.astype(np.float32))


def test_torch_tensors_against_torch_matmul() -> None:
    """The benchmark's path: torch tensors straight into the tensor maps."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    m, n, k = 2048, 4096, 1024
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    want = torch.matmul(a, b).float()
    for cfg, b_in in ((D, b), (g.replace(D, b_mn=False), b.t().contiguous())):
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        g.matmul(a, b_in, c, m, n, k, cfg, sms=gpu0_sms())
        torch.cuda.synchronize()
        torch.testing.assert_close(c.float(), want, rtol=1 / 64, atol=1e-1)


def test_static_shared_past_48k_launches() -> None:
    """The GEMM's ring is static shared memory past 48 KiB (ptxas takes it for sm_90a):
    this checks the driver launches such a kernel, apart from everything else."""
    import test_gemm_hopper as tg

    out = ox.to_device(np.zeros(128, np.float32))
    ox.launch(tg.big_shared_sm90a, (1, 128), out)
    np.testing.assert_array_equal(out.to_numpy(), tg.big_shared_want())


def test_static_shared_past_48k_without_wgmma_launches() -> None:
    """A plain kernel with 64 KiB of static shared memory, compiled for sm_90a because of
    it, launches and reads back what it wrote."""
    import test_gemm_hopper as tg

    out = ox.to_device(np.zeros(1, np.float32))
    ox.launch(tg.plain_big, (1, 32), out)
    assert out.to_numpy()[0] == 1.0


def test_example_main_on_the_gpu() -> None:
    result = g.main(device=0)
    assert result.passed, str(result)
    assert result.device.startswith("GPU 0")
