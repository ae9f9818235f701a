"""`oxide bench FILE.py::KERNEL`: time one kernel without writing a harness.

Two ways to say what to launch:

* **Generated inputs** (the default). The kernel's signature comes from `--types` and
  `--const` exactly as for `oxide inspect` (`oxide.cli.signatures`: TypeVars are f32,
  arrays C-contiguous with their declared rank). Every array is filled with random data
  of its dtype (floats uniform in [0, 1), integers in [0, 128), bools either), with the
  shape `--shape` gives it (default: 1M elements, 1024x1024, 128x128x64 by rank); each
  scalar takes `--arg NAME=VALUE` (default 1 for integers, 0.5 for floats, False). The
  launch covers the largest array with one thread per element: 1-D blocks of 256, or
  16x16 blocks over (cols, rows) for a kernel that calls `thread.index_2d()`; `--block`
  and `--grid` override either part. A tile kernel's block is its own (num_warps * 32),
  and its grid has one block per tile of its DisjointSlice stores, along each axis
  `tile.bid(axis)` indexes (`oxide.tile.grid`); where the stores do not say (a
  persistent loop, no store at a `tile.bid`), `--grid` is required.
* **A hook in the file**: `def bench_KERNEL(size=None, device=None)` returning
  `(config, args)` or `(config, args, nbytes)`. It wins over generated inputs, for
  kernels whose inputs must mean something (indices, a matrix shape the config depends
  on). It receives `--size` and the device, if its signature takes them.

It runs on GPU 0 (or `--device`), else on the CPU with a note; arrays are copied to the
GPU before timing. `ox.testing.do_bench` times it (CUDA events and an L2 flush on a GPU,
`perf_counter` on the CPU); the report is the median and minimum time, and GB/s at the
median, counting every array argument's bytes once (or the hook's `nbytes`).
"""

from __future__ import annotations

import ast
import inspect
import json
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from oxide.cli.loading import device_spec, load_kernel
from oxide.cli.signatures import SignatureError, compile_args, parse_consts, parse_types

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

DEFAULT_SHAPES = {1: (1 << 20,), 2: (1024, 1024), 3: (128, 128, 64)}
DEFAULT_BLOCKS = {1: (256,), 2: (16, 16)}
INT_HIGH = 128  # random integers lie in [0, INT_HIGH): valid in every integer dtype
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_DIM = re.compile(r"\s*(\d+)\s*([KMG]?)\s*", re.IGNORECASE)


class BenchSpecError(ValueError):
    """A `--shape`, `--arg`, `--grid`, `--block` or hook result oxide cannot use; says why."""


@dataclass
class Workload:
    """What to time: one launch configuration and its arguments (on the host until placed)."""

    config: Any  # ox.LaunchConfig
    args: list[Any]
    nbytes: int | None  # bytes the GB/s figure counts; None: not counted
    lines: list[str] = field(default_factory=list)  # what each argument is, for the report
    origin: str = "generated inputs"
    grid_from: str = ""  # how the grid was chosen, for the report and the JSON


# ---------------------------------------------------------------------------
# Parsing the command line


def parse_dims(text: str) -> tuple[int, ...]:
    """`"4096x4096"` -> (4096, 4096); `"16M"` -> (16777216,): 1 to 3 positive extents, each
    with an optional binary K/M/G suffix."""
    parts = re.split(r"[x,]", text.strip()) if text.strip() else []
    dims = []
    for part in parts:
        m = _DIM.fullmatch(part)
        if m is None or int(m.group(1)) == 0:
            raise BenchSpecError(f"{text!r} is not a shape: give 1 to 3 positive extents "
                                 "like 1048576, 16M or 4096x4096")
        dims.append(int(m.group(1)) * _SUFFIX[m.group(2).upper()])
    if not 1 <= len(dims) <= 3:
        raise BenchSpecError(f"{text!r} is not a shape: give 1 to 3 positive extents "
                             "like 1048576, 16M or 4096x4096")
    return tuple(dims)


def parse_shapes(items: list[str], names: list[str]
                 ) -> tuple[dict[int, tuple[int, ...]], dict[str, tuple[int, ...]]]:
    """`--shape` values: (shape per rank for every array, shape per named parameter)."""
    by_rank: dict[int, tuple[int, ...]] = {}
    by_name: dict[str, tuple[int, ...]] = {}
    for item in items:
        name, sep, dims = item.rpartition("=")
        if sep:
            name = name.strip()
            if name not in names:
                raise BenchSpecError(f"--shape {item!r}: the kernel has no array parameter "
                                     f"`{name}` (its arrays: {', '.join(names) or 'none'})")
            by_name[name] = parse_dims(dims)
        else:
            shape = parse_dims(dims)
            by_rank[len(shape)] = shape
    return by_rank, by_name


