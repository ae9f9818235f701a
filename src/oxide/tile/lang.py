"""The names a tile kernel calls (`tile.load`, `tile.sum`...): markers the tile frontend
recognizes by identity. Called outside a tile kernel they say so, except `cdiv`, which
is as useful on the host (a grid size) as in a kernel."""

from __future__ import annotations

from typing import Any

from oxide.errors import ArgumentError
from oxide.runtime.config import as_int


class TileFunction:
    """A tile operation; `tile/frontend.py` lowers calls to it in `@ox.tile.kernel` bodies."""

    def __init__(self, name: str, doc: str) -> None:
        self.__name__ = name
        self.__qualname__ = f"tile.{name}"
        self.__doc__ = doc

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"`tile.{self.__name__}` can only be called inside an "
                           "@ox.tile.kernel")

    def __repr__(self) -> str:
        return f"<oxide.tile.{self.__name__}>"


class _HostCdiv(TileFunction):
    def __call__(self, a: Any, b: Any) -> int:  # type: ignore[override]
        """`cdiv(a, b)` on the host: `-(-a // b)` for integers, NumPy's too (a grid size,
        often computed from an array's shape); an ArgumentError for anything else.

        >>> cdiv(10, 4)
        3
        """
        n, d = as_int(a), as_int(b)
        if n is None or d is None:
            raise ArgumentError(f"tile.cdiv takes integers, got {a!r} and {b!r}")
        if d == 0:
            raise ArgumentError("tile.cdiv: the divisor is 0")
        return -(-n // d)


def _f(name: str, doc: str) -> TileFunction:
    return TileFunction(name, doc)


bid = _f("bid", "`tile.bid(axis)`: this block's tile index along grid axis 0, 1 or 2: a "
         "TileIndex witness, unique to the block along that axis.")
num_blocks = _f("num_blocks", "`tile.num_blocks(axis)`: the grid's extent along `axis`.")
grouped = _f("grouped", "`tile.grouped(t, num_m, num_n, group)`: the (row, column) tile "
             "index of linear tile `t` in grouped order; a TileIndex pair where `t` is one "
             "(`tile.bid(0)`, a `tile.tiles` loop variable) and the sizes are the same in "
             "every block.")
tiles = _f("tiles", "`for t in tile.tiles(n):` the persistent loop, `range(tile.bid(0), n, "
           "tile.num_blocks(0))`: each t in [0, n) in exactly one block, so `t` is a "
           "TileIndex of grid axis 0.")
grouped_bid = _f("grouped_bid", "`tile.grouped_bid(num_m, num_n, group)`: this block's (row, "
                 "column) tile index in grouped order, from a 1-d grid over num_m * num_n "
                 "tiles: `group` tile rows take turns on each column, so the column's tiles "
                 "stay in L2. With sizes the same in every block, the pair together is a "
                 "TileIndex of grid axis 0.")
cdiv = _HostCdiv("cdiv", "`tile.cdiv(a, b)`: the ceiling of a / b for integers.")
num_tiles = _f("num_tiles", "`tile.num_tiles(arr, axis, size)`: tiles of `size` that cover "
               "`arr` along `axis` (`cdiv(arr.shape[axis], size)`).")
load = _f("load", "`tile.load(arr, index, shape, padding=0)`: the tile of `shape` at tile "
          "index `index` (`t[x, y] = arr[i*BM + x, j*BN + y]`); elements outside the array "
          "read `padding`.")
store = _f("store", "`tile.store(arr, index, t)`: writes tile `t` at tile index `index`; "
           "elements outside the array are dropped. A DisjointSlice is written only at an "
           "index whose TileIndex witnesses tell blocks apart, in the same dimensions in "
           "every access of it; its other items may be any integers.")
zeros = _f("zeros", "`tile.zeros(shape, dtype=f32)`")
full = _f("full", "`tile.full(shape, value, dtype=None)`")
arange = _f("arange", "`tile.arange(n, dtype=i32)`: 0, 1, ..., n - 1 (n a power of two).")
exp = _f("exp", "`tile.exp(x)`, elementwise (floats)")
exp2 = _f("exp2", "`tile.exp2(x, flush_to_zero=False)`: 2 ** x, elementwise (floats); with "
         "`flush_to_zero=True` a result below the smallest normal float (2^-126 in f32) is "
         "0, one `ex2.approx.ftz` instruction on the GPU (cuTile's keyword; Triton's "
         "`tl.exp2` always flushes)")
log = _f("log", "`tile.log(x)`, elementwise (floats)")
sqrt = _f("sqrt", "`tile.sqrt(x)`, elementwise (floats)")
rsqrt = _f("rsqrt", "`tile.rsqrt(x)`: 1 / sqrt(x), elementwise (floats)")
tanh = _f("tanh", "`tile.tanh(x)`, elementwise (floats)")
abs = _f("abs", "`tile.abs(x)`: elementwise magnitude (floats and integers; integers "  # noqa: A001
        "wrap, so abs(MIN) is MIN)")
log2 = _f("log2", "`tile.log2(x)`, elementwise (floats)")
log1p = _f("log1p", "`tile.log1p(x)`: log(1 + x), accurate near 0, elementwise (floats)")
sin = _f("sin", "`tile.sin(x)`, elementwise (floats)")
cos = _f("cos", "`tile.cos(x)`, elementwise (floats)")
tan = _f("tan", "`tile.tan(x)`, elementwise (floats)")
erf = _f("erf", "`tile.erf(x)`, elementwise (floats)")
floor = _f("floor", "`tile.floor(x)`: rounded down, elementwise (floats; same dtype)")
ceil = _f("ceil", "`tile.ceil(x)`: rounded up, elementwise (floats; same dtype)")
sigmoid = _f("sigmoid", "`tile.sigmoid(x)`: 1 / (1 + exp(-x)), elementwise (floats)")
pow = _f("pow", "`tile.pow(x, y)`: x ** y, elementwise with broadcasting (floats)")  # noqa: A001
fma = _f("fma", "`tile.fma(a, b, c)`: a * b + c rounded once, elementwise with broadcasting "
         "(floats)")
maximum = _f("maximum", "`tile.maximum(a, b)`, elementwise with broadcasting")
minimum = _f("minimum", "`tile.minimum(a, b)`, elementwise with broadcasting")
where = _f("where", "`tile.where(cond, a, b)`, elementwise with broadcasting")
sum = _f("sum", "`tile.sum(x, axis=None, keepdims=False)`")  # noqa: A001 - cuTile's name
max = _f("max", "`tile.max(x, axis=None, keepdims=False)`")  # noqa: A001
min = _f("min", "`tile.min(x, axis=None, keepdims=False)`")  # noqa: A001
broadcast_to = _f("broadcast_to", "`tile.broadcast_to(x, shape)`")
argmax = _f("argmax", "`tile.argmax(x, axis=None, keepdims=False)`: the index (i32) of the "
            "first maximum")
argmin = _f("argmin", "`tile.argmin(x, axis=None, keepdims=False)`: the index (i32) of the "
            "first minimum")
cumsum = _f("cumsum", "`tile.cumsum(x, axis=0)`: inclusive prefix sums along `axis`")
reshape = _f("reshape", "`tile.reshape(x, shape)`: the same elements in row-major order")
permute = _f("permute", "`tile.permute(x, axes)`: dimensions reordered (`(1, 0)` transposes)")
extract = _f("extract", "`tile.extract(x, index, shape)` (or `x.extract(index, shape)`): "
              "cuTile's sub-tile: `x` cut into tiles of `shape`, the one at tile index "
              "`index` (constants, or 0-d integers taken modulo the count)")
split = _f("split", "`tile.split(x, sections, axis=0)`: as np.split, `sections` equal parts "
           "or a tuple of split points; every part a power of two long. A tuple of tiles.")
cat = _f("cat", "`tile.cat(tiles, axis=0)`: as np.concatenate; the result's extent along "
         "`axis` is a power of two")
randint = _f("randint", "`tile.randint(seed, offsets, n_rounds=10)`: Philox4x32-10 random "
             "bits (u32), one per offset, as Triton's tl.randint")
rand = _f("rand", "`tile.rand(seed, offsets, n_rounds=10)`: uniform f32 in [0, 1), one per "
          "offset, as Triton's tl.rand (the same bits)")
randn = _f("randn", "`tile.randn(seed, offsets, n_rounds=10)`: standard normal f32, one per "
           "offset, as Triton's tl.randn (Box-Muller)")
atomic_add = _f("atomic_add", "`tile.atomic_add(arr, index, value, sem=\"acq_rel\", "
                 "scope=\"device\")`: adds the tile (or scalar) `value` to the tile of "
                 "AtomicSlice `arr` at `index`, atomically per element; the old values")
atomic_max = _f("atomic_max", "`tile.atomic_max(arr, index, value)`: as atomic_add, the "
                "maximum; the old values")
atomic_min = _f("atomic_min", "`tile.atomic_min(arr, index, value)`: as atomic_add, the "
                "minimum; the old values")
atomic_xchg = _f("atomic_xchg", "`tile.atomic_xchg(arr, index, value)`: stores `value`, "
                 "atomically per element; the old values")
atomic_cas = _f("atomic_cas", "`tile.atomic_cas(arr, index, compare, value)`: stores "
                "`value` where the element equals `compare`, atomically; the old values")
atomic_and = _f("atomic_and", "`tile.atomic_and(arr, index, value)`: bitwise and, atomically "
                "per element; the old values")
atomic_or = _f("atomic_or", "`tile.atomic_or(arr, index, value)`: bitwise or, atomically per "
               "element; the old values")
atomic_xor = _f("atomic_xor", "`tile.atomic_xor(arr, index, value)`: bitwise xor, atomically "
                "per element; the old values")
mma = _f("mma", "`tile.mma(a, b, acc)`: `a @ b + acc` for `a` (M, K) and `b` (K, N) of one "
         "float dtype and `acc` (M, N) in the type they accumulate in (f32 for bf16, f16 and "
         "f32; f64 for f64). bf16/f16 run on tensor cores (mma.sync); f32 is exact f32, "
         "never TF32.")

FUNCTIONS = (bid, grouped_bid, grouped, tiles, num_blocks, cdiv, num_tiles, load, store, zeros,
             full, arange, exp, exp2, log, sqrt, rsqrt, tanh, abs, log2, log1p, sin, cos, tan,
             erf, floor, ceil, sigmoid, pow, fma, maximum, minimum, where, sum, max, min,
             broadcast_to, argmax, argmin, cumsum, reshape, permute, extract, split, cat,
             randint, rand, randn, atomic_add, atomic_max, atomic_min, atomic_xchg,
             atomic_cas, atomic_and, atomic_or, atomic_xor, mma)
NOT_BUILT: set[str] = set()
