"""Issue 16 item 5: `ox.testing.do_bench`, timing as Triton's `do_bench` does."""

from __future__ import annotations

import time

import numpy as np
import pytest

import oxide as ox
import oxide.testing
from oxide import DisjointSlice, Slice, f32, thread


@ox.kernel
def double(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * 2.0


def test_do_bench_times_a_cpu_launch_in_milliseconds() -> None:
    x = np.ones(1 << 16, np.float32)
    out = np.zeros_like(x)
    cfg = ox.LaunchConfig.for_num_elems(x.size)
    with ox.device("cpu"):
        ms = oxide.testing.do_bench(lambda: double[cfg](x, out), warmup=5, rep=20)
        q = oxide.testing.do_bench(lambda: double[cfg](x, out), warmup=0, rep=20,
                                   quantiles=(0.2, 0.5, 0.8))
    assert 0 < ms < 1000 and q[0] <= q[1] <= q[2]
    np.testing.assert_array_equal(out, 2 * x)


def test_do_bench_measures_what_fn_costs() -> None:
    with ox.device("cpu"):
        slept = oxide.testing.do_bench(lambda: time.sleep(0.002), warmup=0, rep=30,
                                       return_mode="min")
        runs = oxide.testing.do_bench(lambda: None, warmup=0, rep=1, return_mode="all")
    assert 2.0 <= slept < 50.0
    assert isinstance(runs, list) and len(runs) >= 1


@pytest.mark.parametrize("kwargs", [{"return_mode": "fastest"}, {"quantiles": (0.5, 2.0)},
                                    {"rep": 0}])
def test_do_bench_refuses_bad_arguments(kwargs: dict) -> None:
    with pytest.raises(ox.ArgumentError):
        oxide.testing.do_bench(lambda: None, device="cpu", **kwargs)


@pytest.mark.gpu
def test_do_bench_times_a_gpu_launch_with_events() -> None:
    from oxide.runtime.device import cuda_device_count

    if cuda_device_count() == 0:
        pytest.skip("needs an NVIDIA GPU")
    small = ox.to_device(np.ones(1 << 10, np.float32), device=0)
    big = ox.to_device(np.ones(1 << 26, np.float32), device=0)
    out_small, out_big = ox.zeros(1 << 10, f32, device=0), ox.zeros(1 << 26, f32, device=0)
    t_small = oxide.testing.do_bench(
        lambda: double[ox.LaunchConfig.for_num_elems(1 << 10)](small, out_small), device=0)
    t_big = oxide.testing.do_bench(
        lambda: double[ox.LaunchConfig.for_num_elems(1 << 26)](big, out_big), device=0)
    assert 0 < t_small < t_big  # 512 MiB of traffic takes longer than 8 KiB
    assert t_big > (1 << 26) * 8 / 6e12 * 1e3  # no faster than ~6 TB/s of HBM
