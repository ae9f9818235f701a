"""Counter-based random numbers in a tile kernel: `tile.randint`, `tile.rand`,
`tile.randn` (mixed into `TileLowering`), with Triton's `tl.randint`/`tl.rand`/`tl.randn`
conventions, so the same seed and offsets give Triton's bits, on the CPU and the GPU
alike.

Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11;
Random123's `philox4x32_R` with R = 10): the counter is `(offset, 0, 0, 0)`, the offset
an integer of at most 32 bits read as `u32`; the key is the seed as a 64-bit integer
(sign-extended from a narrower signed type, as Triton's `seed.to(tl.uint64)`), low word
first. Each round multiplies counter words 0 and 2 by 0xD2511F53 and 0xCD9E8D57 and
mixes the high and low halves with the key, which then grows by 0x9E3779B9 and
0xBB67AE85 (the Weyl sequence). `randint` is the first output word (u32); `rand` maps
it to [0, 1) as Triton's `uint_to_uniform_float`: the bits read as i32 `x`, `~x` where
it is negative, times the f32 constant 4.6566127342e-10 (the largest scale that keeps
`2**31 - 1` below 1.0 after f32 rounding); `randn` is Triton's Box-Muller on the first
two words' uniforms: `sqrt(-2 log(max(u1, 1e-7))) * cos(2 pi u2)`, with `ox.math`'s
log, sqrt and cos (so its values agree with Triton's to a few ulps, not bit for bit).
Everything is integer arithmetic (and, for rand, one conversion and one product), so
the CPU and the GPU give the same bits.
"""

from __future__ import annotations

import ast
from typing import Any

from oxide import types as T
from oxide.errors import KernelTypeError
from oxide.tile.values import Static, Tile, describe

ROUND_A, ROUND_B = 0xD2511F53, 0xCD9E8D57  # Philox4x32's multipliers
KEY_A, KEY_B = 0x9E3779B9, 0xBB67AE85  # its key schedule (Weyl sequence)
ROUNDS = 10
UNIFORM_SCALE = 4.6566127342e-10  # Triton's uint_to_uniform_float for 32 bits
TWO_PI = 6.283185307179586


