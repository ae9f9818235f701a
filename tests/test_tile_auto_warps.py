"""`@tile.kernel(num_warps="auto")`: the compiler sizes the block of each specialization
(tile/auto_warps.py). The choice per row width, the launches that follow it (ox.launch,
kernel[grid], compile, ox.autotune over it), the same results on the CPU as with the warps
given, and the errors: a product, an occupancy beside "auto"."""

from __future__ import annotations

import math

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, Slice, TypeVar, f32, tile
from oxide.examples import tile_layernorm, tile_softmax
from oxide.specialize import signature_from
from oxide.tile.auto_warps import LIVE_TARGET, choose_warps

T = TypeVar("T")


@tile.kernel(num_warps="auto")
def row_max(x: Slice[T, 2], out: DisjointSlice[T, 2], BN: Const[int]):
    row = tile.bid(0)
    t = tile.load(x, (row, 0), (1, BN), padding=-math.inf)
    tile.store(out, (row, 0), t - tile.max(t, 1, keepdims=True))


def _chosen(kernel, *args) -> tuple[int, int | None]:
    options = kernel.kernel_for(signature_from(kernel, args)).tile_options
    return options.num_warps, options.occupancy


@pytest.mark.parametrize(("cols", "warps", "occupancy"), [
    (256, 4, 8), (1024, 4, 8), (8192, 8, 4), (16384, 16, 2), (32768, 32, 1),
    (65536, 32, None)])
def test_softmax_takes_the_fewest_warps_that_hold_its_row(cols: int, warps: int,
                                                          occupancy: int | None) -> None:
    """f32 rows: the row and its exponentials take cols / threads + 1 registers a
    thread; the fewest warps that keep that within 64, blocks for half an SM's 2048
    threads; past 32 warps' reach (65536 columns) 32 warps and ptxas's own occupancy."""
    x = np.zeros((2, cols), np.float32)
    assert _chosen(tile_softmax.tile_softmax, x, x, cols) == (warps, occupancy)


def test_layernorm_holds_two_rows_live() -> None:
    """The centred row and the row it came from are live together: twice softmax's."""
    norm = tile_layernorm.tile_layernorm
    for cols, chosen in ((4096, (4, 8)), (8192, (8, 4)), (16384, (16, 2)), (32768, (32, 1))):
        x, w = np.zeros((2, cols), np.float32), np.zeros(cols, np.float32)
        assert _chosen(norm, x, w, w, x, np.float32(0), cols) == chosen
        choice = choose_warps(norm, signature_from(norm, (x, w, w, x, np.float32(0), cols)),
                              lambda n: ox.tile.kernel(num_warps=n)(norm.fn))
        assert choice.live_registers == LIVE_TARGET  # 2 * cols / threads


def test_the_choice_is_one_kernel_per_set_of_options() -> None:
    """Two signatures with the same warps share one kernel (and its compile cache); a
    16-bit row of the same width takes the same warps (the math is in f32)."""
    f, h = np.zeros((2, 1024), np.float32), np.zeros((2, 1024), ox.bf16.numpy)
    kernel = tile_softmax.tile_softmax
    assert kernel.kernel_for(signature_from(kernel, (f, f, 256))) is \
        kernel.kernel_for(signature_from(kernel, (f, f, 1024)))
    assert _chosen(kernel, h, h, 8192) == _chosen(kernel, f, f, 8192)


