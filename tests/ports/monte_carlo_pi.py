"""numba's Monte Carlo pi with a xoroshiro128+ generator per thread.

Written from numba's random-number example (`compute_pi` drawing pairs of uniform
floats from `xoroshiro128p_uniform_float32(states, thread_id)`), with the generator's
steps written out as `@ox.func`s, as numba's own `xoroshiro128p_next` does. The states
are seeded on the host with splitmix64 (one stream, two draws per thread). The kernel
counts, per thread, the points that fall in the quarter disc; the test replays the same
generator in NumPy and must find the same counts, bit for bit.

Floats come from the top 24 bits of each 64-bit draw, `f32(r >> 40) * 2**-24`, exact in
`f32`, and the test `x * x + y * y <= 1` needs `@ox.kernel(contract=False)` to round as
NumPy does: with contraction on, `x * x + y * y` may become one fused multiply-add, and
points within an ulp of the circle can land on the other side (docs/language.md says
so; a port must know to ask).

Friction met while porting:

- numba keeps a thread's state in one record array row, `states[index]`. The natural
  oxide port, `states: DisjointSlice[u64, 2]` written as `states[i, 0] = ...` with `i`
  the 1-D ThreadIndex, is refused: "`states` is a DisjointSlice: it can only be written
  at a ThreadIndex ... indices built from integers, not a ThreadIndex", and the hint
  suggests `thread.index_2d()`, which does not describe a per-thread row. Row `i` is the
  thread's own; a ThreadIndex followed by constant indices could be accepted.
- With the state in two `DisjointSlice[u64]` arrays, the guard `if i in out:` does not
  cover `s0s` and `s1s`: "write to DisjointSlice `s0s` is not bounds-guarded". A CUDA
  port has one guard (`if i < n`); here it becomes `if i in out and i in s0s and i in s1s`.
- The jump-ahead (numba's `xoroshiro128p_jump`, which spaces the threads' streams 2**64
  draws apart) tests bit `b` of a module-level tuple of u64 constants. As numba writes it
  with plain ints, `JUMP[w] & (1 << b)` or `(JUMP[w] >> b) & 1`, the constant meets the
  `i32` loop variable and is refused: "the literal 16109378705422636197 does not fit in
  i32" (the source spells it 0xdf900294d8f554a5), with the hint "convert explicitly with
  `i32(...)`", which cannot be right: the fix is `u64`. `JUMP[w] & (u64(1) << b)` is
  "mixing u64 and i32 ... e.g. `i64(x)`": the shift amount must match the value's
  signedness and the hint would turn the mask signed. Working: `u64(1) << u32(b)`.
- With `contract=True` (the default) the CPU count still matches NumPy, but the PTX
  fuses `x * x + y * y` into `fma.rn.f32`, so on the GPU a point on the circle's edge can
  be counted differently from NumPy: the port needs `contract=False` to be bit for bit
  on both targets, and nothing on the CPU tells a user so.
- Workarounds: two state arrays with the triple guard (`compute_pi`, numba's shape), or
  the state loaded into registers and passed through a tuple-returning `@ox.func`
  (`compute_pi_regs`, with a `RawSlice[u64, 2]` state under `ox.unsafe()`).
"""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import DisjointSlice, RawSlice, f32, i32, thread, u32, u64

# xoroshiro128+ (Blackman and Vigna, 2018 constants)
A, B, C = 24, 16, 37
MASK64 = (1 << 64) - 1


@ox.func
def rotl(x, k):
    """Rotates the u64 `x` left by `k` bits (0 < k < 64)."""
    return (x << k) | (x >> (64 - k))


@ox.func
def next_in_place(s0s, s1s, index):
    """One xoroshiro128+ step on the state stored at `index`: returns the draw."""
    s0 = s0s[index]
    s1 = s1s[index]
    result = s0 + s1
    s1 ^= s0
    s0s[index] = rotl(s0, A) ^ s1 ^ (s1 << B)
    s1s[index] = rotl(s1, C)
    return result


# xoroshiro128+'s jump polynomial (the authors' reference code): 2**64 steps at once
JUMP = (0xDF900294D8F554A5, 0x170865DF4B3201FC)


