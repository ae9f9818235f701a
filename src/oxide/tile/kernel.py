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

from oxide.errors import KernelTypeError, LaunchError, OxideError
from oxide.kernel import (
    Kernel,
    KernelOptions,
    _caller_span,
    _decorator_locals,
    _require_function,
    apply_decorator,
)
from oxide.runtime.config import LaunchConfig, as_int
from oxide.runtime.launch import bind_launch
from oxide.tile.func_def import TileFunctionDef
from oxide.tile.layout import WARP_SIZE
from oxide.tracebacks import user_frames_only

# iterations of loads in flight: on sm_90 each adds a ring buffer of shared memory (a ring
# that does not fit keeps registers), elsewhere a tile of registers; Triton's own configs
# reach 5 to 7 for small tiles
_MAX_STAGES = 8


@dataclass(frozen=True)
class TileOptions(KernelOptions):
    """A tile kernel's options: the SIMT ones it fixes, `num_warps`, and `occupancy`
    (the fewest blocks per SM the GPU code should allow: PTX `.minnctapersm`).
    `num_warps` None: chosen per specialization (`num_warps="auto"`, tile/auto_warps.py)."""

    num_warps: int | None = 4
    occupancy: int | None = None
    num_stages: int = 1


class TileKernel(Kernel):
    """An `@ox.tile.kernel`. Launch with `kernel[grid](*args)` or `ox.launch(kernel, grid, *args)`."""

    is_tile = True

    @property
    def tile_options(self) -> TileOptions:
        return self.options  # type: ignore[return-value]

    @property
    def block_threads(self) -> int:
        return self.tile_options.num_warps * WARP_SIZE  # type: ignore[operator]

    def kernel_for(self, sig: tuple[Any, ...]) -> TileKernel:
        """The kernel a launch with signature `sig` runs: this one (a `num_warps="auto"`
        kernel's answer depends on `sig`)."""
        return self

    def _class_for(self, options: Any) -> type:
        return _kernel_class(options)

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
                and as_int(config[1]) is None):  # (grid, stream): a stream is no size
            grid, stream = config
        if as_int(grid) is not None or (isinstance(grid, tuple) and 1 <= len(grid) <= 3
                                         and all(as_int(g) is not None for g in grid)):
            return LaunchConfig(grid=grid, block=self.block_threads), stream
        raise LaunchError(f"launch the tile kernel `{self.__name__}` with its grid: "
                          f"`{self.__name__}[grid](...)`, grid an int or a tuple of 1 to 3 "
                          f"ints (or `[grid, stream]`)")

    def __getitem__(self, config: Any) -> Any:
        bound = self.__dict__.get("_oxide_bound")
        if bound is not None and bound[0] is config:
            return bound[1]
        try:
            cfg, stream = self.tile_config(config)
        except OxideError as exc:  # the user's frames and the diagnostic (oxide/tracebacks.py)
            user_frames_only(exc)
            raise
        launch = bind_launch(self, (cfg.grid, cfg.block, stream) if stream is not None else cfg)
        self.__dict__["_oxide_bound"] = (config, launch)  # the next `kernel[same grid]` reuses it
        return launch

    def __repr__(self) -> str:
        return f"<oxide.tile.kernel {self.__qualname__}>"