def test_every_launch_form_runs_the_chosen_kernel_on_the_cpu() -> None:
    """ox.launch, kernel[grid] (by position and by name) and compile agree with the same
    kernel on fixed warps, bit for bit."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 1000), dtype=np.float32)
    fixed = ox.tile.kernel(num_warps=4, occupancy=8)(row_max.fn)
    want = np.zeros_like(x)
    with ox.device("cpu"):
        fixed[3](x, want, 1024)
        for launch in (lambda o: ox.launch(row_max, 3, x, o, 1024),
                       lambda o: row_max[3](x, o, 1024),
                       lambda o: row_max[3](x, out=o, BN=1024),
                       lambda o: ox.launch(row_max, 3, x, o, BN=1024)):
            out = np.zeros_like(x)
            launch(out)
            np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(want, x - x.max(axis=1, keepdims=True))
    ptx = row_max.compile(x, x, 1024, arch="sm_90").ptx
    assert ".maxntid 128" in ptx and ".minnctapersm 8" in ptx
    ptx = row_max.compile(x, x, 32768, arch="sm_90").ptx
    assert ".maxntid 1024" in ptx


def test_autotune_over_an_auto_kernel_gives_its_warps() -> None:
    """A config with num_warps fixes them; one without leaves them to the compiler."""
    x = np.random.default_rng(4).standard_normal((2, 300), dtype=np.float32)
    out = np.zeros_like(x)
    tuned = ox.autotune(configs=[ox.Config(BN=512, num_warps=8), ox.Config(BN=512)],
                        key=["x"])(row_max)
    with ox.device("cpu"):
        tuned[2](x, out)
    np.testing.assert_array_equal(out, x - x.max(axis=1, keepdims=True))


def test_a_product_keeps_naming_its_warps() -> None:
    @tile.kernel(num_warps="auto")
    def product(a: Slice[f32, 2], b: Slice[f32, 2], c: DisjointSlice[f32, 2]):
        acc = tile.mma(tile.load(a, (0, 0), (16, 16)), tile.load(b, (0, 0), (16, 16)),
                       tile.zeros((16, 16), f32))
        tile.store(c, (0, 0), acc)

    a = np.zeros((16, 16), np.float32)
    with pytest.raises(ox.UnsupportedFeatureError) as err:
        product.compile(a, a, a, arch="sm_90")
    assert "num_warps=\"auto\" chooses the warps of kernels without products" in str(err.value)
    assert "num_warps=8" in str(err.value)


def test_occupancy_beside_auto_is_refused_at_the_decorator() -> None:
    with pytest.raises(ox.KernelTypeError) as err:
        @tile.kernel(num_warps="auto", occupancy=2)
        def k(x: Slice[f32]):
            pass
    assert "chooses the occupancy too" in str(err.value)


def test_bad_arguments_get_the_launch_errors() -> None:
    x = np.zeros((2, 8), np.float32)
    with ox.device("cpu"):
        with pytest.raises(ox.ArgumentError, match="BN"):
            row_max[2](x, x.copy(), [8])  # a Const must be hashable
        with pytest.raises(ox.ArgumentError, match="3 parameters"):
            row_max[2](x, x.copy())


def test_a_tile_too_large_for_32_warps_gets_the_frontends_error() -> None:
    """2^19 columns: 512 elements a thread even on 32 warps; every candidate is refused,
    and the error is the 32-warp block's, at the load."""
    x = np.zeros((2, 1 << 19), np.float32)
    with pytest.raises(ox.KernelTypeError, match="puts 512 elements in each of the block's "
                                                  "1024 threads"):
        row_max.compile(x, x, 1 << 19, arch="sm_90")


def test_an_auto_kernel_has_no_block_of_its_own() -> None:
    with pytest.raises(ox.LaunchError, match="chooses its warps per specialization"):
        row_max.block_threads  # noqa: B018
    assert "auto" in repr(row_max)


@pytest.mark.gpu
@pytest.mark.parametrize("cols", [256, 4097, 32768, 65536])
def test_auto_rows_on_the_gpu(cols: int) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs torch with CUDA")
    x = torch.randn(17, cols, device="cuda")
    out = torch.empty_like(x)
    block = 1 << (cols - 1).bit_length()
    row_max[17](x, out, block)
    torch.testing.assert_close(out, x - x.max(dim=1, keepdim=True).values, rtol=0, atol=0)


_CHOOSE_IN_A_FRESH_PROCESS = """
import sys
import numpy as np
from oxide.examples.tile_softmax import tile_softmax
from oxide.specialize import signature_from
x = np.zeros((2, 8192), np.float32)
kernel = tile_softmax.kernel_for(signature_from(tile_softmax, (x, x, 8192)))
print(kernel.tile_options.num_warps, kernel.tile_options.occupancy,
      "xdsl" in sys.modules, "oxide.tile.frontend" in sys.modules)
"""


def test_a_later_process_reads_the_choice_back(tmp_path) -> None:
    """The choice goes to the cache directory: a second process takes it from there
    without lowering the kernel (no compiler imported), and takes the same warps; a
    corrupt file is a choice made again, never an error."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "OXIDE_CACHE_DIR": str(tmp_path)}

    def fresh() -> list[str]:
        done = subprocess.run([sys.executable, "-c", _CHOOSE_IN_A_FRESH_PROCESS], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert fresh() == ["8", "4", "True", "True"]
    memos = list((tmp_path / "warps").glob("*.json"))
    assert len(memos) == 1
    assert fresh() == ["8", "4", "False", "False"]
    memos[0].write_text("{not json")
    assert fresh() == ["8", "4", "True", "True"]


def test_a_memo_out_of_range_is_a_choice_made_again(tmp_path, monkeypatch) -> None:
    """A memo naming warps the rule never takes, or an occupancy past what an SM holds,
    is doubted (the choice is made again), never launched."""
    import json

    from oxide.tile.auto_warps import WarpChoice, _memo_path, remember_choice, remembered_choice

    monkeypatch.setenv("OXIDE_CACHE_DIR", str(tmp_path))
    kernel = tile_softmax.tile_softmax
    x = np.zeros((2, 1024), np.float32)
    sig = signature_from(kernel, (x, x, 1024))
    remember_choice(kernel, sig, WarpChoice(4, 8, 9))
    assert remembered_choice(kernel, sig) == WarpChoice(4, 8, 9)
    path = _memo_path(kernel, sig)
    for bad in ({"num_warps": 64}, {"occupancy": 0}, {"occupancy": "8"}, {"format": 0}):
        data = {"format": 1, "num_warps": 4, "occupancy": 8, "live_registers": 9, **bad}
        path.write_text(json.dumps(data))
        assert remembered_choice(kernel, sig) is None, bad
