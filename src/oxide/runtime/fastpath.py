"""The GPU relaunch fast path: a launch like an earlier one costs well under 1 us of Python.

Why it exists: a launch through the general path (`gpu.launch_gpu`) builds an
ArrayView per array, a full type key (dtype name, rank, layout, device of each
array), looks up the plan and the launcher, flattens the arguments and finds the
stream: ~8 us of Python per launch on an H200 host, more than the driver's own
launch (~5-6 us). Launches repeat with the same kinds of arguments, so after a
general launch succeeds this module makes a *binder* for it: a small function,
generated from the launcher's Plan, that reads the arguments straight into
machine values and launches, doing `Launcher.launch`'s steps inline. A kernel
keeps its binders in its `_oxide_launchers` (gpu.Launchers): `last`, the one its
last launch used, tried first, and `fast`, keyed by (device index, each
argument's Python type, each `Const` argument's value).

A binder's *flavor* is how it launches (`Launcher.flavor`): "native" hands the
values to the launch trampoline (runtime/native_launch.py), one C call; "ctypes"
packs them into the launcher's parameter buffer under its lock and calls
`cuLaunchKernelEx` through ctypes; "warmup" is "ctypes" counting launches
towards building the trampoline, and declines once it is due, so that the
general path makes a native binder in its place.

What a binder verifies on every launch, everything the general path's type key
and checks cover (on any difference it returns False having done nothing, and
the general path takes the launch: it raises the proper ArgumentError or
AliasingError, or makes a new plan, whose binder then replaces this one):

- the device index, the number of arguments, each argument's Python type and
  each `Const` argument's value;
- arrays: dtype (the torch dtype object by identity, else the view's DType),
  rank, device and layout (contiguous or strided, decided as `views.py` does);
  for a tile kernel, whether its rows take 16-byte vectors (`ArrayType.vectors`);
  strides are passed when the plan is strided, and a writable strided array must
  not overlap itself (`args.check_no_self_overlap`, ArgumentError); the data
  address must be a multiple of the element size (torch: tested here; other
  arrays: `view_of` refuses it, as it refuses non-native byte order, masked
  arrays and byte strides that are not whole elements, and the binder declines);
- scalars: the range of the parameter's type (else `args.scalar_value` raises);
- tensor maps (ox.TensorMap): element type, rank and device (`TensorMap.key`); their
  128 bytes are packed by value (the ctypes flavor: the trampoline packs numbers only);
- aliasing, when the plan has several arrays and a writable one: byte ranges;
- the device's kernel error records (`GPUDevice.check_errors`), every launch;
- the stream: torch's / CuPy's current one, or `stream=` read by `gpu.stream_handle`.

Plans with host arrays (copied in and out around the launch) get no binder.

Thread safety: a binder never changes once made, and reads only its arguments;
`last` and `fast` are replaced whole (atomic under the GIL; two threads may both
make a binder for a new key, and either is right). The trampoline keeps each
launch's values on its own stack; the ctypes flavor packs the launcher's
parameter and config buffers and calls the driver under the launcher's lock.

The generated source of a binder is in `binder.source` (and in tracebacks).
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import linecache
import math
import sys
from collections.abc import Callable
from typing import Any

from oxide.runtime import device as _device
from oxide.runtime import gpu, native_launch
from oxide.runtime import native_binder as nb
from oxide.runtime.args import (
    _FLOAT_MAX,
    _INT_RANGES,
    _const_key,
    check_no_self_overlap,
    scalar_value,
)
from oxide.runtime.array_view import VECTOR_BYTES, fits_vectors
from oxide.runtime.config import LaunchConfig
from oxide.runtime.device import Device, parse_device
from oxide.runtime.overlap import self_overlap
from oxide.runtime.views import (
    BadArray,
    _layout,
    _torch,
    byte_range,
    reader_of,
    view_of,
)

Binder = Callable[[LaunchConfig, tuple[Any, ...], Any, Device], bool]


def launch(kernel: Any, cfg: LaunchConfig, args: tuple[Any, ...], stream: Any,
           device: Device) -> None:
    """Launch `kernel` on GPU `device` through a binder, or through the general path
    (which leaves a binder for launches like this one).

    `ox.launch` calls this after the binder of the kernel's last launch declined.
    """
    launchers = kernel.__dict__.get("_oxide_launchers")
    if launchers is not None:
        last = launchers.last
        for binder in launchers.fast.get(_key(launchers, device.index, args), ()):
            if binder is not last and binder(cfg, args, stream, device):
                _use(kernel, launchers, binder, cfg, args)
                return
    launcher = gpu.launch_gpu(kernel, cfg, args, stream, device)
    if not launcher.plan.copies:
        _remember(kernel, launcher, cfg, args, device.index)


_PER_KEY = 4  # binders kept per key: layouts that alternate (contiguous, transposed) stay fast


def _remember(kernel: Any, launcher: gpu.Launcher, cfg: LaunchConfig, args: tuple[Any, ...],
              index: int) -> None:
    """Make `launcher`'s binder for arguments like `args` the first to try."""
    launchers = kernel.__dict__["_oxide_launchers"]
    key = _key(launchers, index, args)
    binders = launchers.fast.get(key, ())
    flavor = launcher.flavor  # current: launch_gpu, just called, attached the trampoline if due
    binder = next((b for b in binders if b.launcher is launcher and b.flavor == flavor), None)
    if binder is None:
        binder = make_binder(launcher, args, index, launchers.consts)
    launchers.fast[key] = (binder, *(b for b in binders if b is not binder))[:_PER_KEY]
    _use(kernel, launchers, binder, cfg, args)


