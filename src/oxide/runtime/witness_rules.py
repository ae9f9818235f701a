"""Which launch configurations keep a kernel's ThreadIndex witnesses unique.

`thread.index_1d()` is `block_idx.x * block_dim.x + thread_idx.x`: it ignores the
y and z dimensions, so in a launch with `block.y`, `grid.y` (or z) above 1 several
threads hold one witness, and a DisjointSlice write at it races. `index_2d()`
likewise ignores z. Rather than change what a witness means, a launch of a
kernel that creates one must leave the dimensions it ignores at 1: the compiled
kernel records the witness ranks it creates (`CompiledKernel.thread_index_ranks`),
and both runtimes call `check_witness_config` before anything runs (the GPU
runtime once per configuration, with its other configuration checks).
"""

from __future__ import annotations

from collections.abc import Iterable

from oxide.errors import ArgumentError, LaunchError
from oxide.runtime.config import LaunchConfig

# The dimensions a witness of each rank covers; every other one must be 1.
_COVERED_AXES = {1: "x", 2: "xy"}
# Codes from 10 up stand for DisjointSlice writes at index maps (passes/shared_races.py):
# 10 + a bit mask of the grid axes the maps tell blocks apart by; the other grid axes
# must be 1, or two blocks would write one element. They travel in the same
# `thread_index_ranks` field as the ranks, through the disk cache and bundles.
GRID_RULE_BASE = 10
GRID_RULES = frozenset(range(GRID_RULE_BASE, GRID_RULE_BASE + 8))
# A kernel whose full-warp collectives are proved reached by whole warps only where the
# block's x extent is a multiple of 32 (`if thread_idx.x < 32:` around a shuffle, in a
# kernel that does not declare its block shape: passes/uniformity.py).
WHOLE_WARP_ROWS = 20
# A kernel that runs instructions needing every lane of a warp (mma.sync, ldmatrix,
# stmatrix, elect.sync: 21) or of a warp group of 128 threads (wgmma, setmaxnreg: 22)
# and does not declare its block shape (passes/whole_warps.py): a launch whose threads per
# block are not a multiple of that size would run them in a partial warp, undefined on
# the GPU.
WHOLE_WARPS = 21
WHOLE_WARP_GROUPS = 22
GROUP_THREADS = {WHOLE_WARPS: 32, WHOLE_WARP_GROUPS: 128}
# A tile kernel whose DisjointSlice index is the variable of a loop over this block's run
# of rows, `range(b * R, min(b * R + R, n))` with `b * R` in 32 bits (tile/run_witness.py):
# the runs of two blocks are disjoint only while grid[axis] * R stays below 2**31.
# Codes: RUN_RULE_BASE + axis * RUN_AXIS + R.
RUN_RULE_BASE = 1 << 40
RUN_AXIS = 1 << 32
_RUN_LIMIT = (1 << 31) - 1


def run_rule(axis: int, rows: int) -> int:
    """The launch-rule code for runs of `rows` rows per block along grid `axis`."""
    assert 0 <= axis < 3 and 1 <= rows <= _RUN_LIMIT
    return RUN_RULE_BASE + axis * RUN_AXIS + rows


def is_launch_rule(code: int) -> bool:
    """Whether `code` is one oxide emits (the disk cache and bundles check theirs)."""
    if code in (1, 2, 3, WHOLE_WARP_ROWS, WHOLE_WARPS, WHOLE_WARP_GROUPS) or code in GRID_RULES:
        return True
    return (RUN_RULE_BASE <= code < RUN_RULE_BASE + 3 * RUN_AXIS
            and 1 <= (code - RUN_RULE_BASE) % RUN_AXIS <= _RUN_LIMIT)


def grid_rule(axes: frozenset[str] | None) -> tuple[int, ...]:
    """The launch-rule code for index-map writes that tell blocks apart along `axes`."""
    if axes is None:
        return ()
    return (GRID_RULE_BASE + sum(1 << "xyz".index(a) for a in axes),)


def check_witness_config(kernel_name: str, ranks: Iterable[int], cfg: LaunchConfig,
                         tile_block: int | None = None) -> None:
    """Raise LaunchError when `cfg` would give two threads one witness of a rank in `ranks`.
    `tile_block` is a tile kernel's threads per block (None for SIMT kernels).

    >>> check_witness_config("k", (1,), LaunchConfig(grid=4, block=256))
    >>> check_witness_config("k", (2,), LaunchConfig(grid=(4, 4), block=(16, 16)))
    """
    for rank in sorted(set(ranks)):
        if rank == WHOLE_WARP_ROWS:
            _check_whole_warp_rows(kernel_name, cfg)
            continue
        if rank in GROUP_THREADS:
            _check_whole_groups(kernel_name, GROUP_THREADS[rank], cfg)
            continue
        if rank in GRID_RULES:
            _check_grid_rule(kernel_name, rank - GRID_RULE_BASE, cfg, tile_block)
            continue
        if rank >= RUN_RULE_BASE:
            _check_run_rule(kernel_name, *divmod(rank - RUN_RULE_BASE, RUN_AXIS), cfg)
            continue
        covered = _COVERED_AXES.get(rank)
        if covered is None:
            continue
        bad = [f"{what}.{axis} = {n}"
               for what, dims in (("grid", cfg.grid), ("block", cfg.block))
               for axis, n in zip("xyz", dims, strict=True)
               if axis not in covered and n != 1]
        if bad:
            needs = " and ".join(f"grid.{a} = block.{a} = 1" for a in "xyz" if a not in covered)
            raise LaunchError(
                f"`{kernel_name}` uses thread.index_{rank}d(), which is unique only in a launch "
                f"with {needs}; this launch (grid {cfg.grid}, block {cfg.block}) has "
                f"{', '.join(bad)}, so several threads would share one ThreadIndex and "
                f"their DisjointSlice writes would race. Launch with "
                + ("a 1-D grid and block" if rank == 1 else "2-D grids and blocks")
                + (", or use thread.index_2d()" if rank == 1 else ""))


