"""The `oxide` dialect: SIMT kernels as a control-flow graph of typed operations.

One kernel is one `oxide.func` whose region is a CFG (blocks, `oxide.br`,
`oxide.cond_br`, `oxide.return`), so early returns, `break` and `continue` need
no structured rewriting. Arithmetic ops take their meaning from the operand
types (signed/unsigned ints, floats). Array, witness and bounds ops keep the
safety facts explicit, so passes check them on the IR rather than the AST.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from xdsl.dialects.builtin import (
    ArrayAttr,
    FunctionType,
    IntAttr,
    IntegerType,
    StringAttr,
    SymbolNameConstraint,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    successor_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from oxide.ir.types import ArrayType, SharedArrayType, SlotType, ThreadIndexType, is_fp8_type

BINARY_OPS = ("add", "sub", "mul", "div", "floordiv", "mod", "pow", "and", "or",
              "xor", "shl", "shr", "min", "max")
UNARY_OPS = ("neg", "not", "invert", "abs")
PREDICATES = ("lt", "le", "gt", "ge", "eq", "ne")
# oxide.hopper kinds (their first part) that the whole warp executes together
WARP_COLLECTIVE_KINDS = ("mma", "ldmatrix", "stmatrix", "elect_sync", "setmaxnreg", "wgmma")


def build(op: IRDLOperation, operands: Sequence[SSAValue] = (),
          result_types: Sequence[Attribute] = (),
          properties: dict[str, Attribute] | None = None) -> None:
    """Initialize `op` as IRDLOperation's builder does, without its generic argument
    plumbing: about 7 us an op instead of 16 on the dev VM, and an attention kernel's
    compile builds ~5,000 of these ops. Only for ops whose definition has no regions,
    successors, optional operands or segment-size options, built from SSA values
    (`FAST_BUILT`; tests/test_ir_build.py checks each definition allows it)."""
    Operation.__init__(op, operands=operands, result_types=result_types,
                       properties=properties or {})


@functools.lru_cache(maxsize=512)
def name_attr(text: str) -> StringAttr:
    """One StringAttr per op kind or predicate ("add", "lt"...), shared: attributes are
    immutable, and a compile builds thousands of ops."""
    return StringAttr(text)


_I1 = IntegerType(1)

# the ops `build` initializes
FAST_BUILT = ("ConstantOp", "BinaryOp", "UnaryOp", "CompareOp", "CastOp", "SelectOp", "MathOp",
              "SlotOp", "SlotReadOp", "SlotWriteOp")


def _site(op: Operation) -> int:
    return op.properties["site"].data  # type: ignore[attr-defined]


def _no_storage_operands(op: Operation) -> None:
    """8-bit floats are storage types: the frontends refuse arithmetic on them where it
    is written, and codegen would otherwise compute on their bits as on an `i8`."""
    if any(is_fp8_type(v.type) for v in op.operands):
        raise VerifyException(f"{op.name} on an 8-bit float: convert it to a wider float first")


@irdl_op_definition
class FuncOp(IRDLOperation):
    """A kernel: parameters are the flattened block arguments of the entry block."""

    name = "oxide.func"
    sym_name = prop_def(SymbolNameConstraint())
    function_type = prop_def(FunctionType)
    body = region_def()

    def __init__(self, name: str, arg_types: Sequence[Attribute]) -> None:
        block = Block(arg_types=arg_types)
        super().__init__(
            properties={"sym_name": StringAttr(name),
                        "function_type": FunctionType.from_lists(list(arg_types), [])},
            regions=[Region(block)])


@irdl_op_definition
class ConstantOp(IRDLOperation):
    name = "oxide.constant"
    value = prop_def()
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, value: Attribute, type_: Attribute) -> None:
        build(self, (), (type_,), {"value": value})


@irdl_op_definition
class BinaryOp(IRDLOperation):
    """`oxide.binary "add"`: both operands and the result have one type."""

    name = "oxide.binary"
    kind = prop_def(StringAttr)
    site = opt_prop_def(IntAttr)  # integer floordiv/mod: where a zero divisor is reported
    lhs = operand_def()
    rhs = operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, kind: str, lhs: SSAValue, rhs: SSAValue) -> None:
        build(self, (lhs, rhs), (lhs.type,), {"kind": name_attr(kind)})

    def verify_(self) -> None:
        if self.kind.data not in BINARY_OPS:
            raise VerifyException(f"unknown binary op {self.kind.data}")
        if self.lhs.type != self.rhs.type or self.result.type != self.lhs.type:
            raise VerifyException("oxide.binary operands and result must share one type")
        _no_storage_operands(self)


@irdl_op_definition
class UnaryOp(IRDLOperation):
    name = "oxide.unary"
    kind = prop_def(StringAttr)
    operand = operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, kind: str, x: SSAValue) -> None:
        build(self, (x,), (x.type,), {"kind": name_attr(kind)})

    def verify_(self) -> None:
        _no_storage_operands(self)


@irdl_op_definition
class CompareOp(IRDLOperation):
    name = "oxide.cmp"
    predicate = prop_def(StringAttr)
    lhs = operand_def()
    rhs = operand_def()
    result = result_def(IntegerType(1))
    traits = traits_def(Pure())

    def __init__(self, pred: str, lhs: SSAValue, rhs: SSAValue) -> None:
        build(self, (lhs, rhs), (_I1,), {"predicate": name_attr(pred)})

    def verify_(self) -> None:
        if self.lhs.type != self.rhs.type:
            raise VerifyException("oxide.cmp operands must share one type")
        _no_storage_operands(self)


@irdl_op_definition
class CastOp(IRDLOperation):
    name = "oxide.cast"
    operand = operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, x: SSAValue, to: Attribute) -> None:
        build(self, (x,), (to,))


@irdl_op_definition
class SelectOp(IRDLOperation):
    name = "oxide.select"
    cond = operand_def(IntegerType(1))
    if_true = operand_def()
    if_false = operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> None:
        build(self, (cond, a, b), (a.type,))


@irdl_op_definition
class ArraySelectOp(IRDLOperation):
    """`a if c else b` for two array parameters of one type: the array (pointer, shape,
    strides) of one of them. Writes through it count as writes to both (the safety passes)."""

    name = "oxide.array_select"
    cond = operand_def(IntegerType(1))
    if_true = operand_def()
    if_false = operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> None:
        super().__init__(operands=[cond, a, b], result_types=[a.type])

    def verify_(self) -> None:
        if self.if_true.type != self.if_false.type:
            raise VerifyException("array_select: both arrays must have one type")


@irdl_op_definition
class MathOp(IRDLOperation):
    """A math function (`sqrt`, `atan2`, `fma`...) on floats of one type."""

    name = "oxide.math"
    fn = prop_def(StringAttr)
    args = var_operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, fn: str, args: Sequence[SSAValue], result_type: Attribute) -> None:
        build(self, tuple(args), (result_type,), {"fn": name_attr(fn)})

    def verify_(self) -> None:
        _no_storage_operands(self)


@irdl_op_definition
class RegisterOp(IRDLOperation):
    """A hardware register: `tid.x`, `ctaid.y`, `ntid.z`, `nctaid.x`, `laneid`, `warpid`."""

    name = "oxide.register"
    reg = prop_def(StringAttr)
    result = result_def()

    def __init__(self, reg: str, type_: Attribute) -> None:
        super().__init__(properties={"reg": StringAttr(reg)}, result_types=[type_])


@irdl_op_definition
class ThreadIndexOp(IRDLOperation):
    """Creates the launch-unique witness `thread.index_1d()` / `thread.index_2d()`."""

    name = "oxide.thread_index"
    rank = prop_def(IntAttr)
    result = result_def(ThreadIndexType)

    def __init__(self, rank: int) -> None:
        super().__init__(properties={"rank": IntAttr(rank)},
                         result_types=[ThreadIndexType(IntAttr(rank))])


@irdl_op_definition
class IndexComponentOp(IRDLOperation):
    """A witness's coordinate as a plain i64 (dimension 0 is the row, the last the column)."""

    name = "oxide.index_component"
    dim = prop_def(IntAttr)
    witness = operand_def(ThreadIndexType)
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, witness: SSAValue, dim: int, type_: Attribute) -> None:
        super().__init__(operands=[witness], properties={"dim": IntAttr(dim)},
                         result_types=[type_])


