"""Issue 16 item 5: line information in the PTX, so Nsight Compute and compute-sanitizer show
the kernel's Python lines (`@ox.kernel(lineinfo=True)` or `OXIDE_LINEINFO=1`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import oxide as ox
from oxide import DisjointSlice, Slice, f32, thread

HERE = Path(__file__).resolve()


@ox.func
def square(v: f32) -> f32:
    return v * v


@ox.kernel(lineinfo=True)
def located(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        y = square(x[i])  # LINE-Y
        out[i] = y + 1.0  # LINE-OUT


@ox.kernel(lineinfo=True)
def located_with_barrier(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * 2.0  # LINE-BARRIER-KERNEL
    ox.sync_threads()


@ox.kernel
def plain(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * 2.0


def line_of(marker: str) -> int:
    return next(n for n, text in enumerate(HERE.read_text().splitlines(), 1)
                if text.rstrip().endswith(f"# {marker}") and "line_of" not in text)


def loc_lines(ptx: str) -> set[int]:
    files = dict(re.findall(r'^\s*\.file\s+(\d+)\s+"([^"]+)"', ptx, re.M))
    mine = {k for k, v in files.items() if Path(v).resolve() == HERE}
    return {int(line) for f, line in re.findall(r"^\s*\.loc\s+(\d+)\s+(\d+)", ptx, re.M)
            if f in mine}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("kernel,markers", [(located, ("LINE-Y", "LINE-OUT")),
                                            (located_with_barrier, ("LINE-BARRIER-KERNEL",))])
def test_the_ptx_carries_the_python_lines(kernel, markers, arch: str) -> None:
    ck = kernel.compile(Slice[f32], DisjointSlice[f32], arch=arch)
    lines = loc_lines(ck.ptx)
    for marker in markers:
        assert line_of(marker) in lines, (marker, sorted(lines))
    assert ck.cubin[:4] == b"\x7fELF"  # ptxas takes the directives


def test_no_line_information_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OXIDE_LINEINFO", raising=False)
    assert ".loc" not in plain.compile(Slice[f32], DisjointSlice[f32], arch="sm_90").ptx


def test_the_environment_variable_turns_it_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OXIDE_LINEINFO", "1")

    @ox.kernel
    def fresh(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[i] + 1.0

    assert ".loc" in fresh.compile(Slice[f32], DisjointSlice[f32], arch="sm_90").ptx


def test_the_cpu_target_ignores_it() -> None:
    import numpy as np

    x = np.arange(8, dtype=np.float32)
    out = np.zeros_like(x)
    with ox.device("cpu"):
        located[1, 32](x, out)
    np.testing.assert_array_equal(out, x * x + 1)


def test_lineinfo_must_be_a_bool() -> None:
    with pytest.raises(ox.KernelTypeError, match="lineinfo"):
        ox.kernel(lineinfo="yes")