def check_block_shape(kernel_name: str, declared: tuple[int, int, int] | None,
                      cfg: LaunchConfig) -> None:
    """Raise ArgumentError when a kernel declared with `@ox.kernel(block=...)` is launched
    with another block shape: its shared-memory accesses were proved race-free for the
    declared one only (passes/shared_races.py).

    >>> check_block_shape("k", (32, 8, 1), LaunchConfig(grid=4, block=(32, 8)))
    """
    if declared is None or tuple(cfg.block) == declared:
        return
    x, y, z = declared
    spelled = f"{x}" if y == z == 1 else f"({x}, {y})" if z == 1 else f"({x}, {y}, {z})"
    raise ArgumentError(
        f"`{kernel_name}` is declared with block={spelled}, and its shared-memory accesses "
        f"are proved race-free for that shape only; this launch has block {cfg.block}. "
        f"Launch with block={spelled}, or change the kernel's `block=`")


def _check_grid_rule(kernel_name: str, mask: int, cfg: LaunchConfig,
                     tile_block: int | None) -> None:
    bad = [f"grid.{axis} = {n}" for i, (axis, n) in enumerate(zip("xyz", cfg.grid, strict=True))
           if not mask >> i & 1 and n != 1]
    if not bad:
        return
    used = [f"block_idx.{a}" for i, a in enumerate("xyz") if mask >> i & 1]
    if tile_block is not None and not mask:
        raise LaunchError(
            f"`{kernel_name}` writes a DisjointSlice at constant indices only (a 0-d array, "
            f"or an index of constants), which one block alone may write; this launch has "
            f"grid {tuple(cfg.grid)}. Launch it with grid 1, make the array an AtomicSlice "
            "and combine the blocks' values with tile.atomic_add, or index it with "
            "tile.bid(0)")
    if tile_block is not None:
        # `k[4, 128]`, numba's [blocks, threads], is a grid of 4 x 128 blocks to a tile kernel
        axes = [f"tile.bid({i})" for i in range(3) if mask >> i & 1]
        dims = list(cfg.grid)
        while len(dims) > 1 and dims[-1] == 1:
            dims.pop()
        spelled = ", ".join(map(str, dims))
        raise LaunchError(
            f"`{kernel_name}` is a tile kernel: `{kernel_name}[{spelled}]` is a grid of "
            f"({spelled}) blocks, not numba's `[blocks, threads]`: a tile kernel takes only "
            f"its grid, and its blocks are num_warps * 32 = {tile_block} threads. Its stores "
            f"tell blocks apart by {', '.join(axes) if axes else 'nothing'} only, so this "
            f"launch ({', '.join(bad)}) would have several blocks write one element. Launch "
            "with those grid dimensions at 1, or make the store index use them")
    raise LaunchError(
        f"`{kernel_name}` writes a DisjointSlice at an index map that tells blocks apart "
        f"by {', '.join(used) if used else 'nothing (every block writes the same elements)'}"
        f"; this launch has {', '.join(bad)}, so several blocks would write one element. "
        "Launch with those grid dimensions at 1, or make the index use them")


def _check_run_rule(kernel_name: str, axis: int, rows: int, cfg: LaunchConfig) -> None:
    blocks = cfg.grid[axis]
    if blocks * rows > _RUN_LIMIT:
        raise LaunchError(
            f"`{kernel_name}` gives each block a run of {rows} rows, from tile.bid({axis}) * "
            f"{rows} in 32-bit integers; a grid of {blocks} blocks along axis {axis} takes "
            f"that past 2**31 - 1, where it wraps and two blocks' runs could meet. Launch "
            f"fewer than {_RUN_LIMIT // rows + 1} blocks, or compute the run in 64 bits: "
            f"`tile.bid({axis}).astype(i64) * {rows}`")


def _check_whole_warp_rows(kernel_name: str, cfg: LaunchConfig) -> None:
    x = cfg.block[0]
    if x % 32:
        raise LaunchError(
            f"`{kernel_name}` runs warp collectives under conditions such as "
            f"`thread_idx.x < 32`, which whole warps take together only when the block's x "
            f"extent is a multiple of 32; this launch has block {cfg.block}. Launch with "
            f"block.x a multiple of 32 (e.g. {max(32, (x + 31) // 32 * 32)}), or declare the "
            "block shape with `@ox.kernel(block=...)` to have it checked at compile time")


def _check_whole_groups(kernel_name: str, size: int, cfg: LaunchConfig) -> None:
    threads = cfg.threads_per_block
    if threads % size:
        unit, ops = (("warp", "ox.mma_sync, ox.ldmatrix, ox.stmatrix or ox.elect_sync")
                     if size == 32 else ("warp group", "ox.wgmma or ox.setmaxnreg"))
        raise LaunchError(
            f"`{kernel_name}` runs {ops}, which the {size} threads of a {unit} execute "
            f"together; this launch's block {cfg.block} has {threads} threads, so its last "
            f"{unit} is partial. Launch blocks of a multiple of {size} threads (e.g. "
            f"{max(size, -(-threads // size) * size)}), or declare the block shape with "
            "`@ox.kernel(block=...)` to have it checked at compile time")
