"""Resolving the free names of a kernel: closures, globals and builtins.

Python constants fold into weak literals; NumPy scalars become typed constants;
oxide objects (dtypes, intrinsics, @ox.func) stay static. Anything else a kernel
cannot use is reported at the use, with what it is.
"""

from __future__ import annotations

import builtins
import types as pytypes
from collections.abc import Callable
from typing import Any

import numpy as np

from oxide.frontend.values import Lit, Static, Tup

SUPPORTED_BUILTINS = {"range", "len", "min", "max", "abs", "print", "float", "int", "bool"}


class Scope:
    """The names visible to one Python function's body, outside its locals."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.closure: dict[str, Any] = {}
        code = fn.__code__
        if fn.__closure__:
            for name, cell in zip(code.co_freevars, fn.__closure__, strict=True):
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:  # an empty cell: defined later in the enclosing scope
                    continue
        self.globals = fn.__globals__

    def lookup(self, name: str) -> tuple[bool, Any]:
        """(found, python object) for a free name."""
        if name in self.closure:
            return True, self.closure[name]
        if name in self.globals:
            return True, self.globals[name]
        if hasattr(builtins, name):
            return True, getattr(builtins, name)
        return False, None

    def constants_used(self, names: list[str]) -> list[tuple[str, Any]]:
        """The folded constants among `names`, for the cache key."""
        out = []
        for name in names:
            found, obj = self.lookup(name)
            if found and isinstance(obj, (bool, int, float, np.generic)):
                out.append((name, obj))
        return out


def wrap_python(obj: Any) -> Any:
    """The frontend value of a Python object found by name or attribute."""
    if isinstance(obj, bool) or isinstance(obj, (int, float)):
        return Lit(obj)
    if is_number_tuple(obj):  # `W = (0.25, 0.5, 0.25)` at module level: a tuple of literals
        return Tup(tuple(wrap_python(x) for x in obj))
    return Static(obj)


def is_number_tuple(obj: Any) -> bool:
    """A (nested) tuple of Python numbers, which kernels read as a tuple of literals."""
    return isinstance(obj, tuple) and all(
        isinstance(x, (bool, int, float)) or is_number_tuple(x) for x in obj)


def is_module(obj: Any) -> bool:
    return isinstance(obj, pytypes.ModuleType)
