"""Turning compile arguments (types or example values) into a concrete signature.

A signature has one entry per kernel parameter: a `DType` for scalars, an
`ArrayType` with a concrete dtype, rank and layout for arrays, and a `ConstValue`
for `Const` parameters. It is hashable: the key of a specialization.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from oxide import types as T
from oxide.errors import ArgumentError
from oxide.kernel_types import fp8_scalar_refused


@dataclass(frozen=True)
class ConstValue:
    """The value of a `Const` parameter in one specialization."""

    value: Any


Spec = Any  # T.DType | T.ArrayType | ConstValue


@dataclass(frozen=True)
class ArrayInfo:
    """What compile and launch need to know of an array argument."""

    dtype: T.DType
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    contiguous: bool


def array_info(value: Any) -> ArrayInfo | None:
    """Describe an array-like example value (NumPy, CUDA array interface, DLPack tensors)."""
    if isinstance(value, np.ndarray):
        dt = T.dtype_of(value.dtype)
        item = value.dtype.itemsize
        strides = tuple(s // item for s in value.strides)
        return ArrayInfo(dt, value.shape, strides, bool(value.flags.c_contiguous))
    info = getattr(value, "__oxide_array_info__", None)
    if info is not None:
        return info()
    cai = getattr(value, "__cuda_array_interface__", None)
    if cai is not None:
        # a bf16 tensor's typestr is "<V2" (NumPy has no bf16): its own dtype says which
        typed = getattr(value, "dtype", None)
        dt = T.dtype_of(typed if typed is not None else np.dtype(cai["typestr"]))
        shape = tuple(cai["shape"])
        item = np.dtype(cai["typestr"]).itemsize
        if cai.get("strides") is None:
            strides = T.c_strides(shape)
        else:
            strides = tuple(s // item for s in cai["strides"])
        return ArrayInfo(dt, shape, strides, strides == T.c_strides(shape))
    if hasattr(value, "dtype") and hasattr(value, "shape") and hasattr(value, "stride"):
        # torch.Tensor without importing torch.
        dt = T.dtype_of(value.dtype)
        shape = tuple(value.shape)
        strides = tuple(value.stride())
        return ArrayInfo(dt, shape, strides, strides == T.c_strides(shape))
    return None


def const_value(name: str, ann: T.ConstType, a: Any) -> Any:
    """`a` as the value of a `Const` parameter, or an ArgumentError naming the parameter.

    Each value is a specialization, keyed by the value: it must be hashable. `Const[int]`
    takes ints (NumPy integers too), not bools (as scalar parameters do not) or floats;
    `Const[float]` numbers; `Const[bool]` bools. Other `Const[...]` types take any
    hashable value. Launches (runtime/args.py) and `compile` both apply this rule."""
    try:
        hash(a)
    except TypeError:
        raise ArgumentError(f"`{name}` is {ann!r}, a compile-time value (one specialization "
                            f"per value); got an unhashable {type(a).__name__}") from None
    pytype = ann.pytype
    if pytype is int:
        ok = isinstance(a, (int, np.integer)) and not isinstance(a, bool)
    elif pytype is float:
        ok = isinstance(a, (int, float, np.integer, np.floating)) and not isinstance(a, bool)
    elif pytype is bool:
        ok = isinstance(a, (bool, np.bool_))
    else:
        ok = True
    if not ok:
        raise ArgumentError(f"`{name}` is {ann!r}; got {type(a).__name__} {short_repr(a)}")
    return a


def short_repr(value: Any) -> str:
    """`repr(value)`, abbreviated in the middle past 40 characters (for error messages)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:18]}...{text[-18:]} ({len(text)} characters)"


def signature_from(kernel: Any, args: tuple[Any, ...]) -> tuple[Spec, ...]:
    """The signature for `kernel.compile(*args)`: each arg a type or an example value."""
    if len(args) != len(kernel.params):
        raise ArgumentError(
            f"`{kernel.__name__}` has {len(kernel.params)} parameters "
            f"({', '.join(p.name for p in kernel.params)}); got {len(args)} arguments")
    typevars: dict[T.TypeVar, T.DType] = {}
    specs = []
    for p, a in zip(kernel.params, args, strict=True):
        specs.append(_spec(kernel, p, a, typevars))
    return tuple(specs)


