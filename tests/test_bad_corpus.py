"""Issue 14's acceptance: a corpus of at least 150 bad kernels and bad launches gives zero
internal errors and zero accepted unsafe programs.

The cases live in `tests/corpus/` (one module per theme; `tests/corpus/__init__.py` says
what a case is). Each is refused with its specific `ox.*Error`, a message that says what is
wrong, and, for compile errors, a span on the offending line of the corpus file. Cases
that could hang or exhaust memory run in a subprocess with a time and memory limit.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import oxide as ox

sys.path.insert(0, str(Path(__file__).parent))
from corpus import Case, load_all, run_case  # noqa: E402

CASES = load_all()
ISOLATED_SECONDS = 60
ISOLATED_MEMORY = 4 << 30  # address space of an isolated case: no swapping the machine


@dataclass(frozen=True)
class Outcome:
    """What running a case did, in a form a subprocess can report too."""

    accepted: bool = False
    cls: str = ""  # the exception's class name, as oxide (or builtins) spells it
    said: str = ""  # message, label and hint (or str(exc) for other exceptions)
    span_file: str | None = None
    span_line: int | None = None
    timed_out: bool = False


def outcome_of(c: Case, device: str | int = "cpu") -> Outcome:
    try:
        run_case(c, device)
    except Exception as exc:  # noqa: BLE001 - every exception is a result here
        if isinstance(exc, ox.CompileError):
            said = "\n".join((exc.message, exc.label, exc.hint))
            span = exc.span
            return Outcome(cls=type(exc).__name__, said=said,
                           span_file=span.file if span else None,
                           span_line=span.line if span else None)
        return Outcome(cls=type(exc).__name__, said=str(exc))
    return Outcome(accepted=True)


def isolated_outcome(c: Case, device: str | int = "cpu") -> Outcome:
    """Run one case in a fresh interpreter under a time (and, on the CPU, address-space)
    limit. A GPU process maps far more address space than it uses: no limit there."""
    limit = (f"resource.setrlimit(resource.RLIMIT_AS, ({ISOLATED_MEMORY}, {ISOLATED_MEMORY}))\n"
             if device == "cpu" else "")
    code = (
        "import json, resource, sys\n"
        f"{limit}"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "import dataclasses, test_bad_corpus as t\n"
        f"c = next(c for c in t.CASES if c.id == {c.id!r})\n"
        f"print('OUTCOME' + json.dumps(dataclasses.asdict(t.outcome_of(c, {device!r}))))\n"
    )
    env = dict(os.environ, OXIDE_CACHE="0")
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=ISOLATED_SECONDS, env=env)
    except subprocess.TimeoutExpired:
        return Outcome(timed_out=True)
    for line in proc.stdout.splitlines():
        if line.startswith("OUTCOME"):
            return Outcome(**json.loads(line[len("OUTCOME"):]))
    return Outcome(cls=f"process died (exit {proc.returncode})", said=proc.stderr[-2000:])


def class_ok(c: Case, name: str) -> bool:
    cls = getattr(ox, name, None)
    if not (isinstance(cls, type) and issubclass(cls, ox.OxideError)):
        return False
    if c.launch:  # launch cases name base classes: ox.LaunchError covers ArgumentError
        return any(issubclass(cls, want) for want in c.classes)
    return any(cls is want for want in c.classes)


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_refused_cleanly(c: Case) -> None:
    check(c, isolated_outcome(c) if c.isolate else outcome_of(c))


GPU_CASES = [c for c in CASES if c.launch and not c.cpu_only]


@pytest.mark.gpu
@pytest.mark.parametrize("c", GPU_CASES, ids=[c.id for c in GPU_CASES])
def test_bad_launch_is_refused_on_the_gpu(c: Case) -> None:
    """The same launches on GPU 0: its launch path (binders, the trampoline, the
    driver's limits) must refuse them as the CPU's does. Isolated cases (wild writes,
    huge requests) get a fresh process, as a failure could leave the CUDA context unusable."""
    check(c, isolated_outcome(c, 0) if c.isolate else outcome_of(c, 0))


def check(c: Case, got: Outcome) -> None:
    """What every refusal must look like (see tests/corpus/__init__.py)."""
    assert not got.timed_out, f"hung for more than {ISOLATED_SECONDS} s"
    if got.accepted:
        assert c.accept_ok, "accepted a bad program (nothing was raised)"
        return
    assert got.cls != "InternalCompilerError", f"internal compiler error: {got.said}"
    wanted = " or ".join(k.__name__ for k in c.classes)
    assert class_ok(c, got.cls), f"wanted {wanted}, got {got.cls}: {got.said}"
    assert re.search(c.pattern, got.said, re.IGNORECASE | re.DOTALL), (
        f"{c.pattern!r} not in: {got.said}")
    if issubclass(getattr(ox, got.cls), ox.CompileError) and (c.lines or not c.launch):
        assert got.span_line is not None, f"a compile error needs a span: {got.said}"
        assert got.span_file == c.file, f"span in {got.span_file}, not the corpus file"
        assert got.span_line in c.lines, (
            f"span on line {got.span_line}, wanted {sorted(c.lines)}: {got.said}")


def test_corpus_size_and_reach() -> None:
    """At least 150 cases, covering every theme and both compile and launch time."""
    assert len(CASES) >= 150, len(CASES)
    assert len({c.id for c in CASES}) == len(CASES), "case ids must be unique"
    assert {c.theme for c in CASES} == {"syntax", "typing_errors", "safety", "memory",
                                       "constants", "intrinsics", "launches", "shared_races",
                                       "tile_safety"}
    assert sum(c.theme == "shared_races" for c in CASES) >= 40  # issue 13's bar
    assert sum(c.launch for c in CASES) >= 40
    for c in CASES:
        if not c.launch:
            assert c.lines, f"{c.id}: a compile case marks its line with `# <-`"
