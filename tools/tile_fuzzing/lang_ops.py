"""The generator's op families for issue 28's tile language (mixed into generator.py's
Generator): elementwise math, `**`, `tile.fma`, conditional expressions on scalar
conditions (`and`, `or`, `not`), and `for`/`while` loops carrying a tile or a scalar.

What the model can check decides what is made: exactly rounded functions (`abs`,
`floor`, `ceil`, `sqrt`, `**` by a small integer, `fma`) give exact values; the others
are compared within CUDA's documented ulps (model.py's bounds) and so are `approx`:
never fed to a comparison, a division or a conversion. Their operands are exact values.
A loop's carried value keeps its shape and dtype, and its body adds no float product
(an add of one could contract into an FMA).
"""

from __future__ import annotations

from tools.tile_fuzzing import rules as R
from tools.tile_fuzzing.lang_program import Cond, Loop
from tools.tile_fuzzing.program import Lit, Node, Operand

# function -> spellings it is generated with (Python's math.floor/ceil give i64: left out;
# "tile_ftz": `tile.exp2(x, flush_to_zero=True)`)
UNARY = {"abs": ("tile", "abs"), "floor": ("tile", "ox"), "ceil": ("tile", "ox"),
         "sqrt": ("tile", "ox", "math"), "exp": ("tile", "ox", "math"),
         "exp2": ("tile", "ox", "math", "tile_ftz"), "log": ("tile", "ox", "math"),
         "log2": ("tile", "ox", "math"), "log1p": ("tile", "ox", "math"),
         "sin": ("tile", "ox", "math"), "cos": ("tile", "ox", "math"),
         "tan": ("tile", "ox", "math"), "tanh": ("tile", "ox", "math"),
         "erf": ("tile", "ox", "math"), "sigmoid": ("tile",), "rsqrt": ("tile", "ox")}
EXACT = ("abs", "floor", "ceil", "sqrt")
CONDITIONS = ("lt", "le", "gt", "ge", "eq", "ne")


