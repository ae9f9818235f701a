"""Where oxide keeps files between processes: compiled kernels (runtime/cache.py),
autotuning choices, and the toolchain's resolved library paths (codegen/toolchain.py).

A module of its own, with no imports beyond the standard library, so that the compiler's
early stages can use it without pulling in the runtime.
"""

from __future__ import annotations

import os
from pathlib import Path


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
