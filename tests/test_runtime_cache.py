"""The on-disk compile cache (runtime/cache.py): keys, entries, concurrency, the warm path.

Compiling to cubin needs no GPU, so all of this runs on any machine.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from oxide.runtime import cache
from oxide.runtime.args import make_plan, read_args
from oxide.runtime.device import CPU, Device
from oxide.runtime.gpu import load_image, plan_sizes

GPU0 = Device("cuda", 0)
SRC = Path(__file__).resolve().parent.parent / "src"

KERNELS = """
import oxide as ox
from oxide import f32, Slice, DisjointSlice, thread, Const

SHIFT = {shift}

@ox.func
def bump(v: f32) -> f32:
    return v + {bump}

@ox.kernel
def scale(x: Slice[f32], a: f32, out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = bump(x[i] * a) + SHIFT

@ox.kernel
def tiled(x: Slice[f32], T: Const[int], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * T
"""


def load_module(path: Path, shift: float = 1.0, bump: float = 0.5) -> object:
    path.write_text(KERNELS.format(shift=shift, bump=bump))
    spec = importlib.util.spec_from_file_location(f"m_{abs(hash((str(path), shift, bump)))}",
                                                  path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def plan_of(kernel: object, args: tuple, device: Device = GPU0) -> object:
    key, views = read_args(kernel, args, device)
    return make_plan(kernel, args, views, device)


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OXIDE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OXIDE_CACHE", raising=False)
    return tmp_path / "cache"


x = np.zeros(16, np.float32)


def test_keys_cover_signature_arch_and_consts(cache_dir: Path, tmp_path: Path) -> None:
    m = load_module(tmp_path / "k.py")
    p = plan_of(m.scale, (x, 1.0, x.copy()))
    key = cache.entry_key(m.scale, p.signature, "sm_90")
    assert key == cache.entry_key(m.scale, p.signature, "sm_90")
    assert key != cache.entry_key(m.scale, p.signature, "sm_80")
    strided = plan_of(m.scale, (x[::2], 1.0, x.copy()), CPU)  # (a GPU launch copies it)
    assert cache.entry_key(m.scale, strided.signature, "sm_90") != key
    k4 = cache.entry_key(m.tiled, plan_of(m.tiled, (x, 4, x.copy())).signature, "sm_90")
    k8 = cache.entry_key(m.tiled, plan_of(m.tiled, (x, 8, x.copy())).signature, "sm_90")
    assert k4 != k8


def test_keys_cover_module_constants_and_device_functions(cache_dir: Path,
                                                          tmp_path: Path) -> None:
    def key_of(shift: float, bump: float, name: str) -> str:
        m = load_module(tmp_path / name, shift, bump)
        return cache.entry_key(m.scale, plan_of(m.scale, (x, 1.0, x.copy())).signature,
                               "sm_90")

    base = key_of(1.0, 0.5, "a.py")
    assert key_of(1.0, 0.5, "a.py") == base
    assert key_of(2.0, 0.5, "a.py") != base  # SHIFT changed
    assert key_of(1.0, 0.25, "a.py") != base  # the @ox.func's body changed
    assert key_of(1.0, 0.5, "b.py") != base  # another file: other spans in messages


def test_store_then_load_without_compiling(cache_dir: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    m = load_module(tmp_path / "k.py")
    p = plan_of(m.scale, (x, 1.0, x.copy()))
    first = load_image(m.scale, p, "sm_90")
    assert len(list((cache_dir / "kernels").glob("*.oxk"))) == 1
    monkeypatch.setattr(type(m.scale), "compile", lambda *a, **k: pytest.fail("compiled"))
    again = load_image(m.scale, p, "sm_90")
    assert again.code == first.code and again.symbol == first.symbol
    assert [(s.kind, s.span, s.detail) for s in again.sites] == \
        [(s.kind, s.span, s.detail) for s in first.sites]


def test_corrupt_and_foreign_entries_are_rewritten(cache_dir: Path, tmp_path: Path) -> None:
    m = load_module(tmp_path / "k.py")
    p = plan_of(m.scale, (x, 1.0, x.copy()))
    image = load_image(m.scale, p, "sm_90")
    (entry,) = (cache_dir / "kernels").glob("*.oxk")
    good = entry.read_bytes()
    for bad in (b"", b"garbage", good[:-10], good[:-1] + bytes([good[-1] ^ 1]),
                good.replace(entry.stem.encode(), b"0" * 64)):
        entry.write_bytes(bad)
        assert cache.load(entry.stem, plan_sizes(p)) is None
        assert load_image(m.scale, p, "sm_90").code == image.code
        assert entry.read_bytes() == good
    assert cache.load(entry.stem, plan_sizes(p)[:-1]) is None  # another ABI: ignored


def test_cache_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OXIDE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OXIDE_CACHE", "0")
    m = load_module(tmp_path / "k.py")
    p = plan_of(m.scale, (x, 1.0, x.copy()))
    assert cache.entry_key(m.scale, p.signature, "sm_90") is None
    load_image(m.scale, p, "sm_90")
    assert not (tmp_path / "cache").exists()


def test_entries_are_written_only_when_the_key_covered_the_compile(tmp_path: Path,
                                                                   cache_dir: Path) -> None:
    m = load_module(tmp_path / "k.py")
    ck = SimpleNamespace(kernel=m.scale, constants=[], functions=frozenset(),
                         folded={"SHIFT": 1.0})
    assert cache.covered(m.scale, ck)
    ck.folded = {"SHIFT": 1}  # same value, other type: other code
    assert not cache.covered(m.scale, ck)
    ck.folded = {"cfg.BLOCK": 4}  # something the key did not see
    assert not cache.covered(m.scale, ck)
    ck.folded, ck.constants = {}, [("sym", object())]
    assert not cache.covered(m.scale, ck)


WORKER = """
import sys, time
sys.path.insert(0, {src!r})
import importlib.util
import numpy as np
spec = importlib.util.spec_from_file_location("kmod", {path!r})
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
from oxide.runtime.device import CPU, Device
from oxide.runtime.args import read_args, make_plan
dev = Device("cuda", 0)
x = np.zeros(16, np.float32)
args = (x, 1.0, x.copy())
key, views = read_args(m.scale, args, dev)
plan = make_plan(m.scale, args, views, dev)
import oxide.runtime.gpu as gpu
start = time.perf_counter()
image = gpu.load_image(m.scale, plan, "sm_90")
took = time.perf_counter() - start
heavy = [name for name in ("xdsl", "llvmlite") if name in sys.modules]
print(len(image.code), round(took * 1000, 1), ",".join(heavy) or "-")
"""


def run_worker(path: Path, env: dict[str, str]) -> subprocess.Popen:
    code = WORKER.format(src=str(SRC), path=str(path))
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_concurrent_processes_then_a_warm_process(cache_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "k.py"
    load_module(path)
    env = {**os.environ, "OXIDE_CACHE_DIR": str(cache_dir)}
    procs = [run_worker(path, env) for _ in range(4)]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    sizes = {out.split()[0] for out, _ in outs}
    assert len(sizes) == 1
    entries = list((cache_dir / "kernels").iterdir())
    assert len(entries) == 1 and entries[0].suffix == ".oxk"  # no temporary files left
    warm = run_worker(path, env)
    out, err = warm.communicate(timeout=120)
    assert warm.returncode == 0, err
    size, took_ms, heavy = out.split()
    assert size in sizes
    assert heavy == "-", f"the warm path imported {heavy}"
    assert float(took_ms) < 200  # ~5 ms on a workstation; generous for slow CI machines


def test_the_sources_digest_is_memoized_under_their_stamp(tmp_path, monkeypatch) -> None:
    """Read and hashed once per change of the sources' stamp; a bad memo is rewritten."""
    monkeypatch.setenv("OXIDE_CACHE_DIR", str(tmp_path))
    digest = cache._sources_digest()
    memos = list((tmp_path / "sources").iterdir())
    assert len(memos) == 1 and memos[0].read_text() == digest
    memos[0].write_text("f" * 64)  # a memo is trusted while the stamp holds
    assert cache._sources_digest() == "f" * 64
    memos[0].write_text("not a digest")
    assert cache._sources_digest() == digest and memos[0].read_text() == digest
    monkeypatch.setenv("OXIDE_CACHE", "0")  # no cache: computed, nothing written
    memos[0].unlink()
    assert cache._sources_digest() == digest
    assert not list((tmp_path / "sources").iterdir())
