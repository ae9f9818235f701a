"""oxide: typed Python GPU kernels, compiled to PTX (and to host code) by a compiler in Python.

>>> import oxide as ox
>>> from oxide import f32, Slice, DisjointSlice, thread
>>> @ox.kernel
... def scale(x: Slice[f32], a: f32, out: DisjointSlice[f32]):
...     i = thread.index_1d()
...     if i in out:
...         out[i] = x[i] * a
"""

from oxide.autotuner import Config, autotune
from oxide.errors import (
    AliasingError,
    ArgumentError,
    CompileError,
    DeviceError,
    InternalCompilerError,
    KernelAssertionError,
    KernelIndexError,
    KernelSyntaxError,
    KernelTypeError,
    LaunchError,
    OxideError,
    PerformanceWarning,
    SafetyError,
    TargetError,
    UnsupportedFeatureError,
)
from oxide.kernel import Kernel, KernelOptions, func, kernel
from oxide.lang import (
    asm,
    atomic,
    block,
    block_dim,
    block_idx,
    brev,
    byte_perm,
    cluster,
    clz,
    elect_sync,
    fence_mbarrier_init,
    fence_proxy_async,
    ffs,
    grid_dim,
    lane_id,
    ldmatrix,
    local,
    math,  # noqa: F401 - API, kept out of `import *` (_NOT_STARRED)
    mbarrier,
    mma_sync,
    mulhi,
    named_barrier_sync,
    popc,
    setmaxnreg,
    shared,
    stmatrix,
    sync_threads,
    sync_threads_and,
    sync_threads_count,
    sync_threads_or,
    sync_warp,
    thread,
    thread_idx,
    threadfence,
    threadfence_block,
    threadfence_system,
    tma,
    unsafe,
    warp,
    warp_id,
    wgmma,
    wgmma_commit,
    wgmma_desc,
    wgmma_fence,
    wgmma_wait,
)
from oxide.lang.grid import grid
from oxide.runtime import native_launch as _native_launch
from oxide.runtime.arrays import DeviceArray, empty, to_device, zeros
from oxide.runtime.config import LaunchConfig
from oxide.runtime.constant import ConstantArray
from oxide.runtime.device import device, set_device
from oxide.runtime.launch import launch, synchronize
from oxide.runtime.peers import enable_peer_access
from oxide.types import (
    AtomicSlice,
    Const,
    DisjointSlice,
    DType,
    RawSlice,
    Slice,
    TypeVar,
    bf16,
    bool_,
    f8e4m3,
    f8e5m2,
    f16,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
)

__version__ = "0.1.0"

__all__ = [
    "AliasingError", "ArgumentError", "atomic", "AtomicSlice", "autotune", "Config", "bf16",
    "block", "block_dim",
    "block_idx", "bool_", "brev", "byte_perm", "clz", "CompileError", "Const", "ConstantArray",
    "device", "DeviceArray", "DeviceError", "DisjointSlice", "DType", "empty",
    "enable_peer_access", "f8e4m3", "f8e5m2", "f16", "f32",
    "f64", "ffs", "func", "grid", "grid_dim", "i16", "i32", "i64", "i8", "InternalCompilerError",
    "Kernel", "kernel", "KernelAssertionError", "KernelIndexError", "KernelOptions",
    "KernelSyntaxError", "KernelTypeError", "lane_id", "launch", "LaunchConfig", "LaunchError",
    "load_bundle", "local", "mulhi", "OxideError", "PerformanceWarning", "popc", "RawSlice",
    "SafetyError",
    "set_device", "shared", "Slice", "sync_threads", "sync_threads_and", "sync_threads_count",
    "sync_threads_or", "sync_warp", "synchronize", "TargetError", "testing", "thread", "tile",
    "thread_idx", "threadfence", "threadfence_block", "threadfence_system", "to_device",
    "TypeVar", "u16", "u32", "u64", "u8", "unsafe", "UnsupportedFeatureError", "warp",
    "warp_id", "zeros", "__version__",
    # the tensor-core and Hopper primitives (lang/hopper.py)
    "asm", "cluster", "elect_sync", "fence_mbarrier_init", "fence_proxy_async", "ldmatrix",
    "mbarrier", "mma_sync", "named_barrier_sync", "setmaxnreg", "stmatrix",
    "wgmma", "wgmma_commit", "wgmma_desc", "wgmma_fence", "wgmma_wait", "tma", "TensorMap",
]


def _launch_natively() -> None:
    """Once the launch trampoline is built, `ox.launch` is `launch` as a builtin that tries
    the kernel's native binder in one C call (runtime/native_binder.py) and calls the
    Python `launch` with the same arguments where it declines (~0.1 us less per launch on
    an H200 host than a Python function in front of the binder)."""
    global launch
    entry = _native_launch.native_entry(_python_launch)
    if entry is not None:
        launch = entry


_python_launch = launch
_native_launch.on_built.append(_launch_natively)

# API that `from oxide import *` leaves out: `ox.math` would shadow the standard library's
# `math` (a ported kernel's `-math.inf` then fails); `dir(oxide)` still lists it
_NOT_STARRED = ("math",)


def __getattr__(name: str) -> object:
    """Names loaded on first use, so `import oxide` stays fast."""
    if name == "load_bundle":
        from oxide.runtime.bundle import load_bundle

        return load_bundle
    if name == "tile":  # ox.tile, the Tile model: its frontend loads with it
        import oxide.tile

        return oxide.tile
    if name == "TensorMap":  # the TMA host type and annotation (runtime/tensormap.py)
        from oxide.runtime.tensormap import TensorMap

        return TensorMap
    if name == "testing":  # ox.testing.do_bench
        import oxide.testing

        return oxide.testing
    raise AttributeError(f"module 'oxide' has no attribute {name!r}")


def __dir__() -> list[str]:
    """`dir(oxide)` lists the API (`__all__`), not the submodules it is built from: a name
    that tab completion offers is one to use."""
    return sorted({*__all__, *_NOT_STARRED, *(n for n in globals() if n.startswith("__"))})