class AutoWarpsKernel(TileKernel):
    """An `@ox.tile.kernel(num_warps="auto")`: the compiler chooses the warps (and the
    occupancy) of each specialization from what its tiles take in registers
    (tile/auto_warps.py), so one kernel serves rows of 256 and of 65536 columns. A launch
    finds the specialization's kernel, a TileKernel of those warps, and launches it: the
    one more lookup a launch pays (the launch's type key, runtime/args.py `read_args`)
    is the price of not naming the warps."""

    @property
    def block_threads(self) -> int:
        raise LaunchError(f"`{self.__name__}` chooses its warps per specialization "
                          f"(num_warps=\"auto\"): `{self.__name__}.kernel_for(signature)` "
                          f"is the kernel of one signature, with its block")

    def kernel_for(self, sig: tuple[Any, ...]) -> TileKernel:
        chosen = self.__dict__.setdefault("_oxide_auto_kernels", {})
        kernel = chosen.get(sig)
        if kernel is None:
            from oxide.tile.auto_warps import choose_warps, remember_choice, remembered_choice

            num_stages = self.tile_options.num_stages
            choice = remembered_choice(self, sig)
            if choice is None:
                choice = choose_warps(self, sig, lambda warps: self.with_options(
                    tile_options(warps, num_stages=num_stages)))
                remember_choice(self, sig, choice)
            options = tile_options(choice.num_warps, choice.occupancy, self.options.lineinfo,
                                   num_stages=num_stages)
            variants = self.__dict__.setdefault("_oxide_auto_variants", {})
            kernel = variants.get(options)
            if kernel is None:
                kernel = variants[options] = self.with_options(options)
            chosen[sig] = kernel
        return kernel

    def compile(self, *args: Any, arch: str | None = None, target: str | None = None) -> Any:
        from oxide.specialize import signature_from

        try:
            kernel = self.kernel_for(signature_from(self, args))
        except OxideError as exc:
            user_frames_only(exc)
            raise
        return kernel.compile(*args, arch=arch, target=target)

    def autotuned_launch(self, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                         stream: Any, device: Any) -> None:
        """`ox.launch(kernel, grid, *args)` and `kernel[grid](*args)`: the launch of the
        kernel the arguments' specialization runs."""
        from oxide.runtime.launch import device_of_launch, launch

        if kwargs:
            from oxide.runtime.args import keyword_args

            args = keyword_args(self, args, kwargs)
        dev = device_of_launch(args, device)
        launch(self._kernel_of(args, dev), grid, *args, stream=stream, device=dev)

    def _kernel_of(self, args: tuple[Any, ...], dev: Any) -> TileKernel:
        """The kernel for these arguments on device `dev`, by the launch's own type key
        (runtime/args.py: what a launch specializes on) and its signature, made once per
        key."""
        from oxide.runtime.args import plan_for, read_args

        key, views = read_args(self, args, dev)
        by_key = self.__dict__.setdefault("_oxide_auto_by_key", {})
        kernel = by_key.get((dev, key))
        if kernel is None:
            plan = plan_for(self, (dev, key), args, views, dev)
            kernel = by_key[(dev, key)] = self.kernel_for(plan.signature)
        return kernel

    def __getitem__(self, config: Any) -> Any:
        def launch_auto(*args: Any, stream: Any = None, **kwargs: Any) -> None:
            try:
                self.autotuned_launch(config, args, kwargs, stream, None)
            except OxideError as exc:
                user_frames_only(exc)
                raise

        return launch_auto

    def __repr__(self) -> str:
        return f"<oxide.tile.kernel {self.__qualname__} (num_warps=\"auto\")>"


def _kernel_class(options: TileOptions) -> type[TileKernel]:
    return AutoWarpsKernel if options.num_warps is None else TileKernel


_MAX_OCCUPANCY = 32  # blocks per SM: the most any CUDA GPU holds (sm_80 and later)
AUTO = "auto"  # `num_warps=AUTO`: the compiler chooses


def _num_warps(n: Any, depth: int | None) -> int:
    count = as_int(n)
    if count is not None and count in (1, 2, 4, 8, 16, 32):
        return count
    raise KernelTypeError(f"@ox.tile.kernel option `num_warps` must be 1, 2, 4, 8, 16 or 32, "
                          f"not {n!r}", _span(depth, "num_warps"),
                          hint="a block is num_warps * 32 threads (at most 1024)")