def parse_values(items: list[str], names: list[str]) -> dict[str, Any]:
    """`--arg NAME=VALUE` for scalar parameters, values as Python literals."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise BenchSpecError(f"--arg takes NAME=VALUE, got {item!r}")
        if name not in names:
            raise BenchSpecError(f"--arg {item!r}: the kernel has no scalar parameter "
                                 f"`{name}` (its scalars: {', '.join(names) or 'none'})")
        try:
            out[name] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError) as exc:
            raise BenchSpecError(f"--arg {item!r}: the value must be a Python literal") from exc
    return out


# ---------------------------------------------------------------------------
# Generated inputs


def random_array(dtype: Any, shape: tuple[int, ...], rng: Any) -> Any:
    """Random data of an oxide dtype: floats in [0, 1), integers in [0, 128), bools."""
    import numpy as np

    if dtype.is_bool:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype.is_int:
        return rng.integers(0, INT_HIGH, size=shape).astype(dtype.numpy)
    return rng.random(size=shape, dtype=np.float32).astype(dtype.numpy)


def scalar_value(dtype: Any, name: str, given: dict[str, Any]) -> Any:
    """`--arg`'s value for a scalar parameter (converted to its dtype), else the default."""
    import numpy as np

    value = given.get(name, False if dtype.is_bool else 1 if dtype.is_int else 0.5)
    try:
        with np.errstate(all="raise"):
            converted = dtype.numpy.type(value)
    except (TypeError, ValueError, OverflowError, FloatingPointError) as exc:
        raise BenchSpecError(f"--arg {name}={value!r} is not a {dtype.name}: {exc}") from None
    if dtype.is_int and (isinstance(value, float) or int(converted) != value):
        raise BenchSpecError(f"--arg {name}={value!r} is not a {dtype.name} value")
    return converted


def generated_workload(kernel: Any, sig: tuple[Any, ...], shapes: list[str],
                       values: list[str], grid: str | None, block: str | None,
                       shared_mem: int, seed: int) -> Workload:
    """Arguments for `sig` (random arrays, scalar values) and a launch covering them."""
    import numpy as np

    from oxide import types as T
    from oxide.specialize import ConstValue

    params = kernel.params
    arrays = [p.name for p, s in zip(params, sig, strict=True) if isinstance(s, T.ArrayType)]
    scalars = [p.name for p, s in zip(params, sig, strict=True) if isinstance(s, T.DType)]
    by_rank, by_name = parse_shapes(shapes, arrays)
    given = parse_values(values, scalars)
    rng = np.random.default_rng(seed)
    args: list[Any] = []
    lines = []
    largest: Any = None
    for p, spec in zip(params, sig, strict=True):
        if isinstance(spec, ConstValue):
            args.append(spec.value)
            lines.append(f"{p.name} = {spec.value!r} (Const)")
        elif isinstance(spec, T.ArrayType):
            shape = by_name.get(p.name) or by_rank.get(spec.rank) or DEFAULT_SHAPES[spec.rank]
            if len(shape) != spec.rank:
                raise BenchSpecError(f"--shape {p.name}={'x'.join(map(str, shape))} has "
                                     f"{len(shape)} dimension(s); `{p.name}` is a {spec!r}")
            arr = random_array(spec.dtype, shape, rng)
            args.append(arr)
            lines.append(f"{p.name}: {spec.dtype.name}[{', '.join(map(str, shape))}] random "
                         f"({_size(arr.nbytes)})")
            if largest is None or arr.size > largest.size:
                largest = arr
        else:
            value = scalar_value(spec, p.name, given)
            args.append(value)
            lines.append(f"{p.name} = {value.item()!r} ({spec.name}"
                         + (")" if p.name in given else f", default; --arg {p.name}=VALUE)"))
    if getattr(kernel, "is_tile", False):
        shapes = {p.name: a.shape for p, a in zip(params, args, strict=True)
                  if isinstance(a, np.ndarray)}
        config, how = tile_launch_config(kernel, sig, shapes, grid, block, shared_mem)
    else:
        extent = largest.shape if largest is not None else (1,)
        config = launch_config(kernel, extent, uses_index_2d(kernel), grid, block, shared_mem)
        how = "--grid" if grid is not None else \
            f"one thread per element of the largest array ({'x'.join(map(str, extent))})"
    nbytes = sum(a.nbytes for a in args if isinstance(a, np.ndarray))
    return Workload(config, args, nbytes or None, lines, grid_from=how)