@irdl_op_definition
class InBoundsOp(IRDLOperation):
    """`w in arr`: every coordinate of the witness is below the array's extent."""

    name = "oxide.in_bounds"
    witness = operand_def(ThreadIndexType)
    array = operand_def(ArrayType)
    result = result_def(IntegerType(1))
    traits = traits_def(Pure())

    def __init__(self, witness: SSAValue, array: SSAValue) -> None:
        super().__init__(operands=[witness, array], result_types=[IntegerType(1)])

    def verify_(self) -> None:
        wr = self.witness.type.rank.data  # type: ignore[attr-defined]
        ar = self.array.type.rank.data  # type: ignore[attr-defined]
        if wr != ar:
            raise VerifyException(f"a rank-{wr} witness cannot guard a rank-{ar} array")


@irdl_op_definition
class ArrayDimOp(IRDLOperation):
    """An array's extent along one dimension (`len(a)`, `a.shape[d]`)."""

    name = "oxide.array_dim"
    dim = prop_def(IntAttr)
    array = operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, array: SSAValue, dim: int, type_: Attribute) -> None:
        super().__init__(operands=[array], properties={"dim": IntAttr(dim)},
                         result_types=[type_])


@irdl_op_definition
class LoadOp(IRDLOperation):
    """Reads one element. `checked=1` bounds-checks it, reporting failures as `site`.

    `unsafe=1` marks a read inside `ox.unsafe()`: the DisjointSlice read rule
    (passes/disjoint_reads.py) leaves it alone.
    """

    name = "oxide.load"
    array = operand_def()
    indices = var_operand_def()
    site = prop_def(IntAttr)
    checked = prop_def(IntAttr)
    unsafe = opt_prop_def(IntAttr)
    result = result_def()

    def __init__(self, array: SSAValue, indices: Sequence[SSAValue], elem: Attribute,
                 site: int, checked: bool, unsafe: bool = False) -> None:
        props = {"site": IntAttr(site), "checked": IntAttr(int(checked))}
        if unsafe:
            props["unsafe"] = IntAttr(1)
        super().__init__(operands=[array, list(indices)], properties=props,
                         result_types=[elem])


