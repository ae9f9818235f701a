"""Running generated programs through oxide and comparing with the model.

Each program is its own kernel module (written to a file: oxide's frontend reads the
source), launched once over its exact grid. The output is a view into a buffer of
random bits; after the launch the view must match the model and the rest of the
buffer must be untouched.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tools.source_modules import import_source
from tools.tile_fuzzing import rules as R
from tools.tile_fuzzing.data import make_arrays, make_scratch
from tools.tile_fuzzing.generator import generate
from tools.tile_fuzzing.model import Expected, evaluate
from tools.tile_fuzzing.program import Program

WORKER_PROGRAMS = 50  # programs a worker process runs before a fresh one replaces it


@dataclass
class Failure:
    """A program oxide got wrong (`kind` "mismatch") or could not run ("compile error":
    a CompileError, the generator's fault or oxide's; "launch error": anything else)."""

    kind: str
    program: Program
    device: str
    detail: str

    def report(self) -> str:
        p = self.program
        lines = [f"{self.kind.upper()} on {self.device} (seed {p.seed}, program {p.index}; "
                 f"rerun: python tools/tile_fuzz.py --seed {p.seed} --only {p.index})",
                 *("  | " + line for line in p.source().rstrip().split("\n")),
                 f"  launch: fuzz_kernel[{p.launch_grid}]({', '.join(launch_description(p))})",
                 *("  " + line for line in self.detail.split("\n"))]
        return "\n".join(lines)


@dataclass
class Outcome:
    """One program's result: elements compared, and its failure if any."""

    checked: int = 0
    failure: Failure | None = None


def launch_description(p: Program) -> list[str]:
    """The arguments as a reader needs them: shapes, views, paddings, scalars, Consts."""
    out = []
    for x in p.inputs:
        v = "" if x.buffer == x.shape else f" view of {x.buffer} at {x.offset}"
        out.append(f"{x.name}={x.dtype}{list(x.shape)}{v} (padding={x.padding})")
    if p.kloop is not None:
        out += [f"{name}={p.kloop.dtype}{list(shape)}" for name, shape in p.kloop.arrays.items()]
    v = "" if p.out_buffer == p.out_shape else f" view of {p.out_buffer} at {p.out_offset}"
    lead = " as out_all[0] (out_all: a leading axis of 1)" if p.out_view else ""
    out.append(f"out={p.out_dtype}{list(p.out_shape)}{v}{lead}")
    out += [f"{s.name}={s.dtype}{list(s.shape)}" for s in p.scratch]
    out += [f"{s.name}={s.dtype}({s.value!r})" for s in p.params]
    out += [f"{n}={v}" for n, v in zip(p.tile_names, p.tile, strict=True)]
    return out


def load_kernel(p: Program) -> Any:
    """Import the program's kernel (from a real file: diagnostics and the frontend need
    its source)."""
    return import_source(f"oxtilefuzz_{p.seed}_{p.index}", p.source()).fuzz_kernel


def run_program(seed: int, index: int, device: str,
                model: Callable[[Program, dict[str, np.ndarray]], Expected] = evaluate
                ) -> Outcome:
    """Generate program `index` of `seed`, run it on `device` and compare."""
    import oxide as ox

    p = generate(seed, index)
    inputs, buffer, out = make_arrays(p)
    before = buffer.copy()
    expected = model(p, inputs)
    if p.out_atomic:
        expected = added(p, expected, out.copy())
    args = [*inputs.values(), out[None] if p.out_view else out, *make_scratch(p),
            *(R.NP[s.dtype](s.value) for s in p.params), *p.tile]
    try:
        kernel = load_kernel(p)
        with ox.device("cpu") if device == "cpu" else ox.device(0):
            kernel[p.launch_grid](*args)
            ox.synchronize()
    except ox.CompileError as exc:
        return Outcome(0, Failure("compile error", p, device, f"{type(exc).__name__}: {exc}"))
    except Exception as exc:
        return Outcome(0, Failure("launch error", p, device, f"{type(exc).__name__}: {exc}"))
    checked, detail = compare(p, expected, out, before, buffer)
    return Outcome(checked, None if detail is None else Failure("mismatch", p, device, detail))


def flushed(v: np.ndarray) -> np.ndarray:
    """f32 values with the subnormals flushed to zeros of their sign."""
    return np.where(np.abs(v) < np.float32(2.0 ** -126), np.copysign(np.float32(0), v), v)


