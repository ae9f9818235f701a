"""Running many batches, on one process or several, and summing up what they found."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tools.fuzzing.harness import (
    Mismatch,
    load_kernel,
    make_batch,
    module_source,
    reference,
    run_batch,
)

WORKER_BATCHES = 20  # batches a worker process runs before a fresh one replaces it


@dataclass
class Summary:
    """Totals of a fuzzing run; `mismatches` holds every disagreement found."""

    seed: int
    programs: int = 0
    kernels: int = 0
    pairs: dict[str, int] = field(default_factory=dict)
    fault_launches: dict[str, int] = field(default_factory=dict)
    mismatches: list[Mismatch] = field(default_factory=list)

    def add(self, device: str, pairs: int, faults: int) -> None:
        self.pairs[device] = self.pairs.get(device, 0) + pairs
        self.fault_launches[device] = self.fault_launches.get(device, 0) + faults

    def line(self) -> str:
        per = "; ".join(f"{d}: {self.pairs[d]} results compared, {self.fault_launches[d]} fault "
                        f"launches" for d in self.pairs)
        bad = len({(m.batch.index, m.program) for m in self.mismatches})
        return (f"fuzz seed {self.seed}: {self.programs} programs in {self.kernels} kernels; {per}; "
                f"{len(self.mismatches)} mismatches in {bad} programs")


def run_one(seed: int, index: int, per_kernel: int, vectors: int,
            devices: tuple[str, ...]) -> tuple[int, dict[str, tuple[int, int]], list[Mismatch]]:
    """Generate, compile and check batch `index` of `seed` on each device."""
    b = make_batch(seed, index, per_kernel, vectors)
    expected = reference(b)
    kernel = load_kernel(b, module_source(b))
    counts: dict[str, tuple[int, int]] = {}
    mismatches: list[Mismatch] = []
    for device in devices:
        out = run_batch(b, device, expected, kernel)
        counts[device] = (out.pairs, out.fault_launches)
        mismatches += out.mismatches
    return len(b.programs), counts, mismatches


def _job(args: tuple[int, int, int, int, tuple[str, ...]]
         ) -> tuple[int, dict[str, tuple[int, int]], list[Mismatch]]:
    return run_one(*args)


def fuzz(seed: int, programs: int, devices: tuple[str, ...] = ("cpu",), per_kernel: int = 50,
         vectors: int = 32, jobs: int = 1,
         progress: Callable[[Summary, int, float], None] | None = None,
         batch_seconds: float = 600.0) -> Summary:
    """Check `programs` generated programs (in kernels of `per_kernel`) on `devices`.

    Batch `i` of a seed is the same on every run with the same `per_kernel` and
    `vectors`, whatever `jobs` is. `progress(summary, batches_left, seconds)` is
    called after each batch, so a run cut short by a time limit still says how far
    it got and what it found. With `jobs` > 1, a batch that runs past `batch_seconds`
    is reported as a mismatch and the run goes on.
    """
    os.environ.setdefault("OXIDE_CACHE", "0")  # every kernel is new: keep them off the disk
    summary = Summary(seed)
    sizes = []
    left = programs
    while left > 0:
        sizes.append(min(per_kernel, left))
        left -= sizes[-1]
    work = [(seed, i, n, vectors, devices) for i, n in enumerate(sizes)]
    start = time.perf_counter()

    def take(results: Iterable[tuple[int, dict[str, tuple[int, int]], list[Mismatch]]]) -> None:
        for n, counts, mismatches in results:
            summary.programs += n
            summary.kernels += 1
            for device, (pairs, faults) in counts.items():
                summary.add(device, pairs, faults)
            summary.mismatches += mismatches
            if progress is not None:
                progress(summary, len(work) - summary.kernels, time.perf_counter() - start)

    if jobs > 1:
        ctx = multiprocessing.get_context("spawn")  # CUDA cannot be forked
        # a fresh worker every few batches: each compiled kernel keeps its JIT engine
        with ctx.Pool(jobs, maxtasksperchild=WORKER_BATCHES) as pool:
            # in batch order: the report is deterministic
            take(_within(pool.imap(_job, work, chunksize=1), work, batch_seconds))
    else:
        take(_job(w) for w in work)
    return summary


def _within(results: Any, work: list[tuple[int, int, int, int, tuple[str, ...]]],
            seconds: float) -> Iterator[tuple[int, dict[str, tuple[int, int]], list[Mismatch]]]:
    """The pool's results in order; a batch that takes longer than `seconds` (a kernel
    that never ends, as a miscompiled loop did) is reported as a mismatch, not waited for."""
    for seed, index, n, vectors, devices in work:
        try:
            yield results.next(timeout=seconds)
        except multiprocessing.TimeoutError:
            b = make_batch(seed, index, n, vectors)
            yield n, {}, [Mismatch("/".join(devices), b, 0, None,
                                   f"batch {index} did not finish in {seconds:.0f} s: a kernel "
                                   f"that never ends? (the program shown is only the first)")]
