"""Kernels on a real GPU against NumPy: oxide arrays, torch, CuPy, host arrays, layouts.

Run with `pytest -m gpu`; every test here skips itself where no CUDA GPU is found.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
import pytest

import oxide as ox
from oxide import Const, DisjointSlice, Slice, f32, f64, i32, thread, u8

pytestmark = pytest.mark.gpu
T = ox.TypeVar("T")
rng = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def on_gpu() -> Iterator[None]:
    with ox.device(0):
        yield
    ox.synchronize(0)


def cfg(n: int, block: int = 256) -> ox.LaunchConfig:
    return ox.LaunchConfig.for_num_elems(n, block=block)


@ox.kernel
def vecadd(a: Slice[f32], b: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = a[i] + b[i]


@ox.kernel
def scale(x: Slice[f32], factor: f32, out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * factor


@ox.kernel
def axpy(a: T, x: Slice[T], y: Slice[T], out: DisjointSlice[T]):
    i = thread.index_1d()
    if i in out:
        out[i] = a * x[i] + y[i]


@ox.kernel
def matadd(a: Slice[f32, 2], b: Slice[f32, 2], out: DisjointSlice[f32, 2]):
    ij = thread.index_2d()
    if ij in out:
        out[ij] = a[ij] + b[ij]


@ox.kernel
def transcendental(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        v = x[i]
        out[i] = ox.math.sin(v) * ox.math.exp(v * 0.1) + ox.math.sqrt(ox.math.fabs(v))


@ox.kernel
def repeat(x: Slice[f32], R: Const[int], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        acc = f32(0)
        for _ in range(R):
            acc += x[i]
        out[i] = acc


@ox.kernel
def saturate(x: Slice[i32], hi: u8, out: DisjointSlice[u8]):
    i = thread.index_1d()
    if i in out:
        out[i] = u8(min(max(x[i], 0), i32(hi)))


@ox.kernel
def reverse_blocks(x: Slice[f32], out: DisjointSlice[f32]):
    """Reverses each block of 128 through shared memory (barrier-ordered)."""
    i = thread.index_1d()
    t = ox.thread_idx.x
    tile = ox.shared.array(f32, 128)
    with ox.unsafe():
        tile[t] = x[i] if i in x else f32(0)
    ox.sync_threads()
    if i in out:
        with ox.unsafe():
            out[i] = tile[127 - t]


def test_vecadd_device_arrays() -> None:
    n = 1_000_003
    a, b = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    da, db, out = ox.to_device(a), ox.to_device(b), ox.empty(n, ox.f32)
    vecadd[cfg(n)](da, db, out)
    np.testing.assert_array_equal(out.to_numpy(), a + b)


def test_scale_host_numpy_arrays_copy_in_and_back() -> None:
    x = rng.standard_normal(5000, np.float32)
    out = np.zeros_like(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the one-time copy warning (tested without a GPU)
        ox.launch(scale, cfg(x.size), x, 2.5, out)
    np.testing.assert_allclose(out, x * np.float32(2.5), rtol=1e-6)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_axpy_generic(dt: type) -> None:
    n = 4097
    x, y = rng.standard_normal(n).astype(dt), rng.standard_normal(n).astype(dt)
    out = ox.empty(n, dt)
    axpy[cfg(n)](1.5, ox.to_device(x), ox.to_device(y), out)
    # The GPU contracts a*x + y into one FMA (one rounding), NumPy rounds twice: compare
    # both against the exact value, within one rounding of the result's magnitude.
    exact = 1.5 * x.astype(np.float64) + y.astype(np.float64)
    ulp = np.finfo(dt).eps * np.maximum(np.abs(exact), np.abs(y.astype(np.float64)))
    assert np.all(np.abs(out.to_numpy() - exact) <= 2 * ulp)


def test_matadd_2d_ragged() -> None:
    rows, cols = 333, 517
    a = rng.standard_normal((rows, cols), np.float32)
    b = rng.standard_normal((rows, cols), np.float32)
    out = ox.zeros((rows, cols), ox.f32)
    grid = (-(-cols // 16), -(-rows // 16))
    matadd[grid, (16, 16)](ox.to_device(a), ox.to_device(b), out)
    np.testing.assert_array_equal(out.to_numpy(), a + b)


def test_math_functions() -> None:
    x = rng.uniform(-4, 4, 10_000).astype(np.float32)
    out = ox.empty(x.size, ox.f32)
    transcendental[cfg(x.size)](ox.to_device(x), out)
    want = np.sin(x) * np.exp(x * np.float32(0.1)) + np.sqrt(np.abs(x))
    np.testing.assert_allclose(out.to_numpy(), want, rtol=2e-6, atol=2e-6)


def test_const_parameter_and_small_int_scalars() -> None:
    x = rng.standard_normal(1000, np.float32)
    out = ox.empty(1000, ox.f32)
    repeat[cfg(1000)](ox.to_device(x), 3, out)
    np.testing.assert_allclose(out.to_numpy(), x * 3, rtol=1e-6)
    ints = rng.integers(-50, 400, 1000, dtype=np.int32)
    sat = ox.empty(1000, ox.u8)
    saturate[cfg(1000)](ox.to_device(ints), 200, sat)
    np.testing.assert_array_equal(sat.to_numpy(), np.clip(ints, 0, 200).astype(np.uint8))


def test_shared_memory_and_barriers() -> None:
    n = 128 * 40
    x = np.arange(n, dtype=np.float32)
    out = ox.empty(n, ox.f32)
    reverse_blocks[n // 128, 128](ox.to_device(x), out)
    np.testing.assert_array_equal(out.to_numpy(), x.reshape(-1, 128)[:, ::-1].ravel())


def test_torch_tensors_and_strided_views() -> None:
    torch = pytest.importorskip("torch")
    a = torch.randn(1 << 20, device="cuda")
    b = torch.randn(1 << 20, device="cuda")
    out = torch.empty_like(a)
    vecadd[cfg(a.numel())](a, b, out)
    torch.cuda.synchronize()
    assert torch.equal(out, a + b)
    m = torch.randn(300, 200, device="cuda")
    mt = m.t()  # a (200, 300) non-contiguous view
    res = torch.empty(200, 300, device="cuda")
    matadd[(-(-300 // 16), -(-200 // 16)), (16, 16)](mt, mt, res)
    torch.cuda.synchronize()
    assert torch.equal(res, mt + mt)
    d = torch.randn(1000, dtype=torch.float64, device="cuda")
    outd = torch.empty_like(d)
    axpy[cfg(1000)](2.0, d, d, outd)  # Slices may share memory; the output does not
    torch.cuda.synchronize()
    torch.testing.assert_close(outd, 3 * d)


def test_cupy_arrays() -> None:
    cp = pytest.importorskip("cupy")
    a = cp.arange(10_000, dtype=cp.float32)
    out = cp.empty_like(a)
    scale[cfg(a.size)](a, 0.5, out)
    cp.cuda.Device(0).synchronize()
    assert bool((out == a * 0.5).all())


def test_oxide_arrays_interoperate_without_copies() -> None:
    torch = pytest.importorskip("torch")
    x = ox.to_device(np.arange(16, dtype=np.float32))
    t = torch.as_tensor(x, device="cuda")  # __cuda_array_interface__
    assert t.data_ptr() == x.data_ptr
    t2 = torch.from_dlpack(x)
    assert t2.data_ptr() == x.data_ptr and t2.shape == (16,)
    ox.synchronize()
    assert torch.equal(t2.cpu(), torch.arange(16, dtype=torch.float32))


def test_jax_arrays_through_dlpack() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus:
        pytest.skip("JAX sees no GPU")
    a = jax.device_put(jnp.arange(1000, dtype=jnp.float32), gpus[0])
    out = ox.empty(1000, ox.f32)
    scale[cfg(1000)](a, 2.0, out)
    np.testing.assert_array_equal(out.to_numpy(), np.arange(1000, dtype=np.float32) * 2)


def test_f64_scalars_keep_precision() -> None:
    @ox.kernel
    def fill(v: f64, n: i32, out: DisjointSlice[f64]):
        i = thread.index_1d()
        if i in out:
            out[i] = v + f64(n)

    out = ox.empty(10, ox.f64)
    fill[1, 32](1.0 / 3.0, 7, out)
    np.testing.assert_array_equal(out.to_numpy(), np.full(10, 1.0 / 3.0 + 7))


def test_launches_from_threads_that_never_used_cuda() -> None:
    """A new thread has no current CUDA context: its first launch, taken by the binder
    the main thread's launch left, must make the device's context current itself."""
    import threading

    n = 1000
    x = ox.to_device(rng.random(n, dtype=np.float32))
    out = ox.zeros(n)
    scale[cfg(n)](x, 2.0, out)
    errors: list[BaseException] = []

    def work(factor: float) -> None:
        try:
            scale[cfg(n)](x, factor, out)
            ox.synchronize()
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)

    for factor in (3.0, 4.0):
        worker = threading.Thread(target=work, args=(factor,))
        worker.start()
        worker.join()
        assert not errors
        np.testing.assert_allclose(out.to_numpy(), x.to_numpy() * factor, rtol=1e-6)


@pytest.mark.parametrize("flavor", ["native", "ctypes", "warmup"])
def test_every_launch_flavor_computes_the_same(flavor: str, monkeypatch) -> None:
    """The trampoline, ctypes, and the switch from one to the other (runtime/native_launch.py)
    on the real driver: scalars of several types, a coarsened grid, changing configs."""
    from oxide.runtime import native_launch

    @ox.kernel
    def mix(x: Slice[f32], a: f32, b: f64, k: i32, out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[i] * a + f32(b) + f32(k)

    if flavor == "ctypes":
        monkeypatch.setattr(native_launch, "_built", (None, "the test's choice"))
    elif flavor == "warmup":
        monkeypatch.setattr(native_launch, "_built", None)
        monkeypatch.setattr(native_launch, "_llvmlite_loaded", lambda: False)
        monkeypatch.setattr(native_launch, "warmup", [5])
    x = rng.standard_normal(5000, np.float32)
    xd, out = ox.to_device(x), ox.empty(5000, ox.f32)
    flavors = set()
    for step in range(12):
        n = 1000 + 300 * step
        mix[cfg(n, block=128 if step % 2 else 256)](xd, 0.5 * step, 1.0 / 3.0, -step, out)
        flavors.add(mix.__dict__["_oxide_launchers"].last.flavor)
        got = out.to_numpy()[:n]
        want = x[:n] * np.float32(0.5 * step) + np.float32(1.0 / 3.0) + np.float32(-step)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert flavors == {"ctypes": {"ctypes"}, "native": {"native"},
                       "warmup": {"warmup", "native"}}[flavor]


def test_threads_launch_at_once_on_their_own_streams() -> None:
    """Launches from four threads at once through one binder: the trampoline keeps each
    launch's values its own (no shared parameter buffer)."""
    import threading

    torch = pytest.importorskip("torch")
    n = 1 << 16
    x = torch.rand(n, device="cuda")
    outs = [torch.empty(n, device="cuda") for _ in range(4)]
    scale[cfg(n)](x, 1.0, outs[0])
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                for i in range(200):
                    scale[cfg(n)](x, float(k * 1000 + i), outs[k])
            stream.synchronize()
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k in range(4):
        torch.testing.assert_close(outs[k], x * float(k * 1000 + 199))
