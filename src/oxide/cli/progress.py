"""Progress for long steps of the CLI: a transient spinner on a terminal, nothing elsewhere.

`compile_progress(console)` shows "compiling `k` for sm_90" while a kernel compiles
inside `oxide run` or `oxide bench`, but only once the compile has taken `delay`
seconds (an in-process or disk-cache hit shows nothing), and only where the console
is a terminal: piped or captured output gets no spinner and no stray lines.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.markup import escape

DELAY_S = 0.3


@contextmanager
def shown_after(console: Console, text: str, delay: float = DELAY_S) -> Iterator[None]:
    """A transient spinner with `text` on `console` if the block lasts `delay` seconds."""
    if not console.is_terminal:
        yield
        return
    status = console.status(escape(text), spinner="dots")
    timer = threading.Timer(delay, status.start)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        if timer.is_alive():
            timer.join()  # it may be starting the spinner right now
        status.stop()  # erases it (transient); a spinner never started stays unstarted


@contextmanager
def compile_progress(console: Console, delay: float = DELAY_S) -> Iterator[None]:
    """While active, a kernel compile that lasts `delay` seconds shows a spinner on a terminal.

    `Kernel.compile` is where every launch's compile starts (after the disk cache had no
    entry), so wrapping it for the CLI's own process covers GPU and CPU launches alike.
    """
    if not console.is_terminal:
        yield
        return
    from oxide.kernel import Kernel

    original = Kernel.compile

    def compile(self: Any, *args: Any, arch: str | None = None, target: str | None = None
                ) -> Any:
        where = "the CPU" if "cpu" in (arch, target) else arch or "the GPU"
        with shown_after(console, f"compiling `{self.__name__}` for {where}", delay):
            return original(self, *args, arch=arch, target=target)

    Kernel.compile = compile  # type: ignore[method-assign]
    try:
        yield
    finally:
        Kernel.compile = original  # type: ignore[method-assign]
