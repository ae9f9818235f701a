"""`oxide cache info|clear`: the on-disk compile cache (`oxide.runtime.cache` owns its layout).

Its directory is `$OXIDE_CACHE_DIR`, else `~/.cache/oxide` (`OXIDE_CACHE=0`
turns it off). That variable may name a directory holding the user's own files,
so clearing deletes only oxide's entries (runtime/cache_layout.py says which),
only in a directory carrying oxide's CACHEDIR.TAG marker, never following a
symlink; the directory and the marker stay, so a running process can keep writing.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from oxide.runtime import cache_layout
from oxide.runtime.cache import cache_dir

console = Console(highlight=False, soft_wrap=True)
app = typer.Typer(help="The on-disk compile cache.", no_args_is_help=True)


def enabled_dir() -> Path:
    """The cache directory; exits with a note when OXIDE_CACHE=0 turns the cache off."""
    root = cache_dir()
    if root is None:
        console.print("the compile cache is off (OXIDE_CACHE=0)")
        raise typer.Exit(0)
    return root


def human(size: float) -> str:
    """A byte count as people read it: 512 B, 3.4 KiB, 1.2 GiB."""
    if size < 1024:
        return f"{size:,.0f} B"
    for unit in ("KiB", "MiB"):
        size /= 1024
        if size < 1024:
            return f"{size:,.1f} {unit}"
    return f"{size / 1024:,.1f} GiB"


@app.command()
def info() -> None:
    """Print the cache directory, its entry count and size."""
    root = enabled_dir()
    if not root.exists():
        state = " (not created yet)"
    elif not root.is_dir():
        state = " (not a directory: oxide cannot cache kernels there)"
    elif not cache_layout.is_marked(root):
        state = f" (not marked as oxide's: no {cache_layout.MARKER} written by oxide)"
    else:
        state = ""
    found = cache_layout.usage(root)
    console.print(f"cache directory: {escape(str(root))}{escape(state)}")
    console.print(f"entries: {found.entries}")
    console.print(f"size: {human(found.bytes)}")
    if found.others:
        console.print(f"other files (not oxide's, left alone): {found.others}")


@app.command()
def clear() -> None:
    """Remove oxide's cache entries (the directory, its marker and other files stay)."""
    root = enabled_dir()
    try:
        removed = cache_layout.clear(root)
    except cache_layout.NotOxideCacheError:
        console.print(
            f"[red]error:[/red] {escape(str(root))} is not marked as oxide's cache (it has "
            f"no {cache_layout.MARKER} written by oxide) and it is not empty: deleting "
            "nothing. Check OXIDE_CACHE_DIR; oxide marks a directory the first time it "
            "caches a kernel there.")
        raise typer.Exit(1) from None
    except OSError as exc:
        console.print(f"[red]error:[/red] cannot clear {escape(str(root))}: {escape(str(exc))}")
        raise typer.Exit(1) from None
    line = (f"removed {removed.entries} entries ({removed.files} files, "
            f"{human(removed.bytes)}) from {escape(str(root))}")
    if removed.others:
        line += f"; left {removed.others} other files that are not oxide's"
    console.print(line)