@irdl_op_definition
class StoreOp(IRDLOperation):
    """Writes one element.

    Outside `ox.unsafe()` (`unsafe=0`), a write to a DisjointSlice indexes with a
    witness and must be dominated by its bounds guard: the safety pass checks it.
    """

    name = "oxide.store"
    array = operand_def()
    value = operand_def()
    indices = var_operand_def()
    site = prop_def(IntAttr)
    checked = prop_def(IntAttr)
    unsafe = prop_def(IntAttr)

    def __init__(self, array: SSAValue, indices: Sequence[SSAValue], value: SSAValue,
                 site: int, checked: bool, unsafe: bool = False) -> None:
        super().__init__(operands=[array, value, list(indices)],
                         properties={"site": IntAttr(site), "checked": IntAttr(int(checked)),
                                     "unsafe": IntAttr(int(unsafe))})


@irdl_op_definition
class MaskedLoadOp(IRDLOperation):
    """Reads `len(res)` consecutive elements of the innermost dimension, from `indices` on,
    as one `align`-byte access (a 128-bit `ld.global.v4.b32`, say), where `mask` holds;
    where it does not, nothing is read (the elements may be outside the array) and every
    result is `other`. No branch is taken on the GPU (a predicated load).

    Only the tile lowering emits it: its mask is the bounds test of the first element,
    and a vector of several elements only where the array's rows are `align`-aligned and
    their length is a multiple of the vector's (`ArrayAlignedOp` and an extent test), so
    a vector is wholly inside the array or wholly outside. Tile loads are checked by the
    tile frontend (DisjointSlice rules), so the safety passes skip them, as they skip its
    unsafe-marked LoadOps."""

    name = "oxide.masked_load"
    array = operand_def()
    mask = operand_def(IntegerType(1))
    other = operand_def()
    indices = var_operand_def()
    align = prop_def(IntAttr)
    res = var_result_def()

    def __init__(self, array: SSAValue, indices: Sequence[SSAValue], mask: SSAValue,
                 other: SSAValue, count: int, align: int) -> None:
        super().__init__(operands=[array, mask, other, list(indices)],
                         properties={"align": IntAttr(align)},
                         result_types=[[other.type] * count])


