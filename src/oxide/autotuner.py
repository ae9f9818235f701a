"""`ox.autotune`: launch a kernel with whichever of several configs runs fastest.

    @ox.autotune(configs=[ox.Config(BLOCK=256, num_warps=4),
                          ox.Config(BLOCK=1024, num_warps=8)], key=["n"])
    @ox.tile.kernel
    def add(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32], n: i32, BLOCK: Const[int]): ...

    add[lambda c: tile.cdiv(n, c.BLOCK)](a, b, c, n)      # BLOCK is left out of the call

A `Config` gives values to the kernel's `Const` parameters (the same ones in every
config) and to the options a config may change: `num_warps`, `occupancy` and `num_stages` for a tile
kernel, `block` (the launch's block shape) for a SIMT kernel. The grid may be a function
of the config. The first call for a *key* (the values of the arguments named in `key=`,
an array's value being its shape, plus the element type, rank and layout of every array
and the type of every scalar, and the device) launches every config on the call's own
arguments, timed by `ox.testing.do_bench` (CUDA events on a GPU, the wall clock on the
CPU), keeps the fastest in memory and on disk, then launches it. Later calls with that
key launch the choice at once. So timing runs do not show in the outputs, the kernel
must give the same result when run again on the same arguments (no `x += ...` on its own
input); arrays named in `reset_to_zero=` (accumulators) are zeroed before each timing
run and before the launch that follows, so they must start at zero as such arrays do.

A config that does not compile or cannot launch (too much shared memory, a bad
`num_warps`) is skipped and its reason kept in `results`; if none runs, the launch
raises, naming each config's reason. A tuning that lasts over a second shows the config
being timed on the progress line (oxide/progress.py: on a terminal only, and not with
`OXIDE_PROGRESS=0`).

On disk the choice is one JSON file, `<cache dir>/autotune/<sha256>.json`, keyed by the
kernel's source (and what it reaches, as the compile cache keys it), oxide's compiler,
the list of configs, the key and the device's name; `OXIDE_CACHE=0` keeps it off disk.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from oxide import types as T
from oxide.errors import (
    ArgumentError,
    CompileError,
    KernelSyntaxError,
    KernelTypeError,
    LaunchError,
    OxideError,
)
from oxide.kernel import Kernel, _caller_span
from oxide.progress import activity
from oxide.specialize import array_info
from oxide.tracebacks import user_frames_only

FORMAT = 1  # of the JSON files: a file of another format is ignored (and re-tuned)
TILE_OPTIONS = ("num_warps", "occupancy", "num_stages")
SIMT_OPTIONS = ("block",)
MAX_FILE_BYTES = 1 << 20


class Config(Mapping[str, Any]):
    """One candidate of `ox.autotune`: `ox.Config(BLOCK=128, num_warps=4)`.

    Read its values as `c.BLOCK` or `c["BLOCK"]` (a grid function receives it).
    Configs are hashable and compare by their values.
    """

    __slots__ = ("_values",)

    def __init__(self, **values: Any) -> None:
        if not values:
            raise ArgumentError("ox.Config needs at least one value, e.g. "
                                "`ox.Config(BLOCK=128, num_warps=4)`")
        for name, value in values.items():
            try:
                hash(value)
            except TypeError:
                raise ArgumentError(f"ox.Config value `{name}={value!r}` must be a number, "
                                    "a bool or a tuple (something hashable)") from None
        object.__setattr__(self, "_values", dict(values))

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"this ox.Config has no `{name}`; it has "
                                 f"{', '.join(self._values)}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("an ox.Config is immutable: make another one")

    def __hash__(self) -> int:
        return hash(tuple(self._values.items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Config) and self._values == other._values

    def __repr__(self) -> str:
        return f"Config({', '.join(f'{k}={v!r}' for k, v in self._values.items())})"

    def __reduce__(self) -> tuple[Any, ...]:  # copy and pickle without __setattr__
        return (_config, (tuple(self._values.items()),))


def _config(items: tuple[tuple[str, Any], ...]) -> Config:
    return Config(**dict(items))


@dataclass(frozen=True)
class TuneResult:
    """What tuning found for one key: the chosen config, the median milliseconds of each
    config that ran, and why each other one was skipped. `from_disk`: read from the
    cache file of an earlier run, not timed in this process."""

    best: Config
    times_ms: dict[Config, float] = field(default_factory=dict)
    failures: dict[Config, str] = field(default_factory=dict)
    from_disk: bool = False


class Autotuner:
    """A kernel under `@ox.autotune(...)`. Launch with `tuned[grid](*args)`, leaving out the
    Const parameters the configs give; `grid` may be a function of the Config."""

    def __init__(self, kernel: Kernel, configs: tuple[Config, ...], key: tuple[str, ...],
                 warmup: float, rep: float, reset_to_zero: tuple[str, ...]) -> None:
        self.kernel = kernel
        self.configs = configs
        self.key = key
        self.warmup = warmup
        self.rep = rep
        self.reset_to_zero = reset_to_zero
        self.__name__ = kernel.__name__
        self.__qualname__ = kernel.__qualname__
        self.__doc__ = kernel.__doc__
        self.__wrapped__ = kernel
        self.is_tile = bool(getattr(kernel, "is_tile", False))
        options = TILE_OPTIONS if self.is_tile else SIMT_OPTIONS
        self.tuned = tuple(p.name for p in kernel.params if p.name in configs[0]
                           and p.name not in options)
        self.free = tuple(p for p in kernel.params if p.name not in self.tuned)
        self._slot = {p.name: i for i, p in enumerate(self.free)}
        self._key_slots = tuple(self._slot[name] for name in key)
        self._zero_slots = tuple(self._slot[name] for name in reset_to_zero)
        self.results: dict[Any, TuneResult] = {}  # key -> what tuning found
        self._variants: dict[Any, Kernel] = {}  # options -> the kernel with them
        self._by_config: dict[Config, Kernel] = {}
        self._lock = threading.Lock()

    # -- launching -----------------------------------------------------------------------

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        """`tuned[grid]`: a function taking the kernel's arguments (without the tuned
        ones) and `stream=`, which launches the chosen config."""

        def launch_tuned(*args: Any, stream: Any = None, **kwargs: Any) -> None:
            try:
                self.autotuned_launch(grid, args, kwargs, stream, None)
            except OxideError as exc:  # the user's frames and the diagnostic
                user_frames_only(exc)
                raise

        return launch_tuned

    def autotuned_launch(self, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                         stream: Any, device: Any) -> None:
        """One launch: find (or time) the config for these arguments' key, then launch
        it. `ox.launch(tuned, grid, *args)` comes here too."""
        from oxide.runtime.launch import launch

        values = self._bind(args, kwargs)
        dev = _launch_device(device)
        config = self._result(grid, values, dev).best
        launch(self._variant(config), self._grid(grid, config), *self._full(config, values),
               stream=stream, device=dev)

    def _result(self, grid: Any, values: list[Any], dev: Any) -> TuneResult:
        """The choice for these arguments' key: known, on disk, or timed now."""
        key = self._key(values, dev)
        result = self.results.get(key)
        if result is None:
            with self._lock:
                result = self.results.get(key)
                if result is None:
                    result = self._load(key, dev)
                    if result is None:
                        result = self._tune(key, grid, values, dev)
                        for slot in self._zero_slots:  # the timing runs left their sums there
                            _zero(values[slot], self.free[slot].name)
                    self.results[key] = result
        return result

    def best(self, *args: Any, **kwargs: Any) -> Config | None:
        """The config a launch with these arguments (tuned ones left out) would use: from
        this process's tuning or the disk; None when it is not tuned yet."""
        try:
            values = self._bind(args, kwargs)
            dev = _launch_device(None)
        except OxideError as exc:
            user_frames_only(exc)
            raise
        key = self._key(values, dev)
        result = self.results.get(key) or self._load(key, dev)
        return None if result is None else result.best

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:  # raised, then re-raised without this frame: the user's call is the last one
            raise LaunchError(f"`{self.__name__}` is an autotuned kernel: launch it with "
                              f"`{self.__name__}[grid](...)`, the tuned parameters "
                              f"({', '.join(self.tuned) or 'none'}) left out")
        except LaunchError as exc:
            user_frames_only(exc)
            raise

    def __repr__(self) -> str:
        return f"<oxide.autotune {self.__qualname__} over {len(self.configs)} configs>"

    # -- arguments and keys ---------------------------------------------------------------

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        """The values of the untuned parameters, in order, from positions and names."""
        free = self.free
        if len(args) > len(free):
            raise ArgumentError(f"`{self.__name__}` takes {len(free)} arguments when "
                                f"autotuned ({', '.join(p.name for p in free)}); got "
                                f"{len(args)}", )
        values: list[Any] = list(args) + [_MISSING] * (len(free) - len(args))
        for name, value in kwargs.items():
            slot = self._slot.get(name)
            if slot is None:
                if name in self.tuned:
                    raise ArgumentError(f"`{name}` is given by ox.autotune's configs: leave "
                                        f"it out of the call of `{self.__name__}`")
                raise ArgumentError(f"`{self.__name__}` has no parameter `{name}`")
            if values[slot] is not _MISSING:
                raise ArgumentError(f"`{name}` is given twice (by position and by name)")
            values[slot] = value
        missing = [p.name for p, v in zip(free, values, strict=True) if v is _MISSING]
        if missing:
            raise ArgumentError(f"`{self.__name__}` is missing {', '.join(missing)} "
                                f"(the tuned {', '.join(self.tuned) or 'options'} are left out)")
        return values

    def _key(self, values: list[Any], dev: Any) -> tuple[Any, ...]:
        named = tuple(_key_value(values[s], self.free[s].name) for s in self._key_slots)
        return (dev, named, tuple(_kind(v) for v in values))

    def _full(self, config: Config, values: list[Any]) -> list[Any]:
        """Every parameter's argument: the call's, with the config's tuned values put in."""
        it = iter(values)
        return [config[p.name] if p.name in self.tuned else next(it) for p in self.kernel.params]

    def _grid(self, grid: Any, config: Config) -> Any:
        """What the launch takes: the grid (a function of the config, or not), with a SIMT
        config's `block` as the block."""
        g = grid(config) if callable(grid) else grid
        if not self.is_tile and "block" in config:
            from oxide.runtime.config import LaunchConfig

            return LaunchConfig(grid=g, block=config["block"])
        return g

    def _variant(self, config: Config) -> Kernel:
        """The kernel with the config's options (itself when they change nothing): one
        object per set of options, so each keeps its own compiled specializations."""
        variant = self._by_config.get(config)
        if variant is None:
            variant = self._by_config[config] = self._make_variant(config)
        return variant

    def _make_variant(self, config: Config) -> Kernel:
        kernel = self.kernel
        if self.is_tile:
            from oxide.tile.kernel import tile_options

            base = kernel.options
            options = tile_options(config.get("num_warps", base.num_warps),  # type: ignore[attr-defined]
                                   config.get("occupancy", base.occupancy),  # type: ignore[attr-defined]
                                   base.lineinfo,
                                   num_stages=config.get("num_stages", base.num_stages))  # type: ignore[attr-defined]
        elif "block" in config and kernel.options.block is not None:
            options = _declared_block(kernel.options, config["block"])
        else:
            return kernel
        if options == kernel.options:
            return kernel
        variant = self._variants.get(options)
        if variant is None:
            variant = self._variants[options] = kernel.with_options(options)
        return variant

    # -- tuning --------------------------------------------------------------------------

    def _tune(self, key: tuple[Any, ...], grid: Any, values: list[Any], dev: Any) -> TuneResult:
        from oxide.runtime.launch import launch, synchronize
        from oxide.testing import do_bench

        zero = [(values[s], self.free[s].name) for s in self._zero_slots]
        times: dict[Config, float] = {}
        failures: dict[Config, str] = {}
        errors: list[CompileError | LaunchError] = []
        synchronize(dev)  # the inputs may still be written on another stream
        with activity(f"autotuning `{self.__name__}`") as step:
            for n, config in enumerate(self.configs, 1):
                step.text = (f"autotuning `{self.__name__}`: config {n} of "
                             f"{len(self.configs)}, {config}")
                try:
                    kernel = self._variant(config)
                    cfg = self._grid(grid, config)
                    args = self._full(config, values)

                    def run(kernel: Any = kernel, cfg: Any = cfg, args: Any = args) -> None:
                        for array, name in zero:
                            _zero(array, name)
                        launch(kernel, cfg, *args, device=dev)

                    run()  # compiles: a config that cannot compile or launch fails here
                    synchronize(dev)
                except (CompileError, LaunchError) as exc:
                    failures[config] = _reason(exc)
                    errors.append(exc)
                    continue
                times[config] = do_bench(run, warmup=self.warmup, rep=self.rep, device=dev)
        if not times:
            raise _all_failed(self.__name__, failures, errors)
        best = min(times, key=times.__getitem__)
        result = TuneResult(best, times, failures)
        self._store(key, dev, result)
        return result

    # -- the disk --------------------------------------------------------------------------

    def _path(self, key: tuple[Any, ...], dev: Any) -> Path | None:
        """The key's file, or None when nothing goes to disk (`OXIDE_CACHE=0`, or a kernel
        whose source the compile cache cannot key)."""
        from oxide.runtime import cache

        return cache.choice_path("autotune", f"oxide-autotune-{FORMAT}", self.kernel,
                                 repr(self.configs), repr(self.key), repr(key[1:]),
                                 _device_name(dev))

    def _load(self, key: tuple[Any, ...], dev: Any) -> TuneResult | None:
        """The choice an earlier run stored for this key, or None (missing, unreadable,
        or for other configs: any doubt re-tunes)."""
        from oxide.runtime.safe_read import read_regular_file

        path = self._path(key, dev)
        if path is None:
            return None
        try:
            data = json.loads(read_regular_file(path, MAX_FILE_BYTES))
            names = [repr(c) for c in self.configs]
            if data["format"] != FORMAT or data["configs"] != names:
                return None
            best = data["best"]
            times = {self.configs[names.index(k)]: float(v) for k, v in data["times_ms"].items()}
            failures = {self.configs[names.index(k)]: str(v)
                        for k, v in data["failures"].items()}
            if not (isinstance(best, int) and 0 <= best < len(names)):
                return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        return TuneResult(self.configs[best], times, failures, from_disk=True)

    def _store(self, key: tuple[Any, ...], dev: Any, result: TuneResult) -> None:
        from oxide.runtime import cache_layout

        path = self._path(key, dev)
        if path is None:
            return
        data = {"format": FORMAT, "kernel": self.__qualname__, "device": _device_name(dev),
                "key": repr(key[1:]), "configs": [repr(c) for c in self.configs],
                "best": self.configs.index(result.best),
                "times_ms": {repr(c): t for c, t in result.times_ms.items()},
                "failures": {repr(c): r for c, r in result.failures.items()}}
        cache_layout.write(path.parent.parent, f"autotune/{path.name}",
                           json.dumps(data, indent=1).encode())


