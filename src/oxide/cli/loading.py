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
    """A shipped example by name (`vecadd`), else the Python file at that path.

    A name that is neither is a usage error listing the examples: a newcomer's
    `oxide run vecad` should say what `oxide run` accepts, not only "not a file".
    """
    from oxide import examples

    if name_or_file in examples.NAMES and not Path(name_or_file).is_file():
        return examples.load(name_or_file)
    if not Path(name_or_file).exists() and not name_or_file.endswith(".py"):
        raise typer.BadParameter(
            f"{name_or_file!r} is neither a shipped example nor a file; the examples are "
            f"{', '.join(examples.NAMES)} (`oxide list`)")
    return load_file(name_or_file)


def example_source(name: str) -> Path:
    """The file of the shipped example `name`, found without importing it (`oxide list`
    and `oxide show` stay quick); BadParameter listing the examples for any other name."""
    import importlib.util

    from oxide import examples

    if name not in examples.NAMES:
        raise typer.BadParameter(f"no example named {name!r}; the examples are "
                                 f"{', '.join(examples.NAMES)}")
    spec = importlib.util.find_spec(f"{examples.__name__}.{name}")
    assert spec is not None and spec.origin is not None  # every name in NAMES ships a module
    return Path(spec.origin)


def load_kernel(target: str) -> Any:
    """The kernel `FILE.py::KERNEL` (or `EXAMPLE::KERNEL`) names; the error lists the kernels.

    Without `::KERNEL` (`oxide inspect vecadd`), the file's kernel of the same name as
    the file is taken, else its only kernel; a file with several names them.
    """
    if "::" not in target:
        return _sole_kernel(target)
    file, name = split_target(target)
    kernels = kernels_in(load_module(file))
    if name not in kernels:
        known = ", ".join(kernels) or "none"
        raise typer.BadParameter(f"{file} has no kernel `{name}` (its kernels: {known})")
    return kernels[name]


def _sole_kernel(file: str) -> Any:
    """The kernel a bare FILE or EXAMPLE stands for: the one named after it, else the only one."""
    kernels = kernels_in(load_module(file))
    stem = Path(file).stem
    if stem in kernels:
        return kernels[stem]
    if len(kernels) == 1:
        return next(iter(kernels.values()))
    if not kernels:
        raise typer.BadParameter(f"{file} defines no @ox.kernel")
    choices = ", ".join(f"{file}::{k}" for k in kernels)
    raise typer.BadParameter(f"{file} has several kernels; name one: {choices}")


def device_spec(text: str | None) -> str | int | None:
    """`--device` as `ox.device` takes it: "0" (as a command line gives an ordinal) is 0;
    "cpu", "cuda:1" and None stay as they are."""
    return int(text) if text is not None and text.isdigit() else text