@irdl_op_definition
class MaskedStoreOp(IRDLOperation):
    """Writes `values` to consecutive elements of the innermost dimension, from `indices`
    on, as one `align`-byte access, where `mask` holds (a predicated store on the GPU);
    emitted by the tile lowering under the same tests as `MaskedLoadOp`."""

    name = "oxide.masked_store"
    array = operand_def()
    mask = operand_def(IntegerType(1))
    values = var_operand_def()
    indices = var_operand_def()
    align = prop_def(IntAttr)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(self, array: SSAValue, indices: Sequence[SSAValue], mask: SSAValue,
                 values: Sequence[SSAValue], align: int) -> None:
        super().__init__(operands=[array, mask, list(values), list(indices)],
                         properties={"align": IntAttr(align)})


@irdl_op_definition
class VectorStoreOp(IRDLOperation):
    """Writes `values` to consecutive elements of the innermost dimension, from `indices`
    on, as one `align`-byte vector access; unchecked: the tile lowering emits it for
    shared memory it lays out itself (mma operands), aligned and in range by construction."""

    name = "oxide.vstore"
    array = operand_def()
    values = var_operand_def()
    indices = var_operand_def()
    align = prop_def(IntAttr)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(self, array: SSAValue, indices: Sequence[SSAValue],
                 values: Sequence[SSAValue], align: int) -> None:
        super().__init__(operands=[array, list(values), list(indices)],
                         properties={"align": IntAttr(align)})


@irdl_op_definition
class AsyncCopyOp(IRDLOperation):
    """Copies 16 bytes of a row of the global array `src`, from `src_indices` on, to the
    shared array `dst` at element `dst_index`, asynchronously (`cp.async.cg`, sm_80+):
    where `inside` does not hold nothing is read and the 16 bytes become zeros; where
    `enabled` does not hold the thread copies nothing (a replica of another thread's
    chunk). The copy lands only after a `cp_async.wait` the issuing thread runs.

    Only the tile lowering emits it (`tile/operand_rings.py`: a product operand staged
    straight into its ring of shared buffers), where the launch specialized on rows of
    16-byte vectors (`ArrayType.vectors`), so a chunk is aligned and wholly inside the
    array or wholly outside it, and `dst_index` is in range and 16-byte aligned by
    construction."""

    name = "oxide.cp_async"
    src = operand_def()
    inside = operand_def(IntegerType(1))
    enabled = operand_def(IntegerType(1))
    dst = operand_def()
    dst_index = operand_def()
    src_indices = var_operand_def()

    def __init__(self, src: SSAValue, src_indices: Sequence[SSAValue], inside: SSAValue,
                 enabled: SSAValue, dst: SSAValue, dst_index: SSAValue) -> None:
        super().__init__(operands=[src, inside, enabled, dst, dst_index, list(src_indices)])


@irdl_op_definition
class ArrayAlignedOp(IRDLOperation):
    """Whether every row of `array` starts at a multiple of `bytes`: its data pointer and
    the pitch of each outer dimension are multiples of `bytes`, and its innermost stride
    is 1. Where it holds, `bytes / element size` consecutive elements of a row starting
    at a multiple of that count form one aligned vector."""

    name = "oxide.array_aligned"
    bytes = prop_def(IntAttr)
    array = operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, array: SSAValue, nbytes: int, type_: Attribute) -> None:
        super().__init__(operands=[array], properties={"bytes": IntAttr(nbytes)},
                         result_types=[type_])


