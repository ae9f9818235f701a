"""Recognizing the canonical matmul K loop in a tile kernel's source.

A tile kernel whose whole body is

    i, j = tile.bid(0), tile.bid(1)              # or two statements, or bid(1), bid(0)
    acc = tile.zeros((BM, BN), f32)
    for k in range(tile.num_tiles(a, 1, BK)):
        acc = tile.mma(tile.load(a, (i, k), (BM, BK)), tile.load(b, (k, j), (BK, BN)), acc)
    tile.store(c, (i, j), acc.astype(bf16))

(the loads may be named first, `x = tile.load(...)`; the product may be written `acc =
acc + x @ y`, `acc = x @ y + acc` or `acc += x @ y`, which the frontend makes that same
`tile.mma`: docs/language.md) computes C = A @ B tile by tile, and nothing else.
`match` finds that shape and names its parts (`MatmulPattern`); `oxide/kernels/
tile_matmul.py` then runs such a kernel on sm_90 with the warp-specialized wgmma GEMM,
where its arguments allow.

What it assumes: the kernel is a `KernelBase` whose `source.tree` is its FunctionDef and
whose `scope` resolves its free names. What it guarantees: a match only where every
name resolves to the tile operation and dtype it must be, the arrays and tile sizes are
parameters (`a`, `b`: Slice[bf16, 2]; `c`: DisjointSlice[bf16, 2]; sizes Const[int] or
integer literals), and the statements are exactly those above; anything else is None,
and the kernel compiles and runs as written. The pattern fixes the kernel's meaning for
any grid: block (bid 0, bid 1) computes its BM x BN tile of C over all of A's columns.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from oxide import types as T
from oxide.tile import lang as tl

Size = int | str  # an integer literal, or the name of a Const[int] parameter


@dataclass(frozen=True)
class MatmulPattern:
    """The parts of a recognized K loop: parameter positions of A, B and C, the tile
    sizes, and which grid axis walks C's rows (0 when `i = tile.bid(0)`)."""

    a: int
    b: int
    c: int
    bm: Size
    bn: Size
    bk: Size
    row_axis: int

    def sizes(self, params: tuple[Any, ...], args: tuple[Any, ...]) -> tuple[Any, Any, Any]:
        """(BM, BN, BK) for a launch's `args`."""
        names = [p.name for p in params]

        def value(s: Size) -> Any:
            return s if isinstance(s, int) else args[names.index(s)]

        return value(self.bm), value(self.bn), value(self.bk)


class _NoMatch(Exception):
    pass


def match(kernel: Any) -> MatmulPattern | None:
    """The kernel's `MatmulPattern`, or None if its body is anything else."""
    try:
        return _Matcher(kernel).run()
    except _NoMatch:
        return None


