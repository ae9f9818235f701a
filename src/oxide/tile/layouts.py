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
  instruction large (`mma_accumulator`); where the kernel reduces a product's rows
  (softmax over scores), every product splits only M over the warps (`rows_only`), so
  those reductions stay in one warp and `p @ v` takes `p` from registers;
- mma operands: `tile/mma_lower.py` stages them through padded shared memory and reads
  fragments with ldmatrix, but an A operand made outside the product's block (a
  loop-invariant `q`) is converted once, where it is made, to the A-fragment layout
  (`mma_operand_a`) and stays in registers (for mma.sync; wgmma reads an A from registers,
  its `rs` form, where a product computed it so, as attention's `p`); and a
  `permute((1, 0))` whose only use is
  the B operand is folded into the product (`b_transposed`: the untransposed tile is
  staged and read as the instruction's column-major B, no transpose through shared
  memory), and on wgmma one of 16-bit floats whose only use is the A operand
  (`a_transposed`: the (K, M) tile staged as it is, read as an MN-major A);
- where two layouts must agree it inserts a `tile.convert` (through shared memory,
  `tile/lower.py`): a variable (an `if`'s merge, a loop's carry) keeps the layout of its
  first write, but one that a later write computes from a product of its shape
  (`acc = tile.mma(a, b, acc)`, `o = o * s + p @ v`, also inside an @ox.tile.func)
  takes the accumulator layout, the first value converted once (a constant, made
  again: nothing moves), so the product's registers stay put across iterations; one
  computed from a product's row reduction (an online softmax's running maximum and sum)
  takes that reduction's layout likewise; and
  `cumsum` scans a blocked layout;