@ox.kernel
def jump(s0s: DisjointSlice[u64], s1s: DisjointSlice[u64]):
    """Advances every state by 2**64 draws (numba's `xoroshiro128p_jump`)."""
    i = thread.index_1d()
    if i in s0s and i in s1s:
        s0 = s0s[i]
        s1 = s1s[i]
        t0 = u64(0)
        t1 = u64(0)
        for w in range(2):
            for b in range(64):
                if JUMP[w] & (u64(1) << u32(b)):
                    t0 ^= s0
                    t1 ^= s1
                s1 ^= s0
                s0 = rotl(s0, A) ^ s1 ^ (s1 << B)
                s1 = rotl(s1, C)
        s0s[i] = t0
        s1s[i] = t1


def natural_jump_bit_test() -> ox.Kernel:
    """numba's bit test, `if jump[w] & (1 << b):`, with Python ints."""

    @ox.kernel
    def jump_natural(s0s: DisjointSlice[u64], s1s: DisjointSlice[u64]):
        i = thread.index_1d()
        if i in s0s and i in s1s:
            s0 = s0s[i]
            s1 = s1s[i]
            t0 = u64(0)
            t1 = u64(0)
            for w in range(2):
                for b in range(64):
                    if JUMP[w] & (1 << b):
                        t0 ^= s0
                        t1 ^= s1
                    s1 ^= s0
                    s0 = rotl(s0, A) ^ s1 ^ (s1 << B)
                    s1 = rotl(s1, C)
            s0s[i] = t0
            s1s[i] = t1

    return jump_natural


@ox.func
def uniform_f32(s0s, s1s, index):
    """A float in [0, 1) from the top 24 bits of the next draw (exact in f32)."""
    return f32(next_in_place(s0s, s1s, index) >> 40) * (1.0 / 16777216.0)


@ox.kernel(contract=False)
def compute_pi(s0s: DisjointSlice[u64], s1s: DisjointSlice[u64], iterations: i32,
               out: DisjointSlice[i32]):
    """Per thread: how many of `iterations` points fall in the quarter disc."""
    i = thread.index_1d()
    if i in out and i in s0s and i in s1s:
        inside = 0
        for _ in range(iterations):
            x = uniform_f32(s0s, s1s, i)
            y = uniform_f32(s0s, s1s, i)
            if x * x + y * y <= 1.0:
                inside += 1
        out[i] = inside


@ox.func
def next_regs(s0, s1):
    """One xoroshiro128+ step on a state held in registers: (draw, s0', s1')."""
    result = s0 + s1
    s1 ^= s0
    return result, rotl(s0, A) ^ s1 ^ (s1 << B), rotl(s1, C)


@ox.kernel(contract=False)
def compute_pi_regs(states: RawSlice[u64, 2], iterations: i32, out: DisjointSlice[i32]):
    """The same count with the state in registers, a (threads, 2) array read once and
    written back once (inside `ox.unsafe()`: see the module docstring)."""
    i = thread.index_1d()
    if i in out and i < len(states):
        with ox.unsafe():
            s0 = states[i, 0]
            s1 = states[i, 1]
        inside = 0
        for _ in range(iterations):
            rx, s0, s1 = next_regs(s0, s1)
            ry, s0, s1 = next_regs(s0, s1)
            x = f32(rx >> 40) * (1.0 / 16777216.0)
            y = f32(ry >> 40) * (1.0 / 16777216.0)
            if x * x + y * y <= 1.0:
                inside += 1
        out[i] = inside
        with ox.unsafe():
            states[i, 0] = s0
            states[i, 1] = s1


