"""Loading a user's Python file and finding its kernels, for `run`, `inspect` and `build`."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import typer


def load_file(path: str | Path) -> ModuleType:
    """Imports `path` as a module named after its stem (its `__main__` block does not run).

    The file's directory goes on sys.path first, so it can import its neighbours
    just as `python FILE.py` would let it.
    """
    file = Path(path).resolve()
    if not file.is_file():
        raise typer.BadParameter(f"{path} is not a file")
    spec = importlib.util.spec_from_file_location(file.stem, file)
    if spec is None or spec.loader is None:
        raise typer.BadParameter(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(file.parent))
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def kernels_in(module: ModuleType) -> dict[str, Any]:
    """The `@ox.kernel`s a module defines (not those it imports), by name, in file order."""
    from oxide.kernel import Kernel

    found = [(name, k) for name, k in vars(module).items()
             if isinstance(k, Kernel) and k.fn.__module__ == module.__name__]
    found.sort(key=lambda item: item[1].fn.__code__.co_firstlineno)
    return dict(found)


def split_target(target: str) -> tuple[str, str]:
    """`"file.py::scale"` -> ("file.py", "scale")."""
    file, sep, name = target.partition("::")
    if not sep or not name:
        raise typer.BadParameter(f"name a kernel as FILE.py::KERNEL, got {target!r}")
    return file, name


def load_module(name_or_file: str) -> ModuleType:
    """A shipped example by name (`vecadd`), else the Python file at that path."""
    from oxide import examples

    if name_or_file in examples.NAMES and not Path(name_or_file).is_file():
        return examples.load(name_or_file)
    return load_file(name_or_file)


def load_kernel(target: str) -> Any:
    """The kernel `FILE.py::KERNEL` (or `EXAMPLE::KERNEL`) names; the error lists the kernels."""
    file, name = split_target(target)
    kernels = kernels_in(load_module(file))
    if name not in kernels:
        known = ", ".join(kernels) or "none"
        raise typer.BadParameter(f"{file} has no kernel `{name}` (its kernels: {known})")
    return kernels[name]
