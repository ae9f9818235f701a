"""Issue 16 item 5: `oxide sanitize FILE` runs a script under compute-sanitizer, or says how
to get it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from oxide.cli.main import app


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "job.py"
    path.write_text("print('ran')\n")
    return path


def test_without_the_sanitizer_it_says_how_to_install_it(script: Path, monkeypatch) -> None:
    monkeypatch.setenv("OXIDE_SANITIZER", str(script.parent / "missing"))
    result = CliRunner().invoke(app, ["sanitize", str(script)])
    assert result.exit_code == 2
    assert "CUDA Toolkit" in result.output and "OXIDE_SANITIZER" in result.output


def test_it_runs_the_script_under_the_sanitizer_and_keeps_its_exit_code(
        script: Path, tmp_path: Path, monkeypatch) -> None:
    fake = tmp_path / "compute-sanitizer"  # records its arguments, fails like a finding
    log = tmp_path / "args.txt"
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {log}\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("OXIDE_SANITIZER", str(fake))
    result = CliRunner().invoke(app, ["sanitize", "--tool", "racecheck", str(script), "x", "7"])
    assert result.exit_code == 1
    args = log.read_text().split()
    assert args[:2] == ["--tool", "racecheck"] and args[-3:] == [str(script), "x", "7"]


def test_a_bad_tool_is_a_usage_error(script: Path) -> None:
    result = CliRunner().invoke(app, ["sanitize", "--tool", "leakcheck", str(script)])
    assert result.exit_code == 2 and "memcheck" in result.output


@pytest.mark.skipif(os.name != "posix", reason="uses a shell script as the fake sanitizer")
def test_sanitize_is_listed_in_help() -> None:
    assert "sanitize" in CliRunner().invoke(app, ["--help"]).output
