"""frontend/source.py: a kernel's lines are found without the tokenizer, exactly as
`inspect.getsourcelines` finds them, or else inspect is asked."""

from __future__ import annotations

import inspect

import oxide as ox
from oxide import DisjointSlice, Slice, f32, thread
from oxide.frontend.source import _indented_block, load_source


@ox.kernel(
    checks=True,
)
def decorated(x: Slice[f32],
              out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        # a comment inside
        out[i] = x[i]

    # a trailing comment, not the function's


def margin_string(x: Slice[f32]):
    s = """
text at the margin"""
    return s


def margin_paren(x: Slice[f32]
):
    pass


def low_continuation(x: Slice[f32]):
    y = (x +
  x)
    return y
  # a comment between the body and the margin: not the function's
# nor this one


def one_line(x: Slice[f32]): pass  # noqa: E704


def _lines(fn):
    return _indented_block(fn, inspect.getsourcefile(fn))


def test_the_block_is_inspects() -> None:
    assert _lines(decorated.fn) == tuple(inspect.getsourcelines(decorated.fn))

    def nested(a: Slice[f32]):
        if a:
            pass
    assert _lines(nested) == tuple(inspect.getsourcelines(nested))
    assert _lines(low_continuation) == tuple(inspect.getsourcelines(low_continuation))


def test_lines_at_the_margin_inside_a_function_fall_back_to_inspect() -> None:
    assert _lines(margin_string) is None
    assert _lines(margin_paren) is None
    assert _lines(one_line) is None
    for fn in (margin_string, margin_paren, one_line):
        source = load_source(fn)
        assert source.tree.name == fn.__name__
        assert source.first_line == inspect.getsourcelines(fn)[1]
