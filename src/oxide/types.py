"""Scalar dtypes and kernel parameter types.

These objects are shared by the host API (annotations, launch checks) and the
compiler (type inference, codegen), so they carry everything both need: the
NumPy dtype, the LLVM type and the promotion rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from oxide import fp8

__all__ = [
    "DType", "f16", "bf16", "f8e4m3", "f8e5m2", "f32", "f64", "i8", "i16", "i32", "i64",
    "u8", "u16", "u32", "u64", "bool_", "SCALARS", "dtype_of",
    "ArrayType", "Slice", "DisjointSlice", "AtomicSlice", "RawSlice",
    "Const", "ConstType", "TypeVar", "TensorMapType",
]


@dataclass(frozen=True, eq=False)
class DType:
    """A scalar type. Calling it converts: on the host to a NumPy scalar, in a kernel to a cast."""

    name: str
    kind: str  # "f" float, "i" signed, "u" unsigned, "b" bool, "q" 8-bit float (storage)
    bits: int
    llvm: str
    numpy_name: str | None
    ml_dtypes_name: str | None = None  # the host dtype where NumPy has none of its own

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind in "iu"

    @property
    def is_signed(self) -> bool:
        return self.kind == "i"

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    @property
    def is_fp8(self) -> bool:
        """An 8-bit float: a storage type (loads, stores, conversions and products), held
        in an i8; arithmetic on it is refused (convert it to a wider float first)."""
        return self.kind == "q"

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    @property
    def numpy(self) -> np.dtype:
        if self.numpy_name is None:
            try:
                import ml_dtypes  # type: ignore[import-not-found]

                return np.dtype(getattr(ml_dtypes, str(self.ml_dtypes_name)))
            except ImportError as exc:  # pragma: no cover - depends on environment
                raise TypeError(
                    f"oxide.{self.name} values on the host (NumPy arrays and scalars) take "
                    f"the NumPy dtype `ml_dtypes.{self.ml_dtypes_name}`, since NumPy has no "
                    f"{self.ml_dtypes_name} of its own: install it with `pip install "
                    "ml-dtypes`") from exc
        return np.dtype(self.numpy_name)

    def __call__(self, value: Any) -> Any:
        if self.is_fp8:  # what a kernel's conversion gives (rounded, saturated), as a float
            return fp8.rounded(value, fp8.FORMATS[self.name])
        if self.numpy_name is None:
            return float(value)
        return self.numpy.type(value)

    def __repr__(self) -> str:
        return f"oxide.{self.name}"

    def __hash__(self) -> int:
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DType) and other.name == self.name

    def __reduce__(self) -> tuple[Any, ...]:
        return (dtype_of, (self.name,))


f16 = DType("f16", "f", 16, "half", "float16")
bf16 = DType("bf16", "f", 16, "bfloat", None, "bfloat16")
# OCP 8-bit floats: e4m3 without infinities (max 448, NaN S.1111.111), e5m2 with them
f8e4m3 = DType("f8e4m3", "q", 8, "i8", None, "float8_e4m3fn")
f8e5m2 = DType("f8e5m2", "q", 8, "i8", None, "float8_e5m2")
f32 = DType("f32", "f", 32, "float", "float32")
f64 = DType("f64", "f", 64, "double", "float64")
i8 = DType("i8", "i", 8, "i8", "int8")
i16 = DType("i16", "i", 16, "i16", "int16")
i32 = DType("i32", "i", 32, "i32", "int32")
i64 = DType("i64", "i", 64, "i64", "int64")
u8 = DType("u8", "u", 8, "i8", "uint8")
u16 = DType("u16", "u", 16, "i16", "uint16")
u32 = DType("u32", "u", 32, "i32", "uint32")
u64 = DType("u64", "u", 64, "i64", "uint64")
bool_ = DType("bool_", "b", 1, "i1", "bool")

SCALARS: dict[str, DType] = {
    t.name: t for t in (f16, bf16, f8e4m3, f8e5m2, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, bool_)
}
_BY_NUMPY = {t.numpy_name: t for t in SCALARS.values() if t.numpy_name}


def dtype_of(value: Any) -> DType:
    """The oxide dtype of a name, NumPy dtype, torch dtype or DType."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value in SCALARS:
        return SCALARS[value]
    name = str(value).replace("torch.", "")
    for t in (bf16, f8e4m3, f8e5m2):  # NumPy has none of these: their ml_dtypes / torch names
        if name == t.ml_dtypes_name:
            return t
    if name in ("float", "int", "bool"):
        name = {"float": "float32", "int": "int32", "bool": "bool"}[name]
    try:
        name = np.dtype(name).name
    except TypeError:
        pass
    if name in _BY_NUMPY:
        return _BY_NUMPY[name]
    raise TypeError(f"{value!r} is not a dtype oxide supports")


