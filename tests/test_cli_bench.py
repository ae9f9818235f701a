"""`oxide bench FILE::KERNEL`: generated inputs, the bench_KERNEL() hook, the report, errors."""

from __future__ import annotations

import json
import math
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import oxide as ox
from oxide import types as T
from oxide.cli import bench
from oxide.cli.main import app
from oxide.cli.signatures import compile_args, parse_types
from oxide.examples.matadd import matadd
from oxide.examples.vecadd import vecadd

runner = CliRunner()
FAST = ["--device", "cpu", "--warmup", "0", "--rep", "2"]

KERNELS = textwrap.dedent("""
    import numpy as np
    import oxide as ox
    from oxide import DisjointSlice, Slice, f32, i32, thread

    @ox.kernel
    def twice(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[i] * 2.0

    @ox.kernel
    def shift(x: Slice[i32], by: i32, out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[i] + by

    @ox.kernel(max_threads=64)
    def narrow(x: Slice[f32], out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[i]

    seen = {}

    def bench_twice(size=None):
        n = size or 1000
        x = np.arange(n, dtype=np.float32)
        out = np.zeros_like(x)
        seen["x"], seen["out"] = x, out
        return ox.LaunchConfig.for_num_elems(n, 128), (x, out)
""")


def said(text: str) -> str:
    """Output as one line: rich wraps error boxes at the terminal's width."""
    return " ".join(text.replace("│", " ").split())


def _bench(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["bench", *args])
    return result.exit_code, result.stdout, result.stderr


def _json(*args: str) -> dict[str, object]:
    code, out, err = _bench(*args, *FAST, "--json")
    assert code == 0, out + err
    return json.loads(out)  # type: ignore[no-any-return]


@pytest.fixture()
def kernels_file(tmp_path: Path) -> Path:
    path = tmp_path / "bench_kernels.py"
    path.write_text(KERNELS)
    yield path
    sys.modules.pop("bench_kernels", None)


def test_bench_reports_median_min_and_gb_per_s() -> None:
    code, out, err = _bench("vecadd::vecadd", "--shape", "5000", *FAST)
    assert code == 0, out + err
    assert "vecadd on CPU" in out
    assert "a: f32[5000] random" in out
    assert "grid (20, 1, 1), block (256, 1, 1)" in out
    assert "median" in out and "min" in out and "GB/s" in out
    assert "compiling" not in out + err  # no spinner where the output is no terminal


def test_bench_counts_every_array_once() -> None:
    data = _json("vecadd", "--shape", "4K")
    assert data["bytes"] == 3 * 4 * 4096
    assert data["grid"] == [16, 1, 1] and data["block"] == [256, 1, 1]
    assert data["min_ms"] <= data["median_ms"]
    assert data["runs"] >= 1
    assert math.isclose(data["gb_per_s"], data["bytes"] / (data["median_ms"] * 1e-3) / 1e9)


def test_bench_launches_2d_kernels_over_cols_and_rows() -> None:
    data = _json("matadd", "--shape", "100x50")
    assert data["block"] == [16, 16, 1]
    assert data["grid"] == [math.ceil(50 / 16), math.ceil(100 / 16), 1]
    assert data["bytes"] == 3 * 4 * 100 * 50


def test_bench_keeps_to_max_threads_and_takes_explicit_config(kernels_file: Path) -> None:
    data = _json(f"{kernels_file}::narrow", "--shape", "1000")
    assert data["block"] == [64, 1, 1] and data["grid"] == [16, 1, 1]
    data = _json("vecadd", "--shape", "1000", "--grid", "3", "--block", "64")
    assert data["grid"] == [3, 1, 1] and data["block"] == [64, 1, 1]


def test_generated_inputs_follow_the_signature_and_run() -> None:
    sig = compile_args(vecadd, None, {})
    work = bench.generated_workload(vecadd, sig, ["777"], [], None, None, 0, seed=1)
    a, b, out = work.args
    assert a.dtype == np.float32 and a.shape == (777,)
    assert 0.0 <= a.min() and a.max() < 1.0 and not np.array_equal(a, b)
    with ox.device("cpu"):
        vecadd[work.config](a, b, out)
    np.testing.assert_array_equal(out, a + b)
    sig = compile_args(matadd, parse_types("Slice[f64, 2], Slice[f64, 2], DisjointSlice[f64, 2]"),
                       {})
    work = bench.generated_workload(matadd, sig, ["a=30x40", "20x10"], [], None, None, 0, 0)
    assert [x.shape for x in work.args] == [(30, 40), (20, 10), (20, 10)]
    assert work.args[0].dtype == np.float64


