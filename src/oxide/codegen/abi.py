"""The kernel calling convention shared by codegen and the runtimes.

Array parameters are flattened (cuda.core cannot pass structs by value): a
pointer, then one i64 extent per dimension, then, for non-contiguous layouts,
one i64 stride (in elements) per dimension. Scalars pass as themselves. An
`ox.TensorMap` passes its 128 bytes by value on a GPU (a 64-byte-aligned grid
constant), and a pointer to oxide's description of it on the CPU. A
hidden last parameter points at the error record (see `ERROR_RECORD`). Before it, a tile
kernel whose products read their operands by TMA takes one hidden tensor map per
`OperandMap`, which the launch builds from the array argument it names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oxide import types as T

# The error record a kernel fills when a check fails (first failure wins):
#   i32 claim   @0   set 0 -> 1 by the first failing thread (atomic)
#   i32 kind    @4   1 = index error, 2 = assertion, 3 = division by zero; written last
#   i32 site    @8   index into the kernel's site table (file:line, array name)
#   i32 dim     @12  the failing dimension
#   i64 index   @16
#   i64 length  @24
ERROR_RECORD_BYTES = 32
ERROR_KINDS = {1: "index", 2: "assert", 3: "division"}


@dataclass(frozen=True)
class ParamABI:
    """One user-visible kernel parameter and the machine arguments it becomes."""

    name: str
    spec: T.DType | T.ArrayType | T.TensorMapType

    @property
    def is_array(self) -> bool:
        return isinstance(self.spec, T.ArrayType)

    @property
    def llvm_types(self) -> list[str]:
        if isinstance(self.spec, T.ArrayType):
            n = self.spec.rank
            return ["ptr"] + ["i64"] * n + ([] if self.spec.contiguous else ["i64"] * n)
        if isinstance(self.spec, T.TensorMapType):  # 128 bytes by value (a GPU launch)
            return ["tensormap"]
        return [self.spec.llvm]


@dataclass(frozen=True)
class OperandMap:
    """A hidden kernel parameter: the 128-byte TMA tensor map of array parameter `param`
    (its position among the kernel's machine parameters' owners, Consts left out) with
    boxes of `box` elements (outermost first) and a `swizzle`-byte swizzle, which the
    launch builds from that argument (tile/tma_rings.py copies product operands with it)."""

    param: int
    dtype: str  # the array's element type (a DType name)
    box: tuple[int, ...]
    swizzle: int
    # f32 whose TMA reductions flush subnormal inputs and results to zeros of their sign
    # (CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ), as `atom.add.f32` on global memory does
    # (tile/tma_stores.py: a tile atomic_add must not depend on the path it takes)
    ftz: bool = False

    @property
    def abi(self) -> ParamABI:
        return ParamABI(f"oxide_map{self.param}_{'x'.join(map(str, self.box))}"
                        f"{'_ftz' if self.ftz else ''}",
                        T.TensorMapType(T.SCALARS[self.dtype], len(self.box)))

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"param": self.param, "dtype": self.dtype,
                                  "box": list(self.box), "swizzle": self.swizzle}
        if self.ftz:  # (absent: what bundles and cache entries before it wrote)
            out["ftz"] = True
        return out

    @classmethod
    def from_json(cls, m: dict[str, Any]) -> OperandMap:
        return cls(m["param"], m["dtype"], tuple(m["box"]), m["swizzle"], bool(m.get("ftz")))


def logical_grid_abi() -> list[ParamABI]:
    """The hidden parameters of a tile kernel that walks its logical grid (its x, y and z,
    after the kernel's own parameters and before its tensor maps:
    codegen/persistent_grid.py)."""
    return [ParamABI(f"oxide_grid_{axis}", T.i32) for axis in "xyz"]


# -- recursive @ox.funcs: names and defaults the frontend, codegen and the runtimes agree
# on (the frontend names the symbols and the depth guard's site, codegen declares the
# depth limit, the runtimes read both back from a cubin, possibly from the disk cache)

# The call stack of kernels that call recursive @ox.funcs, in bytes per GPU thread, unless
# `@ox.kernel(stack_size=...)` says otherwise (CUDA's own default is 1 KiB). The driver
# reserves it for every thread the GPU can hold at once: 4 KiB is about 1.1 GB on an H200.
DEFAULT_STACK_SIZE = 4096
# the symbols of recursive @ox.funcs' device functions start with it; runtime/gpu.py looks
# for it in a cubin (from the compiler or the disk cache) to know the kernel needs a stack
RECURSIVE_SYMBOL_PREFIX = "oxide_recursive_"
# the i32 global (constant memory) holding the deepest call the stack holds, in a GPU module
# with recursive @ox.funcs; runtime/gpu.py sets it from the stack limit and ptxas's frames
RECURSION_LIMIT_SYMBOL = "oxide_recursion_limit"
# the attribute of a device function's `oxide.func` naming its depth guard's site
# (frontend/device_functions.py writes it, codegen/emit.py `depth_guard` reads it)
DEPTH_SITE = "oxide.depth_site"
