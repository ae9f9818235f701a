"""`Source.segment` is `ast.get_source_segment` with the lines split once (the frontend
quotes expressions in its notes; a big kernel's compile split its text 128 times)."""

from __future__ import annotations

import ast

import pytest

from oxide.frontend.source import Source

TEXTS = [
    "def f(a, b):\n    x = a + b  # é, ü\n    return (x *\n        2)\n",
    "def g():\r\n    y = 'ab\\x0c'\r\n    return [y,\r\n            y]\r\n",
    "def h(): return 1",
    "def k(x):\n    s = 'ünï'; t = x[1:2]\n    return {s: t}\n",
]


@pytest.mark.parametrize("text", TEXTS)
def test_every_node_reads_as_ast_reads_it(text: str) -> None:
    tree = ast.parse(text)
    src = Source("f.py", 1, 0, tree.body[0], text)  # type: ignore[arg-type]
    for node in ast.walk(tree):
        assert src.segment(node) == ast.get_source_segment(text, node)
