"""The model of issue 28's ops (mixed into model.py's Model): what docs/language.md says
elementwise math, `**`, `tile.fma`, conditional expressions and loops compute.

- `abs`, `floor`, `ceil`, `sqrt` and `x ** k` (repeated multiplication) are exact, in the
  operand's dtype (f16 computes in f32 and rounds once, which for these is f16's own
  correctly rounded result); `tile.fma` is one rounding of the exact `a * b + c` to f32
  (then to f16 for f16 operands, as oxide computes 16-bit floats in f32).
- the other functions are compared within a bound: k ulps of the result's type at the
  f64 value rounded to it (k: CUDA's documented bound for the f32 function, which the C
  library's are within: 2 for exp, exp2, log, log2, log1p, sin, cos, tanh, erf and
  rsqrt, 4 for tan and pow), plus one f16 ulp for f16 (computed in f32, then rounded).
  `sigmoid` is modelled as it is defined, `1 / (1 + exp(-x))` step by step in f32 (so
  `exp(-x)` overflowing to inf gives 0 as in the kernel), within 4 f32 ulps.
- `a if c else b` takes, per block, the arm its scalar condition picks (`and`/`or`/`not`
  as Python's; comparisons in the dtype the operands meet in).
- a loop applies its step as many times as its trip count in that block (a literal, or
  the block's `max(v) % 3`), each step rounded in the carried dtype.
"""

from __future__ import annotations

import numpy as np

from tools.tile_fuzzing import rules as R
from tools.tile_fuzzing.lang_program import Cond, Loop
from tools.tile_fuzzing.program import Node

MIN_NORMAL_F32 = 2.0**-126  # what `tile.exp2(x, flush_to_zero=True)` flushes below
ULPS = {"exp": 2, "exp2": 2, "log": 2, "log2": 2, "log1p": 2, "sin": 2, "cos": 2, "tan": 4,
        "tanh": 2, "erf": 2, "rsqrt": 2, "pow": 4, "sigmoid": 4}
F64 = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "log1p": np.log1p,
       "sin": np.sin, "cos": np.cos, "tan": np.tan, "tanh": np.tanh,
       "erf": np.vectorize(__import__("math").erf, otypes=[np.float64]),
       "rsqrt": lambda x: 1.0 / np.sqrt(x), "pow": np.power}


class LangModel:
    """`lang_eval` for the ops of tools/tile_fuzzing/lang_program.py."""

    def lang_eval(self, n: Node) -> object:
        return getattr(self, f"_lang_{n.op}")(n)

    def _lang_power(self, n: Node) -> object:
        (x,) = n.args
        src = self.operand(x, n.dtype, len(n.shape))
        if n.attr == 0:
            v = np.ones_like(src.v)
        else:
            v = src.v
            for _ in range(n.attr - 1):  # type: ignore[operator]
                v = v * src.v  # NumPy: one rounding a product (f16 through f32); i32 wraps
        return self._done(n, v, src.undef)

    def _lang_math(self, n: Node) -> object:
        fn, spelling = n.attr  # type: ignore[misc]
        rank = len(n.shape)
        args = [self.operand(a, n.dtype, rank) for a in n.args]
        undef = args[0].undef
        for a in args[1:]:
            undef = undef | a.undef
        x = args[0].v
        if fn in ("abs", "floor", "ceil", "sqrt"):
            f = {"abs": np.abs, "floor": np.floor, "ceil": np.ceil, "sqrt": np.sqrt}[fn]
            return self._done(n, f(x), undef)
        if fn == "fma":
            return self._done(n, _fma(*(a.v for a in args)).astype(R.NP[n.dtype]), undef)
        wide = [a.v.astype(np.float64) for a in args]
        if fn == "sigmoid":  # as defined, in f32: exp(-x) may overflow to inf, giving 0
            e = np.exp(-wide[0]).astype(np.float32)
            r = (np.float32(1) / (np.float32(1) + e)).astype(np.float64)
        else:
            r = F64[fn](*wide)
        near_flush = np.zeros(r.shape, bool)
        if spelling == "tile_ftz":  # results below f32's smallest normal are 0
            near_flush = r < MIN_NORMAL_F32 * (1 + 8 * R.EPS["f32"])  # either side
            r = np.where(r < MIN_NORMAL_F32, 0.0, r)
        v = r.astype(R.NP[n.dtype])
        mag = np.abs(v.astype(np.float64))
        k = ULPS[fn]
        err = k * (R.EPS["f32"] * mag + R.TINY["f32"])
        err = np.where(near_flush, np.maximum(err, MIN_NORMAL_F32), err)
        if n.dtype == "f16":  # computed in f32, then rounded to f16
            err = err + R.EPS["f16"] * mag + 2 * R.TINY["f16"]
        return self._done(n, v, undef, np.maximum(err, R.TINY[n.dtype]))

    def _condition(self, c: Cond) -> tuple[np.ndarray, np.ndarray]:
        """A scalar condition per block (shape: the grid), as Python evaluates it, and
        where it depends on an unspecified value."""
        from tools.tile_fuzzing.model import _compare

        dt = self._meet(c.left, c.right)
        a, b = self.operand(c.left, dt, 0), self.operand(c.right, dt, 0)
        v, undef = _compare(c.pred, a.v, b.v), a.undef | b.undef
        if c.other is not None:
            w, wundef = self._condition(c.other)
            v, undef = (v & w) if c.join == "and" else (v | w), undef | wundef
        return (~v if c.negate else v), undef

    def _per_block(self, x: np.ndarray, rank: int) -> np.ndarray:
        """A grid-shaped value, to broadcast against tiles of `rank` dimensions."""
        return x.reshape(x.shape + (1,) * rank)

    def _lang_ifexp(self, n: Node) -> object:
        rank = len(n.shape)
        cond, cundef = self._condition(n.attr)  # type: ignore[arg-type]
        a, b = (self.operand(x, n.dtype, rank) for x in n.args)
        c = self._per_block(cond, rank)
        err = None
        if a.err is not None or b.err is not None:
            err = np.where(c, _err(a), _err(b))
        undef = self._per_block(cundef, rank) | np.where(c, a.undef, b.undef)
        return self._done(n, np.where(c, a.v, b.v), undef, err)

    def _lang_loop(self, n: Node) -> object:
        loop: Loop = n.attr  # type: ignore[assignment]
        rank, dt = len(n.shape), n.dtype
        (start,) = n.args
        cur = self.operand(start, dt, rank)
        v = np.broadcast_to(cur.v, self.grid + n.shape).copy()
        undef = np.broadcast_to(cur.undef, v.shape).copy()
        err = None if cur.err is None else np.broadcast_to(cur.err, v.shape).copy()
        step = self.operand(loop.operand, dt, rank)
        if loop.trip_node is not None:
            t = self.env[loop.trip_node.name]
            axes = tuple(range(self.nb, t.v.ndim))
            trips = np.mod(np.max(t.v, axis=axes).astype(np.int64), 3) if axes else \
                np.mod(t.v.astype(np.int64), 3)
            undef = undef | self._per_block(np.any(t.undef, axis=axes) if axes else t.undef,
                                             rank)
        else:
            trips = np.full(self.grid, loop.trips)
        for k in range(int(trips.max(initial=0))):
            take = self._per_block(trips > k, rank)
            new, new_undef, new_err = _step(loop.op, dt, v, undef, err, step)
            v = np.where(take, new, v)
            undef = np.where(take, new_undef, undef)
            if new_err is not None:
                err = np.where(take, new_err, _zeros_like(v) if err is None else err)
        return self._done(n, v, undef, err)