# ---------------------------------------------------------------------------
# Parameter types


ACCESS_KINDS = ("slice", "disjoint", "atomic", "raw")


# the widest global access, one `ld.global.v4.b32`: what `ArrayType.vectors` means by
# a vector (runtime/array_view.fits_vectors; tile/layout.vector_elements)
VECTOR_BYTES = 16
# kernel arrays have up to 4 dimensions (torch's (batch, heads, seq, dim)); tiles up to 3,
# so a tile kernel reads a rank-4 array through views (`q[b, h]`, docs/language.md)
MAX_ARRAY_RANK = 4


@dataclass(frozen=True)
class ArrayType:
    """An array parameter: element type, rank, access discipline and layout.

    `contiguous` is part of a specialization (C-contiguous arrays index with
    shapes alone); an annotation leaves it `None` and the launch decides.
    """

    access: str
    dtype: Any  # DType, or a TypeVar in a generic annotation
    rank: int = 1
    contiguous: bool | None = None
    # False for an annotation without a rank (`Slice[f32]`): a launch takes the rank from
    # its argument, one specialization per rank, as a TypeVar takes a dtype. `compile()`
    # given the type itself, and `--sig`, keep rank 1. Specializations are always ranked.
    ranked: bool = field(default=True, compare=False)  # equal as types either way
    # A tile kernel's launch specializes on whether the array's rows take 16-byte vectors
    # (`runtime/array_view.py`'s `fits_vectors`): then its tile loads and stores are
    # vector accesses with no test at run time, and otherwise scalar ones. None (an
    # annotation, a SIMT kernel, `compile()` from types): the kernel tests at run time.
    vectors: bool | None = None

    @property
    def writable(self) -> bool:
        return self.access != "slice"

    @property
    def title(self) -> str:
        return {"slice": "Slice", "disjoint": "DisjointSlice", "atomic": "AtomicSlice",
                "raw": "RawSlice"}[self.access]

    def with_layout(self, contiguous: bool) -> ArrayType:
        return ArrayType(self.access, self.dtype, self.rank, contiguous, self.ranked,
                         self.vectors)

    def rank_error(self, name: str, got: int) -> str | None:
        """Why an array of rank `got` cannot be `name: self`, or None where it can."""
        dt = self.dtype.name
        if not 0 <= got <= MAX_ARRAY_RANK:
            return (f"`{name}` is {self.title}[{dt}...]: kernel arrays have rank 0 to "
                    f"{MAX_ARRAY_RANK}; got {got}")
        if not self.ranked or got == self.rank:
            return None
        return (f"`{name}` is {self.title}[{dt}, {self.rank}]; got an array of rank {got}: "
                f"declare `{self.title}[{dt}, {got}]`, or `{self.title}[{dt}]` to take the "
                "rank from the argument")

    def __repr__(self) -> str:
        rank = f", {self.rank}" if self.rank != 1 else ""
        dt = self.dtype.name if isinstance(self.dtype, DType) else repr(self.dtype)
        return f"{self.title}[{dt}{rank}]"


