"""`oxide cache info|clear`: the on-disk compile cache (`oxide.runtime.cache` owns its layout).

Its directory is `$OXIDE_CACHE_DIR`, else `~/.cache/oxide` (`OXIDE_CACHE=0`
turns it off). Clearing removes every entry and leaves the directory, so a
running process can keep writing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

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


def entries(root: Path) -> list[Path]:
    """The cached files (every file below the directory)."""
    return [p for p in root.rglob("*") if p.is_file()] if root.is_dir() else []


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
    files = entries(root)
    size = sum(p.stat().st_size for p in files)
    state = "" if root.is_dir() else " (not created yet)"
    console.print(f"cache directory: {escape(str(root))}{state}")
    console.print(f"entries: {len(files)}")
    console.print(f"size: {human(size)}")


@app.command()
def clear() -> None:
    """Remove every cache entry (the directory itself stays)."""
    root = enabled_dir()
    files = entries(root)
    size = sum(p.stat().st_size for p in files)
    for child in root.iterdir() if root.is_dir() else ():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    console.print(f"removed {len(files)} entries ({human(size)}) from {escape(str(root))}")
