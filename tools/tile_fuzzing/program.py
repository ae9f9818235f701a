"""A generated tile program: its arrays, its statements (an SSA list, so values are
shared as in a DAG) and the kernel source they render to.

Every statement is `vK = <one tile op>`; operands are earlier statements, weak
literals, or scalars (`tile.bid(d)`, `x.shape[d]`, a scalar parameter). Each node
carries the dtype and tile shape docs/language.md gives it, which the NumPy model
(model.py) computes in. A `scratch` node is a few statements: its operands (statements,
or a literal for a constant tile) stored in turn to a scratch DisjointSlice at the
block's index, then the tile loaded back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tools.tile_fuzzing.lang_program import STATEMENTS, render_lang_op, render_statements

BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%",
          "and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>"}
COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
TYPE_NAME = {"f32": "f32", "f16": "f16", "i32": "i32"}


@dataclass(frozen=True)
class Lit:
    """A weak literal: it takes the dtype of what it meets."""

    value: int | float

    def render(self) -> str:
        return f"({self.value!r})" if str(self.value).startswith("-") else repr(self.value)


@dataclass(frozen=True)
class Scalar:
    """A 0-d typed operand: `tile.bid(axis)` (i32), `x.shape[axis]` (i64) or a scalar
    parameter (`name`, its dtype and launch value)."""

    kind: str  # "bid", "shape" or "param"
    dtype: str
    axis: int = 0
    name: str = ""
    value: int | float = 0

    product = False  # read where an operand may be a statement
    approx = False

    def render(self) -> str:
        if self.kind == "bid":  # (a persistent frame's names its i32 copies: `bi`, `bj`)
            return self.name or "ijk"[self.axis]
        if self.kind == "shape":
            return f"{self.name}.shape[{self.axis}]"
        return self.name


@dataclass
class Node:
    """One statement `name = <op>(args)`; `attr` holds the op's static part (operator,
    axis, dtype, input index ...). `product`: a float product, or one passed on through
    negation, conversion or broadcasting: an add or subtract of it could contract into an
    FMA (tile kernels contract), so the generator never adds one. `approx`: the value
    depends on a float sum, whose order is unspecified (compared with a tolerance)."""

    name: str
    op: str
    args: tuple[Operand, ...]
    attr: object
    dtype: str
    shape: tuple[int, ...]
    product: bool = False
    approx: bool = False

    def render(self) -> str:
        return self.name


Operand = Node | Lit | Scalar


@dataclass(frozen=True)
class Input:
    """An array parameter and how the program loads it: tile `index` entries are a grid
    axis (`"i"`, `"j"`) or a constant; `buffer` is the allocation `shape` is a view of
    (at `offset`), so that reads past the view would see real memory."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    tile: tuple[int, ...]
    tile_text: tuple[str, ...]  # the sizes as written: "BM", "BN", "B" or "1"
    index: tuple[str | int, ...]
    padding: int | float | None
    buffer: tuple[int, ...]
    offset: tuple[int, ...]
    # leading dimensions read through a view (`x[i]`): extent 1 in `tile`, not in the
    # loaded tile (`loaded`)
    fixed: int = 0

    @property
    def loaded(self) -> tuple[int, ...]:
        """The loaded tile's shape: `tile` without the view's fixed dimensions."""
        return self.tile[self.fixed:]


