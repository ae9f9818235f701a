"""The shared-memory addresses Hopper instructions start at, checked where asked.

Both the GPU lowering of `ox.hopper.*` (codegen/hopper.py) and its CPU emulation
(codegen/hopper_cpu.py) compute them the same way; they live here so that neither of
those modules imports the other (docs/architecture.md, "Layers").
`oxide.codegen.hopper.element_address` and `.tma_address` are these functions.
"""

from __future__ import annotations

from typing import Any

from oxide.ir import ops


def element_address(em: Any, op: ops.HopperOp, row: int = 1) -> str:
    """The shared element's address. Where it is checked, an index out of range (or a
    matrix row of `row` elements running past the last dimension) is reported, and the
    address falls back to the array's first element: these instructions are collective
    (`.sync.aligned`), so every lane still executes them."""
    array = op.array[0]
    idx = em.index_list(list(op.indices))
    if op.site is not None:
        site = op.site.data
        checks = [idx]
        if row > 1:
            last = em.ins(f"add i64 {idx[-1]}, {row - 1}")
            checks.append(idx[:-1] + [last])
        dims = em.arrays[array]["dims"]
        ok = "true"
        for check in checks:
            for i, d in zip(check, dims, strict=True):
                c = em.ins(f"icmp ult i64 {i}, {d}")
                ok = c if ok == "true" else em.ins(f"and i1 {ok}, {c}")
            good, bad = em.bounds_check(array, check, site)
            em.raw(f"br label %{good}")
            em.start_block(good)
        idx = [em.ins(f"select i1 {ok}, i64 {i}, i64 0") for i in idx]
    return em.address(array, idx)


def tma_address(em: Any, op: ops.HopperOp) -> str:
    """The shared element a TMA copy starts at; where the frontend asked for the check
    (an element computed at run time), one not at a 128-byte boundary is reported as a
    failed assertion and the copy starts at the array's first element instead (it still
    runs, so its mbarrier completes and the kernel ends to report it)."""
    addr = element_address(em, op)
    if not op.imm.data:
        return addr
    site = op.imm.data[0].data  # type: ignore[attr-defined]
    ptr_t = em.t.pointer_type("shared")
    bits = em.ins(f"ptrtoint {ptr_t} {addr} to i64")
    base = em.ins(f"ptrtoint {ptr_t} {em.arrays[op.array[0]]['ptr']} to i64")
    off = em.ins(f"and i64 {em.ins(f'sub i64 {bits}, {base}')}, 127")
    bad = em.ins(f"icmp ne i64 {off}, 0")
    em.report_if(bad, 2, site, "0", "0")
    return em.ins(f"select i1 {bad}, {ptr_t} {em.arrays[op.array[0]]['ptr']}, {ptr_t} {addr}")
