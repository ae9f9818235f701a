"""The NumPy model of a generated program: what docs/language.md says it computes.

Values are evaluated for every block at once: an array of shape `grid + tile shape`
(a 0-d tile is `grid`), so block (i, j) is `value[i, j]`. The rules it follows:

- `tile.load(arr, index, shape, padding=p)` is `t[x, y] = arr[i*BM + x, j*BN + y]` (a
  view `arr[c]` fixes a leading index: the tile of extent 1 there, without it); an
  element outside the array reads `p` (converted to the array's dtype; 0 without it).
- `tile.store(out, (i, j), t)` writes only the elements inside `out`: the rest of the
  tile, and everything around the view `out` is of its buffer, is left as it was.
- A tile loaded from a scratch array after the block stored tiles at that index is the
  last tile stored (a block sees its own stores, in program order).
- Reductions see the whole tile, padding included (the page: elements outside read
  `padding`; a reduction reduces the tile), so a row of a ragged tile sums its padding.
- Dtypes: operands are converted to the dtype the node was typed with (rules.py) and
  the op is done in it: NumPy's f32 and f16 `+ - * /` are correctly rounded, its i32
  arithmetic wraps, `//` and `%` are Python's, float-to-int conversion truncates and
  saturates with NaN giving 0; a trip through an 8-bit float rounds once to nearest
  even and saturates (rules.through_fp8, with ml_dtypes).

Some elements are *unspecified* and not compared (`undef`): where `tile.maximum`,
`tile.minimum`, `tile.max` or `tile.min` meet a NaN or a +0 against a -0 (the Tile
section does not say which wins; the SIMT `max` is IEEE maximumNumber), and wherever
a float sum overflows or sums a non-finite term. Elements that depend on one either
way are unspecified too; `tile.where` takes the flag of the side it picks.

Float sums (`tile.sum` of f32 or f16; 16-bit floats sum in f32) may add in any order,
so the model sums in f64 and carries an absolute error bound `err` for every value
that depends on one: a sum of n terms x_k (each with bound e_k) gets
`sum(e_k) + (n + 2) * 2**-23 * sum(|x_k| + e_k)` (the classic bound for any order and
for a product fused into the sum, plus the final rounding), and each later op adds its
own rounding, one ulp relative plus the smallest subnormal: `a +- b` gets `(ea + eb)`,
`a * b` gets `|a| eb + |b| ea + ea eb`, `-a`, `maximum`, `minimum`, `tile.max/min`
keep the largest bound. Such values are compared as `|got - expected| <= err`; every
other float is compared bit for bit (all NaNs alike). The generator keeps division,
comparisons and conversions away from bounded values, where a tiny error could flip a
result, and keeps the data small enough that the bounds stay tight.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from tools.tile_fuzzing import rules as R
from tools.tile_fuzzing.lang_model import LangModel
from tools.tile_fuzzing.program import Lit, Node, Operand, Program, Scalar

LANG_OPS = ("math", "power", "ifexp", "loop")  # issue 28's ops: lang_model.py


@dataclass
class Value:
    """A value for every block: `v` (grid + tile shape), `undef`, and `err` (None when
    exact, else an f64 array of bounds)."""

    v: np.ndarray
    undef: np.ndarray
    err: np.ndarray | None = None


@dataclass
class Expected:
    """The model's output view: values, the unspecified elements and error bounds."""

    value: np.ndarray
    undef: np.ndarray
    err: np.ndarray | None