class TileRandomMixin:
    """`tile.randint`, `tile.rand` and `tile.randn` (see the module docstring)."""

    def call_randint(self, node: ast.Call) -> Tile:
        return self._philox_call(node, "randint")[0]

    def call_rand(self, node: ast.Call) -> Tile:
        return self.uniform(self._philox_call(node, "rand")[0])

    def call_randn(self, node: ast.Call) -> Tile:
        u1, u2 = (self.uniform(w) for w in self._philox_call(node, "randn")[:2])
        u1 = self.t.binary("max", u1, self._like(1e-7, T.f32, u1))
        log = self.t.math("log", [u1], T.f32)
        r = self.t.math("sqrt", [self.t.binary("mul", self._like(-2.0, T.f32, log), log)],
                        T.f32)
        theta = self.t.binary("mul", self._like(TWO_PI, T.f32, u2), u2)
        return self.t.binary("mul", r, self.t.math("cos", [theta], T.f32))

    def uniform(self, bits: Tile) -> Tile:
        """A u32 tile of random bits as f32 in [0, 1), as Triton maps them."""
        x = self.t.cast(bits, T.i32)  # the same bits
        negative = self.t.compare("lt", x, self._like(0, T.i32, x))
        x = self.t.where(negative, self.t.unary("invert", x), x)  # -x - 1
        f = self.t.cast(x, T.f32)
        return self.t.binary("mul", f, self._like(UNIFORM_SCALE, T.f32, f))

    def _like(self, value: int | float, dt: T.DType, like: Tile) -> Tile:
        """A constant of `like`'s shape and layout."""
        return self.t.broadcast(self.t.full((), value, dt), like.shape, like)

    def _philox_call(self, node: ast.Call, name: str) -> list[Tile]:
        """`tile.<name>(seed, offsets, n_rounds=10)`: the four Philox output words."""
        seed, offsets = self.positional(node, 2, f"tile.{name}(seed, offsets)", ("n_rounds",))
        rounds_v, rounds_node = self.keyword(node, "n_rounds")
        rounds = ROUNDS
        if rounds_v is not None:
            if not (isinstance(rounds_v, Static) and type(rounds_v.obj) is int
                    and 1 <= rounds_v.obj <= 64):
                raise self.error(KernelTypeError, rounds_node, f"n_rounds is a constant from 1 "
                                 f"to 64, not {describe(rounds_v)}", hint="Philox4x32-10: 10")
            rounds = rounds_v.obj
        k0, k1 = self._seed_words(seed, node.args[0], name)
        counter = self._counter(offsets, node.args[1], name)
        zero = self._like(0, T.u32, counter)
        return self.philox([counter, zero, zero, zero], k0, k1, rounds)

    def _seed_words(self, seed: Any, at: ast.AST, name: str) -> tuple[Tile, Tile]:
        """The key: the seed's 64 bits (sign-extended from a narrower signed type), as
        (low word, high word) 0-d u32 tiles."""
        if isinstance(seed, Static) and type(seed.obj) is int:
            if not -(2**63) <= seed.obj < 2**64:
                raise self.error(KernelTypeError, at, f"the seed {seed.obj} does not fit in 64 "
                                 "bits", hint="seeds are i64 or u64")
            bits = seed.obj % 2**64
            return (self.t.full((), bits & 0xFFFFFFFF, T.u32),
                    self.t.full((), bits >> 32, T.u32))
        if not (isinstance(seed, Tile) and seed.ndim == 0 and seed.dtype.is_int
                and not seed.dtype.is_bool):
            raise self.error(KernelTypeError, at, f"the seed of tile.{name} is an integer "
                             f"scalar, not {describe(seed)}",
                             hint="pass it as a kernel parameter (`seed: i64`) or a constant")
        wide = self.t.cast(seed, T.i64)  # NumPy's astype: signed types sign-extend
        high = self.t.binary("shr", wide, self.t.full((), 32, T.i64))
        return self.t.cast(wide, T.u32), self.t.cast(high, T.u32)

    def _counter(self, offsets: Any, at: ast.AST, name: str) -> Tile:
        """The first counter word: the offsets as u32 (the same bits for i32)."""
        t = self.as_tile(offsets, at)
        if not t.dtype.is_int or t.dtype.is_bool or t.dtype.bits > 32:
            raise self.error(KernelTypeError, at,
                             f"the offsets of tile.{name} are integers of at most 32 bits, "
                             f"not {t.describe()}",
                             hint="convert them: `.astype(i32)` (Philox4x32 counts in 32 "
                                  "bits; Triton takes 64-bit offsets to another generator)")
        return self.t.cast(t, T.u32)

    def philox(self, c: list[Tile], k0: Tile, k1: Tile, rounds: int) -> list[Tile]:
        """Philox4x32 rounds on counter words `c` (u32 tiles of one layout) with the key
        (k0, k1) (0-d u32 tiles)."""
        like = c[0]

        def op(kind: str, x: Tile, y: Tile) -> Tile:
            return self.t.binary(kind, x, y)

        a, b = self._like(ROUND_A, T.u32, like), self._like(ROUND_B, T.u32, like)
        for r in range(rounds):
            key0 = self.t.broadcast(k0, like.shape, like)
            key1 = self.t.broadcast(k1, like.shape, like)
            hi_b = self.t.math("mulhi", [b, c[2]], T.u32)
            hi_a = self.t.math("mulhi", [a, c[0]], T.u32)
            c = [op("xor", op("xor", hi_b, c[1]), key0), op("mul", c[2], b),
                 op("xor", op("xor", hi_a, c[3]), key1), op("mul", c[0], a)]
            if r + 1 < rounds:
                k0 = op("add", k0, self.t.full((), KEY_A, T.u32))
                k1 = op("add", k1, self.t.full((), KEY_B, T.u32))
        return c