def _zeros_like(v: np.ndarray) -> np.ndarray:
    return np.zeros(v.shape)


def _err(x: object) -> np.ndarray:
    return np.zeros(x.v.shape) if x.err is None else x.err  # type: ignore[attr-defined]


def _step(op: str, dt: str, v: np.ndarray, undef: np.ndarray, err: np.ndarray | None,
          x: object) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """One trip: `v <op> x` in `dt` (i32 wraps, floats round once), its unspecified
    elements (a NaN or signed zeros meeting in maximum/minimum) and its error bound."""
    from tools.tile_fuzzing.model import _binary, _rounded

    xv = np.broadcast_to(x.v, v.shape)  # type: ignore[attr-defined]
    xu = np.broadcast_to(x.undef, v.shape)  # type: ignore[attr-defined]
    xe = None if x.err is None else np.broadcast_to(x.err, v.shape)  # type: ignore[attr-defined]
    out_undef = undef | xu
    if op in ("maximum", "minimum"):
        new = (np.maximum if op == "maximum" else np.minimum)(v, xv)
        if R.is_float(dt):
            out_undef = out_undef | np.isnan(v) | np.isnan(xv) | (
                (v == 0) & (xv == 0) & (np.signbit(v) != np.signbit(xv)))
        out_err = None if err is None and xe is None else np.maximum(
            np.zeros(v.shape) if err is None else err, np.zeros(v.shape) if xe is None else xe)
        return new, out_undef, out_err
    new = _binary(op, v, xv)
    out_err = None
    if err is not None or xe is not None:
        grow = (np.zeros(v.shape) if err is None else err) + (np.zeros(v.shape) if xe is None
                                                               else xe)
        out_err = _rounded(grow, new, dt)
    return new, out_undef, out_err


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """`a * b + c` rounded once to f32 (f16 and f32 operands): the product is exact in
    f64, the sum's f64 rounding error is recovered exactly (TwoSum), and a sum that
    lands on an f32 midpoint is sent the way the error points."""
    p = a.astype(np.float64) * b.astype(np.float64)
    c64 = c.astype(np.float64)
    s = p + c64
    bb = s - p
    e = (p - (s - bb)) + (c64 - bb)
    r = s.astype(np.float32)
    r64 = r.astype(np.float64)
    up = np.where(s >= r64, np.float32(np.inf), np.float32(-np.inf))
    nb = np.nextafter(r, up)
    mid = (r64 + nb.astype(np.float64)) / 2
    push = np.sign(e) == np.sign(nb.astype(np.float64) - r64)
    fix = np.isfinite(s) & np.isfinite(e) & (s == mid) & (e != 0) & push
    return np.where(fix, nb, r)

