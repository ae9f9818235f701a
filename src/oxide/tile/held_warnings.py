"""The warnings of one tile lowering attempt, held until the attempt is kept.

A tile kernel is often lowered several times (with and without a producer warp group,
rings, stores in the whole block, two blocks an SM); only the attempt kept speaks of the
kernel the user gets, so a dropped attempt's warnings must not reach them. The passes
warn through `warn_at`; `held()` collects what they say in this thread and gives it on
where the attempt returns. Per thread, unlike `warnings.catch_warnings`, which swaps the
process's filters: two threads compiling at once neither lose nor swap warnings."""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterator

_local = threading.local()


def warn_at(message: str, category: type[Warning], filename: str, lineno: int) -> None:
    """Warn at a line of the user's kernel: held while an attempt runs in this thread,
    else given to the user's filters at once."""
    said = getattr(_local, "said", None)
    if said is None:
        warnings.warn_explicit(message, category, filename, lineno)
    else:
        said.append((message, category, filename, lineno))


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Hold the warnings `warn_at` gives in this thread inside; give them on (to an
    enclosing `held`, or the user) where the body returns, drop them where it raises."""
    outer = getattr(_local, "said", None)
    said: list[tuple[str, type[Warning], str, int]] = []
    _local.said = said
    try:
        yield
    finally:
        _local.said = outer
    for one in said:  # (not reached where the body raised)
        warn_at(*one)