# ---------------------------------------------------------------------------------------
# The decorator


def autotune(configs: Sequence[Config], key: Sequence[str] = (), warmup: float = 25.0,
             rep: float = 100.0, reset_to_zero: Sequence[str] = ()) -> Callable[[Any], Autotuner]:
    """Tune a kernel over `configs`, once per value of the `key` arguments.

    `warmup` and `rep` are `do_bench`'s budgets per config, in milliseconds.
    `reset_to_zero` names array arguments zeroed before each timing run (accumulators).

    >>> @ox.autotune(configs=[ox.Config(BLOCK=128), ox.Config(BLOCK=512)], key=["n"])  # doctest: +SKIP
    ... @ox.tile.kernel
    ... def add(a: Slice[f32], c: DisjointSlice[f32], n: i32, BLOCK: Const[int]): ...
    >>> add[lambda c: tile.cdiv(n, c.BLOCK)](a, c, n)  # doctest: +SKIP
    """
    try:
        configs = tuple(configs) if isinstance(configs, (list, tuple)) else configs
        if (not isinstance(configs, tuple) or not configs
                or not all(isinstance(c, Config) for c in configs)):
            raise KernelTypeError(f"ox.autotune's `configs` must be a non-empty list of "
                                  f"ox.Config, not {configs!r}", _caller_span(1, "configs"),
                                  hint="e.g. `configs=[ox.Config(BLOCK=128), "
                                       "ox.Config(BLOCK=256)]`")
        names = {"key": key, "reset_to_zero": reset_to_zero}
        for what, value in names.items():
            if isinstance(value, str) or not all(isinstance(n, str) for n in value):
                raise KernelTypeError(f"ox.autotune's `{what}` must be a list of parameter "
                                      f"names, not {value!r}", _caller_span(1, what),
                                      hint=f'e.g. `{what}=["n"]`')
        for what, value in (("warmup", warmup), ("rep", rep)):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not ok or value < 0 or (what == "rep" and value == 0):
                raise KernelTypeError(f"ox.autotune's `{what}` must be milliseconds (a number "
                                      f"{'> 0' if what == 'rep' else '>= 0'}), not {value!r}",
                                      _caller_span(1, what))
        key_names, zero_names = tuple(key), tuple(reset_to_zero)

        def decorate(kernel: Any) -> Autotuner:
            try:
                _check(kernel, configs, key_names, zero_names)
            except OxideError as exc:
                user_frames_only(exc)
                raise
            return Autotuner(kernel, configs, key_names, float(warmup), float(rep), zero_names)

        return decorate
    except OxideError as exc:  # the user's frames and the diagnostic
        user_frames_only(exc)
        raise


