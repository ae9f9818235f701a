"""Issue 14, items 16-19: `oxide run`'s verdict, OXIDE_DUMP on the CPU, `oxide cache clear`
deleting only oxide's files, and cache entries / bundles that are damaged, tampered with or
replaced by something that is not a file.

Everything but the `gpu`-marked test runs without a GPU: cubins compile through nvJitLink.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import oxide as ox
from oxide import DisjointSlice, Slice, f32, thread
from oxide.aot import Job, build_bundle
from oxide.cli.main import app
from oxide.examples.scale import scale
from oxide.runtime import cache, cache_entry, cache_layout
from oxide.runtime.args import make_plan, read_args
from oxide.runtime.bundle import MANIFEST, BundleError, manifest_digest
from oxide.runtime.device import Device
from oxide.runtime.gpu import load_image, plan_sizes
from oxide.runtime.safe_read import read_regular_file

runner = CliRunner()
GPU0 = Device("cuda", 0)


def finishes(call: Callable[[], Any], seconds: float = 20.0) -> Any:
    """`call()`'s result, or what it raised; fails (instead of hanging the suite) if it
    blocks."""
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["value"] = call()
        except BaseException as exc:  # handed to the test's thread below
            out["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "blocked"
    if "error" in out:
        raise out["error"]
    return out["value"]


# ---------------------------------------------------------------------------
# 16: `oxide run` passes only on True / None


@pytest.mark.parametrize("value, passes, says", [
    ("True", True, "returned True"),
    ("None", True, "returned None"),
    ("np.True_", True, "returned np.True_"),
    ("False", False, "returned False"),
    ("np.False_", False, "returned np.False_"),
    ("0", False, "an int is not a verdict"),
    ("1", False, "an int is not a verdict"),
    ("[]", False, "a list is not a verdict"),
    ("[1]", False, "a list is not a verdict"),
    ("'ok'", False, "a str is not a verdict"),
    ("Result(np.False_)", False, "returned <Result>"),
    ("Result(np.True_)", True, "returned <Result>"),
    ("Result(1)", False, "its .passed is 1 (an int)"),
])
def test_run_passes_only_when_main_returns_true_or_none(tmp_path: Path, value: str,
                                                        passes: bool, says: str) -> None:
    (tmp_path / "mine.py").write_text(textwrap.dedent(f"""
        import numpy as np

        class Result:
            def __init__(self, passed):
                self.passed = passed
            def __repr__(self):
                return "<Result>"

        def main():
            return {value}
    """))
    result = runner.invoke(app, ["run", str(tmp_path / "mine.py"), "--device", "cpu"])
    assert result.exit_code == (0 if passes else 1), result.stdout
    assert ("PASS" if passes else "FAIL") in result.stdout
    assert says in result.stdout


# ---------------------------------------------------------------------------
# 16: OXIDE_DUMP=ir,llvm,ptx on a CPU launch


@ox.kernel
def add_one(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] + 1.0


def test_dump_with_ptx_does_not_break_a_cpu_launch(monkeypatch: pytest.MonkeyPatch,
                                                   capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OXIDE_DUMP", "ir, llvm,ptx,sass")
    x = np.arange(64, dtype=np.float32)
    out = np.zeros_like(x)
    with ox.device("cpu"):
        add_one[ox.LaunchConfig.for_num_elems(x.size)](x, out)
    np.testing.assert_array_equal(out, x + 1)
    err = capfd.readouterr().err
    assert "// ---- oxide ir: add_one_" in err and '"oxide.func"' in err
    assert "// ---- oxide llvm: add_one_" in err and "define" in err
    assert "none, compiled for the CPU" in err and ".entry" not in err
    assert "OXIDE_DUMP names no stage `sass`" in err


def test_dump_on_a_gpu_compile_still_prints_ptx(monkeypatch: pytest.MonkeyPatch,
                                                capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OXIDE_DUMP", "ptx")
    ck = add_one.compile(Slice[f32], DisjointSlice[f32], arch="sm_90")
    assert f".entry {ck.name}(" in capfd.readouterr().err


# ---------------------------------------------------------------------------
# 17: `oxide cache clear` deletes oxide's entries only


@pytest.fixture
def cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("OXIDE_CACHE_DIR", str(root))
    monkeypatch.delenv("OXIDE_CACHE", raising=False)
    return root


def test_clear_refuses_a_directory_that_is_not_oxides(cache_root: Path) -> None:
    cache_root.mkdir()
    (cache_root / "thesis.tex").write_text("years of work")
    (cache_root / "kernels").mkdir()
    (cache_root / "kernels" / f"{'a' * 64}.oxk").write_bytes(b"looks like ours")
    result = runner.invoke(app, ["cache", "clear"])
    assert result.exit_code == 1
    assert "not marked as oxide's cache" in result.stdout and "deleting nothing" in result.stdout
    assert (cache_root / "thesis.tex").read_text() == "years of work"
    assert (cache_root / "kernels" / f"{'a' * 64}.oxk").exists()
    info = runner.invoke(app, ["cache", "info"])
    assert info.exit_code == 0 and "not marked as oxide's" in info.stdout


def test_clear_of_a_missing_or_empty_directory(cache_root: Path) -> None:
    assert runner.invoke(app, ["cache", "clear"]).exit_code == 0
    cache_root.mkdir()
    result = runner.invoke(app, ["cache", "clear"])
    assert result.exit_code == 0 and "removed 0 entries" in result.stdout


def test_a_cache_path_that_is_a_file_is_left_alone(cache_root: Path) -> None:
    cache_root.write_text("the user's")
    info = runner.invoke(app, ["cache", "info"])
    assert info.exit_code == 0 and "not a directory" in info.stdout
    result = runner.invoke(app, ["cache", "clear"])
    assert result.exit_code == 0 and "removed 0 entries" in result.stdout
    assert cache_root.read_text() == "the user's"


def test_clear_deletes_only_oxides_files_and_follows_no_symlink(cache_root: Path,
                                                                tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / f"{'c' * 64}.oxk").write_bytes(b"not in the cache")
    (outside / ("d" * 64)).write_bytes(b"not in the cache either")
    kernels = cache_root / "kernels"
    kernels.mkdir(parents=True)
    (cache_root / cache_layout.MARKER).write_text(cache_layout.MARKER_TEXT)
    ours = [kernels / f"{'a' * 64}.oxk", kernels / f"{'b' * 64}.oxk", kernels / ".tmp-k2j4_x9a"]
    for p in ours:
        p.write_bytes(b"x" * 100)
    theirs = [cache_root / "notes.txt", kernels / "README", kernels / f"{'a' * 64}.oxk.bak",
              kernels / f"{'A' * 64}.oxk"]
    for p in theirs:
        p.write_text("the user's")
    (kernels / "sub").mkdir()
    (kernels / "sub" / f"{'e' * 64}.oxk").write_text("the user's, one level down")
    (kernels / f"{'f' * 64}.oxk").symlink_to(outside / f"{'c' * 64}.oxk")
    (cache_root / "sources").symlink_to(outside)  # oxide's folder name, but a symlink out

    info = runner.invoke(app, ["cache", "info"])
    assert info.exit_code == 0 and "entries: 2" in info.stdout and "300 B" in info.stdout
    result = runner.invoke(app, ["cache", "clear"])
    assert result.exit_code == 0, result.stdout
    assert "removed 2 entries (3 files, 300 B)" in result.stdout
    assert "left 7 other files" in result.stdout
    assert not any(p.exists() for p in ours)
    assert all(p.read_text().startswith("the user's") for p in theirs)
    assert (kernels / "sub" / f"{'e' * 64}.oxk").exists()
    assert (kernels / f"{'f' * 64}.oxk").is_symlink()
    assert (outside / f"{'c' * 64}.oxk").read_bytes() == b"not in the cache"
    assert (outside / ("d" * 64)).read_bytes() == b"not in the cache either"
    assert cache_layout.is_marked(cache_root)


def test_a_marker_must_be_oxides_own(cache_root: Path, tmp_path: Path) -> None:
    cache_root.mkdir()
    (cache_root / "mine.txt").write_text("the user's")
    (cache_root / cache_layout.MARKER).write_text(  # another tool's tag is not oxide's
        "Signature: 8a477f597d28d172789f06886806bc55\n# created by some other tool\n")
    assert not cache_layout.is_marked(cache_root)
    (cache_root / cache_layout.MARKER).unlink()
    real = tmp_path / "tag"
    real.write_text(cache_layout.MARKER_TEXT)
    (cache_root / cache_layout.MARKER).symlink_to(real)  # a symlinked marker does not count
    assert not cache_layout.is_marked(cache_root)
    assert runner.invoke(app, ["cache", "clear"]).exit_code == 1
    assert (cache_root / "mine.txt").exists()


KERNELS = """
import oxide as ox
from oxide import f32, Slice, DisjointSlice, thread

