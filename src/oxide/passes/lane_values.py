"""Values of every thread of a block at once, for the shared-memory race proof.

The race proof (passes/shared_races.py) runs a kernel's IR over all threads of one block
together. Each IR value is a `Lanes`: one entry per (virtual) thread, each an affine form

    conc + sum(coef[a] * atom_a)

over *atoms*: values that are the same for every thread of the block but unknown at
compile time (a scalar parameter, `block_idx`, an array's extent, a load at a uniform
index, a loop counter after widening). `conc` and the coefficients are concrete per
thread, so `thread_idx.x * 4 + k` is exact, and `t + s` stays exact when `s` is an atom.
A thread whose value cannot be written this way (a product of two atoms, a float read
from memory, a bit trick on an atom) holds `top`: unknown.

Everything is sound by over-approximation: an operation oxide cannot follow gives `top`,
and the race proof treats `top` indices as "could be any cell".
"""

from __future__ import annotations

from itertools import count

import numpy as np
from xdsl.dialects.builtin import AnyFloat, IntegerType, Signedness
from xdsl.ir import Attribute

_ATOMS = count(1)


def fresh_atom() -> int:
    """A new atom id: a block-uniform value about which nothing else is known."""
    return next(_ATOMS)


class Lanes:
    """One affine value per lane; see the module docstring."""

    __slots__ = ("conc", "coef", "top")

    def __init__(self, conc: np.ndarray, coef: dict[int, np.ndarray] | None = None,
                 top: np.ndarray | None = None) -> None:
        self.conc = conc
        self.coef = coef or {}
        self.top = top if top is not None else np.zeros(len(conc), bool)

    # ------------------------------------------------------------------ construction
    @staticmethod
    def const(value: float | int, n: int) -> Lanes:
        dt = np.float64 if isinstance(value, float) else np.int64
        return Lanes(np.full(n, value, dt))

    @staticmethod
    def unknown(n: int, is_float: bool = False) -> Lanes:
        return Lanes(np.zeros(n, np.float64 if is_float else np.int64), None, np.ones(n, bool))

    @staticmethod
    def atom(atom: int, n: int) -> Lanes:
        return Lanes(np.zeros(n, np.int64), {atom: np.ones(n, np.int64)})

    # ------------------------------------------------------------------ queries
    @property
    def is_float(self) -> bool:
        return self.conc.dtype.kind == "f"

    def symbolic(self) -> np.ndarray:
        """Lanes whose value involves an atom."""
        out = np.zeros(len(self.conc), bool)
        for c in self.coef.values():
            out |= c != 0
        return out

    def known(self) -> np.ndarray:
        """Lanes with a concrete value (no atom, not top)."""
        return ~self.top & ~self.symbolic()

    def signature(self, lane: int) -> tuple[tuple[int, int], ...]:
        """The atom part of one lane, as a hashable key."""
        return tuple(sorted((a, int(c[lane])) for a, c in self.coef.items() if c[lane]))

    def lanes_equal(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Elementwise: lane i[k] and lane j[k] certainly hold the same value."""
        same = ~self.top[i] & ~self.top[j] & (self.conc[i] == self.conc[j])
        for c in self.coef.values():
            same &= c[i] == c[j]
        return same

    def uniform_over(self, mask: np.ndarray) -> bool:
        """Every lane in `mask` holds one value (concrete or symbolic), none top."""
        idx = np.flatnonzero(mask)
        if not len(idx) or self.top[idx].any():
            return False
        first = np.full(len(idx), idx[0])
        return bool(self.lanes_equal(idx, first).all())

    # ------------------------------------------------------------------ lane surgery
    def take(self, idx: np.ndarray) -> Lanes:
        return Lanes(self.conc[idx], {a: c[idx] for a, c in self.coef.items()}, self.top[idx])

    def assign(self, mask: np.ndarray, other: Lanes) -> None:
        """self[mask] = other[mask] (in place)."""
        if other.is_float and not self.is_float:
            self.conc = self.conc.astype(np.float64)
        self.conc[mask] = other.conc[mask]
        for a in set(self.coef) | set(other.coef):
            mine = self.coef.get(a)
            if mine is None:
                mine = self.coef[a] = np.zeros(len(self.conc), np.int64)
            theirs = other.coef.get(a)
            mine[mask] = theirs[mask] if theirs is not None else 0
        self.top[mask] = other.top[mask]

    def forget(self, mask: np.ndarray) -> None:
        """Make the lanes in `mask` unknown (in place)."""
        self.top = self.top | mask

    def copy(self) -> Lanes:
        return Lanes(self.conc.copy(), {a: c.copy() for a, c in self.coef.items()},
                     self.top.copy())


def int_range(t: Attribute) -> tuple[int, int] | None:
    """The values an integer IR type holds (None for floats and bools)."""
    if not isinstance(t, IntegerType) or t.width.data == 1:
        return None
    bits = t.width.data
    if t.signedness.data == Signedness.UNSIGNED:
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def is_float_type(t: Attribute) -> bool:
    return isinstance(t, AnyFloat)


def clip_to(value: Lanes, t: Attribute) -> Lanes:
    """Lanes whose concrete value leaves the type's range become unknown (they would wrap,
    and the proof does not follow wrapping)."""
    rng = int_range(t)
    if rng is None or value.is_float:
        return value
    lo, hi = rng
    if not len(value.conc) or (value.conc.min() >= lo and value.conc.max() <= hi):
        return value  # the common case, cheaply
    out = (value.conc < lo) | (value.conc > hi)
    value.top = value.top | out
    return value


def affine(kind: str, a: Lanes, b: Lanes) -> Lanes:
    """`a kind b` for add, sub and mul, keeping atoms where the form stays affine."""
    n = len(a.conc)
    if kind in ("add", "sub"):
        sign = 1 if kind == "add" else -1
        with np.errstate(all="ignore"):
            conc = a.conc + sign * b.conc
        coef = {k: v.copy() for k, v in a.coef.items()}
        for k, v in b.coef.items():
            coef[k] = coef.get(k, np.zeros(n, np.int64)) + sign * v
        return Lanes(conc, coef, a.top | b.top)
    # mul: one side must be concrete in each lane
    a_sym, b_sym = a.symbolic(), b.symbolic()
    with np.errstate(all="ignore"):
        conc = a.conc * b.conc
    coef: dict[int, np.ndarray] = {}
    for k in set(a.coef) | set(b.coef):
        ca = a.coef.get(k, np.zeros(n, np.int64))
        cb = b.coef.get(k, np.zeros(n, np.int64))
        if a.is_float or b.is_float:
            continue
        coef[k] = ca * b.conc.astype(np.int64) + cb * a.conc.astype(np.int64)
    top = a.top | b.top | (a_sym & b_sym)
    if a.is_float or b.is_float:
        top = top | a_sym | b_sym
    return Lanes(conc, coef, top)


def concrete(kind: str, a: Lanes, b: Lanes) -> Lanes:
    """An operation oxide follows only on concrete lanes (division, bits, shifts...)."""
    ok = a.known() & b.known()
    x, y = a.conc, b.conc
    with np.errstate(all="ignore"):
        if kind == "floordiv":
            safe = np.where(y == 0, 1, y)
            conc = np.floor_divide(x, safe)
            ok &= y != 0
        elif kind == "mod":
            safe = np.where(y == 0, 1, y)
            conc = np.mod(x, safe)
            ok &= y != 0
        elif kind == "div":
            conc = np.true_divide(x, np.where(y == 0, 1, y))
            ok &= y != 0
        elif kind in ("and", "or", "xor", "shl", "shr") and (a.is_float or b.is_float):
            conc, ok = x, ok & False
        elif kind == "and":
            conc = np.bitwise_and(x, y)
        elif kind == "or":
            conc = np.bitwise_or(x, y)
        elif kind == "xor":
            conc = np.bitwise_xor(x, y)
        elif kind == "shl":
            good = (y >= 0) & (y < 63)
            conc = np.left_shift(x, np.where(good, y, 0))
            ok &= good
        elif kind == "shr":
            good = (y >= 0) & (y < 63)
            conc = np.right_shift(x, np.where(good, y, 0))
            ok &= good
        elif kind == "min":
            conc = np.minimum(x, y)
        elif kind == "max":
            conc = np.maximum(x, y)
        elif kind == "pow":
            conc, ok = np.power(x.astype(np.float64), y), ok & False
        else:
            raise KeyError(kind)
    return Lanes(conc, None, ~ok)


def compare(pred: str, a: Lanes, b: Lanes, mask: np.ndarray) -> Lanes:
    """`a pred b`: concrete where the difference is; one fresh atom (a block-uniform
    unknown truth value) for the lanes of `mask` where the difference is one and the same
    symbolic value in all of them; unknown elsewhere."""
    if a.is_float or b.is_float:  # no atoms; IEEE comparisons (NaN compares false)
        known = a.known() & b.known()
        with np.errstate(all="ignore"):
            result = {"lt": np.less, "le": np.less_equal, "gt": np.greater,
                      "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal}[pred](
                a.conc, b.conc)
        return Lanes(result.astype(np.int64), None, ~known)
    diff = affine("sub", a, b)
    known = diff.known()
    d = diff.conc
    with np.errstate(all="ignore"):
        result = {"lt": d < 0, "le": d <= 0, "gt": d > 0, "ge": d >= 0, "eq": d == 0,
                  "ne": d != 0}[pred]
    out = Lanes(result.astype(np.int64), None, ~known)
    unknown = mask & diff.symbolic() & ~diff.top
    if unknown.any() and diff.uniform_over(unknown):
        out.assign(unknown, Lanes.atom(fresh_atom(), len(d)))
    return out