def _use(kernel: Any, launchers: gpu.Launchers, binder: Binder, cfg: LaunchConfig,
         args: tuple[Any, ...]) -> None:
    """Make `binder`, which just launched `args` over `cfg`, the first to try, after its
    native twin (made now, once: runtime/native_binder.py)."""
    launchers.last = binder
    native = binder.native  # type: ignore[attr-defined]
    if native is _NOT_MADE:
        native = binder.native = make_native_binder(binder, cfg, args)  # type: ignore[attr-defined]
    launchers.native = native


_NOT_MADE = object()  # a binder's `native` before `_use` first made it


def _key(launchers: gpu.Launchers, index: int, args: tuple[Any, ...]) -> Any:
    """The `fast` table's key: the device, each argument's type, each Const's value."""
    consts = launchers.consts
    if not consts:
        return (index, *map(type, args))
    if len(args) <= consts[-1]:
        return None  # too few arguments: the general path says so
    key: list[Any] = [index, *map(type, args)]
    for i in consts:
        key[i + 1] = _const_key(args[i])
    return tuple(key)


# ---------------------------------------------------------------------------
# Making binders

def make_binder(launcher: gpu.Launcher, args: tuple[Any, ...], index: int,
                consts: tuple[int, ...]) -> Binder:
    """The binder of `launcher` for arguments like `args` (which it just launched with).

    Its source reads, per parameter (`aN` is argument N, constants are in `env`):

        if type(a0) is not type0: return False          # every argument
        if a0.dtype is not dtype0 ... : return False    # a torch tensor: what the plan assumed
        ptr0 = a0.data_ptr(); shape0 = a0.shape
        v1 = a1 if lo1 <= a1 <= hi1 else scalar_value(name1, dt1, a1)   # a scalar
        ...
        enter() (several GPUs); check_errors() if a launched kernel's record is filled
        handle = the stream; then Launcher.launch's steps, inlined:
        native: L.check(cfg) if it is new; native(context, cfg.dims, handle, ptr0,
            s0_0, v1, ...)
        ctypes: lock; prepare(cfg, handle) if either changed; pack_into(buffer, 0,
            ptr0, *shape0, v1, ...); the hidden tensor maps of TMA operands from those
            values (runtime/operand_maps.py); launch_ex(config, function, params, None);
            unlock
    """
    flavor = launcher.flavor
    plan = launcher.plan
    gdev = launcher.gdev
    env: dict[str, Any] = {
        "type": type, "len": len, "tuple": tuple, "prod": math.prod, "BadArray": BadArray,
        "view_of": view_of, "layout": _layout, "scalar_value": scalar_value,
        "check_no_self_overlap": check_no_self_overlap, "self_overlap": self_overlap,
        "byte_range": byte_range, "fits_vectors": fits_vectors,
        "const_key": _const_key, "stream_handle": gpu.stream_handle,
        "source": launcher.stream_source, "current_stream": _current_stream(launcher),
        "enter": gdev.enter, "check_errors": gdev.check_errors,
        "records": gdev.active_records, "activate": gdev.activate, "L": launcher,
        "lock": launcher.lock, "pack_into": launcher.packer.pack_into,
        "buffer": launcher.buffer, "launch_ex": launcher.launch_ex,
        "pack_maps": launcher.map_packer and launcher.map_packer.pack,
        "config_address": launcher.config_address, "fptr": launcher.fptr,
        "params_address": launcher.params_address, "launch_failure": gpu.launch_failure,
        "upload_constants": launcher.upload_constants, "bf16_bits": gpu._bf16_bits,
        "f16_bits": gpu.f16_bits, "native": launcher.native,
        "native_address": launcher.native_address, "warmup": native_launch.warmup,
    }
    env["dev0"] = parse_device(index)  # canonical: tested by identity
    names = [f"a{i}" for i in range(len(args))]
    # Reading the arguments: in a try, so that a different number of arguments or a
    # different rank (unpacking raises ValueError) declines the launch.
    body = [f"{', '.join(names)}, = args" if names else "if args: return False"]
    values: list[str] = []
    arrays: list[tuple[int, bool, bool, int]] = []  # (i, writable, strided, itemsize)
    aligned: dict[int, list[str]] = {}  # itemsize -> the torch pointers to test, in one test
    for i, (p, a) in enumerate(zip(plan.params, args, strict=True)):
        env[f"type{i}"] = type(a)
        env[f"name{i}"] = p.name
        body += [f"# {p.name}: {p.spec!r}",
                 f"if type(a{i}) is not type{i}:",
                 "    return False"]
        if p.kind == "array":
            spec = p.spec
            strided = not spec.contiguous
            arrays.append((i, p.writable, strided, spec.dtype.itemsize))
            if reader_of(type(a)) is _torch:
                env[f"dtype{i}"] = a.dtype
                # the device it was on (another GPU's where peer access lets it be)
                on_device = (f"not a{i}.is_cuda" if gdev.single
                             else f"a{i}.get_device() != {a.get_device()}")
                dims = [f"s{i}_{d}" for d in range(spec.rank)]
                body += [f"if a{i}.dtype is not dtype{i} or {on_device}:",
                         "    return False",
                         f"shape{i} = a{i}.shape"]
                body += ([f"{', '.join(dims)}, = shape{i}"] if dims else
                         [f"if shape{i}:", "    return False"])  # a 0-d tensor: shape ()
                if strided:
                    body += [f"strides{i} = None if a{i}.is_contiguous() else "
                             f"layout(shape{i}, tuple(a{i}.stride()))"]
                else:
                    body += [f"if not a{i}.is_contiguous() and "
                             f"layout(shape{i}, tuple(a{i}.stride())) is not None:",
                             "    return False"]
                body += [f"ptr{i} = a{i}.data_ptr()"]
                if spec.dtype.itemsize > 1:
                    aligned.setdefault(spec.dtype.itemsize, []).append(f"ptr{i}")
            else:
                env[f"dtype{i}"] = spec.dtype
                env[f"device{i}"] = view_of(a).device  # type: ignore[union-attr]
                body += ["try:",
                         f"    v{i} = view_of(a{i})",
                         "except BadArray:",
                         "    return False",
                         f"if (v{i} is None or v{i}.dtype != dtype{i} or v{i}.device != device{i}"
                         f" or len(v{i}.shape) != {spec.rank}):",
                         "    return False",
                         f"ptr{i}, shape{i}, strides{i} = v{i}.ptr, v{i}.shape, v{i}.strides"]
                if not strided:
                    body += [f"if strides{i} is not None:",
                             "    return False"]
            if spec.vectors is not None:  # a tile kernel's specialization: ArrayType.vectors
                if not strided and reader_of(type(a)) is _torch and not dims:
                    test = "False"  # a 0-d tensor has no rows (fits_vectors)
                elif not strided and reader_of(type(a)) is _torch:  # inline: C-contiguous
                    row = f"s{i}_{spec.rank - 1} * {spec.dtype.itemsize}"
                    test = f"((ptr{i} | {row}) & {VECTOR_BYTES - 1} == 0)"
                else:
                    env[f"item{i}"] = spec.dtype.itemsize
                    test = f"fits_vectors(ptr{i}, shape{i}, strides{i}, item{i})"
                body += [f"if {test} is not {spec.vectors}:",
                         "    return False"]
            if strided:
                body += [f"if strides{i} is None:",
                         "    return False"]
                if p.writable:  # the full check (and its error) only where a quick one fails
                    quick = (f"strides{i}[0] == 0 and shape{i}[0] > 1" if spec.rank == 1
                             else f"self_overlap(shape{i}, strides{i})")
                    body += [f"if {quick}:",
                             f"    check_no_self_overlap(name{i}, shape{i}, strides{i})"]
                values += [f"ptr{i}", f"*shape{i}", f"*strides{i}"]
            elif reader_of(type(a)) is _torch:
                values += [f"ptr{i}", *dims]
            else:
                values += [f"ptr{i}", f"*shape{i}"]
        elif p.kind == "scalar":
            dt = p.dtype
            assert dt is not None
            env[f"dt{i}"] = dt
            if dt.name == "bf16":  # the parameter takes the bit pattern
                body += [f"v{i} = bf16_bits(scalar_value(name{i}, dt{i}, a{i}))"]
            elif type(a) is int and dt.is_int:
                lo, hi = _INT_RANGES[dt.name]
                body += [f"v{i} = a{i} if {lo} <= a{i} <= {hi} else "
                         f"scalar_value(name{i}, dt{i}, a{i})"]
            elif type(a) is float and dt.name in _FLOAT_MAX:  # out of range, inf, nan: slow
                limit = _FLOAT_MAX[dt.name]
                body += [f"v{i} = a{i} if {-limit!r} <= a{i} <= {limit!r} else "
                         f"scalar_value(name{i}, dt{i}, a{i})"]
            elif type(a) is float and dt.is_float:  # f64: the value itself
                body += [f"v{i} = a{i}"]
            else:
                body += [f"v{i} = scalar_value(name{i}, dt{i}, a{i})"]
            if dt.name == "f16" and flavor == "native":  # the trampoline takes its bits
                body += [f"v{i} = f16_bits(v{i})"]
            values.append(f"v{i}")
        elif p.kind == "tensormap":  # its 128 bytes (ctypes flavor: the trampoline packs numbers)
            env[f"tkey{i}"] = a.key
            body += [f"if a{i}.key != tkey{i}:",
                     "    return False"]
            values.append(f"a{i}.raw")
        else:  # Const: selects the plan, passes nothing
            assert i in consts
            env[f"const{i}"] = _const_key(a)
            body += [f"if const_key(a{i}) != const{i}:",
                     "    return False"]
    for item, ptrs in aligned.items():  # misaligned: declined (the general path refuses it)
        body += [f"if ({' | '.join(ptrs)}) & {item - 1}:",
                 "    return False"]
    if plan.check_aliasing:
        body += _aliasing_checks(arrays)
    body = (["if device is not dev0:", "    return False", "try:"]
            + [f"    {line}" for line in body]
            + ["except ValueError:", "    return False"])
    if not gdev.single:  # one GPU: a missing context fails the launch, which is retried
        body += ["enter()"]
    body += ["for rec in records:  # GPUDevice.check_errors's test, without the call",
             "    if rec[1]:",
             "        check_errors()"]
    if env["current_stream"] is None:
        default = "0"
    else:
        default = f"current_stream({index})"
    body += [f"handle = {default} if stream is None else stream_handle(stream, source, {index})"]
    if launcher.constants:
        body += ["upload_constants(handle)"]
    call = ", ".join(values)
    if flavor == "native":  # Launcher.launch's native steps, inlined
        args_line = ", ".join(["native_address", "cfg.dims", "handle", *values])
        body[:0] = ["if cfg.cluster is not None:  # a launch attribute: the ctypes path",
                    "    return False"]
        body += ["if cfg is not L.checked_cfg:",
                 "    L.check(cfg)",
                 f"err = native({args_line})",
                 "if err and L.make_context_current(err):",
                 f"    err = native({args_line})"]
    else:  # its ctypes steps
        if flavor == "warmup":  # counting towards the trampoline: decline once it is due
            body[:0] = ["if warmup[0] <= 0:",
                        "    return False",
                        "warmup[0] -= 1"]
        body += ["lock.acquire()",
                 "try:",
                 "    if cfg is not L.packed_cfg or handle != L.packed_stream:",
                 "        L.prepare(cfg, handle)",
                 f"    pack_into(buffer, 0, {call})",
                 *([f"    pack_maps(({call},))"] if launcher.map_packer else []),
                 "    err = launch_ex(config_address, fptr, params_address, None)",
                 "    if err:",
                 "        err = L.retry_in_context(err)",
                 "finally:",
                 "    lock.release()"]
    body += ["if err:",
             "    raise launch_failure(err, L)",
             "if not L.active:",
             "    activate(L)",
             "return True"]
    source = "def binder(cfg, args, stream, device):\n" + "".join(
        f"    {line}\n" for line in body)
    exec(_compiled(source), env)  # our own generated code
    binder = env["binder"]
    binder.source = source
    binder.launcher = launcher
    binder.flavor = flavor
    binder.native = _NOT_MADE
    return binder  # type: ignore[no-any-return]


