"""Finding the NVIDIA pieces oxide uses: libdevice and the nvJitLink library.

Both come from pip wheels (nvidia-nvvm, nvidia-nvjitlink) or a CUDA toolkit. They are
looked up through `cuda.pathfinder` first, NVIDIA's own search (wheels, conda, CUDA_HOME,
the system), and by a glob over the wheels' and toolkit's folders only where pathfinder
is missing or finds nothing. Pathfinder costs ~30-50 ms a process (mostly its import), a
sixth of a cold compile, so its answer is kept on disk in the cache directory
(`toolchain.json`, keyed by the Python prefix and CUDA_HOME/CUDA_PATH) and checked by a
`stat` on the next process: a later process pays well under a millisecond. Nothing here
imports cuda.core (~0.3 s).
"""

from __future__ import annotations

import functools
import glob
import json
import os
import sys
from collections.abc import Callable

from oxide.errors import TargetError

_MEMO_FILE = "toolchain.json"


def _site_dirs() -> list[str]:
    return [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)]


def _memo_key() -> str:
    """What the answers depend on: this environment and the toolkit variables."""
    return "|".join((sys.prefix, os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", "")))


def _memo_path() -> str | None:
    from oxide.cache_location import cache_dir

    root = cache_dir()
    return None if root is None else os.path.join(root, _MEMO_FILE)


def _remembered(what: str) -> str | None:
    """The path found for `what` by an earlier process, if it is still there."""
    path = _memo_path()
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            memo = json.load(f)
        found = memo[_memo_key()][what]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return found if isinstance(found, str) and os.path.isfile(found) else None


def _remember(what: str, found: str) -> None:
    """Keep `found` for later processes (atomically, in a directory marked as oxide's
    cache, so `oxide cache clear` removes it; a read-only cache is no error)."""
    from pathlib import Path

    from oxide.cache_location import write

    path = _memo_path()
    if path is None:
        return
    try:
        with open(path, encoding="utf-8") as f:
            memo = json.load(f)
        if not isinstance(memo, dict):
            memo = {}
    except (OSError, ValueError):
        memo = {}
    memo.setdefault(_memo_key(), {})[what] = found
    write(Path(path).parent, _MEMO_FILE, json.dumps(memo, indent=1).encode())


def _resolve(what: str, pathfinder: Callable[[], str | None], globbed: Callable[[], list[str]],
             file: str, package: str) -> str:
    """The remembered path, else pathfinder's, else the first globbed file that exists;
    a TargetError naming `file` and the wheel (`package`) that provides it otherwise."""
    found = _remembered(what)
    if found is not None:
        return found
    try:
        found = pathfinder()
    except Exception:  # pathfinder missing, too old, or finding nothing: the globs decide
        found = None
    if not (found and os.path.isfile(found)):
        found = next((c for c in globbed() if os.path.isfile(c)), None)
    if found is None:
        raise TargetError(f"{what} ({file}) was not found",
                          hint=f"pip install {package}, or set CUDA_HOME to a CUDA toolkit")
    _remember(what, found)
    return found


def _libdevice_by_pathfinder() -> str | None:
    from cuda.pathfinder import find_bitcode_lib

    found = find_bitcode_lib("device")
    return str(found) if found else None


def _libdevice_globbed() -> list[str]:
    candidates = []
    for site in _site_dirs():
        candidates += glob.glob(os.path.join(site, "nvidia", "cu*", "nvvm", "libdevice",
                                             "libdevice.10.bc"))
        candidates += glob.glob(os.path.join(site, "nvidia", "cuda_nvcc", "nvvm", "libdevice",
                                             "libdevice.10.bc"))
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            candidates.append(os.path.join(os.environ[env], "nvvm", "libdevice", "libdevice.10.bc"))
    candidates.append("/usr/local/cuda/nvvm/libdevice/libdevice.10.bc")
    return candidates


@functools.cache
def find_libdevice() -> str:
    """The path of libdevice.10.bc (cuda.pathfinder, else the nvidia-nvvm wheel,
    $CUDA_HOME or /usr/local/cuda)."""
    return _resolve("libdevice", _libdevice_by_pathfinder, _libdevice_globbed,
                    "libdevice.10.bc", "nvidia-nvvm")


def _nvjitlink_by_pathfinder() -> str | None:
    from cuda.pathfinder import load_nvidia_dynamic_lib

    return str(load_nvidia_dynamic_lib("nvJitLink").abs_path)


def _nvjitlink_globbed() -> list[str]:
    candidates = []
    for site in _site_dirs():
        candidates += sorted(glob.glob(os.path.join(site, "nvidia", "cu*", "lib",
                                                    "libnvJitLink.so*")), reverse=True)
        candidates += sorted(glob.glob(os.path.join(site, "nvidia", "nvjitlink", "lib",
                                                    "libnvJitLink.so*")), reverse=True)
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            candidates += sorted(glob.glob(os.path.join(os.environ[env], "lib64",
                                                        "libnvJitLink.so*")), reverse=True)
    candidates += sorted(glob.glob("/usr/local/cuda/lib64/libnvJitLink.so*"), reverse=True)
    return candidates


@functools.cache
def find_nvjitlink() -> str:
    """The path of libnvJitLink.so (cuda.pathfinder, else the nvidia-nvjitlink wheel,
    $CUDA_HOME or /usr/local/cuda)."""
    return _resolve("nvJitLink", _nvjitlink_by_pathfinder, _nvjitlink_globbed,
                    "libnvJitLink.so", "nvidia-nvjitlink")
