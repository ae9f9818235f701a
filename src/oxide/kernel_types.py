"""What `@ox.kernel` and `@ox.func` declare, without compiling or launching anything.

`KernelBase` (a kernel's function, options and parameters), `DeviceFunction`
(`@ox.func`), `KernelOptions`, `Param`, the annotation reading and the decorator
diagnostics. The frontend, the runtimes, `lang/collectives.py` and the tile frontend
import these; `oxide.kernel` builds `Kernel` (compile, launch) on them and re-exports
every name, so `from oxide.kernel import DeviceFunction` keeps working. This module
imports no compiler or runtime module: that is what keeps the import graph one way
(docs/architecture.md, "Layers").
"""

from __future__ import annotations

import inspect
import linecache
import sys
import typing
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from oxide import types as T
from oxide.errors import (
    ArgumentError,
    CompileError,
    KernelSyntaxError,
    KernelTypeError,
    LaunchError,
    OxideError,
    Span,
)
from oxide.frontend.scope import Scope
from oxide.frontend.source import Source, load_source
from oxide.frontend.values import py_name
from oxide.tracebacks import user_frames_only


@dataclass(frozen=True)
class KernelOptions:
    """Per-kernel compile options (`@ox.kernel(checks=False, contract=False, max_threads=256)`)."""

    checks: bool = True
    contract: bool = True  # FMA contraction
    max_threads: int | None = None  # launch bounds: max threads per block
    coarsen: bool = True  # four logical blocks per GPU block where threads are independent
    lineinfo: bool = False  # Python lines in the PTX for Nsight (codegen/lineinfo.py)
    # the block shape every launch uses, as (x, y, z): shared arrays may then be used
    # outside `ox.unsafe()`, proved race-free for it (passes/shared_races.py)
    block: tuple[int, int, int] | None = None
    # bytes of call stack per GPU thread for kernels that call recursive @ox.funcs (None:
    # DEFAULT_STACK_SIZE for those); runtime/gpu.py raises the context's stack limit to it
    stack_size: int | None = None


@dataclass(frozen=True)
class Param:
    """A kernel parameter as declared: name and annotation (a DType, ArrayType, ConstType...)."""

    name: str
    annotation: Any


class _PythonFunction:
    """What the frontend reads of a decorated function `fn`: its source and its names."""

    fn: Callable[..., Any]

    @cached_property
    def source(self) -> Source:
        return load_source(self.fn)

    @cached_property
    def scope(self) -> Scope:
        return Scope(self.fn)


class DeviceFunction(_PythonFunction):
    """An `@ox.func`: a device function inlined into the kernels that call it."""

    def __init__(self, fn: Callable[..., Any], localns: dict[str, Any] | None = None) -> None:
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self.annotations = _annotations(fn, localns)
        self._check_annotations()

    def _check_annotations(self) -> None:
        """Refuse, at decoration as kernels do, an annotation that names nothing or no
        type a device function can take: it would otherwise be ignored, silently."""
        for name, ann in self.annotations.items():
            if name == "return":
                if not (ann is None or ann is type(None) or isinstance(ann, (T.DType, T.TypeVar))
                        or ann is tuple or typing.get_origin(ann) is tuple):
                    node = self.source.tree.returns or self.source.tree
                    raise KernelTypeError(
                        f"`-> {_annotation_text(ann)}` is not a return type of an @ox.func",
                        self.source.span(node),
                        hint=_func_type_hint(ann, returning=True))
            elif not isinstance(ann, (T.DType, T.ArrayType, T.TypeVar)):
                node = next((a for a in self.source.tree.args.args if a.arg == name),
                            self.source.tree)
                raise KernelTypeError(
                    f"`{name}: {_annotation_text(ann)}` is not an @ox.func parameter type",
                    self.source.span(node), hint=_func_type_hint(ann, returning=False))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"`{self.__name__}` is an @ox.func: call it from a kernel")

    def __repr__(self) -> str:
        return f"<oxide.func {self.__name__}>"


def _annotations(fn: Callable[..., Any], localns: dict[str, Any] | None = None
                 ) -> dict[str, Any]:
    """The function's annotations as objects.

    With `from __future__ import annotations` they are strings; a kernel defined
    inside a function may name that function's locals (`T = ox.TypeVar("T")` in a
    test), so they resolve against the decorator site's locals, then the globals.
    """
    try:
        return typing.get_type_hints(fn, localns=localns)
    except Exception:  # some string names nothing: resolve the others one by one
        pass
    out: dict[str, Any] = {}
    for name, ann in getattr(fn, "__annotations__", {}).items():
        if isinstance(ann, str):
            try:
                ann = eval(ann, fn.__globals__, localns)  # noqa: S307 - as get_type_hints does
            except CompileError as exc:  # `Slice[str]`: the caller reports why, at the name
                ann = _RefusedAnnotation(ann, exc)
            except Exception:  # noqa: BLE001 - keep the text; the caller reports it
                pass
        out[name] = ann
    return out