def _check(kernel: Any, configs: tuple[Config, ...], key: tuple[str, ...],
           zero: tuple[str, ...]) -> None:
    """At decoration: each config names Const parameters (the same ones) and options the
    kind of kernel has; `key` and `reset_to_zero` name parameters the call still passes."""
    if not isinstance(kernel, Kernel):
        what = "an autotuned kernel" if isinstance(kernel, Autotuner) else repr(kernel)
        raise KernelSyntaxError(f"@ox.autotune decorates an @ox.kernel or @ox.tile.kernel, "
                                f"not {what}", _caller_span(2),
                                hint="write `@ox.autotune(...)` above `@ox.tile.kernel` (or "
                                     "`@ox.kernel`), once")
    tile = bool(getattr(kernel, "is_tile", False))
    options = TILE_OPTIONS if tile else SIMT_OPTIONS
    params = {p.name: p for p in kernel.params}
    consts = None
    for config in configs:
        for name in config:
            if name in options:
                continue
            p = params.get(name)
            if p is None or not isinstance(p.annotation, T.ConstType):
                raise KernelTypeError(*_bad_name(kernel, name, p is None, tile),
                                      hint=_options_hint(tile))
        named = tuple(n for n in config if n not in options)
        if consts is None:
            consts = named
        elif set(named) != set(consts):
            raise KernelTypeError(f"every ox.Config of `{kernel.__name__}` must give the same "
                                  f"Const parameters: {configs[0]} gives "
                                  f"{', '.join(consts) or 'none'}, {config} gives "
                                  f"{', '.join(named) or 'none'}", _caller_span(2, "configs"))
    tuned = set(consts or ())
    for what, names in (("key", key), ("reset_to_zero", zero)):
        for name in names:
            p = params.get(name)
            if p is None or name in tuned:
                why = "is tuned by the configs" if p is not None else "is not a parameter"
                raise KernelTypeError(f"ox.autotune's `{what}` names `{name}`, which {why} of "
                                      f"`{kernel.__name__}`", _caller_span(2, name),
                                      hint=f"name parameters the call passes: "
                                           f"{', '.join(n for n in params if n not in tuned)}")
            if what == "reset_to_zero" and not isinstance(p.annotation, T.ArrayType):
                raise KernelTypeError(f"ox.autotune's `reset_to_zero` names `{name}`, which is "
                                      f"not an array parameter", _caller_span(2, name))