_CODE: dict[str, Any] = {}  # binder source -> code: kernels alike share it


def _compiled(source: str) -> Any:
    code = _CODE.get(source)
    if code is None:
        filename = f"<oxide binder {len(_CODE)}>"
        code = _CODE[source] = compile(source, filename, "exec")
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return code


def _aliasing_checks(arrays: list[tuple[int, bool, bool, int]]) -> list[str]:
    """Lines that return False when a writable array shares a byte with another array
    (the general path then raises the AliasingError)."""
    lines = []
    for i, _, strided, item in arrays:
        if strided:
            lines.append(f"lo{i}, hi{i} = byte_range(ptr{i}, shape{i}, strides{i}, {item})")
        else:  # empty: hi == lo, which overlaps nothing below
            lines.append(f"lo{i}, hi{i} = ptr{i}, ptr{i} + prod(shape{i}) * {item}")
    for (i, wi, _, _), (j, wj, _, _) in itertools.combinations(arrays, 2):
        if wi or wj:
            lines += [f"if lo{i} < hi{j} and lo{j} < hi{i} and lo{i} < hi{i} and lo{j} < hi{j}:",
                      "    return False"]
    return lines


def _current_stream(launcher: gpu.Launcher) -> Callable[[int], int] | None:
    """The current stream of the arrays' framework, a function of the device index;
    None for the legacy default stream (0)."""
    source = launcher.stream_source
    if source == "torch":
        raw = getattr(sys.modules["torch"]._C, "_cuda_getCurrentRawStream", None)
        return raw if raw is not None else gpu._torch_stream  # type: ignore[no-any-return]
    if source == "cupy":
        return lambda index: gpu.stream_handle(None, "cupy", index)
    return None


