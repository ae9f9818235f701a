"""`TileFunctionDef`, what `@ox.tile.func` makes, apart from the tile API module.

The tile frontend recognizes a tile helper by this class when a tile kernel calls
one; it lives here, not in `tile/kernel.py` (which imports `oxide.kernel` and the
launch path), so the tile frontend imports nothing above it (docs/architecture.md,
"Layers"). `oxide.tile.kernel.TileFunctionDef` is the same class.
"""

from __future__ import annotations

from typing import Any

from oxide.kernel_types import DeviceFunction


class TileFunctionDef(DeviceFunction):
    """`@ox.tile.func`: a tile helper, inlined where a tile kernel (or another helper)
    calls it. A DeviceFunction, so the disk cache's key covers its source too."""

    is_tile_func = True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"`{self.__name__}` is an @ox.tile.func: call it from a tile kernel")

    def __repr__(self) -> str:
        return f"<oxide.tile.func {self.__name__}>"