@ox.kernel
def triple(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * 3.0
"""


@pytest.fixture
def kernel_module(tmp_path: Path) -> Any:
    import importlib.util

    path = tmp_path / "kmod.py"
    path.write_text(KERNELS)
    spec = importlib.util.spec_from_file_location(f"kmod_{abs(hash(str(path)))}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def plan_for(kernel: Any, n: int = 16) -> Any:
    x = np.zeros(n, np.float32)
    args = (x, x.copy())
    _, views = read_args(kernel, args, GPU0)
    return make_plan(kernel, args, views, GPU0)


def test_a_launch_marks_the_cache_and_clear_removes_its_entries(cache_root: Path,
                                                                kernel_module: Any) -> None:
    load_image(kernel_module.triple, plan_for(kernel_module.triple), "sm_90")
    assert cache_layout.is_marked(cache_root)
    (cache_root / "mine.txt").write_text("the user's")
    result = runner.invoke(app, ["cache", "clear"])
    assert result.exit_code == 0 and "removed 1 entries" in result.stdout
    assert sorted(p.name for p in cache_root.iterdir()) == [cache_layout.MARKER, "mine.txt"]


# ---------------------------------------------------------------------------
# 18, 19: damaged, tampered and malformed cache entries


@pytest.fixture
def entry(cache_root: Path, kernel_module: Any) -> tuple[Any, Any, Path, bytes]:
    """(kernel, plan, the entry's path, its good bytes) after one compile."""
    kernel, plan = kernel_module.triple, plan_for(kernel_module.triple)
    load_image(kernel, plan, "sm_90")
    (path,) = (cache_root / "kernels").glob("*.oxk")
    return kernel, plan, path, path.read_bytes()


def forge(path: Path, header: Any, cubin: bytes) -> None:
    """An entry whose checksum is right, so the header's own checks are what must catch it."""
    raw = json.dumps(header).encode()
    body = len(raw).to_bytes(4, "little") + raw + cubin
    path.write_bytes(cache_entry.MAGIC + hashlib.sha256(body).digest() + body)


def good_header(path: Path, good: bytes) -> tuple[dict[str, Any], bytes]:
    start = len(cache_entry.MAGIC) + 32
    n = int.from_bytes(good[start:start + 4], "little")
    return json.loads(good[start + 4:start + 4 + n]), good[start + 4 + n:]


def assert_recompiled(kernel: Any, plan: Any, path: Path, good: bytes) -> None:
    """The entry is a miss (no exception, no hang), and a launch replaces it with a good one."""
    assert finishes(lambda: cache.load(path.stem, plan_sizes(plan))) is None
    image = finishes(lambda: load_image(kernel, plan, "sm_90"))
    assert image.grid_x_factor == cache.load(path.stem, plan_sizes(plan)).grid_x_factor
    assert not path.is_symlink() and path.read_bytes() == good


def test_an_intact_entry_loads(entry: tuple[Any, Any, Path, bytes]) -> None:
    kernel, plan, path, good = entry
    image = cache.load(path.stem, plan_sizes(plan))
    assert image is not None and image.code == good_header(path, good)[1]


def test_the_checksum_covers_the_header(entry: tuple[Any, Any, Path, bytes]) -> None:
    """The H200 report: a header whose grid_x_factor changed launched a quarter/half grid."""
    kernel, plan, path, good = entry
    header, _ = good_header(path, good)
    factor = header["grid_x_factor"]
    other = next(f for f in sorted(cache_entry.GRID_X_FACTORS) if f != factor)
    field = f'"grid_x_factor":{factor}'.encode()
    assert field in good
    path.write_bytes(good.replace(field, f'"grid_x_factor":{other}'.encode()))
    assert_recompiled(kernel, plan, path, good)


def flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]


@pytest.mark.parametrize("damage", [
    "empty", "magic only", "truncated in the header", "truncated in the cubin", "one byte short",
    "wrong magic", "old format", "flipped checksum byte", "flipped length byte",
    "flipped header byte", "flipped cubin byte", "appended byte",
])
def test_damaged_entries_are_recompiled(entry: tuple[Any, Any, Path, bytes],
                                        damage: str) -> None:
    kernel, plan, path, good = entry
    magic = len(cache_entry.MAGIC)
    header_at = magic + 32 + 4
    bad = {
        "empty": b"",
        "magic only": cache_entry.MAGIC,
        "truncated in the header": good[:header_at + 10],
        "truncated in the cubin": good[:len(good) // 2 + header_at],
        "one byte short": good[:-1],
        "wrong magic": b"OXIDE-KERNEL-CACHE 3\n" + good[magic:],
        "old format": b"OXIDE-KERNEL-CACHE\n" + good[magic + 32:],
        "flipped checksum byte": flip(good, magic + 5),
        "flipped length byte": flip(good, magic + 32),
        "flipped header byte": flip(good, header_at + 20),
        "flipped cubin byte": flip(good, len(good) - 100),
        "appended byte": good + b"\0",
    }[damage]
    path.write_bytes(bad)
    assert_recompiled(kernel, plan, path, good)


@pytest.mark.parametrize("change", [
    "not an object", "a string", "null", "missing field", "extra field", "key", "symbol type",
    "symbol text", "arg_sizes bool", "arg_sizes not a list", "grid_x_factor string",
    "grid_x_factor float", "grid_x_factor bool", "grid_x_factor 3", "grid_x_factor 0",
    "grid_x_factor huge", "ranks 4", "ranks string", "sites object", "site not an object",
    "site line string", "site negative col", "site missing detail", "cubin not ELF",
    "cubin without the symbol",
])
def test_well_checksummed_but_malformed_headers_are_recompiled(
        entry: tuple[Any, Any, Path, bytes], change: str) -> None:
    kernel, plan, path, good = entry
    header, cubin = good_header(path, good)
    site = dict(header["sites"][0]) if header["sites"] else {
        "kind": "index", "file": "f.py", "line": 1, "col": 0, "end_col": 1, "text": "t",
        "detail": "x"}
    forged: Any = dict(header)
    if change == "not an object":
        forged = [header]
    elif change == "a string":
        forged = "header"
    elif change == "null":
        forged = None
    elif change == "missing field":
        del forged["symbol"]
    elif change == "extra field":
        forged["cubin_sha256"] = "0" * 64
    elif change == "key":
        forged["key"] = "0" * 64
    elif change == "symbol type":
        forged["symbol"] = 7
    elif change == "symbol text":
        forged["symbol"] = "triple; rm -rf /"
    elif change == "arg_sizes bool":
        forged["arg_sizes"] = [True if s == 1 else s for s in header["arg_sizes"]] + [True]
    elif change == "arg_sizes not a list":
        forged["arg_sizes"] = {"0": 8}
    elif change.startswith("grid_x_factor"):
        forged["grid_x_factor"] = {"grid_x_factor string": "4", "grid_x_factor float": 4.0,
                                   "grid_x_factor bool": True, "grid_x_factor 3": 3,
                                   "grid_x_factor 0": 0, "grid_x_factor huge": 1 << 40}[change]
    elif change == "ranks 4":
        forged["thread_index_ranks"] = [4]
    elif change == "ranks string":
        forged["thread_index_ranks"] = "1"
    elif change == "sites object":
        forged["sites"] = {"0": site}
    elif change == "site not an object":
        forged["sites"] = [[1, 2]]
    elif change == "site line string":
        forged["sites"] = [{**site, "line": "7"}]
    elif change == "site negative col":
        forged["sites"] = [{**site, "col": -1}]
    elif change == "site missing detail":
        forged["sites"] = [{k: v for k, v in site.items() if k != "detail"}]
    elif change == "cubin not ELF":
        cubin = b"\0ELF" + cubin[4:]
    elif change == "cubin without the symbol":
        cubin = cubin.replace(header["symbol"].encode(), b"x" * len(header["symbol"]))
    forge(path, forged, cubin)
    assert_recompiled(kernel, plan, path, good)


def test_the_forger_makes_loadable_entries(entry: tuple[Any, Any, Path, bytes]) -> None:
    """The malformed-header tests above mean something only if an unchanged forge loads."""
    kernel, plan, path, good = entry
    header, cubin = good_header(path, good)
    forge(path, header, cubin)
    assert cache.load(path.stem, plan_sizes(plan)) is not None


def test_a_fifo_entry_neither_blocks_nor_stays(entry: tuple[Any, Any, Path, bytes]) -> None:
    kernel, plan, path, good = entry
    path.unlink()
    os.mkfifo(path)
    assert_recompiled(kernel, plan, path, good)


def test_a_symlink_to_dev_zero_is_not_read(entry: tuple[Any, Any, Path, bytes]) -> None:
    kernel, plan, path, good = entry
    path.unlink()
    path.symlink_to("/dev/zero")
    assert_recompiled(kernel, plan, path, good)
    assert Path("/dev/zero").exists() and not Path("/dev/zero").is_file()


def test_a_symlink_even_to_a_good_entry_is_replaced(entry: tuple[Any, Any, Path, bytes],
                                                    tmp_path: Path) -> None:
    kernel, plan, path, good = entry
    elsewhere = tmp_path / "elsewhere.oxk"
    elsewhere.write_bytes(good)
    path.unlink()
    path.symlink_to(elsewhere)
    assert_recompiled(kernel, plan, path, good)
    assert elsewhere.read_bytes() == good  # the rename replaced the link, not its target


def test_a_directory_or_oversized_entry_is_a_miss(entry: tuple[Any, Any, Path, bytes],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    kernel, plan, path, good = entry
    monkeypatch.setattr(cache_entry, "MAX_ENTRY_BYTES", len(good) - 1)
    assert cache.load(path.stem, plan_sizes(plan)) is None
    monkeypatch.undo()
    path.unlink()
    path.mkdir()
    assert cache.load(path.stem, plan_sizes(plan)) is None
    assert load_image(kernel, plan, "sm_90").code == good_header(path, good)[1]


def test_a_fifo_sources_memo_does_not_block(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OXIDE_CACHE_DIR", str(tmp_path))
    digest = cache._sources_digest()
    (memo,) = (tmp_path / "sources").iterdir()
    memo.unlink()
    os.mkfifo(memo)
    assert finishes(cache._sources_digest) == digest
    assert memo.read_text() == digest  # replaced by a regular file


def test_read_regular_file_refuses_what_is_not_one(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"abc")
    assert read_regular_file(f, 3) == b"abc"
    with pytest.raises(OSError):
        read_regular_file(f, 2)
    for make in (lambda p: os.mkfifo(p), lambda p: p.symlink_to(f), lambda p: p.mkdir()):
        other = tmp_path / f"other{len(list(tmp_path.iterdir()))}"
        make(other)
        with pytest.raises(OSError):
            finishes(lambda o=other: read_regular_file(o, 100))


def test_the_grid_factors_match_the_coarsener() -> None:
    from oxide.codegen.coarsen import FACTOR

    assert {1, FACTOR} == cache_entry.GRID_X_FACTORS


def test_the_warm_path_reads_entries_without_the_compiler() -> None:
    """cache_entry, cache_layout and safe_read are stdlib only (the warm path's promise)."""
    code = ("import sys; import oxide.runtime.cache, oxide.runtime.bundle; "
            "print(','.join(m for m in ('xdsl', 'llvmlite') if m in sys.modules) or '-')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "-"


# ---------------------------------------------------------------------------
# 18, 19: bundles


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    out = tmp_path / "bundle"
    build_bundle([Job("scale", scale, (Slice[f32], f32, DisjointSlice[f32]))], ["sm_90"], out)
    return out


def load_and_get_cubin(root: Path) -> bytes:
    b = ox.load_bundle(root)
    x = np.ones(8, np.float32)
    return b.scale.compile(x, 2.5, x, arch="sm_90").cubin


def rewrite(root: Path, change: Callable[[dict[str, Any]], None], resign: bool) -> None:
    manifest = json.loads((root / MANIFEST).read_text())
    change(manifest)
    if resign:
        manifest["sha256"] = manifest_digest(manifest)
    (root / MANIFEST).write_text(json.dumps(manifest, indent=2))


def spec0(m: dict[str, Any]) -> dict[str, Any]:
    return m["kernels"]["scale"]["specializations"][0]


def test_an_intact_bundle_loads(bundle: Path) -> None:
    assert load_and_get_cubin(bundle).startswith(b"\x7fELF")
    rewrite(bundle, lambda m: None, resign=False)  # re-indented: the digest is canonical
    assert load_and_get_cubin(bundle).startswith(b"\x7fELF")


@pytest.mark.parametrize("edit", [
    lambda m: spec0(m).__setitem__("grid_x_factor", 4 if spec0(m)["grid_x_factor"] == 1 else 1),
    lambda m: spec0(m).__setitem__("thread_index_ranks", []),
    lambda m: spec0(m)["sites"].clear(),
    lambda m: m["kernels"]["scale"]["options"].__setitem__("checks", False),
    lambda m: m.pop("sha256"),
])
def test_a_tampered_manifest_is_refused(bundle: Path, edit: Callable[[dict[str, Any]], None]
                                        ) -> None:
    rewrite(bundle, edit, resign=False)
    with pytest.raises(BundleError, match="modified or damaged after the build"):
        ox.load_bundle(bundle)


def test_a_flipped_manifest_byte_is_refused(bundle: Path) -> None:
    text = (bundle / MANIFEST).read_bytes()
    at = text.index(b'"symbol": "scale_') + len(b'"symbol": "scale_')
    (bundle / MANIFEST).write_bytes(flip(text, at))
    with pytest.raises(BundleError, match="modified or damaged"):
        ox.load_bundle(bundle)


def test_a_tampered_cubin_is_refused_at_first_use(bundle: Path) -> None:
    (cubin,) = bundle.glob("*.cubin")
    cubin.write_bytes(flip(cubin.read_bytes(), 200))
    with pytest.raises(BundleError, match="modified or damaged after the build"):
        load_and_get_cubin(bundle)


@pytest.mark.parametrize("edit, says", [
    (lambda m: spec0(m).__setitem__("grid_x_factor", 3), "grid_x_factor"),
    (lambda m: spec0(m).__setitem__("grid_x_factor", "4"), "grid_x_factor"),
    (lambda m: spec0(m).__setitem__("thread_index_ranks", [7]), "thread_index_ranks"),
    (lambda m: spec0(m)["cubins"].__setitem__("sm_90", "../../etc/passwd.cubin"),
     "not a file name inside the bundle"),
    (lambda m: spec0(m)["cubins"].__setitem__("sm_90", "/tmp/x.cubin"),
     "not a file name inside the bundle"),
    (lambda m: spec0(m).pop("cubin_sha256"), "malformed"),
    (lambda m: spec0(m).pop("symbol"), "malformed"),
    (lambda m: m["kernels"].__setitem__("scale", []), "malformed"),
])
def test_a_resigned_but_malformed_manifest_is_a_bundle_error(
        bundle: Path, edit: Callable[[dict[str, Any]], None], says: str) -> None:
    rewrite(bundle, edit, resign=True)
    with pytest.raises(BundleError, match=says):
        ox.load_bundle(bundle)


@pytest.mark.parametrize("content", ["[]", '"bundle"', "null", "{", "\xff"])
def test_a_manifest_that_is_not_an_object_is_a_bundle_error(tmp_path: Path,
                                                            content: str) -> None:
    (tmp_path / MANIFEST).write_bytes(content.encode("latin-1"))
    with pytest.raises(BundleError):
        ox.load_bundle(tmp_path)


def test_a_version_1_bundle_asks_for_a_rebuild(bundle: Path) -> None:
    rewrite(bundle, lambda m: m.__setitem__("version", 1), resign=True)
    with pytest.raises(BundleError, match="rebuild"):
        ox.load_bundle(bundle)


def test_a_fifo_or_symlinked_manifest_or_cubin_does_not_block(bundle: Path) -> None:
    (cubin,) = bundle.glob("*.cubin")
    cubin.unlink()
    os.mkfifo(cubin)
    with pytest.raises(BundleError, match="cannot be read"):
        finishes(lambda: load_and_get_cubin(bundle))
    cubin.unlink()
    cubin.symlink_to("/dev/zero")
    with pytest.raises(BundleError, match="cannot be read"):
        finishes(lambda: load_and_get_cubin(bundle))
    (bundle / MANIFEST).unlink()
    os.mkfifo(bundle / MANIFEST)
    with pytest.raises(BundleError, match="cannot be read"):
        finishes(lambda: ox.load_bundle(bundle))


# ---------------------------------------------------------------------------
# On a GPU: the reported miscompile, end to end


GPU_PROGRAM = '''
import sys
import numpy as np
import oxide as ox
from oxide import f32, Slice, DisjointSlice, thread

@ox.kernel(coarsen=False)  # grid_x_factor 1: a header claiming 4 would launch a quarter grid
def triple(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * 3.0

n = 65536
with ox.device(0):
    x = ox.to_device(np.arange(n, dtype=np.float32))
    out = ox.to_device(np.zeros(n, dtype=np.float32))
    triple[ox.LaunchConfig.for_num_elems(n)](x, out)
    got = out.to_numpy()
print(int((got == np.arange(n, dtype=np.float32) * 3).sum()))
'''


@pytest.mark.gpu
def test_a_tampered_grid_factor_on_the_gpu_still_writes_every_output(tmp_path: Path) -> None:
    """The H200 report: an entry whose header's grid_x_factor was edited wrote only part of
    the outputs. Now the checksum refuses it, and the launch recompiles."""
    script = tmp_path / "prog.py"
    script.write_text(GPU_PROGRAM)
    env = {**os.environ, "OXIDE_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("OXIDE_CACHE", None)

    def run() -> int:
        done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                              text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        return int(done.stdout.split()[-1])

    assert run() == 65536
    (path,) = (tmp_path / "cache" / "kernels").glob("*.oxk")
    good = path.read_bytes()
    header, _ = good_header(path, good)
    assert header["grid_x_factor"] == 1
    path.write_bytes(good.replace(b'"grid_x_factor":1', b'"grid_x_factor":4'))
    assert run() == 65536  # the tampered entry was refused and recompiled
    assert path.read_bytes() == good


def test_a_driver_jit_entry_of_ptx_loads(cache_root: Path, kernel_module: Any,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel the driver JIT-compiles (setmaxnreg kernels; every kernel under
    OXIDE_DRIVER_JIT=1) is stored as its NUL-terminated PTX, and a later process loads
    that entry instead of finding it corrupt and compiling again."""
    monkeypatch.setenv("OXIDE_DRIVER_JIT", "1")
    kernel, plan = kernel_module.triple, plan_for(kernel_module.triple)
    image = load_image(kernel, plan, "sm_90")
    assert image.code.endswith(b"\0") and b".entry" in image.code
    (path,) = (cache_root / "kernels").glob("*.oxk")
    loaded = cache.load(path.stem, plan_sizes(plan))
    assert loaded is not None and loaded.code == image.code
    good = path.read_bytes()
    header, ptx = good_header(path, good)
    for bad in (ptx.replace(header["symbol"].encode(), b"x" * len(header["symbol"])),
                ptx[:-1], ptx[:-1] + b"\0\0"):
        forge(path, header, bad)
        assert_recompiled(kernel, plan, path, good)