def test_integer_inputs_and_scalar_values(kernels_file: Path) -> None:
    from oxide.cli.loading import load_kernel

    shift = load_kernel(f"{kernels_file}::shift")
    sig = compile_args(shift, None, {})
    work = bench.generated_workload(shift, sig, ["300"], ["by=7"], None, None, 0, 0)
    x, by, out = work.args
    assert x.dtype == np.int32 and 0 <= x.min() and x.max() < bench.INT_HIGH
    assert by == np.int32(7) and isinstance(by, np.int32)
    with ox.device("cpu"):
        shift[work.config](x, by, out)
    np.testing.assert_array_equal(out, x + 7)
    assert bench.random_array(T.u8, (1000,), np.random.default_rng(0)).dtype == np.uint8
    assert bench.random_array(T.bool_, (10,), np.random.default_rng(0)).dtype == np.bool_


def test_the_hook_gives_inputs_and_config(kernels_file: Path) -> None:
    code, out, err = _bench(f"{kernels_file}::twice", "--size", "3000", *FAST)
    assert code == 0, out + err
    assert "bench_twice()" in out and "grid (24, 1, 1), block (128, 1, 1)" in out
    assert "24.00 KB" in out  # 2 arrays of 3000 f32
    seen = sys.modules["bench_kernels"].seen
    np.testing.assert_array_equal(seen["out"], seen["x"] * 2)  # the kernel really ran on them


@pytest.mark.parametrize("args, message", [
    (["nosuch.py::k"], "nosuch.py is not a file"),
    (["vecadd::nope"], "has no kernel `nope` (its kernels: vecadd)"),
    (["vecadd", "--shape", "3x3x3x3"], "is not a shape"),
    (["vecadd", "--shape", "0"], "is not a shape"),
    (["vecadd", "--shape", "q=10"], "no array parameter `q`"),
    (["vecadd", "--shape", "a=10x10"], "`a` is a Slice[f32]"),
    (["vecadd", "--arg", "n=3"], "no scalar parameter `n`"),
    (["vecadd", "--block", "0"], "--block takes 1 to 3 positive ints"),
    (["vecadd", "--types", "Slice[f32], Blob"], "`Blob` is not an oxide type"),
    (["vecadd", "--size", "10"], "--size goes to a bench_vecadd() hook"),
    (["mandelbrot"], "--const max_iter=VALUE"),
])
def test_bad_specs_are_usage_errors(args: list[str], message: str) -> None:
    code, out, err = _bench(*args, *FAST)
    assert code == 2
    assert message in said(out + err)


def test_scalar_values_must_fit(kernels_file: Path) -> None:
    for value in ("2.5", "'x'", "3000000000"):
        code, out, err = _bench(f"{kernels_file}::shift", "--arg", f"by={value}", *FAST)
        assert code == 2, out + err
        assert "is not a i32" in said(out + err)


def test_hook_and_spec_flags_do_not_mix(kernels_file: Path) -> None:
    code, out, err = _bench(f"{kernels_file}::twice", "--shape", "10", "--shared-mem", "64",
                            *FAST)
    assert code == 2
    assert "defines bench_twice()" in said(out + err)
    assert "drop --shape, --shared-mem" in said(out + err)


def test_a_hook_returning_something_else_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bad_hook.py").write_text(KERNELS.replace(
        "return ox.LaunchConfig.for_num_elems(n, 128), (x, out)", "return x"))
    try:
        code, out, err = _bench(f"{tmp_path / 'bad_hook.py'}::twice", *FAST)
    finally:
        sys.modules.pop("bad_hook", None)
    assert code == 2
    assert "must return (config, args)" in said(out + err)


# -- tile kernels: one block per output tile (issue 29, item 1) -------------------------------

TILE_KERNELS = textwrap.dedent("""
    import oxide as ox
    from oxide import Const, DisjointSlice, Slice, f32, tile

    @tile.kernel
    def swizzled(a: Slice[f32, 2], out: DisjointSlice[f32, 2], B: Const[int]):
        i, j = tile.grouped_bid(tile.cdiv(out.shape[0], B), tile.cdiv(out.shape[1], B), 2)
        tile.store(out, (i, j), tile.load(a, (i, j), (B, B)))
""")


@pytest.fixture()
def tile_file(tmp_path: Path) -> Path:
    path = tmp_path / "bench_tiles.py"
    path.write_text(TILE_KERNELS)
    yield path
    sys.modules.pop("bench_tiles", None)