# ---------------------------------------------------------------------------
# Native twins

def make_native_binder(binder: Any, cfg: LaunchConfig,
                       args: tuple[Any, ...]) -> Callable[..., bool] | None:
    """The native twin of Python binder `binder` for config `cfg` (runtime/native_binder.py),
    made from the arguments it just launched with; None where the native path does not
    cover the launch (that module's docstring says what it covers)."""
    launcher = binder.launcher
    gdev = launcher.gdev
    plan = launcher.plan
    if (binder.flavor != "native" or launcher.native_context is None or launcher.constants
            or not gdev.single or _device._several or gdev.index != 0
            or _device._default not in (None, parse_device(0))  # where launches go unchosen
            or type(cfg) is not LaunchConfig or cfg.cluster is not None
            or len(args) > nb.MAX_ARGS):
        return None
    spec = nb.BinderSpec()
    keep: list[Any] = [spec, binder, cfg]
    slot = 0
    arrays: list[tuple[int, bool]] = []
    for i, (p, a) in enumerate(zip(plan.params, args, strict=True)):
        s = spec.args[i]
        s.type = id(type(a))
        s.slot = slot
        if p.kind == "array":
            if reader_of(type(a)) is not _torch or not p.spec.contiguous:
                return None
            s.kind, s.rank, s.itemsize = nb.KIND_TORCH, p.spec.rank, p.spec.dtype.itemsize
            s.vectors = -1 if p.spec.vectors is None else int(p.spec.vectors)
            s.obj = id(a.dtype)
            keep.append(a.dtype)
            slot += 1 + p.spec.rank
            arrays.append((i, p.writable))
        elif p.kind == "scalar" and type(a) is int and p.dtype.name in _INT_RANGES:
            lo, hi = _INT_RANGES[p.dtype.name]
            s.kind, s.lo, s.hi = nb.KIND_INT, max(lo, -(1 << 63)), min(hi, (1 << 63) - 1)
            slot += 1
        elif p.kind == "scalar" and type(a) is float and p.dtype.name in ("f32", "f64"):
            s.kind = nb.KIND_F32 if p.dtype.name == "f32" else nb.KIND_F64
            limit = _FLOAT_MAX.get(p.dtype.name, float("inf"))
            s.lo, s.hi = (_double_bits(-limit), _double_bits(limit))
            slot += 1
        elif p.kind == "const" and type(a) in (int, bool, str):
            s.kind, s.obj = nb.KIND_CONST, id(a)
            keep.append(a)
        else:  # f16/bf16 scalars, NumPy scalars, other arrays, strided plans, tensor maps
            return None
    if slot != len(plan.formats):  # not the values the plan packs: keep the Python binder
        return None
    pairs = [(i, j) for (i, wi), (j, wj) in itertools.combinations(arrays, 2) if wi or wj] \
        if plan.check_aliasing else []
    if len(pairs) > nb.MAX_PAIRS:
        return None
    for k, (i, j) in enumerate(pairs):
        spec.pairs[2 * k], spec.pairs[2 * k + 1] = i, j
    spec.npairs, spec.nargs = len(pairs), len(args)
    dims = ctypes.create_string_buffer(cfg.dims, len(cfg.dims))
    stream_fn = _current_stream(launcher)
    index = gdev.index
    activate = functools.partial(gdev.activate, launcher)
    names = [sys.intern(n) for n in nb.NAMES]
    keep += [launcher.native_context, dims, stream_fn, index, activate, names]
    spec.context = ctypes.addressof(launcher.native_context)
    spec.cfg = id(cfg)
    spec.dims = ctypes.addressof(dims)
    spec.only_gpu0 = ctypes.addressof(_device.only_gpu0)
    spec.records = ctypes.addressof(gdev.record_table)
    spec.stream_fn = 0 if stream_fn is None else id(stream_fn)
    spec.stream_arg = id(index)
    spec.activate = id(activate)
    spec.none, spec.true, spec.config_type = id(None), id(True), id(LaunchConfig)
    for k, name in enumerate(names):
        spec.names[k] = id(name)
    return native_launch.native_binder_function((ctypes.addressof(spec), *keep))


def _double_bits(x: float) -> int:
    """The bits of double `x` as an i64 (ArgSpec keeps a float range in its int fields)."""
    return ctypes.c_int64.from_buffer_copy(ctypes.c_double(x)).value
