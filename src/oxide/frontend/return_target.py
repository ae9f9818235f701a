"""`ReturnTarget`: where an inlined or specialized @ox.func's `return` goes.

The function lowering (frontend/lower.py) fills it; the call lowering
(frontend/calls.py, frontend/device_functions.py) makes one per call. It lives apart
from the lowering so that the call modules need not import frontend/lower.py, which
imports them: a call lowers its callee with the caller's own lowering class
(`type(self)`), so the recursion "lowering a call lowers a function body" needs no
import cycle (docs/architecture.md, "Layers").
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from xdsl.ir import Block


@dataclass
class ReturnTarget:
    """Where an inlined @ox.func's `return` goes, and the slot its value lands in."""

    block: Block
    slot: Any = None
    returned: list[tuple[bool, ast.AST]] = field(default_factory=list)  # (returns nothing, where)