def _bad_name(kernel: Any, name: str, missing: bool, tile: bool) -> tuple[str, Any]:
    what = "no parameter" if missing else "a parameter that is not Const"
    return (f"ox.Config value `{name}` names {what} of `{kernel.__name__}`",
            _caller_span(3, name))


def _options_hint(tile: bool) -> str:
    if tile:
        return ("a config gives Const parameters, `num_warps`, `occupancy` and `num_stages` of a tile "
                "kernel (its block is num_warps * 32 threads: there is no `block`)")
    return ("a config gives Const parameters, and `block` (the launch's block shape) of a "
            "SIMT kernel; `num_warps`, `occupancy` and `num_stages` are tile kernels' options")


# ---------------------------------------------------------------------------------------
# Helpers


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def _launch_device(device: Any) -> Any:
    """The device a launch goes to: `device=`, else the current one (as ox.launch picks)."""
    from oxide.runtime.device import current_device, parse_device

    return current_device() if device is None else parse_device(device)


def _key_value(value: Any, name: str) -> Any:
    """A key argument's part of the key: its value, or an array's shape."""
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    shape = getattr(value, "shape", None)
    if shape is not None:
        return tuple(int(n) for n in shape)
    if isinstance(value, T.DType):
        return value.name
    try:
        hash(value)
    except TypeError:
        raise ArgumentError(f"ox.autotune key `{name}` is {type(value).__name__}, which cannot "
                            "be part of a key: key on numbers, bools, strings or arrays") from None
    return repr(value)


