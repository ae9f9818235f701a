"""Concrete signatures for compiling a kernel without example values (`inspect`, `build`).

A generic or array-typed kernel has no single machine code: it needs one
specialization. Without `--types`/`--sig`, oxide derives the one a user most
likely wants: every TypeVar is f32, every array C-contiguous with its declared
rank, and each `Const` parameter takes its `--const NAME=VALUE`.

    --types "Slice[f32], f32, DisjointSlice[f32]"   one entry per parameter
    --types "Slice[f64], 4"                          a Const parameter takes a value
    --const N=4                                       fills Const parameters left out
"""

from __future__ import annotations

import ast
from typing import Any

from oxide import types as T
from oxide.specialize import ConstValue

DEFAULT_TYPEVAR = T.f32

class _TensorMapName:
    """`TensorMap[f32, 2]` in a signature: the annotation type (the host class, which
    would also give it, is loaded lazily with its driver bindings: not needed here)."""

    def __getitem__(self, item: Any) -> T.TensorMapType:
        dt, rank = item if isinstance(item, tuple) else (item, 2)
        if not isinstance(dt, T.DType) or not (isinstance(rank, int) and 1 <= rank <= 5):
            raise SignatureError(f"TensorMap[dtype, rank] takes a dtype and a rank from 1 to 5, "
                                 f"not {item!r}")
        return T.TensorMapType(dt, rank)


_NAMES: dict[str, Any] = {
    **T.SCALARS, "Slice": T.Slice, "DisjointSlice": T.DisjointSlice,
    "AtomicSlice": T.AtomicSlice, "RawSlice": T.RawSlice, "TensorMap": _TensorMapName(),
}


class SignatureError(ValueError):
    """A `--types`, `--sig` or `--const` the kernel cannot take; the message says why."""


def parse_types(text: str) -> list[Any]:
    """`"Slice[f32, 2], f32, 4"` -> [Slice[f32, 2], f32, 4]: types from oxide's names, values
    as Python literals."""
    try:
        tree = ast.parse(f"({text},)", mode="eval")
    except SyntaxError as exc:
        raise SignatureError(f"cannot parse types {text!r}: {exc.msg}") from exc
    return [_evaluate(node, text) for node in tree.body.elts]  # type: ignore[attr-defined]


def _evaluate(node: ast.expr, text: str) -> Any:
    if isinstance(node, ast.Constant | ast.UnaryOp):
        return ast.literal_eval(node)
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
            and node.value.id in _NAMES:
        inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        items = tuple(_evaluate(n, text) for n in inner)
        return _NAMES[node.value.id][items if len(items) > 1 else items[0]]
    raise SignatureError(f"in {text!r}: `{ast.unparse(node)}` is not an oxide type or a "
                         f"literal (types: {', '.join(_NAMES)})")


def parse_consts(items: list[str]) -> dict[str, Any]:
    """`["N=4", "EPS=0.5"]` -> {"N": 4, "EPS": 0.5}."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise SignatureError(f"--const takes NAME=VALUE, got {item!r}")
        try:
            out[name.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError) as exc:
            raise SignatureError(f"--const {item!r}: the value must be a Python literal") from exc
    return out


def compile_args(kernel: Any, types: list[Any] | None, consts: dict[str, Any]) -> tuple[Any, ...]:
    """The arguments for `kernel.compile(...)`: the given types, else defaults from annotations."""
    params = kernel.params
    const_params = [p for p in params if isinstance(p.annotation, T.ConstType)]
    if types is None:
        return tuple(_default(kernel, p, consts) for p in params)
    if len(types) == len(params):
        return tuple(types)
    if len(types) == len(params) - len(const_params):
        given = iter(types)
        return tuple(_const(kernel, p, consts) if isinstance(p.annotation, T.ConstType)
                     else next(given) for p in params)
    names = ", ".join(f"{p.name}: {p.annotation!r}" for p in params)
    raise SignatureError(f"`{kernel.__name__}({names})` takes {len(params)} types "
                         f"(or {len(params) - len(const_params)} with --const); got {len(types)}")


def _default(kernel: Any, p: Any, consts: dict[str, Any]) -> Any:
    ann = p.annotation
    if isinstance(ann, T.ConstType):
        return _const(kernel, p, consts)
    if isinstance(ann, T.TypeVar):
        return DEFAULT_TYPEVAR
    if isinstance(ann, T.ArrayType):
        dtype = DEFAULT_TYPEVAR if isinstance(ann.dtype, T.TypeVar) else ann.dtype
        return T.ArrayType(ann.access, dtype, ann.rank, True)
    return ann


def _const(kernel: Any, p: Any, consts: dict[str, Any]) -> ConstValue:
    if p.name not in consts:
        raise SignatureError(f"`{kernel.__name__}` has `{p.name}: {p.annotation!r}`, a "
                             f"compile-time constant: give its value with --const {p.name}=VALUE")
    return ConstValue(consts[p.name])