@irdl_op_definition
class AtomicOp(IRDLOperation):
    """Read-modify-write on one element; returns the old value. `checked=1` (the default)
    bounds-checks it, reporting failures as `site`; a caller that has proven the element
    inside the array (a tile atomic guards each element by its tile's bounds) passes
    `checked=False`, and the update is emitted alone."""

    name = "oxide.atomic"
    kind = prop_def(StringAttr)
    scope = prop_def(StringAttr)
    array = operand_def()
    value = operand_def()
    compare = var_operand_def()
    indices = var_operand_def()
    site = prop_def(IntAttr)
    checked = prop_def(IntAttr)
    result = result_def()
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(self, kind: str, scope: str, array: SSAValue, indices: Sequence[SSAValue],
                 value: SSAValue, compare: SSAValue | None, site: int,
                 checked: bool = True) -> None:
        super().__init__(
            operands=[array, value, [compare] if compare is not None else [], list(indices)],
            properties={"kind": StringAttr(kind), "scope": StringAttr(scope),
                        "site": IntAttr(site), "checked": IntAttr(int(checked))},
            result_types=[value.type])


@irdl_op_definition
class FixedArrayOp(IRDLOperation):
    """Declares a block-shared, thread-local or constant array of fixed shape.

    A constant array (space "constant") is a module global the host fills: `sym`
    is its symbol. Dynamic shared memory has shape "?" (its size is the launch's).
    """

    name = "oxide.fixed_array"
    sym = opt_prop_def(StringAttr)
    result = result_def(SharedArrayType)

    def __init__(self, type_: SharedArrayType, sym: str | None = None) -> None:
        props = {"sym": StringAttr(sym)} if sym is not None else {}
        super().__init__(result_types=[type_], properties=props)


@irdl_op_definition
class SlotOp(IRDLOperation):
    """Declares a mutable local variable."""

    name = "oxide.slot"
    result = result_def(SlotType)

    def __init__(self, elem: Attribute) -> None:
        build(self, (), (SlotType(elem),))


@irdl_op_definition
class SlotReadOp(IRDLOperation):
    name = "oxide.slot_read"
    slot = operand_def(SlotType)
    result = result_def()

    def __init__(self, slot: SSAValue) -> None:
        build(self, (slot,), (slot.type.elem,))  # type: ignore[attr-defined]


@irdl_op_definition
class SlotWriteOp(IRDLOperation):
    name = "oxide.slot_write"
    slot = operand_def(SlotType)
    value = operand_def()

    def __init__(self, slot: SSAValue, value: SSAValue) -> None:
        build(self, (slot, value))

    def verify_(self) -> None:
        if self.slot.type.elem != self.value.type:  # type: ignore[attr-defined]
            raise VerifyException("slot_write value type differs from the slot's")


@irdl_op_definition
class BarrierOp(IRDLOperation):
    """`sync_threads` (kind "block"), `sync_warp` ("warp") or a fence ("fence.gl"...).

    `after_exit` (set by passes/uniformity.py): a block barrier some threads of the block
    may reach after others returned early. PTX's `.aligned` barrier (what
    `__syncthreads()` is) assumes every thread of the block evaluated the conditions
    around it alike, so such a barrier is the plain `barrier.sync`, which waits for the
    threads that have not exited."""

    name = "oxide.barrier"
    kind = prop_def(StringAttr)
    after_exit = opt_prop_def(IntAttr)

    def __init__(self, kind: str) -> None:
        super().__init__(properties={"kind": StringAttr(kind)})

    def is_after_exit(self) -> bool:
        return self.after_exit is not None and bool(self.after_exit.data)


@irdl_op_definition
class WarpOp(IRDLOperation):
    """A warp collective: shuffles, votes, reductions, match_any."""

    name = "oxide.warp"
    kind = prop_def(StringAttr)
    args = var_operand_def()
    result = result_def()

    def __init__(self, kind: str, args: Sequence[SSAValue], result_type: Attribute) -> None:
        super().__init__(operands=[list(args)], properties={"kind": StringAttr(kind)},
                         result_types=[result_type])


