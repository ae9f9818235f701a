"""A kernel's source: its AST, and spans that point into the user's file."""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oxide.errors import KernelSyntaxError, Span

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")  # a line and its end


@dataclass
class Source:
    """The parsed source of one Python function, with its place in its file."""

    file: str
    first_line: int
    indent: int
    tree: ast.FunctionDef
    text: str

    @functools.cached_property
    def _lines(self) -> list[str]:
        """The text's lines with their ends, split where Python's parser splits them."""
        return _LINE.findall(self.text)

    def segment(self, node: ast.AST) -> str | None:
        """`ast.get_source_segment(self.text, node)`, from lines split once: the frontend
        names expressions in its notes, and splitting the text for each one made a big
        kernel's compile 0.4 s slower (hopper_gemm: 128 calls)."""
        try:
            lineno, end_lineno = node.lineno - 1, node.end_lineno - 1  # type: ignore[attr-defined, operator]
            col, end_col = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
        except (AttributeError, TypeError):
            return None
        if end_col is None:
            return None
        lines = self._lines
        if lineno == end_lineno:
            return lines[lineno].encode()[col:end_col].decode()
        first = lines[lineno].encode()[col:].decode()
        last = lines[end_lineno].encode()[:end_col].decode()
        return "".join([first, *lines[lineno + 1:end_lineno], last])

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
        file = inspect.getsourcefile(fn) or "<unknown>"
        block = _indented_block(fn, file)
        lines, first = block if block is not None else inspect.getsourcelines(fn)
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


def _indented_block(fn: Callable[..., Any], file: str) -> tuple[list[str], int] | None:
    """`fn`'s lines and first line number as `inspect.getsourcelines` gives them, found
    without the tokenizer; None when unsure (the caller then asks inspect).

    Why: inspect tokenizes to find where the function ends, and compiling the
    tokenizer's regular expressions costs a few milliseconds of a warm first launch
    (whose cache key needs the source). The block here is the function's first line
    (its first decorator) and every line after it that is blank, a comment, or
    indented deeper, up to the end of its header; it is kept only if it parses as
    one `def` of `fn`'s name, so a line that fools the indentation rule (a
    continuation or string at the margin) sends the function to inspect instead.
    """
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    linecache.checkcache(file)
    lines = linecache.getlines(file, getattr(fn, "__globals__", None))
    start = code.co_firstlineno - 1
    if not 0 <= start < len(lines):
        return None
    margin = _indent(lines[start])
    end, in_header = start + 1, not lines[start].lstrip().startswith(("def ", "async def "))
    while end < len(lines):
        text = lines[end].strip()
        if text and not text.startswith("#") and _indent(lines[end]) <= margin:
            if not in_header:
                break
            in_header = not text.startswith(("def ", "async def "))  # still decorators
        end += 1
    block = lines[start:end]
    try:
        module = ast.parse(textwrap.dedent("".join(block)))
    except SyntaxError:
        return None
    node = module.body[0] if len(module.body) == 1 else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name != fn.__name__:
        return None
    body_line = start + node.body[0].lineno - 1
    if body_line <= start + node.lineno - 1:
        return None  # `def f(): ...` on one line
    # After the last statement inspect keeps the comments indented like the body (and
    # the blank lines before them), not other comments or blank lines.
    body_col = _indent(lines[body_line])
    while end > start + 1:
        text = lines[end - 1].strip()
        if text and not (text.startswith("#") and _indent(lines[end - 1]) < body_col):
            break
        end -= 1
    return lines[start:end], start + 1


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())
