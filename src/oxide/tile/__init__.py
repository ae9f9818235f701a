"""`ox.tile`: the Tile model. A kernel says what one tile block does to whole tiles;
oxide picks the threads, layouts and shared memory (docs/language.md, "The Tile model").

>>> from oxide import tile, f32, Slice, DisjointSlice, Const
>>> @tile.kernel
... def add(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32], B: Const[int]):
...     i = tile.bid(0)
...     tile.store(c, (i,), tile.load(a, (i,), (B,)) + tile.load(b, (i,), (B,)))
"""

from __future__ import annotations

from oxide.tile.kernel import TileKernel, TileOptions, func, kernel
from oxide.tile.lang import (
    abs,
    arange,
    argmax,
    argmin,
    atomic_add,
    atomic_and,
    atomic_cas,
    atomic_max,
    atomic_min,
    atomic_or,
    atomic_xchg,
    atomic_xor,
    bid,
    broadcast_to,
    cat,
    cdiv,
    ceil,
    cos,
    cumsum,
    erf,
    exp,
    exp2,
    extract,
    floor,
    fma,
    full,
    grouped,
    grouped_bid,
    load,
    log,
    log1p,
    log2,
    max,
    maximum,
    min,
    minimum,
    mma,
    num_blocks,
    num_tiles,
    permute,
    pow,
    rand,
    randint,
    randn,
    reshape,
    rsqrt,
    sigmoid,
    sin,
    split,
    sqrt,
    store,
    sum,
    tan,
    tanh,
    tiles,
    where,
    zeros,
)

__all__ = ["TileKernel", "TileOptions", "abs", "arange", "argmax", "argmin", "atomic_add",
           "atomic_and", "atomic_cas", "atomic_max", "atomic_min", "atomic_or", "atomic_xchg",
           "atomic_xor", "bid", "broadcast_to", "cat", "cdiv", "ceil", "cos", "cumsum", "erf",
           "exp", "exp2", "extract", "floor", "fma", "full", "func", "grouped", "grouped_bid",
           "kernel", "load", "log", "log1p", "log2", "max", "maximum", "min", "minimum",
           "mma", "num_blocks", "num_tiles", "permute", "pow", "rand", "randint", "randn",
           "reshape", "rsqrt", "sigmoid", "sin", "split", "sqrt", "store", "sum", "tan",
           "tanh", "tiles", "where", "zeros"]


def __dir__() -> list[str]:
    """`dir()` lists the API (`__all__`), not the modules and typing names it is built from."""
    return sorted({*__all__, *(n for n in globals() if n.startswith("__"))})