- a value broadcast into another layout that is computed from scalars alone (`arange`,
  `full`, arithmetic and comparisons of them: a causal mask beside a product's scores)
  is computed again in the layout it is needed in, rather than moved (`_remade`).

What it guarantees: `tile/to_simt.py` finds every tile type's layout set, and the
operands of each elementwise op in one layout (`check_layouts` checks it where the IR
is verified).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from xdsl.ir import Block, Operation, SSAValue

from oxide.ir.tile_ops import TileType, TileVarType, kind_of, make
from oxide.tile.builder import TileBuilder
from oxide.tile.layout import (
    Layout,
    blocked,
    broadcast_source,
    mma_accumulator,
    mma_operand_a,
    wgmma_accumulator,
)
from oxide.tile.mma_choice import (
    a_is_transposed,
    b_is_transposed,
    column_groups,
    engine_of,
    row_blocks,
    swapped,
)

# the most A-operand elements a thread keeps in registers across a loop (64 registers)
_MAX_A_IN_REGISTERS = 128


def layout_of(v: SSAValue) -> Layout:
    t = v.type
    if isinstance(t, TileVarType):
        t = t.tile
    assert isinstance(t, TileType) and t.layout.data is not None, f"no layout yet: {v}"
    return t.layout.data


def set_layout(v: SSAValue, layout: Layout) -> None:
    """Gives `v` its layout (a value's type is fixed when the op is made; this pass is
    where the tile dialect's types are completed)."""
    t = v.type
    if isinstance(t, TileVarType):
        v._type = TileVarType(TileType.of(t.tile.dims, t.tile.dtype, layout))  # noqa: SLF001
    else:
        assert isinstance(t, TileType)
        v._type = TileType.of(t.dims, t.dtype, layout)  # noqa: SLF001


_ELEMENTWISE = ("binary", "unary", "math", "cast", "where", "broadcast", "compare", "convert")
# what `LayoutPass._remade` computes again in another layout rather than moving it: tiles
# made from scalars alone, and cheap elementwise ops over them
_LAYOUT_FREE = ("arange", "full", "splat", "from_scalar", "index")
_CHEAP_ELEMENTWISE = ("binary", "unary", "cast", "compare", "where")


def _sources(v: SSAValue) -> Iterator[Operation]:
    """The ops other than elementwise ones that `v` is computed from through elementwise
    ops only (each once)."""
    seen: set[int] = set()
    stack = [v]
    while stack:
        owner = stack.pop().owner
        if id(owner) in seen or not isinstance(owner, Operation):
            continue
        seen.add(id(owner))
        if kind_of(owner) in _ELEMENTWISE:
            stack.extend(owner.operands)
        else:
            yield owner


def _products_feeding(v: SSAValue) -> Iterator[Operation]:
    """The `tile.mma` ops `v` is computed from through elementwise ops only."""
    return (op for op in _sources(v) if kind_of(op) == "mma")


def _reduces_product_rows(op: Operation) -> bool:
    """Whether `op` reduces the rows of a 2-d tile computed elementwise from a product
    (`tile.max(q @ k.T, 1)`, softmax over scores): then every product of the kernel puts
    whole rows in one warp (`mma_warps`'s rows_only), so such reductions stay within a
    warp (shuffles, no shared memory) and a product's result, rows in one warp, can be
    the next product's A operand as it is (`p @ v`, FlashAttention's arrangement)."""
    if kind_of(op) not in ("reduce", "arg_reduce") or op.param("axis") != 1:
        return False
    return any(True for _ in _products_feeding(op.operands[0]))


def _computed_from_product(v: SSAValue) -> bool:
    """Whether `v` is computed elementwise from a product of its own shape."""
    t = v.type
    assert isinstance(t, TileType)
    return any(isinstance(rt := p.results[0].type, TileType) and rt.dims == t.dims
               for p in _products_feeding(v))


def _row_statistic_of(v: SSAValue) -> tuple[int, ...] | None:
    """The (M, N) shape of the product whose rows `v` (an (M, 1) tile) is computed from,
    through elementwise ops and a `keepdims` reduction over axis 1 (the running maximum
    and sum of an online softmax); None where it is not."""
    t = v.type
    if not (isinstance(t, TileType) and len(t.dims) == 2 and t.dims[1] == 1):
        return None
    for op in _sources(v):
        if _reduces_product_rows(op) and op.param("keepdims"):  # type: ignore[attr-defined]
            source = op.operands[0].type
            assert isinstance(source, TileType)
            return source.dims
    return None


def _own_accumulator(shape: tuple[int, ...], num_warps: int) -> bool:
    """Whether a wgmma product of result `shape` (not computed transposed) has wgmma's
    accumulator layout rather than mma.sync's: two m64 instructions a warp group, or the
    warp groups splitting the columns."""
    m, n = shape
    return row_blocks(m, num_warps) > 1 or column_groups(m, n, num_warps) > 0


def _has_layout(v: SSAValue) -> bool:
    t = v.type
    if isinstance(t, TileVarType):
        t = t.tile
    return isinstance(t, TileType) and t.layout.data is not None


class LayoutPass:
    """Assigns layouts to one kernel's tile ops (see the module docstring)."""

    def __init__(self, b: TileBuilder, num_warps: int, vector: int,
                 tensor_cores: bool = True) -> None:
        self.b = b
        self.num_warps = num_warps
        self.vector = vector
        # the target has tensor cores (the GPU); the CPU runs every product as an FMA loop
        self.tensor_cores = tensor_cores
        self._in_registers: dict[tuple[SSAValue, Layout], SSAValue] = {}
        self._remade_values: dict[tuple[SSAValue, Layout, Block | None], SSAValue] = {}
        # the products' warps take whole rows (`mma_warps`): set by `run`
        self.rows_only = False
        # the variables some write computes from a product of their shape: set by `run`
        self.carries_products: set[SSAValue] = set()
        # the result shapes of the products computed transposed, and of those whose warp
        # groups issue several m64 instructions a k step or split the columns
        # (tile/mma_choice.py)
        self.swapped_shapes: set[tuple[int, ...]] = set()
        self.stacked_shapes: set[tuple[int, ...]] = set()

    def blocked(self, shape: tuple[int, ...]) -> Layout:
        return blocked(shape, self.num_warps, self.vector)

    def mma(self, shape: tuple[int, ...], otherwise: Layout) -> Layout:
        if not self.tensor_cores:
            return otherwise
        if shape in self.swapped_shapes:  # wgmma's accumulator of the transposed product
            return wgmma_accumulator(shape[::-1], self.num_warps).transposed()  # type: ignore[arg-type]
        if shape in self.stacked_shapes:  # two m64 instructions a group, or columns split
            return wgmma_accumulator(shape, self.num_warps)  # type: ignore[arg-type]
        return mma_accumulator(shape, self.num_warps, self.rows_only) or otherwise

    def run(self) -> None:
        # wgmma's accumulator is the mma layout with every warp on whole rows
        self.rows_only = any(_reduces_product_rows(op) or (kind_of(op) == "mma" and
                                                           engine_of(op) == "wgmma")
                             for op in self.b.tile_ops)
        self.swapped_shapes = {tuple(op.results[0].type.dims) for op in self.b.tile_ops  # type: ignore[attr-defined]
                               if kind_of(op) == "mma" and swapped(op)}
        self.stacked_shapes = {tuple(op.results[0].type.dims) for op in self.b.tile_ops  # type: ignore[attr-defined]
                               if kind_of(op) == "mma" and engine_of(op) == "wgmma"
                               and not swapped(op)
                               and _own_accumulator(op.results[0].type.dims, self.num_warps)}  # type: ignore[attr-defined]
        self.carries_products = {op.operands[0] for op in self.b.tile_ops
                                 if kind_of(op) == "var_write"
                                 and _computed_from_product(op.operands[1])}
        # the variables some write computes from a product's row reduction: the product's
        # shape (their layout is the reduction's, so no iteration moves them)
        self.carries_row_statistics: dict[SSAValue, tuple[int, ...]] = {}
        for op in self.b.tile_ops:
            if kind_of(op) == "var_write":
                shape = _row_statistic_of(op.operands[1])
                if shape is not None:
                    self.carries_row_statistics.setdefault(op.operands[0], shape)
        for op in list(self.b.tile_ops):
            kind = kind_of(op)
            assert kind is not None
            rule: Callable[[Operation], Layout | None] = getattr(self, f"_{kind}")
            layout = rule(op)
            if layout is not None:
                for r in op.results:
                    set_layout(r, layout)

    def _convert_before(self, op: Operation, index: int, target: Layout,
                        to: str | None = None) -> None:
        """Operand `index` of `op` converted to `target` first, where its layout differs
        (`to='mma'`: the accumulator layout, a constant made again rather than moved)."""
        v = op.operands[index]
        if layout_of(v).key() == target.key():
            return
        t = v.type
        assert isinstance(t, TileType)
        conv = make("convert", [v], [TileType.of(t.dims, t.dtype, target)],
                    to=to or target)
        self.b.insert_tile_op(conv, op)
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

    _splat = _arange = _load = _permute = _reshape = _from_scalar = _cat = _blocked_result

    def _slices(self, op: Operation) -> None:
        for r in op.results:  # results of several shapes: each its default layout
            t = r.type
            assert isinstance(t, TileType)
            set_layout(r, self.blocked(t.dims))

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
        layout = self.blocked(shape)
        for c in op.operands[1:]:
            t = c.type
            assert isinstance(t, TileType)
            if t.dims == shape:
                layout = layout_of(c)
                break
        self._remake_operand(op, layout)
        return layout

    def _remake_operand(self, op: Operation, layout: Layout) -> None:
        """Where the broadcast value is in another layout than the one it broadcasts from
        for free (the result's, its broadcast dimensions squeezed) and is cheap to compute
        there (`_remade`: a causal mask's `arange`s and comparisons beside a product's
        scores), it is computed again in that layout rather than moved through shared
        memory."""
        x = op.operands[0]
        t = x.type
        if not (isinstance(t, TileType) and t.dims and len(t.dims) == len(layout.shape)):
            return
        need = broadcast_source(layout, t.dims)
        if layout_of(x).key() != need.key():
            remade = self._remade(x, need, op)
            if remade is not None:
                op.operands[0] = remade

    def _remade(self, v: SSAValue, target: Layout, before: Operation) -> SSAValue | None:
        """`v` computed again in `target`, by copies of the ops that make it inserted
        before `before`, where they are all cheap and layout-free: `arange`, `full`,
        `splat`, 0-d scalars, and elementwise arithmetic, `expand` and `broadcast` of
        such; None where something else (a load, a reduction) is among them."""
        t = v.type
        assert isinstance(t, TileType)
        if not t.dims or layout_of(v).key() == target.key():
            return v
        if t.dims != target.shape:
            return None
        # a copy made for a use in another block (a loop's body) need not dominate this
        # one (after the loop): copies are shared within a block only
        key = (v, target, before.parent_block())
        if key in self._remade_values:
            return self._remade_values[key]
        owner = v.owner
        kind = kind_of(owner)
        assert isinstance(owner, Operation)
        operands: list[SSAValue | None]
        if kind in _LAYOUT_FREE:
            operands = list(owner.operands)  # 0-d tiles or none
        elif kind in _CHEAP_ELEMENTWISE:
            operands = [self._remade(x, target, before) for x in owner.operands]
        elif kind == "expand":
            inner = target  # the new dimensions dropped: the same slots, in order
            for d in sorted(owner.param("axes"), reverse=True):
                inner = inner.drop(d)
            if inner.slots != target.slots:
                return None
            operands = [self._remade(owner.operands[0], inner, before)]
        elif kind == "broadcast":
            x = owner.operands[0]
            xt = x.type
            assert isinstance(xt, TileType)
            if not xt.dims:  # a scalar, in every thread
                operands = list(owner.operands)
            elif len(xt.dims) != len(target.shape):
                return None
            else:
                operands = [self._remade(x, broadcast_source(target, xt.dims), before),
                            *owner.operands[1:]]
        else:
            return None
        if any(o is None for o in operands):
            return None
        copy = owner.clone()
        for i, o in enumerate(operands):
            copy.operands[i] = o
        set_layout(copy.results[0], target)
        self.b.insert_tile_op(copy, before)
        self._remade_values[key] = copy.results[0]
        return copy.results[0]

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

    def _atomic(self, op: Operation) -> Layout:
        """The updated values' layout (the frontend put them in one)."""
        return layout_of(op.operands[1])

    def _squeeze(self, op: Operation) -> Layout:
        """The operand's layout without its dimensions (all of extent 1): the same slot."""
        layout = layout_of(op.operands[0])
        while layout.shape:
            layout = layout.drop(0)
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
        shape = self._shape(op)
        a = op.operands[0]
        at = a.type
        assert isinstance(at, TileType)
        m, k = at.dims
        result = self.mma(shape, layout_of(op.operands[2]))
        if engine_of(op) == "wgmma":
            # a K-major B, staged as it is; an A computed in the A-fragment layout (a
            # product's result, attention's `p`) goes from registers (the `rs` form), but
            # a loop-invariant one stays staged: in registers it measured no faster, and
            # gave wrong results beside a pipelined ring (see tile/wgmma_lower.py); a
            # 16-bit `x.permute((1, 0))` A, staged as x is and read MN-major
            if b_is_transposed(op):
                self._fold_transpose(op, 1)
            if a_is_transposed(op):
                self._fold_transpose(op, 0)
        elif engine_of(op) == "mma.sync":
            if b_is_transposed(op):  # the engine choice read the same condition
                self._fold_transpose(op, 1)
            target = mma_operand_a((m, k), result.dims[0].wpc, self.num_warps)
            defined = a.owner
            if (isinstance(defined, Operation) and defined.parent_block() is not op.parent_block()
                    and target.slots <= _MAX_A_IN_REGISTERS):
                op.operands[0] = self._converted_after(defined, a, target)
        return result

    def _fold_transpose(self, op: Operation, index: int) -> None:
        """`mma(a, permute(x, (1, 0)), acc)`, the permute used only here: `mma(a, x, acc)`
        with `b_transposed` (its lowering stages x and reads it as the column-major B);
        for the A operand (`index` 0, wgmma only), `mma(x, b, acc)` with `a_transposed`,
        x read as the MN-major A. The caller checked `b_is_transposed` /
        `a_is_transposed`."""
        permute = op.operands[index].owner
        assert isinstance(permute, Operation)
        op.operands[index] = permute.operands[0]
        op.set_param("b_transposed" if index else "a_transposed", True)  # type: ignore[attr-defined]
        self.b.tile_ops.remove(permute)
        permute.detach()
        permute.erase()

    def _converted_after(self, defined: Operation, v: SSAValue, target: Layout) -> SSAValue:
        """`v` converted to `target` just after the op that makes it (once, however many
        products use it)."""
        key = (v, target)
        if key not in self._in_registers:
            t = v.type
            assert isinstance(t, TileType)
            conv = make("convert", [v], [TileType.of(t.dims, t.dtype, target)], to=target)
            self.b.insert_tile_op(conv, defined, after=True)
            self._in_registers[key] = conv.results[0]
        return self._in_registers[key]

    def _nothing(self, op: Operation) -> None:
        return None

    _store = _extract = _var = _nothing

    def _var_write(self, op: Operation) -> None:
        var, value = op.operands
        if not _has_layout(var):  # the first write fixes the variable's layout
            t = value.type
            assert isinstance(t, TileType)
            if var in self.carries_products:
                self._convert_before(op, 1, self.mma(t.dims, layout_of(value)), to="mma")
            elif var in self.carries_row_statistics:
                product = self.mma(self.carries_row_statistics[var], layout_of(value))
                if product.shape != t.dims:  # the accumulator layout: its rows' slice
                    self._convert_before(op, 1, product.squeeze(1), to="mma")
            set_layout(var, layout_of(op.operands[1]))
        else:
            self._convert_before(op, 1, layout_of(var))

    def _var_read(self, op: Operation) -> Layout:
        return layout_of(op.operands[0])


def check_layouts(tile_ops: list[Operation]) -> None:
    """What the pass guarantees, checked (where the IR is verified, `OXIDE_VERIFY_IR`:
    the test suite): every tile value and variable has a layout of its shape, the
    operands of each elementwise op share one, and a variable is written in its own."""
    for op in tile_ops:
        for v in (*op.operands, *op.results):
            t = v.type
            if isinstance(t, TileVarType):
                t = t.tile
            if isinstance(t, TileType):
                layout = t.layout.data
                if layout is None or layout.shape != t.dims:
                    raise AssertionError(f"{op.name}: a tile without a layout of its shape")
        kind = kind_of(op)
        agree = {"binary": op.operands, "compare": op.operands, "where": op.operands,
                 "math": op.operands, "var_write": op.operands,
                 "atomic": op.operands[1:1 + (op.param("values") or 0)]}.get(kind or "", ())
        if len({layout_of(v).key() for v in agree}) > 1:
            raise AssertionError(f"{op.name}: operands in different layouts")