def natural_row_state() -> ox.Kernel:
    """numba's layout: each thread's state is a row of a (threads, 2) DisjointSlice."""

    @ox.func
    def next_row(states, index):
        s0 = states[index, 0]
        s1 = states[index, 1]
        result = s0 + s1
        s1 ^= s0
        states[index, 0] = rotl(s0, A) ^ s1 ^ (s1 << B)
        states[index, 1] = rotl(s1, C)
        return result

    @ox.kernel(contract=False)
    def compute_pi_rows(states: DisjointSlice[u64, 2], iterations: i32, out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i in out:
            inside = 0
            for _ in range(iterations):
                x = f32(next_row(states, i) >> 40) * (1.0 / 16777216.0)
                y = f32(next_row(states, i) >> 40) * (1.0 / 16777216.0)
                if x * x + y * y <= 1.0:
                    inside += 1
            out[i] = inside

    return compute_pi_rows


def natural_one_guard() -> ox.Kernel:
    """Two state arrays under the one guard a CUDA port has."""

    @ox.kernel(contract=False)
    def compute_pi_one_guard(s0s: DisjointSlice[u64], s1s: DisjointSlice[u64],
                             iterations: i32, out: DisjointSlice[i32]):
        i = thread.index_1d()
        if i in out:
            inside = 0
            for _ in range(iterations):
                x = uniform_f32(s0s, s1s, i)
                y = uniform_f32(s0s, s1s, i)
                if x * x + y * y <= 1.0:
                    inside += 1
            out[i] = inside

    return compute_pi_one_guard


# --- the host side and the NumPy model ---------------------------------------------------

def splitmix64(seed: int, count: int) -> np.ndarray:
    """The first `count` outputs of splitmix64 from `seed` (what numba seeds with)."""
    z = (np.uint64(seed) + np.arange(1, count + 1, dtype=np.uint64)
         * np.uint64(0x9E3779B97F4A7C15))
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def splitmix64_python(seed: int, count: int) -> list[int]:
    """splitmix64 with Python ints, to check the NumPy version against."""
    out, x = [], seed
    for _ in range(count):
        x = (x + 0x9E3779B97F4A7C15) & MASK64
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        out.append(z ^ (z >> 31))
    return out


def init_states(threads: int, seed: int) -> np.ndarray:
    """A (threads, 2) u64 array of xoroshiro128+ states."""
    return splitmix64(seed, 2 * threads).reshape(threads, 2)


def _rotl(x: np.ndarray, k: int) -> np.ndarray:
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


def reference(states: np.ndarray, iterations: int) -> tuple[np.ndarray, np.ndarray]:
    """The per-thread counts and final states, replayed in NumPy (u64 arithmetic wraps)."""
    s0, s1 = states[:, 0].copy(), states[:, 1].copy()
    inside = np.zeros(len(states), np.int32)
    scale = np.float32(1.0 / 16777216.0)

    def draw() -> np.ndarray:
        nonlocal s0, s1
        result = s0 + s1
        t = s1 ^ s0
        s0, s1 = _rotl(s0, A) ^ t ^ (t << np.uint64(B)), _rotl(t, C)
        return (result >> np.uint64(40)).astype(np.float32) * scale

    for _ in range(iterations):
        x = draw()
        y = draw()
        inside += (x * x + y * y <= np.float32(1.0)).astype(np.int32)
    return inside, np.stack([s0, s1], axis=1)


def next_python(s0: int, s1: int) -> tuple[int, int, int]:
    """One generator step with Python ints (a second, independent model)."""
    result = (s0 + s1) & MASK64
    s1 ^= s0

    def rot(x: int, k: int) -> int:
        return ((x << k) | (x >> (64 - k))) & MASK64

    return result, rot(s0, A) ^ s1 ^ ((s1 << B) & MASK64), rot(s1, C)


def jump_python(s0: int, s1: int) -> tuple[int, int]:
    """The jump with Python ints."""
    t0 = t1 = 0
    for word in JUMP:
        for b in range(64):
            if word >> b & 1:
                t0 ^= s0
                t1 ^= s1
            _, s0, s1 = next_python(s0, s1)
    return t0, t1


def run_jump(states: np.ndarray) -> np.ndarray:
    """Launches `jump` on a copy of `states`."""
    s0, s1 = states[:, 0].copy(), states[:, 1].copy()
    jump[-(-len(states) // 64), 64](s0, s1)
    return np.stack([s0, s1], axis=1)


def run(states: np.ndarray, iterations: int, block: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Launches `compute_pi`: the per-thread counts and the states it leaves."""
    threads = len(states)
    s0, s1 = states[:, 0].copy(), states[:, 1].copy()
    out = np.zeros(threads, np.int32)
    compute_pi[-(-threads // block), block](s0, s1, iterations, out)
    return out, np.stack([s0, s1], axis=1)


def run_regs(states: np.ndarray, iterations: int, block: int = 64
             ) -> tuple[np.ndarray, np.ndarray]:
    """Launches `compute_pi_regs`."""
    threads = len(states)
    st = states.copy()
    out = np.zeros(threads, np.int32)
    compute_pi_regs[-(-threads // block), block](st, iterations, out)
    return out, st


def estimate(counts: np.ndarray, iterations: int) -> float:
    """pi from the per-thread counts."""
    return 4.0 * float(counts.sum()) / (len(counts) * iterations)