def tile_launch_config(kernel: Any, sig: tuple[Any, ...], shapes: dict[str, tuple[int, ...]],
                       grid: str | None, block: str | None, shared_mem: int
                       ) -> tuple[Any, str]:
    """A tile kernel's launch: its own block (num_warps * 32 threads) and one block per
    output tile (tile/grid.py), or `--grid`; (config, how the grid was chosen)."""
    from oxide.runtime.config import LaunchConfig
    from oxide.tile.grid import GridUnknown, output_grid

    kernel = kernel.kernel_for(sig)  # num_warps="auto": the kernel of this signature
    threads = kernel.block_threads
    if block is not None:
        raise BenchSpecError(f"`{kernel.__name__}` is a tile kernel: its block is num_warps * "
                             f"32 = {threads} threads; drop --block")
    if grid is not None:
        g, how = parse_dim3(grid, "grid"), "--grid"
    else:
        try:
            derived = output_grid(kernel, sig, shapes)
        except GridUnknown as exc:
            raise BenchSpecError(f"`{kernel.__name__}` is a tile kernel, and its grid does not "
                                 f"follow from its stores: {exc}; give it with --grid") from None
        g = derived.grid
        how = "one block per output tile (" + "; ".join(derived.reasons) + ")"
    return LaunchConfig(grid=g, block=threads, shared_mem_bytes=shared_mem), how