def _occupancy(n: Any, warps: int, depth: int | None) -> int | None:
    """`occupancy=N` asks for N blocks per SM; N blocks of `warps` warps must fit in the
    2048 threads an SM holds, or ptxas could never honour it."""
    if n is None:
        return None
    limit = min(_MAX_OCCUPANCY, 2048 // (warps * WARP_SIZE))
    count = as_int(n)
    if count is not None and 1 <= count <= limit:
        return count
    raise KernelTypeError(f"@ox.tile.kernel option `occupancy` must be an int from 1 to {limit} "
                          f"for blocks of {warps} warps, not {n!r}", _span(depth, "occupancy"),
                          hint="it is the fewest blocks per SM the kernel should reach; an SM "
                               "holds 2048 threads, i.e. 2048 // (num_warps * 32) blocks")


def _span(depth: int | None, needle: str) -> Any:
    """The decorator's line `depth` frames up, or no span (options made by ox.autotune)."""
    return None if depth is None else _caller_span(depth + 2, needle)


def _num_stages(n: Any, depth: int | None) -> int:
    if n is None:
        return 1
    count = as_int(n)
    if count is not None and 1 <= count <= _MAX_STAGES:
        return count
    raise KernelTypeError(f"@ox.tile.kernel option `num_stages` must be an int from 1 to "
                          f"{_MAX_STAGES}, not {n!r}", _span(depth, "num_stages"),
                          hint="it is how many loop iterations' tile loads are in flight: 2 "
                               "loads the next iteration's tiles while this one computes")


def tile_options(num_warps: int | str | None = 4, occupancy: int | None = None,
                 lineinfo: bool = False, depth: int | None = None,
                 num_stages: int | None = None) -> TileOptions:
    """Checked TileOptions. `depth` (frames above the caller) locates a bad value's
    diagnostic at a decorator line; ox.autotune passes None and keeps the message as
    the reason a config was skipped. `num_warps` "auto" (or None) leaves the warps and
    the occupancy to the compiler."""
    if num_warps is None or num_warps == AUTO:
        if occupancy is not None:
            raise KernelTypeError("@ox.tile.kernel(num_warps=\"auto\") chooses the occupancy "
                                  "too: leave `occupancy` out",
                                  _span(None if depth is None else depth + 1, "occupancy"),
                                  hint="or give num_warps, and occupancy for those warps")
        return TileOptions(checks=False, contract=True, max_threads=32 * WARP_SIZE,
                           coarsen=False, lineinfo=lineinfo, block=None, num_warps=None,
                           num_stages=_num_stages(num_stages,
                                                  None if depth is None else depth + 1))
    warps = _num_warps(num_warps, None if depth is None else depth + 1)
    occ = _occupancy(occupancy, warps, None if depth is None else depth + 1)
    stages = _num_stages(num_stages, None if depth is None else depth + 1)
    return TileOptions(checks=False, contract=True, max_threads=warps * WARP_SIZE,
                       coarsen=False, lineinfo=lineinfo, block=(warps * WARP_SIZE, 1, 1),
                       num_warps=warps, occupancy=occ, num_stages=stages)


def kernel(fn: Callable[..., Any] | None = None, *, num_warps: int | str = 4,
           num_stages: int | None = None, occupancy: int | None = None,
           lineinfo: bool = False) -> Any:
    """Declare a tile kernel. `num_warps` (default 4) sets the block's size.

    `num_warps="auto"` leaves the block's size, and the occupancy, to the compiler, for
    each specialization: the fewest warps (4 to 32) whose threads hold the tiles live at
    once in 64 registers each, and blocks enough to fill half an SM's threads (32 warps
    where none fits; tile/auto_warps.py). A softmax row of 1024 f32 columns then runs on
    4 warps and one of 32768 on 32, without spilling. Kernels with `tile.mma` still name
    their warps.

    `occupancy=N` asks the GPU code to leave room for N blocks per SM (PTX
    `.minnctapersm N`, beside `.maxntid`): ptxas then caps the registers per thread so
    that N blocks fit, and on sm_90 the product rings and the TMA stores' buffers stay
    within the SM's shared memory divided by N. It changes nothing on the CPU.

    `num_stages=S` (1 to 8, default 1) software-pipelines the tile loads of `for ... in
    range(...)` loops: a `tile.load(...)` in a top-level statement of the body (`x =
    tile.load(...)`, or inside an expression such as `tile.mma(tile.load(...), ...)`,
    though not under a conditional expression) whose arguments depend only on the loop
    variable and on names the body does not assign is issued S - 1 iterations ahead (before the loop for the first iterations, then at the
    top of each iteration for a later one), so those loads overlap the body's work. The
    results are the same (loads past an array read their padding, and cannot fault); the
    cost is S - 1 more tiles of registers per pipelined load.

    >>> @ox.tile.kernel  # doctest: +SKIP
    ... def add(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32], B: Const[int]):
    ...     i = tile.bid(0)
    ...     tile.store(c, (i,), tile.load(a, (i,), (B,)) + tile.load(b, (i,), (B,)))
    """
    try:
        options = tile_options(num_warps, occupancy, lineinfo, depth=1, num_stages=num_stages)
        return apply_decorator(fn, "@ox.tile.kernel",
                               lambda f, localns: _kernel_class(options)(f, options, localns))
    except OxideError as exc:
        user_frames_only(exc)
        raise


def func(fn: Callable[..., Any]) -> TileFunctionDef:
    """`@ox.tile.func`: a helper of tile kernels. It takes tiles, arrays and numbers,
    and returns a value with a final `return` (or nothing)."""
    try:
        _require_function(fn, "@ox.tile.func", 1)
        return TileFunctionDef(fn, _decorator_locals(1))
    except OxideError as exc:
        user_frames_only(exc)
        raise
