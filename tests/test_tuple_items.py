"""`t[k]` of a tuple variable reads that item's slot alone (frontend/subscripts.py): a
kernel that picks items out of a 128-value accumulator, as a GEMM's epilogue does, then
compiles in linear rather than quadratic work; the values are the same."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import DisjointSlice, Slice, f32, thread


@ox.kernel
def picks(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        t = (x[i], 2.0 * x[i], 3.0 * x[i], (4.0 * x[i], 5.0 * x[i]))
        t = (t[1], t[0], t[2], t[3])  # reassigned through its own items
        out[i] = t[0] - t[1] + t[3][1] + t[-2]


def _slot_reads(kernel, *sig) -> int:
    return str(kernel.compile(*sig).ir).count("oxide.slot_read")


def test_items_read_one_slot_each_and_keep_their_values() -> None:
    x = np.arange(1, 65, dtype=np.float32)
    out = np.zeros_like(x)
    with ox.device("cpu"):
        picks[ox.LaunchConfig.for_num_elems(x.size)](x, out)
    np.testing.assert_array_equal(out, 2 * x - x + 5 * x + 3 * x)
    # the items' slots: 5 to rebuild t (t[3] is a pair), 5 for the output (t[3][1]
    # reads the pair); reading all of t for each of the 8 subscripts was 40
    assert _slot_reads(picks, Slice[f32], DisjointSlice[f32]) == 10