def _kind(value: Any) -> Any:
    """What the kernel specializes on for an argument: an array's element type, rank and
    layout; a scalar's type. (Per launch: the common types are tested first.)"""
    cls = value.__class__
    if cls is np.ndarray:
        return (value.dtype.str, value.ndim, value.flags.c_contiguous)
    if cls in (int, float, bool):
        return cls.__name__
    info = array_info(value)
    if info is not None:
        return (info.dtype.name, len(info.shape), info.contiguous)
    return type(value).__qualname__


def _zero(array: Any, name: str) -> None:
    """Zero an argument in place: a NumPy array, an ox.DeviceArray, a torch tensor."""
    if isinstance(array, np.ndarray):
        array.fill(0)
        return
    if getattr(array, "_oxide_array", False):
        host = array._host
        if host is not None:
            host.fill(0)
        else:
            from oxide.runtime.gpu import zero_device_memory

            zero_device_memory(array.device.index, array.data_ptr, array.nbytes)
        return
    zero_ = getattr(array, "zero_", None)  # torch
    if callable(zero_):
        zero_()
        return
    fill = getattr(array, "fill", None)  # CuPy
    if callable(fill):
        fill(0)
        return
    raise ArgumentError(f"ox.autotune cannot zero `{name}` (a {type(array).__name__}) for "
                        "reset_to_zero: pass a NumPy array, an ox.DeviceArray or a torch tensor")


