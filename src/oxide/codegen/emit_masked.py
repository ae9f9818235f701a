"""Emitting masked accesses: the tile lowering's loads and stores (`ops.MaskedLoadOp`,
`ops.MaskedStoreOp`), one to 16 bytes of a row, done only where a mask holds.

On the GPU each is one predicated PTX instruction (`@p ld.global.nc.v4.b32`), written as
inline PTX: LLVM's NVPTX backend has no predicated load or store of its own, and a branch
per access would split an edge tile's accesses into basic blocks that cannot issue back
to back. The data travels as 16-, 32- or 64-bit words (a bf16 pair in one b32), bitcast
to and from the elements. On the CPU, or for an access PTX cannot predicate (8-bit
scalars, bools, shared memory), a branch around a plain access.
"""

from __future__ import annotations

from typing import Any

from xdsl.ir import SSAValue

from oxide.ir import ops
from oxide.ir.types import dtype_of_ir

_REG = {16: "h", 32: "r", 64: "l"}  # inline-asm register classes by word size


class MaskedAccessMixin:
    """Emits `MaskedLoadOp` and `MaskedStoreOp` (mixed into codegen/emit.py's Emitter)."""

    def _words(self, array: SSAValue, dt: Any, count: int) -> tuple[int, int] | None:
        """(word bits, words) of a predicated PTX access of `count` elements, or None
        where it takes a branch instead."""
        if self.t.name != "nvptx" or self.arrays[array]["space"] != "global" or dt.is_bool:
            return None
        total = dt.bits * count
        word = 64 if dt.bits == 64 else min(32, total)
        if word < 16 or total % word or total // word not in (1, 2, 4):
            return None
        return word, total // word

    def _global_address(self, array: SSAValue, indices: Any) -> str:
        """The first element's address in the global address space, which `ld.global`
        and `st.global` take (an inline-asm operand gets no address-space inference)."""
        ptr_t = self.t.pointer_type(self.arrays[array]["space"])
        addr = self.address(array, self.index_list(list(indices)))
        return self.ins(f"addrspacecast {ptr_t} {addr} to ptr addrspace(1)")

    def _vector(self, ty: str, values: list[str]) -> tuple[str, str]:
        """(vector type, value) of `values`, each of LLVM type `ty`."""
        vec = f"<{len(values)} x {ty}>"
        v = "poison"
        for k, x in enumerate(values):
            v = self.ins(f"insertelement {vec} {v}, {ty} {x}, i32 {k}")
        return vec, v

    def _to_words(self, dt: Any, values: list[str], word: int, n: int) -> list[str]:
        """The elements `values` as `n` integer words of `word` bits."""
        vec, v = self._vector(dt.llvm, values)
        words = self.ins(f"bitcast {vec} {v} to <{n} x i{word}>")
        return [self.ins(f"extractelement <{n} x i{word}> {words}, i32 {k}") for k in range(n)]

    def _from_words(self, dt: Any, words: list[str], word: int, count: int) -> list[str]:
        """The `count` elements in `words`. Sub-word elements come out by shift and
        truncation, not through a vector: then `astype(f32)` of a bf16 is one `shl` or one
        `and` of the word on the GPU (LLVM folds the shifts), where extracting from a
        vector first unpacks each pair into 16-bit registers."""
        if dt.bits < word:
            out = []
            for w in words:
                for k in range(word // dt.bits):
                    part = w if k == 0 else self.ins(f"lshr i{word} {w}, {k * dt.bits}")
                    bits = self.ins(f"trunc i{word} {part} to i{dt.bits}")
                    out.append(bits if dt.is_int else
                               self.ins(f"bitcast i{dt.bits} {bits} to {dt.llvm}"))
            return out
        packed, v = self._vector(f"i{word}", words)
        vec = f"<{count} x {dt.llvm}>"
        elems = self.ins(f"bitcast {packed} {v} to {vec}")
        return [self.ins(f"extractelement {vec} {elems}, i32 {k}") for k in range(count)]

    def op_MaskedLoadOp(self, op: ops.MaskedLoadOp) -> None:
        """`mov d, other; @p ld.global[.nc].vN.bW {d...}, [addr]`: a Slice (read-only in
        the kernel) reads through the non-coherent cache, unordered against stores; any
        other array's read keeps its place among the kernel's accesses (a memory clobber)."""
        dt = dtype_of_ir(op.res[0].type)
        count = len(op.res)
        mask, other = self.v(op.mask), self.v(op.other)
        shape = self._words(op.array, dt, count)
        if shape is None:
            self._branchy_load(op, dt, mask, other)
            return
        word, n = shape
        fill = self._to_words(dt, [other] * (word // dt.bits), word, 1)[0]
        outs = ", ".join(f"${k}" for k in range(n))
        ld, clobber = (("ld.global.nc", "") if self.arrays[op.array].get("readonly")
                       else ("ld.global", ",~{memory}"))
        vec = f".v{n}" if n > 1 else ""
        movs = " ".join(f"mov.b{word} ${k}, ${n + 2};" for k in range(n))
        text = f"{movs} @${n + 1} {ld}{vec}.b{word} {{{outs}}}, [${n}];"
        reg = _REG[word]
        ret = f"i{word}" if n == 1 else "{" + ", ".join([f"i{word}"] * n) + "}"
        got = self.ins(f'call {ret} asm "{text}", "{",".join(["=" + reg] * n)},l,b,{reg}{clobber}"'
                       f"(ptr addrspace(1) {self._global_address(op.array, op.indices)}, "
                       f"i1 {mask}, i{word} {fill})")
        words = [got] if n == 1 else [self.ins(f"extractvalue {ret} {got}, {k}")
                                      for k in range(n)]
        for r, x in zip(op.res, self._from_words(dt, words, word, count), strict=True):
            self.names[r] = x

    def op_AsyncCopyOp(self, op: ops.AsyncCopyOp) -> None:
        """`@enabled cp.async.cg.shared.global [dst], [src], 16, size`: size 16 where the
        chunk is inside the array, else 0 (nothing read, 16 bytes of zeros written, from
        the array's first element's address); inline PTX, since the intrinsic takes no
        predicate. On the CPU (OXIDE_TILE_CPU_HOPPER=1) the copy is made at once: 16
        bytes, or zeros where the chunk is outside."""
        if self.t.name != "nvptx":
            self._copy_now(op)
            return
        inside = self.v(op.inside)
        src = self._global_address(op.src, op.src_indices)
        info = self.arrays[op.src]
        first = self.ins(f"addrspacecast {self.t.pointer_type(info['space'])} {info['ptr']} "
                         "to ptr addrspace(1)")
        src = self.ins(f"select i1 {inside}, ptr addrspace(1) {src}, ptr addrspace(1) {first}")
        size = self.ins(f"select i1 {inside}, i32 16, i32 0")
        dst_t = self.t.pointer_type(self.arrays[op.dst]["space"])
        dst = self.address(op.dst, [self.v(op.dst_index)])
        dst32 = self.ins(f"ptrtoint {dst_t} {dst} to i32")
        self.raw('call void asm sideeffect "@$3 cp.async.cg.shared.global [$0], [$1], 16, $2;", '
                 f'"r,l,r,b,~{{memory}}"(i32 {dst32}, ptr addrspace(1) {src}, i32 {size}, '
                 f"i1 {self.v(op.enabled)})")

    def _copy_now(self, op: ops.AsyncCopyOp) -> None:
        """The CPU's cp.async: where enabled, the 16 bytes at the source (zeros where the
        chunk is outside the array) stored at the destination."""
        enabled, inside = self.v(op.enabled), self.v(op.inside)
        here, copy, load, join = self.current, self.label(), self.label(), self.label()
        self.raw(f"br i1 {enabled}, label %{copy}, label %{join}")
        self.start_block(copy)
        self.raw(f"br i1 {inside}, label %{load}, label %{join}")
        self.start_block(load)
        src = self.address(op.src, self.index_list(list(op.src_indices)))
        got = self.ins(f"load <16 x i8>, {self.t.pointer_type(self.arrays[op.src]['space'])} "
                       f"{src}, align 1")
        self.raw(f"br label %{join}")
        self.start_block(join)
        value = self.ins(f"phi <16 x i8> [ {got}, %{load} ], [ zeroinitializer, %{copy} ], "
                         f"[ zeroinitializer, %{here} ]")
        stored, done = self.label(), self.label()
        self.raw(f"br i1 {enabled}, label %{stored}, label %{done}")
        self.start_block(stored)
        dst = self.address(op.dst, [self.v(op.dst_index)])
        self.raw(f"store <16 x i8> {value}, {self.t.pointer_type(self.arrays[op.dst]['space'])} "
                 f"{dst}, align 1")
        self.raw(f"br label %{done}")
        self.start_block(done)

    def _branchy_load(self, op: ops.MaskedLoadOp, dt: Any, mask: str, other: str) -> None:
        ptr_t = self.t.pointer_type(self.arrays[op.array]["space"])
        count = len(op.res)
        addr = self.address(op.array, self.index_list(list(op.indices)))
        here, load_block, join = self.current, self.label(), self.label()
        self.raw(f"br i1 {mask}, label %{load_block}, label %{join}")
        self.start_block(load_block)
        if count == 1:  # one element (a bool, an 8-bit one): a plain load, as LoadOp's
            got = [self.ins(f"load {dt.llvm}, {ptr_t} {addr}")]
        else:
            vec = f"<{count} x {dt.llvm}>"
            v = self.ins(f"load {vec}, {ptr_t} {addr}, align {op.align.data}")
            got = [self.ins(f"extractelement {vec} {v}, i32 {k}") for k in range(count)]
        self.raw(f"br label %{join}")
        self.start_block(join)
        for r, x in zip(op.res, got, strict=True):
            self.names[r] = self.ins(f"phi {dt.llvm} [ {x}, %{load_block} ], "
                                     f"[ {other}, %{here} ]")

    def op_MaskedStoreOp(self, op: ops.MaskedStoreOp) -> None:
        """`@p st.global.vN.bW [addr], {w...}`, with side effects and a memory clobber,
        so it stays in order with the kernel's other accesses."""
        dt = dtype_of_ir(op.values[0].type)
        count = len(op.values)
        mask = self.v(op.mask)
        values = [self.v(x) for x in op.values]
        shape = self._words(op.array, dt, count)
        if shape is None:
            self._branchy_store(op, dt, mask, values)
            return
        word, n = shape
        words = self._to_words(dt, values, word, n)
        ins = ", ".join(f"${k + 2}" for k in range(n))
        vec = f".v{n}" if n > 1 else ""
        reg = _REG[word]
        args = ", ".join(f"i{word} {w}" for w in words)
        self.raw(f'call void asm sideeffect "@$1 st.global{vec}.b{word} [$0], {{{ins}}};", '
                 f'"l,b,{",".join([reg] * n)},~{{memory}}"(ptr addrspace(1) '
                 f"{self._global_address(op.array, op.indices)}, i1 {mask}, {args})")

    def _branchy_store(self, op: ops.MaskedStoreOp, dt: Any, mask: str, values: list[str]
                       ) -> None:
        ptr_t = self.t.pointer_type(self.arrays[op.array]["space"])
        addr = self.address(op.array, self.index_list(list(op.indices)))
        store_block, join = self.label(), self.label()
        self.raw(f"br i1 {mask}, label %{store_block}, label %{join}")
        self.start_block(store_block)
        if len(values) == 1:
            self.raw(f"store {dt.llvm} {values[0]}, {ptr_t} {addr}")
        else:
            vec, v = self._vector(dt.llvm, values)
            self.raw(f"store {vec} {v}, {ptr_t} {addr}, align {op.align.data}")
        self.raw(f"br label %{join}")
        self.start_block(join)
