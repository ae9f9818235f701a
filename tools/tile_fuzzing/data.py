"""Input arrays for a program: views into larger buffers of mostly tame values with a
sprinkling of edge values (signed zeros, infinities, NaN, the ends of i32)."""

from __future__ import annotations

import numpy as np

from tools.tile_fuzzing import rules as R
from tools.tile_fuzzing.program import Program

SPECIAL = {"f32": (0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e-40, 3e38),
           "f16": (0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 6e-8),
           "i32": (0, -1, 1, 2**31 - 1, -(2**31))}
SPECIAL_RATE = 0.02


def values(dt: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Random `dt` values: small integers (sums of them are exact), normals of a few
    scales, and rare edge values; i32 also takes its whole range."""
    pick = rng.random(shape)
    if R.is_float(dt):
        scale = float(rng.choice((1.0, 8.0, 100.0)))
        wide = np.where(pick < 0.4, rng.integers(-8, 9, shape).astype(np.float64),
                        rng.standard_normal(shape) * scale)
    else:
        wide = np.where(pick < 0.7, rng.integers(-100, 101, shape),
                        rng.integers(-(2**31), 2**31, shape))
    special = np.array(SPECIAL[dt], np.float64 if R.is_float(dt) else np.int64)
    wide = np.where(rng.random(shape) < SPECIAL_RATE, rng.choice(special, shape), wide)
    return wide.astype(R.NP[dt])


def sentinel(dt: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Random bit patterns: what the output buffer holds before the launch."""
    width = np.dtype(R.NP[dt]).itemsize * 8
    raw = rng.integers(0, 2**width, shape, dtype=np.uint64).astype(f"u{width // 8}")
    return raw.view(R.NP[dt])


def view(buffer: np.ndarray, shape: tuple[int, ...], offset: tuple[int, ...]) -> np.ndarray:
    if not shape:  # a 0-d array (`buffer[()]` would be a NumPy scalar, not an array)
        return buffer[...]
    return buffer[tuple(slice(o, o + n) for o, n in zip(offset, shape, strict=True))]


def make_arrays(p: Program) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """(input views by name, the output's buffer, its view) for program `p`."""
    rng = np.random.default_rng([p.seed & 0xFFFFFFFF, p.index])
    inputs = {x.name: view(values(x.dtype, x.buffer, rng), x.shape, x.offset)
              for x in p.inputs}
    if p.kloop is not None:  # small integers: the loop's sums are exact (program.KLoop)
        from oxide import bf16

        small = np.random.default_rng([p.seed & 0xFFFFFFFF, p.index, 3])
        dtype = bf16.numpy if p.kloop.dtype == "bf16" else R.NP[p.kloop.dtype]
        for name, shape in p.kloop.arrays.items():
            inputs[name] = small.integers(-3, 4, shape).astype(dtype)
    out = sentinel(p.out_dtype, p.out_buffer, rng)
    if p.out_atomic:  # the values the atomics add to
        view(out, p.out_shape, p.out_offset)[...] = start_values(
            p.out_dtype, p.out_shape, np.random.default_rng([p.seed & 0xFFFFFFFF, p.index, 2]))
    return inputs, out, view(out, p.out_shape, p.out_offset)


def start_values(dt: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """What an atomic output starts from: `values`, with a quarter of an f32's in the
    subnormals and next to them (the atomic add flushes those, docs/language.md)."""
    out = values(dt, shape, rng)
    if dt == "f32":
        tiny = rng.integers(-300, 301, shape) * 2.0 ** -132
        out = np.where(rng.random(shape) < 0.25, tiny, out).astype(np.float32)
    return out


def make_scratch(p: Program) -> list[np.ndarray]:
    """The scratch arrays, full of random bits: a load that missed its block's store
    reads garbage, not a plausible value."""
    rng = np.random.default_rng([p.seed & 0xFFFFFFFF, p.index, 1])
    return [sentinel(s.dtype, s.shape, rng) for s in p.scratch]
