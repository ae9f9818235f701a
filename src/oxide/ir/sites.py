"""Run-time failure sites: the table a compiled kernel's error record indexes.

The frontend records a site for each bounds-checked access and assert, the passes
drop the ones they prove, codegen numbers them and the runtimes turn a filled error
record back into file:line. It lives beside the IR so that none of those stages
imports the frontend for it (docs/architecture.md, "Layers").
"""

from __future__ import annotations

from dataclasses import dataclass

from oxide.errors import Span


@dataclass(frozen=True)
class Site:
    """A place that can fail at run time: a bounds-checked access or an assert."""

    kind: str  # "index" or "assert"
    span: Span
    detail: str  # the array name, or the assertion's message
