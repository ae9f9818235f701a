"""`@ox.kernel` and `@ox.func`: the user's functions, their parameters and specializations.

A `Kernel` owns its specializations: one compiled module per (parameter types,
Const values, target). Annotations are read at decoration, so a bad annotation
fails there; the body is compiled on first use or by `kernel.compile(...)`.
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
from oxide.errors import CompileError, KernelSyntaxError, KernelTypeError, LaunchError, Span
from oxide.frontend.scope import Scope
from oxide.frontend.source import Source, load_source
from oxide.frontend.values import py_name
from oxide.runtime.launch import bind_launch

_MAX_BLOCK_THREADS = 1024  # threads per block, on every CUDA architecture


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


# The call stack of kernels that call recursive @ox.funcs, in bytes per GPU thread, unless
# `@ox.kernel(stack_size=...)` says otherwise (CUDA's own default is 1 KiB). The driver
# reserves it for every thread the GPU can hold at once: 4 KiB is about 1.1 GB on an H200.
DEFAULT_STACK_SIZE = 4096
MAX_STACK_SIZE = 512 * 1024
# the symbols of recursive @ox.funcs' device functions start with it; runtime/gpu.py looks
# for it in a cubin (from the compiler or the disk cache) to know the kernel needs a stack
RECURSIVE_SYMBOL_PREFIX = "oxide_recursive_"
# the i32 global (constant memory) holding the deepest call the stack holds, in a GPU module
# with recursive @ox.funcs; runtime/gpu.py sets it from the stack limit and ptxas's frames
RECURSION_LIMIT_SYMBOL = "oxide_recursion_limit"


@dataclass(frozen=True)
class Param:
    """A kernel parameter as declared: name and annotation (a DType, ArrayType, ConstType...)."""

    name: str
    annotation: Any


class DeviceFunction:
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

    @cached_property
    def source(self) -> Source:
        return load_source(self.fn)

    @cached_property
    def scope(self) -> Scope:
        return Scope(self.fn)

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


class Kernel:
    """An `@ox.kernel`. Launch with `kernel[config](*args)` or `ox.launch(kernel, config, *args)`."""

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
        if arch is not None and not (isinstance(arch, str) and arch):
            from oxide.errors import TargetError

            raise TargetError(f"arch must be a name such as \"sm_90\", got {arch!r}")
        tgt = target or ("cpu" if arch == "cpu" else "nvptx")
        key = (sig, tgt, arch)
        ck = self._specializations.get(key)
        if ck is None:
            ck = compile_kernel(self, sig, tgt, arch)
            self._specializations[key] = ck
        return ck

    def __getitem__(self, config: Any) -> Any:
        bound = self.__dict__.get("_oxide_bound")  # bind_launch's first test, inlined
        if bound is not None and bound.config is config:
            return bound
        return bind_launch(self, config)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise LaunchError(f"`{self.__name__}` is a kernel: launch it with "
                        f"`{self.__name__}[config](...)` or `ox.launch({self.__name__}, config, ...)`")

    def __repr__(self) -> str:
        return f"<oxide.kernel {self.__qualname__}>"


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


def _check_options(options: KernelOptions, depth: int) -> None:
    """Every `@ox.kernel(...)` option has the type and range it needs, or a diagnostic
    at the decorator: a wrong value would otherwise surface later, far from its cause
    (a launch failing with INVALID_VALUE for `max_threads=4096`)."""
    for name in ("checks", "contract", "coarsen", "lineinfo"):
        value = getattr(options, name)
        if not isinstance(value, bool):
            raise KernelTypeError(f"@ox.kernel option `{name}` must be True or False, not "
                                  f"{value!r}", _caller_span(depth + 1, name),
                                  hint=f"write `{name}=True` or `{name}=False`")
    mt = options.max_threads
    if mt is not None and not (isinstance(mt, int) and not isinstance(mt, bool)
                               and 1 <= mt <= _MAX_BLOCK_THREADS):
        raise KernelTypeError(f"@ox.kernel option `max_threads` must be an int from 1 to "
                              f"{_MAX_BLOCK_THREADS}, not {mt!r}",
                              _caller_span(depth + 1, "max_threads"),
                              hint=f"a block holds at most {_MAX_BLOCK_THREADS} threads on "
                                   "every CUDA GPU; leave it out for no launch bound")
    if mt is not None and options.block is not None:
        size = options.block[0] * options.block[1] * options.block[2]
        if size > mt:
            raise KernelTypeError(f"@ox.kernel declares block={options.block} ({size} "
                                  f"threads) but max_threads={mt}",
                                  _caller_span(depth + 1, "max_threads"),
                                  hint="`block=` is the launch bound already: drop "
                                       "`max_threads`")


def _check_stack_size(stack_size: Any, depth: int) -> None:
    """`stack_size=` is bytes per thread, within what a GPU thread's local memory holds."""
    if stack_size is None or (isinstance(stack_size, int) and not isinstance(stack_size, bool)
                              and 1 <= stack_size <= MAX_STACK_SIZE):
        return
    raise KernelTypeError(f"@ox.kernel option `stack_size` must be the bytes of call stack per "
                          f"thread, an int from 1 to {MAX_STACK_SIZE} (512 KiB, a GPU thread's "
                          f"local memory), not {stack_size!r}",
                          _caller_span(depth + 1, "stack_size"),
                          hint=f"e.g. `stack_size=16384`; leave it out for {DEFAULT_STACK_SIZE} "
                               "bytes in kernels that call recursive @ox.funcs")


