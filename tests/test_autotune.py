"""`ox.autotune` on the CPU, and `@ox.tile.kernel(occupancy=N)` down to the PTX.

The tuner times each config with `do_bench` on the call's own arguments, keeps the
fastest per key in memory and in `<cache dir>/autotune/`, skips configs that fail with
their reasons, and shows a spinner on a terminal. Each test that touches the disk has
its own cache directory (`OXIDE_CACHE_DIR`, which the cache module reads per call).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import oxide as ox
import oxide.testing
from oxide import AtomicSlice, Const, DisjointSlice, Slice, f32, i32, thread, tile

FAST = {"warmup": 1, "rep": 3}  # do_bench budgets (ms): the configs differ by far more


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test tunes from scratch, in a cache directory of its own."""
    root = tmp_path / "cache"
    monkeypatch.setenv("OXIDE_CACHE_DIR", str(root))
    return root


@pytest.fixture
def timed(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The functions do_bench timed (one per config that ran)."""
    calls: list[object] = []
    real = oxide.testing.do_bench

    def counted(fn, *args, **kwargs):
        calls.append(fn)
        return real(fn, *args, **kwargs)

    monkeypatch.setattr(oxide.testing, "do_bench", counted)
    return calls


def cpu(launch, *args, **kwargs):
    with ox.device("cpu"):
        launch(*args, **kwargs)


def spin_kernel():
    """A tile kernel whose Const `REPS` sets how long it runs: out = x * (2 - 0.5**REPS)."""

    @tile.kernel
    def spin(x: Slice[f32], out: DisjointSlice[f32], n: i32, REPS: Const[int]):
        i = tile.bid(0)
        t = tile.load(x, (i,), (256,))
        acc = t
        for _ in range(REPS):
            acc = acc * 0.5 + t
        tile.store(out, (i,), acc)

    return spin


def tuned_spin(**extra):
    configs = [ox.Config(REPS=2000, num_warps=4), ox.Config(REPS=1, num_warps=4),
               ox.Config(REPS=1000, num_warps=8)]
    return ox.autotune(configs=configs, key=["n"], **FAST, **extra)(spin_kernel())


def grid_of(n):
    return lambda c: tile.cdiv(n, 256)


# -- choosing --------------------------------------------------------------------------


def test_the_slower_configs_lose_and_the_outputs_are_the_winners(timed):
    tuned = tuned_spin()
    n = 3000
    x = np.linspace(-1, 1, n, dtype=np.float32)
    out = np.zeros_like(x)
    cpu(tuned[grid_of(n)], x, out, n)
    assert len(timed) == 3
    (result,) = tuned.results.values()
    assert result.best == ox.Config(REPS=1, num_warps=4)
    assert set(result.times_ms) == set(tuned.configs) and not result.failures
    assert result.times_ms[result.best] < result.times_ms[ox.Config(REPS=1000, num_warps=8)]
    # the launch after the timing runs was the winner's: REPS=1 gives 1.5 * x
    np.testing.assert_allclose(out, 1.5 * x, rtol=1e-6)
    assert tuned.best(x, out, n) == result.best


def test_a_later_call_with_the_same_key_launches_without_timing(timed):
    tuned = tuned_spin()
    x = np.ones(512, np.float32)
    out = np.zeros_like(x)
    cpu(tuned[grid_of(512)], x, out, 512)
    cpu(tuned[grid_of(512)], x, out, 512)
    assert len(timed) == 3 and len(tuned.results) == 1


def test_a_new_key_tunes_again(timed):
    tuned = tuned_spin()
    for n in (512, 700, 512):
        x = np.ones(n, np.float32)
        cpu(tuned[grid_of(n)], x, np.zeros_like(x), n)
    assert len(timed) == 6  # 512 and 700 tuned once each
    assert sorted(k[1] for k in tuned.results) == [(512,), (700,)]
    # an argument's element type is part of the key as well (the kernel specializes on it)
    assert tuned.best(np.ones(512, np.float64), np.zeros(512, np.float64), 512) is None


def test_the_grid_is_a_function_of_the_config_and_the_config_reads_both_ways():
    @ox.autotune(configs=[ox.Config(B=64), ox.Config(B=512)], key=["n"], **FAST)
    @tile.kernel
    def double(x: Slice[f32], out: DisjointSlice[f32], n: i32, B: Const[int]):
        i = tile.bid(0)
        tile.store(out, (i,), tile.load(x, (i,), (B,)) * 2.0)

    n = 1000
    x = np.arange(n, dtype=np.float32)
    out = np.zeros_like(x)
    seen = []

    def grid(c):
        seen.append(c)
        assert c.B == c["B"]
        return tile.cdiv(n, c.B)

    cpu(double[grid], x, out, n=n)  # by name, too
    np.testing.assert_array_equal(out, 2 * x)
    assert set(seen) == {ox.Config(B=64), ox.Config(B=512)}


# -- failing configs ---------------------------------------------------------------------


def test_failing_configs_are_skipped_with_their_reasons(timed):
    @ox.autotune(configs=[ox.Config(B=256, num_warps=3), ox.Config(B=100, num_warps=4),
                          ox.Config(B=256, num_warps=4)], **FAST)
    @tile.kernel
    def copy(x: Slice[f32], out: DisjointSlice[f32], B: Const[int]):
        i = tile.bid(0)
        tile.store(out, (i,), tile.load(x, (i,), (B,)))

    x = np.arange(600, dtype=np.float32)
    out = np.zeros_like(x)
    cpu(copy[lambda c: tile.cdiv(600, c.B)], x, out)
    np.testing.assert_array_equal(out, x)
    (result,) = copy.results.values()
    assert result.best == ox.Config(B=256, num_warps=4) and len(timed) == 1
    reasons = result.failures
    assert "num_warps` must be 1, 2, 4, 8, 16 or 32, not 3" in reasons[ox.Config(B=256, num_warps=3)]
    assert "power of two" in reasons[ox.Config(B=100, num_warps=4)]
    assert reasons[ox.Config(B=100, num_warps=4)].startswith("KernelTypeError")


def test_when_every_config_fails_the_error_lists_each_reason():
    @ox.autotune(configs=[ox.Config(B=100), ox.Config(B=256, num_warps=5)], **FAST)
    @tile.kernel
    def copy(x: Slice[f32], out: DisjointSlice[f32], B: Const[int]):
        i = tile.bid(0)
        tile.store(out, (i,), tile.load(x, (i,), (B,)))

    x = np.zeros(10, np.float32)
    with pytest.raises(ox.LaunchError, match="no config of `copy` compiled") as info:
        cpu(copy[1], x, x.copy())
    text = str(info.value)
    assert "Config(B=100): KernelTypeError" in text and "power of two" in text
    assert "Config(B=256, num_warps=5): KernelTypeError" in text and "not 5" in text
    assert not copy.results


def test_a_bug_in_the_body_is_raised_as_itself():
    """Every config failing the same way is the kernel's error, not the configs'."""

    @ox.autotune(configs=[ox.Config(B=64), ox.Config(B=128)], **FAST)
    @tile.kernel
    def broken(x: Slice[f32], out: DisjointSlice[f32], B: Const[int]):
        i = tile.bid(0)
        tile.store(out, (i,), tile.load(x, (i,), (B,)) + tile.zeros((B, 2), f32))

    x = np.zeros(128, np.float32)
    with pytest.raises(ox.KernelTypeError) as info:
        cpu(broken[1], x, x.copy())
    assert info.value.span is not None and info.value.span.line > 0


# -- the disk ----------------------------------------------------------------------------


def test_a_second_tuner_reads_the_choice_from_disk(own_cache, timed):
    kernel = spin_kernel()
    configs = [ox.Config(REPS=2000), ox.Config(REPS=1)]
    first = ox.autotune(configs=configs, key=["n"], **FAST)(kernel)
    x = np.ones(256, np.float32)
    out = np.zeros_like(x)
    cpu(first[1], x, out, 256)
    files = list((own_cache / "autotune").glob("*.json"))
    assert len(files) == 1 and len(timed) == 2
    data = json.loads(files[0].read_text())
    assert data["configs"] == ["Config(REPS=2000)", "Config(REPS=1)"] and data["best"] == 1

    second = ox.autotune(configs=configs, key=["n"], **FAST)(kernel)
    with ox.device("cpu"):
        assert second.best(x, out, 256) == ox.Config(REPS=1)
    out[:] = 0
    cpu(second[1], x, out, 256)
    assert len(timed) == 2  # nothing timed again
    (result,) = second.results.values()
    assert result.from_disk and result.best == ox.Config(REPS=1)
    np.testing.assert_allclose(out, 1.5 * x)

    # other configs (or a file that does not parse) are a miss: the tuner times again
    other = ox.autotune(configs=configs[::-1], key=["n"], **FAST)(kernel)
    with ox.device("cpu"):
        assert other.best(x, out, 256) is None
    files[0].write_text("{not json")
    third = ox.autotune(configs=configs, key=["n"], **FAST)(kernel)
    cpu(third[1], x, out, 256)
    assert len(timed) == 4 and not next(iter(third.results.values())).from_disk


def test_no_file_when_the_cache_is_off(own_cache, monkeypatch):
    monkeypatch.setenv("OXIDE_CACHE", "0")
    tuned = tuned_spin()
    x = np.ones(256, np.float32)
    cpu(tuned[1], x, np.zeros_like(x), 256)
    assert len(tuned.results) == 1 and not (own_cache / "autotune").exists()


SCRIPT = """
import json, sys
import numpy as np
import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, i32, tile

@ox.autotune(configs=[ox.Config(REPS=3000), ox.Config(REPS=1)], key=["n"], warmup=1, rep=3)
@tile.kernel
def spin(x: Slice[f32], out: DisjointSlice[f32], n: i32, REPS: Const[int]):
    i = tile.bid(0)
    t = tile.load(x, (i,), (64,))
    acc = t
    for _ in range(REPS):
        acc = acc * 0.5 + t
    tile.store(out, (i,), acc)

x = np.ones(64, np.float32)
out = np.zeros_like(x)
with ox.device("cpu"):
    spin[1](x, out, 64)
(result,) = spin.results.values()
print(json.dumps({"best": repr(result.best), "from_disk": result.from_disk,
                  "out": float(out[0])}))
"""


def test_another_process_reads_the_choice_from_disk(own_cache, tmp_path):
    script = tmp_path / "tune_me.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = {**os.environ, "OXIDE_CACHE_DIR": str(own_cache)}
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert [r["from_disk"] for r in runs] == [False, True]
    assert {r["best"] for r in runs} == {"Config(REPS=1)"}
    assert {r["out"] for r in runs} == {1.5}


# -- progress ------------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_shows_on_a_terminal(monkeypatch):
    from oxide import progress

    shown = _Terminal()
    monkeypatch.setattr(sys, "stderr", shown)
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    monkeypatch.setattr(progress, "INTERVAL_S", 0.01)  # a frame for each config's timing
    tuned = tuned_spin()
    x = np.ones(256, np.float32)
    cpu(tuned[1], x, np.zeros_like(x), 256)
    text = shown.getvalue()
    assert "autotuning `spin`: config 1 of 3, Config(REPS=2000, num_warps=4)" in text
    assert "config 3 of 3" in text


def test_no_progress_where_stderr_is_not_a_terminal(monkeypatch, capfd):
    from oxide import progress

    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    tuned = tuned_spin()
    x = np.ones(256, np.float32)
    cpu(tuned[1], x, np.zeros_like(x), 256)
    assert "autotuning" not in capfd.readouterr().err


# -- SIMT kernels, accumulators ---------------------------------------------------------------


def test_a_simt_kernel_tunes_its_block_and_reset_to_zero_keeps_a_sum_right(timed):
    @ox.autotune(configs=[ox.Config(block=32), ox.Config(block=256)], key=["n"],
                 reset_to_zero=["total"], **FAST)
    @ox.kernel
    def add_up(x: Slice[f32], total: AtomicSlice[f32], n: i32):
        i = thread.index_1d()
        if i < n:
            ox.atomic.add(total, 0, x[i])

    n = 1000
    x = np.ones(n, np.float32)
    total = np.zeros(1, np.float32)
    cpu(add_up[lambda c: tile.cdiv(n, c.block)], x, total, n)
    assert len(timed) == 2
    assert total[0] == n  # one launch's sum, however many runs the timing made
    cpu(add_up[lambda c: tile.cdiv(n, c.block)], x, total, n)
    assert total[0] == 2 * n  # tuned: no more zeroing


def test_a_simt_config_without_block_takes_a_whole_launch_config():
    @ox.autotune(configs=[ox.Config(K=1), ox.Config(K=2)], **FAST)
    @ox.kernel
    def times_k(x: Slice[f32], out: DisjointSlice[f32], K: Const[int]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[i] * K

    x = np.ones(100, np.float32)
    out = np.zeros_like(x)
    cpu(times_k[ox.LaunchConfig.for_num_elems(100)], x, out)
    assert set(np.unique(out)) <= {1.0, 2.0} and len(set(out)) == 1
    assert out[0] == times_k.best(x, out)["K"]


def test_a_simt_kernel_that_declares_its_block_is_compiled_for_each_configs_block():
    @ox.autotune(configs=[ox.Config(block=32), ox.Config(block=128)], **FAST)
    @ox.kernel(block=64)
    def stage(x: Slice[f32], out: DisjointSlice[f32]):
        t = thread.in_block()
        s = ox.shared.array(f32, 128)
        i = thread.index_1d()
        s[t] = x[i] + 1.0 if i < len(x) else f32(0)
        ox.sync_threads()
        if i in out:
            out[i] = s[t]

    x = np.arange(256, dtype=np.float32)
    out = np.zeros_like(x)
    cpu(stage[lambda c: 256 // c.block], x, out)
    np.testing.assert_array_equal(out, x + 1)
    (result,) = stage.results.values()
    assert set(result.times_ms) == set(stage.configs)
    kernels = {stage._variant(c) for c in stage.configs}
    assert {k.options.block for k in kernels} == {(32, 1, 1), (128, 1, 1)}
    assert stage.kernel.options.block == (64, 1, 1)


def test_configs_copy_and_pickle():
    import copy
    import pickle

    c = ox.Config(BLOCK=128, num_warps=4)
    assert copy.copy(c) == c and pickle.loads(pickle.dumps(c)) == c
    assert hash(copy.deepcopy(c)) == hash(c)


# -- mistakes ---------------------------------------------------------------------------------


def test_mistakes_at_decoration():
    kernel = spin_kernel()
    cases = [
        ({"configs": []}, "non-empty list of ox.Config"),
        ({"configs": [{"REPS": 1}]}, "non-empty list of ox.Config"),
        ({"configs": [ox.Config(REP=1)]}, "`REP` names no parameter of `spin`"),
        ({"configs": [ox.Config(n=1)]}, "`n` names a parameter that is not Const"),
        ({"configs": [ox.Config(REPS=1), ox.Config(num_warps=8)]}, "must give the same Const"),
        ({"configs": [ox.Config(REPS=1, block=64)]}, "`block` names no parameter"),
        ({"configs": [ox.Config(REPS=1)], "key": ["REPS"]}, "is tuned by the configs"),
        ({"configs": [ox.Config(REPS=1)], "key": ["m"]}, "is not a parameter"),
        ({"configs": [ox.Config(REPS=1)], "key": "n"}, "list of parameter names"),
        ({"configs": [ox.Config(REPS=1)], "reset_to_zero": ["n"]}, "not an array parameter"),
        ({"configs": [ox.Config(REPS=1)], "rep": 0}, "`rep` must be milliseconds"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ox.KernelTypeError, match=message):
            ox.autotune(**kwargs)(kernel)
    with pytest.raises(ox.KernelSyntaxError, match="decorates an @ox.kernel or @ox.tile.kernel"):
        ox.autotune(configs=[ox.Config(REPS=1)])(kernel.fn)
    with pytest.raises(ox.ArgumentError, match="at least one value"):
        ox.Config()
    with pytest.raises(ox.ArgumentError, match="hashable"):
        ox.Config(B=[1, 2])


def test_mistakes_at_the_call():
    tuned = tuned_spin()
    x = np.ones(256, np.float32)
    with pytest.raises(ox.LaunchError, match=r"launch it with `spin\[grid\]"):
        tuned(x, x, 256)
    with pytest.raises(ox.ArgumentError, match="`REPS` is given by ox.autotune's configs"):
        cpu(tuned[1], x, x.copy(), 256, REPS=1)
    with pytest.raises(ox.ArgumentError, match="missing n"):
        cpu(tuned[1], x, x.copy())
    with pytest.raises(ox.ArgumentError, match="takes 3 arguments"):
        cpu(tuned[1], x, x.copy(), 256, 1)
    c = ox.Config(BLOCK=128, num_warps=4)
    with pytest.raises(AttributeError, match="has no `BLK`; it has BLOCK, num_warps"):
        _ = c.BLK
    assert repr(c) == "Config(BLOCK=128, num_warps=4)" and dict(c) == {"BLOCK": 128, "num_warps": 4}


def test_ox_launch_takes_an_autotuned_kernel():
    tuned = tuned_spin()
    x = np.ones(256, np.float32)
    out = np.zeros_like(x)
    ox.launch(tuned, 1, x, out, 256, device="cpu")
    np.testing.assert_allclose(out, 1.5 * x)


# -- @ox.tile.kernel options -----------------------------------------------------------------


def test_occupancy_and_num_stages_at_the_decorator():
    assert tile.kernel(occupancy=2)(spin_kernel().fn).options.occupancy == 2
    assert tile.kernel(num_warps=32, occupancy=2)(spin_kernel().fn).options.occupancy == 2
    for bad, warps in ((0, 4), (17, 4), (3, 32), (True, 4), (2.0, 4)):
        with pytest.raises(ox.KernelTypeError, match="option `occupancy` must be an int"):
            tile.kernel(num_warps=warps, occupancy=bad)
    assert tile.kernel(num_stages=3)(spin_kernel().fn).options.num_stages == 3
    with pytest.raises(ox.KernelTypeError, match="option `num_stages` must be an int"):
        tile.kernel(num_stages=0)


def test_occupancy_runs_unchanged_on_the_cpu():
    k = tile.kernel(occupancy=4)(spin_kernel().fn)
    x = np.arange(300, dtype=np.float32)
    out = np.zeros_like(x)
    cpu(k[2], x, out, 300, 1)
    np.testing.assert_allclose(out, 1.5 * x)


def test_nvptx_min_blocks_becomes_minnctapersm(monkeypatch):
    """NVPTXTarget(min_blocks=N) reaches the PTX as `.minnctapersm N` and ptxas takes it."""
    from oxide.codegen import nvptx
    from oxide.codegen.nvjitlink import ptx_to_cubin

    class ThreeBlocks(nvptx.NVPTXTarget):
        def __init__(self, arch, max_threads, min_blocks=None, block_size=None):
            super().__init__(arch, max_threads, 3, block_size)

    monkeypatch.setattr(nvptx, "NVPTXTarget", ThreeBlocks)
    k = tile.kernel(num_warps=8)(spin_kernel().fn)
    ck = k.compile(Slice[f32], DisjointSlice[f32], i32, 1, arch="sm_90")
    assert ".maxntid 256" in ck.ptx and ".minnctapersm 3" in ck.ptx
    assert ptx_to_cubin(ck.ptx, "sm_90")
    plain = tile.kernel(num_warps=8)(spin_kernel().fn)
    monkeypatch.undo()
    assert ".minnctapersm" not in plain.compile(Slice[f32], DisjointSlice[f32], i32, 1,
                                                arch="sm_90").ptx


def test_tile_occupancy_reaches_the_ptx():
    k = tile.kernel(num_warps=8, occupancy=2)(spin_kernel().fn)
    ptx = k.compile(Slice[f32], DisjointSlice[f32], i32, 1, arch="sm_90").ptx
    assert ".maxntid 256" in ptx and ".minnctapersm 2" in ptx


def test_a_bf16_cuda_array_is_described_by_its_own_dtype() -> None:
    """A torch bf16 CUDA tensor's `__cuda_array_interface__` says "<V2" (NumPy has no
    bf16): the autotuner's key read it as a NumPy dtype and raised TypeError; the
    tensor's own dtype says bf16."""
    from oxide.autotuner import _kind
    from oxide.specialize import array_info

    class BF16Tensor:
        dtype = "torch.bfloat16"
        shape = (4, 8)

        def stride(self) -> tuple[int, int]:
            return (8, 1)

        @property
        def __cuda_array_interface__(self) -> dict:
            return {"typestr": "<V2", "shape": (4, 8), "strides": None, "data": (0, False),
                    "version": 3}

    info = array_info(BF16Tensor())
    assert info is not None and info.dtype == ox.bf16 and info.contiguous
    assert _kind(BF16Tensor()) == ("bf16", 2, True)
