"""Issue 16 item 4: the disk cache serves CPU kernels too (host object code), so a second
process skips the compile, and imports no compiler."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = '''
import json, sys
import numpy as np
import oxide as ox
from oxide import DisjointSlice, Slice, f32, thread

@ox.kernel
def triple(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * 3.0
        if i == 7:
            assert x[i] < 100.0, "x too big"

x = np.arange(8, dtype=np.float32)
if len(sys.argv) > 1:
    x[7] = 500.0
out = np.zeros_like(x)
error = ""
with ox.device("cpu"):
    try:
        triple[1, 32](x, out)
    except ox.KernelAssertionError as exc:
        error = str(exc)
print(json.dumps({"out": out.tolist(), "compiled": "oxide.compiler" in sys.modules,
                  "error": error}))
'''


def run(script: Path, cache: Path, *args: str) -> dict:
    env = {"OXIDE_CACHE_DIR": str(cache), "OXIDE_FORCE_CPU": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "triple_kernel.py"
    path.write_text(SCRIPT)
    return path


def test_a_second_process_loads_the_cpu_kernel_from_the_cache(script: Path,
                                                               tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = run(script, cache)
    assert first["compiled"] and first["out"] == [3.0 * k for k in range(8)]
    assert len(list((cache / "kernels").glob("*.oxk"))) == 1
    second = run(script, cache)
    assert not second["compiled"] and second["out"] == first["out"]
    # the cached entry still reports the kernel's own errors, with its source line
    failed = run(script, cache, "big")
    assert not failed["compiled"] and "x too big" in failed["error"]
    assert "triple_kernel.py" in failed["error"]


def test_a_corrupt_cpu_entry_is_recompiled(script: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run(script, cache)
    entry = next((cache / "kernels").glob("*.oxk"))
    data = bytearray(entry.read_bytes())
    data[-10] ^= 0xFF
    entry.write_bytes(bytes(data))
    again = run(script, cache)
    assert again["compiled"] and again["out"] == [3.0 * k for k in range(8)]
