"""Tile operations lowered into oxide's SIMT IR, thread by thread.

Every tile op becomes ordinary `oxide.*` ops on the values one thread holds (its
slots, `tile/layout.py`), so codegen, the CPU target, the cache and the runtime are
the SIMT kernel's. What each op assumes and guarantees:

- elementwise ops: operands in layouts with equal keys, one op per slot;
- `broadcast`: a source whose layout matches the target cut to extent 1 along the
  broadcast dimensions is read from the thread's own slots; any other is converted
  first;
- `convert` (`tile/shape_lower.py`): through a shared-memory array of the whole tile,
  between two block barriers (before the writes, so a loop can reuse the array; and
  between the writes and the reads). Every thread reaches it: tile code has no
  thread-dependent control;
- `load` / `store` (`tile/access.py`): an element outside the array is never touched
  (padding in, nothing out), and only an element's canonical owner (no replica) stores
  it, so a tile access cannot fault;
- `reduce` along `d`: each thread combines its own slots, then the lanes of `d` by
  butterfly shuffles (`shuffle_xor`, the whole warp takes part), then the warps of `d`
  through shared memory between barriers. Replicas along `d` contribute the identity.
  The result is in the parent's slice layout, held by every thread of the group.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from xdsl.dialects.builtin import FunctionType, IntAttr, StringAttr
from xdsl.ir import BlockArgument, SSAValue

from oxide import types as T
from oxide.codegen.abi import OperandMap
from oxide.frontend.builder import IRBuilder
from oxide.frontend.hopper_calls import tensormap_ir_type
from oxide.ir import ops
from oxide.ir.types import ArrayType, SharedArrayType, constant_attr, dtype_of_ir, ir_type
from oxide.tile import named_barriers
from oxide.tile.access import GlobalAccessMixin
from oxide.tile.atomic_lower import AtomicEmitMixin
from oxide.tile.layout import WARP_SIZE, Layout, broadcast_source
from oxide.tile.shape_lower import ShapeEmitMixin
from oxide.tile.values import Slots

FULL_MASK = 0xFFFFFFFF
# ops whose identity the reductions know: (float identity, signed int, unsigned int)
_IDENTITY = {"add": (0.0, 0, 0), "max": (-math.inf, None, 0), "min": (math.inf, None, None)}


def reduce_dtype(dt: T.DType) -> T.DType:
    """The type a reduction combines in: 16-bit floats in f32, narrow ints in 32 bits
    (warp shuffles move 32- and 64-bit values; f32 also keeps a bf16 sum accurate)."""
    if dt.is_float:
        return T.f32 if dt.bits < 32 else dt
    if dt.bits < 32:
        return T.i32 if dt.is_signed else T.u32
    return dt


class TileEmitter(GlobalAccessMixin, ShapeEmitMixin, AtomicEmitMixin):
    """Emits the SIMT IR of tile operations into one kernel's builder."""

    def __init__(self, b: IRBuilder, num_warps: int, reserve_shared: Callable[[int], None]
                 ) -> None:
        self.b = b
        self.num_warps = num_warps
        self.reserve_shared = reserve_shared  # counts bytes against the per-block limit
        self.shared_bytes = 0  # what `shared` counted so far
        self._staging: dict[tuple[str, int, str], SSAValue] = {}  # `staging`'s arrays
        self._lane: SSAValue | None = None
        self._warp: SSAValue | None = None
        self._consts: dict[tuple[Any, str], SSAValue] = {}
        self._base: dict[tuple[Any, int, int], SSAValue] = {}
        self._owner: dict[Any, SSAValue | None] = {}
        # coordinate bases (`coords`): a thread's first coordinate along a dimension, an i32
        # in [0, extent) and a multiple of `align`; each slot's coordinate is the base plus
        # a static offset. Maps base -> (extent, align).
        self._coordinate_base: dict[SSAValue, tuple[int, int]] = {}
        # scalars known to be multiples of a power of two (an array's row length where the
        # launch specialized on 16-byte row vectors): `compare_offsets` shares compares
        self.divisors: dict[SSAValue, int] = {}
        self.rings_placed = 0  # product operands given rings (tile/operand_rings.py)
        # every product reads both operands from TMA rings (`products_on_tma_rings`): what
        # a two-blocks trial needs (tile/pipeline.py `TwoBlocksDoNotPay`)
        self.products_on_tma = False
        self.rings: Any = None  # the rings' lowering state, once a ring is used
        # hidden tensor-map parameters TMA rings read through (tile/tma_rings.py)
        self.operand_maps: dict[OperandMap, SSAValue] = {}
        self.uses_barriers = False
        # with a producer warp group (tile/producer.py): the threads that run the tile
        # code, whose barriers are a named barrier of theirs (the producer never meets them)
        self.consumer_threads: int | None = None
        self.tma_stores = False  # a store went by TMA (tile/tma_stores.py): drain at the end
        self.cpu = False  # the CPU target (no PTX of its own: mbarriers, setmaxnreg)
        self.barriers = 0  # block barriers emitted so far (tile/to_simt.py checks some)
        self.turns: Any = None  # loops whose warp groups take turns (tile/pingpong.py)
        self.overlap: Any = None  # rotated loops by number (tile/overlap.py)
        self.cpu_named_barriers: SSAValue | None = None  # tile/named_barriers.py
        self.cpu_group_barriers: SSAValue | None = None

    def operand_map(self, array: SSAValue, box: tuple[int, ...], swizzle: int,
                    ftz: bool = False) -> SSAValue:
        """The kernel's hidden tensor-map parameter for TMA copies of `box` from array
        parameter `array` (codegen/abi.py `OperandMap`; the launch builds it), added to the
        kernel's parameters the first time it is asked for; `ftz`: f32 reductions through
        it flush subnormals."""
        assert isinstance(array, BlockArgument) and isinstance(array.type, ArrayType)
        m = OperandMap(array.index, dtype_of_ir(array.type.elem).name, box, swizzle, ftz)
        if m not in self.operand_maps:
            block = self.b.func.body.blocks[0]
            spec = T.TensorMapType(T.SCALARS[m.dtype], len(box))
            arg = block.insert_arg(tensormap_ir_type(spec), len(block.args))
            self.b.func.properties["function_type"] = FunctionType.from_lists(
                [a.type for a in block.args], [])
            self.operand_maps[m] = arg
        return self.operand_maps[m]

    # -- values that every thread computes once, at the start ---------------------------

    def _entry(self, op: ops.Operation) -> SSAValue:
        return self.b.alloc(op)

    def const(self, value: int | float | bool, dt: T.DType) -> SSAValue:
        """A constant, made once in the entry block (so it dominates every use). Floats
        are keyed by their bits' text (`float.hex`): `-0.0 == 0.0` in Python, and keying
        by value made a kernel's first zero stand for both."""
        key = (float(value).hex() if dt.is_float or dt.is_fp8 else int(value), dt.name)
        found = self._consts.get(key)
        if found is None:
            found = self._entry(ops.ConstantOp(constant_attr(value, dt), ir_type(dt)))
            self._consts[key] = found
        return found

    def _thread(self) -> tuple[SSAValue, SSAValue]:
        if self._lane is None:
            tid = self._entry(ops.RegisterOp("tid.x", ir_type(T.i32)))
            self._lane = self._entry(ops.BinaryOp("and", tid, self.const(WARP_SIZE - 1, T.i32)))
            self._warp = self._entry(ops.BinaryOp("shr", tid, self.const(5, T.i32)))
        assert self._warp is not None
        return self._lane, self._warp

    def _field(self, x: SSAValue, shift: int, count: int) -> SSAValue:
        """`(x >> shift) & (count - 1)`, in the entry block."""
        if count == 1:
            return self.const(0, T.i32)
        if shift:
            x = self._entry(ops.BinaryOp("shr", x, self.const(shift, T.i32)))
        return self._entry(ops.BinaryOp("and", x, self.const(count - 1, T.i32)))

    def base(self, layout: Layout, d: int) -> SSAValue:
        """This thread's first coordinate along `d` (i32), wrapped into the tile."""
        m, n = layout.dims[d], layout.shape[d]
        key = (m, n, 0)
        found = self._base.get(key)
        if found is None:
            lane, warp = self._thread()
            pos = self._field(lane, m.lane_shift, m.tpw)
            if m.wpc > 1:  # the warp's first element, in units of spt
                w = self._field(warp, m.warp_shift, m.wpc)
                w = self._entry(ops.BinaryOp("mul", w, self.const(m.tpw * m.inner, T.i32)))
                pos = self._entry(ops.BinaryOp("add", w, pos))
            if m.spt > 1:
                pos = self._entry(ops.BinaryOp("mul", pos, self.const(m.spt, T.i32)))
            self._base[(m, n, 1)] = pos  # unwrapped: the replica test reads it
            if m.span > n:
                pos = self._entry(ops.BinaryOp("and", pos, self.const(n - 1, T.i32)))
            self._base[key] = found = pos
        return found

    def _raw_base(self, layout: Layout, d: int) -> SSAValue:
        self.base(layout, d)
        return self._base[(layout.dims[d], layout.shape[d], 1)]

    def valid_along(self, layout: Layout, d: int) -> SSAValue | None:
        """Whether this thread is not a replica along `d` (None: it never is)."""
        if not layout.wraps(d):
            return None
        raw = self._raw_base(layout, d)
        return self._entry(ops.CompareOp("lt", raw, self.const(layout.shape[d], T.i32)))

    def owner(self, layout: Layout) -> SSAValue | None:
        """Whether this thread is the canonical holder of its elements (None: always)."""
        key = layout.key() + (layout.num_warps,)
        if key in self._owner:
            return self._owner[key]
        conds: list[SSAValue] = []
        lane, warp = self._thread()
        free_lanes = (WARP_SIZE - 1) & ~layout.lane_bits()
        free_warps = (self.num_warps - 1) & ~layout.warp_bits()
        for x, free in ((lane, free_lanes), (warp, free_warps)):
            if free:
                bits = self._entry(ops.BinaryOp("and", x, self.const(free, T.i32)))
                conds.append(self._entry(ops.CompareOp("eq", bits, self.const(0, T.i32))))
        for d, n in enumerate(layout.shape):
            if n > 1:
                v = self.valid_along(layout, d)
                if v is not None:
                    conds.append(v)
        result = None
        for c in conds:
            result = c if result is None else self._entry(ops.BinaryOp("and", result, c))
        self._owner[key] = result
        return result

    def coords(self, layout: Layout) -> list[list[SSAValue]]:
        """Each slot's coordinates (i32 SSA values), slot by slot."""
        out = []
        for offs in layout.offsets():
            row = []
            for d, off in enumerate(offs):
                if layout.shape[d] == 1:
                    row.append(self.const(0, T.i32))
                    continue
                base = self.base(layout, d)
                # `base` is a multiple of the thread's run of side-by-side elements
                self._coordinate_base[base] = (layout.shape[d],
                                               min(layout.dims[d].spt, layout.shape[d]))
                row.append(base if off == 0 else
                           self.b.value(ops.BinaryOp("add", base, self.const(off, T.i32))))
            out.append(row)
        return out

    def linear(self, coords: Sequence[SSAValue], shape: tuple[int, ...], dt: T.DType = T.i32
               ) -> SSAValue:
        """Row-major linear index of `coords` in `shape` (extent-1 dimensions skipped)."""
        acc: SSAValue | None = None
        for c, n in zip(coords, shape, strict=True):
            if n == 1:
                continue
            c = self.b.cast(c, dt)
            if acc is None:
                acc = c
            else:
                acc = self.b.value(ops.BinaryOp("mul", acc, self.const(n, dt)))
                acc = self.b.value(ops.BinaryOp("add", acc, c))
        return acc if acc is not None else self.const(0, dt)

    # -- making tiles ---------------------------------------------------------------

    def full(self, layout: Layout, value: int | float | bool, dt: T.DType) -> Slots:
        c = self.const(value, dt)
        return Slots(dt, layout, (c,) * layout.slots)

    def splat(self, layout: Layout, scalar: Slots) -> Slots:
        """A 0-d tile (the same value in every thread) as a tile of `layout`."""
        return Slots(scalar.dtype, layout, (scalar.scalar,) * layout.slots)

    def arange(self, layout: Layout, dt: T.DType) -> Slots:
        return Slots(dt, layout, tuple(self.b.cast(c[0], dt) for c in self.coords(layout)))

    def index_tile(self, layout: Layout, axis: int | None) -> Slots:
        """Each element's coordinate along `axis`, or its row-major position (None), as i32."""
        out = []
        for c in self.coords(layout):
            out.append(c[axis] if axis is not None else self.linear(c, layout.shape))
        return Slots(T.i32, layout, tuple(out))

    # -- elementwise ------------------------------------------------------------------

    def cast(self, t: Slots, dt: T.DType) -> Slots:
        if dt == t.dtype:
            return Slots(dt, t.layout, t.values)
        if dt.is_bool and not t.dtype.is_fp8:  # nonzero test, as NumPy's astype(bool)
            zero = self.const(0.0 if t.dtype.is_float else 0, t.dtype)
            return Slots(dt, t.layout, tuple(self.b.value(ops.CompareOp("ne", v, zero))
                                            for v in t.values))
        return Slots(dt, t.layout, tuple(self.b.cast(v, dt) for v in t.values))

    def binary(self, kind: str, a: Slots, b: Slots, site: int | None = None) -> Slots:
        assert a.layout.key() == b.layout.key() and a.dtype == b.dtype
        out = []
        for x, y in zip(a.values, b.values, strict=True):
            op = ops.BinaryOp(kind, x, y)
            if site is not None:
                op.properties["site"] = IntAttr(site)
            out.append(self.b.value(op))
        return Slots(a.dtype, a.layout, tuple(out))

    def compare(self, pred: str, a: Slots, b: Slots) -> Slots:
        assert a.layout.key() == b.layout.key()
        return Slots(T.bool_, a.layout, tuple(self.b.value(ops.CompareOp(pred, x, y))
                                             for x, y in zip(a.values, b.values, strict=True)))

    def as_offsets(self, t: Slots) -> tuple[SSAValue, int, int, list[int]] | None:
        """(base, its extent, its alignment, offsets) where each of `t`'s i32 values is a
        coordinate base (`coords`: an i32 in [0, extent), a multiple of the alignment) plus
        a static offset, with no overflow possible; else None."""
        if t.dtype != T.i32 or not t.values:
            return None
        base, offsets = None, []
        for v in t.values:
            owner = v.owner
            if v in self._coordinate_base:
                b, off = v, 0
            elif (isinstance(owner, ops.BinaryOp) and owner.kind.data == "add"
                  and isinstance(owner.rhs.owner, ops.ConstantOp)
                  and owner.lhs in self._coordinate_base):
                b, off = owner.lhs, owner.rhs.owner.value.value.data
            else:
                return None
            if base is None:
                base = b
            if b is not base:
                return None
            offsets.append(off)
        assert base is not None
        extent, align = self._coordinate_base[base]
        if not _offsets_fit(offsets, extent):
            return None
        return base, extent, align, offsets

    def compare_offsets(self, pred: str, base: SSAValue, extent: int, align: int,
                        offsets: list[int], c: SSAValue, divisor: int, layout: Layout) -> Slots:
        """`base + k <pred> c` (all i32) for each offset k, as `k <pred> room` with
        `room = c - base`: one subtraction for the thread, then one compare with a
        constant per element (the loads' "room" trick). The room is clamped to
        [min k - 1, max k + 1], which keeps every comparison's truth; `c` is clamped first
        to [min k - 1, max k + extent], which keeps the clamped room and the subtraction
        in i32 (base is in [0, extent)).

        Where `base` and the true `c` are both multiples of g (`align`, and `divisor`: what
        is known of `c` before any clamping), `base + k < c` holds exactly when
        `base + (k - k mod g) < c` does (both sides of the second are multiples of g), so
        for `lt` / `ge` the elements of one aligned run of g share one compare, as Triton's
        divisibility analysis shares them (layernorm's mask: one compare per 16 bytes)."""
        g = min(align, divisor)
        if pred in ("lt", "ge") and g > 1:
            shared = [k - k % g for k in offsets]
            if _offsets_fit(shared, extent):
                offsets = shared
        lo, hi = min(offsets) - 1, max(offsets) + 1

        def clamp(v: SSAValue, low: int, high: int) -> SSAValue:
            v = self.b.value(ops.BinaryOp("max", v, self.const(low, T.i32)))
            return self.b.value(ops.BinaryOp("min", v, self.const(high, T.i32)))

        room = self.b.value(ops.BinaryOp("sub", clamp(c, lo, hi + extent - 1), base))
        room = clamp(room, lo, hi)
        by_offset: dict[int, SSAValue] = {}
        for k in offsets:
            if k not in by_offset:
                by_offset[k] = self.b.value(ops.CompareOp(pred, self.const(k, T.i32), room))
        return Slots(T.bool_, layout, tuple(by_offset[k] for k in offsets))

    def unary(self, kind: str, a: Slots) -> Slots:
        return Slots(a.dtype, a.layout, tuple(self.b.value(ops.UnaryOp(kind, v))
                                             for v in a.values))

    def math(self, fn: str, args: Sequence[Slots], dt: T.DType) -> Slots:
        """ox.math's `fn` slot by slot, as a SIMT kernel's MathOp: operands in one layout
        and the type it computes in (the frontend converts 16-bit floats to f32 first);
        `dt` is the result's type."""
        layout = args[0].layout
        assert all(a.layout.key() == layout.key() for a in args)
        return Slots(dt, layout, tuple(self.b.value(ops.MathOp(fn, list(vs), ir_type(dt)))
                                       for vs in zip(*(a.values for a in args), strict=True)))

    def where(self, c: Slots, a: Slots, b: Slots) -> Slots:
        return Slots(a.dtype, a.layout, tuple(
            self.b.value(ops.SelectOp(p, x, y))
            for p, x, y in zip(c.values, a.values, b.values, strict=True)))

    # -- data movement -------------------------------------------------------------

    def broadcast(self, t: Slots, target: Layout) -> Slots:
        """`t` (rank at most the target's, extents 1 or equal) in `target`'s layout."""
        while t.ndim < len(target.shape):  # NumPy: missing leading dimensions are 1
            t = Slots(t.dtype, t.layout.insert(0), t.values)
        bdims = [d for d, (n, m) in enumerate(zip(t.shape, target.shape, strict=True))
                 if n != m]
        need = broadcast_source(target, t.shape)
        if t.layout.key() != need.key():
            t = self.convert(t, need)
        if not bdims:
            return Slots(t.dtype, target, t.values)
        index = {offs: k for k, offs in enumerate(need.offsets())}
        out = []
        for offs in target.offsets():
            src = tuple(0 if d in bdims else o for d, o in enumerate(offs))
            out.append(t.values[index[src]])
        return Slots(t.dtype, target, tuple(out))

    def shared(self, dt: T.DType, count: int, reserve: bool = True) -> SSAValue:
        """A shared array of `count` elements; counted against the block's limit now, or
        (`reserve=False`) by the caller later (tile/row_staging.py counts its arrays last,
        so that it can give them up)."""
        if reserve:
            nbytes = count * max(1, dt.bits // 8)
            self.reserve_shared(nbytes)
            self.shared_bytes += nbytes
        ty = SharedArrayType(ir_type(dt), StringAttr(str(count)), StringAttr("shared"))
        return self.b.alloc(ops.FixedArrayOp(ty))

    def staging(self, dt: T.DType, count: int, role: str) -> SSAValue:
        """The kernel's shared array for a product operand of this size and `role` ("a",
        "b", "wa", "wb"), or a layout copy ("copy", `stage`): every product (copy) reuses
        it, which is safe because each writes its operands only after a barrier that
        every earlier product's (copy's) reads come before."""
        key = (dt.name, count, role)
        if key not in self._staging:
            self._staging[key] = self.shared(dt, count)
        return self._staging[key]

    def barrier(self) -> None:
        self.uses_barriers = True
        self.barriers += 1
        if self.consumer_threads is None:
            self.b.emit(ops.BarrierOp("block"))
        else:  # the consumer threads' barrier (the producer never meets it)
            named_barriers.sync(self, self.const(named_barriers.CONSUMERS, T.u32))

    # -- reductions ---------------------------------------------------------------------

    def identity(self, kind: str, dt: T.DType) -> SSAValue:
        f, s, u = _IDENTITY[kind]
        if dt.is_float:
            return self.const(f, dt)
        if kind == "max":
            return self.const(-(1 << (dt.bits - 1)) if dt.is_signed else 0, dt)
        if kind == "min":
            return self.const((1 << (dt.bits - 1)) - 1 if dt.is_signed else (1 << dt.bits) - 1,
                              dt)
        return self.const(s if dt.is_signed else u, dt)

    def reduce(self, kind: str, t: Slots, axis: int, keepdims: bool) -> Slots:
        """`sum`/`max`/`min` of `t` along `axis` (kind "add", "max", "min")."""
        dt = reduce_dtype(t.dtype)
        wide = self.cast(t, dt)

        def combine(a: tuple[SSAValue, ...], b: tuple[SSAValue, ...]) -> tuple[SSAValue, ...]:
            return (self.b.value(ops.BinaryOp(kind, a[0], b[0])),)

        (res,) = self.reduce_multi([wide], axis, keepdims, combine, (self.identity(kind, dt),))
        return self.cast(res, t.dtype)

    def arg_reduce(self, kind: str, t: Slots, index: Slots, axis: int, keepdims: bool
                   ) -> tuple[Slots, Slots]:
        """(max or min, the index of its first occurrence) along `axis`: pairs reduced
        with ties going to the smaller index, so the result is NumPy's argmax/argmin."""
        dt = reduce_dtype(t.dtype)
        wide = self.cast(t, dt)
        better = "gt" if kind == "max" else "lt"

        def op(kind: str, x: SSAValue, y: SSAValue) -> SSAValue:
            return self.b.value(ops.BinaryOp(kind, x, y))

        def combine(a: tuple[SSAValue, ...], b: tuple[SSAValue, ...]) -> tuple[SSAValue, ...]:
            # commutative, so every lane of a butterfly ends with the same pair
            wins = self.b.value(ops.CompareOp(better, b[0], a[0]))
            tie = self.b.value(ops.CompareOp("eq", b[0], a[0]))
            first = self.b.value(ops.CompareOp("lt", b[1], a[1]))
            take = op("or", wins, op("and", tie, first))
            if dt.is_float:  # NumPy: the first NaN wins
                a_nan = self.b.value(ops.CompareOp("ne", a[0], a[0]))
                b_nan = self.b.value(ops.CompareOp("ne", b[0], b[0]))
                some = op("or", a_nan, b_nan)
                nan_take = op("and", b_nan, op("or", op("xor", a_nan, self.const(True, T.bool_)),
                                              first))
                take = self.b.value(ops.SelectOp(some, nan_take, take))
            return (self.b.value(ops.SelectOp(take, b[0], a[0])),
                    self.b.value(ops.SelectOp(take, b[1], a[1])))

        ident = (self.identity(kind, dt), self.const((1 << 31) - 1, T.i32))
        value, idx = self.reduce_multi([wide, index], axis, keepdims, combine, ident)
        return self.cast(value, t.dtype), idx

    def reduce_multi(self, tiles: list[Slots], axis: int, keepdims: bool,
                     combine: Callable[[tuple[SSAValue, ...], tuple[SSAValue, ...]],
                                       tuple[SSAValue, ...]],
                     identity: tuple[SSAValue, ...]) -> list[Slots]:
        """Reduce tuples of tiles of one layout along `axis` with an associative and
        commutative `combine`; replicas along the axis contribute `identity`."""
        layout = tiles[0].layout
        out_layout = layout.squeeze(axis) if keepdims else layout.drop(axis)
        # 1. in the thread: slots that differ only along `axis`
        groups: dict[tuple[int, ...], tuple[SSAValue, ...]] = {}
        for k, offs in enumerate(layout.offsets()):
            key = offs[:axis] + offs[axis + 1:]
            v = tuple(t.values[k] for t in tiles)
            groups[key] = v if key not in groups else combine(groups[key], v)
        keys = list(groups)
        part = [groups[k] for k in keys]
        valid = self.valid_along(layout, axis) if layout.shape[axis] > 1 else None
        if valid is not None:  # replicas along the axis hold copies: they add nothing
            part = [tuple(self.b.value(ops.SelectOp(valid, x, i)) for x, i in zip(v, identity,
                                                                                 strict=True))
                    for v in part]
        m = layout.dims[axis] if layout.shape[axis] > 1 else None
        types = [x.type for x in identity]
        # 2. across the lanes of the axis: butterfly, every lane ends with the group's total
        if m is not None and m.tpw > 1:
            mask = self.const(FULL_MASK, T.u32)
            for k in range(m.tpw.bit_length() - 1):
                lanes = self.const(1 << (m.lane_shift + k), T.i32)
                part = [combine(v, tuple(self.b.value(ops.WarpOp("shuffle_xor", [x, lanes, mask],
                                                                 ty))
                                         for x, ty in zip(v, types, strict=True)))
                        for v in part]
        # 3. across the warps of the axis: one shared cell per (warp, kept element)
        if m is not None and m.wpc > 1:
            kept_layout = layout.drop(axis)
            count = 1
            for e in kept_layout.shape:
                count *= e
            smems = [self.shared(t.dtype, count * m.wpc) for t in tiles]
            _, warp = self._thread()
            wd64 = self.b.cast(self._field(warp, m.warp_shift, m.wpc), T.i64)
            kept_coords = {offs: c for offs, c in zip(kept_layout.offsets(),
                                                       self.coords(kept_layout), strict=True)}
            cells = [self.linear(kept_coords[k], kept_layout.shape, T.i64) for k in keys]
            self.barrier()
            base = self.b.value(ops.BinaryOp("mul", wd64, self.const(count, T.i64)))
            for cell, v in zip(cells, part, strict=True):
                at = self.b.value(ops.BinaryOp("add", base, cell))
                for smem, x in zip(smems, v, strict=True):
                    self.b.emit(ops.StoreOp(smem, [at], x, 0, False, True))
            self.barrier()
            total = []
            for cell in cells:
                acc: tuple[SSAValue, ...] | None = None
                for w in range(m.wpc):
                    at = self.b.value(ops.BinaryOp("add", cell, self.const(w * count, T.i64)))
                    v = tuple(self.b.value(ops.LoadOp(smem, [at], ty, 0, False, True))
                              for smem, ty in zip(smems, types, strict=True))
                    acc = v if acc is None else combine(acc, v)
                assert acc is not None
                total.append(acc)
            part = total
        # the result's slots, in its layout's order
        by_key = dict(zip(keys, part, strict=True))
        out = []
        for c, t in enumerate(tiles):
            res = []
            for offs in out_layout.offsets():
                k = offs[:axis] + offs[axis + 1:] if keepdims else offs
                res.append(by_key[k][c])
            out.append(Slots(t.dtype, out_layout, tuple(res)))
        return out

    # -- scans ------------------------------------------------------------------------

    def cumsum(self, t: Slots, axis: int) -> Slots:
        """Inclusive prefix sums along `axis`, in `t`'s layout.

        In the thread, the `spt` side-by-side elements are scanned; across the lanes of the
        axis, a Hillis-Steele scan of the thread totals (`shuffle_up`); across its warps,
        warp totals through shared memory between barriers; across repetitions, the
        earlier repetitions' totals. Where the layout wraps (threads past the tile hold
        copies), the scan is segmented at the tile's length, so every copy computes the
        same prefix as the element's owner.
        """
        layout, n = t.layout, t.shape[axis]
        dt = reduce_dtype(t.dtype)
        wide = self.cast(t, dt)
        if n == 1:
            return t
        m = layout.dims[axis]
        seg = n // m.spt  # the tile's length in lane positions along the axis
        lane, warp = self._thread()
        lane_d = self._field(lane, m.lane_shift, m.tpw)
        warp_d = self._field(warp, m.warp_shift, m.wpc)
        mask = self.const(FULL_MASK, T.u32)
        zero = self.const(0.0 if dt.is_float else 0, dt)
        seg_lanes = min(seg, m.tpw)  # lanes of one segment within a warp
        lane_in_seg = (lane_d if seg_lanes == m.tpw else
                       self._entry(ops.BinaryOp("and", lane_d, self.const(seg_lanes - 1, T.i32))))

        def add(x: SSAValue, y: SSAValue) -> SSAValue:
            return self.b.value(ops.BinaryOp("add", x, y))

        def up(v: SSAValue, delta: int) -> SSAValue:
            """The value `delta` lane positions back along the axis, in this segment; 0 else."""
            got = self.b.value(ops.WarpOp("shuffle_up", [v, self.const(delta << m.lane_shift,
                                                                        T.i32), mask],
                                          ir_type(dt)))
            ok = self.b.value(ops.CompareOp("ge", lane_in_seg, self.const(delta, T.i32)))
            return self.b.value(ops.SelectOp(ok, got, zero))

        # the slots by (other-dimension offsets, repetition): their `spt` values in order
        runs: dict[tuple[tuple[int, ...], int], list[int]] = {}
        for k, offs in enumerate(layout.offsets()):
            key = offs[:axis] + offs[axis + 1:]
            runs.setdefault((key, offs[axis] // m.span), []).append(k)
        local: dict[tuple[tuple[int, ...], int], list[SSAValue]] = {}
        totals: dict[tuple[tuple[int, ...], int], SSAValue] = {}
        for rk, slots in runs.items():
            acc: list[SSAValue] = []
            for k in slots:
                acc.append(wide.values[k] if not acc else add(acc[-1], wide.values[k]))
            local[rk], totals[rk] = acc, acc[-1]
        # across lanes: inclusive scan of the thread totals, then the exclusive prefix
        incl = dict(totals)
        for step in range(seg_lanes.bit_length() - 1):
            incl = {rk: add(v, up(v, 1 << step)) for rk, v in incl.items()}
        excl = {rk: up(v, 1) for rk, v in incl.items()} if seg_lanes > 1 else \
            {rk: zero for rk in incl}
        # each run's total over the warp: the last lane of the axis holds it
        last = self.b.value(ops.BinaryOp("or", lane, self.const(
            (seg_lanes - 1) << m.lane_shift, T.i32)))
        warp_total = {rk: (self.b.value(ops.WarpOp("shuffle", [v, last, mask], ir_type(dt)))
                           if seg_lanes > 1 else v) for rk, v in incl.items()}
        seg_warps = max(1, seg // m.tpw)  # warps of one segment
        span_total = warp_total
        if m.wpc > 1 and seg_warps > 1:
            kept = layout.drop(axis)
            kept_coords = {offs: c for offs, c in zip(kept.offsets(), self.coords(kept),
                                                       strict=True)}
            keys = list(warp_total)
            reps = 1 + max(r for _, r in keys)
            count = 1
            for e in kept.shape:
                count *= e
            cells = count * reps
            smem = self.shared(dt, cells * m.wpc)
            at = {rk: add(self.b.value(ops.BinaryOp("mul", self.linear(
                kept_coords[rk[0]], kept.shape, T.i64), self.const(reps, T.i64))),
                self.const(rk[1], T.i64)) for rk in keys}
            wd64 = self.b.cast(warp_d, T.i64)
            mine = self.b.value(ops.BinaryOp("mul", wd64, self.const(cells, T.i64)))
            self.barrier()
            for rk in keys:
                self.b.emit(ops.StoreOp(smem, [add(mine, at[rk])], warp_total[rk], 0, False,
                                        True))
            self.barrier()
            seg_start = self.b.value(ops.BinaryOp("and", warp_d, self.const(
                ~(seg_warps - 1) & 0x7FFFFFFF, T.i32)))
            span_total = {}
            for rk in keys:
                before, whole = zero, None
                for w in range(m.wpc):
                    v = self.b.value(ops.LoadOp(smem, [add(self.const(w * cells, T.i64),
                                                           at[rk])], ir_type(dt), 0, False, True))
                    wc = self.const(w, T.i32)
                    lower = self.b.value(ops.CompareOp("lt", wc, warp_d))
                    same = self.b.value(ops.CompareOp("ge", wc, seg_start))
                    take = self.b.value(ops.BinaryOp("and", lower, same))
                    before = add(before, self.b.value(ops.SelectOp(take, v, zero)))
                    whole = v if whole is None else add(whole, v)
                excl[rk] = add(excl[rk], before)
                assert whole is not None
                span_total[rk] = whole
        # across repetitions (the tile longer than one pass: no segments then)
        carry: dict[tuple[tuple[int, ...], int], SSAValue] = {}
        for rk in sorted(runs, key=lambda x: x[1]):
            key, r = rk
            carry[rk] = zero if r == 0 else add(carry[(key, r - 1)], span_total[(key, r - 1)])
        out = list(wide.values)
        for rk, slots in runs.items():
            shift = add(excl[rk], carry[rk])
            for k, v in zip(slots, local[rk], strict=True):
                out[k] = add(v, shift)
        return self.cast(Slots(dt, layout, tuple(out)), t.dtype)


def _offsets_fit(offsets: list[int], extent: int) -> bool:
    """Whether every intermediate of `compare_offsets` over a base in [0, extent) and
    these static offsets fits in i32 (and no coordinate overflowed)."""
    return min(offsets) - extent >= -(1 << 31) and max(offsets) + extent <= (1 << 31) - 2