def _block_option(block: Any, depth: int) -> tuple[int, int, int] | None:
    """`block=256` or `block=(32, 8)` as (x, y, z), or a diagnostic at the decorator."""
    if block is None:
        return None
    dims = block if isinstance(block, tuple) else (block,)
    ok = 1 <= len(dims) <= 3 and all(isinstance(d, int) and not isinstance(d, bool) and d >= 1
                                      for d in dims)
    if ok:
        shape = tuple(dims) + (1,) * (3 - len(dims))
        if shape[0] * shape[1] * shape[2] <= _MAX_BLOCK_THREADS and shape[2] <= 64:
            return shape  # type: ignore[return-value]
    raise KernelTypeError(f"@ox.kernel option `block` must be the block shape: 1 to 3 "
                          f"positive ints with at most {_MAX_BLOCK_THREADS} threads in all "
                          f"(z at most 64), not {block!r}", _caller_span(depth + 1, "block"),
                          hint="e.g. `block=256` or `block=(32, 8)`")


def kernel(fn: Callable[..., Any] | None = None, *, checks: bool = True, contract: bool = True,
           max_threads: int | None = None, coarsen: bool = True, lineinfo: bool = False,
           block: int | tuple[int, ...] | None = None, stack_size: int | None = None) -> Any:
    """Declare a kernel. Options: `checks` (bounds checks), `contract` (FMA), `max_threads`,
    `coarsen` (let the GPU run four logical blocks per block where threads are independent),
    `lineinfo` (the kernel's Python lines in its PTX, for Nsight; also `OXIDE_LINEINFO=1`),
    `block` (the block shape of every launch: shared arrays may then be used without
    `ox.unsafe()`, proved race-free at compile time; a launch with another shape is refused),
    `stack_size` (bytes of call stack per GPU thread for recursive @ox.funcs; default
    `DEFAULT_STACK_SIZE` in kernels that call one).

    >>> @ox.kernel  # doctest: +SKIP
    ... def scale(x: Slice[f32], a: f32, out: DisjointSlice[f32]): ...
    """
    options = KernelOptions(checks=checks, contract=contract, max_threads=max_threads,
                            coarsen=coarsen, lineinfo=lineinfo, block=_block_option(block, 1),
                            stack_size=stack_size)
    _check_options(options, 1)
    _check_stack_size(stack_size, 1)
    if fn is None:
        def decorate(f: Callable[..., Any]) -> Kernel:
            _require_function(f, "@ox.kernel", 1)
            return Kernel(f, options, _decorator_locals(1))

        return decorate
    _require_function(fn, "@ox.kernel", 1)
    return Kernel(fn, options, _decorator_locals(1))


def func(fn: Callable[..., Any]) -> DeviceFunction:
    """Declare a device function, callable from kernels and other @ox.func."""
    _require_function(fn, "@ox.func", 1)
    return DeviceFunction(fn, _decorator_locals(1))
