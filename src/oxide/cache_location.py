"""Where oxide keeps files between processes: compiled kernels (runtime/cache.py),
autotuning choices, and the toolchain's resolved library paths (codegen/toolchain.py).

A module of its own, with no imports beyond the standard library, so that the compiler's
early stages can use it without pulling in the runtime. What may be deleted from the
directory, and how, is runtime/cache_layout.py's; writing into it (marked as oxide's
first) is here, so every writer marks it the same way.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

MARKER = "CACHEDIR.TAG"
MARKER_TEXT = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by oxide (the Python GPU kernel compiler).\n"
    "# `oxide cache clear` deletes oxide's entries only, and only where this file is.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n")


def cache_dir() -> Path | None:
    """The cache directory (`OXIDE_CACHE_DIR`, else `$XDG_CACHE_HOME/oxide`, else
    `~/.cache/oxide`), or None when `OXIDE_CACHE=0` turns the cache off."""
    if os.environ.get("OXIDE_CACHE", "1") == "0":
        return None
    if os.environ.get("OXIDE_CACHE_DIR"):
        return Path(os.environ["OXIDE_CACHE_DIR"])
    # the XDG base directory rule: $XDG_CACHE_HOME if set and absolute, else ~/.cache
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "oxide"


def write(root: Path, rel: str, data: bytes) -> bool:
    """Write `root/rel` atomically, marking `root` as oxide's first; False when the disk
    refuses (read-only, full): the cache is an optimization."""
    if not os.path.lexists(root / MARKER) and not write_atomically(
            root / MARKER, MARKER_TEXT.encode()):
        return False
    return write_atomically(root / rel, data)


def write_atomically(path: Path, data: bytes) -> bool:
    """Write through a temporary file and a rename, so readers never see half a file (and a
    rename replaces whatever was there, a FIFO or a symlink included, without opening it)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        return False
    return True
