"""oxide.ir.ops `build`: the ops it initializes directly are ones IRDL's generic builder
would build the same way (no regions, successors, optional or segmented operands), and
an op built either way has the same operands, results, properties and attributes."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import IntegerAttr, IntegerType, f32, i32
from xdsl.ir import Block
from xdsl.irdl import IRDLOperation
from xdsl.irdl.operations import OptionalDef, VariadicDef

from oxide import types as T
from oxide.ir import ops
from oxide.ir.tile_ops import OP_CLASSES, TileType, make
from oxide.ir.types import SlotType


@pytest.mark.parametrize("cls", [getattr(ops, name) for name in ops.FAST_BUILT]
                         + list(OP_CLASSES.values()), ids=lambda cls: cls.__name__)
def test_the_definition_allows_the_direct_build(cls: type[IRDLOperation]) -> None:
    op_def = cls.get_irdl_definition()
    assert not op_def.regions and not op_def.successors and not op_def.options
    defs = [d for _, d in (*op_def.operands, *op_def.results)]
    assert not any(isinstance(d, OptionalDef) for d in defs)
    # one variadic group of each at most, and no segment sizes (checked above): the
    # operands and the results are flat lists
    assert sum(isinstance(d, VariadicDef) for _, d in op_def.operands) <= 1
    assert sum(isinstance(d, VariadicDef) for _, d in op_def.results) <= 1


def _samples() -> list[IRDLOperation]:
    block = Block(arg_types=[i32, i32, IntegerType(1), f32, SlotType(i32)])
    a, b, c, x, slot = block.args
    return [ops.ConstantOp(IntegerAttr(3, i32), i32), ops.BinaryOp("mul", a, b), ops.UnaryOp("neg", a), ops.CompareOp("lt", a, b),
            ops.CastOp(a, f32), ops.SelectOp(c, a, b), ops.MathOp("fma", [x, x, x], f32),
            ops.SlotOp(i32), ops.SlotReadOp(slot), ops.SlotWriteOp(slot, a),
            make("binary", [a, b], [TileType.of((4,), T.i32)], kind="add")]


@pytest.mark.parametrize("op", _samples(), ids=lambda op: op.name)
def test_built_as_irdl_builds_it(op: IRDLOperation) -> None:
    fields = {"operands": list(op.operands), "result_types": [r.type for r in op.results],
              "properties": dict(op.properties)}
    generic = IRDLOperation.__init__
    again = type(op).__new__(type(op))
    op_def = type(op).get_irdl_definition()

    def grouped(values: list, defs: list) -> list:  # a variadic group as IRDL takes it
        return [values] if [isinstance(d, VariadicDef) for _, d in defs] == [True] else values

    generic(again, operands=grouped(fields["operands"], op_def.operands),
            result_types=grouped(fields["result_types"], op_def.results),
            properties=fields["properties"])
    assert list(again.operands) == fields["operands"]
    assert [r.type for r in again.results] == fields["result_types"]
    assert again.properties == op.properties and again.attributes == op.attributes
    op.verify()
