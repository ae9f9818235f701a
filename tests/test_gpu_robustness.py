"""Issue 27 on a GPU: what the CPU suites check, where the GPU's own path could differ.

Garbage streams through the GPU launch path and its binders; tile loads and stores at
extreme tile indices (predicated PTX accesses: a wrong bounds test is an illegal address
here); mma.sync launched in a partial warp; recursion whose frames do not fit the stack,
and the largest stack the device takes. Run with `pytest -m gpu`.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import test_launch_values as lv
import test_recursion as tr
import test_tile_bounds_extremes as tb
import test_whole_warps as ww

import oxide as ox

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def on_gpu() -> Iterator[None]:
    with ox.device(0), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # host arrays copied in and back: said once
        yield
    ox.synchronize(0)


@pytest.mark.parametrize("stream", lv.GARBAGE, ids=lambda s: type(s).__name__)
def test_a_garbage_stream_is_an_argument_error_on_the_gpu(stream: object) -> None:
    x, out = ox.to_device(np.ones(64, np.float32)), ox.zeros(64)
    for _ in range(2):  # the general path, then a relaunch through the binder
        with pytest.raises(ox.ArgumentError, match="stream= takes"):
            lv.double[2, 32](x, out, stream=stream)
        with pytest.raises(ox.ArgumentError, match="stream= takes"):
            lv.tile_double[2](x, out, stream=stream)
        lv.double[2, 32](x, out, stream=0)
        lv.tile_double[np.int64(2)](x, out, stream=np.uint64(0))
    assert (out.to_numpy() == 2).all()


@pytest.mark.parametrize("dtype", list(tb.BY_DTYPE), ids=lambda d: d.__name__)
def test_tile_accesses_at_extreme_indices_on_the_gpu(dtype: type) -> None:
    """Loads read padding and stores write nothing, with no illegal address."""
    tb.test_1d_loads_at_extreme_indices_read_padding(dtype)
    tb.test_1d_stores_at_extreme_indices_write_nothing(dtype)
    if dtype is not np.uint32:
        for kernel in (tb.load_2d, tb.load_2d_transposed):
            tb.test_2d_loads_at_extreme_indices_read_padding(kernel, dtype)
    ox.synchronize()


def test_more_tile_extremes_on_the_gpu() -> None:
    tb.test_2d_stores_at_extreme_indices_write_nothing()
    tb.test_constant_extreme_indices_read_padding()
    tb.test_a_computed_extreme_index_reads_padding()
    for dtype in tb.BY_DTYPE:  # device arrays: host ones are not copied back after an error
        tb.test_simt_accesses_at_extreme_indices_are_index_errors(
            dtype, place=ox.to_device, fetch=lambda d: d.to_numpy())
    ox.synchronize()


def test_mma_sync_in_a_partial_warp_is_refused_on_the_gpu() -> None:
    a = ox.to_device(np.zeros(8, np.uint32))
    out = ox.to_device(np.full(64, 5.0, np.float32))
    with pytest.raises(ox.LaunchError, match="last warp is partial"):
        ww.mma_any_block[1, 16](a, out)
    with pytest.raises(ox.LaunchError, match="last warp is partial"):
        ww.mma_any_block[1, (8, 2)](a, out)
    ww.mma_any_block[1, (16, 2)](a, out)
    got = out.to_numpy()
    assert (got[:32] == 0.0).all() and (got[32:] == 5.0).all()


def test_a_frame_larger_than_the_stack_is_reported_not_a_fault() -> None:
    """8 KiB frames in a small stack: the calls past it are not made (a KernelAssertionError,
    not a fault), and the context lives on (it once died with CUDA_ERROR_ILLEGAL_ADDRESS).
    How many levels fit depends on the context's stack, which an earlier test in this
    process may have raised (it is never lowered), so only n = 0, which calls nothing, has
    a value to check; a thread whose call was refused holds no defined result."""
    ns = np.array([0, 1, 3], np.int32)
    out = ox.to_device(np.full(3, 9.0, np.float32))  # host arrays: not copied back after it
    with pytest.raises(ox.KernelAssertionError, match="`big_frame` recursed deeper"):
        tr.big_frames[1, 3](ns, out)
        ox.synchronize()
    assert out.to_numpy()[0] == 0.0
    fibs_out = np.zeros(10, np.int32)
    tr.fibs[1, 10](np.arange(10, dtype=np.int32), fibs_out)  # the context survived
    assert fibs_out.tolist() == [tr.py_fib(n) for n in range(10)]


def test_big_frames_run_in_a_stack_that_holds_them() -> None:
    ns = np.array([0, 1, 3, 5], np.int32)
    out = np.zeros(4, np.float32)
    tr.big_frames_roomy[1, 4](ns, out)
    ox.synchronize()
    assert out.tolist() == [tr.py_big_frame(int(n)) for n in ns]
    deep = np.array([1000], np.int32)  # 1000 levels of 8 KiB: past 64 KiB, reported
    with pytest.raises(ox.KernelAssertionError, match="`big_frame` recursed deeper"):
        tr.big_frames_roomy[1, 1](deep, np.zeros(1, np.float32))
        ox.synchronize()


_LARGEST_STACK = """
import sys
sys.path.insert(0, {tests!r})
import numpy as np
import oxide as ox
import test_recursion as tr
from oxide.runtime import cuda_driver as cd, gpu
with ox.device(0):
    ns = np.arange(12, dtype=np.int32)
    out = np.zeros(12, np.int32)
    try:
        tr.fibs_on_the_largest_stack[1, 12](ns, out)
        ox.synchronize()
    except ox.LaunchError as exc:
        print("REFUSED", exc)
        raise SystemExit(0)
    assert out.tolist() == [tr.py_fib(int(n)) for n in ns], out
    gdev = gpu.gpu_device(0)
    gdev.enter()
    print("STACK", cd.context_limit("STACK_SIZE"))
"""


def test_stack_size_512_kib_is_clamped_to_the_devices_maximum() -> None:
    """In a process of its own: the stack it sets reserves most of the GPU's memory (an
    H200: 523712 bytes for each of 270336 threads), which the context keeps."""
    code = _LARGEST_STACK.format(tests=str(Path(__file__).parent))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = proc.stdout
    if said.startswith("REFUSED"):  # other processes hold the memory: refused cleanly,
        # naming the largest stack it tried (at most the request) and why
        tried = int(said.split("could not give each thread ")[1].split(" bytes")[0])
        assert tried <= 524288 and "CUDA_ERROR_OUT_OF_MEMORY" in said, said
        return
    stack = int(said.split("STACK")[1])
    assert 500_000 <= stack < 512 * 1024, said