def added(p: Program, e: Expected, start: np.ndarray) -> Expected:
    """The output an atomic add of the model's values leaves in `start`: i32 wraps; f32
    flushes subnormal inputs and results (global memory's `atom.add.f32`, the language's
    rule). A bounded value's bound grows by the sum's rounding and a flushed result."""
    if p.out_dtype == "i32":
        return Expected((start + e.value).astype(np.int32), e.undef, e.err)
    with np.errstate(invalid="ignore", over="ignore"):
        value = flushed(flushed(start) + flushed(e.value)).astype(np.float32)
        err = None
        if e.err is not None:
            slack = np.abs(value.astype(np.float64)) * 2.0 ** -23 + 2.0 ** -125
            err = np.where(e.err > 0, e.err + slack, e.err)
    return Expected(value, e.undef, err)


def compare(p: Program, e: Expected, got: np.ndarray, before: np.ndarray,
            after: np.ndarray) -> tuple[int, str | None]:
    """(elements compared, None or what differs first): integers and exact floats bit for
    bit (NaNs alike), bounded floats within their bound, unspecified ones not at all,
    and the buffer around the view untouched."""
    defined = ~e.undef
    if R.is_float(p.out_dtype):
        nan = np.isnan(got) & np.isnan(e.value)
        same = nan | (got.view(f"u{got.itemsize}") == e.value.view(f"u{got.itemsize}"))
        if e.err is not None:
            with np.errstate(invalid="ignore"):  # inf - inf: NaN, never within a bound
                diff = np.abs(got.astype(np.float64) - e.value.astype(np.float64))
            same = np.where(e.err > 0, same | (diff <= e.err), same)  # (inf == inf too)
    else:
        same = got == e.value
    bad = np.argwhere(defined & ~same)
    if len(bad):
        at = tuple(int(k) for k in bad[0])
        tol = "" if e.err is None else f" (tolerance {e.err[at]:.3g})"
        return int(defined.sum()), (
            f"at out{list(at)}: expected {e.value[at]!r}{tol}, got {got[at]!r} "
            f"({len(bad)} of {int(defined.sum())} compared elements differ)")
    outside = np.ones(before.shape, bool)
    outside[tuple(slice(o, o + n) for o, n in zip(p.out_offset, p.out_shape, strict=True))] = False
    raw = f"u{before.itemsize}"
    moved = np.argwhere(outside & (before.view(raw) != after.view(raw)))
    if len(moved):
        at = tuple(int(k) for k in moved[0])
        return int(defined.sum()), (f"wrote outside the view: buffer{list(at)} was "
                                    f"{before[at]!r}, is {after[at]!r}")
    return int(defined.sum()), None


@dataclass
class Summary:
    """Totals of a run; `failures` holds every failing program, in program order."""

    seed: int
    device: str
    programs: int = 0
    checked: int = 0
    failures: list[Failure] = field(default_factory=list)

    def count(self, kind: str) -> int:
        return sum(f.kind == kind for f in self.failures)

    def line(self) -> str:
        return (f"tile fuzz seed {self.seed} on {self.device}: {self.programs} programs, "
                f"{self.checked} results checked, {self.count('mismatch')} mismatches, "
                f"{self.count('compile error')} compile errors, "
                f"{self.count('launch error')} launch errors")


def _job(args: tuple[int, int, str]) -> Outcome:
    return run_program(*args)


def fuzz(seed: int, indices: Iterable[int], device: str = "cpu", jobs: int = 1,
         progress: Callable[[Summary], None] | None = None) -> Summary:
    """Run programs `indices` of `seed` on `device`, over `jobs` processes; the
    summary is the same whatever `jobs` is."""
    os.environ.setdefault("OXIDE_CACHE", "0")  # every kernel is new: keep them off the disk
    summary = Summary(seed, device)
    work = [(seed, k, device) for k in indices]

    def take(outcomes: Iterable[Outcome]) -> None:
        for o in outcomes:
            summary.programs += 1
            summary.checked += o.checked
            if o.failure is not None:
                summary.failures.append(o.failure)
            if progress is not None:
                progress(summary)

    if jobs > 1:
        ctx = multiprocessing.get_context("spawn")  # CUDA cannot be forked
        with ctx.Pool(jobs, maxtasksperchild=WORKER_PROGRAMS) as pool:
            take(pool.imap(_job, work, chunksize=4))
    else:
        take(_job(w) for w in work)
    return summary
