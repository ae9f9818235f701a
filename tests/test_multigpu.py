"""oxide on several GPUs of one host (issue 30): `pytest -m multigpu` on a machine with two or
more; every test skips itself with fewer. The host-side logic is also tested without GPUs
(tests/test_multi_device_host.py); this proves it on the hardware, NCCL included."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import oxide as ox
from oxide import DisjointSlice, Slice, f32, thread
from oxide.runtime.device import cuda_device_count

pytestmark = [pytest.mark.multigpu,
              pytest.mark.skipif(cuda_device_count() < 2, reason="needs two or more GPUs")]


@ox.kernel
def add(x: Slice[f32], y: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] + y[i]


@ox.kernel
def with_halo(x: Slice[f32], halo: Slice[f32], out: DisjointSlice[f32]):
    """out[i] = x[i] + x[i + 1], the last element's right neighbour read from `halo` (the
    first element of the next GPU's share)."""
    i = thread.index_1d()
    if i in out:
        right = halo[0]
        if i + 1 < len(x):
            right = x[i + 1]
        out[i] = x[i] + right


def test_each_gpu_runs_the_launches_of_its_arrays() -> None:
    torch = pytest.importorskip("torch")
    for d in range(cuda_device_count()):
        x = torch.arange(1000, dtype=torch.float32, device=f"cuda:{d}")
        y = torch.full_like(x, float(d))
        out = torch.empty_like(x)
        add[ox.LaunchConfig.for_num_elems(1000)](x, y, out)  # no ox.device: the arrays' GPU
        torch.cuda.synchronize(d)
        assert torch.equal(out.cpu(), (x + y).cpu())


def test_arrays_on_two_gpus_are_an_argument_error() -> None:
    torch = pytest.importorskip("torch")
    x = torch.ones(10, device="cuda:0")
    y = torch.ones(10, device="cuda:1")
    with pytest.raises(ox.ArgumentError, match=r"ox.enable_peer_access\(0, 1\)"):
        add[1, 32](x, y, torch.empty(10, device="cuda:0"))


def test_a_kernel_reads_its_neighbours_halo_over_peer_access() -> None:
    torch = pytest.importorskip("torch")
    full = torch.randn(2 * 4096)
    shares = [full[:4096].to("cuda:0"), full[4096:].to("cuda:1")]
    ox.enable_peer_access(0, 1)
    out = torch.empty(4096, device="cuda:0")
    with ox.device(0):
        with_halo[ox.LaunchConfig.for_num_elems(4096)](shares[0], shares[1][:1], out)
    torch.cuda.synchronize(0)
    want = full[:4096] + full[1:4097]
    assert torch.equal(out.cpu(), want)


def test_threads_launching_on_different_gpus_at_once() -> None:
    torch = pytest.importorskip("torch")
    errors: list[BaseException] = []

    def work(d: int) -> None:
        try:
            x = torch.randn(1 << 20, device=f"cuda:{d}")
            y = torch.randn_like(x)
            out = torch.empty_like(x)
            cfg = ox.LaunchConfig.for_num_elems(x.numel())
            for _ in range(200):
                add[cfg](x, y, out)
            torch.cuda.synchronize(d)
            assert torch.equal(out, x + y)
        except BaseException as exc:  # reported to the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(d,)) for d in range(cuda_device_count())
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_the_tensor_parallel_mlp_under_torchrun() -> None:
    pytest.importorskip("torch.distributed")
    torchrun = shutil.which("torchrun")
    command = ([torchrun] if torchrun else [sys.executable, "-m", "torch.distributed.run"])
    done = subprocess.run([*command, "--nproc-per-node", "2", "-m", "oxide.examples.tp_mlp",
                           "--size", "1024", "1024", "4096", "--steps", "3"],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("PASS") == 2, done.stdout


def test_device_arrays_made_per_gpu() -> None:
    for d in range(2):
        with ox.device(d):
            a = ox.to_device(np.arange(64, dtype=np.float32))
            out = ox.empty(64, ox.f32)
            add[1, 64](a, a, out)
            np.testing.assert_array_equal(out.to_numpy(), 2 * np.arange(64, dtype=np.float32))
