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

Before its first GPU run for given tile sizes, the kernel is compiled as written (not to
PTX), so whatever it refuses is refused here too with the same diagnostic. `launch`
declines (returns False: the kernel then compiles and runs as written) unless all of
this holds: a GPU of compute capability 9.0; A, B and C bf16 device arrays on it, A
(M x K) and C (M x N) row-major with 16-byte-aligned rows (TMA's rule), B (K x N) so too
or the transpose of such an N x K matrix; a grid covering all of C (BM x BN tiles,
z = 1); tile sizes powers of two with BM, BN in 16..256 and BK in 16..128; C not
overlapping A or B (the written kernel's launch raises AliasingError for that); sizes
below 2^31. `OXIDE_TILE_WGMMA=0` turns the template off (the benchmark's comparison, a
debugging aid).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from oxide import types as T
from oxide.kernels.hopper_gemm import FASTEST, Config, boxes, gemm_hopper, launch_config, replace
from oxide.runtime import cache
from oxide.runtime.array_view import ArrayView
from oxide.runtime.launch import launch as ox_launch
from oxide.runtime.tensormap import TensorMap
from oxide.runtime.views import BadArray, view_of
from oxide.specialize import signature_from
from oxide.tile.matmul_pattern import MatmulPattern

ARCH = "sm_90"  # wgmma and TMA: Hopper (sm_90a code; the device reports 9.0)
_MAX_I32 = 2**31 - 1
_MAPS: OrderedDict[tuple[Any, ...], TensorMap] = OrderedDict()  # see `_tensor_map`
_MAP_CACHE_SIZE = 32


def enabled() -> bool:
    """Whether the template may run (`OXIDE_TILE_WGMMA=0` turns it off; read per launch,
    so a benchmark can time both paths in one process)."""
    return os.environ.get("OXIDE_TILE_WGMMA", "1") != "0"


def config_for(m: int, n: int, k: int) -> Config:
    """The GEMM variant for an M x N x K product: FASTEST (128 x 256 tiles, 3 stages,
    TMA-store epilogue), 0.96-1.00x cuBLAS from 2048^3 to 16384 x 4096 x 4096 on the H200
    (benchmarks/gemm_bench.py, 2026-12-03). Of the variants timed, only group_m 16 came
    close (equal at 4096^3, 1-1.5% faster at 8192^3 in two runs, within run-to-run noise):
    one variant serves all sizes until a size-keyed choice is measured to pay."""
    return FASTEST


@dataclass(frozen=True)
class Plan:
    """How one launch runs as the GEMM: the problem size, the variant, and the views the
    tensor maps describe (B as K x N rows, or as the N x K rows of its transpose)."""

    m: int
    n: int
    k: int
    cfg: Config
    a: ArrayView
    b: ArrayView
    c: ArrayView


def plan(pattern: MatmulPattern, sizes: tuple[Any, Any, Any], grid: tuple[int, ...],
         a: ArrayView | None, b: ArrayView | None, c: ArrayView | None,
         device: int) -> Plan | None:
    """The GEMM launch that computes what the written kernel would, or None (see the
    module docstring). Pure: it reads views and numbers, so the CPU tests check every
    rule. B may be row-major (K x N rows) or the transpose of a row-major N x K matrix
    (`w.T`, as a linear layer holds its weight): the GEMM then reads it K-major."""
    if grid[2] != 1:
        return None
    if not all(_power_of_two(s, 16, 128 if d == 2 else 256) for d, s in enumerate(sizes)):
        return None
    if a is None or b is None or c is None:
        return None
    b_rows = _rows_view(b, device)
    b_cols = None if b_rows is not None else _rows_view(_transposed(b), device)
    if _rows_view(a, device) is None or _rows_view(c, device) is None or (
            b_rows is None and b_cols is None):
        return None
    (m, k), (k2, n) = a.shape, b.shape
    if c.shape != (m, n) or k2 != k or 0 in (m, n, k) or max(m, n, k) > _MAX_I32:
        return None
    bm, bn, _ = sizes
    rows_blocks, cols_blocks = (grid[0], grid[1]) if pattern.row_axis == 0 else (grid[1], grid[0])
    if rows_blocks * bm < m or cols_blocks * bn < n:
        return None  # the written kernel leaves part of C alone: so must we
    if _overlap(c, a) or _overlap(c, b):
        return None
    cfg = config_for(m, n, k)
    if b_rows is None:
        return Plan(m, n, k, replace(cfg, b_mn=False), a, b_cols, c)
    return Plan(m, n, k, cfg, a, b_rows, c)


def launch(kernel: Any, pattern: MatmulPattern, config: Any, args: tuple[Any, ...],
           stream: Any, device: Any) -> bool:
    """Run `kernel` (matching `pattern`) over `config` as the wgmma GEMM; False where it
    cannot (see the module docstring), having launched nothing."""
    if device.is_cpu or not enabled() or len(args) != len(kernel.params):
        return False
    if getattr(config, "cluster", None) not in (None, (1, 1, 1)):
        return False
    try:
        views = [view_of(args[p]) for p in (pattern.a, pattern.b, pattern.c)]
    except BadArray:
        return False
    sizes = pattern.sizes(kernel.params, args)
    p = plan(pattern, sizes, tuple(config.grid), *views, device.index)
    if p is None or _device_arch(device.index) != ARCH:
        return False
    check_written(kernel, args, sizes, dict(zip((pattern.a, pattern.b, pattern.c), views,
                                                strict=True)))
    box_a, box_b, box_c = boxes(p.cfg)
    ta, tb = _tensor_map(p.a, box_a), _tensor_map(p.b, box_b)
    tc = _tensor_map(p.c, box_c) if p.cfg.tma_store else ta
    ox_launch(gemm_hopper, launch_config(p.m, p.n, p.cfg, _sm_count(device.index)), ta, tb,
              args[pattern.c], tc, p.m, p.n, p.k, *p.cfg.consts(), stream=stream,
              device=device)
    return True


def check_written(kernel: Any, args: tuple[Any, ...], sizes: tuple[Any, ...],
                  views: dict[int, ArrayView]) -> None:
    """Compile the kernel as written for these arguments (the frontend and its checks,
    not the PTX), once per tile sizes: what it refuses (tiles too large for shared
    memory, say) is refused here too, with the same diagnostic, rather than run by the
    GEMM on Hopper and refused on every other target. The arrays go in as the types
    their views give (`views`: parameter position -> view), as a launch specializes."""
    checked = kernel.__dict__.setdefault("_oxide_template_checked", set())
    if sizes not in checked:
        sig = [T.ArrayType(p.annotation.access, views[i].dtype, len(views[i].shape),
                           views[i].strides is None) if i in views else a
               for i, (p, a) in enumerate(zip(kernel.params, args, strict=True))]
        # a check that passed in an earlier process passes again (the key covers the
        # source, the constants and the toolchain): the disk remembers it
        key = cache.entry_key(kernel, signature_from(kernel, tuple(sig)), ARCH + "+check")
        if not cache.check_passed(key):
            cache.record_check(key, kernel.compile(*sig, arch=ARCH))
        checked.add(sizes)


def _power_of_two(x: Any, low: int, high: int) -> bool:
    return type(x) is int and low <= x <= high and x & (x - 1) == 0


def _transposed(v: ArrayView) -> ArrayView:
    strides = v.strides if v.strides is not None else T.c_strides(v.shape)
    return ArrayView(v.ptr, tuple(reversed(v.shape)), tuple(reversed(strides)), v.dtype,
                     v.device, None)


def _rows_view(v: ArrayView, device: int) -> ArrayView | None:
    """`v` if it is a bf16 matrix on `device` whose rows TMA can read (each row
    contiguous, rows 16-byte aligned, no overlapping rows), else None."""
    if v.dtype != T.bf16 or len(v.shape) != 2 or v.device != device or v.ptr % 16:
        return None
    row, inner = (v.shape[1], 1) if v.strides is None else v.strides
    if inner != 1 or (row * 2) % 16 or row < v.shape[1]:
        return None
    return v


def _overlap(x: ArrayView, y: ArrayView) -> bool:
    lo, hi = x.byte_range()
    lo2, hi2 = y.byte_range()
    return lo < hi2 and lo2 < hi


def _tensor_map(v: ArrayView, box: tuple[int, int]) -> TensorMap:
    """The 128-byte-swizzled map of the memory `v` describes, with `box`; cached, since a
    map is a function of the address, shape and strides alone (one made for an earlier
    array at the same address serves a later one), and holding no array alive."""
    key = (v.ptr, v.shape, v.strides, v.device, box)
    tm = _MAPS.get(key)
    if tm is None:
        tm = _MAPS[key] = TensorMap.of_view(v, box, swizzle=128)
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
