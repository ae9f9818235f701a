"""Finding libdevice and nvJitLink (codegen/toolchain.py): cuda.pathfinder first, its
answer kept on disk for later processes, the globs as the fallback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from oxide.codegen import toolchain


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OXIDE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("OXIDE_CACHE", raising=False)
    toolchain.find_libdevice.cache_clear()
    toolchain.find_nvjitlink.cache_clear()
    yield tmp_path
    toolchain.find_libdevice.cache_clear()
    toolchain.find_nvjitlink.cache_clear()


def test_pathfinder_answers_first_and_is_remembered(fresh: Path) -> None:
    pytest.importorskip("cuda.pathfinder")
    from cuda.pathfinder import find_bitcode_lib

    path = toolchain.find_libdevice()
    assert path == str(find_bitcode_lib("device"))
    memo = json.loads((fresh / "toolchain.json").read_text())
    assert memo[toolchain._memo_key()]["libdevice"] == path
    lib = toolchain.find_nvjitlink()
    assert os.path.isfile(lib) and "nvJitLink" in lib
    assert memo != json.loads((fresh / "toolchain.json").read_text())  # nvjitlink added


def test_a_later_process_reads_the_memo_without_pathfinder(fresh: Path) -> None:
    first = toolchain.find_libdevice()
    code = ("import sys, oxide.codegen.toolchain as t; p = t.find_libdevice(); "
            "print(p); print('cuda.pathfinder' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "OXIDE_CACHE_DIR": str(fresh)}, check=True)
    path, imported = out.stdout.split()
    assert path == first and imported == "False"


def test_a_memo_naming_a_missing_file_is_ignored(fresh: Path) -> None:
    (fresh / "toolchain.json").write_text(json.dumps(
        {toolchain._memo_key(): {"libdevice": str(fresh / "gone.bc")}}))
    assert os.path.isfile(toolchain.find_libdevice())


def test_a_corrupt_memo_is_ignored_and_rewritten(fresh: Path) -> None:
    (fresh / "toolchain.json").write_text("{not json")
    path = toolchain.find_libdevice()
    assert json.loads((fresh / "toolchain.json").read_text())[toolchain._memo_key()] == {
        "libdevice": path}


def test_the_globs_answer_when_pathfinder_fails(fresh: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> str:
        raise RuntimeError("pathfinder unavailable")

    monkeypatch.setattr(toolchain, "_libdevice_by_pathfinder", broken)
    path = toolchain.find_libdevice()
    assert path.endswith("libdevice.10.bc") and os.path.isfile(path)


def test_nothing_found_is_a_target_error(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from oxide.errors import TargetError

    monkeypatch.setattr(toolchain, "_libdevice_by_pathfinder", lambda: None)
    monkeypatch.setattr(toolchain, "_libdevice_globbed", lambda: [str(fresh / "none.bc")])
    with pytest.raises(TargetError, match="libdevice") as info:
        toolchain.find_libdevice()
    assert "nvidia-nvvm" in (info.value.hint or "")


def test_cache_off_still_finds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OXIDE_CACHE", "0")
    toolchain.find_libdevice.cache_clear()
    try:
        assert os.path.isfile(toolchain.find_libdevice())
    finally:
        toolchain.find_libdevice.cache_clear()


def test_cache_clear_removes_the_memo(fresh: Path) -> None:
    from oxide.runtime.cache_layout import clear, is_marked

    toolchain.find_libdevice()
    assert is_marked(fresh) and (fresh / "toolchain.json").is_file()
    assert clear(fresh).files == 1
    assert not (fresh / "toolchain.json").exists()
