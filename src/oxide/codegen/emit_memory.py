"""Emitter ops for memory: arrays and their addresses, bounds checks and their
reports, loads, stores, atomics, and shared/local/constant arrays."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xdsl.ir import SSAValue

from oxide.errors import UnsupportedFeatureError
from oxide.ir import ops
from oxide.ir.types import SharedArrayType, ThreadIndexType, dtype_of_ir


class MemoryMixin:
    """Memory ops of the Emitter (see emit.py for the helpers they use)."""

    arrays: dict[SSAValue, dict[str, Any]]
    names: dict[Any, Any]
    prefetched: dict[int, str]

    def op_FixedArrayOp(self, op: ops.FixedArrayOp) -> None:
        t = op.result.type
        assert isinstance(t, SharedArrayType)
        dt = dtype_of_ir(t.elem)
        space = t.space.data
        if t.shape.data == "?":  # dynamic shared memory: the target knows its length
            ptr, length = self.target_hook("dynamic_shared", "dynamic shared memory")(self, dt)
            self.arrays[op.result] = {"ptr": ptr, "dims": [length], "strides": None,
                                      "dtype": dt, "space": space}
            self.names[op.result] = ptr
            return
        shape = [int(s) for s in t.shape.data.split("x")]
        count = 1
        for s in shape:
            count *= s
        if space == "local":
            ptr = self.ins(f"alloca [{count} x {dt.llvm}], align 16")
            # Safe code can read an element nobody wrote: it reads 0, not LLVM's `undef`
            # (which folds to anything). Register-sized arrays lose the memset in SROA.
            size = count * max(1, dt.bits // 8)
            self.intrinsic("llvm.memset.p0.i64", "void",
                           [("ptr", ptr), ("i8", "0"), ("i64", str(size)), ("i1", "false")])
        elif space == "constant":
            assert op.sym is not None
            hook = self.target_hook("constant_array", "constant memory")
            ptr = hook(self, dt, count, op.sym.data)
        else:
            ptr = self.t.shared_array(self, dt, count)
        self.arrays[op.result] = {"ptr": ptr, "dims": [str(s) for s in shape],
                                  "strides": None, "dtype": dt, "space": space}
        self.names[op.result] = ptr

    def target_hook(self, name: str, what: str) -> Any:
        """An optional target hook; a target without it does not support `what`."""
        hook = getattr(self.t, name, None)
        if hook is None:
            raise UnsupportedFeatureError(f"{what} is not supported on target {self.t.name} yet")
        return hook

    def index_list(self, indices: list[SSAValue]) -> list[str]:
        if len(indices) == 1 and isinstance(indices[0].type, ThreadIndexType):
            return list(self.v(indices[0]))
        return [self.v(i) for i in indices]

    def address(self, array: SSAValue, idx: list[str]) -> str:
        info = self.arrays[array]
        dims, strides = info["dims"], info["strides"]
        offset = None
        if strides is None:
            for d, i in enumerate(idx):
                if offset is None:
                    offset = i
                else:
                    m = self.ins(f"mul nsw i64 {offset}, {dims[d]}")
                    offset = self.ins(f"add nsw i64 {m}, {i}")
        else:
            for i, s in zip(idx, strides, strict=True):
                term = self.ins(f"mul nsw i64 {i}, {s}")
                offset = term if offset is None else self.ins(f"add nsw i64 {offset}, {term}")
        if offset is None:  # a 0-d array: its one element
            return info["ptr"]  # type: ignore[no-any-return]
        ptr_t = self.t.pointer_type(info["space"])
        return self.ins(f"getelementptr inbounds {info['dtype'].llvm}, {ptr_t} {info['ptr']}, "
                        f"i64 {offset}")

    def bounds_check(self, array: SSAValue, idx: list[str], site: int) -> tuple[str, str] | None:
        """Branches to a report when an index is out of range; returns (ok_label, bad_label)."""
        dims = self.arrays[array]["dims"]
        ok = "true"
        fail_idx, fail_len, fail_dim = idx[-1], dims[-1], str(len(idx) - 1)
        for d in reversed(range(len(idx))):
            c = self.ins(f"icmp ult i64 {idx[d]}, {dims[d]}")
            ok = c if ok == "true" else self.ins(f"and i1 {ok}, {c}")
            if d != len(idx) - 1:
                fail_idx = self.ins(f"select i1 {c}, i64 {fail_idx}, i64 {idx[d]}")
                fail_len = self.ins(f"select i1 {c}, i64 {fail_len}, i64 {dims[d]}")
                fail_dim = self.ins(f"select i1 {c}, i32 {fail_dim}, i32 {d}")
        good, bad = self.label(), self.label()
        self.raw(f"br i1 {ok}, label %{good}, label %{bad}, !prof !0")
        self.start_block(bad)
        self.call_report(1, site, fail_idx, fail_len, fail_dim)
        return good, bad

    def call_report(self, kind: int, site: int, index: str, length: str, dim: str = "0") -> None:
        self.raw(f"call void @oxide.report(ptr %oxide.err, i32 {kind}, i32 {site}, i32 {dim}, "
                 f"i64 {index}, i64 {length})")

    def report_if(self, cond: str, kind: int, site: int, a: str, b: str) -> None:
        bad, cont = self.label(), self.label()
        self.raw(f"br i1 {cond}, label %{bad}, label %{cont}, !prof !1")
        self.start_block(bad)
        self.call_report(kind, site, "0", "0")
        self.raw(f"br label %{cont}")
        self.start_block(cont)

    def in_range(self, array: SSAValue, idx: list[str], site: int, dt: Any,
                 access: Callable[[], str | None]) -> str | None:
        """Emits `access()` where every index is in range (a report where not) and returns
        its value, or 0 on the out-of-range path; None when `access` gives no value."""
        if not idx:  # a 0-d array's one element is always there
            return access()
        good, bad = self.bounds_check(array, idx, site)
        join = self.label()
        self.raw(f"br label %{join}")
        self.start_block(good)
        value = access()
        good_end = self.current
        self.raw(f"br label %{join}")
        self.start_block(join)
        if value is None:
            return None
        zero = "0.0" if dt.is_float else ("false" if dt.is_bool else "0")
        return self.ins(f"phi {dt.llvm} [ {value}, %{good_end} ], [ {zero}, %{bad} ]")

    def op_LoadOp(self, op: ops.LoadOp) -> None:
        dt = dtype_of_ir(op.result.type)
        idx = self.index_list(list(op.indices))
        ptr_t = self.t.pointer_type(self.arrays[op.array]["space"])
        early = self.prefetched.get(id(op))

        def load() -> str:
            if early is not None:  # read at entry (block coarsening); the check stays here
                return early
            return self.ins(f"load {dt.llvm}, {ptr_t} {self.address(op.array, idx)}")

        self.names[op.result] = (self.in_range(op.array, idx, op.site.data, dt, load)
                                 if op.checked.data else load())

    def op_StoreOp(self, op: ops.StoreOp) -> None:
        dt = dtype_of_ir(op.value.type)
        idx = self.index_list(list(op.indices))
        ptr_t = self.t.pointer_type(self.arrays[op.array]["space"])
        value = self.v(op.value)

        def store() -> None:
            self.raw(f"store {dt.llvm} {value}, {ptr_t} {self.address(op.array, idx)}")

        if op.checked.data:
            self.in_range(op.array, idx, op.site.data, dt, store)
        else:
            store()

    def op_VectorStoreOp(self, op: ops.VectorStoreOp) -> None:
        dt = dtype_of_ir(op.values[0].type)
        ptr_t = self.t.pointer_type(self.arrays[op.array]["space"])
        vec = f"<{len(op.values)} x {dt.llvm}>"
        v = "poison"
        for k, x in enumerate(op.values):
            v = self.ins(f"insertelement {vec} {v}, {dt.llvm} {self.v(x)}, i32 {k}")
        addr = self.address(op.array, self.index_list(list(op.indices)))
        self.raw(f"store {vec} {v}, {ptr_t} {addr}, align {op.align.data}")

    def op_ArrayAlignedOp(self, op: ops.ArrayAlignedOp) -> None:
        """The data pointer, or-ed with each outer dimension's pitch in bytes, has no low
        bits below `bytes` set (and a strided array's innermost stride is 1)."""
        info = self.arrays[op.array]
        size = max(1, info["dtype"].bits // 8)
        ptr_t = self.t.pointer_type(info["space"])
        bits = self.ins(f"ptrtoint {ptr_t} {info['ptr']} to i64")
        if info["strides"] is None:
            pitches = [info["dims"][-1]] if len(info["dims"]) > 1 else []
        else:
            pitches = list(info["strides"][:-1])
        for pitch in pitches:
            bits = self.ins(f"or i64 {bits}, {self.ins(f'mul i64 {pitch}, {size}')}")
        low = self.ins(f"and i64 {bits}, {op.bytes.data - 1}")
        ok = self.ins(f"icmp eq i64 {low}, 0")
        if info["strides"] is not None:
            unit = self.ins(f"icmp eq i64 {info['strides'][-1]}, 1")
            ok = self.ins(f"and i1 {ok}, {unit}")
        self.names[op.result] = ok

    def op_AtomicOp(self, op: ops.AtomicOp) -> None:
        dt = dtype_of_ir(op.result.type)
        idx = self.index_list(list(op.indices))
        space = self.arrays[op.array]["space"]
        compare = self.v(op.compare[0]) if op.compare else None

        def update() -> str:
            return self.t.atomic(self, op.kind.data, op.scope.data, dt,
                                 self.address(op.array, idx), self.v(op.value), compare, space)

        self.names[op.result] = (self.in_range(op.array, idx, op.site.data, dt, update)
                                 if op.checked.data else update())

    # -- effects ---------------------------------------------------------------------