@irdl_op_definition
class AssertOp(IRDLOperation):
    """Records an assertion failure (`site`) when `cond` is false; execution continues."""

    name = "oxide.assert"
    cond = operand_def(IntegerType(1))
    site = prop_def(IntAttr)

    def __init__(self, cond: SSAValue, site: int) -> None:
        super().__init__(operands=[cond], properties={"site": IntAttr(site)})


@irdl_op_definition
class PrintOp(IRDLOperation):
    """`print(...)`: a printf format and its arguments."""

    name = "oxide.print"
    format = prop_def(StringAttr)
    args = var_operand_def()

    def __init__(self, fmt: str, args: Sequence[SSAValue]) -> None:
        super().__init__(operands=[list(args)], properties={"format": StringAttr(fmt)})


@irdl_op_definition
class BranchOp(IRDLOperation):
    """A jump. `unroll` marks the back edge of a loop to unroll fully (small constant range)."""

    name = "oxide.br"
    dest = successor_def()
    unroll = opt_prop_def(IntAttr)
    traits = traits_def(IsTerminator())

    def __init__(self, dest: Block, unroll: bool = False) -> None:
        super().__init__(successors=[dest], properties={"unroll": IntAttr(1)} if unroll else {})


@irdl_op_definition
class CondBranchOp(IRDLOperation):
    name = "oxide.cond_br"
    cond = operand_def(IntegerType(1))
    then_block = successor_def()
    else_block = successor_def()
    traits = traits_def(IsTerminator())

    def __init__(self, cond: SSAValue, then_block: Block, else_block: Block) -> None:
        super().__init__(operands=[cond], successors=[then_block, else_block])


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """Leaves the kernel. `early`: a `return` statement the user wrote (the block barriers
    after it do not wait for a thread that took it, passes/uniformity.py), rather than the
    end of the kernel's body."""

    name = "oxide.return"
    early = opt_prop_def(IntAttr)
    traits = traits_def(IsTerminator())

    def __init__(self, early: bool = False) -> None:
        super().__init__(properties={"early": IntAttr(1)} if early else {})

    def is_early(self) -> bool:
        return self.early is not None and bool(self.early.data)


@irdl_op_definition
class UnreachableOp(IRDLOperation):
    name = "oxide.unreachable"
    traits = traits_def(IsTerminator())

    def __init__(self) -> None:
        super().__init__()


@irdl_op_definition
class InlineAsmOp(IRDLOperation):
    """`ox.asm(...)`: inline PTX with typed operands. `constraints` is LLVM's string
    (outputs first, `=r`/`=l`/`=f`/`=d`/`=h`); `side_effects=1` keeps it from being
    removed or moved (LLVM's `asm sideeffect`). Its results vary per thread."""

    name = "oxide.inline_asm"
    template = prop_def(StringAttr)
    constraints = prop_def(StringAttr)
    side_effects = prop_def(IntAttr)
    args = var_operand_def()
    res = var_result_def()

    def __init__(self, template: str, constraints: str, args: Sequence[SSAValue],
                 result_types: Sequence[Attribute], side_effects: bool) -> None:
        super().__init__(operands=[list(args)], result_types=[list(result_types)],
                         properties={"template": StringAttr(template),
                                     "constraints": StringAttr(constraints),
                                     "side_effects": IntAttr(int(side_effects))})

    def varies_per_thread(self) -> bool:
        """Inline PTX can read anything (`%laneid`, memory): its results vary."""
        return True


