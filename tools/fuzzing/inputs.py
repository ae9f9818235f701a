"""Input vectors: edge values of every type first, then random ones."""

from __future__ import annotations

import numpy as np

from tools.fuzzing import semantics as S

_F32_EDGES = (0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 1e-45, -1e-45, 1.1754942e-38,
              1.1754944e-38, 3.4028235e38, -3.4028235e38, 0.5, -0.5, 2.5, -2.5, 0.1, 1e30,
              -1e30, 16777216.0, 16777217.0, 2147483648.0, -2147483904.0, 9.2233720e18, 255.5)
_F64_EDGES = (0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 5e-324, -5e-324, 2.2250738585072009e-308,
              2.2250738585072014e-308, 1.7976931348623157e308, -1.7976931348623157e308, 0.5,
              -0.5, 2.5, -2.5, 0.1, 1e30, -1e300, 9007199254740993.0, 9.223372036854775807e18,
              -9.223372036854775808e18, 1.8446744073709552e19, 4294967296.0, 1e-310)


_HALF_EDGES = {
    "f16": (0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 6e-08, -6e-08, 6.1e-05, 65504.0,
            -65504.0, 0.5, -0.5, 2.5, -2.5, 0.1, 2048.0, 2049.0, 1000.5, 255.5, 32768.0),
    "bf16": (0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 9.2e-41, -9.2e-41, 1.2e-38,
             3.38e38, -3.38e38, 0.5, -0.5, 2.5, -2.5, 0.1, 256.0, 257.0, 1e30, 255.5,
             2147483648.0),
}


def edges(ty: str) -> list:
    """The values every run tries first: 0, +-1, the type's limits, NaN, infinities,
    signed zeros, subnormals, values at conversion boundaries."""
    if ty == "f32":
        return list(_F32_EDGES)
    if ty == "f64":
        return list(_F64_EDGES)
    if ty in _HALF_EDGES:
        return list(_HALF_EDGES[ty])
    lo, hi = S.int_range(ty)
    vals = [0, 1, -1, 2, -2, 3, 5, 7, 8, 31, 32, 33, 63, 64, 65, lo, hi, lo + 1, hi - 1,
            hi // 2, lo // 2, 100, -100, 127, 128, 255, 256]
    return [v for v in vals if lo <= v <= hi]


def _pick(values: list, rng: np.random.Generator) -> float | int:
    """One of `values` (by index: `rng.choice` would turn big ints into floats)."""
    return values[int(rng.integers(0, len(values)))]


def random_value(ty: str, rng: np.random.Generator) -> float | int:
    r = rng.random()
    if S.is_float(ty):
        if r < 0.3:
            return float(_pick(edges(ty), rng))
        if r < 0.55:
            return float(rng.integers(-20, 20)) / float(rng.choice((1, 2, 4, 10, 3)))
        if r < 0.8:
            span = 6 if ty == "f16" else 40
            return float(rng.standard_normal() * 10.0 ** rng.integers(-span, span))
        width = S.bits(ty)
        raw = int(rng.integers(0, 2**63)) * 2 + int(rng.integers(0, 2))
        raw &= (1 << width) - 1
        return float(np.array([raw], dtype=f"u{width // 8}").view(S.NP[ty])[0])
    lo, hi = S.int_range(ty)
    if r < 0.3:
        return int(_pick(edges(ty), rng))
    if r < 0.6:
        return max(lo, min(hi, int(rng.integers(-9, 10))))
    raw = int(rng.integers(0, 2**62)) * 4 + int(rng.integers(0, 4))  # 64 random bits
    return S.wrap(raw, ty)


def input_table(ty: str, vectors: int, columns: int, rng: np.random.Generator) -> np.ndarray:
    """A (vectors, columns) array of `ty`: edge values in order, then random values."""
    e = edges(ty)
    offset = int(rng.integers(0, len(e)))
    table = np.zeros((vectors, columns), dtype=S.NP[ty])
    for v in range(vectors):
        for c in range(columns):
            cell = v * columns + c
            if cell < 2 * len(e):
                val = e[(cell + offset) % len(e)]
            else:
                val = random_value(ty, rng)
            with np.errstate(all="ignore"):
                table[v, c] = val  # f32 rounds here, as a host array would
    return table