def test_a_tile_kernel_gets_one_block_per_output_tile() -> None:
    """The newcomer's command: 8192 blocks of 128 threads before, 1024 tiles of 1024."""
    data = _json("tile_vecadd", "--shape", "1M", "--const", "B=1024")
    assert data["grid"] == [1024, 1, 1]
    assert data["block"] == [128, 1, 1]  # num_warps=4
    assert data["grid_from"] == ("one block per output tile (tile.bid(0): `out` dim 0, "
                                 "1048576 / 1024 = 1024 tiles)")


def test_a_tile_grid_covers_a_partial_last_tile_and_runs() -> None:
    from oxide.examples.tile_vecadd import tile_vecadd

    sig = compile_args(tile_vecadd, None, {"B": 256})
    work = bench.generated_workload(tile_vecadd, sig, ["1000"], [], None, None, 0, seed=2)
    assert work.config.grid == (4, 1, 1) and work.config.block == (128, 1, 1)
    a, b, out, size = work.args
    with ox.device("cpu"):
        tile_vecadd[work.config.grid](a, b, out, size)
    np.testing.assert_array_equal(out, a + b)


def test_a_2d_tile_grid_follows_each_axis_to_its_dimension() -> None:
    data = _json("tile_transpose", "--const", "B=32", "--shape", "100x70")
    # tile.store(out, (j, i), ...): tile.bid(0) walks out's columns, tile.bid(1) its rows
    assert data["grid"] == [3, 4, 1]
    assert "tile.bid(0): `out` dim 1, 70 / 32 = 3 tiles" in data["grid_from"]
    assert "tile.bid(1): `out` dim 0, 100 / 32 = 4 tiles" in data["grid_from"]
    data = _json("tile_matmul::tile_matmul_f32", "--const", "BM=32", "--const", "BN=16",
                 "--const", "BK=16", "--shape", "64x40")
    assert data["grid"] == [2, 3, 1] and data["block"] == [256, 1, 1]


def test_a_row_per_block_takes_one_block_per_row() -> None:
    data = _json("tile_softmax", "--const", "BN=128", "--shape", "50x100")
    assert data["grid"] == [50, 1, 1]  # tiles of (1, BN) at (row, 0)
    assert data["block"] == [128, 1, 1]  # num_warps="auto": 4 warps for a 128-column row
    data = _json("tile_softmax", "--const", "BN=32768", "--shape", "2x32768")
    assert data["block"] == [1024, 1, 1]  # and 32 for 32768 columns


def test_a_tile_grid_the_stores_do_not_give_needs_grid(tile_file: Path) -> None:
    code, out, err = _bench(f"{tile_file}::swizzled", "--const", "B=16", "--shape", "64x64",
                            *FAST)
    assert code == 2
    assert "its grid does not follow from its stores: it hands out tiles with " \
           "tile.grouped_bid(...); give it with --grid" in said(out + err)
    data = _json(f"{tile_file}::swizzled", "--const", "B=16", "--shape", "64x64",
                 "--grid", "16")
    assert data["grid"] == [16, 1, 1] and data["grid_from"] == "--grid"


def test_a_tile_kernel_takes_no_block() -> None:
    code, out, err = _bench("tile_vecadd", "--const", "B=1024", "--block", "256", *FAST)
    assert code == 2
    assert "its block is num_warps * 32 = 128 threads; drop --block" in said(out + err)


def test_simt_grids_say_how_they_were_chosen() -> None:
    assert _json("vecadd", "--shape", "4K")["grid_from"] == \
        "one thread per element of the largest array (4096)"
    assert _json("vecadd", "--shape", "4K", "--grid", "3")["grid_from"] == "--grid"


def test_parse_dims() -> None:
    assert bench.parse_dims("16M") == (16 << 20,)
    assert bench.parse_dims("4Kx3") == (4096, 3)
    assert bench.parse_dims("2, 3, 4") == (2, 3, 4)


@pytest.mark.gpu
def test_bench_on_the_gpu_times_device_arrays() -> None:
    code, out, err = _bench("vecadd", "--shape", "16M", "--device", "0", "--json")
    assert code == 0, out + err
    data = json.loads(out)
    assert data["device"].startswith("GPU 0")
    assert data["bytes"] == 3 * 4 * (16 << 20)
    assert 10 < data["gb_per_s"] < 10_000  # an H200 moves a few TB/s, never 10 TB/s
