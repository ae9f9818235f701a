"""8-bit floats on a real GPU: the conversions of tests/test_fp8.py against the same
references (tests/fp8_cases.py), so a pass here and there means the CPU and the GPU give
the same bits; the kernels that load, compute and store them; torch's float8 tensors as
kernel arguments, in place."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import fp8_cases as fc
import numpy as np
import pytest

import oxide as ox
from oxide import bf16, f8e4m3, f8e5m2, f16, f32, f64, i8, i32, i64, tile, u8, u64

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def on_gpu() -> Iterator[None]:
    with ox.device(0):
        yield


def convert(dst: Any, a: np.ndarray) -> np.ndarray:
    """`dst(a[i])` for every element, in a kernel on the GPU."""
    out = ox.zeros(a.shape, dst)
    fc.converter(dst)[ox.LaunchConfig.for_num_elems(a.size)](ox.to_device(a), out)
    return out.to_numpy()


@pytest.mark.parametrize("dst", (f16, bf16, f32, f64), ids=lambda d: d.name)
@pytest.mark.parametrize("src", fc.FP8, ids=lambda d: d.name)
def test_every_pattern_widens_exactly(src: Any, dst: Any) -> None:
    fc.check_widening(convert, src, dst)


@pytest.mark.parametrize("dst", (i8, u8, i32, i64, u64), ids=lambda d: d.name)
@pytest.mark.parametrize("src", fc.FP8, ids=lambda d: d.name)
def test_to_integers(src: Any, dst: Any) -> None:
    fc.check_to_int(convert, src, dst)


@pytest.mark.parametrize("src", fc.FP8, ids=lambda d: d.name)
def test_to_bool(src: Any) -> None:
    fc.check_to_bool(convert, src)


@pytest.mark.parametrize("dst", fc.FP8, ids=lambda d: d.name)
def test_floats_round_once_and_saturate(dst: Any) -> None:
    fc.check_narrowing(convert, dst, fc.f32_edge_values(dst))
    fc.check_narrowing(convert, dst, fc.random_f32(50_000, seed=7))
    fc.check_narrowing(convert, dst, fc.f64_single_rounding_values(dst))
    fc.check_narrowing(convert, dst, fc.random_f64(dst))
    for src in ("f16", "bf16"):
        fc.check_narrowing(convert, dst, fc.half_sources(dst, src))


@pytest.mark.parametrize("dst", fc.FP8, ids=lambda d: d.name)
def test_integers_and_the_other_format(dst: Any) -> None:
    for src in fc.INT_SOURCES:
        fc.check_narrowing(convert, dst, fc.ints_of(src))
    fc.check_narrowing(convert, dst, fc.all_patterns(f8e5m2 if dst == f8e4m3 else f8e4m3))


def test_simt_and_tile_kernels() -> None:
    rng = np.random.default_rng(11)
    n = 1000
    a = (rng.standard_normal(n) * 40).astype(f8e4m3.numpy)
    b = (rng.standard_normal(n) * 8).astype(f8e5m2.numpy)
    b[::7] = 0
    out, wide = ox.zeros(n, f8e5m2), ox.zeros(n, f32)
    fc.scale_shift[ox.LaunchConfig.for_num_elems(n)](ox.to_device(a), ox.to_device(b), 3.0,
                                                      out, wide)
    want_out, want_wide = fc.scale_shift_reference(a, b, 3.0)
    np.testing.assert_array_equal(fc.bits(out.to_numpy()), want_out)
    np.testing.assert_array_equal(wide.to_numpy(), want_wide)
    for shape in ((64, 128), (70, 90)):
        x = (rng.standard_normal(shape) * 30).astype(f8e4m3.numpy)
        y = ox.zeros(shape, f8e5m2)
        fc.tile_scale[(tile.cdiv(shape[0], 32), tile.cdiv(shape[1], 64))](
            ox.to_device(x), y, 200.0, 32, 64)
        np.testing.assert_array_equal(fc.bits(y.to_numpy()), fc.tile_scale_reference(x, 200.0))


def torch_float8() -> Any:
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8 dtypes")
    return torch


def test_torch_float8_tensors_in_place() -> None:
    torch = torch_float8()
    for dt, tdt in ((f8e4m3, torch.float8_e4m3fn), (f8e5m2, torch.float8_e5m2)):
        a = fc.all_patterns(dt)
        t = torch.from_numpy(fc.bits(a).copy()).cuda().view(tdt)
        wide = torch.empty(256, dtype=torch.float32, device="cuda")
        fc.converter(f32)[1, 256](t, wide)
        torch.cuda.synchronize()
        assert fc.same_floats(wide.cpu().numpy(), a.astype(np.float32))
        x = fc.random_f32(5_000, seed=2)
        narrow = torch.empty(x.size, dtype=tdt, device="cuda")
        fc.converter(dt)[ox.LaunchConfig.for_num_elems(x.size)](torch.from_numpy(x).cuda(),
                                                                 narrow)
        torch.cuda.synchronize()
        np.testing.assert_array_equal(narrow.view(torch.uint8).cpu().numpy(), fc.to_fp8(x, dt))


def test_a_torch_tensor_of_the_other_format_is_refused() -> None:
    torch = torch_float8()
    def e5() -> Any:
        return torch.zeros(32, dtype=torch.float8_e5m2, device="cuda")

    with pytest.raises(ox.ArgumentError, match="`a` is Slice.f8e4m3.; got an array of f8e5m2"):
        fc.scale_shift[1, 32](e5(), e5(), 1.0, e5(), torch.zeros(32, device="cuda"))


def test_device_arrays_through_dlpack_to_torch() -> None:
    torch = torch_float8()
    d = ox.to_device(fc.all_patterns(f8e4m3))
    try:
        t = torch.from_dlpack(d)
    except (BufferError, IndexError, RuntimeError, TypeError) as exc:  # torch before 2.8
        pytest.skip(f"this torch reads no 8-bit floats through DLPack: {exc}")
    assert t.dtype == torch.float8_e4m3fn and t.data_ptr() == d.data_ptr
    np.testing.assert_array_equal(t.view(torch.uint8).cpu().numpy(), np.arange(256))
