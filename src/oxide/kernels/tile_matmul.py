"""`tile.mma` on Hopper: a tile kernel that is the canonical matmul K loop runs on sm_90
as the warp-specialized wgmma GEMM (`hopper_gemm.gemm_hopper`).

The tile lowering of `tile.mma` (tile/mma_lower.py) gives each block its own registers,
shared memory and mma.sync instructions: about 0.2x cuBLAS on an H200. The speed of a
Hopper GEMM comes from what one block of a tile kernel cannot say: TMA copies into a
ring of shared buffers, a producer warp group feeding two consumer warp groups, a
persistent grid. So a kernel whose body is exactly C = A @ B, tile by tile
(tile/matmul_pattern.py), is launched as that GEMM over the same output region instead
of as written. Its meaning does not change: every block of the written kernel computes
its BM x BN tile of C over all of A's columns, and so does the GEMM, for the C tiles the
grid covers; the f32 sums differ only in their order (tensor cores accumulate in an
unspecified order either way, docs/language.md).

`launch` declines (returns False: the kernel then compiles and runs as written, which is
also what reports any error) unless all of this holds: a GPU of compute capability 9.0;
A, B and C bf16 device arrays on it, row-major with 16-byte-aligned rows (TMA's rule),
A (M x K), B (K x N), C (M x N); a grid covering all of C (BM x BN tiles, z = 1); tile
sizes powers of two with BM, BN in 16..256 and BK in 16..128; C not overlapping A or B
(the written kernel's launch raises AliasingError for that); sizes below 2^31.
`OXIDE_TILE_WGMMA=0` turns the template off (the benchmark's comparison, a debugging aid).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Any

from oxide import types as T
from oxide.kernels.hopper_gemm import FASTEST, Config, boxes, gemm_hopper, launch_config
from oxide.runtime.launch import launch as ox_launch
from oxide.runtime.tensormap import TensorMap
from oxide.runtime.views import BadArray, view_of
from oxide.tile.matmul_pattern import MatmulPattern

ARCH = "sm_90"  # wgmma and TMA: Hopper (sm_90a code; the device reports 9.0)
_MAX_I32 = 2**31 - 1
_MAPS: OrderedDict[tuple[Any, ...], TensorMap] = OrderedDict()  # see `_tensor_map`
_MAP_CACHE_SIZE = 32


def enabled() -> bool:
    return os.environ.get("OXIDE_TILE_WGMMA", "1") != "0"


def config_for(m: int, n: int, k: int) -> Config:
    """The GEMM variant for an M x N x K product: FASTEST (128 x 256 tiles, 3 stages,
    TMA-store epilogue), 0.98x cuBLAS at 4096^3 and 8192^3 on the H200; no variant timed
    was faster at either size (benchmarks/gemm_bench.py), so one serves all sizes."""
    return FASTEST


def launch(kernel: Any, pattern: MatmulPattern, config: Any, args: tuple[Any, ...],
           stream: Any, device: Any) -> bool:
    """Run `kernel` (matching `pattern`) over `config` as the wgmma GEMM; False where it
    cannot (see the module docstring), having launched nothing."""
    if device.is_cpu or not enabled() or len(args) != len(kernel.params):
        return False
    grid = tuple(config.grid)
    if grid[2] != 1 or getattr(config, "cluster", None) not in (None, (1, 1, 1)):
        return False
    sizes = pattern.sizes(kernel.params, args)
    if not all(_power_of_two(s, 16, 128 if d == 2 else 256) for d, s in enumerate(sizes)):
        return False
    try:
        a, b, c = (view_of(args[p]) for p in (pattern.a, pattern.b, pattern.c))
    except BadArray:
        return False
    if not all(_tma_ready(v, device.index) for v in (a, b, c)):
        return False
    (m, k), (k2, n) = a.shape, b.shape
    if c.shape != (m, n) or k2 != k or 0 in (m, n, k) or max(m, n, k) > _MAX_I32:
        return False
    bm, bn, _ = sizes
    rows_blocks, cols_blocks = (grid[0], grid[1]) if pattern.row_axis == 0 else (grid[1], grid[0])
    if rows_blocks * bm < m or cols_blocks * bn < n:
        return False  # the written kernel leaves part of C alone: so must we
    if _overlap(c, a) or _overlap(c, b):
        return False
    if _device_arch(device.index) != ARCH:
        return False
    cfg = config_for(m, n, k)
    box_a, box_b, box_c = boxes(cfg)
    ta = _tensor_map(args[pattern.a], a, box_a)
    tb = _tensor_map(args[pattern.b], b, box_b)
    tc = _tensor_map(args[pattern.c], c, box_c) if cfg.tma_store else ta
    ox_launch(gemm_hopper, launch_config(m, n, cfg, _sm_count(device.index)), ta, tb,
              args[pattern.c], tc, m, n, k, *cfg.consts(), stream=stream, device=device)
    return True


def _power_of_two(x: Any, low: int, high: int) -> bool:
    return type(x) is int and low <= x <= high and x & (x - 1) == 0


def _tma_ready(v: Any, device: int) -> bool:
    """A bf16 matrix on `device` that TMA can read: rows contiguous, 16-byte aligned."""
    if v is None or v.dtype != T.bf16 or len(v.shape) != 2 or v.device != device:
        return False
    row = v.shape[1] if v.strides is None else v.strides[0]
    inner = 1 if v.strides is None else v.strides[1]
    return inner == 1 and (row * 2) % 16 == 0 and v.ptr % 16 == 0 and row >= v.shape[1]


def _overlap(x: Any, y: Any) -> bool:
    lo, hi = x.byte_range()
    lo2, hi2 = y.byte_range()
    return lo < hi2 and lo2 < hi


def _tensor_map(array: Any, v: Any, box: tuple[int, int]) -> TensorMap:
    """The 128-byte-swizzled map of `array` (whose view is `v`) with `box`, cached: a
    map is a function of the address, shape and strides alone, so one made for an
    earlier array at the same address serves a later one; the cache keeps no array
    alive (`array` dropped)."""
    key = (v.ptr, v.shape, v.strides, v.device, box)
    tm = _MAPS.get(key)
    if tm is None:
        tm = TensorMap(array, box, swizzle=128)
        tm.array = None
        _MAPS[key] = tm
        if len(_MAPS) > _MAP_CACHE_SIZE:
            _MAPS.popitem(last=False)
    else:
        _MAPS.move_to_end(key)
    return tm


def _device_arch(index: int) -> str:
    from oxide.runtime.gpu import gpu_device

    return str(gpu_device(index).arch)


def _sm_count(index: int) -> int:
    from oxide.runtime.gpu import gpu_device

    return int(gpu_device(index).attribute("MULTIPROCESSOR_COUNT"))
