"""Binding launch arguments to a kernel's parameters, shared by the CPU and GPU runtimes.

`bind(kernel, args, device)` checks every argument before anything runs (dtype,
rank, device, layout, byte order, alignment, a writable array overlapping itself
or another argument, scalar type and range, Const values: each an `ArgumentError`
or `AliasingError` naming the parameter; docs/runtime.md lists the rules) and
returns the specialization signature plus the flat machine arguments of the
kernel ABI (codegen/abi.py): an array is its data pointer, one i64 extent per
dimension, then (non-contiguous only) one i64 stride in elements per dimension;
a scalar is itself; a `Const` parameter only selects the specialization.

Launches repeat, so the checks that depend only on argument *types* run once per
type key: the key (dtypes, ranks, layouts, devices, scalar types, Const values)
maps to a `Plan` cached on the kernel, and a relaunch only reads pointers and
extents, range-checks scalars and checks aliasing.

>>> b = bind(scale, (x, 2.5, y), CPU)  # doctest: +SKIP
>>> b.signature, b.values                 # doctest: +SKIP
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from oxide import types as T
from oxide.errors import AliasingError, ArgumentError
from oxide.kernel_types import fp8_scalar_refused
from oxide.runtime.array_view import fits_vectors
from oxide.runtime.device import Device
from oxide.runtime.overlap import DISJOINT, UNPROVED, self_overlap
from oxide.runtime.peers import reaches
from oxide.runtime.views import HOST, ArrayView, BadArray, view_of
from oxide.specialize import ConstValue, const_value
from oxide.specialize import short_repr as _short

# struct format characters of machine arguments (native alignment, as in a C struct)
PTR_FORMAT = "Q"
INDEX_FORMAT = "q"
FORMATS = {"f16": "e", "bf16": "H", "f32": "f", "f64": "d", "i8": "b", "i16": "h", "i32": "i",
           "i64": "q", "u8": "B", "u16": "H", "u32": "I", "u64": "Q", "bool_": "?"}
_PTR = T.u64  # the dtype `numpy_values` gives a pointer
TENSORMAP_FORMAT = f"{T.TENSORMAP_BYTES}s"  # an ox.TensorMap on a GPU: its bytes, by value

_host_copy_warned = False


class ParamPlan:
    """What one parameter does with its argument under one type key."""

    __slots__ = ("name", "kind", "spec", "writable", "copy_in", "strided", "dtype")

    def __init__(self, name: str, kind: str, spec: Any, dtype: T.DType | None = None,
                 writable: bool = False, copy_in: bool = False, strided: bool = False) -> None:
        self.name = name
        self.kind = kind  # "array", "scalar", "const" or "tensormap"
        self.spec = spec  # the signature entry
        self.dtype = dtype  # scalars: the machine dtype; a CPU tensor map: u64 (a pointer)
        self.writable = writable
        self.copy_in = copy_in  # a host array on a GPU launch: copied in (and back if writable)
        self.strided = strided  # a non-contiguous array: strides follow the extents


class Plan:
    """The type-dependent half of binding: the signature and how to flatten arguments."""

    __slots__ = ("signature", "params", "formats", "dtypes", "check_aliasing", "copies")

    def __init__(self, signature: tuple[Any, ...], params: list[ParamPlan]) -> None:
        self.signature = signature
        self.params = params
        formats: list[str] = []
        dtypes: list[T.DType] = []
        for p in params:
            if p.kind == "array":
                rank = p.spec.rank
                n = rank * (2 if p.strided else 1)
                formats += [PTR_FORMAT] + [INDEX_FORMAT] * n
                dtypes += [_PTR] + [T.i64] * n
            elif p.kind == "scalar":
                formats.append(FORMATS[p.dtype.name])
                dtypes.append(p.dtype)
            elif p.kind == "tensormap":  # GPU: its 128 bytes; CPU: the description's address
                formats.append(PTR_FORMAT if p.dtype is not None else TENSORMAP_FORMAT)
                dtypes.append(_PTR if p.dtype is not None else T.u8)
        self.formats = formats  # one struct character per machine argument
        self.dtypes = dtypes  # one DType per machine argument
        arrays = [p for p in params if p.kind == "array"]
        self.check_aliasing = len(arrays) > 1 and any(p.writable for p in arrays)
        self.copies = any(p.copy_in for p in params)


class BoundArgs:
    """The result of `bind`: everything a runtime needs to launch.

    `values` holds plain Python values (ints for pointers, extents and strides; a
    scalar converted to its parameter's type, already range-checked), one per
    machine argument; `plan.formats` / `plan.dtypes` give their machine types.
    `copies` lists (host NumPy array, device array, writable) for host arrays a GPU
    launch copied in; `keepalive` holds what must live until the launch is done.
    """

    __slots__ = ("plan", "values", "copies", "keepalive")

    def __init__(self, plan: Plan, values: list[Any], copies: list[tuple[Any, Any, bool]],
                 keepalive: list[Any]) -> None:
        self.plan = plan
        self.values = values
        self.copies = copies
        self.keepalive = keepalive

    @property
    def signature(self) -> tuple[Any, ...]:
        return self.plan.signature

    def numpy_values(self) -> list[Any]:
        """The machine arguments as NumPy scalars of their exact types (pointers as uint64)."""
        return [dt.numpy.type(v) for dt, v in zip(self.plan.dtypes, self.values, strict=True)]


# ---------------------------------------------------------------------------
# Keyword arguments

_MISSING = object()
_STREAM_HINT = "; `stream=` is the launch's stream: pass the parameter `stream` by position"


def keyword_args(kernel: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """`args` and `kwargs` as one positional tuple, bound to `kernel`'s parameter names as
    Python binds a call; a missing, unknown or doubly given parameter is an ArgumentError.

    Launches with keywords (`k[cfg](x=a, out=b)`) take this detour before anything else,
    so everything after it (plans, binders) sees positional arguments only."""
    names = [p.name for p in kernel.params]
    listing = f"({', '.join(names)})"
    if len(args) > len(names):
        raise ArgumentError(f"`{kernel.__name__}` has {len(names)} parameters {listing}; got "
                            f"{len(args)} positional arguments")
    out = [*args, *[_MISSING] * (len(names) - len(args))]
    for key, value in kwargs.items():
        if key not in names:
            raise ArgumentError(f"`{kernel.__name__}` has no parameter `{key}`; its "
                                f"parameters are {listing}")
        i = names.index(key)
        if i < len(args):
            raise ArgumentError(f"`{kernel.__name__}` got two values for `{key}`: the "
                                f"positional argument {i + 1} and the keyword")
        out[i] = value
    missing = [n for n, v in zip(names, out, strict=True) if v is _MISSING]
    if missing:
        raise ArgumentError(f"`{kernel.__name__}` is missing a value for "
                            f"{', '.join(f'`{n}`' for n in missing)}; its parameters are "
                            f"{listing}{_STREAM_HINT if 'stream' in missing else ''}")
    return tuple(out)


# ---------------------------------------------------------------------------
# Type keys


def _const_key(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return (type(value), value)


_ARRAY, _CONST, _SCALAR, _TENSORMAP = 0, 1, 2, 3


def _param_kinds(kernel: Any) -> tuple[tuple[int, Any], ...]:
    """(kind, parameter) per parameter, computed once per kernel: the launch path's loop."""
    kinds = kernel.__dict__.get("_oxide_param_kinds")
    if kinds is None:
        kinds = kernel.__dict__["_oxide_param_kinds"] = tuple(
            (_ARRAY if isinstance(p.annotation, T.ArrayType) else
             _CONST if isinstance(p.annotation, T.ConstType) else
             _TENSORMAP if isinstance(p.annotation, T.TensorMapType) else _SCALAR, p)
            for p in kernel.params)
    return kinds


def read_args(kernel: Any, args: Sequence[Any], device: Device
              ) -> tuple[tuple[Any, ...], list[ArrayView | None]]:
    """(type key, views): one ArrayView per array argument, None elsewhere.

    The key holds only what the plan depends on: each array's Python type, dtype,
    rank, layout and device; each scalar's Python type; each Const's value.
    """
    kinds = _param_kinds(kernel)
    if len(args) != len(kinds):
        names = [p.name for _, p in kinds]
        hint = _STREAM_HINT if "stream" in names and len(args) < len(names) else ""
        raise ArgumentError(f"`{kernel.__name__}` has {len(kinds)} parameters "
                            f"({', '.join(names)}); got {len(args)} arguments{hint}")
    key: list[Any] = []
    views: list[ArrayView | None] = []
    copy_host = not device.is_cpu
    tile = getattr(kernel, "is_tile", False)  # specializes on `ArrayView.fits_vectors`
    for (kind, p), a in zip(kinds, args, strict=True):
        if kind == _ARRAY:
            try:
                v = view_of(a)
            except BadArray as exc:
                raise ArgumentError(f"`{p.name}` is {p.annotation!r}; got {exc}") from None
            if v is None:
                raise ArgumentError(f"`{p.name}` is {p.annotation!r}; got {type(a).__name__}, "
                                    "which is not an array")
            if copy_host and v.device == HOST:
                key.append((type(a), v.dtype.name, len(v.shape), True, HOST,
                            tile and _fits_vectors(v, copied=True)))
            else:
                key.append((type(a), v.dtype.name, len(v.shape), v.strides is None, v.device,
                            tile and _fits_vectors(v, copied=False)))
            views.append(v)
        elif kind == _SCALAR:
            key.append(type(a))
            views.append(None)
        elif kind == _TENSORMAP:  # element type, rank and device (ox.TensorMap.key)
            key.append((type(a), getattr(a, "key", None)))
            views.append(None)
        else:
            key.append(_const_key(a))
            views.append(None)
    return tuple(key), views


# ---------------------------------------------------------------------------
# Plans (once per type key)


def make_plan(kernel: Any, args: Sequence[Any], views: list[ArrayView | None],
              device: Device) -> Plan:
    """Check what the argument types imply and build the signature and flattening plan."""
    typevars: dict[T.TypeVar, T.DType] = {}
    plans: dict[int, ParamPlan] = {}
    weak = []
    for i, (p, a, v) in enumerate(zip(kernel.params, args, views, strict=True)):
        ann = p.annotation
        if isinstance(ann, T.ConstType):
            spec = a if isinstance(a, ConstValue) else ConstValue(const_value(p.name, ann, a))
            plans[i] = ParamPlan(p.name, "const", spec)
        elif isinstance(ann, T.ArrayType):
            assert v is not None
            plans[i] = _array_plan(p.name, ann, v, device, typevars,
                                   getattr(kernel, "is_tile", False))
        elif isinstance(ann, T.TensorMapType):
            plans[i] = _tensormap_plan(p.name, ann, a, device)
        elif isinstance(ann, T.TypeVar) and isinstance(a, (bool, int, float)):
            weak.append(i)  # a Python number takes the type its TypeVar gets elsewhere
        else:
            plans[i] = _scalar_plan(p.name, ann, a, typevars)
    for i in weak:
        p, a = kernel.params[i], args[i]
        plans[i] = _scalar_plan(p.name, typevars.get(p.annotation, p.annotation), a, typevars)
    ordered = [plans[i] for i in range(len(kernel.params))]
    return Plan(tuple(p.spec for p in ordered), ordered)


def _bind_typevar(tv: T.TypeVar, dt: T.DType, typevars: dict[T.TypeVar, T.DType],
                  name: str) -> None:
    bound = typevars.setdefault(tv, dt)
    if bound != dt:
        raise ArgumentError(f"`{name}` binds {tv.name} = {dt.name}, but an earlier parameter "
                            f"bound {tv.name} = {bound.name}")


def _fits_vectors(v: ArrayView, copied: bool) -> bool:
    """`ArrayType.vectors` of array `v`, or with `copied` of its device copy (a host array
    copied in: C-contiguous, at an address the allocator aligns to 256 bytes)."""
    if copied:
        return fits_vectors(0, v.shape, None, v.dtype.itemsize)
    return v.fits_vectors()


def _array_plan(name: str, ann: T.ArrayType, v: ArrayView, device: Device,
                typevars: dict[T.TypeVar, T.DType], tile: bool = False) -> ParamPlan:
    if isinstance(ann.dtype, T.TypeVar):
        _bind_typevar(ann.dtype, v.dtype, typevars, name)
    elif v.dtype != ann.dtype:
        raise ArgumentError(f"`{name}` is {ann!r}; got an array of {v.dtype.name}")
    rank = len(v.shape)
    wrong = ann.rank_error(name, rank)
    if wrong:
        raise ArgumentError(f"{wrong} (shape {tuple(v.shape)})")
    copy_in = False
    if device.is_cpu:
        if v.device != HOST:
            where = "GPU memory" if v.device is None else f"cuda:{v.device}"
            raise ArgumentError(f"`{name}` is in {where}, but this launch runs on the CPU")
    elif v.device == HOST:
        if v.host is None:
            raise ArgumentError(f"`{name}` is a host array oxide cannot copy to {device}; "
                                "move it to the GPU first")
        copy_in = True
    elif v.device is not None and not reaches(device.index, v.device):
        raise ArgumentError(
            f"`{name}` is on cuda:{v.device}, but this launch runs on {device}: move it there, "
            f"launch on cuda:{v.device} (`with ox.device({v.device}):`), or let {device} reach "
            f"it with `ox.enable_peer_access({device.index}, {v.device})`")
    contiguous = True if copy_in else v.strides is None
    if ann.writable and v.strides is not None:
        check_no_self_overlap(name, v.shape, v.strides)
    vectors = _fits_vectors(v, copy_in) if tile else None  # see ArrayType.vectors
    spec = T.ArrayType(ann.access, v.dtype, rank, contiguous, vectors=vectors)
    return ParamPlan(name, "array", spec, writable=ann.writable, copy_in=copy_in,
                     strided=not contiguous)


def _tensormap_plan(name: str, ann: T.TensorMapType, a: Any, device: Device) -> ParamPlan:
    """An ox.TensorMap argument: its type, and the device its array lives on (a map of a
    host array is the CPU's description; one of a GPU array, that GPU's encoding)."""
    from oxide.runtime.tensormap import spec_of

    spec = spec_of(name, ann, a)
    if device.is_cpu and a.device != HOST:
        raise ArgumentError(f"`{name}` is a tensor map of an array in GPU memory, but this "
                            "launch runs on the CPU: build it from a host (NumPy) array")
    if not device.is_cpu and a.device != device.index:
        where = "a host array" if a.device == HOST else f"an array on cuda:{a.device}"
        raise ArgumentError(f"`{name}` is a tensor map of {where}, but this launch runs on "
                            f"{device}: build it from an array on that GPU (TMA reads and "
                            "writes the GPU's memory)")
    return ParamPlan(name, "tensormap", spec, dtype=_PTR if device.is_cpu else None)


def check_no_self_overlap(name: str, shape: tuple[int, ...], strides: tuple[int, ...]) -> None:
    """A writable strided array must give each element its own address (runtime/overlap.py):
    else two threads with distinct witnesses write the same bytes. Every launch runs it."""
    found = self_overlap(shape, strides)
    if found == DISJOINT:
        return
    layout = f"shape {tuple(shape)}, strides {tuple(strides)} in elements"
    if found == UNPROVED:
        raise ArgumentError(f"`{name}` is writable, and oxide cannot prove that its elements "
                            f"do not overlap one another ({layout}); pass a contiguous copy")
    if any(s == 0 for s, n in zip(strides, shape, strict=True) if n > 1):
        raise ArgumentError(f"`{name}` is writable but has a zero stride (a broadcast view): "
                            "its elements alias one another")
    raise ArgumentError(f"`{name}` is writable but its elements overlap one another in memory "
                        f"({layout}): two threads would write the same element; pass a "
                        "contiguous copy (`np.ascontiguousarray(a)`, `t.contiguous()`)")


def _scalar_plan(name: str, ann: Any, a: Any, typevars: dict[T.TypeVar, T.DType]) -> ParamPlan:
    if isinstance(a, np.generic):
        dt = _numpy_scalar_dtype(name, a)
        if isinstance(ann, T.TypeVar):
            _bind_typevar(ann, dt, typevars, name)
        elif dt != ann:
            raise ArgumentError(f"`{name}` is {ann.name}; got a {dt.name} scalar "
                                f"(pass a Python number or {ann.name}(...))")
    elif isinstance(a, (bool, int, float)):
        if isinstance(ann, T.TypeVar):
            dt = T.bool_ if isinstance(a, bool) else T.i64 if isinstance(a, int) else T.f64
            _bind_typevar(ann, dt, typevars, name)
        else:
            dt = ann
            if isinstance(a, float) and not dt.is_float:
                raise ArgumentError(f"`{name}` is {dt.name}; got the float {a!r}")
            if dt.is_bool and not isinstance(a, bool):
                raise ArgumentError(f"`{name}` is bool_; got {type(a).__name__} {a!r}")
            if isinstance(a, bool) and not dt.is_bool:  # most likely a mistake: say so
                raise ArgumentError(f"`{name}` is {dt.name}; got the bool {a!r} (pass "
                                    f"`int({a!r})` if the number is meant)")
    elif _is_array(a):
        raise ArgumentError(f"`{name}` is a scalar ({_ann_name(ann)}); got an array")
    else:
        raise ArgumentError(f"`{name}` is a scalar ({_ann_name(ann)}); got {type(a).__name__}")
    if dt.is_fp8:
        raise fp8_scalar_refused(name, dt)
    return ParamPlan(name, "scalar", dt, dtype=dt)


def _ann_name(ann: Any) -> str:
    return ann.name if isinstance(ann, (T.DType, T.TypeVar)) else repr(ann)


def _is_array(a: Any) -> bool:
    try:
        return view_of(a) is not None
    except BadArray:
        return True


def _numpy_scalar_dtype(name: str, a: np.generic) -> T.DType:
    try:
        return T.dtype_of(a.dtype)
    except TypeError:
        raise ArgumentError(f"`{name}`: NumPy {a.dtype} scalars are not supported") from None


# ---------------------------------------------------------------------------
# Values (every launch)

_INT_RANGES = {dt.name: ((-(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1) if dt.is_signed
                         else (0, (1 << dt.bits) - 1))
               for dt in T.SCALARS.values() if dt.is_int}
_FLOAT_MAX = {"f16": 65504.0, "bf16": 3.3895313892515355e38, "f32": 3.4028234663852886e38}


def scalar_value(name: str, dt: T.DType, a: Any) -> Any:
    """`a` as a plain Python value of `dt`, or an ArgumentError when it does not fit."""
    if dt.is_int:
        if isinstance(a, float):
            raise ArgumentError(f"`{name}` is {dt.name}; got the float {a!r}")
        v = int(a)
        lo, hi = _INT_RANGES[dt.name]
        if not lo <= v <= hi:
            raise ArgumentError(f"`{name}` is {dt.name}, whose range is {lo}..{hi}; got {v}")
        return v
    if dt.is_float:
        try:
            v = float(a)
        except OverflowError:  # an int beyond every float
            raise ArgumentError(f"`{name}` is {dt.name}; got an int too large for any float "
                                f"({_short(a)})") from None
        limit = _FLOAT_MAX.get(dt.name)
        if limit is not None and math.isfinite(v) and abs(v) > limit:
            raise ArgumentError(f"`{name}` is {dt.name}, whose largest value is {limit:g}; "
                                f"got {v!r}")
        return v
    return bool(a)


def flatten(plan: Plan, args: Sequence[Any], views: list[ArrayView | None]) -> list[Any]:
    """The machine arguments for `args` under `plan` (host arrays still at host pointers)."""
    out: list[Any] = []
    for p, a, v in zip(plan.params, args, views, strict=True):
        kind = p.kind
        if kind == "array":
            out.append(v.ptr)  # type: ignore[union-attr]
            out.extend(v.shape)  # type: ignore[union-attr]
            if p.strided:
                if p.writable:  # the layout may differ from the one the plan saw
                    check_no_self_overlap(p.name, v.shape, v.strides)  # type: ignore[union-attr]
                out.extend(v.strides)  # type: ignore[union-attr]
        elif kind == "scalar":
            out.append(scalar_value(p.name, p.dtype, a))  # type: ignore[arg-type]
        elif kind == "tensormap":
            out.append(a.raw if p.dtype is None else a.address)
    return out


def check_aliasing(plan: Plan, views: list[ArrayView | None]) -> None:
    """A writable array must not share a byte with any other array argument."""
    ranges = []
    for p, v in zip(plan.params, views, strict=True):
        if p.kind == "array" and v is not None:
            lo, hi = v.byte_range()
            if hi > lo:
                ranges.append((p, lo, hi))
    for i, (p, lo, hi) in enumerate(ranges):
        for q, lo2, hi2 in ranges[i + 1:]:
            if (p.writable or q.writable) and lo < hi2 and lo2 < hi:
                w, o = (p, q) if p.writable else (q, p)
                raise AliasingError(
                    f"`{w.name}` ({w.spec!r}) overlaps `{o.name}` ({o.spec!r}) in memory: a "
                    "writable parameter must not share memory with any other array argument; "
                    "pass a copy, or separate output buffers")


def plan_for(kernel: Any, key: tuple[Any, ...], args: Sequence[Any],
             views: list[ArrayView | None], device: Device) -> Plan:
    """The cached Plan for `key` on `kernel`, made on first use."""
    cache = kernel.__dict__.setdefault("_oxide_plans", {})
    plan = cache.get(key)
    if plan is None:
        plan = cache[key] = make_plan(kernel, args, views, device)
    return plan


def bind(kernel: Any, args: Sequence[Any], device: Device) -> BoundArgs:
    """Check `args` against `kernel`'s parameters and flatten them for `device`.

    On a GPU device, host arrays are copied in (`copies` says where to copy back)
    with a one-time warning; on the CPU, arrays in GPU memory are an ArgumentError.
    """
    key, views = read_args(kernel, args, device)
    plan = plan_for(kernel, (device, key), args, views, device)
    if plan.check_aliasing:
        check_aliasing(plan, views)
    copies: list[tuple[Any, Any, bool]] = []
    keepalive: list[Any] = [v.owner for v in views if v is not None]
    if plan.copies:
        views = copy_host_arrays(plan, views, device, copies)
        keepalive += [dev for _, dev, _ in copies]
    return BoundArgs(plan, flatten(plan, args, views), copies, keepalive)


def copy_host_arrays(plan: Plan, views: list[ArrayView | None], device: Device,
                     copies: list[tuple[Any, Any, bool]], stream: int | None = None
                     ) -> list[ArrayView | None]:
    """Copy host arrays to `device` (ordered on `stream`, the launch's); returns the views
    with device arrays in their place."""
    global _host_copy_warned
    from oxide.runtime.arrays import to_device

    out = list(views)
    names = []
    for p, v in zip(plan.params, views, strict=True):  # every check before any copy
        if p.copy_in and p.writable and v is not None:
            if not v.host.flags.writeable:  # type: ignore[union-attr]
                raise ArgumentError(f"`{p.name}` is a {p.spec!r} but the host array is "
                                    "read-only, so the result could not be copied back")
            if v.strides is not None:  # the plan's key ignores a host array's layout
                check_no_self_overlap(p.name, v.shape, v.strides)
    for i, (p, v) in enumerate(zip(plan.params, views, strict=True)):
        if p.copy_in and v is not None:
            dev = to_device(v.host, device=device, stream=stream)
            copies.append((v.host, dev, p.writable))
            out[i] = dev._view()
            names.append(p.name)
    if not _host_copy_warned:
        _host_copy_warned = True
        warnings.warn(f"oxide: host array(s) {', '.join(f'`{n}`' for n in names)} copied to "
                      f"{device} for the launch (and back if written); pass GPU arrays "
                      "(ox.to_device, torch, CuPy) to avoid the copies", stacklevel=4)
    return out

