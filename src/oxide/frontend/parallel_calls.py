"""Calls that reach across threads or memory spaces: atomics, warp and block
collectives, and shared, local, dynamic-shared and constant arrays."""

from __future__ import annotations

import ast
from typing import Any

from oxide import types as T
from oxide.errors import KernelSyntaxError, KernelTypeError, SafetyError
from oxide.frontend.values import (
    Array,
    FixedArray,
    Lit,
    Static,
    Tup,
    Val,
    Witness,
    article,
    describe,
    literal_text,
)
from oxide.ir import ops
from oxide.ir.types import SharedArrayType, ir_type

_SCOPES = ("block", "device", "system")
_ATOMIC_TYPES = {"i32", "u32", "i64", "u64", "f32", "f64"}
FULL_MASK = 0xFFFFFFFF
# Per-thread local arrays: CUDA allows 512 KiB of local memory per thread, but each
# kernel's frame also sits on a CPU thread's stack; 64 KiB is ample for register-like
# scratch and far from both limits.
LOCAL_ARRAY_BYTES = 64 * 1024
# Static shared memory per block: 48 KiB on every architecture (more needs the dynamic
# opt-in, `ox.shared.dynamic` with `shared_mem_bytes`).
STATIC_SHARED_BYTES = 48 * 1024
# ptxas takes up to 227 KiB of static shared memory for sm_90a (sm_90 and older: 48 KiB)
SM90A_STATIC_SHARED_BYTES = 227 * 1024
# an sm_90 SM's shared memory, of which the driver keeps 1 KiB for each resident block
SM90_SHARED_PER_SM = 228 * 1024
SM90_RESERVED_PER_BLOCK = 1024


def sm90_block_shared_bytes(occupancy: int | None) -> int:
    """The shared memory one block may take on sm_90 so that `occupancy` blocks fit an SM
    at once (`@tile.kernel(occupancy=N)`; None or 1: the whole block's limit)."""
    per_block = SM90_SHARED_PER_SM // (occupancy or 1) - SM90_RESERVED_PER_BLOCK
    return min(SM90A_STATIC_SHARED_BYTES, per_block)


