"""On an H100/H200: a tile kernel that is the canonical matmul K loop runs as the wgmma
GEMM (oxide/kernels/tile_matmul.py) and gets the same C as the kernel as written; what
the template cannot run runs as written. Against torch."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

import oxide as ox
from oxide import tile
from oxide.examples import tile_matmul as example

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _gpu() -> Iterator[None]:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs an sm_90 GPU (H100/H200)")
    with ox.device(0):
        yield


def _kernel():  # noqa: ANN202
    """A fresh copy of the example's canonical kernel, with its own launchers (so which
    path ran is visible)."""
    return tile.kernel(num_warps=8)(example.tile_matmul.__wrapped__)


def _run(kernel, m: int, n: int, k: int, grid=None, a=None, b=None):  # noqa: ANN001, ANN202
    torch.manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16) if a is None else a
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) if b is None else b
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    grid = grid or (tile.cdiv(m, 64), tile.cdiv(n, 64))
    kernel[grid](a, b, c, 64, 64, 32)
    torch.cuda.synchronize()
    return a, b, c


def _close(c, a, b) -> None:  # noqa: ANN001
    ref = (a.float() @ b.float())
    torch.testing.assert_close(c.float(), ref, rtol=2 ** -7, atol=2 ** -6 * math.sqrt(a.shape[1]))


def _took_template(kernel) -> bool:  # noqa: ANN001
    return "_oxide_launchers" not in kernel.__dict__  # the written kernel never launched


@pytest.mark.parametrize("m, n, k", [(1000, 1512, 704), (8, 8, 8), (4096, 4096, 4096),
                                     (130, 264, 72)])
def test_the_template_computes_the_written_kernels_c(m: int, n: int, k: int) -> None:
    kernel = _kernel()
    a, b, c = _run(kernel, m, n, k)
    assert _took_template(kernel)
    _close(c, a, b)


def test_both_paths_agree() -> None:
    kernel, written = _kernel(), _kernel()
    a, b, c = _run(kernel, 300, 200, 136)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OXIDE_TILE_WGMMA", "0")
        _, _, c2 = _run(written, 300, 200, 136, a=a, b=b)
    assert _took_template(kernel) and not _took_template(written)
    _close(c, a, b)
    _close(c2, a, b)
    # the f32 sums differ only in order: the bf16 results within a rounding or two
    torch.testing.assert_close(c.float(), c2.float(), rtol=2 ** -6, atol=2 ** -6)


def test_unaligned_rows_run_as_written() -> None:
    """K = 100: A's rows are 200 bytes, off TMA's 16-byte rule; the kernel runs as written."""
    kernel = _kernel()
    a, b, c = _run(kernel, 96, 64, 100)
    assert not _took_template(kernel)
    _close(c, a, b)


def test_a_grid_over_part_of_c_runs_as_written() -> None:
    """A grid of 1 x 1 blocks writes C's first 64 x 64 tile only, as the kernel says."""
    kernel = _kernel()
    a, b, c = _run(kernel, 256, 256, 64, grid=(1, 1))
    assert not _took_template(kernel)
    _close(c[:64, :64], a[:64], b[:, :64])
    assert torch.isnan(c[64:].float()).all() and torch.isnan(c[:, 64:].float()).all()


def test_an_output_overlapping_an_input_is_refused() -> None:
    kernel = _kernel()
    a = torch.randn(128, 128, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(128, 128, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ox.AliasingError):
        kernel[(2, 2)](a, b, a, 64, 64, 32)


def test_the_template_runs_on_the_launch_stream() -> None:
    kernel = _kernel()
    a = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(256, 384, device="cuda", dtype=torch.bfloat16)
    c = torch.full((512, 384), float("nan"), device="cuda", dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(20_000_000)  # the kernel must queue behind this
        kernel[(8, 6), s](a, b, c, 64, 64, 32)
    s.synchronize()
    assert _took_template(kernel)
    _close(c, a, b)


def test_a_transposed_weight_runs_k_major() -> None:
    """`x @ w.T` with `w` a row-major N x K weight (a linear layer's): B is K-major."""
    kernel = _kernel()
    torch.manual_seed(4)
    w = torch.randn(1512, 704, device="cuda", dtype=torch.bfloat16)  # N x K
    a, b, c = _run(kernel, 1000, 1512, 704, b=w.t())
    assert _took_template(kernel)
    _close(c, a, b)
