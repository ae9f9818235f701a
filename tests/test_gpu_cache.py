"""The disk cache across processes on a real GPU: a warm process launches without compiling."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

PROGRAM = '''
import sys, time
import numpy as np
import oxide as ox
from oxide import f32, Slice, DisjointSlice, thread

@ox.kernel
def triple(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * 3.0

with ox.device(0):
    x = ox.to_device(np.arange(1000, dtype=np.float32))
    out = ox.empty(1000, ox.f32)
    ox.synchronize()
    start = time.perf_counter()
    triple[ox.LaunchConfig.for_num_elems(1000)](x, out)
    first = time.perf_counter() - start
    ok = bool((out.to_numpy() == np.arange(1000, dtype=np.float32) * 3).all())
heavy = ",".join(m for m in ("xdsl", "llvmlite") if m in sys.modules) or "-"
print(ok, round(first * 1000, 2), heavy)
'''


def run(tmp_path: Path, cache: Path) -> tuple[bool, float, str]:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    env = {**os.environ, "OXIDE_CACHE_DIR": str(cache)}
    env.pop("OXIDE_CACHE", None)
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    ok, ms, heavy = done.stdout.split()
    return ok == "True", float(ms), heavy


def test_warm_cache_in_a_new_process(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    ok, cold_ms, heavy = run(tmp_path, cache)
    assert ok and "xdsl" in heavy  # the first process compiled
    assert len(list((cache / "kernels").glob("*.oxk"))) == 1
    ok, warm_ms, heavy = run(tmp_path, cache)
    assert ok
    assert heavy == "-", f"a warm launch imported {heavy}"
    assert warm_ms < 100, f"warm first launch took {warm_ms} ms (target: <= 20 ms)"