class Model(LangModel):
    """Evaluates one Program over inputs given as the arrays passed to the kernel."""

    def __init__(self, p: Program, arrays: dict[str, np.ndarray]) -> None:
        self.p = p
        self.arrays = arrays
        self.grid = p.grid
        self.nb = len(self.grid)
        self.env: dict[str, Value] = {}

    def run(self) -> Expected:
        with np.errstate(all="ignore"):
            for n in self.p.nodes:
                self.env[n.name] = self._eval(n)
            assert self.p.root is not None
            return self._store(self.env[self.p.root.name])

    # -- operands -----------------------------------------------------------------------

    def _full(self, x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        return np.broadcast_to(x, self.grid + shape)

    def _lift(self, x: np.ndarray, rank: int, to: int) -> np.ndarray:
        """A rank-`rank` tile's array as rank `to` (NumPy broadcasting: leading 1s)."""
        return x.reshape(x.shape[:self.nb] + (1,) * (to - rank) + x.shape[self.nb:])

    def _bid(self, axis: int) -> np.ndarray:
        shape = [1] * self.nb
        shape[axis] = self.grid[axis]
        return self._full(np.arange(self.grid[axis], dtype=np.int32).reshape(shape), ())

    def operand(self, x: Operand, dt: str, rank: int) -> Value:
        """Operand `x` converted to `dt` and lifted to a tile of rank `rank`."""
        if isinstance(x, Lit):
            v = self._full(R.constant(x.value, dt), ())
            src, value = dt, Value(v, np.zeros(v.shape, bool))
            shape: tuple[int, ...] = ()
        elif isinstance(x, Scalar):
            raw = self._bid(x.axis) if x.kind == "bid" else self._full(
                np.array(x.value, R.NP[x.dtype]), ())
            src, value, shape = x.dtype, Value(raw, np.zeros(raw.shape, bool)), ()
        else:
            src, value, shape = x.dtype, self.env[x.name], x.shape
        v = R.convert(value.v, src, dt)
        lift = len(shape)
        return Value(self._lift(v, lift, rank), self._lift(value.undef, lift, rank),
                     None if value.err is None else self._lift(value.err, lift, rank))

    def _meet(self, a: Operand, b: Operand) -> str:
        """The dtype two operands meet in (the generator typed the node the same way)."""
        if isinstance(a, Lit):
            return R.with_literal(b.dtype, a.value)  # type: ignore[union-attr]
        if isinstance(b, Lit):
            return R.with_literal(a.dtype, b.value)
        return R.promote(a.dtype, b.dtype)

    # -- ops ----------------------------------------------------------------------------

    def _eval(self, n: Node) -> Value:
        rank = len(n.shape)
        full = self.grid + n.shape
        if n.op in LANG_OPS:
            return self.lang_eval(n)  # type: ignore[return-value]
        if n.op == "load":
            return self._load(n)
        if n.op == "arange":
            axis, glob = n.attr  # type: ignore[misc]
            size = self.p.tile[axis]
            shape = [1] * rank
            shape[-1 if rank == 1 else axis] = size
            v = np.arange(size, dtype=np.int32).reshape(shape)
            v = self._full(v, n.shape)
            if glob:
                v = v + self._lift(self._bid(axis) * np.int32(size), 0, rank)
            return Value(self._full(v, n.shape), np.zeros(full, bool))
        if n.op == "full":
            (lit,) = n.args
            assert isinstance(lit, Lit)
            return Value(self._full(R.constant(lit.value, n.dtype), n.shape), np.zeros(full, bool))
        if n.op in ("neg", "astype", "fp8trip", "expand", "broadcast"):
            return self._unary(n)
        if n.op == "scratch":  # stored in turn and loaded back: the last one stored
            last = n.args[-1]
            if isinstance(last, Lit):  # `tile.full(shape, lit)`
                v = self._full(R.constant(last.value, n.dtype), n.shape)
                return self._done(n, v, np.zeros(full, bool))
            assert isinstance(last, Node)
            src = self.env[last.name]
            return self._done(n, src.v, src.undef, src.err)
        if n.op == "reduce":
            return self._reduce(n)
        if n.op == "rowproduct":
            return self._rowproduct(n)
        if n.op == "kloop":
            return self._k_loop(n)
        if n.op == "productchain":
            return self._product_chain(n)
        if n.op in ("roundtrip", "cumsum", "argreduce"):
            return self._reorder(n)
        if n.op == "where":
            c = self.operand(n.args[0], "bool", rank)
            a, b = (self.operand(x, n.dtype, rank) for x in n.args[1:])
            err = None
            if a.err is not None or b.err is not None:
                err = np.where(c.v, _err(a), _err(b))
            return self._done(n, np.where(c.v, a.v, b.v),
                              c.undef | np.where(c.v, a.undef, b.undef), err)
        x, y = n.args
        dt = self._meet(x, y) if n.op == "compare" else n.dtype
        a, b = self.operand(x, dt, rank), self.operand(y, dt, rank)
        undef = a.undef | b.undef
        if n.op == "compare":
            return self._done(n, _compare(n.attr, a.v, b.v), undef)  # type: ignore[arg-type]
        if n.op in ("maximum", "minimum"):
            f = np.maximum if n.op == "maximum" else np.minimum
            if R.is_float(dt):
                undef = undef | np.isnan(a.v) | np.isnan(b.v) | (
                    (a.v == 0) & (b.v == 0) & (np.signbit(a.v) != np.signbit(b.v)))
            err = None if a.err is None and b.err is None else np.maximum(_err(a), _err(b))
            return self._done(n, f(a.v, b.v), undef, err)
        v = _binary(n.attr, a.v, b.v)  # type: ignore[arg-type]
        err = None
        if a.err is not None or b.err is not None:
            ea, eb = _err(a), _err(b)
            if n.attr == "mul":
                grow = np.abs(a.v.astype(np.float64)) * eb + np.abs(b.v.astype(np.float64)) * ea \
                    + ea * eb
            else:
                grow = ea + eb
            err = _rounded(grow, v, dt)
        return self._done(n, v, undef, err)

    def _done(self, n: Node, v: np.ndarray, undef: np.ndarray,
              err: np.ndarray | None = None) -> Value:
        """The node's value at its full shape; a bounded value that is not finite, or
        could round past the largest finite one, is unspecified."""
        full = self.grid + n.shape
        v, undef = self._full(v, n.shape), self._full(undef, n.shape)
        if err is not None:
            err = self._full(err, n.shape)
            big = ~np.isfinite(v) | (np.abs(v.astype(np.float64)) + err >= R.MAX[n.dtype])
            undef = undef | big
        assert v.shape == full and v.dtype == R.NP[n.dtype], (n.name, v.shape, v.dtype)
        return Value(v, undef, err)

    def _unary(self, n: Node) -> Value:
        (x,) = n.args
        assert isinstance(x, Node)
        src = self.env[x.name]
        if n.op == "neg":
            return self._done(n, -src.v, src.undef, src.err)
        if n.op == "astype":
            return self._done(n, R.convert(src.v, x.dtype, n.dtype), src.undef)
        if n.op == "fp8trip":
            return self._done(n, R.through_fp8(src.v, str(n.attr), n.dtype), src.undef)
        if n.op == "expand":
            axis = self.nb + n.attr  # type: ignore[operator]
            return self._done(n, np.expand_dims(src.v, axis), np.expand_dims(src.undef, axis),
                              None if src.err is None else np.expand_dims(src.err, axis))
        lift = len(x.shape)
        up = [None if a is None else self._lift(a, lift, len(n.shape))
              for a in (src.v, src.undef, src.err)]
        return self._done(n, up[0], up[1], up[2])  # type: ignore[arg-type]

    def _rowproduct(self, n: Node) -> Value:
        """The row sums of `s(a) @ s(b).T`, `s(x) = x % 7 - 3` (Python's `%`): products
        and sums of small integers, exact in f32 in any order. A row depends on its row of
        `a` and on all of `b`."""
        x, y = n.args
        assert isinstance(x, Node) and isinstance(y, Node)
        a, b = self.env[x.name], self.env[y.name]
        sa, sb = ((np.mod(t.v.astype(np.int64), 7) - 3).astype(np.float64) for t in (a, b))
        v = np.matmul(sa, np.swapaxes(sb, -1, -2)).sum(axis=-1, keepdims=True)
        undef = a.undef.any(axis=-1, keepdims=True) | b.undef.any(axis=(-2, -1), keepdims=True)
        return self._done(n, v.astype(np.float32), np.broadcast_to(undef, v.shape))

    def _product_chain(self, n: Node) -> Value:
        """`s(s(a) @ s(b).T) @ s(a)`, `s(x) = x % 7 - 3` (Python's `%`, on the f32 sums
        too): small integers throughout, exact in f32 in any order. Element (r, c) depends
        on row r of `a`, all of `b` and column c of `a`."""
        x, y = n.args
        assert isinstance(x, Node) and isinstance(y, Node)
        a, b = self.env[x.name], self.env[y.name]
        sa, sb = ((np.mod(t.v.astype(np.int64), 7) - 3).astype(np.float64) for t in (a, b))
        first = np.mod(np.matmul(sa, np.swapaxes(sb, -1, -2)), 7) - 3  # each block's
        v = np.matmul(first, sa)
        undef = (a.undef.any(axis=-1, keepdims=True) | b.undef.any(axis=(-2, -1), keepdims=True)
                 | a.undef.any(axis=-2, keepdims=True))
        return self._done(n, v.astype(np.float32), np.broadcast_to(undef, v.shape))

    def _k_loop(self, n: Node) -> Value:
        """program.KLoop: each block's (BM, BN) tile of A @ B over the loop's steps (each
        step's product minus the accumulator where it negates), A and B read as zero past
        their edges (the default padding) and past K: small integers, exact in f32."""
        loop = self.p.kloop
        assert loop is not None
        if loop.keys:
            return self._attention_loop(n)
        (bm, bn), (g0, g1) = self.p.tile, self.grid
        reach = min(loop.k, loop.steps * loop.bk)
        a = np.zeros((g0 * bm, loop.steps * loop.bk))
        b = np.zeros((loop.steps * loop.bk, g1 * bn))
        ka = self.arrays["ka"].astype(np.float64)
        ka = (ka.T if loop.a_mn_major else ka)[:g0 * bm, :reach]
        kb = self.arrays["kb"].astype(np.float64)
        kb = (kb.T if loop.b_k_major else kb)[:reach, :g1 * bn]
        a[:ka.shape[0], :reach] = ka
        b[:reach, :kb.shape[1]] = kb
        steps = (slice(t * loop.bk, (t + 1) * loop.bk) for t in range(loop.steps))
        return self._accumulated(n, (a[:, step] @ b[step] for step in steps))

    def _attention_loop(self, n: Node) -> Value:
        """program.KLoop with `keys`: per step, the scores `q @ k_t.T` (each block's q the
        rows of `ka` it loads, zero past the edges), mapped to `s % 7 - 3` (Python's `%`),
        times the step's rows of `kc`; keys past the end score 0 and meet zero rows."""
        loop = self.p.kloop
        assert loop is not None
        (bm, bn), (g0, g1) = self.p.tile, self.grid
        span = loop.steps * loop.keys
        reach = min(loop.k, span)
        q = np.zeros((g0 * bm, loop.bk))
        ka = self.arrays["ka"].astype(np.float64)[:g0 * bm]
        q[:ka.shape[0]] = ka
        keys, values = np.zeros((span, loop.bk)), np.zeros((span, g1 * bn))
        keys[:reach] = self.arrays["kb"].astype(np.float64)[:reach]
        kc = self.arrays["kc"].astype(np.float64)[:reach, :g1 * bn]
        values[:reach, :kc.shape[1]] = kc
        steps = (slice(t * loop.keys, (t + 1) * loop.keys) for t in range(loop.steps))
        return self._accumulated(n, ((np.mod(q @ keys[step].T, 7) - 3) @ values[step]
                                     for step in steps))

    def _accumulated(self, n: Node, products: Iterable[np.ndarray]) -> Value:
        """A K loop's accumulator over the whole output (rows, columns), from zeros, one
        step's product at a time (`0.0 - acc` first where it negates), as per-block tiles."""
        loop = self.p.kloop
        assert loop is not None
        (bm, bn), (g0, g1) = self.p.tile, self.grid
        acc = np.zeros((g0 * bm, g1 * bn))
        for product in products:
            acc = product + (0.0 - acc if loop.negate else acc)
        v = acc.reshape(g0, bm, g1, bn).transpose(0, 2, 1, 3)
        return self._done(n, v.astype(np.float32), np.zeros(v.shape, bool))

    def _reorder(self, n: Node) -> Value:
        """A layout round trip (the same tile), an i32 `cumsum` (wraps), or `argmax` /
        `argmin`: the index of the first extreme (NaN counts as one, as NumPy's), flat
        over the tile for `axis=None`; an index whose run of elements holds an unspecified
        one is unspecified."""
        (x,) = n.args
        assert isinstance(x, Node)
        src = self.env[x.name]
        if n.op == "roundtrip":
            return self._done(n, src.v, src.undef, src.err)
        if n.op == "cumsum":
            axis = self.nb + n.attr  # type: ignore[operator]
            return self._done(n, np.cumsum(src.v, axis=axis, dtype=np.int32),
                              np.cumsum(src.undef, axis=axis) > 0)
        kind, axis, keep = n.attr  # type: ignore[misc]
        f = np.argmax if kind == "argmax" else np.argmin
        if axis is None:  # over the flattened tile
            flat = src.v.reshape(self.grid + (-1,))
            v = f(flat, axis=-1).astype(np.int32)
            undef = np.any(src.undef.reshape(self.grid + (-1,)), axis=-1)
            if keep:
                v = v.reshape(self.grid + (1,) * len(x.shape))
                undef = undef.reshape(v.shape)
            return self._done(n, v, undef)
        v = f(src.v, axis=self.nb + axis).astype(np.int32)
        undef = np.any(src.undef, axis=self.nb + axis)
        if keep:
            v, undef = np.expand_dims(v, self.nb + axis), np.expand_dims(undef, self.nb + axis)
        return self._done(n, v, undef)

    def _reduce(self, n: Node) -> Value:
        kind, axis, keep = n.attr  # type: ignore[misc]
        (x,) = n.args
        assert isinstance(x, Node)
        src = self.env[x.name]
        axes = tuple(range(self.nb, src.v.ndim)) if axis is None else (self.nb + axis,)
        undef = np.any(src.undef, axis=axes, keepdims=keep)
        if not R.is_float(x.dtype):
            f = {"sum": np.sum, "max": np.max, "min": np.min}[kind]
            v = f(src.v, axis=axes, keepdims=keep, dtype=np.int32) if kind == "sum" else \
                f(src.v, axis=axes, keepdims=keep)  # an i32 sum wraps
            return self._done(n, v, undef)
        e = _err(src)
        if kind == "sum":
            wide = src.v.astype(np.float64)
            terms = np.prod([src.v.shape[a] for a in axes])
            mag = np.sum(np.abs(wide) + e, axis=axes, keepdims=keep)
            total = np.sum(wide, axis=axes, keepdims=keep)
            undef = undef | ~np.isfinite(mag) | (mag >= R.MAX["f32"] / 2)
            err = np.sum(e, axis=axes, keepdims=keep) + (terms + 2) * R.EPS["f32"] * mag \
                + terms * 2 * R.TINY["f32"]
            v = total.astype(R.NP[x.dtype])
            if x.dtype != "f32":  # summed in f32, rounded once more
                err = _rounded(err, v, x.dtype)
            return self._done(n, v, undef, err)
        f = np.max if kind == "max" else np.min
        v = f(src.v, axis=axes, keepdims=keep)
        zeros = src.v == 0
        mixed = np.any(zeros & np.signbit(src.v), axis=axes, keepdims=keep) & \
            np.any(zeros & ~np.signbit(src.v), axis=axes, keepdims=keep)
        undef = undef | np.any(np.isnan(src.v), axis=axes, keepdims=keep) | ((v == 0) & mixed)
        err = None if src.err is None else np.max(src.err, axis=axes, keepdims=keep)
        return self._done(n, v, undef, err)

    def _load(self, n: Node) -> Value:
        x = self.p.inputs[n.attr]  # type: ignore[index]
        arr = self.arrays[x.name]
        rank = len(x.tile)
        coords, inside = [], np.ones((), bool)
        for d, (size, at) in enumerate(zip(x.tile, x.index, strict=True)):
            block = self._bid("ijk".index(at)) if isinstance(at, str) else \
                self._full(np.array(at), ())
            shape = [1] * rank
            shape[d] = size
            c = self._lift(block.astype(np.int64) * size, 0, rank) + \
                np.arange(size).reshape(shape)
            inside = inside & (c >= 0) & (c < arr.shape[d])
            coords.append(np.clip(c, 0, arr.shape[d] - 1))
        coords = [np.broadcast_to(c, self.grid + x.tile) for c in coords]
        pad = R.constant(0 if x.padding is None else x.padding, x.dtype)
        v = np.broadcast_to(np.where(inside, arr[tuple(coords)], pad),  # (a 0-d array: one
                            self.grid + x.tile).reshape(self.grid + x.loaded)  # for all)
        return self._done(n, v, np.zeros(v.shape, bool))

    def _store(self, root: Value) -> Expected:
        """What `out` (the view) holds after the launch: tile (i, j) goes to rows
        i*BM.., columns j*BN.., clipped at the edge."""
        p = self.p
        parts = []
        for a in (root.v, root.undef, root.err):
            if a is None:
                parts.append(None)
                continue
            r = p.rank  # (grid..., tile...) -> (g0, b0, g1, b1, ...): the array's order
            a = a.transpose([k for d in range(r) for k in (d, r + d)]).reshape(
                [g * b for g, b in zip(self.grid, p.tile, strict=True)])
            parts.append(a[tuple(slice(0, s) for s in p.out_shape)])
        return Expected(parts[0], parts[1], parts[2])  # type: ignore[arg-type]


def _err(x: Value) -> np.ndarray:
    return np.zeros(x.v.shape) if x.err is None else x.err


def _rounded(err: np.ndarray, v: np.ndarray, dt: str) -> np.ndarray:
    """A bound after one more rounding to `dt`: one ulp relative, plus the smallest
    subnormal (both for the perturbed and the model's own rounding)."""
    mag = np.abs(v.astype(np.float64))
    return err * (1 + R.EPS[dt]) + 2 * R.EPS[dt] * mag + 2 * R.TINY[dt]


def _compare(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
            "eq": np.equal, "ne": np.not_equal}[op](a, b)


def _binary(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`a op b` in their (common) dtype: NumPy's i32 wraps, its floats round once."""
    if op == "shl":
        return (a.view(np.uint32) << b.astype(np.uint32)).view(np.int32)
    f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
         "floordiv": np.floor_divide, "mod": np.remainder, "and": np.bitwise_and,
         "or": np.bitwise_or, "xor": np.bitwise_xor, "shr": np.right_shift}[op]
    return f(a, b)


def evaluate(p: Program, arrays: dict[str, np.ndarray]) -> Expected:
    """The output view `p` must leave, given the arrays passed as its inputs."""
    return Model(p, arrays).run()