def uses_index_2d(kernel: Any) -> bool:
    """Whether the kernel's body calls `index_2d()` (its threads then walk 2-D)."""
    for node in ast.walk(kernel.source.tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name == "index_2d":
                return True
    return False


def parse_dim3(text: str, what: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in re.split(r"[x,]", text.strip()))
    except ValueError:
        dims = ()
    if not 1 <= len(dims) <= 3 or min(dims) < 1:
        raise BenchSpecError(f"--{what} takes 1 to 3 positive ints like 256 or 16x16, "
                             f"got {text!r}")
    return dims


def launch_config(kernel: Any, shape: tuple[int, ...], two_d: bool, grid: str | None,
                  block: str | None, shared_mem: int) -> Any:
    """One thread per element of `shape`: 1-D over its size, or 2-D over (cols, rows)."""
    from oxide.runtime.config import LaunchConfig

    rank = 2 if two_d and len(shape) >= 2 else 1
    if block is not None:
        b = parse_dim3(block, "block")
    else:
        b = DEFAULT_BLOCKS[rank]
        limit = kernel.options.max_threads
        if limit is not None and rank == 1 and limit < b[0]:
            b = (limit,)
    if grid is not None:
        g = parse_dim3(grid, "grid")
    else:
        extent = (math.prod(shape),) if rank == 1 else (shape[-1], shape[-2])
        g = tuple(-(-n // (b[i] if i < len(b) else 1)) for i, n in enumerate(extent))
    return LaunchConfig(grid=g, block=b, shared_mem_bytes=shared_mem)


# ---------------------------------------------------------------------------
# The hook


def hook_workload(hook: Callable[..., Any], name: str, size: int | None, dev: Any) -> Workload:
    """What `bench_KERNEL(size=, device=)` returns, checked."""
    from oxide.runtime.config import LaunchConfig

    accepted = inspect.signature(hook).parameters
    kwargs = {k: v for k, v in (("size", size), ("device", dev)) if k in accepted}
    if size is not None and "size" not in accepted:
        raise BenchSpecError(f"--size: {name}() takes no `size` parameter")
    result = hook(**kwargs)
    if not isinstance(result, tuple) or len(result) not in (2, 3):
        raise BenchSpecError(f"{name}() must return (config, args) or (config, args, nbytes); "
                             f"it returned a {type(result).__name__}")
    config, args = result[0], result[1]
    if not isinstance(config, LaunchConfig):
        from oxide.runtime.config import as_config

        config, _ = as_config(config)
    if not isinstance(args, tuple | list):
        raise BenchSpecError(f"{name}() must return the kernel's arguments as a tuple or a "
                             f"list; got a {type(args).__name__}")
    nbytes = result[2] if len(result) == 3 else sum(
        int(getattr(a, "nbytes", 0)) for a in args if hasattr(a, "shape"))
    lines = [f"arg {i}: {_describe(a)}" for i, a in enumerate(args)]
    return Workload(config, list(args), int(nbytes) or None, lines, f"{name}()", f"{name}()")


def _describe(value: Any) -> str:
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "dtype"):
        return f"{type(value).__name__} {getattr(value.dtype, 'name', value.dtype)}" \
               f"[{', '.join(map(str, shape))}]"
    return repr(value)


# ---------------------------------------------------------------------------
# Reporting


def _size(nbytes: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.2f} {unit}"
    return f"{int(nbytes)} B"


def _fail(text: str, code: int = 1) -> typer.Exit:
    err_console.print(f"[red]error:[/red] {escape(text)}")
    return typer.Exit(code)


def bench(
    target: Annotated[str, typer.Argument(help="FILE.py::KERNEL (or EXAMPLE::KERNEL; a bare "
                                               "FILE.py takes its kernel of the same name, "
                                               "else its only one).")],
    types: Annotated[str | None, typer.Option(
        help='One type per parameter, as for `oxide inspect`: "Slice[f64], f64, '
             'DisjointSlice[f64]". Default: the annotations, f32 for TypeVars.')] = None,
    const: Annotated[list[str] | None, typer.Option(
        help="NAME=VALUE for a Const parameter (repeatable).")] = None,
    shape: Annotated[list[str] | None, typer.Option(
        help="Array shapes: 4096x4096 for every array of that rank, or NAME=16M for one "
             "(K/M/G are 2^10/2^20/2^30; repeatable). Default: 1M elements, 1024x1024, "
             "128x128x64.")] = None,
    arg: Annotated[list[str] | None, typer.Option(
        help="NAME=VALUE for a scalar parameter (repeatable). Default: 1, 0.5 or False.")
    ] = None,
    grid: Annotated[str | None, typer.Option(
        help="Blocks, like 4096 or 64x64. Default: enough to cover the largest array; for a "
             "tile kernel, one block per tile of its DisjointSlice stores.")
    ] = None,
    block: Annotated[str | None, typer.Option(
        help="Threads per block, like 256 or 16x16. Default: 256, or 16x16 for a kernel "
             "that calls thread.index_2d(). Tile kernels take none (num_warps * 32).")
    ] = None,
    shared_mem: Annotated[int, typer.Option(
        "--shared-mem", help="Dynamic shared memory per block, in bytes.", min=0)] = 0,
    size: Annotated[int | None, typer.Option(
        help="Passed to the file's bench_KERNEL(size=...) hook.", min=1)] = None,
    device: Annotated[str | None, typer.Option(
        help="cpu, or a GPU ordinal. Default: GPU 0, else the CPU.")] = None,
    warmup: Annotated[float, typer.Option(help="Warm-up budget in ms.", min=0)] = 25.0,
    rep: Annotated[float, typer.Option(help="Timing budget in ms.", min=0.001)] = 100.0,
    seed: Annotated[int, typer.Option(help="Seed of the random inputs.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead.")
                       ] = False,
) -> None:
    """Time one kernel: median and min time, and GB/s, with ox.testing.do_bench.

    Inputs come from the kernel's signature (--types/--const as for `oxide inspect`):
    arrays of --shape filled with random data of their dtype (floats in [0, 1), integers
    in [0, 128)), scalars from --arg. The launch covers the largest array, one thread per
    element (--grid/--block override it); a tile kernel gets one block per tile it stores
    (or asks for --grid where its stores do not say).

    Or the file defines `bench_KERNEL(size=None, device=None)` returning
    `(config, args)` or `(config, args, nbytes)`: those are used instead (--size goes to
    it). GB/s counts every array argument's bytes once, or the hook's nbytes.

    Runs on GPU 0 (arrays copied there first), else on the CPU with a note.
    Example: oxide bench kernels.py::saxpy --shape 16M --arg a=2.0
    """
    from oxide.checked_runs import describe_device
    from oxide.errors import DeviceError, OxideError
    from oxide.runtime.device import current_device, parse_device, quiet_cpu_notice
    from oxide.runtime.device import device as use_device

    kernel = load_kernel(target)
    module = sys.modules.get(kernel.fn.__module__)
    hook_name = f"bench_{kernel.__name__}"
    hook = getattr(module, hook_name, None)
    quiet_cpu_notice()  # the report names the device, with the no-GPU fallback said once
    try:
        dev = current_device() if device is None else parse_device(device_spec(device))
    except DeviceError as exc:
        raise _fail(str(exc), 2) from None
    where = describe_device(dev)
    try:
        if callable(hook):
            given = [f"--{n}" for n, v in (("types", types), ("const", const), ("shape", shape),
                                            ("arg", arg), ("grid", grid), ("block", block),
                                            ("shared-mem", shared_mem)) if v]
            if given:
                raise BenchSpecError(f"{target} defines {hook_name}(), which gives the inputs "
                                     f"and the launch: drop {', '.join(given)} (or rename the "
                                     "hook to use generated inputs)")
            with use_device(dev):
                work = hook_workload(hook, hook_name, size, dev)
        else:
            if size is not None:
                raise BenchSpecError(f"--size goes to a {hook_name}() hook, which the file "
                                     "does not define; use --shape for generated inputs")
            sig = compile_args(kernel, parse_types(types) if types else None,
                               parse_consts(const or []))
            work = generated_workload(kernel, sig, shape or [], arg or [], grid, block,
                                      shared_mem, seed)
    except (BenchSpecError, SignatureError) as exc:
        raise typer.BadParameter(str(exc)) from exc
    except OxideError as exc:
        raise _fail(f"{type(exc).__name__}: {exc}") from None
    if device is None and dev.is_cpu and not as_json:
        err_console.print("note: no CUDA GPU here: timing oxide's CPU target (its figures "
                          "say nothing of a GPU's); --device picks one")
    try:
        stats = _time(kernel, work, dev, where, warmup, rep)
    except OxideError as exc:
        err_console.print(escape(f"{type(exc).__module__}.{type(exc).__name__}: {exc}"))
        raise typer.Exit(1) from None
    _report(target, kernel, work, where, stats, as_json)


def _time(kernel: Any, work: Workload, dev: Any, where: str, warmup: float, rep: float
          ) -> dict[str, Any]:
    import statistics

    import numpy as np

    import oxide as ox
    from oxide.checked_runs import describe_device
    from oxide.progress import activity
    from oxide.runtime.device import device as use_device
    from oxide.testing import do_bench

    with use_device(dev):
        args = [ox.to_device(a, device=dev) if isinstance(a, np.ndarray) and not dev.is_cpu
                else a for a in work.args]
        launch = kernel[work.config]

        def fn() -> None:
            launch(*args)

        fn()  # compiles (or loads from the disk cache), and checks that it runs
        ox.synchronize(dev)
        with activity(f"timing `{kernel.__name__}` on {where}"):
            times = do_bench(fn, warmup=warmup, rep=rep, return_mode="all", device=dev)
            ox.synchronize(dev)
    median = statistics.median(times)
    return {"median_ms": median, "min_ms": min(times), "runs": len(times),
            "gb_per_s": work.nbytes / (median * 1e-3) / 1e9 if work.nbytes else None,
            "device": describe_device(dev)}


def _report(target: str, kernel: Any, work: Workload, where: str, stats: dict[str, Any],
            as_json: bool) -> None:
    cfg = work.config
    if as_json:
        print(json.dumps({"kernel": kernel.__name__, "target": target, "inputs": work.origin,
                          "grid": list(cfg.grid), "grid_from": work.grid_from,
                          "block": list(cfg.block),
                          "shared_mem_bytes": cfg.shared_mem_bytes, "bytes": work.nbytes,
                          **stats}))
        return
    console.print(f"[bold]{escape(kernel.__name__)}[/bold] on {escape(where)}, "
                  f"{escape(work.origin)}")
    for line in work.lines:
        console.print(f"  {escape(line)}")
    shm = f", shared_mem {cfg.shared_mem_bytes:,} B" if cfg.shared_mem_bytes else ""
    console.print(f"  grid {cfg.grid}, block {cfg.block}{shm}: {escape(work.grid_from)}")
    rate = (f", {stats['gb_per_s']:,.2f} GB/s ({_size(work.nbytes or 0)}: every array "
            "argument once)") if stats["gb_per_s"] is not None else ""
    console.print(f"median {stats['median_ms']:.4f} ms, min {stats['min_ms']:.4f} ms "
                  f"({stats['runs']} runs){rate}")
