"""Instructions that need a whole warp, or a whole warp group, to exist in the block.

`ox.mma_sync`, `ox.ldmatrix`, `ox.stmatrix` and `ox.elect_sync` are executed by the 32
lanes of a warp together (`.sync.aligned`); `ox.wgmma` (and its fence, commit and wait)
and `ox.setmaxnreg` by the 128 threads of a warp group. In a block of 16 threads the only
warp is partial: PTX leaves the instruction undefined there, the GPU may hang or compute
garbage. passes/uniformity.py checks that the lanes that exist reach such an instruction
together; this pass checks that the lanes exist at all. A kernel that declares its block
shape is checked here, at compile time; one that does not records a launch rule
(runtime/witness_rules.py `WHOLE_WARPS`, `WHOLE_WARP_GROUPS`), checked before each launch
runs, on the CPU and the GPU. Tile kernels pick their own block (whole warps) and
instructions, and are not checked.
"""

from __future__ import annotations

from xdsl.ir import Operation

from oxide.errors import SafetyError, Span
from oxide.ir import ops

_WARP_GROUP_KINDS = ("wgmma", "setmaxnreg")
_NAMES = {"mma": "ox.mma_sync", "ldmatrix": "ox.ldmatrix", "stmatrix": "ox.stmatrix",
          "elect_sync": "ox.elect_sync", "setmaxnreg": "ox.setmaxnreg", "wgmma": "ox.wgmma"}


def group_threads(op: Operation) -> int:
    """The threads that execute `op` together: 32 (a warp), 128 (a warp group), or 0
    for an op that needs no such group."""
    if not (isinstance(op, ops.HopperOp) and op.is_warp_collective()):
        return 0
    return 128 if op.kind.data.split(".")[0] in _WARP_GROUP_KINDS else 32


def launch_group(func: ops.FuncOp, origins: dict[Operation, tuple[Span, ...]],
                 declared: tuple[int, int, int] | None) -> int:
    """The thread count a launch's block must be a multiple of (32 or 128), for the
    launch rule of a kernel that does not declare its block; 0 where none is needed. A
    declared block is checked here: a SafetyError at the first instruction whose group
    its thread count does not hold whole."""
    sizes = [(group_threads(op), op) for op in func.walk()]
    widest = max((size for size, _ in sizes), default=0)
    if declared is None:
        return widest
    threads = declared[0] * declared[1] * declared[2]
    for size, op in sizes:
        if size and threads % size:
            _refuse(op, size, threads, declared, origins)
    return 0


def _refuse(op: Operation, size: int, threads: int, declared: tuple[int, int, int],
            origins: dict[Operation, tuple[Span, ...]]) -> None:
    assert isinstance(op, ops.HopperOp)
    name = _NAMES.get(op.kind.data.split(".")[0], op.kind.data)
    group = "warp" if size == 32 else "warp group (4 warps)"
    span = next((s for s in reversed(origins.get(op, ())) if s is not None), None)
    shape = declared[0] if declared[1:] == (1, 1) else declared
    raise SafetyError(
        f"`{name}` is executed by the {size} threads of a {group} together, but the "
        f"declared block={shape} has {threads} threads: its last {group} would be partial",
        span, label=f"needs every thread of a {group}",
        hint=f"declare a block of a multiple of {size} threads (e.g. "
             f"block={max(size, -(-threads // size) * size)})")
