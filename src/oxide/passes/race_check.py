"""Comparing the accesses the race proof records (passes/shared_races.py), and saying why.

A *record* (`Access`) is one array access by a group of threads (lanes) of the block run,
with each lane's index as a `lane_values.Lanes` per dimension. Two questions:

- `check_phase`: the shared accesses of one phase. No cell may be written by two threads,
  nor written by one and read by another; atomics conflict only with plain accesses.
- `check_mapped`: a DisjointSlice's accesses at index maps, over the whole kernel: within a
  block as above (phases do not help: elements belong to threads), and between blocks
  through the `block_idx` scales.

Indices compare exactly where the records share their symbolic part; otherwise a gcd test
may still tell them apart (`buf` from `1 - buf`; a thread's own trip count from another's);
otherwise the answer is "cannot prove", with the reason. Every failure is a SafetyError
naming the array, the cell, both places and two threads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.ir import SSAValue

from oxide.errors import SafetyError
from oxide.ir.sites import Site
from oxide.ir.types import SharedArrayType
from oxide.passes.lane_values import Lanes


def is_shared(array: SSAValue) -> bool:
    t = array.type
    return isinstance(t, SharedArrayType) and t.space.data == "shared"


@dataclass
class Access:
    """One shared access in one phase, by a group of lanes."""

    array: SSAValue
    kind: str  # "read", "write" or "atomic"
    site: int
    threads: list[int]
    index: list[Lanes]  # one per dimension, over exactly these lanes


@dataclass
class Atoms:
    """What the proof knows of its unknowns, shared by the block run and the checks."""

    ids: dict[Any, int] = field(default_factory=dict)  # a named unknown -> its atom
    grid_uniform: set[int] = field(default_factory=set)  # one value over the whole launch
    free: set[int] = field(default_factory=set)  # a thread's own trip count
    grid_strides: dict[int, tuple[str, int]] = field(default_factory=dict)  # atom -> (axis, k)


class RaceChecker:
    """The comparisons and their diagnostics, for one kernel and block shape."""

    def __init__(self, sites: list[Site], shape: tuple[int, int, int], unknowns: Atoms
                 ) -> None:
        self.sites = sites
        self.shape = shape
        self.unknowns = unknowns
        self.grid_axes: set[str] = set()  # axes mapped writes tell blocks apart by

    def check_phase(self, records: list[Access]) -> None:
        by_array: dict[Any, list[Access]] = {}
        for r in records:
            by_array.setdefault(memory(r.array), []).append(r)
        for accesses in by_array.values():
            if all(a.kind == "read" for a in accesses) or all(
                    a.kind == "atomic" for a in accesses):
                continue
            for a in accesses:
                self._require_known(a)
            self._find_race(accesses)

    def check_mapped(self, writes: list[Access]) -> None:
        """DisjointSlice writes at index maps: one thread per element over the launch.
        In one block, no two threads write one element (whatever the phase); between
        blocks, each grid axis the map uses moves it by more than a block's spread."""
        by_array: dict[SSAValue, list[Access]] = {}
        for a in writes:
            by_array.setdefault(a.array, []).append(a)
        block_atoms = {self.unknowns.ids[("reg", f"ctaid.{axis}")]: axis for axis in "xyz"
                       if ("reg", f"ctaid.{axis}") in self.unknowns.ids}
        for accesses in by_array.values():
            for a in accesses:
                self._require_known(a)
                for ix in a.index:
                    strange = (set(ix.coef) - self.unknowns.grid_uniform - set(block_atoms)
                               - self.unknowns.free)
                    if any(ix.coef[s].any() for s in strange):
                        raise self._unprovable(a, a.threads[0], None, "a value that may "
                                               "differ between blocks (read from memory, or "
                                               "changed by a loop)")
            self._find_race(accesses)
            self._blocks_apart(accesses, block_atoms)

    def _blocks_apart(self, accesses: list[Access], block_atoms: dict[int, str]) -> None:
        """Each block coordinate the index uses appears in one dimension, with one scale in
        every access, larger than the spread of that dimension within a block: blocks never
        share an element."""
        first = accesses[0]
        dims = len(first.index)
        for atom, axis in block_atoms.items():
            uses = {(d, int(a.index[d].coef[atom][0])) for a in accesses for d in range(dims)
                    if atom in a.index[d].coef and a.index[d].coef[atom].any()}
            if not uses:
                continue
            d, scale = min(uses)
            others = [a2 for a2 in block_atoms if a2 != atom for a in accesses
                      if a2 in a.index[d].coef and a.index[d].coef[a2].any()]
            users = [a for a in accesses if atom in a.index[d].coef
                     and (a.index[d].coef[atom] == scale).all()]
            conc = np.concatenate([a.index[d].conc for a in accesses])
            spread = int(conc.max() - conc.min()) if len(conc) else 0
            # a thread's own trip count leaves the block's range, except a grid stride on
            # this axis by a multiple of the scale: block_idx + grid_dim * k names one block
            unbounded = any(a.index[d].coef[f].any() for a in accesses for f in self.unknowns.free
                            if f in a.index[d].coef and not (
                                self.unknowns.grid_strides.get(f, ("", 0))[0] == axis
                                and (a.index[d].coef[f] % scale == 0).all()
                                and (a.index[d].coef[f] // scale > 0).all()))
            if len(uses) > 1 or len(users) < len(accesses):
                raise self._unprovable(first, first.threads[0], d, f"block_idx.{axis}, "
                                       "scaled differently by the kernel's accesses to this "
                                       "array (its writes at index maps, and its reads)",
                                       blocks=True)
            if others or unbounded or spread >= abs(scale):
                raise self._unprovable(first, first.threads[0], d, f"block_idx.{axis} in a "
                                       f"way that may let two blocks write one element (a "
                                       f"block's threads spread over {spread + 1} values "
                                       f"of dimension {d}, while block_idx.{axis} moves it "
                                       f"by {abs(scale)})", blocks=True)
            self.grid_axes.add(axis)

    def _require_known(self, a: Access) -> None:
        for d, ix in enumerate(a.index):
            if ix.top.any():
                lane = int(np.flatnonzero(ix.top)[0])
                raise self._unprovable(a, a.threads[lane], d, "a value oxide cannot follow "
                                       "at compile time (data read from memory, or "
                                       "arithmetic it does not track)")

    def _find_race(self, accesses: list[Access]) -> None:
        """Two accesses by different threads to one cell, one of them a plain write, or
        an atomic against a plain access. Accesses whose indices have the same symbolic
        part compare exactly (the common case: none has one); others are told apart by
        a divisibility test or not at all."""
        sizes = {_itemsize(a.array) for a in accesses}
        if len(sizes) > 1:  # views of one dynamic shared memory with different types
            a = next(a for a in accesses if a.kind != "read")
            raise self._unprovable(a, a.threads[0], None, "views of the dynamic shared "
                                   "memory with elements of different sizes")
        groups: dict[Any, list[Access]] = {}
        for a in accesses:
            sig = _uniform_signature(a)
            if sig is None:
                raise self._unprovable(a, a.threads[0], None, "a value known only at run "
                                       "time that differs between threads")
            groups.setdefault(sig, []).append(a)
        for sig, members in groups.items():
            if not self._has_free(sig):
                self._exact_race(members)
                continue
            for i, x in enumerate(members):  # threads at different trips of a loop
                for y in members[i:]:
                    if _conflicting_kinds(x.kind, y.kind):
                        self._modular_race(x, sig, y, sig)
        sigs = list(groups)
        for i, sx in enumerate(sigs):
            for sy in sigs[i + 1:]:
                for x in groups[sx]:
                    for y in groups[sy]:
                        if _conflicting_kinds(x.kind, y.kind):
                            self._modular_race(x, sx, y, sy)

    def _has_free(self, sig: tuple[Any, ...]) -> bool:
        return any(atom in self.unknowns.free for dim in sig for atom, _ in dim)

    def _exact_race(self, accesses: list[Access]) -> None:
        """Races among accesses whose indices differ only in their concrete parts."""
        kinds = {"read": 0, "write": 1, "atomic": 2}
        cells = np.concatenate([np.stack([ix.conc for ix in a.index], axis=1)
                                for a in accesses])
        threads = np.concatenate([np.asarray(a.threads) for a in accesses])
        kind = np.concatenate([np.full(len(a.threads), kinds[a.kind]) for a in accesses])
        which = np.concatenate([np.full(len(a.threads), i) for i, a in enumerate(accesses)])
        _, cell = np.unique(cells, axis=0, return_inverse=True)
        cell = cell.reshape(-1)

        def report(i: int, j: int) -> SafetyError:
            first, second = (i, j) if kind[i] != 0 else (j, i)
            return self._race((int(threads[first]), accesses[which[first]]),
                              (int(threads[second]), accesses[which[second]]),
                              tuple(int(c) for c in cells[second]))

        # per cell, the plain writers, then any access by another thread
        for writer_kind, against in ((1, (0, 1, 2)), (2, (0, 1))):
            w = np.flatnonzero(kind == writer_kind)
            if not len(w):
                continue
            order = w[np.lexsort((threads[w], cell[w]))]
            first_of: dict[int, int] = {}
            last_of: dict[int, int] = {}
            for e in order.tolist():  # the lowest and highest writing thread of each cell
                first_of.setdefault(int(cell[e]), e)
                last_of[int(cell[e])] = e
            if writer_kind == 1:  # two writers of one cell
                for c, e in first_of.items():
                    if threads[last_of[c]] != threads[e]:
                        raise report(e, last_of[c])
            for e in np.flatnonzero(np.isin(kind, against)).tolist():
                c = int(cell[e])
                got = first_of.get(c)
                if got is None:
                    continue
                other = got if threads[got] != threads[e] else last_of[c]
                if threads[other] != threads[e]:
                    raise report(other, e)

    def _modular_race(self, x: Access, sx: tuple[Any, ...], y: Access,
                      sy: tuple[Any, ...]) -> None:
        """Accesses whose indices differ in their symbolic parts: a dimension whose
        difference `sum(d_a * atom_a) + (cx - cy)` can be 0 only where the gcd of the `d_a`
        divides `cy - cx` (`buf[s, t]` against `buf[1 - s, t]`: 2s = 1 has no solution).
        A pair of threads not told apart this way is reported as unproved."""
        keys_x, keys_y = [], []
        for d, (dx, dy) in enumerate(zip(sx, sy, strict=True)):
            # a thread's own trip count is a different unknown in each of the two threads
            coef: dict[Any, int] = {("x", a) if a in self.unknowns.free else a: c for a, c in dx}
            for atom, c in dy:
                key = ("y", atom) if atom in self.unknowns.free else atom
                coef[key] = coef.get(key, 0) - c
            g = int(np.gcd.reduce([abs(c) for c in coef.values() if c])) if any(
                coef.values()) else 0
            if g == 1:
                continue  # any difference is reachable: this dimension cannot separate
            cx, cy = x.index[d].conc, y.index[d].conc
            keys_x.append(cx % g if g else cx)
            keys_y.append(cy % g if g else cy)
        tx, ty = np.asarray(x.threads), np.asarray(y.threads)
        if keys_x:
            kx = np.stack(keys_x, axis=1)
            ky = np.stack(keys_y, axis=1)
            _, inv = np.unique(np.concatenate([kx, ky]), axis=0, return_inverse=True)
            inv = inv.reshape(-1)
            ix, iy = inv[:len(kx)], inv[len(kx):]
        else:
            ix, iy = np.zeros(len(tx), np.int64), np.zeros(len(ty), np.int64)
        for key in np.intersect1d(ix, iy).tolist():
            threads_x = np.unique(tx[ix == key])
            threads_y = np.unique(ty[iy == key])
            if len(threads_x) > 1 or len(threads_y) > 1 or threads_x[0] != threads_y[0]:
                raise self._unprovable(y, int(threads_y[0]), None, "a value known only at "
                                       "run time, in a way that differs between accesses",
                                       other=x)

    # ------------------------------------------------------------------ diagnostics
    def thread_name(self, t: int) -> str:
        bx, by, bz = self.shape
        x, y, z = t % bx, (t // bx) % by, t // (bx * by)
        if by == 1 and bz == 1:
            return f"thread {x}"
        if bz == 1:
            return f"thread (x={x}, y={y})"
        return f"thread (x={x}, y={y}, z={z})"

    def _race(self, first: tuple[int, Access], second: tuple[int, Access],
              cell: tuple[int, ...]) -> SafetyError:
        (t1, a1), (t2, a2) = first, second
        s1, s2 = self.sites[a1.site], self.sites[a2.site]
        name = s2.detail
        where = f"`{name}[{', '.join(map(str, cell))}]`"
        if not is_shared(a2.array) and "read" in (a1.kind, a2.kind):
            (tr, ar), (tw, aw) = (first, second) if a1.kind == "read" else (second, first)
            sr_, sw = self.sites[ar.site], self.sites[aw.site]
            return SafetyError(
                f"{self.thread_name(tr)} reads {where} of DisjointSlice `{name}` at {sr_.span}, "
                f"an element {self.thread_name(tw)} of its block writes at {sw.span}",
                sr_.span, label=f"written by another thread at line {sw.span.line}",
                hint="a DisjointSlice element belongs to the thread that writes it: read only "
                     "what this thread writes, or pass the values in a separate Slice")
        if not is_shared(a2.array):  # a DisjointSlice written at an index map
            at = f"at {s1.span}" if s1.span == s2.span else f"at {s1.span} and {s2.span}"
            return SafetyError(
                f"two threads write one element of DisjointSlice `{name}`: "
                f"{self.thread_name(t1)} and {self.thread_name(t2)} of a block both write {where} "
                f"({at})", s2.span, label=f"collides with line {s1.span.line}",
                hint="a DisjointSlice element belongs to one thread of the launch: make the "
                     "index map one-to-one in the thread (or write at thread.index_1d())")
        verb = {"read": "reads", "write": "writes", "atomic": "updates (atomically)"}
        if a1.kind != "read" and a2.kind != "read" and "atomic" not in (a1.kind, a2.kind):
            at = f"at {s1.span}" if s1.span == s2.span else f"at {s1.span} and {s2.span}"
            message = (f"{self.thread_name(t1)} and {self.thread_name(t2)} both write {where} in "
                       f"the same phase ({at})")
            hint = ("make each thread write its own cells: index with the thread's "
                    "position (`ox.thread_idx`, `thread.in_block()`) so no two threads "
                    "share a cell, or combine through `ox.atomic.*`")
        else:
            message = (f"{self.thread_name(t2)} {verb[a2.kind]} {where} at {s2.span} while "
                       f"{self.thread_name(t1)} {verb[a1.kind]} it at {s1.span}, in the same "
                       "phase")
            hint = ("add `ox.sync_threads()` between them, reached by every thread of the "
                    "block" if "atomic" not in (a1.kind, a2.kind) else
                    "keep atomic updates and plain accesses of a cell in different phases "
                    "(an `ox.sync_threads()` between them)")
        return SafetyError(f"data race on shared array `{name}`: {message}", s2.span,
                           label=f"races with line {s1.span.line}", hint=hint)

    def _unprovable(self, a: Access, thread: int, dim: int | None, why: str,
                    other: Access | None = None, blocks: bool = False) -> SafetyError:
        site = self.sites[a.site]
        name = site.detail
        also = ""
        if other is not None and other is not a:
            also = f" and the access at {self.sites[other.site].span}"
        if is_shared(a.array):
            what = f"the threads of a block use different cells of shared array `{name}`"
            hint = ("index shared arrays with expressions of `ox.thread_idx` (or "
                    "`thread.in_block()`), constants, block-uniform values and loop counters; "
                    "or take responsibility with `with ox.unsafe():`")
        else:
            what = (f"{'blocks' if blocks else 'threads'} write different elements of "
                    f"DisjointSlice `{name}`")
            hint = ("write at `thread.index_1d()`/`index_2d()`, or at a map like "
                    "`block_idx.x * TILE + thread_idx.x` (with `k * ROWS` steps of an "
                    "unrolled loop) that gives every thread of the launch its own elements; "
                    "or take responsibility with `with ox.unsafe():`")
        return SafetyError(f"cannot prove {what}: the index here{also} depends on {why}",
                           site.span, label=f"in {self.thread_name(thread)}, this index is not "
                           "known" if not blocks else "blocks may overlap here", hint=hint)


def _conflicting_kinds(a: str, b: str) -> bool:
    """Whether accesses of these kinds race on one cell (atomics do not with atomics)."""
    return "write" in (a, b) or ("atomic" in (a, b) and "read" in (a, b))


def memory(array: SSAValue) -> Any:
    """What an array's cells are: every `ox.shared.dynamic()` view is one memory."""
    t = array.type
    if isinstance(t, SharedArrayType) and t.shape.data == "?":
        return "dynamic shared memory"
    return array


def _itemsize(array: SSAValue) -> int:
    t = array.type
    elem = getattr(t, "elem", None) or getattr(t, "dtype", None)
    width = getattr(elem, "width", None) or getattr(elem, "bitwidth", None)
    return int(getattr(width, "data", width) or 0)


def _uniform_signature(a: Access) -> tuple[tuple[tuple[int, int], ...], ...] | None:
    """The atom part of every dimension of `a`'s index, when it is one for all its lanes."""
    out = []
    for ix in a.index:
        dim = []
        for atom, c in sorted(ix.coef.items()):
            if not len(c) or not (c == c[0]).all():
                return None
            if c[0]:
                dim.append((atom, int(c[0])))
        out.append(tuple(dim))
    return tuple(out)
