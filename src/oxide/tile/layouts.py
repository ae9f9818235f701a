"""The layout pass: every tile value of a tile kernel gets its layout (`tile/layout.py`).

It runs over the tile dialect (`ir/tile_ops.py`) in the order the frontend built the
ops, so each op's operands already have their layouts, and gives each result one:

- tiles made from nothing (`full`, `arange`, `load`, `splat`) and the results of data
  movement (`permute`, `reshape`, `broadcast` with no operand of its shape) take the
  kernel's default blocked layout: `vector` contiguous elements per thread along the
  innermost dimension (128-bit accesses where the launch specialized the rows on it);
- elementwise ops keep their operands' layout (a `broadcast` takes the first candidate
  operand's of the result's shape, so the common case moves nothing);
- reductions take the slice layout of their operand (`Layout.squeeze`/`drop`): the
  reduced dimension's bits become replicas, so broadcasting back moves nothing;
- `mma` results (and `full(layout='mma')` accumulators, `convert(to='mma')` loop
  carries) take the tensor-core accumulator layout where the tile is at least one
  instruction large (`mma_accumulator`); the operands' own layouts are what
  `tile/mma_lower.py` stages through padded shared memory;
- where two layouts must agree it inserts a `tile.convert` (through shared memory,
  `tile/lower.py`): a variable (an `if`'s merge, a loop's carry) keeps the layout of its
  first write, and `cumsum` scans a blocked layout.

What it guarantees: `tile/to_simt.py` finds every tile type's layout set, and the
operands of each elementwise op in one layout.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Operation, SSAValue

from oxide.ir.tile_ops import TileType, TileVarType, kind_of, make
from oxide.tile.builder import TileBuilder
from oxide.tile.layout import Layout, blocked, mma_accumulator


def layout_of(v: SSAValue) -> Layout:
    t = v.type
    if isinstance(t, TileVarType):
        t = t.tile
    assert isinstance(t, TileType) and t.layout.data is not None, f"no layout yet: {v}"
    return t.layout.data


def _set(v: SSAValue, layout: Layout) -> None:
    """Gives `v` its layout (a value's type is fixed when the op is made; this pass is
    where the tile dialect's types are completed)."""
    t = v.type
    if isinstance(t, TileVarType):
        v._type = TileVarType(TileType.of(t.tile.dims, t.tile.dtype, layout))  # noqa: SLF001
    else:
        assert isinstance(t, TileType)
        v._type = TileType.of(t.dims, t.dtype, layout)  # noqa: SLF001


def _has_layout(v: SSAValue) -> bool:
    t = v.type
    if isinstance(t, TileVarType):
        t = t.tile
    return isinstance(t, TileType) and t.layout.data is not None


class LayoutPass:
    """Assigns layouts to one kernel's tile ops (see the module docstring)."""

    def __init__(self, b: TileBuilder, num_warps: int, vector: int) -> None:
        self.b = b
        self.num_warps = num_warps
        self.vector = vector

    def blocked(self, shape: tuple[int, ...]) -> Layout:
        return blocked(shape, self.num_warps, self.vector)

    def mma(self, shape: tuple[int, ...], otherwise: Layout) -> Layout:
        return mma_accumulator(shape, self.num_warps) or otherwise

    def run(self) -> None:
        for op in list(self.b.tile_ops):
            kind = kind_of(op)
            assert kind is not None
            rule: Callable[[Operation], Layout | None] = getattr(self, f"_{kind}")
            layout = rule(op)
            if layout is not None:
                for r in op.results:
                    _set(r, layout)

    def _convert_before(self, op: Operation, index: int, target: Layout) -> None:
        """Operand `index` of `op` converted to `target` first, where its layout differs."""
        v = op.operands[index]
        if layout_of(v).key() == target.key():
            return
        t = v.type
        assert isinstance(t, TileType)
        conv = make("convert", [v], [TileType.of(t.dims, t.dtype, target)], to=target)
        self.b.insert_tile_op_before(conv, op)
        op.operands[index] = conv.results[0]

    # -- the rules, one per op: the result's layout -----------------------------------

    def _shape(self, op: Operation) -> tuple[int, ...]:
        t = op.results[0].type
        assert isinstance(t, TileType)
        return t.dims

    def _full(self, op: Operation) -> Layout:
        shape = self._shape(op)
        if op.param("layout") == "mma":
            return self.mma(shape, self.blocked(shape))
        return self.blocked(shape)

    def _blocked_result(self, op: Operation) -> Layout:
        return self.blocked(self._shape(op))

    _splat = _arange = _load = _permute = _reshape = _from_scalar = _blocked_result

    def _same_as_first(self, op: Operation) -> Layout:
        return layout_of(op.operands[0])

    _index = _cast = _unary = _math = _narrow_compare = _same_as_first

    def _binary(self, op: Operation) -> Layout:
        a, b = (layout_of(v) for v in op.operands)
        assert a.key() == b.key(), "elementwise operands in one layout (broadcast first)"
        return a

    _compare = _binary

    def _where(self, op: Operation) -> Layout:
        return layout_of(op.operands[1])

    def _broadcast(self, op: Operation) -> Layout:
        shape = self._shape(op)
        for c in op.operands[1:]:
            t = c.type
            assert isinstance(t, TileType)
            if t.dims == shape:
                return layout_of(c)
        return self.blocked(shape)

    def _convert(self, op: Operation) -> Layout:
        to = op.param("to")
        source = layout_of(op.operands[0])
        if to == "blocked":
            return self.blocked(source.shape)
        if to == "mma":
            return self.mma(source.shape, source)
        assert isinstance(to, Layout)
        return to

    def _expand(self, op: Operation) -> Layout:
        layout = layout_of(op.operands[0])
        for d in op.param("axes"):
            layout = layout.insert(d)
        return layout

    def _reduce(self, op: Operation) -> Layout:
        source, axis = layout_of(op.operands[0]), op.param("axis")
        return source.squeeze(axis) if op.param("keepdims") else source.drop(axis)

    _arg_reduce = _reduce

    def _cumsum(self, op: Operation) -> Layout:
        source = layout_of(op.operands[0])
        if not source.is_blocked:  # the scan walks blocked layouts (an mma result)
            self._convert_before(op, 0, self.blocked(source.shape))
        return layout_of(op.operands[0])

    def _mma(self, op: Operation) -> Layout:
        return self.mma(self._shape(op), layout_of(op.operands[2]))

    def _nothing(self, op: Operation) -> None:
        return None

    _store = _extract = _var = _nothing

    def _var_write(self, op: Operation) -> None:
        var, value = op.operands
        if not _has_layout(var):  # the first write fixes the variable's layout
            _set(var, layout_of(value))
        else:
            self._convert_before(op, 1, layout_of(var))

    def _var_read(self, op: Operation) -> Layout:
        return layout_of(op.operands[0])
