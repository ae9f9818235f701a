"""A kernel's source: its AST, and spans that point into the user's file."""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oxide.errors import KernelSyntaxError, Span


@dataclass
class Source:
    """The parsed source of one Python function, with its place in its file."""

    file: str
    first_line: int
    indent: int
    tree: ast.FunctionDef
    text: str

    def span(self, node: ast.AST) -> Span:
        """The span of `node` in the user's file (what diagnostics point at)."""
        lineno = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        end_line = getattr(node, "end_lineno", lineno)
        end_col = getattr(node, "end_col_offset", col + 1)
        line = lineno + self.first_line - 1
        text = linecache.getline(self.file, line).rstrip("\n")
        if not text:
            text = self.text.splitlines()[lineno - 1] if lineno <= len(self.text.splitlines()) else ""
            offset = 0
        else:
            offset = self.indent
        if end_line != lineno:
            end_col = len(text) - offset
        return Span(self.file, line, col + offset, end_col + offset, text)


def load_source(fn: Callable[..., Any]) -> Source:
    """Parse `fn`'s source. Functions without source (REPL, exec) are an error."""
    try:
        lines, first = inspect.getsourcelines(fn)
        file = inspect.getsourcefile(fn) or "<unknown>"
    except (OSError, TypeError) as exc:
        raise KernelSyntaxError(
            f"cannot read the source of `{getattr(fn, '__name__', fn)}`",
            hint="define kernels in a file (or a notebook cell), not through exec or eval",
        ) from exc
    raw = "".join(lines)
    text = textwrap.dedent(raw)
    first_text_line = next((ln for ln in raw.splitlines() if ln.strip()), "")
    indent = len(first_text_line) - len(first_text_line.lstrip())
    first = max(first, 1)
    where = Span(file, first, indent, len(first_text_line.rstrip()), first_text_line)
    message = f"`{fn.__name__}` is not a plain function"
    hint = "kernels and @ox.func are `def` functions (not async, not lambdas)"
    try:
        module = ast.parse(text)
    except SyntaxError:  # a lambda's source line is a fragment, not a statement
        raise KernelSyntaxError(message, where, hint=hint) from None
    node = module.body[0] if module.body else None
    if isinstance(node, ast.AsyncFunctionDef):  # point at its `async def` line
        where = Source(file, first, indent, node, text).span(node)  # type: ignore[arg-type]
    if not isinstance(node, ast.FunctionDef):
        raise KernelSyntaxError(message, where, hint=hint)
    return Source(file, first, indent, node, text)
