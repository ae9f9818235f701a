"""`@ox.tile.kernel`: a kernel that says what one tile block does to whole tiles.

A `TileKernel` is an `oxide.Kernel` (same parameters, specializations, cache,
runtime) whose body the tile frontend lowers (`tile/frontend.py`). Its launch takes
only the grid: a block is always `num_warps * 32` threads, so `kernel[grid](...)` and
`ox.launch(kernel, grid, *args)` fill the block in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oxide.errors import KernelTypeError, LaunchError, UnsupportedFeatureError
from oxide.kernel import (
    DeviceFunction,
    Kernel,
    KernelOptions,
    _caller_span,
    _decorator_locals,
    _require_function,
)
from oxide.runtime.config import LaunchConfig
from oxide.runtime.launch import bind_launch
from oxide.tile.layout import WARP_SIZE


@dataclass(frozen=True)
class TileOptions(KernelOptions):
    """A tile kernel's options: the SIMT ones it fixes, and `num_warps`."""

    num_warps: int = 4


class TileKernel(Kernel):
    """An `@ox.tile.kernel`. Launch with `kernel[grid](*args)` or `ox.launch(kernel, grid, *args)`."""

    is_tile = True

    @property
    def tile_options(self) -> TileOptions:
        return self.options  # type: ignore[return-value]

    @property
    def block_threads(self) -> int:
        return self.tile_options.num_warps * WARP_SIZE

    def tile_config(self, config: Any) -> tuple[LaunchConfig, Any]:
        """(LaunchConfig, stream) from a tile launch's `grid`, `(grid, stream)` or a
        LaunchConfig whose block is the kernel's."""
        if isinstance(config, LaunchConfig):
            if tuple(config.block) != (self.block_threads, 1, 1):
                raise LaunchError(f"`{self.__name__}` is a tile kernel of "
                                  f"{self.tile_options.num_warps} warps: its block is "
                                  f"{self.block_threads} threads, not {config.block}",
                                  )
            return config, None
        stream = None
        grid = config
        if (isinstance(config, tuple) and len(config) == 2
                and not isinstance(config[1], int)):  # (grid, stream)
            grid, stream = config
        if isinstance(grid, int) or (isinstance(grid, tuple) and 1 <= len(grid) <= 3
                                     and all(isinstance(g, int) for g in grid)):
            return LaunchConfig(grid=grid, block=self.block_threads), stream
        raise LaunchError(f"launch the tile kernel `{self.__name__}` with its grid: "
                          f"`{self.__name__}[grid](...)`, grid an int or a tuple of 1 to 3 "
                          f"ints (or `[grid, stream]`)")

    def __getitem__(self, config: Any) -> Any:
        bound = self.__dict__.get("_oxide_bound")
        if bound is not None and bound.config is config:
            return bound
        cfg, stream = self.tile_config(config)
        launch = bind_launch(self, (cfg.grid, cfg.block, stream) if stream is not None else cfg)
        launch.config = config  # the next `kernel[same grid]` reuses it
        return launch

    def __repr__(self) -> str:
        return f"<oxide.tile.kernel {self.__qualname__}>"


class TileFunctionDef(DeviceFunction):
    """`@ox.tile.func`: a tile helper, inlined where a tile kernel (or another helper)
    calls it. A DeviceFunction, so the disk cache's key covers its source too."""

    is_tile_func = True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"`{self.__name__}` is an @ox.tile.func: call it from a tile kernel")

    def __repr__(self) -> str:
        return f"<oxide.tile.func {self.__name__}>"


def _num_warps(n: Any, depth: int) -> int:
    if isinstance(n, int) and not isinstance(n, bool) and n in (1, 2, 4, 8, 16, 32):
        return n
    raise KernelTypeError(f"@ox.tile.kernel option `num_warps` must be 1, 2, 4, 8, 16 or 32, "
                          f"not {n!r}", _caller_span(depth + 1, "num_warps"),
                          hint="a block is num_warps * 32 threads (at most 1024)")


def kernel(fn: Callable[..., Any] | None = None, *, num_warps: int = 4,
           num_stages: int | None = None, occupancy: int | None = None,
           lineinfo: bool = False) -> Any:
    """Declare a tile kernel. `num_warps` (default 4) sets the block's size.

    >>> @ox.tile.kernel  # doctest: +SKIP
    ... def add(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32], B: Const[int]):
    ...     i = tile.bid(0)
    ...     tile.store(c, (i,), tile.load(a, (i,), (B,)) + tile.load(b, (i,), (B,)))
    """
    for name, value in (("num_stages", num_stages), ("occupancy", occupancy)):
        if value is not None:
            raise UnsupportedFeatureError(f"@ox.tile.kernel option `{name}` is not built yet",
                                          _caller_span(1, name),
                                          hint="leave it out; `num_warps` is supported")
    warps = _num_warps(num_warps, 1)
    options = TileOptions(checks=False, contract=True, max_threads=warps * WARP_SIZE,
                          coarsen=False, lineinfo=lineinfo, block=(warps * WARP_SIZE, 1, 1),
                          num_warps=warps)
    if fn is None:
        def decorate(f: Callable[..., Any]) -> TileKernel:
            _require_function(f, "@ox.tile.kernel", 1)
            return TileKernel(f, options, _decorator_locals(1))

        return decorate
    _require_function(fn, "@ox.tile.kernel", 1)
    return TileKernel(fn, options, _decorator_locals(1))


def func(fn: Callable[..., Any]) -> TileFunctionDef:
    """`@ox.tile.func`: a helper of tile kernels. It takes tiles, arrays and numbers,
    and returns a value with a final `return` (or nothing)."""
    _require_function(fn, "@ox.tile.func", 1)
    return TileFunctionDef(fn, _decorator_locals(1))
