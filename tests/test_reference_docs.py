"""The user documentation's examples run (issue 16, item 1; issue 29, item 3).

Every ```python block of README.md, docs/reference.md, docs/quickstart.md and the "oxide
for ... users" pages is executed here, on the CPU target, in page order: the blocks of one
page share a namespace (a fresh one per page), as a reader who pastes them one after
another would. Each block is written to its own file first, since oxide compiles a kernel
from its source file.

Every code fence of these pages says what it holds, by its language word, and that word
alone decides what happens to it:

- ```python            runs here;
- ```python-gpu        needs a GPU; parsed here, run by nobody (the text says so);
- ```python-other      another library's code (numba, Triton, cuTile), shown for
                       comparison; parsed here, never run;
- ```bash, ```console  shell commands; ```text output, diagrams: not run.

(One word each, so that Markdown, and `mkdocs build`, still see a code block.)

A fence without a word, or with any other, is an error, so no block is skipped silently.
The reference must also name every public name of `oxide` (`oxide.__all__`) and every
`ox.math`, `ox.warp`, `ox.atomic`, `ox.block`, `ox.shared`, `ox.local` and `thread` member.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import sys
from pathlib import Path

import pytest

import oxide as ox
from oxide import lang
from oxide.lang.intrinsic import Intrinsic

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = ("reference.md", "quickstart.md", "for-numba-users.md", "for-triton-users.md",
         "for-cutile-users.md")
RUN_PAGES = ("../README.md", *PAGES)  # relative to docs/
KINDS = ("", "gpu", "other")
NOT_PYTHON = ("bash", "console", "text")  # shell commands and output: never run


def fences(page: str) -> list[tuple[int, str, str]]:
    """(line, language word, code) of every fenced block of a page, in order."""
    found: list[tuple[int, str, str]] = []
    opened: tuple[int, str] | None = None
    body: list[str] = []
    lines = (DOCS / page).read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        if opened is None and line.startswith("```"):
            opened, body = (number, line[3:].strip()), []
        elif opened is not None and line.strip() == "```":
            found.append((opened[0], opened[1], "\n".join(body) + "\n"))
            opened = None
        elif opened is not None:
            body.append(line)
    assert opened is None, f"{page}:{opened[0]}: a fence is never closed"
    return found


def blocks(page: str) -> list[tuple[int, str, str]]:
    """(line, tag, code) of each ```python block of a page: tag "" runs, "gpu" and
    "other" are parsed only."""
    return [(line, word.removeprefix("python").lstrip("-"), code)
            for line, word, code in fences(page) if word.startswith("python")]


@pytest.mark.parametrize("page", RUN_PAGES)
def test_every_fence_says_what_it_holds(page: str) -> None:
    for line, word, _ in fences(page):
        known = word in NOT_PYTHON or (word.startswith("python")
                                       and word.removeprefix("python").lstrip("-") in KINDS)
        assert known, (f"{page}:{line}: the fence ```{word} says nothing this test knows: "
                       f"use python, python-gpu, python-other, {', '.join(NOT_PYTHON)}")


def test_the_fence_rule_reads_tags_as_written(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "page.md").write_text("```python\nx = 1\n```\n\n```\nbare\n```\n"
                                      "```python-gpu\ny = 2\n```\n```text\nout\n```\n")
    monkeypatch.setattr(sys.modules[__name__], "DOCS", tmp_path)
    assert [(w, c) for _, w, c in fences("page.md")] == [
        ("python", "x = 1\n"), ("", "bare\n"), ("python-gpu", "y = 2\n"), ("text", "out\n")]
    assert [(t, c) for _, t, c in blocks("page.md")] == [("", "x = 1\n"), ("gpu", "y = 2\n")]
    with pytest.raises(AssertionError, match="page.md:5: the fence ``` says nothing"):
        test_every_fence_says_what_it_holds("page.md")


@pytest.mark.parametrize("page", RUN_PAGES)
def test_every_block_is_tagged_and_parses(page: str) -> None:
    found = blocks(page)
    assert found, f"{page} has no python examples"
    for line, tag, code in found:
        assert tag in KINDS, f"{page}:{line}: unknown tag ```python-{tag}"
        ast.parse(code, filename=f"{page}:{line}")


@pytest.mark.parametrize("page", RUN_PAGES)
def test_examples_run_on_the_cpu(page: str, tmp_path: Path) -> None:
    stem = Path(page).stem.replace("-", "_")
    namespace: dict[str, object] = {"__name__": f"docs_{stem}"}
    ran = 0
    for line, tag, code in blocks(page):
        if tag:
            continue
        file = tmp_path / f"{stem}_line{line}.py"
        file.write_text(code, encoding="utf-8")
        out = io.StringIO()
        try:
            with ox.device("cpu"), contextlib.redirect_stdout(out):
                exec(compile(code, str(file), "exec"), namespace)  # noqa: S102 - the docs' own code
        except Exception as exc:  # name the block, keep the cause
            raise AssertionError(f"{page}:{line}: the example raised {type(exc).__name__}: "
                                 f"{exc}\n--- output ---\n{out.getvalue()}") from exc
        ran += 1
    assert ran, f"{page} has no example that runs on the CPU"


def reference_text() -> str:
    return (DOCS / "reference.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(ox.__all__))
def test_reference_names_every_public_name(name: str) -> None:
    text = reference_text()
    assert re.search(rf"^#+ .*`(ox\.|oxide\.)?{re.escape(name)}\b", text, re.M), \
        f"docs/reference.md has no heading for ox.{name}"


NAMESPACES = {"math": lang.math, "warp": lang.warp, "atomic": lang.atomic,
              "block": lang.block, "shared": lang.shared, "local": lang.local,
              "thread": lang.thread, "grid": lang.grid}


@pytest.mark.parametrize("space", sorted(NAMESPACES))
def test_reference_names_every_namespace_member(space: str) -> None:
    text = reference_text()
    ns = NAMESPACES[space]
    members = [n for n, v in vars(ns).items() if not n.startswith("_")
               and (not isinstance(ns, Intrinsic) or isinstance(v, Intrinsic))]
    assert members
    # ox.math members sit in a table as `sqrt`; the others are written out: `ox.warp.ballot(`
    if space == "math":
        missing = [m for m in members if f"`{m}`" not in text and f"`{m}(" not in text]
    else:
        missing = [m for m in members if f"{space}.{m}(" not in text]
    assert not missing, f"docs/reference.md does not name ox.{space}.{', '.join(missing)}"


def test_readme_links_the_pages_and_not_the_workspace() -> None:
    readme = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    assert "../shared" not in readme
    for page in PAGES:
        assert f"docs/{page}" in readme, f"README.md does not link docs/{page}"
    for target in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (DOCS.parent / target).is_file(), f"README.md links {target}, which is missing"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)  # no headings in code
    return {_slug(m) for m in re.findall(r"^#+ (.*)$", text, re.M)}


@pytest.mark.parametrize("page", PAGES)
def test_relative_links_resolve(page: str) -> None:
    """Every link to another page (and to a heading in it) lands somewhere."""
    text = (DOCS / page).read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)  # links, not code
    text = re.sub(r"`[^`\n]*`(?!\])", "", text)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if "://" in target:
            continue
        file, _, anchor = target.partition("#")
        path = DOCS / file if file else DOCS / page
        assert path.is_file(), f"{page} links {target}: no such file"
        if anchor:
            assert anchor in _anchors(path), f"{page} links {target}: no such heading"