class _Matcher:
    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.params = {p.name: (i, p.annotation) for i, p in enumerate(kernel.params)}

    # -- helpers ---------------------------------------------------------------------------

    def resolve(self, node: ast.expr) -> Any:
        """The Python object a name or attribute chain names (not a parameter or local)."""
        if isinstance(node, ast.Name):
            if node.id in self.params:
                raise _NoMatch
            found, obj = self.kernel.scope.lookup(node.id)
            if not found:
                raise _NoMatch
            return obj
        if isinstance(node, ast.Attribute):
            return getattr(self.resolve(node.value), node.attr, None)
        raise _NoMatch

    def call_of(self, node: ast.expr, fn: Any, nargs: int) -> list[ast.expr]:
        """The arguments of `node`, a call of tile operation `fn` with `nargs` positional
        arguments and no keywords."""
        if (not isinstance(node, ast.Call) or node.keywords or len(node.args) != nargs
                or self.resolve(node.func) is not fn):
            raise _NoMatch
        return list(node.args)

    @staticmethod
    def name(node: ast.expr) -> str:
        if not isinstance(node, ast.Name):
            raise _NoMatch
        return node.id

    @staticmethod
    def const_int(node: ast.expr) -> int:
        if not (isinstance(node, ast.Constant) and type(node.value) is int):
            raise _NoMatch
        return node.value

    def size(self, node: ast.expr) -> Size:
        if isinstance(node, ast.Constant):
            return self.const_int(node)
        name = self.name(node)
        if name not in self.params or not isinstance(self.params[name][1], T.ConstType):
            raise _NoMatch
        return name

    def array(self, node: ast.expr, access: str) -> int:
        name = self.name(node)
        if name not in self.params:
            raise _NoMatch
        index, ann = self.params[name]
        if not (isinstance(ann, T.ArrayType) and ann.access == access and ann.rank == 2
                and ann.ranked and ann.dtype == T.bf16):
            raise _NoMatch
        return index

    @staticmethod
    def pair(node: ast.expr) -> tuple[ast.expr, ast.expr]:
        if not (isinstance(node, ast.Tuple) and len(node.elts) == 2):
            raise _NoMatch
        return node.elts[0], node.elts[1]

    # -- the body --------------------------------------------------------------------------

    def run(self) -> MatmulPattern:
        body = list(self.kernel.source.tree.body)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        bids, body = self.block_indices(body)
        if len(body) != 3:
            raise _NoMatch
        acc, bm, bn = self.zeros(body[0])
        loop = body[1]
        if not isinstance(loop, ast.For) or loop.orelse:
            raise _NoMatch
        k = self.name(loop.target)
        (bound,) = self.call_of(loop.iter, range, 1)
        a_arg, axis, bk_node = self.call_of(bound, tl.num_tiles, 3)
        if self.const_int(axis) != 1:
            raise _NoMatch
        bk = self.size(bk_node)
        if k == acc or k in self.params:
            raise _NoMatch
        a_node, b_node = self.product(loop.body, acc, {k, *bids, *self.params})
        i, j = self.load(a_node, (None, k), (bm, bk))
        i2, j2 = self.load(b_node, (k, None), (bk, bn))
        a, b = i[1], j2[1]
        if self.name(a_arg) != self.name(a_node.args[0]):
            raise _NoMatch
        rows, cols = i[0], j2[0]
        c = self.store(body[2], acc, rows, cols)
        if {rows, cols} != set(bids) or rows == cols or k in bids:
            raise _NoMatch
        return MatmulPattern(a, b, c, bm, bn, bk, bids[rows])

    def block_indices(self, body: list[ast.stmt]) -> tuple[dict[str, int], list[ast.stmt]]:
        """{name: grid axis} of `i, j = tile.bid(0), tile.bid(1)` (one statement or two)."""
        bids: dict[str, int] = {}
        while body and len(bids) < 2:
            stmt = body[0]
            if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
                raise _NoMatch
            target, value = stmt.targets[0], stmt.value
            pairs = (list(zip(self.pair(target), self.pair(value), strict=True))
                     if isinstance(target, ast.Tuple) else [(target, value)])
            for t, v in pairs:
                (axis,) = self.call_of(v, tl.bid, 1)
                bids[self.name(t)] = self.const_int(axis)
            body = body[1:]
        if len(bids) != 2 or sorted(bids.values()) != [0, 1]:
            raise _NoMatch
        return bids, body

    def zeros(self, stmt: ast.stmt) -> tuple[str, Size, Size]:
        """`acc = tile.zeros((BM, BN), f32)`: (acc, BM, BN)."""
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
            raise _NoMatch
        shape, dtype = self.call_of(stmt.value, tl.zeros, 2)
        if self.resolve(dtype) is not T.f32:
            raise _NoMatch
        bm, bn = self.pair(shape)
        return self.name(stmt.targets[0]), self.size(bm), self.size(bn)

    def product(self, body: list[ast.stmt], acc: str, taken: set[str]
                ) -> tuple[ast.Call, ast.Call]:
        """The two loads `acc = tile.mma(x, y, acc)` multiplies (named first, or inline)."""
        named: dict[str, ast.expr] = {}
        for stmt in body[:-1]:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
                raise _NoMatch
            name = self.name(stmt.targets[0])
            if name == acc or name in named or name in taken:  # rebinding i, j, k or a
                raise _NoMatch
            named[name] = stmt.value
        x, y = self.accumulate(body[-1] if body else None, acc)
        used = [n for n in (x, y) if isinstance(n, ast.Name)]
        if sorted(n.id for n in used) != sorted(named):  # each named load used once
            raise _NoMatch
        x = named.get(x.id, x) if isinstance(x, ast.Name) else x
        y = named.get(y.id, y) if isinstance(y, ast.Name) else y
        if not (isinstance(x, ast.Call) and isinstance(y, ast.Call)):
            raise _NoMatch
        return x, y

    def accumulate(self, last: ast.stmt | None, acc: str) -> tuple[ast.expr, ast.expr]:
        """The operands `x`, `y` of `acc = tile.mma(x, y, acc)`, `acc = acc + x @ y`, `acc =
        x @ y + acc` or `acc += x @ y`: one computation (the frontend makes the three
        spellings with `@` that one tile.mma)."""
        if isinstance(last, ast.AugAssign) and isinstance(last.op, ast.Add) \
                and self.name(last.target) == acc:
            return self.matmult(last.value)
        if not (isinstance(last, ast.Assign) and len(last.targets) == 1
                and self.name(last.targets[0]) == acc):
            raise _NoMatch
        value = last.value
        if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
            for other, product in ((value.left, value.right), (value.right, value.left)):
                if isinstance(other, ast.Name) and other.id == acc:
                    return self.matmult(product)
            raise _NoMatch
        x, y, acc_arg = self.call_of(value, tl.mma, 3)
        if self.name(acc_arg) != acc:
            raise _NoMatch
        return x, y

    @staticmethod
    def matmult(node: ast.expr) -> tuple[ast.expr, ast.expr]:
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult)):
            raise _NoMatch
        return node.left, node.right

    def load(self, node: ast.Call, index: tuple[str | None, str | None],
             shape: tuple[Size, Size]) -> tuple[tuple[str, int], tuple[str, int]]:
        """`tile.load(arr, (r, c), shape)` with the given index names (None: the block
        index, returned) and tile shape; ((row name, array), (column name, array))."""
        arr, idx, shp = self.call_of(node, tl.load, 3)
        position = self.array(arr, "slice")
        names = [self.name(e) for e in self.pair(idx)]
        for want, got in zip(index, names, strict=True):
            if want is not None and want != got:
                raise _NoMatch
        if tuple(self.size(e) for e in self.pair(shp)) != shape:
            raise _NoMatch
        return (names[0], position), (names[1], position)

    def store(self, stmt: ast.stmt, acc: str, rows: str, cols: str) -> int:
        """`tile.store(c, (rows, cols), acc.astype(bf16))`: the position of c."""
        if not isinstance(stmt, ast.Expr):
            raise _NoMatch
        arr, idx, value = self.call_of(stmt.value, tl.store, 3)
        if [self.name(e) for e in self.pair(idx)] != [rows, cols]:
            raise _NoMatch
        if not (isinstance(value, ast.Call) and not value.keywords and len(value.args) == 1
                and isinstance(value.func, ast.Attribute) and value.func.attr == "astype"
                and self.name(value.func.value) == acc
                and self.resolve(value.args[0]) is T.bf16):
            raise _NoMatch
        return self.array(arr, "disjoint")