@dataclass(frozen=True)
class Scratch:
    """A DisjointSlice the program stores tiles of `tile`'s shape to and loads them back
    from, one tile per block: `shape` is the grid times the tile (no ragged edge)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    tile: tuple[int, ...]


@dataclass(frozen=True)
class KLoop:
    """A K loop of products (`KLoop` node, drawn apart from the program's stream): `kt`
    steps, each loading an (BM, bk) tile of `ka` (rows, k) at (i, t) (or the transpose
    of a (bk, BM) tile of `ka` (k, rows) at (t, i): `a_mn_major`) and a B tile of `kb`
    at its step, `acc = tile.mma(a, b, acc)` from `tile.zeros`. `b_k_major`: `kb` is
    (cols, k) and its (BN, bk) tile is transposed (`w.permute((1, 0))`, torch's Linear);
    else `kb` is (k, cols) and its (bk, BN) tile is B as it is. The arrays hold small
    integers, so every sum is exact in f32; past an edge a load reads its padding, 0.
    The kernel's `num_stages` pipelines the loop (TMA or cp.async rings on sm_90).

    With `keys`, the loop is attention's instead: `q`, an (BM, bk) tile of `ka` (rows,
    bk), is loaded once; each step scores `keys` rows of `kb` (k, bk) against it (`q @
    k_t.T`), maps the scores to small integers (`s % 7 - 3`, in `dtype`) and adds their
    product with `keys` rows of `kc` (k, cols): a second product whose A comes from
    registers (wgmma's RS form on sm_90), both B tiles in rings."""

    dtype: str  # of `ka` and `kb`: "f16", "bf16" (tensor cores) or "f32" (FMA)
    bk: int
    k: int  # the arrays' K extent (often not a multiple of bk)
    rows: int  # of `ka`
    cols: int  # of `kb`'s N side
    b_k_major: bool
    steps: int  # the loop's trip count (`kt`): 0, enough for K, or one more
    # `acc = tile.mma(a, b, 0.0 - acc)`: the accumulator changed between products (exact,
    # and never -0.0, whose sign a product's sum of zeros would keep or not as the engine
    # adds), which a wgmma left in flight must finish first
    negate: bool = False
    keys: int = 0  # attention's loop: keys a step (0: the K loop of a product)
    # `ka` is (k, rows) and its (bk, BM) tile is transposed (`x.permute((1, 0))`: a
    # weight's gradient, `X^T @ dY`); wgmma reads 16-bit ones MN-major
    a_mn_major: bool = False

    @property
    def arrays(self) -> dict[str, tuple[int, int]]:
        """The loop's arrays and their shapes, in parameter order."""
        if self.keys:
            return {"ka": (self.rows, self.bk), "kb": (self.k, self.bk),
                    "kc": (self.k, self.cols)}
        return {"ka": (self.k, self.rows) if self.a_mn_major else (self.rows, self.k),
                "kb": (self.cols, self.k) if self.b_k_major else (self.k, self.cols)}

    def render(self, acc: str) -> list[str]:
        """The loop's statements, accumulating into `acc`."""
        into = f"{'0.0 - ' if self.negate else ''}{acc}"
        if self.keys:
            n, d = self.keys, self.bk
            k_t = f"tile.load(kb, (t, 0), ({n}, {d})).permute((1, 0))"
            return [f"{acc}q = tile.load(ka, (i, 0), (BM, {d}))",
                    f"{acc} = tile.zeros((BM, BN), f32)", "for t in range(kt):",
                    f"    {acc}s = tile.mma({acc}q, {k_t}, tile.zeros((BM, {n}), f32))",
                    f"    {acc} = tile.mma((({acc}s % 7) - 3).astype({self.dtype}), "
                    f"tile.load(kc, (t, j), ({n}, BN)), {into})"]
        a = (f"tile.load(ka, (t, i), ({self.bk}, BM)).permute((1, 0))" if self.a_mn_major
             else f"tile.load(ka, (i, t), (BM, {self.bk}))")
        b = (f"tile.load(kb, (j, t), (BN, {self.bk})).permute((1, 0))" if self.b_k_major
             else f"tile.load(kb, (t, j), ({self.bk}, BN))")
        return [f"{acc} = tile.zeros((BM, BN), f32)", "for t in range(kt):",
                f"    {acc} = tile.mma({a}, {b}, {into})"]


@dataclass
class Program:
    """One generated kernel and its launch: `tile` is the output's tile shape (named by
    the Const parameters BM, BN or B), `grid` covers the output exactly."""

    seed: int
    index: int
    warps: int
    out_dtype: str
    out_shape: tuple[int, ...]
    out_buffer: tuple[int, ...]
    out_offset: tuple[int, ...]
    tile: tuple[int, ...]
    inputs: list[Input]
    params: list[Scalar]
    nodes: list[Node] = field(default_factory=list)
    root: Node | None = None
    scratch: list[Scratch] = field(default_factory=list)
    # `out` passed with a leading axis of 1 (`out_all`), and `out = out_all[0]`: a view
    out_view: bool = False
    # `num_warps="auto"` where the kernel has no product (the compiler chooses the warps)
    auto_warps: bool = False
    # the output added to, not stored: `tile.atomic_add(out, ..., sem=out_atomic)` into an
    # AtomicSlice that starts from `data.start_values` (f32 and i32 outputs only)
    out_atomic: str | None = None
    # a K loop of products over the arrays `ka` and `kb` (a "kloop" node) and the
    # kernel's `num_stages` (None: not written)
    kloop: KLoop | None = None
    num_stages: int | None = None
    # (blocks, group): the kernel walks its tiles itself, `for tt in tile.tiles(n)` with
    # `i, j = tile.grouped(tt, ...)`, launched on fewer blocks than tiles (rank 2)
    persistent: tuple[int, int] | None = None

    @property
    def rank(self) -> int:
        return len(self.tile)

    @property
    def grid(self) -> tuple[int, ...]:
        return tuple(-(-n // b) for n, b in zip(self.out_shape, self.tile, strict=True))

    @property
    def launch_grid(self) -> tuple[int, ...]:
        """The grid the kernel is launched on: `grid`, or a persistent frame's blocks."""
        return self.grid if self.persistent is None else (self.persistent[0],)

    @property
    def tile_names(self) -> tuple[str, ...]:
        return {1: ("B",), 2: ("BM", "BN"), 3: ("BL", "BM", "BN")}[self.rank]

    @property
    def where(self) -> str:
        """The block's tile index: `(i,)`, `(i, j)` or `(i, j, k)`."""
        return _tuple(list("ijk"[:self.rank]))

    @property
    def warps_option(self) -> str:
        """`num_warps=`'s value in the source: "auto" (quoted) or the drawn count."""
        products = any(n.op in ("rowproduct", "productchain", "kloop") for n in self.nodes)
        return '"auto"' if self.auto_warps and not products else str(self.warps)

    def const_args(self) -> list[int]:
        return list(self.tile)

    def source(self) -> str:
        """The module: imports and the one `@tile.kernel fuzz_kernel`."""
        params = [f"{x.name}: Slice[{TYPE_NAME[x.dtype]}, {len(x.shape)}]" for x in self.inputs]
        if self.kloop is not None:
            params += [f"{x}: Slice[{self.kloop.dtype}, 2]" for x in self.kloop.arrays]
        out_kind = "AtomicSlice" if self.out_atomic else "DisjointSlice"
        params.append(f"out_all: {out_kind}[{TYPE_NAME[self.out_dtype]}, {self.rank + 1}]"
                      if self.out_view else
                      f"out: {out_kind}[{TYPE_NAME[self.out_dtype]}, {self.rank}]")
        params += [f"{s.name}: DisjointSlice[{TYPE_NAME[s.dtype]}, {self.rank}]"
                   for s in self.scratch]
        params += [f"{p.name}: {TYPE_NAME[p.dtype]}" for p in self.params]
        params += [f"{n}: Const[int]" for n in self.tile_names]
        names = ", ".join("ijk"[:self.rank])
        stages = "" if self.num_stages is None else f", num_stages={self.num_stages}"
        bids = f"{names} = {', '.join(f'tile.bid({d})' for d in range(self.rank))}"
        lines = ['"""Generated by tools/tile_fuzz.py; do not edit."""', "import math", "",
                 "import oxide as ox",
                 "from oxide import AtomicSlice, Const, DisjointSlice, Slice, bf16, f8e4m3, "
                 "f8e5m2, f16, f32, i32, tile", "", "",
                 f"@tile.kernel(num_warps={self.warps_option}{stages})",
                 f"def fuzz_kernel({', '.join(params)}):"]
        if self.persistent is None:
            lines.append(f"    {bids}")
        if self.out_view:
            lines.append("    out = out_all[0]")
        body = self._statements()
        if self.persistent is not None:  # the tile walk; the statements go inside it
            m, n = "tile.num_tiles(out, 0, BM)", "tile.num_tiles(out, 1, BN)"
            lines += [f"    for tt in tile.tiles({m} * {n}):",
                      f"        i, j = tile.grouped(tt, {m}, {n}, {self.persistent[1]})",
                      "        bi, bj = i.astype(i32), j.astype(i32)"]
            body = ["    " + line for line in body]
        lines += body
        return "\n".join(lines) + "\n"

    def _statements(self) -> list[str]:
        """The kernel's statements after its block indices, the output's store last."""
        lines: list[str] = []
        where = self.where
        for n in self.nodes:
            if n.op == "scratch":  # the stores, then `vK = tile.load(...)` below
                s = self.scratch[n.attr]  # type: ignore[index]
                lines += [f"    tile.store({s.name}, {where}, {_stored(s, a)})" for a in n.args]
            if n.op == "kloop":
                assert self.kloop is not None
                lines += ["    " + line for line in self.kloop.render(n.name)]
                continue
            if n.op in STATEMENTS:  # loops and branches: statements of their own
                lines += ["    " + line for line in render_statements(self, n)]
                continue
            lines.append(f"    {n.name} = {render_op(self, n)}")
        assert self.root is not None
        if self.out_atomic:
            lines.append(f"    tile.atomic_add(out, {where}, {self.root.name}, "
                         f"sem={self.out_atomic!r})")
        else:
            lines.append(f"    tile.store(out, {where}, {self.root.name})")
        return lines


def _stored(s: Scratch, a: Operand) -> str:
    """A tile stored to a scratch array: a statement, or a constant tile of its shape."""
    if isinstance(a, Lit):
        return f"tile.full({_tuple([str(d) for d in s.tile])}, {a.render()}, " \
               f"dtype={TYPE_NAME[s.dtype]})"
    return a.render()


def _padding(p: int | float) -> str:
    if isinstance(p, float) and p in (float("inf"), float("-inf")):
        return "math.inf" if p > 0 else "-math.inf"
    return repr(p)


def _tuple(items: tuple[str, ...] | list[str]) -> str:
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def render_op(p: Program, n: Node) -> str:
    """The right-hand side of statement `n`."""
    a = [x.render() for x in n.args]
    names = p.tile_names
    if n.op == "load":
        x = p.inputs[n.attr]  # type: ignore[index]
        pad = "" if x.padding is None else f", padding={_padding(x.padding)}"
        view = x.name + "".join(f"[{v}]" for v in x.index[:x.fixed])
        return (f"tile.load({view}, {_tuple([str(v) for v in x.index[x.fixed:]])}, "
                f"{_tuple(list(x.tile_text[x.fixed:]))}{pad})")
    if n.op == "binary":
        return f"{a[0]} {BINARY[n.attr]} {a[1]}"  # type: ignore[index]
    if n.op == "compare":
        return f"{a[0]} {COMPARE[n.attr]} {a[1]}"  # type: ignore[index]
    if n.op == "neg":
        return f"-{a[0]}"
    if n.op in ("maximum", "minimum"):
        return f"tile.{n.op}({a[0]}, {a[1]})"
    if n.op == "where":
        return f"tile.where({a[0]}, {a[1]}, {a[2]})"
    if n.op == "astype":
        return f"{a[0]}.astype({TYPE_NAME[n.dtype]})"
    if n.op == "fp8trip":
        return f"{a[0]}.astype({n.attr}).astype({TYPE_NAME[n.dtype]})"
    if n.op in ("reduce", "argreduce"):
        kind, axis, keep = n.attr  # type: ignore[misc]
        return f"tile.{kind}({a[0]}, {axis}, keepdims={keep})"
    if n.op == "roundtrip":
        if n.attr == "permute":
            if len(n.shape) == 3:
                return f"{a[0]}.permute((1, 2, 0)).permute((2, 0, 1))"
            return f"{a[0]}.permute((1, 0)).permute((1, 0))"
        size = 1
        for d in n.shape:
            size *= d
        return f"{a[0]}.reshape(({size},)).reshape({_tuple([str(d) for d in n.shape])})"
    if n.op == "cumsum":
        return f"tile.cumsum({a[0]}, {n.attr})"
    if n.op == "rowproduct":
        small = [f"(({x} % 7) - 3).astype({n.attr})" for x in a]
        return (f"tile.sum(tile.mma({small[0]}, {small[1]}.permute((1, 0)), "
                f"tile.zeros((BM, BM), f32)), 1, keepdims=True)")
    if n.op == "productchain":
        small = [f"(({x} % 7) - 3).astype({n.attr})" for x in a]
        first = f"tile.mma({small[0]}, {small[1]}.permute((1, 0)), tile.zeros((BM, BM), f32))"
        return (f"tile.mma((({first} % 7) - 3).astype({n.attr}), {small[0]}, "
                f"tile.zeros((BM, BN), f32))")
    if n.op == "expand":  # attr: the new axis
        items = [":"] * (len(n.shape) - 1)
        items.insert(n.attr, "None")  # type: ignore[arg-type]
        return f"{a[0]}[{', '.join(items)}]"
    if n.op == "scratch":
        s = p.scratch[n.attr]  # type: ignore[index]
        return f"tile.load({s.name}, {p.where}, {_tuple([str(d) for d in s.tile])})"
    if n.op == "broadcast":
        return f"tile.broadcast_to({a[0]}, {_tuple(names)})"
    if n.op == "arange":  # attr: the tile axis it runs along; with an offset, the global one
        axis, glob = n.attr  # type: ignore[misc]
        r = f"tile.arange({names[axis]})"
        if p.rank > 1:
            r += "[" + ", ".join(":" if d == axis else "None" for d in range(p.rank)) + "]"
        block = ("bi", "bj")[axis] if p.persistent else "ijk"[axis]  # an i32 either way
        return f"{r} + {block} * {names[axis]}" if glob else r
    if n.op == "full":
        return f"tile.full({_tuple(names)}, {a[0]}, dtype={TYPE_NAME[n.dtype]})"
    return render_lang_op(p, n, a)

