"""The cache directory: the marker that says it is oxide's, what in it is oxide's, clearing it.

    <root>/CACHEDIR.TAG           the marker (Cache Directory Tagging spec, so backup
                                  tools skip the directory), naming oxide as its writer
    <root>/kernels/<sha256>.oxk   compiled kernels (runtime/cache_entry.py)
    <root>/sources/<sha256>       memos of the compiler sources' digest (runtime/cache.py)
    <root>/autotune/<sha256>.json ox.autotune's choices (autotuner.py)
    <root>/warps/<sha256>.json    the warps num_warps="auto" chose (tile/auto_warps.py)
    <root>/checks/<sha256>        empty files an earlier oxide wrote (a compile that
                                  passed: the retired GEMM template's check), cleared
                                  with the rest
    <root>/toolchain.json         where libdevice and nvJitLink were found (codegen/toolchain.py)
    .tmp-XXXXXXXX                 a write in progress, or one a killed process left

`OXIDE_CACHE_DIR` may name any directory, including one holding the user's own files,
so oxide deletes only what it would have written: files (never symlinks, never what
they point to, never directories' contents below these two) whose names match the
patterns above, and only in a directory that holds oxide's marker. The marker is
written whenever oxide writes into the directory.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from oxide.cache_location import MARKER, MARKER_TEXT, write, write_atomically  # noqa: F401 - this module's names too
from oxide.runtime.safe_read import read_regular_file

_SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55"
_WRITER = b"created by oxide"
_TMP = r"\.tmp-[A-Za-z0-9_]{1,64}"
PATTERNS = {"kernels": re.compile(rf"[0-9a-f]{{64}}\.oxk|{_TMP}"),
            "sources": re.compile(rf"[0-9a-f]{{64}}|{_TMP}"),
            "autotune": re.compile(rf"[0-9a-f]{{64}}\.json|{_TMP}"),
            "warps": re.compile(rf"[0-9a-f]{{64}}\.json|{_TMP}"),
            "checks": re.compile(rf"[0-9a-f]{{64}}|{_TMP}"),
            "": re.compile(rf"toolchain\.json|{_TMP}")}  # the root: the toolchain memo, writes
_ENTRY = re.compile(r"[0-9a-f]{64}\.oxk")


class NotOxideCacheError(Exception):
    """The directory holds files but no oxide marker: nothing in it may be deleted."""


@dataclass
class Usage:
    """What oxide keeps in a cache directory."""

    entries: int = 0  # compiled kernels
    files: int = 0  # every file of oxide's, entries included
    bytes: int = 0
    others: int = 0  # things in the directory that are not oxide's (left alone)


def is_marked(root: Path) -> bool:
    """Whether `root` holds oxide's marker (a regular file, not a symlink, naming oxide)."""
    try:
        text = read_regular_file(root / MARKER, 4096)
    except OSError:
        return False
    return text.startswith(_SIGNATURE) and _WRITER in text


def usage(root: Path) -> Usage:
    """Count oxide's files under `root` (following no symlinks)."""
    found = Usage()
    for sub, name, st in _scan(root, found):
        found.files += 1
        found.bytes += st.st_size
        found.entries += sub == "kernels" and bool(_ENTRY.fullmatch(name))
    return found


def clear(root: Path) -> Usage:
    """Delete oxide's files under `root` and return what was deleted (`others`: what was
    left). Raises NotOxideCacheError, deleting nothing, for a directory that has contents
    but no marker."""
    if not is_marked(root):
        try:
            with os.scandir(root) as it:
                if any(True for _ in it):
                    raise NotOxideCacheError(str(root))
        except (FileNotFoundError, NotADirectoryError):
            pass
        return Usage()
    removed = Usage()
    for sub, name, st in _scan(root, removed, delete=True):
        removed.files += 1
        removed.bytes += st.st_size
        removed.entries += sub == "kernels" and bool(_ENTRY.fullmatch(name))
    for sub in (s for s in PATTERNS if s):
        try:
            os.rmdir(root / sub)  # only when empty; a running process recreates it
        except OSError:
            pass
    return removed


def _scan(root: Path, tally: Usage, delete: bool = False
          ) -> list[tuple[str, str, os.stat_result]]:
    """(subfolder, name, stat) of each of oxide's files; counts the rest in `tally.others`.

    Each folder is opened once with O_NOFOLLOW and read and unlinked through that
    descriptor, so a folder swapped for a symlink meanwhile cannot redirect a deletion."""
    found = []
    for sub, pattern in PATTERNS.items():
        fd = _open_dir(root / sub, follow=False) if sub else _open_dir(root, follow=True)
        if fd is None:
            continue
        try:
            for name in os.listdir(fd):
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    continue
                if sub == "" and (name == MARKER or (name in PATTERNS
                                                     and stat.S_ISDIR(st.st_mode))):
                    continue  # the marker stays; the folders are scanned on their own
                if not (stat.S_ISREG(st.st_mode) and pattern.fullmatch(name)):
                    tally.others += 1
                    continue
                if delete:
                    try:
                        os.unlink(name, dir_fd=fd)
                    except FileNotFoundError:  # another `clear`, or a rename, got there first
                        continue
                found.append((sub, name, st))
        finally:
            os.close(fd)
    return found


def _open_dir(path: Path, follow: bool) -> int | None:
    """A descriptor of the directory `path` (None if missing or not a directory, or, unless
    `follow`, a symlink: the root may be a symlink the user set up; oxide's folders may not)."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        return os.open(path, flags)
    except OSError:
        return None
