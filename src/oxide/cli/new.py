"""`oxide new NAME`: a project directory whose tests pass before the user writes a line.

The layout is flat (one kernel module beside `tests/`), and pytest's
`pythonpath = ["."]` makes the module importable without installing it, so
`cd NAME && pytest` works at once, on a machine with or without a GPU.
"""

from __future__ import annotations

import importlib.util
import keyword
import re
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

console = Console(highlight=False, soft_wrap=True)

PYPROJECT = '''\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "0.1.0"
description = "GPU kernels written with oxide"
requires-python = ">=3.11"
dependencies = ["oxide-cuda"]

[project.optional-dependencies]
test = ["pytest>=8"]

[tool.setuptools]
py-modules = ["{module}"]

[tool.pytest.ini_options]
pythonpath = ["."]
testpaths = ["tests"]
'''

KERNEL_MODULE = '''\
"""{name}: an oxide kernel and a main() that checks it (`oxide run {module}.py`)."""

import numpy as np

import oxide as ox
from oxide import DisjointSlice, Slice, f32, thread


@ox.kernel
def scale(x: Slice[f32], factor: f32, out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * factor


def scaled(x: np.ndarray, factor: float) -> np.ndarray:
    """`x * factor`, computed by the kernel on the current device (GPU, else the CPU)."""
    out = np.empty_like(x)
    ox.launch(scale, ox.LaunchConfig.for_num_elems(x.size), x, factor, out)
    return out


def main() -> bool:
    x = np.arange(1 << 16, dtype=np.float32)
    return bool(np.array_equal(scaled(x, 2.5), x * np.float32(2.5)))


if __name__ == "__main__":
    print("PASS" if main() else "FAIL")
'''

TEST_MODULE = '''\
"""{module}'s kernel on the CPU (every machine) and compiled for a GPU (no GPU needed)."""

import numpy as np

import oxide as ox
from oxide import DisjointSlice, Slice, f32
from {module} import scale, scaled


def test_scale_on_cpu():
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    with ox.device("cpu"):
        assert np.array_equal(scaled(x, 2.5), x * np.float32(2.5))


def test_scale_compiles_to_ptx():
    ck = scale.compile(Slice[f32], f32, DisjointSlice[f32], arch="sm_90")
    assert ".entry" in ck.ptx
'''

README = '''\
# {name}

GPU kernels in Python with oxide (the `oxide-cuda` package).

```
pip install -e ".[test]"
pytest
oxide run {module}.py
oxide inspect {module}.py::scale --stage ptx
```

`pytest` runs the kernels on the CPU (no GPU needed); `oxide run` calls `main()`, on
the GPU when there is one; `oxide inspect` shows the PTX the kernel compiles to.

`{module}.py` holds the kernel; `tests/` checks it against NumPy.

## Where oxide comes from
`pyproject.toml` depends on `oxide-cuda`. Where that package is not on your index, install
oxide first, from a checkout or a wheel, and pip keeps it when it installs this project:

```
pip install -e /path/to/oxide            # a checkout (editable)
pip install /path/to/oxide_cuda-*.whl    # or a wheel (`python -m build` in the checkout)
pip install -e ".[test]"
```

To pin that source in the project itself, replace the dependency with a direct
reference: `dependencies = ["oxide-cuda @ file:///path/to/oxide"]`.
'''


def module_name(name: str) -> str:
    """A Python module name for a project name: `my-kernels` -> `my_kernels`.

    A name that is not an identifier, or that would shadow an installed module
    (`oxide`, `numpy`, `test`), gets a `_kernels` suffix or `kernels_` prefix.
    """
    module = re.sub(r"\W", "_", name).lower()
    if not module or module[0].isdigit() or keyword.iskeyword(module):
        return f"kernels_{module}"
    spec = importlib.util.find_spec(module)
    if spec is not None and spec.origin is not None:  # not a bare directory (namespace)
        return f"{module}_kernels"
    return module


def new(
    name: Annotated[str, typer.Argument(help="The project's name (and its directory).")],
) -> None:
    """Create a project: pyproject, a kernel module, a test that passes on the CPU, a README."""
    root = Path(name)
    if root.exists() and any(root.iterdir()):
        console.print(f"[red]error:[/red] {escape(str(root))} exists and is not empty")
        raise typer.Exit(1)
    project = root.resolve().name
    module = module_name(project)
    files = {
        "pyproject.toml": PYPROJECT,
        f"{module}.py": KERNEL_MODULE,
        f"tests/test_{module}.py": TEST_MODULE,
        "README.md": README,
        ".gitignore": "__pycache__/\n*.egg-info/\n.pytest_cache/\n",
    }
    for rel, template in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(name=project, module=module))
    console.print(f"created {escape(str(root))}/ with {', '.join(escape(f) for f in files)}")
    console.print(f"next: cd {escape(name)} && pytest  (the project's README says how to "
                  "install it elsewhere, oxide included)")