class ParallelCallsMixin:
    """Cross-thread and memory-space intrinsics; mixed into FunctionLowering via CallsMixin."""

    # -- atomics ---------------------------------------------------------------------

    def call_atomic(self, kind: str, node: ast.Call) -> Val:
        n = 4 if kind == "cas" else 3
        what = f"ox.atomic.{kind}{'_' if kind in ('and', 'or') else ''}()"
        if len(node.args) != n:
            raise self.error(KernelSyntaxError, node, f"{what} takes {n} arguments: "
                             + ("(arr, index, compare, value)" if kind == "cas"
                                else "(arr, index, value)"))
        scope = self.atomic_scope(node)
        arr = self.expr(node.args[0])
        if isinstance(arr, Array):
            if arr.type.access not in ("atomic",) and not (
                    arr.type.access in ("raw", "disjoint") and self.unsafe_depth):
                raise self.error(SafetyError, node.args[0],
                                 f"`{arr.name}` is a {arr.type.title}; atomics need an "
                                 "AtomicSlice parameter",
                                 hint=f"declare it `AtomicSlice[{arr.type.dtype.name}]`")
            dt, name = arr.type.dtype, arr.name
        elif isinstance(arr, FixedArray) and arr.space == "shared":
            dt, name = arr.dtype, self.text(node.args[0])
        else:
            raise self.error(KernelTypeError, node.args[0],
                             f"atomics work on AtomicSlice parameters and shared arrays, not "
                             f"{describe(arr)}")
        allowed = set(_ATOMIC_TYPES) | ({"f16", "bf16"} if kind == "add" else set())
        if kind in ("and", "or", "xor"):
            allowed -= {"f32", "f64"}
        if dt.name not in allowed:
            raise self.error(KernelTypeError, node, f"{what} does not support {dt.name}",
                             hint="atomics support i32, u32, i64, u64, f32, f64 "
                                  "(add also f16 and bf16; bitwise ops integers only)")
        index = self.expr(node.args[1])
        shape_holder = arr if isinstance(arr, FixedArray) else arr
        items = self.index_values(shape_holder, index, _FakeSubscript(node.args[0], node.args[1]),
                                  write=True)
        idx = self.index_ssa(items, node.args[1])
        values = [self.expr(a) for a in node.args[2:]]
        conv = []
        for v, v_node in zip(values, node.args[2:], strict=True):
            if isinstance(v, Val) and v.dtype != dt:
                raise self.error(KernelTypeError, v_node,
                                 f"`{name}` holds {dt.name}; the value is {v.dtype.name}",
                                 hint=f"convert it: `{dt.name}(...)`")
            conv.append(self.materialize(v, dt, v_node))
        compare = conv[0] if kind == "cas" else None
        value = conv[-1]
        site = self.b.site("index", self.src.span(node), name)
        return Val(self.b.value(ops.AtomicOp(kind, scope, arr.ssa, idx, value, compare, site)),
                   dt)

    def atomic_scope(self, node: ast.Call) -> str:
        """The `scope=` keyword: a string literal, read from the AST (strings are not values)."""
        scope = "device"
        for kw in node.keywords:
            if kw.arg != "scope":
                raise self.error(KernelSyntaxError, kw.value,
                                 f"unexpected keyword argument `{kw.arg}`")
            if not (isinstance(kw.value, ast.Constant) and kw.value.value in _SCOPES):
                raise self.error(KernelSyntaxError, kw.value,
                                 'scope must be "block", "device" or "system"')
            scope = kw.value.value
        return scope

    # -- warp collectives ------------------------------------------------------------

    def call_warp(self, kind: str, node: ast.Call) -> Any:
        two = {"shuffle", "shuffle_up", "shuffle_down", "shuffle_xor"}
        n = 2 if kind in two else 1
        width = self.shuffle_width(node, kind) if kind in two else None
        if width is not None:
            node = _without_keywords(node)
        args = self.args_exact(node, (n, n + 1), f"ox.warp.{kind}()")
        if len(args) > n:
            mask = self.warp_mask(args[n], node.args[n], kind)
        else:
            mask = self.materialize(Lit(FULL_MASK), T.u32, node)
        if kind in ("ballot", "any", "all"):
            pred = self.truth(args[0], node.args[0])
            out = T.u32 if kind == "ballot" else T.bool_
            return self._warp_op(ops.WarpOp(kind, [pred, mask], ir_type(out)), out, node)
        v = self.scalar(args[0], node.args[0])
        if kind not in two:  # a reduction or a match: computes on the value
            self.refuse_storage(v.dtype, node.args[0], f"ox.warp.{kind}()")
        if v.dtype.bits not in (32, 64) and kind != "match_any":
            raise self.error(KernelTypeError, node.args[0],
                             f"warp shuffles move 32- and 64-bit values, not {v.dtype.name}",
                             hint="convert to i32 or f32 first")
        if kind in two:
            lane = self.materialize(args[1], T.i32, node.args[1])
            operands = [v.ssa, lane, mask]
            if width is not None and width != 32:  # 32 is the default: the same op
                operands.insert(2, self.b.constant(width, T.i32))
            return self._warp_op(ops.WarpOp(kind, operands, ir_type(v.dtype)), v.dtype, node)
        if kind == "match_all":  # CUDA's __match_all_sync: (the mask or 0, whether all agree)
            m = self._warp_op(ops.WarpOp(kind, [v.ssa, mask], ir_type(T.u32)), T.u32, node)
            agree = self.b.value(ops.CompareOp("ne", m.ssa, self.b.constant(0, T.u32)))
            return Tup((m, Val(agree, T.bool_)))
        if kind == "match_any":
            return self._warp_op(ops.WarpOp(kind, [v.ssa, mask], ir_type(T.u32)), T.u32, node)
        return self._warp_op(ops.WarpOp(kind, [v.ssa, mask], ir_type(v.dtype)), v.dtype, node)

    def shuffle_width(self, node: ast.Call, kind: str) -> int | None:
        """The `width=` keyword of a shuffle: CUDA's sub-group size, a power of two from 1
        to 32 known at compile time (None when absent). Lanes then shuffle within groups
        of `width` consecutive lanes, as `__shfl_*_sync(..., width)` do."""
        width = None
        for kw in node.keywords:
            if kw.arg != "width":
                raise self.error(KernelSyntaxError, kw.value,
                                 f"unexpected keyword argument `{kw.arg}` of ox.warp.{kind}()",
                                 hint="shuffles take (value, lane_or_delta, mask) and `width=`")
            w = self.expr(kw.value)
            hint = ("width is the size of the lane groups that shuffle among themselves: "
                    "1, 2, 4, 8, 16 or 32, a constant (a literal, a local constant or a "
                    "Const parameter)")
            if not (isinstance(w, Lit) and isinstance(w.value, int)
                    and not isinstance(w.value, bool)):
                raise self.error(KernelTypeError, kw.value,
                                 f"the width of ox.warp.{kind}() must be a compile-time "
                                 f"integer, not {describe(w)}", hint=hint)
            if w.value not in (1, 2, 4, 8, 16, 32):
                raise self.error(KernelTypeError, kw.value,
                                 f"the width of ox.warp.{kind}() must be a power of two from "
                                 f"1 to 32, not {literal_text(w.value)}", hint=hint)
            width = int(w.value)
        return width

    def intr_warp_activemask(self, node: ast.Call) -> Val:
        """`__activemask()`: the lanes of the warp executing this call together (PTX
        `activemask.b32`; on the CPU, the lanes that reach it in the same warp step).
        Not a collective: any subset of lanes may call it, so it takes no mask."""
        self.args_exact(node, 0, "ox.warp.activemask()")
        return self._warp_op(ops.WarpOp("activemask", [], ir_type(T.u32)), T.u32, node)

    def _lanemask(self, node: ast.Call, which: str) -> Val:
        """`%lanemask_<which>`: the lanes below, up to, equal to, above or from this one."""
        self.args_exact(node, 0, f"ox.warp.lanemask_{which}()")
        return Val(self.b.value(ops.RegisterOp(f"lanemask.{which}", ir_type(T.u32))), T.u32)

    def intr_warp_lanemask_lt(self, node: ast.Call) -> Val:
        return self._lanemask(node, "lt")

    def intr_warp_lanemask_le(self, node: ast.Call) -> Val:
        return self._lanemask(node, "le")

    def intr_warp_lanemask_eq(self, node: ast.Call) -> Val:
        return self._lanemask(node, "eq")

    def intr_warp_lanemask_gt(self, node: ast.Call) -> Val:
        return self._lanemask(node, "gt")

    def intr_warp_lanemask_ge(self, node: ast.Call) -> Val:
        return self._lanemask(node, "ge")

    def intr_sync_warp(self, node: ast.Call) -> Static:
        """`ox.sync_warp(mask=FULL)`, CUDA's `__syncwarp(mask)`. Without a mask (or with the
        constant full mask) it is the whole-warp barrier the uniformity pass checks; with
        another mask, a warp point of the lanes named (`bar.warp.sync` on the GPU)."""
        if not node.args:
            return self._barrier(node, "warp", "ox.sync_warp()")
        (m,) = self.args_exact(node, (0, 1), "ox.sync_warp()")
        if isinstance(m, Lit) and isinstance(m.value, int) and not isinstance(m.value, bool) \
                and m.value & FULL_MASK == FULL_MASK and m.value >> 32 == 0:
            return self._barrier(_without_args(node), "warp", "ox.sync_warp()")
        mask = self.warp_mask(m, node.args[0], "sync", what="the mask of ox.sync_warp()")
        self._warp_op(ops.WarpOp("sync", [mask], ir_type(T.u32)), T.u32, node)
        self.ctx.uses_barriers = True
        return Static(None)

    def _warp_op(self, op: ops.WarpOp, dt: T.DType, node: ast.Call) -> Val:
        """Emits a warp collective, remembering where it came from: passes/uniformity.py
        points at it when lanes of a warp may not all reach a full-mask collective."""
        self.b.emit(op)
        self.b.origins[op] = (*self.call_spans, self.src.span(node))
        return Val(op.results[0], dt)

    def warp_mask(self, m: Any, node: ast.expr, kind: str, what: str | None = None) -> Any:
        """An explicit mask as u32: lane `l` takes part when bit `l` is set.

        Only integers are masks: a float or bool would be converted to some bit
        pattern nobody meant. A 64-bit run-time integer has bits no lane owns, so it
        is converted explicitly by the user. A constant 0 names no lane, not even the
        caller's: undefined behaviour in CUDA, so it is refused here.
        """
        what = what or f"the mask of ox.warp.{kind}()"
        hint = ("a mask is a u32 with bit l set for each lane l that takes part: leave it out "
                "for the whole warp, or pass e.g. `ox.warp.ballot(cond)` or `u32(0xFFFF)`")
        if isinstance(m, Lit):
            if isinstance(m.value, bool) or not isinstance(m.value, int):
                raise self.error(KernelTypeError, node,
                                 f"{what} must be an integer, not {describe(m)}", hint=hint)
            if m.value == 0:
                raise self.error(SafetyError, node,
                                 f"{what} is 0: it names no lane, not even the calling one "
                                 "(undefined behaviour in CUDA)", hint=hint)
            return self.materialize(m, T.u32, node)
        if not isinstance(m, (Val, Witness)):
            raise self.error(KernelTypeError, node,
                             f"{what} must be an integer, not {describe(m)}", hint=hint)
        v = self.scalar(m, node)
        if not v.dtype.is_int or v.dtype.is_bool:
            raise self.error(KernelTypeError, node,
                             f"{what} must be an integer (u32), not {v.dtype.name}", hint=hint)
        if v.dtype.bits > 32:
            raise self.error(KernelTypeError, node,
                             f"{what} is a u32; {v.dtype.name} has bits no lane owns",
                             hint=f"convert it: `u32({self.text(node)})`")
        return self.materialize(v, T.u32, node)

    # -- block collectives -----------------------------------------------------------

    def call_block(self, kind: str, node: ast.Call) -> Val:
        """`ox.block.*`: inlines the oxide implementation (`lang/collectives.py`).

        Shuffles move 32- and 64-bit values, so narrower numbers are widened for
        the collective and the result narrowed back to the argument's type.
        """
        from oxide.lang.collectives import implementation

        (v,) = self.args_exact(node, 1, f"ox.block.{kind}()")
        if not isinstance(v, (Lit, Val, Witness)):
            raise self.error(KernelTypeError, node.args[0],
                             f"ox.block.{kind}() takes a number, not {describe(v)}")
        s = self.scalar(v, node.args[0])
        if s.dtype.is_bool:
            raise self.error(KernelTypeError, node.args[0],
                             f"ox.block.{kind}() takes a number, not a bool",
                             hint="convert it: `i32(flag)`")
        self.refuse_storage(s.dtype, node.args[0], f"ox.block.{kind}()")
        wide = s.dtype
        if s.dtype.bits < 32:
            wide = T.f32 if s.dtype.is_float else T.i32 if s.dtype.is_signed else T.u32
        fn, extra = implementation(kind)
        x = Val(self.b.cast(s.ssa, wide), wide)
        r = self.inline_values(fn, [x, Static(wide), *(Static(e) for e in extra)], node,
                               [node.args[0]] * (2 + len(extra)))
        result = self.b.cast(r.ssa, s.dtype)
        if kind != "exclusive_scan":  # every thread of the block reads one shared slot
            self.b.uniform.add(result)
        return Val(result, s.dtype)

    # -- fixed arrays ----------------------------------------------------------------

    def _fixed_array(self, node: ast.Call, space: str) -> FixedArray:
        args = self.args_exact(node, 2, f"ox.{space}.array(dtype, shape)")
        dt_v, shape_v = args
        if not (isinstance(dt_v, Static) and isinstance(dt_v.obj, T.DType)):
            hint = ""
            if isinstance(shape_v, Static) and isinstance(shape_v.obj, T.DType):
                hint = (f"the dtype comes first: `ox.{space}.array({self.text(node.args[1])}, "
                        f"{self.text(node.args[0])})` (numba's order, shape then dtype, is "
                        "the other way round)")
            raise self.error(KernelTypeError, node.args[0],
                             f"the first argument of ox.{space}.array is the dtype",
                             hint=hint)
        shape = self._fixed_shape(shape_v, node.args[1], space)
        self._reserve_fixed_bytes(dt_v.obj, shape, space, node)
        t = SharedArrayType(ir_type(dt_v.obj), _str_attr("x".join(map(str, shape))),
                            _str_attr(space))
        ssa = self.b.alloc(ops.FixedArrayOp(t))
        return FixedArray(ssa, dt_v.obj, shape, space, f"{space} array")

    def _fixed_shape(self, shape_v: Any, node: ast.expr, space: str) -> tuple[int, ...]:
        """The shape of a shared or local array: 1 to 3 positive compile-time integers."""
        items = shape_v.items if isinstance(shape_v, Tup) else (shape_v,)
        if not 1 <= len(items) <= 3:
            raise self.error(KernelTypeError, node,
                             f"ox.{space}.array takes 1 to 3 dimensions, not {len(items)}",
                             hint="flatten the extra dimensions into one")
        for item in items:
            if not (isinstance(item, Lit) and isinstance(item.value, int)
                    and not isinstance(item.value, bool)):
                raise self.error(KernelTypeError, node,
                                 f"the shape of ox.{space}.array must be compile-time "
                                 f"integers, not {describe(item)}",
                                 hint="use constants or Const parameters")
            if item.value <= 0:
                raise self.error(KernelTypeError, node,
                                 f"the shape of ox.{space}.array must be positive, not "
                                 f"{literal_text(item.value)}")
        return tuple(int(i.value) for i in items)

    def _reserve_fixed_bytes(self, dt: T.DType, shape: tuple[int, ...], space: str,
                             node: ast.Call) -> None:
        """Counts the array against its space's limit, before any IR is built.

        Local arrays live in each thread's stack frame (CUDA local memory, and
        the CPU thread's stack): beyond LOCAL_ARRAY_BYTES per thread they crash the
        CPU process or fail the launch. Static shared memory is capped at
        STATIC_SHARED_BYTES per block on every architecture unless a kernel opts in
        to more dynamically; nvJitLink would otherwise reject it without a source line.
        """
        count = 1
        for extent in shape:
            count *= extent
        size = count * max(1, dt.bits // 8)
        if space == "local":
            total, limit = self.ctx.local_bytes + size, LOCAL_ARRAY_BYTES
            where = "per thread"
            hint = ("keep per-thread arrays small; share a larger buffer through "
                    "ox.shared.array, or pass a global array (RawSlice/DisjointSlice)")
        else:
            total, limit = self.ctx.shared_bytes + size, STATIC_SHARED_BYTES
            where = "per block"
            hint = ("use ox.shared.dynamic(dtype) with the launch's shared_mem_bytes, or a "
                    "global array, for more")
        already = total - size
        extra = f" ({_kib(already)} already used by other {space} arrays)" if already else ""
        message = (f"this {space} array needs {_kib(size)}{extra}; {space} arrays may use at "
                   f"most {_kib(limit)} {where}")
        if space == "shared" and limit < total <= SM90A_STATIC_SHARED_BYTES:
            # on sm_90 the kernel is compiled for sm_90a, which takes up to 227 KiB; other
            # targets raise this (compiler._compile)
            if self.ctx.big_shared is None:
                self.ctx.big_shared = self.error(
                    KernelTypeError, node, message + " (227 KiB on sm_90, where the kernel "
                    "is compiled for sm_90a)", hint=hint)
        elif total > limit:
            raise self.error(KernelTypeError, node, message, hint=hint)
        if space == "local":
            self.ctx.local_bytes = total
        else:
            self.ctx.shared_bytes = total

    def intr_shared_array(self, node: ast.Call) -> FixedArray:
        return self._fixed_array(node, "shared")

    def intr_local_array(self, node: ast.Call) -> FixedArray:
        return self._fixed_array(node, "local")

    def intr_shared_dynamic(self, node: ast.Call) -> FixedArray:
        """The launch's dynamic shared memory (`shared_mem_bytes`) as a 1-D array.

        Its length is the byte size // the dtype's size, read on the device, so
        accesses are bounds-checked like any other. Every call views the same
        bytes, as `extern __shared__` does in CUDA.
        """
        (dt_v,) = self.args_exact(node, 1, "ox.shared.dynamic(dtype)")
        if not (isinstance(dt_v, Static) and isinstance(dt_v.obj, T.DType)) or dt_v.obj.is_bool:
            raise self.error(KernelTypeError, node.args[0], "the argument is a numeric dtype",
                             hint="e.g. `ox.shared.dynamic(f32)`")
        t = SharedArrayType(ir_type(dt_v.obj), _str_attr("?"), _str_attr("shared"))
        ssa = self.b.alloc(ops.FixedArrayOp(t))
        return FixedArray(ssa, dt_v.obj, (None,), "shared", "dynamic shared memory")

    def constant_array(self, obj: Any, name: str, node: ast.AST) -> FixedArray:
        """A module-level `ox.ConstantArray`: one global per kernel module, filled by the host."""
        known = self.ctx.constant_values.get(id(obj))
        if known is not None:
            return known
        from oxide.runtime.constant import CONSTANT_MEMORY_BYTES

        used = sum(arr.nbytes for _, arr in self.ctx.constants)
        if used + obj.nbytes > CONSTANT_MEMORY_BYTES:
            # ptxas would refuse the module ("too much global constant data"), with no line
            raise self.error(KernelTypeError, node,
                             f"`{name}` needs {_kib(obj.nbytes)} of constant memory and the "
                             f"kernel's other ConstantArrays use {_kib(used)}; a kernel's "
                             f"ConstantArrays may use {_kib(CONSTANT_MEMORY_BYTES)} in all",
                             hint="pass the larger table as a Slice parameter instead")
        symbol = f"oxide_const_{len(self.ctx.constants)}"
        t = SharedArrayType(ir_type(obj.dtype), _str_attr("x".join(map(str, obj.shape))),
                            _str_attr("constant"))
        ssa = self.b.alloc(ops.FixedArrayOp(t, symbol))
        arr = FixedArray(ssa, obj.dtype, obj.shape, "constant", name)
        self.ctx.constants.append((symbol, obj))
        self.ctx.constant_values[id(obj)] = arr
        return arr

    def fixed_dim(self, arr: FixedArray, dim: int) -> Any:
        if arr.shape[dim] is not None:
            return Lit(arr.shape[dim])
        return Val(self.b.value(ops.ArrayDimOp(arr.ssa, dim, ir_type(T.i64))), T.i64)

    def fixed_array_access(self, arr: FixedArray, index: Any, node: ast.Subscript,
                           value: Any) -> Any:
        if arr.space == "constant" and value is not None:
            raise self.error(SafetyError, node,
                             f"`{arr.name}` is a ConstantArray: kernels only read it",
                             hint=f"set its values from the host: `{arr.name}.set(values)`")
        unsafe = self.unsafe_depth > 0
        if arr.space == "shared" and not unsafe and self.ctx.block is None:
            verb = "reading" if value is None else "writing"
            raise self.error(SafetyError, node,
                             f"{verb} a shared array outside `with ox.unsafe():` needs the "
                             "kernel's block shape, to prove no two threads race",
                             hint="declare it: `@ox.kernel(block=(256,))` (or `(32, 8)`...), "
                                  "and oxide proves the accesses race-free between "
                                  "ox.sync_threads() barriers; or use ox.block.reduce_add/min/"
                                  "max or ox.block.exclusive_scan, or wrap the access in "
                                  "`with ox.unsafe():`")
        items = self.index_values(arr, index, node, write=value is not None)
        idx = self.index_ssa(items, node.slice)
        # shared and local arrays are named by the variable they are read through
        name = arr.name if arr.space == "constant" else self.text(node.value)
        site = self.b.site("index", self.src.span(node), name)
        if value is None:
            return Val(self.b.value(ops.LoadOp(arr.ssa, idx, ir_type(arr.dtype), site,
                                               self.ctx.checks, unsafe=unsafe)), arr.dtype)
        if isinstance(value, Val) and value.dtype != arr.dtype:
            raise self.error(KernelTypeError, node,
                             f"the {arr.space} array holds {arr.dtype.name}; cannot store "
                             f"{article(value.dtype.name)}", hint=f"convert: `{arr.dtype.name}(...)`")
        v = self.materialize(value, arr.dtype, node)
        # local arrays are the thread's own: only shared stores are left to the race proof
        self.b.emit(ops.StoreOp(arr.ssa, idx, v, site, self.ctx.checks,
                                unsafe=unsafe or arr.space != "shared"))
        return None


def _kib(size: int) -> str:
    """A byte count for messages: `48 KiB`, `4 MiB`, `1.5 GiB`, or bytes when small."""
    if size >= 1 << 40:
        return f"about 2**{size.bit_length() - 1} bytes"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            value = size / scale
            return f"{value:.0f} {unit}" if size % scale == 0 else f"{value:.1f} {unit}"
    return f"{size} bytes"


def _without_keywords(node: ast.Call) -> ast.Call:
    """`node` less its keywords (read already), for the positional-argument checks."""
    return ast.copy_location(ast.Call(func=node.func, args=node.args, keywords=[]), node)


def _without_args(node: ast.Call) -> ast.Call:
    """`node` with no arguments: `ox.sync_warp(0xFFFFFFFF)` is `ox.sync_warp()`."""
    return ast.copy_location(ast.Call(func=node.func, args=[], keywords=[]), node)


class _FakeSubscript:
    """Lets atomics reuse the subscript index checks (which report at `.slice`)."""

    def __init__(self, value: ast.expr, index: ast.expr) -> None:
        self.value = value
        self.slice = index


def _str_attr(s: str) -> Any:
    from xdsl.dialects.builtin import StringAttr

    return StringAttr(s)
