"""`ox.grid`: the whole launch as one group, for a grid-wide barrier.

`ox.grid.sync()` (CUDA's `cooperative_groups::this_grid().sync()`, numba's
`cuda.cg.this_grid().sync()`) waits until every thread of every block of the launch
has reached it, and makes their earlier writes visible to every thread after it.
`ox.grid.this_grid()` returns the group itself, so numba's spelling
`g = ox.grid.this_grid(); g.sync()` works too.

A launch of a kernel that calls it is cooperative on the GPU (every block must be
resident at once; the launch checks the occupancy and raises ox.LaunchError beyond
it), and on the CPU runs each block on its own OS thread. docs/language.md
("Grid-wide sync") has the rules.
"""

from __future__ import annotations

from oxide.lang.intrinsic import Intrinsic


class GridGroup(Intrinsic):
    """`ox.grid`: `sync()` and `this_grid()`. Calling it (`ox.grid(2)`, numba's `cuda.grid`)
    in a kernel is an error whose hint names `thread.index_2d()`."""

    def __init__(self) -> None:
        super().__init__("grid", __doc__ or "")
        self.sync = Intrinsic(
            "grid.sync", "grid.sync(): a barrier for every thread of the launch; earlier "
            "writes of any thread are visible after it (a cooperative launch on the GPU).")
        self.this_grid = Intrinsic(
            "grid.this_grid", "grid.this_grid(): the launch's grid as a group; `.sync()` "
            "is `ox.grid.sync()` (numba's `cuda.cg.this_grid()`).")

    def __repr__(self) -> str:
        return "<oxide device namespace grid>"


grid = GridGroup()