def _declared_block(options: Any, block: Any) -> Any:
    """A SIMT kernel that declares `block=` proves its shared memory for that shape: a
    config's `block` makes a variant declaring it (so its proofs are redone)."""
    from oxide.runtime.config import as_dim3

    dims = as_dim3(block, "block")
    size = dims[0] * dims[1] * dims[2]
    if options.max_threads is not None and size > options.max_threads:
        raise LaunchError(f"block {dims} has {size} threads, more than the kernel's "
                          f"max_threads={options.max_threads}")
    return replace(options, block=dims)


def _device_name(dev: Any) -> str:
    """What a tuning result holds for: the GPU's name and architecture, or the host CPU."""
    if dev.is_cpu:
        from oxide.codegen.host import host_target_id

        return host_target_id()
    from oxide.runtime.gpu import gpu_device

    gdev = gpu_device(dev.index)
    return f"{gdev.name} {gdev.arch}"


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _all_failed(name: str, failures: dict[Config, str],
                errors: list[CompileError | LaunchError]) -> Exception:
    """The error when no config ran: the kernel's own error when every config failed the
    same way at the same place (a bug in the body, not in a config: the first config's
    error, with its span), else one listing each config's reason."""
    if len({_where(e) for e in errors}) == 1:
        return errors[0]
    lines = "\n".join(f"  {config}: {reason}" for config, reason in failures.items())
    return LaunchError(f"ox.autotune: no config of `{name}` compiled and launched:\n{lines}")


def _where(exc: BaseException) -> tuple[Any, ...]:
    """An error's kind and place (its message where it has no span)."""
    span = getattr(exc, "span", None)
    if span is None:
        return (type(exc), str(exc))
    return (type(exc), span.file, span.line, span.col)