@irdl_op_definition
class HopperOp(IRDLOperation):
    """A tensor-core, mbarrier, fence, cluster or warp-group primitive (codegen/hopper.py).

    `kind` names it (`mma.m16n8k16.bf16`, `ldmatrix.x4.trans`, `mbarrier.init`...);
    `array` and `indices` name the shared-memory element it works on, if any (bounds-
    checked as `site` when that is set); `args` are its run-time operands and `imm` its
    compile-time integers (setmaxnreg's register count)."""

    name = "oxide.hopper"
    kind = prop_def(StringAttr)
    imm = prop_def(ArrayAttr)
    site = opt_prop_def(IntAttr)
    array = var_operand_def()
    indices = var_operand_def()
    args = var_operand_def()
    res = var_result_def()
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(self, kind: str, args: Sequence[SSAValue], result_types: Sequence[Attribute],
                 array: SSAValue | None = None, indices: Sequence[SSAValue] = (),
                 imm: Sequence[int] = (), site: int | None = None) -> None:
        props: dict[str, Attribute] = {"kind": StringAttr(kind),
                                       "imm": ArrayAttr([IntAttr(i) for i in imm])}
        if site is not None:
            props["site"] = IntAttr(site)
        super().__init__(operands=[[array] if array is not None else [], list(indices),
                                   list(args)],
                         result_types=[list(result_types)], properties=props)

    def varies_per_thread(self) -> bool:
        """Whether its results may differ between the threads of a block: all but the
        cluster registers (`sreg.*`), which every thread of a block reads alike."""
        return not self.kind.data.startswith("sreg.")

    def is_warp_collective(self) -> bool:
        """Whether every lane of the warp must execute it together (`.sync.aligned`);
        wgmma's descriptor is plain per-thread arithmetic."""
        kind = self.kind.data
        return kind.split(".")[0] in WARP_COLLECTIVE_KINDS and kind != "wgmma.desc"


@irdl_op_definition
class CallOp(IRDLOperation):
    """A call of a recursive @ox.func specialization (frontend/device_functions.py), which
    is its own `oxide.func` named `callee`; non-recursive @ox.funcs are inlined instead.

    `args` are scalars and arrays (codegen passes an array as pointer, extents and strides,
    as the kernel ABI does, plus the error record). `results` are the function's return
    value flattened (none, one scalar, or a tuple's scalars in order). `thread` is the
    caller's `tid.x`: the callee may read registers and writable memory, so its results
    vary per thread, and every pass that derives a value's uniformity from its operands
    (passes/uniformity.py, passes/shared_races.py) sees that through this operand without
    knowing calls. Codegen ignores it."""

    name = "oxide.call"
    callee = prop_def(StringAttr)
    thread = operand_def()
    args = var_operand_def()
    res = var_result_def()

    def __init__(self, callee: str, thread: SSAValue, args: Sequence[SSAValue],
                 result_types: Sequence[Attribute]) -> None:
        super().__init__(operands=[thread, list(args)], result_types=[list(result_types)],
                         properties={"callee": StringAttr(callee)})

    def varies_per_thread(self) -> bool:
        return True


@irdl_op_definition
class FuncReturnOp(IRDLOperation):
    """Returns from a device function (`oxide.func` of a recursive @ox.func) with its
    flattened return value; kernels end in `oxide.return`."""

    name = "oxide.func_return"
    values = var_operand_def()
    traits = traits_def(IsTerminator())

    def __init__(self, values: Sequence[SSAValue] = ()) -> None:
        super().__init__(operands=[list(values)])


Oxide = Dialect(
    "oxide",
    [FuncOp, ConstantOp, BinaryOp, UnaryOp, CompareOp, CastOp, SelectOp, ArraySelectOp, MathOp,
     RegisterOp, ThreadIndexOp, IndexComponentOp, InBoundsOp, ArrayDimOp, LoadOp,
     StoreOp, MaskedLoadOp, MaskedStoreOp, VectorStoreOp, AsyncCopyOp, ArrayAlignedOp, AtomicOp,
     FixedArrayOp, SlotOp,
     SlotReadOp, SlotWriteOp, BarrierOp, WarpOp,
     AssertOp, PrintOp, BranchOp, CondBranchOp, ReturnOp, UnreachableOp, InlineAsmOp,
     HopperOp, CallOp, FuncReturnOp],
    [],
)

__all__ = [name for name in dir() if name.endswith("Op")] + ["Oxide"]
