"""`KernelImage`: what a GPU launch needs of one compiled specialization.

Made from the compiler's output (`from_compiled`) or read back from the disk cache
(runtime/cache.py); loaded by the GPU runtime (runtime/gpu.py). Its own module so
that the disk cache and the GPU runtime each import it without importing the other
(docs/architecture.md, "Layers"). `oxide.runtime.gpu.KernelImage` is the same class.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from oxide import types as T
from oxide.codegen.abi import OperandMap
from oxide.codegen.persistent_grid import GRID_BYTES

_LLVM_SIZES = {"ptr": 8, "i64": 8, "double": 8, "i32": 4, "float": 4, "i16": 2, "half": 2,
               "bfloat": 2, "i8": 1, "i1": 1, "tensormap": T.TENSORMAP_BYTES}


@dataclass(frozen=True)
class KernelImage:
    """What a launch needs of a compiled specialization (from the compiler or the disk cache)."""

    code: bytes  # the module image: a cubin, or NUL-terminated PTX the driver JIT-compiles
    symbol: str
    sites: Sequence[Any]  # each with .kind, .span, .detail
    arg_sizes: tuple[int, ...]  # bytes of each machine argument, error record included
    constants: tuple[tuple[str, Any], ...] = ()  # (global symbol, ox.ConstantArray)
    grid_x_factor: int = 1  # logical blocks per hardware block (codegen/coarsen.py)
    # the ThreadIndex ranks the kernel creates (runtime/witness_rules.py)
    thread_index_ranks: tuple[int, ...] = ()
    # hidden tensor maps after the parameters (codegen/abi.py; runtime/operand_maps.py)
    operand_maps: tuple[OperandMap, ...] = ()

    @classmethod
    def from_compiled(cls, ck: Any) -> KernelImage:
        sizes = tuple(_LLVM_SIZES[t] for p in ck.abi for t in p.llvm_types) + (8,)
        return cls(ck.module_image, ck.name, list(ck.sites), sizes,
                   tuple(getattr(ck, "constants", ())), getattr(ck, "grid_x_factor", 1),
                   tuple(ck.thread_index_ranks), tuple(getattr(ck, "operand_maps", ())))


def with_hidden_args(sizes: tuple[int, ...], maps: int, persistent: bool) -> tuple[int, ...]:
    """The argument sizes of a plan packing `sizes` (its own values, then the error
    record) once the hidden ones stand before the record: a persistent kernel's logical
    grid (codegen/persistent_grid.py), then `maps` tensor maps."""
    grid = GRID_BYTES if persistent else ()
    return sizes[:-1] + grid + (T.TENSORMAP_BYTES,) * maps + sizes[-1:]
