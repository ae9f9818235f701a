"""`@ox.kernel` and `@ox.func`: the user's functions, their parameters and specializations.

A `Kernel` owns its specializations: one compiled module per (parameter types,
Const values, target). Annotations are read at decoration, so a bad annotation
fails there; the body is compiled on first use or by `kernel.compile(...)`.
"""

from __future__ import annotations

import inspect
import typing
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable

from oxide import types as T
from oxide.errors import KernelSyntaxError, KernelTypeError
from oxide.frontend.scope import Scope
from oxide.frontend.source import Source, load_source


@dataclass(frozen=True)
class KernelOptions:
    """Per-kernel compile options (`@ox.kernel(checks=False, fastmath=..., max_threads=256)`)."""

    checks: bool = True
    contract: bool = True  # FMA contraction
    max_threads: int | None = None  # launch bounds: max threads per block


@dataclass(frozen=True)
class Param:
    """A kernel parameter as declared: name and annotation (a DType, ArrayType, ConstType...)."""

    name: str
    annotation: Any


class DeviceFunction:
    """An `@ox.func`: a device function inlined into the kernels that call it."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    @cached_property
    def source(self) -> Source:
        return load_source(self.fn)

    @cached_property
    def scope(self) -> Scope:
        return Scope(self.fn)

    @cached_property
    def annotations(self) -> dict[str, Any]:
        return _annotations(self.fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"`{self.__name__}` is an @ox.func: call it from a kernel")

    def __repr__(self) -> str:
        return f"<oxide.func {self.__name__}>"


def _annotations(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception:  # unresolvable string annotations: fall back to the raw objects
        return dict(getattr(fn, "__annotations__", {}))


class Kernel:
    """An `@ox.kernel`. Launch with `kernel[config](*args)` or `ox.launch(kernel, config, *args)`."""

    def __init__(self, fn: Callable[..., Any], options: KernelOptions) -> None:
        self.fn = fn
        self.options = options
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self.params = self._read_params()
        self._specializations: dict[Any, Any] = {}

    def _read_params(self) -> tuple[Param, ...]:
        sig = inspect.signature(self.fn)
        hints = _annotations(self.fn)
        params = []
        for p in sig.parameters.values():
            if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) or p.default is not p.empty:
                raise self._param_error(p.name, "kernel parameters are plain positional names "
                                        "(no defaults, *args or keyword-only)")
            ann = hints.get(p.name, p.empty)
            if ann is p.empty:
                raise self._param_error(
                    p.name, f"parameter `{p.name}` needs a type annotation",
                    hint=f"e.g. `{p.name}: f32` or `{p.name}: Slice[f32]`")
            if not isinstance(ann, (T.DType, T.ArrayType, T.ConstType, T.TypeVar)):
                raise self._param_error(
                    p.name, f"`{p.name}: {getattr(ann, '__name__', ann)}` is not a kernel "
                    "parameter type",
                    hint="use a scalar (f32, i32, ...), Slice/DisjointSlice/AtomicSlice/"
                         "RawSlice[...], Const[...] or an ox.TypeVar")
            params.append(Param(p.name, ann))
        return tuple(params)

    def _param_error(self, name: str, message: str, hint: str = "") -> KernelTypeError:
        source = self.source
        node = next((a for a in source.tree.args.args if a.arg == name), source.tree)
        return KernelTypeError(message, source.span(node), hint=hint)

    @cached_property
    def source(self) -> Source:
        return load_source(self.fn)

    @cached_property
    def scope(self) -> Scope:
        return Scope(self.fn)

    def compile(self, *args: Any, arch: str | None = None, target: str | None = None) -> Any:
        """Compile for explicit types or example values; returns a CompiledKernel.

        >>> ck = scale.compile(Slice[f32], f32, DisjointSlice[f32], arch="sm_90")  # doctest: +SKIP
        >>> print(ck.ptx)  # doctest: +SKIP
        """
        from oxide.compiler import compile_kernel
        from oxide.specialize import signature_from

        sig = signature_from(self, args)
        tgt = target or ("cpu" if arch == "cpu" else "nvptx")
        key = (sig, tgt, arch)
        ck = self._specializations.get(key)
        if ck is None:
            ck = compile_kernel(self, sig, tgt, arch)
            self._specializations[key] = ck
        return ck

    def __getitem__(self, config: Any) -> Any:
        from oxide.runtime.launch import bind_launch

        return bind_launch(self, config)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"`{self.__name__}` is a kernel: launch it with "
                        f"`{self.__name__}[config](...)` or `ox.launch({self.__name__}, config, ...)`")

    def __repr__(self) -> str:
        return f"<oxide.kernel {self.__qualname__}>"


def kernel(fn: Callable[..., Any] | None = None, *, checks: bool = True, contract: bool = True,
           max_threads: int | None = None) -> Any:
    """Declare a kernel. Options: `checks` (bounds checks), `contract` (FMA), `max_threads`.

    >>> @ox.kernel  # doctest: +SKIP
    ... def scale(x: Slice[f32], a: f32, out: DisjointSlice[f32]): ...
    """
    options = KernelOptions(checks=checks, contract=contract, max_threads=max_threads)
    if max_threads is not None and not (isinstance(max_threads, int) and 1 <= max_threads <= 1024):
        raise ValueError("max_threads must be an int from 1 to 1024")
    if fn is None:
        return lambda f: Kernel(f, options)
    if not callable(fn):
        raise KernelSyntaxError("@ox.kernel decorates a function")
    return Kernel(fn, options)


def func(fn: Callable[..., Any]) -> DeviceFunction:
    """Declare a device function, callable from kernels and other @ox.func."""
    return DeviceFunction(fn)
