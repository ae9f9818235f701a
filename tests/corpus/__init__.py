"""The bad-input corpus of issue 14: bad kernels and bad launches, each refused cleanly.

Each theme module (`syntax`, `typing_errors`, `safety`, `memory`, `constants`,
`intrinsics`, `launches`, `shared_races`, `tile_safety`) registers cases with
`@bad(...)`. A case is a builder: for a compile case it returns the kernel (or
`(kernel, compile_args)`), and the test compiles
it for `sm_90` (the whole pipeline, through nvJitLink); for a launch case it launches
on the CPU itself. Either way the builder must raise one of the case's `ox.*Error`
classes, never an `InternalCompilerError`, a bare Python exception, a crash or a hang,
and the error must say something specific (`pattern`, a case-insensitive regex searched
in the message, label and hint).

A compile error must carry a span into the corpus file whose line is one of the
builder's lines marked `# <-`. Cases marked `accept_ok` are safe programs the language
may also choose to support (`a, *b = (1, 2, 3)`, `i32(NAN)`): accepting them is fine,
refusing them must still be a clean diagnostic. Nothing else may be accepted.
`isolate=True` cases could hang, exhaust memory or corrupt it (`2 ** 2 ** 40`, a wild
write): they run in a subprocess with a time and memory limit. Launch cases run on the
CPU, and again on a GPU under `pytest -m gpu` unless `cpu_only` (a fake GPU pointer
that only the CPU can refuse without touching it).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import oxide as ox

MARK = "# <-"


@dataclass(frozen=True)
class Case:
    """One bad kernel or bad launch and what refusing it must look like."""

    build: Callable[[], Any]
    classes: tuple[type[ox.OxideError], ...]
    pattern: str
    launch: bool
    accept_ok: bool
    isolate: bool
    cpu_only: bool
    theme: str = field(default="")

    @property
    def id(self) -> str:
        return f"{self.theme}.{self.build.__name__}"

    @property
    def file(self) -> str:
        return inspect.getsourcefile(self.build) or ""

    @property
    def lines(self) -> frozenset[int]:
        """The file lines of the builder's `# <-` markers (where the span may point)."""
        src, first = inspect.getsourcelines(self.build)
        return frozenset(first + n for n, text in enumerate(src) if MARK in text)


CASES: list[Case] = []


def bad(*classes: type[ox.OxideError], pattern: str, launch: bool = False,
        accept_ok: bool = False, isolate: bool = False, cpu_only: bool = False
        ) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
    """Register a builder as a corpus case: the error classes it may raise (exact
    classes for compile errors, base classes for launch errors) and a regex its
    message must match."""

    def register(build: Callable[[], Any]) -> Callable[[], Any]:
        theme = build.__module__.rsplit(".", 1)[-1]
        CASES.append(Case(build, classes, pattern, launch, accept_ok, isolate, cpu_only,
                          theme))
        return build

    return register


def compile_args(kernel: Any) -> tuple[Any, ...]:
    """The default compile arguments: each parameter's own annotation."""
    return tuple(p.annotation for p in kernel.params)


def run_case(c: Case, device: str | int = "cpu") -> None:
    """Build the case and compile (or launch it on `device`, then synchronize, which is
    when a GPU reports a kernel's failure); raises whatever oxide raises."""
    with ox.device(device):
        built = c.build()
        if c.launch:
            ox.synchronize()
            return
        kernel, args = built if isinstance(built, tuple) else (built, None)
        kernel.compile(*(args if args is not None else compile_args(kernel)), arch="sm_90")


def load_all() -> list[Case]:
    """Import every theme module (each registers its cases) and return the corpus."""
    from . import (  # noqa: F401 - imported for their registrations
        constants,
        intrinsics,
        launches,
        memory,
        safety,
        shared_races,
        syntax,
        tile_safety,
        typing_errors,
    )

    return CASES
