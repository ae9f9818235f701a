"""Issue 16 item 3: `oxide --version`, clean help text, and the XDG cache directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import oxide as ox
from oxide.cli.main import app
from oxide.runtime.cache import cache_dir


def test_version_flag_prints_the_package_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"oxide {ox.__version__}"


def test_help_shows_no_metavar_placeholders() -> None:
    result = CliRunner().invoke(app, ["inspect", "--help"])
    assert result.exit_code == 0
    assert "{target}" not in result.output and "<str>" not in result.output


def test_cache_dir_follows_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("OXIDE_CACHE_DIR", raising=False)
    monkeypatch.delenv("OXIDE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "oxide"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # not absolute: ignored, as XDG says
    assert cache_dir() == Path.home() / ".cache" / "oxide"
    monkeypatch.setenv("OXIDE_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