@dataclass(frozen=True)
class _RefusedAnnotation:
    """A string annotation whose evaluation oxide itself refused (`"Slice[str]"`)."""

    text: str
    error: CompileError


def _decorator_locals(depth: int) -> dict[str, Any] | None:
    """The locals of the frame that applied a decorator (None at module level)."""
    frame = sys._getframe(depth + 1)
    return None if frame.f_locals is frame.f_globals else dict(frame.f_locals)


class KernelBase(_PythonFunction):
    """What an `@ox.kernel` is, apart from compiling and launching it: its function,
    options and parameters. `oxide.kernel.Kernel` adds `compile` and `kernel[config]`;
    the stages below it (frontend, runtimes) recognize a kernel by this class, so they
    need not import `oxide.kernel`, which imports them."""

    def __init__(self, fn: Callable[..., Any], options: KernelOptions,
                 localns: dict[str, Any] | None = None) -> None:
        self.fn = fn
        self.options = options
        self._localns = localns
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self.params = self._read_params()
        self._specializations: dict[Any, Any] = {}

    def _read_params(self) -> tuple[Param, ...]:
        sig = inspect.signature(self.fn)
        hints = _annotations(self.fn, self._localns)
        self._localns = None  # read once, at decoration; do not keep the caller's locals
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
            if isinstance(ann, _RefusedAnnotation):
                raise self._param_error(p.name, f"`{p.name}: {ann.text}`: {ann.error.message}",
                                        hint=ann.error.hint)
            if not isinstance(ann, (T.DType, T.ArrayType, T.ConstType, T.TypeVar,
                                    T.TensorMapType)):
                raise self._param_error(
                    p.name, f"`{p.name}: {_annotation_text(ann)}` is not a kernel "
                    "parameter type", hint=_param_type_hint(ann))
            if isinstance(ann, T.DType) and ann.is_fp8:
                raise self._param_error(p.name, f"`{p.name}: {ann.name}`: {FP8_SCALAR}",
                                        hint=fp8_scalar_hint(p.name, ann))
            params.append(Param(p.name, ann))
        return tuple(params)

    def _param_error(self, name: str, message: str, hint: str = "") -> KernelTypeError:
        source = self.source
        node = next((a for a in source.tree.args.args if a.arg == name), source.tree)
        return KernelTypeError(message, source.span(node), hint=hint)

    def with_options(self, options: KernelOptions) -> KernelBase:
        """This kernel under other options (ox.autotune's configs, the warps a
        `num_warps="auto"` tile kernel chooses): the same function and parameters, with
        specializations and runtime state (`_oxide_*`) of its own."""
        variant = object.__new__(self._class_for(options))
        variant.__dict__.update({k: v for k, v in self.__dict__.items()
                                 if not k.startswith("_oxide_")})
        variant.options = options
        variant._specializations = {}
        return variant

    def _class_for(self, options: KernelOptions) -> type:
        """The class of a kernel with `options` (a tile kernel's depends on them)."""
        return type(self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise LaunchError(f"`{self.__name__}` is a kernel: launch it with "
                        f"`{self.__name__}[config](...)` or `ox.launch({self.__name__}, config, ...)`")

    def __repr__(self) -> str:
        return f"<oxide.kernel {self.__qualname__}>"


# 8-bit floats are storage types: a scalar of one would be a host-side rounding that the
# kernel could do itself from a wider value, so the parameter plumbing (struct formats,
# the native binder) never carries one
FP8_SCALAR = "kernels take 8-bit floats in arrays only, not as scalar parameters"


def fp8_scalar_hint(name: str, dt: T.DType) -> str:
    return (f"take it as f32 (`{name}: f32`) and convert it in the kernel where it must be "
            f"one: `{dt.name}({name})`")


def fp8_scalar_refused(name: str, dt: T.DType) -> ArgumentError:
    """A launch's (or `compile()`'s) error where a type variable of a scalar parameter
    would be an 8-bit float (a NumPy scalar of one, or the dtype of an array it shares)."""
    return ArgumentError(f"`{name}` is a scalar of {dt.name}: {FP8_SCALAR}; "
                         f"{fp8_scalar_hint(name, dt)}")


def _annotation_text(ann: Any) -> str:
    if isinstance(ann, str):  # a string annotation that names nothing: as written
        return ann
    if isinstance(ann, type):
        return ann.__qualname__
    return getattr(ann, "__name__", None) or repr(ann)


def _param_type_hint(ann: Any) -> str:
    """What to write instead of an annotation kernels do not accept, by what it is."""
    if isinstance(ann, str):
        return ("this string annotation names nothing visible where the kernel is defined; "
                "import or define the names it uses there")
    if ann is int:
        return ("Python ints have no fixed width: use i32 or i64 for a run-time value, or "
                "Const[int] for a compile-time constant")
    if ann is float:
        return "use f32 or f64 (or Const[float] for a compile-time constant)"
    if ann is bool:
        return "use bool_ (or Const[bool] for a compile-time constant)"
    if isinstance(ann, T._ArrayFactory):
        return f"give the element type: `{ann!r}[f32]` (and the rank: `{ann!r}[f32, 2]`)"
    if ann is T.Const:
        return "give the value's type: `Const[int]`"
    if isinstance(ann, typing.TypeVar):
        return f'use an oxide type variable: `{ann.__name__} = ox.TypeVar("{ann.__name__}")`'
    return ("use a scalar (f32, i32, ...), Slice/DisjointSlice/AtomicSlice/RawSlice[...], "
            "Const[...] or an ox.TypeVar")


def _func_type_hint(ann: Any, returning: bool) -> str:
    """What to write instead of an @ox.func annotation it does not accept. Device
    functions take no Const parameters; they may return tuples and None."""
    if isinstance(ann, str):
        return ("this string annotation names nothing visible where the function is defined; "
                "import or define the names it uses there")
    if ann is int:
        return "Python ints have no fixed width: use i32 or i64"
    if ann is float:
        return "use f32 or f64"
    if ann is bool:
        return "use bool_"
    if isinstance(ann, (T._ArrayFactory, typing.TypeVar)):
        return _param_type_hint(ann)
    if returning:
        return "use a scalar (f32, i32, ...), an ox.TypeVar, a tuple or None, or leave it out"
    return ("use a scalar (f32, i32, ...), Slice/DisjointSlice/AtomicSlice/RawSlice[...] or "
            "an ox.TypeVar, or leave it out")


def _caller_span(depth: int, needle: str = "") -> Span | None:
    """The span of the line that called into oxide `depth` frames up: where a decorator
    was applied. Points at `needle` on that line when it is there (an option's name),
    else at the whole line; None when the line cannot be read (exec, the REPL)."""
    frame = sys._getframe(depth + 1)
    file, line = frame.f_code.co_filename, frame.f_lineno
    text = linecache.getline(file, line).rstrip("\n")
    if not text.strip():
        return None
    col = text.find(needle) if needle else -1
    if col < 0:
        col, end = len(text) - len(text.lstrip()), len(text.rstrip())
    else:
        end = col + len(needle)
    return Span(file, line, col, end, text)


def _require_function(fn: Any, decorator: str, depth: int) -> None:
    """Decorators take a `def` function: its source is what gets compiled."""
    if not inspect.isfunction(fn):
        if inspect.isclass(fn):
            what = f"the class `{fn.__name__}`"
        else:
            what = type(fn).__name__ if not callable(fn) else f"`{py_name(fn)}`"
        raise KernelSyntaxError(f"{decorator} decorates a Python function (a `def`), not {what}",
                                _caller_span(depth + 1),
                                hint=f"write `{decorator}` above `def name(...):`")


def apply_decorator(fn: Callable[..., Any] | None, decorator: str,
                    build: Callable[[Callable[..., Any], dict[str, Any] | None], Any]) -> Any:
    """`@decorator` applied to `fn`, or for `@decorator(...)` (fn None) the function that
    applies it: `build(f, locals)` makes the kernel from the function and the locals of
    the frame that applied the decorator. Called by the decorator itself (the user's
    frame is its caller's caller); the errors the applying function raises keep only the
    user's frames."""
    if fn is None:
        def decorate(f: Callable[..., Any]) -> Any:
            try:
                _require_function(f, decorator, 1)
                return build(f, _decorator_locals(1))
            except OxideError as exc:
                user_frames_only(exc)
                raise

        return decorate
    _require_function(fn, decorator, 2)
    return build(fn, _decorator_locals(2))


def func(fn: Callable[..., Any]) -> DeviceFunction:
    """Declare a device function, callable from kernels and other @ox.func."""
    try:
        _require_function(fn, "@ox.func", 1)
        return DeviceFunction(fn, _decorator_locals(1))
    except OxideError as exc:  # the user's frames and the diagnostic (oxide/tracebacks.py)
        user_frames_only(exc)
        raise