def _bind(tv: T.TypeVar, dt: T.DType, typevars: dict[T.TypeVar, T.DType], pname: str) -> None:
    bound = typevars.setdefault(tv, dt)
    if bound != dt:
        raise ArgumentError(f"`{pname}` binds {tv.name} = {dt.name}, but an earlier parameter "
                            f"bound {tv.name} = {bound.name}")


def _spec(kernel: Any, p: Any, a: Any, typevars: dict[T.TypeVar, T.DType]) -> Spec:
    ann = p.annotation
    if isinstance(ann, T.ConstType):
        # The launch rule, so that compile(), `--sig`/`--const` and a launch accept the
        # same values (a ConstValue from the CLI or a bundle is checked too).
        value = a.value if isinstance(a, ConstValue) else a
        is_type = isinstance(value, (T.ConstType, type)) or (
            ann.pytype in (int, float, bool) and isinstance(value, (T.DType, T.ArrayType)))
        if is_type:
            raise ArgumentError(f"`{p.name}` is {ann!r}: compile it with a value, not a type")
        return ConstValue(const_value(p.name, ann, value))
    if isinstance(ann, T.TensorMapType):
        from oxide.runtime.tensormap import spec_of

        return spec_of(p.name, ann, a)
    if isinstance(ann, T.ArrayType):
        vectors = None  # see ArrayType.vectors: a launch's specialization, kept where given
        if isinstance(a, T.ArrayType):
            dt, rank, contiguous = a.dtype, a.rank, True if a.contiguous is None else a.contiguous
            vectors = a.vectors
            if isinstance(dt, T.TypeVar):
                raise ArgumentError(f"`{p.name}`: compile with a concrete element type, e.g. "
                                    f"{a.title}[f32], not the type variable {dt.name}")
            if a.access != ann.access:
                raise ArgumentError(f"`{p.name}` is declared {ann!r}, not {a!r}")
        else:
            info = array_info(a)
            if info is None:
                raise ArgumentError(f"`{p.name}` is {ann!r}; got {type(a).__name__}, which is "
                                    "not an array")
            dt, rank, contiguous = info.dtype, len(info.shape), info.contiguous
            if getattr(kernel, "is_tile", False) and isinstance(a, np.ndarray) and contiguous:
                # a host array: as a GPU launch of it sees its device copy (a tile
                # kernel's rows of 16-byte vectors: the allocator aligns a copy's address)
                from oxide.runtime.array_view import fits_vectors

                vectors = fits_vectors(0, tuple(info.shape), None, dt.itemsize)
        if isinstance(ann.dtype, T.TypeVar):
            _bind(ann.dtype, dt, typevars, p.name)
        elif dt != ann.dtype:
            raise ArgumentError(f"`{p.name}` is {ann!r}; got an array of {dt.name}")
        wrong = ann.rank_error(p.name, rank)
        if wrong:
            raise ArgumentError(wrong)
        return T.ArrayType(ann.access, dt, rank, contiguous, vectors=vectors)
    # scalar (DType or TypeVar)
    if isinstance(a, T.DType):
        dt = a
    elif isinstance(a, np.generic):
        dt = T.dtype_of(a.dtype)
    elif isinstance(a, (bool, int, float)):
        dt = ann if isinstance(ann, T.DType) else (
            T.bool_ if isinstance(a, bool) else T.i64 if isinstance(a, int) else T.f64)
    else:
        raise ArgumentError(f"`{p.name}` is a scalar; got {type(a).__name__}")
    if dt.is_fp8:
        raise fp8_scalar_refused(p.name, dt)
    if isinstance(ann, T.TypeVar):
        _bind(ann, dt, typevars, p.name)
        return dt
    if dt != ann and not isinstance(a, (bool, int, float)):
        raise ArgumentError(f"`{p.name}` is {ann.name}; got {dt.name}")
    return ann


def typevar_bindings(kernel: Any, sig: tuple[Spec, ...]) -> dict[T.TypeVar, T.DType]:
    """The TypeVar -> dtype map a signature implies (for `T(0)` inside generic kernels)."""
    out: dict[T.TypeVar, T.DType] = {}
    for p, s in zip(kernel.params, sig, strict=True):
        ann = p.annotation
        if isinstance(ann, T.TypeVar) and isinstance(s, T.DType):
            out[ann] = s
        elif isinstance(ann, T.ArrayType) and isinstance(ann.dtype, T.TypeVar):
            out[ann.dtype] = s.dtype
    return out
