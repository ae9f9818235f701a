"""`ox.LaunchConfig`: grid, block and dynamic shared memory of a launch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oxide.errors import LaunchError

Dim3 = tuple[int, int, int]


def as_dim3(value: Any, what: str) -> Dim3:
    """Normalize an int or a 1-3 tuple to (x, y, z), rejecting zeros and negatives."""
    if isinstance(value, int) and not isinstance(value, bool):
        items: tuple[Any, ...] = (value,)
    elif isinstance(value, (tuple, list)) and 1 <= len(value) <= 3:
        items = tuple(value)
    else:
        raise LaunchError(f"{what} must be an int or a tuple of 1 to 3 ints, got {value!r}")
    for v in items:
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise LaunchError(f"{what} dimensions must be positive ints, got {value!r}")
    x, y, z = (tuple(items) + (1, 1))[:3]
    return (x, y, z)


@dataclass(frozen=True)
class LaunchConfig:
    """Where a kernel runs: `grid` blocks of `block` threads, plus dynamic shared memory.

    >>> LaunchConfig.for_num_elems(1000).grid
    (4, 1, 1)
    """

    grid: Any = 1
    block: Any = 1
    shared_mem_bytes: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "grid", as_dim3(self.grid, "grid"))
        object.__setattr__(self, "block", as_dim3(self.block, "block"))
        if not isinstance(self.shared_mem_bytes, int) or self.shared_mem_bytes < 0:
            raise LaunchError(f"shared_mem_bytes must be a non-negative int, "
                              f"got {self.shared_mem_bytes!r}")
        threads = self.block[0] * self.block[1] * self.block[2]
        if threads > 1024:
            raise LaunchError(f"a block has at most 1024 threads; {self.block} has {threads}")

    @classmethod
    def for_num_elems(cls, n: int, block: int = 256) -> LaunchConfig:
        """One thread per element, `block` threads per block, enough blocks to cover `n`."""
        if not isinstance(n, int) or n < 0:
            raise LaunchError(f"n must be a non-negative int, got {n!r}")
        return cls(grid=max(1, -(-n // block)), block=block)

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]
