"""Issue 16 item 5: oxide launches captured into a CUDA graph and replayed (torch's graphs).

A kernel compiled and loaded before the capture (its first launch) must launch inside a
capture with nothing that breaks it: no allocation, no synchronization, no copy on another
stream. Replaying the graph then reruns the captured launches with the same arguments.
"""

from __future__ import annotations

import pytest

import oxide as ox
from oxide import DisjointSlice, Slice, f32, thread

pytestmark = pytest.mark.gpu


@ox.kernel
def add_one(x: Slice[f32], out: DisjointSlice[f32]):
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] + 1.0


def test_launches_captured_in_a_torch_graph_replay() -> None:
    torch = pytest.importorskip("torch")
    n = 1 << 20
    a = torch.zeros(n, device="cuda")
    b = torch.empty_like(a)
    cfg = ox.LaunchConfig.for_num_elems(n)
    add_one[cfg](a, b)  # compile and load outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            add_one[cfg](a, b)  # b = a + 1
            add_one[cfg](b, a)  # a = b + 1: each replay adds 2 to a
    torch.cuda.synchronize()
    start = float(a[0])
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    assert float(a[0]) == start + 6.0 and bool((a == a[0]).all())
    ox.synchronize()  # no kernel error was recorded by the replays
