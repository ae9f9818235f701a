"""The differential fuzzer (tools/fuzz.py): its reference, its harness, and a seeded CPU run.

The reference (tools/fuzzing/semantics.py) is the contract the fuzzer holds oxide to,
so its rules are pinned here against docs/language.md first; then a seeded run checks
that oxide on the CPU agrees with it on every generated program.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.fuzzing import semantics as S  # noqa: E402
from tools.fuzzing.harness import (  # noqa: E402
    Batch,
    load_kernel,
    make_batch,
    module_source,
    reference,
    run_batch,
    signature,
)
from tools.fuzzing.nodes import Assign, Bin, For, Function, Lit, Var  # noqa: E402
from tools.fuzzing.runner import fuzz  # noqa: E402

SEED = 20261202
PROGRAMS = 120


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OXIDE_CACHE", "0")


def f32(x: float) -> np.float32:
    return np.float32(x)


def bits(x: np.floating) -> str:
    return x.tobytes().hex()


# -- the reference follows docs/language.md ---------------------------------------------------

def test_reference_integers_wrap_and_divide_like_python() -> None:
    f = S.Faults()
    assert S.binary("add", "i8", 127, 1, f) == -128
    assert S.binary("mul", "u16", 300, 300, f) == 300 * 300 % 65536
    assert S.binary("floordiv", "i32", -7, 2, f) == -4
    assert S.binary("mod", "i32", -7, 2, f) == 1
    assert S.binary("mod", "i32", 7, -2, f) == -1
    assert S.binary("floordiv", "i32", -(2**31), -1, f) == -(2**31)  # wraps
    assert S.binary("mod", "i64", -(2**63), -1, f) == 0
    assert f.kinds == []
    assert S.binary("floordiv", "u8", 5, 0, f) == 0
    assert f.kinds == ["integer division by zero"]


def test_reference_shifts() -> None:
    f = S.Faults()
    assert S.binary("shl", "i64", 5, 2**32, f) == 0  # issue 14, item 8
    assert S.binary("shr", "u64", 1 << 40, 2**32, f) == 0
    assert S.binary("shr", "i8", -5, 8, f) == -1  # sign fill
    assert S.binary("shr", "i8", 5, 100, f) == 0
    assert S.binary("shl", "i32", 1, -1, f) == 0  # a negative amount reads as unsigned
    assert S.binary("shr", "i16", -32768, 15, f) == -1
    assert S.binary("shl", "u8", 0x81, 1, f) == 2


def test_reference_float_floor_division_and_modulo_follow_python() -> None:
    f = S.Faults()
    # issue 14, item 10, at f64 (Python's floats) and at f32
    for ty in ("f32", "f64"):
        t = S.NP[ty]
        assert S.binary("floordiv", ty, t(1.0), t(0.1), f) == 9.0
        assert math.isnan(S.binary("floordiv", ty, t(np.inf), t(1.0), f))
        assert S.binary("floordiv", ty, t(1.0), t(-np.inf), f) == -1.0
        m = S.binary("mod", ty, t(0.0), t(-127.0), f)
        assert m == 0 and np.signbit(m)
    assert S.binary("mod", "f32", f32(2.5e38), f32(4.19), f) == np.fmod(f32(2.5e38), f32(4.19))
    assert S.binary("mod", "f64", 1e30, 3.0, f) == 1e30 % 3.0
    assert f.kinds == []


def test_reference_conversions_saturate_and_round_once() -> None:
    assert S.to_type(np.float32(np.nan), "f32", "i32") == 0
    assert S.to_type(np.float64(1e300), "f64", "u64") == 2**64 - 1
    assert S.to_type(np.float32(-1e30), "f32", "i16") == -32768
    assert S.to_type(np.float64(-0.9), "f64", "u8") == 0
    assert S.to_type(np.float64(2.0**63), "f64", "i64") == 2**63 - 1
    assert S.to_type(300, "i32", "u8") == 44
    # 2**53 + 2**29 + 1 rounds once to f32 (up); through f64 first it would round down
    v = 2**53 + 2**29 + 1
    assert S.to_type(v, "i64", "f32") == f32(2.0**53 + 2**30)
    assert S.to_type(np.float32(np.nan), "f32", "bool") is True


def test_reference_float_min_max_skip_nan_and_order_zeros() -> None:
    f = S.Faults()
    assert S.binary("min", "f32", f32(np.nan), f32(2.0), f) == 2.0
    assert S.binary("max", "f64", np.float64(3.0), np.float64(np.nan), f) == 3.0
    assert bits(S.binary("min", "f32", f32(0.0), f32(-0.0), f)) == bits(f32(-0.0))
    assert bits(S.binary("max", "f32", f32(-0.0), f32(0.0), f)) == bits(f32(0.0))


def test_reference_promotion() -> None:
    assert S.promote("i8", "u16") == "i32"
    assert S.promote("i16", "u8") == "i16"
    assert S.promote("i32", "f32") == "f32"
    assert S.promote("i64", "f32") == "f32"  # the float's type, not f64
    assert S.promote("f32", "f64") == "f64"
    assert S.div_type("i64") == "f64" and S.div_type("u16") == "f32"
    for a, b in (("i32", "u32"), ("i8", "u8")):  # one width: no common type
        with pytest.raises(S.NoCommonType):
            S.promote(a, b)


def test_comparison_is_bitwise_and_nan_insensitive() -> None:
    assert S.same_bits("f32", f32(np.nan), -f32(np.nan))
    assert not S.same_bits("f64", np.float64(0.0), np.float64(-0.0))
    assert not S.same_bits("f32", f32(1.0), f32(np.nan))


# -- the harness ------------------------------------------------------------------------------

def test_batches_are_deterministic_per_seed() -> None:
    a, b = make_batch(7, 3, 5, 8), make_batch(7, 3, 5, 8)
    assert module_source(a) == module_source(b)
    assert all(a.inputs[t].tobytes() == b.inputs[t].tobytes() for t in a.inputs)
    assert module_source(make_batch(8, 3, 5, 8)) != module_source(a)


def _one_program(result: Bin, ret: str, params: list[tuple[str, str]],
                 inputs: dict[str, np.ndarray]) -> Batch:
    fn = Function("p0", params, ret, [], result, columns=[0] * len(params))
    return Batch(0, 0, [fn], [], inputs)


def test_harness_reports_a_wrong_value() -> None:
    """A mismatch is found when the expected value is wrong: the check is not vacuous."""
    b = _one_program(Bin("add", Var("a0", "i32"), Lit(1, "i32"), "i32", "i32"), "i32",
                     [("a0", "i32")], {"i32": np.array([[1, 0, 0], [2, 0, 0]], dtype=np.int32)})
    expected = reference(b)
    assert [e.value for e in expected[0]] == [2, 3]
    kernel = load_kernel(b, module_source(b))
    assert run_batch(b, "cpu", expected, kernel).mismatches == []
    expected[0][1].value = 4
    out = run_batch(b, "cpu", expected, kernel)
    assert [(m.vector, m.what) for m in out.mismatches] == [(1, "wrong value")]
    assert "p0(2)" in out.mismatches[0].report()


def test_harness_checks_division_by_zero_is_reported() -> None:
    b = _one_program(Bin("floordiv", Var("a0", "i16"), Var("a1", "i16"), "i16", "i16"), "i16",
                     [("a0", "i16"), ("a1", "i16")],
                     {"i16": np.array([[7, 2, 0], [7, 0, 0]], dtype=np.int16)})
    b.programs[0].columns = [0, 1]
    expected = reference(b)
    assert expected[0][1].faults == ["integer division by zero"] and expected[0][1].value == 0
    kernel = load_kernel(b, module_source(b))
    out = run_batch(b, "cpu", expected, kernel)
    assert out.fault_launches == 1 and out.pairs == 1
    assert out.mismatches == []


def test_harness_checks_a_zero_range_step_is_reported() -> None:
    """A run-time step of 0 reports KernelAssertionError and runs no iteration."""
    loop = For("j1", "i32", [Lit(0, "i32"), Lit(3, "i32"), Var("a0", "i32")],
               [Assign("a1", "i32", Lit(1, "i32"), aug="add")])
    fn = Function("p0", [("a0", "i32"), ("a1", "i32")], "i32", [loop], Var("a1", "i32"),
                  columns=[0, 1])
    b = Batch(0, 0, [fn], [], {"i32": np.array([[1, 10, 0], [0, 10, 0]], dtype=np.int32)})
    expected = reference(b)
    assert [(e.value, e.faults) for e in expected[0]] == [
        (13, []), (10, ["range() step must not be zero"])]
    out = run_batch(b, "cpu", expected, load_kernel(b, module_source(b)))
    assert out.fault_launches == 1 and out.pairs == 1
    assert out.mismatches == []


def test_assignments_keep_their_type_in_the_reference() -> None:
    fn = Function("p0", [("a0", "u8")], "u8",
                  [Assign("a0", "u8", Lit(200, "u8"), aug="add")], Var("a0", "u8"))
    assert fn.call([100], S.Faults()) == 44


def test_generated_kernels_assemble_for_sm_90() -> None:
    """The GPU pipeline (PTX, then nvJitLink) accepts what the generator writes."""
    b = make_batch(SEED, 99, 6, 4)
    ck = load_kernel(b, module_source(b)).compile(*signature(b), arch="sm_90")
    assert ".entry" in ck.ptx and ck.cubin


_F64_TO_F16 = """
import numpy as np
import oxide as ox
from oxide import DisjointSlice, Slice, f16, f64, thread


