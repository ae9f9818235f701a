"""The frontend's entry point: a kernel and a signature in, an `oxide.func` out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from oxide import types as T
from oxide.frontend.builder import IRBuilder, Site
from oxide.frontend.hopper_calls import tensormap_ir_type, tensormap_param
from oxide.frontend.lower import FunctionLowering
from oxide.frontend.scope import wrap_python
from oxide.frontend.values import Array, Val
from oxide.ir import ops
from oxide.ir.types import array_ir_type, ir_type
from oxide.specialize import ConstValue, typevar_bindings


@dataclass
class KernelContext:
    """Compile-wide state shared by the kernel and every @ox.func inlined into it."""

    params: set[str]
    checks: bool
    folded: dict[str, Any] = field(default_factory=dict)
    functions: set[Any] = field(default_factory=set)
    uses_barriers: bool = False
    # bytes of static shared arrays (per block) and local arrays (per thread) so far,
    # checked against their limits as each array is declared
    shared_bytes: int = 0
    local_bytes: int = 0
    # the error for the static shared memory that passed 48 KiB: the compiler raises it
    # unless the kernel is compiled for sm_90, which it then compiles for sm_90a (227 KiB)
    big_shared: Any = None
    # ox.ConstantArray globals the kernel reads: (symbol, array), and their frontend values
    constants: list[tuple[str, Any]] = field(default_factory=list)
    constant_values: dict[int, Any] = field(default_factory=dict)
    # the block shape the kernel declares (`@ox.kernel(block=...)`), as (x, y, z), or None
    block: tuple[int, int, int] | None = None


@dataclass
class LoweredKernel:
    func: ops.FuncOp
    sites: list[Site]
    ctx: KernelContext
    builder: IRBuilder  # its `origins` and `uniform` serve passes/uniformity.py


def lower_kernel(kernel: Any, sig: tuple[Any, ...], symbol: str) -> LoweredKernel:
    """Lower `kernel`'s body for one signature into oxide IR."""
    runtime_params = [(p, s) for p, s in zip(kernel.params, sig, strict=True) if not isinstance(s, ConstValue)]
    arg_types = [array_ir_type(s) if isinstance(s, T.ArrayType) else
                 tensormap_ir_type(s) if isinstance(s, T.TensorMapType) else ir_type(s)
                 for _, s in runtime_params]
    b = IRBuilder(symbol, arg_types)
    ctx = KernelContext({p.name for p in kernel.params}, kernel.options.checks,
                        block=kernel.options.block)
    lowering = FunctionLowering(b, kernel.source, kernel.scope, ctx, {},
                                typevar_bindings(kernel, sig))
    env: dict[str, Any] = {}
    args = iter(b.args)
    for p, s in zip(kernel.params, sig, strict=True):
        if isinstance(s, ConstValue):
            # A Const is a compile-time value: NumPy scalars fold like Python numbers
            # (so `Const[int]` accepts np.int64(128) as a shape), the rest stays static.
            value = s.value.item() if isinstance(s.value, np.generic) else s.value
            env[p.name] = wrap_python(value)
        elif isinstance(s, T.ArrayType):
            env[p.name] = Array(next(args), s, p.name)
        elif isinstance(s, T.TensorMapType):
            env[p.name] = tensormap_param(next(args), s, p.name)
        else:
            env[p.name] = Val(next(args), s)
    for name, value in env.items():
        if isinstance(value, Val):
            lowering.assign_name(name, value, kernel.source.tree)  # parameters are mutable locals
        else:
            lowering.env[name] = value
    lowering.lower_body(kernel.source.tree.body)
    func = b.finish()
    return LoweredKernel(func, b.sites, ctx, b)
