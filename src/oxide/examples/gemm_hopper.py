"""Hopper GEMM C = A @ B in bf16 (f32 accumulation): TMA, an mbarrier ring, wgmma, warp specialization.

The kernel, `gemm_hopper`, is written in oxide SIMT in `oxide/kernels/hopper_gemm.py`
(its docstring walks through the recipe: a TMA ring with 128-byte swizzle and parity
waits, a producer and two consumer warp groups with setmaxnreg, a persistent grid in
grouped order, 2x1 clusters with multicast, a TMA-store epilogue); it lives in the
library because `tile_matmul`'s K loop runs on it on sm_90 (docs/reference.md, "Shipped
kernels"). This example checks it against NumPy at a ragged size and at 4096^3.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import oxide as ox
from oxide.kernels.hopper_gemm import (
    BK,
    CPU,
    DEFAULT,
    FASTEST,
    Config,
    gemm_hopper,
    launch_config,
    matmul,
    replace,
    signature,
    tensor_maps,
)
from oxide.testing import RunResult, describe_device, seconds_per_launch

NEEDS_ARCH = "sm_90a"  # wgmma: main(arch=...) builds no cubin for any other architecture


def sm_count(dev: Any) -> int:
    """The GPU's SM count (the persistent grid's size); 2 on the CPU, so blocks there walk
    several tiles."""
    if dev.is_cpu:
        return 2
    from cuda.core import Device

    return Device(dev.index).properties.multiprocessor_count


def _bf16(x: np.ndarray) -> np.ndarray:
    import ml_dtypes

    return x.astype(ml_dtypes.bfloat16)


def padded(x: np.ndarray) -> np.ndarray:
    """`x` with zero columns appended up to a multiple of 8: TMA needs each row to start
    16-byte aligned. The kernel is told the true sizes; the zeros add nothing to C."""
    cols = -(-x.shape[1] // 8) * 8
    out = np.zeros((x.shape[0], cols), x.dtype)
    out[:, :x.shape[1]] = x
    return out


def check(device: Any, m: int, n: int, k: int, cfg: Config, seed: int = 0,
          repeats: int | None = None) -> tuple[bool, float]:
    """Runs one size on `device` ("cpu", a GPU ordinal) against NumPy (f32 products of the
    bf16 inputs); returns (passed, seconds per launch)."""
    rng = np.random.default_rng(seed)
    a = _bf16(rng.standard_normal((m, k), dtype=np.float32))
    b = _bf16(rng.standard_normal((k, n), dtype=np.float32))
    b_in = b if cfg.b_mn else np.ascontiguousarray(b.T)
    # every element must be written; rows padded for the TMA-store epilogue's map
    c = padded(_bf16(np.full((m, n), np.nan, np.float32)))
    with ox.device(device) as dev:
        d_a, d_b, d_c = [ox.to_device(arr) for arr in (padded(a), padded(b_in), c)]
        sms = sm_count(dev)
        seconds = seconds_per_launch(lambda: matmul(d_a, d_b, d_c, m, n, k, cfg, sms), dev,
                                     repeats=repeats)
        got = d_c.to_numpy()[:, :n].astype(np.float32)
    want = a.astype(np.float32) @ b.astype(np.float32)
    # bf16 output keeps 8 significant bits: a relative error up to 2^-8 of each result
    # (the f32 sums' own rounding is far below that)
    passed = bool(np.allclose(got, want, rtol=1 / 128, atol=1e-2))
    return passed, seconds


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """A ragged product (M x K x N = 1000 x 700 x 1500 on a GPU, `size` x 0.7 `size` x
    1.5 `size` when given) and 4096^3, against NumPy.

    The CPU runs the variant without setmaxnreg (only a GPU has it) at a small ragged size;
    `arch` also builds the default variant's cubin for that architecture (wgmma is sm_90a's
    alone: any other is a TargetError).
    """
    with ox.device(device) as dev:
        cfg = CPU if dev.is_cpu else FASTEST
        m = size or (136 if dev.is_cpu else 1000)
        k, n = m * 7 // 10, m * 3 // 2  # ragged: no dimension a multiple of its tile
        passed, seconds = check(dev, m, n, k, cfg, repeats=1 if dev.is_cpu else None)
        problem = f"{m:,} x {k:,} x {n:,} bf16"
        if not dev.is_cpu and size is None:
            big_ok, seconds = check(dev, 4096, 4096, 4096, cfg, seed=1)
            passed = passed and big_ok
            m = n = k = 4096
            problem += " and 4,096^3 (timed)"
        note = ("the CPU runs the kernel without setmaxnreg; full speed needs an sm_90 GPU"
                if dev.is_cpu else "")
        return RunResult("gemm_hopper", passed, describe_device(dev),
                         f"{problem}, {cfg.label()}", seconds, work=2.0 * m * n * k,
                         unit="GFLOP/s", detail="; ".join(filter(None, (note, check_arch(arch)))))


def check_arch(arch: str | None) -> str:
    """The default variant's cubin for `arch` (sm_90 builds sm_90a). wgmma exists on sm_90a
    alone, so an older architecture gets no cubin: said here rather than raised, since the
    CPU run above still checked the kernel."""
    if arch is None:
        return ""
    try:
        ck = gemm_hopper.compile(*signature(DEFAULT), arch=arch)
    except ox.TargetError as exc:
        return f"no cubin for {arch}: {str(exc).splitlines()[0]}"
    return f"cubin for {ck.arch}: {len(ck.cubin):,} bytes"


__all__ = ["BK", "Config", "DEFAULT", "FASTEST", "CPU", "gemm_hopper", "matmul", "tensor_maps",
           "launch_config", "signature", "sm_count", "padded", "check", "main", "replace"]


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
