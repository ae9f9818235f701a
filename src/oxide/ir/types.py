"""oxide IR types (xDSL attributes) and their mapping to oxide dtypes.

Scalars use xDSL's builtin types with explicit signedness (`si32`, `ui32`), so
the IR says what `//`, `>>` and comparisons mean without consulting the frontend.
Arrays, thread-index witnesses and local slots are oxide's own types.
"""

from __future__ import annotations

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float8E4M3FNType,
    Float8E5M2Type,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    Signedness,
    StringAttr,
)
from xdsl.ir import Attribute, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition

from oxide import fp8
from oxide import types as T


@irdl_attr_definition
class ArrayType(ParametrizedAttribute, TypeAttribute):
    """`!oxide.array<f32, 2, "disjoint", 1>`: element, rank, access, contiguous."""

    name = "oxide.array"
    elem: Attribute
    rank: IntAttr
    access: StringAttr
    contiguous: IntAttr


@irdl_attr_definition
class ThreadIndexType(ParametrizedAttribute, TypeAttribute):
    """A witness: an index unique to this thread in the launch (rank 1 or 2)."""

    name = "oxide.thread_index"
    rank: IntAttr


@irdl_attr_definition
class SlotType(ParametrizedAttribute, TypeAttribute):
    """A mutable local variable; LLVM's SROA turns slots into registers."""

    name = "oxide.slot"
    elem: Attribute


@irdl_attr_definition
class SharedArrayType(ParametrizedAttribute, TypeAttribute):
    """A block-shared or thread-local fixed-shape array (`space` is "shared" or "local")."""

    name = "oxide.fixed_array"
    elem: Attribute
    shape: StringAttr  # "32x33"; "?" for dynamic shared memory
    space: StringAttr


_FLOATS = {16: Float16Type, 32: Float32Type, 64: Float64Type}
# 8-bit floats (LLVM type i8: the bits, which codegen/fp8.py converts)
_FP8 = {"f8e4m3": Float8E4M3FNType, "f8e5m2": Float8E5M2Type}
_FP8_DTYPES = {cls: T.SCALARS[name] for name, cls in _FP8.items()}


_IR_TYPES: dict[str, Attribute] = {}  # by dtype name: attributes are immutable, so shared


def ir_type(dt: T.DType) -> Attribute:
    """The IR type of an oxide scalar dtype (made once a dtype: a compile asks for
    thousands, and an xDSL attribute costs microseconds to build and verify)."""
    found = _IR_TYPES.get(dt.name)
    if found is None:
        found = _IR_TYPES[dt.name] = _new_ir_type(dt)
    return found


def _new_ir_type(dt: T.DType) -> Attribute:
    if dt is T.bf16 or dt.name == "bf16":
        return BFloat16Type()
    if dt.is_fp8:
        return _FP8[dt.name]()
    if dt.is_float:
        return _FLOATS[dt.bits]()
    if dt.is_bool:
        return IntegerType(1)
    sign = Signedness.SIGNED if dt.is_signed else Signedness.UNSIGNED
    return IntegerType(dt.bits, sign)


def constant_attr(value: int | float | bool, dt: T.DType) -> FloatAttr | IntegerAttr:
    """The value attribute of a constant of type `dt`. An 8-bit float's holds the value
    it converts to (oxide/fp8.py's rounding), so the IR says what the kernel computes."""
    if dt.is_fp8:
        return FloatAttr(fp8.rounded(value, fp8.FORMATS[dt.name]), ir_type(dt))
    if dt.is_float:
        return FloatAttr(float(value), ir_type(dt))
    return IntegerAttr(int(value), ir_type(dt))


def is_fp8_type(t: Attribute) -> bool:
    return type(t) in _FP8_DTYPES


def dtype_of_ir(t: Attribute) -> T.DType:
    """The oxide dtype of an IR scalar type."""
    if isinstance(t, BFloat16Type):
        return T.bf16
    if isinstance(t, Float16Type):
        return T.f16
    if isinstance(t, Float32Type):
        return T.f32
    if isinstance(t, Float64Type):
        return T.f64
    if is_fp8_type(t):
        return _FP8_DTYPES[type(t)]
    if isinstance(t, IntegerType):
        width = t.width.data
        if width == 1:
            return T.bool_
        signed = t.signedness.data != Signedness.UNSIGNED
        return T.SCALARS[f"{'i' if signed else 'u'}{width}"]
    raise TypeError(f"not a scalar IR type: {t}")


def array_ir_type(at: T.ArrayType) -> ArrayType:
    return ArrayType(ir_type(at.dtype), IntAttr(at.rank), StringAttr(at.access),
                     IntAttr(1 if at.contiguous else 0))
