"""Random tile programs, deterministic from (seed, index).

Type-directed and bottom-up: each new statement picks an op and operands among the
earlier statements (recent ones more often, so most of the list feeds the result),
and gets the dtype and shape docs/language.md gives it. Every tile shape broadcasts
to the output's tile, so any two values can meet.

Issue 28's ops (elementwise math, `**`, `tile.fma`, `a if c else b` on scalar
conditions with `and`/`or`/`not`, `for` and `while` loops carrying tiles and scalars)
come from lang_ops.py; frames are rank 1, 2 or 3 (some rank-2 ones of 16 rows a warp, whose
row products are wgmma on sm_90: `WGMMA_FRAMES`, or of 32 rows a warp: `ROW_BLOCK_FRAMES`,
or 64 x 128 on 8 warps, each warp group on half the columns: `COLUMN_GROUP_FRAMES`;
of those on 4 warps, some with a K loop on TMA rings as their only product, which two
blocks an SM may take: `RING_LOOP_FRAMES`; some of few rows on 4 warps:
`FEW_ROW_FRAMES`; some without a product on `num_warps="auto"`:
`AUTO_WARPS_FRAMES`); an input is now and then a 0-d array,
read with `tile.load(x, (), ())` (`SCALAR_INPUTS`).

Left out on purpose, because the page does not define them for tiles or because a
NumPy model could not be exact: integer `/` (the page says it gives f32, not how it
rounds), float `//` and `%`, division of integers by zero, bf16, math functions of
values that are themselves approximate, `arr.shape[d]` outside comparisons (it is i64),
and adds of float products (tile kernels contract `a * b + c` into an FMA, and where is
the target's choice).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from tools.tile_fuzzing import rules as R
from tools.tile_fuzzing.lang_ops import LangOps
from tools.tile_fuzzing.program import Input, KLoop, Lit, Node, Operand, Program, Scalar, Scratch

INT_LITERALS = (0, 1, 2, 3, -1, 7, -8, 100, 255, 12345, 65504, 2**31 - 1, -(2**31))
FLOAT_LITERALS = (0.0, -0.0, 0.5, 1.0, -1.0, 2.5, -3.0, 0.1, 1e-3, 1e5, 1e10, 3e38, 1e-40,
                  65504.0, 6e-8)
PADDING = {"f32": (0.0, 1.0, -2.5, -0.0, 1e30, math.inf, -math.inf),
           "f16": (0.0, 1.0, -2.5, -0.0, 65504.0, math.inf, -math.inf),
           "i32": (0, 1, -7, 2**31 - 1, -(2**31))}
DTYPES = (("f32", 0.45), ("i32", 0.4), ("f16", 0.15))
OPS = (("arith", 5.0), ("div", 1.5), ("intdiv", 1.0), ("bitwise", 1.0), ("shift", 0.7),
       ("neg", 0.7), ("minmax", 1.5), ("compare", 2.0), ("boolop", 0.7), ("where", 2.0),
       ("astype", 2.0), ("reduce", 2.0), ("source", 1.0), ("roundtrip", 0.7),
       ("cumsum", 0.7), ("argreduce", 1.0), ("rowproduct", 1.5), ("scratch", 1.0),
       ("math", 2.0), ("power", 0.6), ("fma", 0.6), ("ifexp", 1.0), ("loop", 1.2),
       ("fp8trip", 0.8))
MAX_TILE = 2048  # elements of the output tile: keeps a CPU compile well under a second
# rank-2 frames of 64 or 128 rows on 4 or 8 warps, where a row product is a wgmma on sm_90
# (issue 26: the fuzzer's products through the wgmma path); the others as drawn
WGMMA_FRAMES = 0.15
AUTO_WARPS_FRAMES = 0.15  # of the frames without wgmma rows: `num_warps="auto"`
# of the WGMMA_FRAMES: a chain of two products whose (BM, BN) result reaches the output
PRODUCT_CHAINS = 0.5
# of the WGMMA_FRAMES: 64 x 64 (beyond MAX_TILE), where the chain's second product (N = 64)
# is a wgmma too and its tile may leave by a TMA store; drawn apart, as the chains are
SQUARE_FRAMES = 0.3
# of the square WGMMA_FRAMES: 64 x 128 on 8 warps, where each warp group computes all 64
# rows of its 64 columns (tile/mma_choice.py `column_groups`)
COLUMN_GROUP_FRAMES = 0.3
# of the WGMMA_FRAMES of 128 rows: on 4 warps, 32 rows a warp, so that each warp group
# issues two m64 instructions a k step (tile/mma_choice.py `row_blocks`)
ROW_BLOCK_FRAMES = 0.4
# of the other rank-2 frames of 8 to 32 rows over 64 or 128 columns: on 4 warps, where
# a product is wgmma computed transposed on sm_90 (the rows as its N), and K loops as
# often as in the WGMMA_FRAMES
FEW_ROW_FRAMES = 0.5
WGMMA_OPS = tuple((op, 6.0 if op == "rowproduct" else w) for op, w in OPS)  # their ops
# a K loop of products (`num_stages` pipelines it): of the WGMMA_FRAMES, and of the other
# rank-2 frames (mma.sync or FMA products, rings of cp.async on sm_90)
K_LOOPS = (0.5, 0.12)
# of the WGMMA_FRAMES on 4 warps: a K loop whose products alone read tiles, both operands
# from TMA rings (16-bit arrays whose rows are 16-byte aligned, no register product),
# which two blocks an SM may take on sm_90 (tile/frontend.py `_may_take_two_blocks`)
RING_LOOP_FRAMES = 0.4
# rank-2 frames of several tiles that walk them themselves (program.Program.persistent)
PERSISTENT_FRAMES = 0.15
ATTENTION_LOOPS = 0.35  # of the K loops: attention's form (program.KLoop `keys`)
SCALAR_INPUTS = 0.08  # inputs that are 0-d arrays (a value every block reads)
# ops whose results (or their broadcasts) often sit in another layout than a load's
OTHER_LAYOUTS = ("reduce", "argreduce", "expand", "rowproduct", "broadcast", "cumsum")


class Retry(Exception):
    """The op picked cannot be built from the values at hand: pick another."""


def _weighted(rng: random.Random, table: tuple[tuple[str, float], ...]) -> str:
    return rng.choices([k for k, _ in table], [w for _, w in table])[0]


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy's broadcast of two tile shapes (the generator only builds ones that meet)."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b, strict=True):
        if x != y and 1 not in (x, y):
            raise Retry
        out.append(max(x, y))
    return tuple(out)


class Generator(LangOps):
    """Builds one Program; `rng` decides everything."""

    def __init__(self, rng: random.Random, seed: int, index: int) -> None:
        self.rng = rng
        self.wide = False  # a frame of 16 rows a warp (WGMMA_FRAMES)
        self.few_rows = False  # a frame of 8 to 32 rows on 4 warps (FEW_ROW_FRAMES)
        self.ring_loop = False  # a K loop of TMA-ring products alone (RING_LOOP_FRAMES)
        self.p = self._frame(seed, index)

    # -- the frame: tile, grid, arrays, scalars ----------------------------------------

    def _frame(self, seed: int, index: int) -> Program:
        rng = self.rng
        rank = rng.choices((1, 2, 3), (15, 70, 15))[0]
        if rank == 3:
            bl = rng.choice((1, 2, 4))
            bm = rng.choice((1, 2, 4, 8, 16))
            bn = rng.choice([n for n in (4, 8, 16, 32, 64) if bl * bm * n <= MAX_TILE])
            tile: tuple[int, ...] = (bl, bm, bn)
            grid: tuple[int, ...] = (rng.randint(1, 2), rng.randint(1, 2), rng.randint(1, 2))
        elif rank == 2:
            bm = rng.choice((1, 2, 4, 8, 16, 32))
            bn = rng.choice([n for n in (4, 8, 16, 32, 64, 128, 256) if bm * n <= MAX_TILE])
            tile = (bm, bn)
            grid = (rng.randint(1, 3), rng.randint(1, 3))
        else:
            tile = (rng.choice((4, 8, 16, 32, 64, 128, 256, 512, 1024)),)
            grid = (rng.randint(1, 4),)
        warps = 0
        wide = random.Random(f"wgmma:{seed}:{index}")  # its own stream: the others stay
        if rank == 2 and wide.random() < WGMMA_FRAMES:
            # 16 rows a warp, whole warp groups: its row products can take wgmma on sm_90
            tile = wide.choice(((64, 16), (64, 32), (128, 16)))
            if random.Random(f"square:{seed}:{index}").random() < SQUARE_FRAMES:
                tile = (64, 64)  # a product chain's second product is a wgmma too
            warps = tile[0] // 16
            self.wide = True
            if tile[0] == 128 and random.Random(f"blocks:{seed}:{index}").random() < \
                    ROW_BLOCK_FRAMES:
                warps = 4
            elif tile == (64, 64) and not self._chained(seed, index) and \
                    random.Random(f"columns:{seed}:{index}").random() < COLUMN_GROUP_FRAMES:
                # (a chain's first product, (BM, BM), could not split: it stays square)
                tile, warps = (64, 128), 8
            self.ring_loop = warps == 4 and not self._chained(seed, index) and \
                not self._looped(seed, index, rank) and \
                random.Random(f"ringloop:{seed}:{index}").random() < RING_LOOP_FRAMES
        elif rank == 2 and tile[0] in (8, 16, 32) and tile[1] in (64, 128) and \
                random.Random(f"fewrows:{seed}:{index}").random() < FEW_ROW_FRAMES:
            warps, self.few_rows = 4, True
        shape = tuple(self._extent(g, b) for g, b in zip(grid, tile, strict=True))
        buffer, offset = self._buffer(shape)
        drawn = rng.choice((1, 2, 4, 8))
        p = Program(seed, index, warps or drawn, "", shape, buffer, offset, tile, [], [])
        # its own stream too, so a seed's programs keep their ops and shapes
        p.auto_warps = not warps and random.Random(f"auto:{seed}:{index}").random() < \
            AUTO_WARPS_FRAMES
        walk = random.Random(f"persistent:{seed}:{index}")  # its own stream, as above
        tiles = p.grid[0] * p.grid[1] if rank == 2 else 1
        if tiles > 1 and walk.random() < PERSISTENT_FRAMES:
            p.persistent = (walk.randint(1, tiles - 1), walk.choice((1, 2, 3)))
        p.inputs = [self._input(p, k) for k in range(rng.randint(1, 3))]
        if rng.random() < 0.3:
            p.params.append(Scalar("param", "f32", name="sf",
                                   value=rng.choice((1.5, -0.0, 0.25, -3.0, 1e20))))
        if rng.random() < 0.3:
            p.params.append(Scalar("param", "i32", name="si",
                                   value=rng.choice((0, 3, -5, 1000, 2**31 - 1))))
        return p

    def _extent(self, blocks: int, size: int) -> int:
        """An array extent over `blocks` tiles of `size`: often ragged (the last tile
        runs past the edge), sometimes exact."""
        last = size if self.rng.random() < 0.3 else self.rng.randint(1, size)
        return (blocks - 1) * size + last

    def _buffer(self, shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The allocation an array is a view of: itself, or a larger one (a strided
        view at an offset: what lies past the view is real memory, not padding)."""
        if self.rng.random() < 0.6:
            return shape, (0,) * len(shape)
        offset = tuple(self.rng.randint(0, 3) for _ in shape)
        extra = tuple(self.rng.randint(0, 5) for _ in shape)
        return tuple(n + o + e for n, o, e in zip(shape, offset, extra, strict=True)), offset

    def _input(self, p: Program, k: int) -> Input:
        """Array `x<k>`, its dtype, shape and the load that reads it."""
        rng = self.rng
        dt = _weighted(rng, DTYPES)
        grid, names = p.grid, p.tile_names
        fixed = 0
        if p.rank == 1:
            form = "vec"
        elif p.rank == 3:
            form = rng.choices(("3d", "2d_trail", "vec_trail", "view"), (55, 15, 15, 15))[0]
        else:
            form = rng.choices(("2d", "row", "col", "vec_m", "vec_n", "view"),
                               (55, 10, 5, 10, 10, 10))[0]
        if random.Random(f"0-d:{p.seed}:{p.index}:{k}").random() < SCALAR_INPUTS:
            form = "scalar"  # its own stream: the others' inputs stay as they were
        if form == "scalar":  # a 0-d array, `tile.load(x, (), ())`: one value for all
            tile, text, index = (), (), ()
        elif form == "view":  # `x[c]`: a 3-d array's matrix at a leading index
            fixed = 1
            lead = rng.choice(("i", 0, 1)) if p.rank == 3 else rng.choice(("j", 0, 2))
            tile = (1, *p.tile[-2:])
            text = ("1", *names[-2:])
            index = (lead, *("jk" if p.rank == 3 else "ij"))
        elif form == "vec":
            tile, text, index = p.tile, names, ("i",)
        elif form == "3d":
            tile, text = p.tile, names
            index = rng.choices((("i", "j", "k"), (0, "j", "k"), ("i", "j", 0)), (8, 1, 1))[0]
        elif form == "2d_trail":  # (BM, BN) at (j, k): broadcast along the batch
            tile, text, index = p.tile[1:], names[1:], ("j", "k")
        elif form == "vec_trail":
            tile, text, index = p.tile[2:], names[2:], ("k",)
        elif form == "2d":
            tile, text = p.tile, names
            index = rng.choices((("i", "j"), ("i", 0), (0, "j")), (8, 1, 1))[0]
        elif form == "row":
            tile, text, index = (1, p.tile[1]), ("1", "BN"), ("i", "j")
        elif form == "col":
            tile, text, index = (p.tile[0], 1), ("BM", "1"), ("i", "j")
        elif form == "vec_m":
            tile, text, index = (p.tile[0],), ("BM",), ("i",)
        else:
            tile, text, index = (p.tile[1],), ("BN",), ("j",)
        shape = []
        for size, at in zip(tile, index, strict=True):
            blocks = grid["ijk".index(at)] if isinstance(at, str) else 1
            reach = self._extent(blocks, size)
            shape.append(max(1, reach + rng.choice((0, 0, 0, -rng.randint(0, size),
                                                    rng.randint(1, size + 2)))))
        pad = None if rng.random() < 0.2 else rng.choice(PADDING[dt])
        buffer, offset = self._buffer(tuple(shape))
        return Input(f"x{k}", dt, tuple(shape), tile, text, index, pad, buffer, offset, fixed)

    # -- statements ---------------------------------------------------------------------

    def program(self) -> Program:
        p, rng = self.p, self.rng
        for k, x in enumerate(p.inputs):
            v = self._add("load", (), k, x.dtype, x.loaded)
            if p.rank == 2 and len(x.tile) == 1 and (x.index == ("i",) or rng.random() < 0.5):
                self._add("expand", (v,), 1 if x.index == ("i",) else 0, x.dtype,
                          (x.tile[0], 1) if x.index == ("i",) else (1, x.tile[0]))
        for _ in range(rng.randint(3, 10)):
            for _attempt in range(20):
                try:
                    getattr(self, f"_op_{_weighted(rng, self._ops())}")()
                    break
                except Retry:
                    continue
        chain = random.Random(f"oxide-tile-fuzz-product/{p.seed}/{p.index}")
        kloop = random.Random(f"oxide-tile-fuzz-kloop/{p.seed}/{p.index}")
        chain.random(), kloop.random()  # (the draws `_chained` and `_looped` made)
        if self._chained(p.seed, p.index):
            self._product_chain(chain)  # (its programs, pinned by tests, stay as they were)
        elif self._looped(p.seed, p.index, p.rank) or self.ring_loop:
            self._k_loop(kloop)
        root = self._absorb()
        if root.dtype == "bool":
            root = self._add("astype", (root,), None, "i32", root.shape)
        if root.shape != p.tile:
            root = self._add("broadcast", (root,), None, root.dtype, p.tile, approx=root.approx)
        p.root, p.out_dtype = root, root.dtype
        p.out_view = rng.random() < 0.15  # `out[0]` of an array one rank up
        # drawn apart from `rng`, so that every program of a seed keeps its statements
        atomic = random.Random(f"oxide-tile-fuzz-atomic/{p.seed}/{p.index}")
        if p.out_dtype in ("f32", "i32") and atomic.random() < 0.3:
            p.out_atomic = atomic.choice(("relaxed", "acq_rel"))
        return p

    def _absorb(self) -> Node:
        """The last statement combined with every statement nothing uses yet, so each
        one reaches the output (a dead value would test nothing)."""
        p = self.p
        used = {id(a) for n in p.nodes for a in n.args}
        root = p.nodes[-1]
        for d in [n for n in p.nodes[:-1] if id(n) not in used and self._fits(n)]:
            if d.dtype == "bool":
                if root.dtype == "bool":
                    root = self._add("binary", (root, d), "xor", "bool",
                                     self._shape(root, d))
                else:
                    root = self._add("where", (d, root, Lit(1)), None, root.dtype,
                                     self._shape(d, root), product=root.product,
                                     approx=root.approx)
                continue
            if root.dtype == "bool":
                root = self._add("where", (root, d, Lit(1)), None, d.dtype,
                                 self._shape(root, d), product=d.product, approx=d.approx)
                continue
            dt = R.promote(root.dtype, d.dtype)
            ops = ["maximum", "minimum"]
            if not (R.is_float(dt) and (root.product or d.product)):
                ops += ["add", "sub"]
            op = self.rng.choice(ops)
            x, y = self._ordered(root, d)
            if op in ("add", "sub"):
                root = self._add("binary", (x, y), op, dt, self._shape(x, y),
                                 approx=self._approx(x, y))
            else:
                root = self._add(op, (x, y), None, dt, self._shape(x, y),
                                 approx=self._approx(x, y))
        return root

    def _add(self, op: str, args: tuple[Operand, ...], attr: object, dtype: str,
             shape: tuple[int, ...], product: bool = False, approx: bool = False) -> Node:
        n = Node(f"v{len(self.p.nodes)}", op, args, attr, dtype, shape, product, approx)
        self.p.nodes.append(n)
        return n

    def _pick(self, ok: Callable[[Node], bool], avoid: Node | None = None) -> Node:
        """An earlier statement that passes `ok` (other than `avoid` where there is
        one), recent ones more likely."""
        cands = [(k, n) for k, n in enumerate(self.p.nodes)
                 if ok(n) and n is not avoid and self._fits(n)]
        if not cands and avoid is not None and ok(avoid):
            return avoid
        if not cands:
            raise Retry
        return self.rng.choices([n for _, n in cands], [1 + k * k for k, _ in cands])[0]

    def _fits(self, n: Node) -> bool:
        """Whether `n` broadcasts to the output tile: a (BM,) tile must become (BM, 1)
        first (its expand statement follows it)."""
        try:
            return _broadcast(n.shape, self.p.tile) == self.p.tile
        except Retry:
            return False

    def _other(self, a: Node, ok: Callable[[Node], bool], literals: bool = True,
               scalars: bool = True) -> Operand:
        """A second operand for `a`: a statement, a weak literal, or a scalar."""
        r = self.rng.random()
        if literals and r < 0.3:
            return Lit(self.rng.choice(FLOAT_LITERALS if self.rng.random() < 0.4
                                       else INT_LITERALS))
        if scalars and r < 0.4:
            cands = [s for s in self._scalars() if ok(s)]  # type: ignore[arg-type]
            if cands:
                return self.rng.choice(cands)
        return self._pick(ok, avoid=a)

    def _scalars(self) -> list[Scalar]:
        p = self.p
        names = ("bi", "bj") if p.persistent else ("", "", "")
        return [Scalar("bid", "i32", d, names[d]) for d in range(p.rank)] + list(p.params)

    def _typed(self, a: Operand, b: Operand) -> str:
        """The dtype two operands meet in; a literal must fit it."""
        if isinstance(a, Lit) or isinstance(b, Lit):
            lit, other = (a, b) if isinstance(a, Lit) else (b, a)
            assert not isinstance(other, Lit)
            dt = R.with_literal(other.dtype, lit.value)
            if not R.literal_fits(lit.value, dt):
                raise Retry
            return dt
        return R.promote(a.dtype, b.dtype)

    def _ordered(self, a: Node, b: Operand) -> tuple[Operand, Operand]:
        return (b, a) if self.rng.random() < 0.3 else (a, b)

    @staticmethod
    def _shape(*xs: Operand) -> tuple[int, ...]:
        shape: tuple[int, ...] = ()
        for x in xs:
            if isinstance(x, Node):
                shape = _broadcast(shape, x.shape)
        return shape

    @staticmethod
    def _approx(*xs: Operand) -> bool:
        return any(isinstance(x, Node) and x.approx for x in xs)

    # -- one method per op family (names from OPS) --------------------------------------

    def _op_arith(self) -> None:
        op = self.rng.choice(("add", "sub", "mul"))

        def numeric(n: Node) -> bool:
            return n.dtype in R.NUMERIC

        a = self._pick(numeric)
        x, y = self._ordered(a, self._other(a, numeric))
        dt = self._typed(x, y)
        if op != "mul" and R.is_float(dt) and any(isinstance(v, Node) and v.product
                                                  for v in (x, y)):
            raise Retry  # `a * b + c` may become an FMA
        self._add("binary", (x, y), op, dt, self._shape(x, y), product=op == "mul" and
                  R.is_float(dt), approx=self._approx(x, y))

    def _op_div(self) -> None:
        def exact(n: Node) -> bool:
            return n.dtype in R.NUMERIC and not n.approx

        a = self._pick(exact)
        x, y = self._ordered(a, self._other(a, exact))
        dt = self._typed(x, y)
        if not R.is_float(dt):
            raise Retry  # integer `/`: left out (see the module docstring)
        # a product divided by a constant may still be one: LLVM turns `x / -1.0` into
        # `-x` (and `x / 2.0` into `x * 0.5`), and an add of it can then contract
        self._add("binary", (x, y), "div", dt, self._shape(x, y),
                  product=isinstance(x, Node) and x.product and isinstance(y, Lit))

    def _op_intdiv(self) -> None:
        a = self._pick(lambda n: n.dtype == "i32")
        d = Lit(self.rng.choice((1, 2, 3, 5, 7, 16, 1000)))
        self._add("binary", (a, d), self.rng.choice(("floordiv", "mod")), "i32", a.shape)

    def _op_bitwise(self) -> None:
        def i32(n: Node) -> bool:
            return n.dtype == "i32"

        a = self._pick(i32)
        x, y = self._ordered(a, self._other(a, i32))
        if isinstance(x, Lit) and isinstance(x.value, float) or \
                isinstance(y, Lit) and isinstance(y.value, float):
            raise Retry
        self._add("binary", (x, y), self.rng.choice(("and", "or", "xor")), self._typed(x, y),
                  self._shape(x, y))

    def _op_shift(self) -> None:
        a = self._pick(lambda n: n.dtype == "i32")
        self._add("binary", (a, Lit(self.rng.choice((0, 1, 3, 8, 16, 31)))),
                  self.rng.choice(("shl", "shr")), "i32", a.shape)

    def _op_neg(self) -> None:
        a = self._pick(lambda n: n.dtype in R.NUMERIC)
        self._add("neg", (a,), None, a.dtype, a.shape, product=a.product, approx=a.approx)

    def _op_minmax(self) -> None:
        def numeric(n: Node) -> bool:
            return n.dtype in R.NUMERIC

        a = self._pick(numeric)
        x, y = self._ordered(a, self._other(a, numeric))
        self._add(self.rng.choice(("maximum", "minimum")), (x, y), None, self._typed(x, y),
                  self._shape(x, y), approx=self._approx(x, y))

    def _op_compare(self) -> None:
        def exact(n: Node) -> bool:
            return n.dtype in R.NUMERIC and not n.approx

        a = self._pick(exact)
        if self.rng.random() < 0.25:
            b: Operand = self._shape_scalar()
        else:
            b = self._other(a, exact)
        x, y = self._ordered(a, b)
        self._typed(x, y)  # a literal must fit the type they meet in
        op = self.rng.choice(("lt", "le", "gt", "ge", "eq", "ne"))
        self._add("compare", (x, y), op, "bool", self._shape(x, y))

    def _shape_scalar(self) -> Scalar:
        """`x.shape[d]` of an array (or of `out`): an i64 0-d tile."""
        p = self.p
        arrays = [(x.name, x.shape) for x in p.inputs if x.shape] + [("out", p.out_shape)]
        name, shape = self.rng.choice(arrays)  # (a 0-d array has no extent)
        d = self.rng.randrange(len(shape))
        return Scalar("shape", "i64", d, name, shape[d])

    def _op_boolop(self) -> None:
        def boolean(n: Node) -> bool:
            return n.dtype == "bool"

        a = self._pick(boolean)
        b = self._pick(boolean, avoid=a)
        self._add("binary", (a, b), self.rng.choice(("and", "or", "xor")), "bool",
                  self._shape(a, b))

    def _op_where(self) -> None:
        c = self._pick(lambda n: n.dtype == "bool")

        def numeric(n: Node) -> bool:
            return n.dtype in R.NUMERIC

        a = self._pick(numeric)
        x, y = self._ordered(a, self._other(a, numeric, scalars=False))
        dt = self._typed(x, y)
        self._add("where", (c, x, y), None, dt, self._shape(c, x, y),
                  product=R.is_float(dt) and any(isinstance(v, Node) and v.product
                                                 for v in (x, y)),
                  approx=self._approx(x, y))

    def _op_astype(self) -> None:
        a = self._pick(lambda n: not n.approx)
        dt = self.rng.choice([d for d in R.NUMERIC if d != a.dtype])
        self._add("astype", (a,), None, dt, a.shape,
                  product=a.product and R.is_float(dt))

    def _op_fp8trip(self) -> None:
        """`x.astype(f8e4m3 or f8e5m2).astype(...)` back to x's float type (f32 for an
        i32): the 8-bit floats' rounding and saturation, whatever layout x is in."""
        a = self._pick(lambda n: n.dtype in R.NUMERIC and not n.approx)
        fmt = self.rng.choice(tuple(R.FP8))
        self._add("fp8trip", (a,), fmt, a.dtype if R.is_float(a.dtype) else "f32", a.shape)

    def _op_reduce(self) -> None:
        a = self._pick(lambda n: n.dtype in R.NUMERIC and len(n.shape) > 0)
        kind = self.rng.choice(("sum", "max", "min"))
        # max/min of products is one of them (over an axis of one element, the product
        # itself), which a later add could still contract
        self._reduction("reduce", a, kind, a.dtype, product=a.product and kind != "sum",
                        approx=a.approx or (kind == "sum" and R.is_float(a.dtype)))

    def _op_argreduce(self) -> None:
        """`tile.argmax/argmin(x, axis, keepdims)`: the i32 index of the first extreme."""
        a = self._pick(lambda n: n.dtype in R.NUMERIC and len(n.shape) > 0 and not n.approx)
        self._reduction("argreduce", a, self.rng.choice(("argmax", "argmin")), "i32")

    def _reduction(self, op: str, a: Node, kind: str, dtype: str, product: bool = False,
                   approx: bool = False) -> None:
        """`tile.<kind>(a, axis, keepdims)` along a random axis (or all), then, where a
        (BM,) result must meet a 2-d tile, `[:, None]`."""
        axis = self.rng.choice([*range(len(a.shape)), None])
        keep = self.rng.random() < 0.6
        if axis is None:
            shape: tuple[int, ...] = (1,) * len(a.shape) if keep else ()
        elif keep:
            shape = tuple(1 if d == axis else s for d, s in enumerate(a.shape))
        else:
            shape = tuple(s for d, s in enumerate(a.shape) if d != axis)
        r = self._add(op, (a,), (kind, axis, keep), dtype, shape, product=product,
                      approx=approx)
        if len(shape) == 1 and self.p.rank == 2 and (axis == 1 or self.rng.random() < 0.5):
            # (BM,) must become (BM, 1) to meet the tile; (BN,) meets it either way
            self._add("expand", (r,), 1 if axis == 1 else 0, dtype,
                      (shape[0], 1) if axis == 1 else (1, shape[0]), product=product,
                      approx=approx)
        elif self.p.rank == 3 and axis is not None and not keep and not self._fits(r):
            # (BL, BN) must become (BL, 1, BN): the reduced axis back, as keepdims has it
            self._add("expand", (r,), axis, dtype, (*shape[:axis], 1, *shape[axis:]),
                      product=product, approx=approx)

    def _op_roundtrip(self) -> None:
        """`x.permute((1, 0)).permute((1, 0))` or `x.reshape((n,)).reshape(shape)`: the
        same tile, through the layout conversions (shared memory) and reshapes."""
        a = self._pick(lambda n: len(n.shape) >= 2 and n.dtype != "bool")
        kind = self.rng.choice(("permute", "reshape"))
        self._add("roundtrip", (a,), kind, a.dtype, a.shape, product=a.product,
                  approx=a.approx)

    def _op_cumsum(self) -> None:
        """Inclusive prefix sums of an i32 tile (exact: they wrap)."""
        a = self._pick(lambda n: n.dtype == "i32" and len(n.shape) > 0)
        axis = self.rng.randrange(len(a.shape))
        self._add("cumsum", (a,), axis, "i32", a.shape)

    def _op_rowproduct(self) -> None:
        """`tile.sum(tile.mma(s(a), s(b).permute((1, 0)), zeros), 1, keepdims=True)` of two
        i32 tiles mapped to small integers (`s(x) = (x % 7 - 3)` as bf16, f16 or an 8-bit
        float, all exact there): a
        tensor-core product where the tile takes one (BM 16, BN >= 16: the A and B
        fragments, the transpose folded into the B operand, the row sum in the layout
        the layout pass picks for reduced products; on sm_90 a wgmma in the frames of 16
        rows a warp, `WGMMA_FRAMES`), else the FMA loop; its f32 sums are of integers,
        exact in any order."""
        p = self.p
        if p.rank != 2 or p.tile[1] > 64:
            raise Retry  # a longer K only adds compile time (the CPU emulates each lane)

        def whole(n: Node) -> bool:
            return n.dtype == "i32" and n.shape == p.tile

        a = self._pick(whole)
        b = self._pick(whole)
        self._add("rowproduct", (a, b), self.rng.choice(("bf16", "f16", *R.FP8)), "f32",
                  (p.tile[0], 1))

    def _chained(self, seed: int, index: int) -> bool:
        """Whether the program ends in a chain of two products (`PRODUCT_CHAINS`)."""
        return self.wide and random.Random(
            f"oxide-tile-fuzz-product/{seed}/{index}").random() < PRODUCT_CHAINS

    def _looped(self, seed: int, index: int, rank: int) -> bool:
        """Whether the program has a K loop (`K_LOOPS`), where it has no chain."""
        return rank == 2 and random.Random(f"oxide-tile-fuzz-kloop/{seed}/{index}").random() \
            < K_LOOPS[0 if self.wide or self.few_rows else 1]

    def _ops(self) -> tuple[tuple[str, float], ...]:
        """The ops a statement is drawn from: a ring-loop frame's leave out the row
        product, whose operands come from registers."""
        if self.ring_loop:
            return tuple(o for o in OPS if o[0] != "rowproduct")
        return WGMMA_OPS if self.wide else OPS

    def _product_chain(self, r: random.Random) -> None:
        """`tile.mma(s(tile.mma(s(a), s(b).permute((1, 0)), zeros)), s(a), zeros)`: the
        first product's (BM, BM) tile mapped to small integers (in f32: `% 7` of exact
        integers is exact) and multiplied again by `s(a)`, a (BM, BN) product whose A
        comes from registers (wgmma's RS form on sm_90) and whose tile may leave the kernel
        by a TMA store or reduction (tile/tma_stores.py) as the output. Drawn from `r`, apart
        from the program's own stream."""
        p = self.p
        whole = [n for n in p.nodes if n.dtype == "i32" and n.shape == p.tile and self._fits(n)]
        if not whole:
            return
        self._add("productchain", (r.choice(whole), r.choice(whole)), r.choice(("bf16", "f16")),
                  "f32", p.tile)

    def _k_loop(self, r: random.Random) -> None:
        """A K loop of products into a (BM, BN) f32 accumulator (program.KLoop), with the
        kernel's `num_stages` from 1 to 8; drawn from `r`, apart from the program's own
        stream. Its arrays' extents are ragged as the inputs' are, K often not a multiple
        of the step (a TMA box past the edge, or rows not 16-byte aligned: cp.async)."""
        p = self.p
        bm, bn = p.tile
        dtype = "f16" if self.wide or self.few_rows or r.random() < 0.7 else "f32"
        bk = r.choice((16, 32, 64)) if dtype == "f16" else r.choice((4, 8, 16))
        k = r.choice((bk, 2 * bk, 4 * bk, r.randint(1, 5 * bk)))
        steps = -(-k // bk)
        steps = r.choices((0, steps, steps + 1), (1, 8, 1))[0]
        rows = (p.grid[0] - 1) * bm + r.randint(1, bm)  # ragged, as `_extent` draws
        cols = (p.grid[1] - 1) * bn + r.randint(1, bn)
        b_k_major = r.random() < 0.5
        p.num_stages = r.randint(1, 8)
        if dtype == "f16" and r.random() < 0.4:  # (drawn last: earlier loops stay as drawn)
            dtype = "bf16"
        negate, keys = r.random() < 0.3, 0
        if r.random() < ATTENTION_LOOPS:  # attention's loop: bk is the head's width
            keys = r.choice((16, 32, 64)) if dtype != "f32" else r.choice((4, 8, 16))
            steps = r.choices((0, -(-k // keys), -(-k // keys) + 1), (1, 8, 1))[0]
        # (drawn after the others: earlier loops stay as drawn)
        a_mn_major = not keys and r.random() < 0.3
        if self.ring_loop:  # both operands by TMA: every row stride a multiple of 16 bytes
            keys = 0  # (steps as drawn: a multiple of 8 keeps ceil(k / bk))
            k, rows, cols = (-(-n // 8) * 8 for n in (k, rows, cols))
            p.num_stages = r.randint(2, 5)
        tiles = [bm * bk, bk * bn] if not keys else [bm * bk, keys * bk, bm * keys, keys * bn]
        if max(tiles) > max(MAX_TILE, bm * bn):  # more than a thread's registers may hold
            p.num_stages = None
            return
        p.kloop = KLoop(dtype, bk, k, rows, cols, b_k_major, steps, negate, keys, a_mn_major)
        p.params.append(Scalar("param", "i32", name="kt", value=steps))
        self._add("kloop", (), None, "f32", p.tile, product=True)

    def _op_scratch(self) -> None:
        """A tile stored to a scratch DisjointSlice at the block's index and loaded back:
        the load must see the block's store whichever layouts the two use (a reduction's
        slice layout, a product's, a blocked one: tile/ordering.py's barrier). Often
        another tile of the same shape and dtype is stored there first (a constant, in the
        blocked layout, or an earlier value in whatever layout it has): the last store
        wins."""
        p = self.p

        def whole(n: Node) -> bool:
            return n.dtype in R.NUMERIC and len(n.shape) == p.rank

        pick = self.rng.random()
        try:  # mostly a value whose layout is not the load's: a reduction's, a product's
            if pick < 0.4:  # a new row or column reduction, in its slice layout
                x = self._pick(lambda n: n.dtype in R.NUMERIC and n.shape == p.tile)
                axis, kind = self.rng.randrange(p.rank), self.rng.choice(("max", "min"))
                a = self._add("reduce", (x,), (kind, axis, True), x.dtype,
                              tuple(1 if d == axis else s for d, s in enumerate(x.shape)),
                              product=x.product, approx=x.approx)
            elif pick < 0.7:
                a = self._pick(lambda n: whole(n) and n.op in OTHER_LAYOUTS)
            else:
                raise Retry
        except Retry:
            a = self._pick(whole)
        stored: tuple[Operand, ...] = (a,)
        how = self.rng.random()
        # `tile.full(shape, lit)`: a blocked tile, whatever `a`'s layout, stored before `a`
        # or after it (on the CPU a block's threads run in turn, and a blocked tile's
        # owners come first: a missing barrier shows where the blocked access is last)
        lit = Lit(self.rng.choice((0, 1, -7) if a.dtype == "i32" else (0.0, -2.5)))
        if how < 0.3:
            stored = (lit, a)
        elif how < 0.6:
            stored = (a, lit)
        elif how < 0.8:
            try:
                b = self._pick(lambda n: whole(n) and n.dtype == a.dtype
                               and n.shape == a.shape, avoid=a)
            except Retry:
                b = a
            if b is not a:
                stored = (b, a)
        shape = tuple(g * s for g, s in zip(p.grid, a.shape, strict=True))
        p.scratch.append(Scratch(f"s{len(p.scratch)}", a.dtype, shape, a.shape))
        last = stored[-1]
        self._add("scratch", stored, len(p.scratch) - 1, a.dtype, a.shape,
                  product=isinstance(last, Node) and last.product,
                  approx=isinstance(last, Node) and last.approx)

    def _op_source(self) -> None:
        p, rng = self.p, self.rng
        form = rng.choice(("arange", "mask", "full"))
        if form == "full":
            dt = rng.choice(R.NUMERIC)
            lit = Lit(rng.choice(FLOAT_LITERALS if R.is_float(dt) else INT_LITERALS))
            if not R.literal_fits(lit.value, dt):
                raise Retry
            self._add("full", (lit,), None, dt, p.tile)
            return
        axis = rng.randrange(p.rank)
        shape = tuple(s if d == axis else 1 for d, s in enumerate(p.tile))
        glob = form == "mask" or rng.random() < 0.5
        a = self._add("arange", (), (axis, glob), "i32", shape)
        if form == "mask":  # the classic edge mask: global index < an extent
            op = rng.choice(("lt", "le", "ge", "ne"))
            self._add("compare", (a, self._shape_scalar()), op, "bool", shape)


def generate(seed: int, index: int) -> Program:
    """Program `index` of `seed`: the same on every run."""
    return Generator(random.Random(f"oxide-tile-fuzz/{seed}/{index}"), seed, index).program()
