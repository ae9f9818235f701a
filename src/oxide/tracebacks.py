"""Tracebacks that end at the user's call: oxide's own frames dropped from its errors.

A compile error raised by a launch passed through 13 to 74 frames of oxide's runtime and
compiler before reaching the user's script, and Python printed every one of them above
a diagnostic that already names the file, line and fix. As JAX does at its API boundary,
each public entry point (a launch `k[cfg](...)`, `ox.launch`, `k.compile(...)`, the
decorators, `ox.autotune`, `ox.synchronize`, `ox.testing.do_bench`) catches an
`OxideError`, removes the frames of oxide's package from its `__traceback__` (and from
those of the exceptions chained to it), and re-raises it with a bare `raise`, which adds
no frame of its own. Python then prints the user's frames and the diagnostic.

`OXIDE_TRACEBACK=full` keeps every frame, for reporting a bug in oxide; an
`InternalCompilerError` (a bug in oxide by definition) always keeps them. Frames of the
shipped examples (`oxide/examples/`) count as the user's: they are code to read.
"""

from __future__ import annotations

import os
from types import TracebackType

from oxide.errors import InternalCompilerError

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_EXAMPLES = _PACKAGE + "examples" + os.sep
_internal: dict[str, bool] = {}  # code file name -> whether it is oxide's own


def is_internal(filename: str) -> bool:
    """Whether `filename` (a code object's) is a module of oxide's package."""
    known = _internal.get(filename)
    if known is None:
        path = os.path.abspath(filename)
        known = _internal[filename] = path.startswith(_PACKAGE) and not path.startswith(
            _EXAMPLES)
    return known


def user_frames_only(exc: BaseException) -> None:
    """Drop oxide's frames from `exc`'s traceback and from those of the exceptions it
    chains (`__cause__`, `__context__`), in place, unless `OXIDE_TRACEBACK=full` or
    `exc` reports a bug in oxide. Call it in an `except` block followed by `raise`."""
    if isinstance(exc, InternalCompilerError) or os.environ.get("OXIDE_TRACEBACK") == "full":
        return
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        link.__traceback__ = _filtered(link.__traceback__)
        link = link.__cause__ or link.__context__


def _filtered(tb: TracebackType | None) -> TracebackType | None:
    """`tb` without the entries of oxide's frames (new entries; `tb` is left as it is)."""
    kept = []
    while tb is not None:
        if not is_internal(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for entry in reversed(kept):
        out = TracebackType(out, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return out
