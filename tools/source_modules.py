"""Import generated kernel source as a module, from a real file.

The fuzzers (tools/fuzzing, tools/tile_fuzzing) generate kernels as text. oxide's
frontend and its diagnostics read a kernel's source from its file, so each program is
written to a file in one temporary directory per process (removed at exit) and imported
from there.
"""

from __future__ import annotations

import atexit
import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType

_DIR: Path | None = None


def import_source(name: str, source: str) -> ModuleType:
    """Write `source` to `<temp dir>/<name>.py`, import it as module `name` and return it."""
    global _DIR
    if _DIR is None:
        _DIR = Path(tempfile.mkdtemp(prefix="oxide-fuzz-"))
        atexit.register(shutil.rmtree, _DIR, True)
    path = _DIR / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