@ox.kernel(contract=False)
def narrow(a: Slice[f64], out: DisjointSlice[f16]):
    i = thread.index_1d()
    if i in out:
        out[i] = f16(a[i])


out = np.zeros(3, np.float16)
with ox.device("cpu"):
    narrow[ox.LaunchConfig.for_num_elems(3)](np.array([1.5, 1e5, 0.1]), out)
print(out.tolist())
"""


def test_f64_to_f16_on_the_cpu(tmp_path: Path) -> None:
    """Found by the fuzzer: `f16(x)` of an f64 crashed the CPU process (SIGSEGV).

    Run in a subprocess, so a crash fails this test and not the session. `fptrunc double
    to half` called compiler-rt's __truncdfhf2, which the host JIT does not resolve.
    """
    script = tmp_path / "f64_to_f16.py"
    script.write_text(_F64_TO_F16)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, env={**__import__("os").environ, "OXIDE_CACHE": "0"})
    assert run.returncode == 0, f"exit status {run.returncode}: {run.stderr[-2000:]}"
    assert run.stdout.split("\n")[-2] == str([1.5, float("inf"), float(np.float16(0.1))])


# -- a seeded run on the CPU ------------------------------------------------------------------

def test_seeded_cpu_run_agrees_with_the_reference() -> None:
    summary = fuzz(SEED, PROGRAMS, ("cpu",), per_kernel=60, vectors=24)
    assert summary.programs == PROGRAMS and summary.pairs["cpu"] > PROGRAMS * 8
    assert summary.fault_launches["cpu"] > 0
    if summary.mismatches:
        pytest.fail(summary.line() + "\n\n" + "\n\n".join(
            m.report() for m in summary.mismatches[:5]), pytrace=False)
