"""Product operand rings over random shapes: K loops of `tile.mma` with 1 to 4 stages,
bf16 and f16, a weight as it is or transposed (`w.permute((1, 0))`), ragged sizes in
every dimension, tiles from 64 x 64 x 16 to 128 x 256 x 64, by TMA (the sm_90 default)
or every thread's cp.async (OXIDE_TILE_TMA=0).

Without a GPU each case compiles to an sm_90 cubin (the passes and ptxas take every
shape, whichever path the shared memory leaves it); on a GPU each runs against NumPy.
"""

from __future__ import annotations

import dataclasses
import random
import zlib

import numpy as np
import pytest
from test_gpu_tile_rings import make_gemm, make_linear_t

import oxide as ox
from oxide import DisjointSlice, Slice, bf16, f16, f32, tile
from oxide.runtime.device import cuda_device_count


@dataclasses.dataclass(frozen=True)
class Case:
    dtype: str
    warps: int
    stages: int
    tiles: tuple[int, int, int]  # BM, BN, BK
    sizes: tuple[int, int, int]  # M, N, K (N and K multiples of 8: rows of 16 bytes)
    transposed: bool  # the weight is (N, K), read through a permute
    tma: bool

    def __str__(self) -> str:
        bm, bn, bk = self.tiles
        m, n, k = self.sizes
        return (f"{self.dtype}-{bm}x{bn}x{bk}-{self.warps}w-{self.stages}s-{m}x{n}x{k}"
                f"{'-T' if self.transposed else ''}{'' if self.tma else '-cp.async'}")


def _cases(seed: int, count: int) -> list[Case]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        warps = rng.choice((4, 8))
        bm = 16 * warps  # every warp on 16 rows: the wgmma engine's shape
        bn = rng.choice((64, 128, 256) if warps == 8 else (64, 128))
        bk = rng.choice((16, 32, 64))
        sizes = (rng.randint(1, 3 * bm), 8 * rng.randint(1, 3 * bn // 8),
                 8 * rng.randint(1, 5 * bk // 8))
        out.append(Case(rng.choice(("bf16", "f16")), warps, rng.randint(1, 4), (bm, bn, bk),
                        sizes, rng.random() < 0.4, rng.random() < 0.75))
    return out


CASES = _cases(30, 16)
DTYPES = {"bf16": bf16, "f16": f16}


def make(case: Case):
    """The case's K loop: `a @ b`, or `a @ w.T` for a transposed weight."""
    factory = make_linear_t if case.transposed else make_gemm
    return factory(DTYPES[case.dtype], case.warps, case.stages)


@pytest.fixture
def path(request, monkeypatch) -> Case:
    case = request.param
    monkeypatch.setenv("OXIDE_TILE_TMA", "1" if case.tma else "0")
    return case


@pytest.mark.parametrize("path", CASES, ids=str, indirect=True)
def test_each_case_compiles_for_hopper(path: Case) -> None:
    dt = DTYPES[path.dtype]
    rows = dataclasses.replace(Slice[dt, 2], vectors=True)
    out = dataclasses.replace(DisjointSlice[f32, 2], vectors=True)
    ck = make(path).compile(rows, rows, out, *path.tiles, arch="sm_90")
    assert "wgmma.mma_async" in ck.ptx and ck.cubin


@pytest.mark.gpu
@pytest.mark.skipif(cuda_device_count() == 0, reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("path", CASES, ids=str, indirect=True)
def test_each_case_against_numpy_on_gpu(path: Case) -> None:
    rng = np.random.default_rng(zlib.crc32(str(path).encode()))
    m, n, k = path.sizes
    bm, bn, bk = path.tiles
    a = rng.standard_normal((m, k)).astype(DTYPES[path.dtype].numpy)
    w = rng.standard_normal((n, k) if path.transposed else (k, n)).astype(a.dtype)
    c = ox.to_device(np.zeros((m, n), np.float32))
    with ox.device(0):
        make(path)[(tile.cdiv(m, bm), tile.cdiv(n, bn))](ox.to_device(a), ox.to_device(w), c,
                                                        bm, bn, bk)
    w64 = w.astype(np.float64)
    want = a.astype(np.float64) @ (w64.T if path.transposed else w64)
    np.testing.assert_allclose(c.to_numpy(), want, rtol=0, atol=1e-3 * np.sqrt(k) * 10)