class _ArrayFactory:
    """`Slice[f32]`, `Slice[f32, 2]`: builds an ArrayType of one access kind."""

    def __init__(self, access: str, doc: str) -> None:
        self.access = access
        self.__doc__ = doc

    def __getitem__(self, item: Any) -> ArrayType:
        dtype, rank = (item if isinstance(item, tuple) else (item, 1))
        if (not isinstance(rank, int) or isinstance(rank, bool)
                or not 0 <= rank <= MAX_ARRAY_RANK):
            raise self._error(f"array rank must be 0 to {MAX_ARRAY_RANK}, got {rank!r}",
                              "a rank is the number of indices: `Slice[f32, 2]` for a matrix, "
                              "`Slice[f32, 0]` for one value (a 0-d array, indexed `()`)")
        if not isinstance(dtype, (DType, TypeVar)):
            try:
                dtype = dtype_of(dtype)
            except TypeError:
                name = getattr(dtype, "__name__", repr(dtype))
                raise self._error(f"`{name}` is not a dtype oxide supports",
                                  f"element types are {', '.join(SCALARS)}, or an ox.TypeVar"
                                  ) from None
        return ArrayType(self.access, dtype, rank, ranked=isinstance(item, tuple))

    def _error(self, message: str, hint: str) -> Exception:
        """A KernelTypeError at the annotation that spelled this type (evaluated by
        Python where the function is defined, before any kernel compiles)."""
        import linecache
        import sys

        from oxide.errors import KernelTypeError, Span

        frame = sys._getframe(2)  # the code that wrote `Slice[...]`
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).rstrip("\n")
        title = ArrayType(self.access, f32).title
        col = max(line.find(title + "["), 0)
        end = line.find("]", col) + 1 or len(line)
        span = Span(frame.f_code.co_filename, frame.f_lineno, col, end, line)
        inside = frame.f_code.co_filename.startswith(__file__.rsplit("/", 1)[0])
        return KernelTypeError(f"`{title}[...]`: {message}", None if inside else span, hint=hint)

    def __repr__(self) -> str:
        return ArrayType(self.access, f32).title


Slice = _ArrayFactory("slice", "Read-only array parameter; writes are a compile error.")
DisjointSlice = _ArrayFactory(
    "disjoint", "Writable array; each thread writes only at its own ThreadIndex.")
AtomicSlice = _ArrayFactory("atomic", "Array updated only through `ox.atomic.*`.")
RawSlice = _ArrayFactory("raw", "Unrestricted array; access only inside `with ox.unsafe():`.")


@dataclass(frozen=True)
class ConstType:
    """A compile-time parameter: each distinct value gets its own specialization."""

    pytype: Any = int

    def __repr__(self) -> str:
        return f"Const[{getattr(self.pytype, '__name__', self.pytype)}]"


class _ConstFactory:
    """`Const[int]` (or `float`, `bool`): a parameter whose value is compiled in. Each
    distinct value gets its own specialization; `if` on it keeps one branch, and it can
    size arrays and bound unrolled loops."""

    def __getitem__(self, pytype: Any) -> ConstType:
        return ConstType(pytype)

    def __repr__(self) -> str:
        return "Const"


Const = _ConstFactory()


@dataclass(frozen=True)
class TensorMapType:
    """A TMA tensor map parameter, `ox.TensorMap[bf16, 2]`: element type and rank (1 to 5).

    The kernel receives the 128-byte `CUtensorMap` by value (a grid-constant parameter),
    which `ox.tma.*` address directly; the box and swizzle are in those bytes, not in the
    type, so one specialization serves every box. runtime/tensormap.py builds the value."""

    dtype: Any  # DType
    rank: int = 2

    def __repr__(self) -> str:
        return f"TensorMap[{self.dtype.name}, {self.rank}]"


TENSORMAP_BYTES = 128  # sizeof(CUtensorMap); the parameter is 64-byte aligned


def tensormap_type(item: Any) -> TensorMapType:
    """`TensorMap[dt, rank]` (rank defaults to 2): the annotation, checked where it is
    written (ox.TensorMap's `__class_getitem__` calls this)."""
    dtype, rank = (item if isinstance(item, tuple) else (item, 2))
    if not isinstance(rank, int) or isinstance(rank, bool) or not 1 <= rank <= 5:
        raise TypeError(f"TensorMap[dtype, rank]: a tensor map has rank 1 to 5, got {rank!r}")
    if not isinstance(dtype, DType):
        dtype = dtype_of(dtype)
    return TensorMapType(dtype, rank)


class TypeVar:
    """A type parameter of a generic kernel: `T = ox.TypeVar("T")`, then `Slice[T]`, `x: T`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The element strides of a C-contiguous array of `shape`."""
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))