class LangOps:
    """`_op_math`, `_op_power`, `_op_fma`, `_op_ifexp` and `_op_loop`."""

    def _exact_float(self, n: Node) -> bool:
        return R.is_float(n.dtype) and not n.approx

    def _op_math(self) -> None:
        """A function of one float tile (`abs` of an i32 one too), or `pow` of two."""
        rng = self.rng
        if rng.random() < 0.15:
            a = self._pick(self._exact_float)
            b = self._pick(lambda n: n.dtype == a.dtype and not n.approx
                           and self._meets(a, n))
            spelling = rng.choice(("tile", "ox", "math", "**"))
            self._add("math", (a, b), ("pow", spelling), a.dtype, self._shape(a, b),
                      approx=True)
            return
        fn = rng.choice(list(UNARY))
        ok = (lambda n: n.dtype in R.NUMERIC and not n.approx) if fn == "abs" else \
            self._exact_float
        a = self._pick(ok)
        exact = fn in EXACT
        self._add("math", (a,), (fn, rng.choice(UNARY[fn])), a.dtype, a.shape,
                  product=exact and a.product, approx=not exact)

    def _meets(self, a: Node, b: Node) -> bool:
        try:
            _grows(a.shape, b.shape)
        except ValueError:
            return False
        return True

    def _op_power(self) -> None:
        """`x ** k` for a constant k from 0 to 4: repeated multiplication (exact; i32
        wraps)."""
        a = self._pick(lambda n: n.dtype in R.NUMERIC and not n.approx)
        k = self.rng.randint(0, 4)
        self._add("power", (a,), k, a.dtype, a.shape,
                  product=R.is_float(a.dtype) and k >= 2 or (k == 1 and a.product))

    def _op_fma(self) -> None:
        """`tile.fma(a, b, c)` of exact float tiles of one dtype: one rounding (f16 in f32,
        then to f16)."""
        a = self._pick(self._exact_float)

        def same(n: Node) -> bool:
            return n.dtype == a.dtype and not n.approx

        b, c = self._pick(same), self._pick(same)
        self._add("math", (a, b, c), ("fma", "tile"), a.dtype, self._shape(a, b, c))

    def _scalar_operand(self) -> Operand:
        """A 0-d operand: a bid, a scalar parameter, or a whole-tile reduction."""
        cands: list[Operand] = list(self._scalars())
        cands += [n for n in self.p.nodes if n.shape == () and n.dtype in R.NUMERIC
                  and not n.approx]
        return self.rng.choice(cands)

    def _cond(self, depth: int = 0) -> Cond:
        rng = self.rng
        left = self._scalar_operand()
        right: Operand = Lit(rng.choice((0, 1, 2, -1, 100)))
        if R.is_float(left.dtype) and rng.random() < 0.5:
            right = Lit(rng.choice((0.0, 0.5, -2.5)))
        if not R.literal_fits(right.value, R.with_literal(left.dtype, right.value)):
            right = Lit(0)
        join = rng.choice(("and", "or", None, None)) if depth == 0 else None
        other = self._cond(1) if join is not None else None
        return Cond(left, rng.choice(CONDITIONS), right, join, other, rng.random() < 0.25)

    def _op_ifexp(self) -> None:
        """`a if cond else b` on a scalar condition: the block takes one way. The arms
        meet in one shape and dtype (a literal takes the other arm's)."""
        a = self._pick(lambda n: n.dtype in R.NUMERIC)
        if self.rng.random() < 0.4:
            lit = Lit(self.rng.choice((0, 1, -3) if a.dtype == "i32" else (0.0, 1.5, -3)))
            b: Operand = lit
        else:
            b = self._pick(lambda n: n.dtype == a.dtype and n.shape == a.shape)
        x, y = self._ordered(a, b)
        cond = self._cond()
        self._add("ifexp", (x, y), cond, a.dtype, a.shape, product=a.product or (
            isinstance(b, Node) and b.product), approx=self._approx(a, b))

    def _op_loop(self) -> None:
        """A value carried through a `for` or `while` loop of 0 to 3 trips (or a
        data-dependent count, the same in the whole block), each rebinding it to
        `value <op> operand`: a tile, or a scalar (a reduction, a number)."""
        rng = self.rng
        if rng.random() < 0.25:
            start: Operand = Lit(rng.choice((0, 3, -7)) if rng.random() < 0.5
                                 else rng.choice((0.0, 1.5)))
            dtype = "f32" if isinstance(start.value, float) else "i32"
            shape: tuple[int, ...] = ()
            approx = product = False
        else:
            start = self._pick(lambda n: n.dtype in R.NUMERIC)
            dtype, shape = start.dtype, start.shape
            approx, product = start.approx, start.product
        ops = ["maximum", "minimum", "add", "sub"]
        if dtype == "i32":
            ops += ["mul", "xor"]
        op = rng.choice(ops)

        def fits(n: Node) -> bool:  # the carried value keeps its shape and dtype
            try:
                keeps = _grows(shape, n.shape) == shape
            except ValueError:
                return False
            return (keeps and R.is_float(n.dtype) <= R.is_float(dtype)
                    and R.promote(dtype, n.dtype) == dtype
                    and not (op in ("add", "sub") and R.is_float(dtype) and n.product))

        if rng.random() < 0.3:
            operand: Operand = Lit(rng.choice((1, 2, -5)) if dtype == "i32"
                                   else rng.choice((0.5, -2.0)))
        else:  # the generator's Retry where nothing fits: another op
            operand = self._pick(lambda n: n.dtype in R.NUMERIC and fits(n))
        if op in ("add", "sub") and R.is_float(dtype) and product:
            op = "maximum"  # adding to a product could contract
        trip_node = None
        if rng.random() < 0.3:
            cands = [n for n in self.p.nodes if n.dtype == "i32" and not n.approx]
            trip_node = rng.choice(cands) if cands else None
        loop = Loop(rng.choice(("for", "while")), rng.randint(0, 3), op, operand, trip_node)
        approx = approx or (isinstance(operand, Node) and operand.approx)
        self._add("loop", (start,), loop, dtype, shape, approx=approx,
                  product=product and op in ("maximum", "minimum"))


def _grows(shape: tuple[int, ...], other: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy's broadcast of two shapes (ValueError where they do not meet)."""
    n = max(len(shape), len(other))
    a, b = (1,) * (n - len(shape)) + shape, (1,) * (n - len(other)) + other
    out = []
    for x, y in zip(a, b, strict=True):
        if x != y and 1 not in (x, y):
            raise ValueError("shapes do not meet")
        out.append(max(x, y))
    return tuple(out)

