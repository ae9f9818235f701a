"""Block coarsening: one GPU thread runs the kernel for two logical blocks.

A kernel whose threads never talk to each other (no barriers, warp collectives
or shared memory) means the same whether logical block `b` runs on its own or
after block `b - 1` on the same hardware thread. Elementwise kernels that read
one element per thread cannot keep enough bytes in flight to saturate HBM
(measured on the H200: a vecadd at 0.78x of torch.add); running two logical
blocks per thread and issuing the reads of both before either body uses them
doubles the bytes in flight (0.96x).

The reads that can be issued early are those of read-only `Slice` parameters
at a witness index: their address depends only on the thread's registers, a
Slice is never written during a launch, and the launch-time aliasing check
guarantees no writable argument overlaps it. They are issued at kernel entry
through a select between the real address and a dummy, so an out-of-range
index never touches memory; the bounds check and its report stay where the
read was written.
"""

from __future__ import annotations

from oxide.ir import ops
from oxide.ir.types import ArrayType, SharedArrayType, ThreadIndexType

FACTOR = 4
MAX_PREFETCHES = 8
_CROSS_THREAD_BARRIERS = ("block", "warp", "grid")


def prefetchable_loads(func: ops.FuncOp) -> list[ops.LoadOp] | None:
    """The loads to issue early if `func` can be coarsened, else None.

    None when threads may interact (barriers, warp collectives, shared memory)
    or when there is nothing to prefetch (coarsening alone does not help).
    """
    loads: list[ops.LoadOp] = []
    if any(isinstance(a.type, ArrayType) and a.type.access.data == "tensormap"
           for a in func.body.blocks[0].args):
        return None  # a by-value tensor map passed on to the body would be copied to local
    for op in func.walk():
        if isinstance(op, ops.BarrierOp) and op.kind.data in _CROSS_THREAD_BARRIERS:
            return None
        if isinstance(op, ops.WarpOp):
            return None
        if isinstance(op, ops.FixedArrayOp) and isinstance(op.result.type, SharedArrayType) \
                and op.result.type.space.data == "shared":  # static or dynamic
            return None
        if isinstance(op, ops.LoadOp) and _witness_read_of_slice(op):
            loads.append(op)
    if not loads:
        return None
    return loads[:MAX_PREFETCHES]


def _witness_read_of_slice(op: ops.LoadOp) -> bool:
    arr = op.array.type
    indices = list(op.indices)
    return (isinstance(arr, ArrayType) and arr.access.data == "slice"
            and not isinstance(op.array.owner, ops.ArraySelectOp)  # the entry has no choice
            and len(indices) == 1 and isinstance(indices[0].type, ThreadIndexType)
            and isinstance(indices[0].owner, ops.ThreadIndexOp))
