"""A live progress line on stderr while a compile or an autotune runs for more than a second.

A tile kernel with a 128 x 128 x 32 `tile.mma` took 37.5 s to compile for the CPU, and a
script printed nothing meanwhile. Each long step of oxide (a kernel's compile, from its
frontend to the cubin or host code; an autotune's configs) runs inside `activity(text)`.
Once the outermost activity has lasted `DELAY_S`, a daemon thread draws one line on
stderr, ten times a second: a spinner frame, the activities under way (outermost first,
a repeated text once) and the seconds elapsed, e.g.

    ⠹ autotuning `matmul`: config 2 of 4, Config(BM=64) · compiling `matmul` for the CPU  3.1 s

and erases it when the last activity ends, before control returns to the caller, so
output printed afterwards starts on a clean line. Nothing is drawn where stderr is not a
terminal (pipes, files, captured output), nor with `OXIDE_PROGRESS=0`. The same line
serves scripts and the `oxide` command.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

DELAY_S = 1.0  # a step shorter than this shows nothing
INTERVAL_S = 0.1  # between two frames
FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_CLEAR = "\r\x1b[2K"  # back to the line's start, erase the line


class Activity:
    """One step under way; `text` may change while it runs (an autotune's config)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.started = time.monotonic()


class _Line:
    """The progress line of one stream, and the thread that draws it."""

    def __init__(self, stream: TextIO, delay: float) -> None:
        self.stream = stream
        self.delay = delay
        self.activities: list[Activity] = []
        self.stop = threading.Event()
        self.drawn = False
        self.thread = threading.Thread(target=self._run, name="oxide-progress", daemon=True)

    def _run(self) -> None:
        frame = 0
        wait = self.delay  # the first frame when the delay is up, then one per interval
        while not self.stop.wait(wait):
            wait = INTERVAL_S
            with _lock:
                if not self.activities:
                    continue
                elapsed = time.monotonic() - self.activities[0].started
                if elapsed >= self.delay:
                    self._draw(FRAMES[frame % len(FRAMES)], elapsed)
                    frame += 1
                else:
                    wait = self.delay - elapsed
        if self.drawn:
            self._write(_CLEAR)

    def _draw(self, frame: str, elapsed: float) -> None:
        texts: list[str] = []
        for a in self.activities:
            if not texts or texts[-1] != a.text:
                texts.append(a.text)
        line = f"{frame} {' · '.join(texts)}  {elapsed:.1f} s"
        width = shutil.get_terminal_size((80, 24)).columns - 1
        if len(line) > width:  # a wrapped line could not be erased with one \r
            line = line[:max(1, width - 1)] + "…"
        self._write(_CLEAR + line)
        self.drawn = True

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the stream was closed under us: stop drawing
            self.stop.set()


_lock = threading.Lock()
_lines: dict[int, _Line] = {}  # id(stream) -> its line, while an activity runs


def enabled(stream: TextIO) -> bool:
    """Whether progress is drawn on `stream`: a terminal, and `OXIDE_PROGRESS` is not 0."""
    if os.environ.get("OXIDE_PROGRESS", "") == "0":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


@contextmanager
def activity(text: str, stream: TextIO | None = None, delay: float | None = None
             ) -> Iterator[Activity]:
    """Run the block as a step named `text` (e.g. "compiling `k` for sm_90"): shown on
    `stream` (default: stderr) once the outermost step has lasted `delay` seconds
    (default `DELAY_S`)."""
    out = sys.stderr if stream is None else stream
    step = Activity(text)
    if not enabled(out):
        yield step
        return
    with _lock:
        line = _lines.get(id(out))
        first = line is None
        if first:
            line = _lines[id(out)] = _Line(out, DELAY_S if delay is None else delay)
        line.activities.append(step)
    if first:
        line.thread.start()
    try:
        yield step
    finally:
        with _lock:
            line.activities.remove(step)
            last = not line.activities
            if last:
                del _lines[id(out)]
                line.stop.set()
        if last:
            line.thread.join()  # the line is erased before the caller goes on
