"""Emitting a block-coarsened kernel's entry (the analysis is in coarsen.py)."""

from __future__ import annotations

from typing import Any

from oxide.ir.types import dtype_of_ir


class CoarseningMixin:
    """The coarsened entry of the Emitter: logical blocks and their early reads."""

    prefetch: list[Any]
    lines: list[str]
    globals: list[str]
    arrays: dict[Any, dict[str, Any]]
    func: Any

    def coarsened_entry(self, params: list[str]) -> list[str]:
        """The kernel entry of a coarsened kernel: logical blocks F*b .. F*b+F-1, with the
        prefetchable reads of all of them issued before any body runs."""
        from oxide.codegen.coarsen import FACTOR

        saved, self.lines = self.lines, []
        table = getattr(self, "line_table", None)
        self.dbg = f", !dbg {table.entry_location()}" if table is not None else ""
        self.start_block("entry")
        first = self.ins(f"mul nuw i32 {self.t.register(self, 'ctaid.x')}, {FACTOR}")
        blocks = [first] + [self.ins(f"add nuw i32 {first}, {k}") for k in range(1, FACTOR)]
        values = [self.prefetch_reads(lb) for lb in blocks]
        passed = ", ".join(f"{p.split()[0]} {p.split()[-1]}" for p in params)
        symbol = self.func.sym_name.data
        done = self.label()
        for k, (lb, vals) in enumerate(zip(blocks, values, strict=True)):
            if k:  # the last hardware block may hold fewer logical ones
                more, nxt = self.ins(f"icmp ult i32 {lb}, %oxide.grid.x"), self.label()
                self.raw(f"br i1 {more}, label %{nxt}, label %{done}")
                self.start_block(nxt)
            extra = "".join(f", {t} {v}" for t, v in vals)
            self.raw(f"call void @{symbol}.body({passed}, i32 {lb}, i32 %oxide.grid.x{extra})")
        self.raw(f"br label %{done}")
        self.start_block(done)
        self.raw("ret void")
        entry, self.lines = self.lines, saved
        self.dbg = ""
        return entry

    def prefetch_reads(self, ctaid_x: str) -> list[tuple[str, str]]:
        """Each prefetchable read for logical block `ctaid_x`, loaded through a select of its
        address and a dummy, so an out-of-range index reads nothing of the user's."""
        if "@oxide.dummy" not in "".join(self.globals):
            self.globals.append("@oxide.dummy = internal global [2 x i64] zeroinitializer, "
                                "align 16")
        witnesses: dict[int, list[str]] = {}
        out = []
        for op in self.prefetch:
            rank = op.indices[0].type.rank.data  # type: ignore[attr-defined]
            if rank not in witnesses:
                witnesses[rank] = self.witness_components(rank, ctaid_x)
            idx = witnesses[rank]
            dims = self.arrays[op.array]["dims"]
            ok = "true"
            for i, d in zip(idx, dims, strict=True):
                c = self.ins(f"icmp ult i64 {i}, {d}")
                ok = c if ok == "true" else self.ins(f"and i1 {ok}, {c}")
            addr = self.address(op.array, idx)
            safe = self.ins(f"select i1 {ok}, ptr {addr}, ptr @oxide.dummy")
            t = dtype_of_ir(op.result.type).llvm
            out.append((t, self.t.pin(self, t, self.ins(f"load {t}, ptr {safe}"))))
        return out
