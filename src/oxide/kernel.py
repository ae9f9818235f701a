"""`@ox.kernel` and `@ox.func`: the user's functions, their parameters and specializations.

A `Kernel` owns its specializations: one compiled module per (parameter types,
Const values, target). Annotations are read at decoration, so a bad annotation
fails there; the body is compiled on first use or by `kernel.compile(...)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from oxide.codegen.abi import (  # noqa: F401 - public here too
    DEFAULT_STACK_SIZE,
    RECURSION_LIMIT_SYMBOL,
    RECURSIVE_SYMBOL_PREFIX,
)
from oxide.errors import KernelTypeError, OxideError
from oxide.kernel_types import (  # noqa: F401 - oxide.kernel's names, as before
    DeviceFunction,
    KernelBase,
    KernelOptions,
    Param,
    _annotation_text,
    _annotations,
    _caller_span,
    _decorator_locals,
    _func_type_hint,
    _param_type_hint,
    _RefusedAnnotation,
    _require_function,
    apply_decorator,
    func,
)
from oxide.runtime.config import as_int
from oxide.runtime.launch import bind_launch
from oxide.tracebacks import user_frames_only

_MAX_BLOCK_THREADS = 1024  # threads per block, on every CUDA architecture


MAX_STACK_SIZE = 512 * 1024


class Kernel(KernelBase):
    """An `@ox.kernel`. Launch with `kernel[config](*args)` or `ox.launch(kernel, config, *args)`."""

    def compile(self, *args: Any, arch: str | None = None, target: str | None = None) -> Any:
        """Compile for explicit types or example values; returns a CompiledKernel.

        >>> ck = scale.compile(Slice[f32], f32, DisjointSlice[f32], arch="sm_90")  # doctest: +SKIP
        >>> print(ck.ptx)  # doctest: +SKIP
        """
        from oxide.codegen.switches import codegen_switches
        from oxide.compiler import compile_kernel
        from oxide.specialize import signature_from

        try:
            sig = signature_from(self, args)
            if arch is not None and not (isinstance(arch, str) and arch):
                from oxide.errors import TargetError

                raise TargetError(f"arch must be a name such as \"sm_90\", got {arch!r}")
            tgt = target or ("cpu" if arch == "cpu" else "nvptx")
            key = (sig, tgt, arch, codegen_switches())
            ck = self._specializations.get(key)
            if ck is None:
                ck = compile_kernel(self, sig, tgt, arch)
                self._specializations[key] = ck
            return ck
        except OxideError as exc:  # the user's frames and the diagnostic (oxide/tracebacks.py)
            user_frames_only(exc)
            raise

    def __getitem__(self, config: Any) -> Any:
        bound = self.__dict__.get("_oxide_bound")  # bind_launch's first test, inlined
        if bound is not None and bound[0] is config:
            return bound[1]
        return bind_launch(self, config)


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


def _int_option(value: Any) -> Any:
    """An integer option as a plain int (NumPy integers too: sizes often come from
    NumPy); anything else unchanged, for the option's check to report."""
    n = as_int(value)
    return value if n is None else n


def _block_option(block: Any, depth: int) -> tuple[int, int, int] | None:
    """`block=256` or `block=(32, 8)` as (x, y, z), or a diagnostic at the decorator."""
    if block is None:
        return None
    dims = tuple(_int_option(d) for d in (block if isinstance(block, tuple) else (block,)))
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
    try:
        max_threads, stack_size = _int_option(max_threads), _int_option(stack_size)
        options = KernelOptions(checks=checks, contract=contract, max_threads=max_threads,
                                coarsen=coarsen, lineinfo=lineinfo,
                                block=_block_option(block, 1), stack_size=stack_size)
        _check_options(options, 1)
        _check_stack_size(stack_size, 1)
        return apply_decorator(fn, "@ox.kernel",
                               lambda f, localns: Kernel(f, options, localns))
    except OxideError as exc:
        user_frames_only(exc)
        raise
