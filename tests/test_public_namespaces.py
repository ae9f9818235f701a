"""The public modules show their API and nothing else (issue 29, item 7).

`dir(ox)` used to list `annotations` (the `from __future__` import) and the private
submodules the package is built from, and `ox.testing` exposed `Any`, `Callable` and
`Sequence`. A public module is `oxide`, every module reachable through a public
module's `__all__`, and every module the user documentation imports from
(`from oxide.aot import ...`). For each: `dir()` is its `__all__` (plus dunders), every
name in `__all__` exists, and none of them is a typing helper, `annotations`, or a module
that is not itself public.
"""

from __future__ import annotations

import importlib
import re
import types
import typing
from pathlib import Path

import pytest

import oxide

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TYPING_NAMES = set(typing.__all__) | {"annotations"}


def documented_modules() -> set[str]:
    """The `oxide.X` modules the docs' code imports from."""
    found = set()
    for page in DOCS:
        found |= set(re.findall(r"^\s*from (oxide(?:\.\w+)+) import", page.read_text("utf-8"),
                                re.M))
    return found


def public_modules() -> dict[str, types.ModuleType]:
    """`oxide`, the modules its public names reach, and the documented ones."""
    todo = ["oxide", *sorted(documented_modules())]
    seen: dict[str, types.ModuleType] = {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        module = seen[name] = importlib.import_module(name)
        for public in getattr(module, "__all__", ()):
            value = getattr(module, public)
            if isinstance(value, types.ModuleType):
                todo.append(value.__name__)
    return seen


PUBLIC = public_modules()


def test_the_walk_finds_the_public_modules() -> None:
    assert {"oxide", "oxide.tile", "oxide.testing", "oxide.aot"} <= set(PUBLIC)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_dir_is_the_api(name: str) -> None:
    module = PUBLIC[name]
    assert hasattr(module, "__all__"), f"{name} has no __all__"
    api = set(module.__all__)
    assert len(api) == len(module.__all__), f"{name}.__all__ repeats a name"
    for public in api:
        assert hasattr(module, public), f"{name}.__all__ names `{public}`, which is missing"
    shown = set(dir(module))
    assert api <= shown, f"dir({name}) hides {sorted(api - shown)}"
    api |= set(getattr(module, "_NOT_STARRED", ()))  # API that `import *` leaves out
    extra = {n for n in shown - api if not (n.startswith("__") and n.endswith("__"))}
    assert not extra, f"dir({name}) shows {sorted(extra)} beyond __all__"


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_no_typing_names_or_private_modules(name: str) -> None:
    module = PUBLIC[name]
    for public in module.__all__:
        value = getattr(module, public)
        assert public not in TYPING_NAMES or value.__module__.startswith("oxide"), \
            f"{name}.{public} is the typing name, not oxide's"
        if isinstance(value, types.ModuleType):
            assert value.__name__ in PUBLIC, f"{name}.{public} is a private module"


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_star_import_takes_the_api(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from {name} import *", namespace)  # noqa: S102 - a fixed import line
    assert set(namespace) - {"__builtins__"} == set(PUBLIC[name].__all__)


def test_dir_of_oxide_has_none_of_the_old_leaks() -> None:
    shown = dir(oxide)
    for leak in ("annotations", "errors", "runtime", "kernel_types", "autotuner", "frontend"):
        assert leak not in shown
    assert {"Any", "Callable", "Sequence"}.isdisjoint(dir(oxide.testing))


def test_a_star_import_keeps_the_standard_math() -> None:
    """`from oxide import *` then `-math.inf` in a kernel (a ported Triton kernel): the
    standard library's `math`, not `ox.math`, which stays `ox.math`."""
    import math

    namespace: dict[str, object] = {"math": math}
    exec("from oxide import *", namespace)
    assert namespace["math"] is math
    import oxide

    assert "math" in dir(oxide) and oxide.math is not math
