"""Peer access between GPUs: a kernel on one GPU reading or writing an array on another.

CUDA lets a device address another device's memory (over NVLink on the H200 hosts, else
PCIe) once peer access is enabled from the accessing context. A launch on cuda:0 with
an array on cuda:1 is an `ox.ArgumentError` unless `ox.enable_peer_access(0, 1)` (or
`ox.enable_peer_access(1, 0)`: both directions are enabled at once) ran first; then the
array's address is passed as it is, and the kernel reaches it over the link. oxide moves
no data between GPUs itself: collectives belong to NCCL (docs/multi-gpu.md).
"""

from __future__ import annotations

import threading
from typing import Any

from oxide.errors import DeviceError

_enabled: set[tuple[int, int]] = set()  # (accessing device, owning device)
_lock = threading.Lock()


def enable_peer_access(a: Any, b: Any) -> None:
    """Let kernels on GPU `a` reach arrays on GPU `b`, and the other way round.

    `a` and `b` are CUDA ordinals, "cuda:N" or `ox.device`s. A DeviceError says so where
    the two GPUs cannot reach each other.

    >>> ox.enable_peer_access(0, 1)                       # doctest: +SKIP
    >>> with ox.device(0): k[cfg](x_on_gpu0, halo_on_gpu1)  # doctest: +SKIP
    """
    from oxide.runtime import cuda_driver as cd
    from oxide.runtime.device import parse_device
    from oxide.runtime.gpu_devices import gpu_device

    da, db = parse_device(a), parse_device(b)
    if da.is_cpu or db.is_cpu:
        raise DeviceError("peer access is between two GPUs; the CPU reaches nothing there")
    if da.index == db.index:
        return
    ga, gb = gpu_device(da.index), gpu_device(db.index)
    for src, dst in ((ga, gb), (gb, ga)):
        if not cd.can_access_peer(src.handle, dst.handle):
            raise DeviceError(f"{src} cannot reach the memory of {dst} (no peer access "
                              "between them): copy the array over instead")
    with _lock:
        for src, dst in ((ga, gb), (gb, ga)):
            if (src.index, dst.index) in _enabled:
                continue
            src.enter()
            cd.enable_peer_access(dst.ctx)
            _enabled.add((src.index, dst.index))


def reaches(accessor: int, owner: int) -> bool:
    """Whether kernels on GPU `accessor` may use arrays on GPU `owner`."""
    return accessor == owner or (accessor, owner) in _enabled
