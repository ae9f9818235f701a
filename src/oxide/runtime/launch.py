"""`ox.launch` and `kernel[config](...)`: pick the device, then the CPU or GPU runtime."""

from __future__ import annotations

from typing import Any

from oxide.errors import LaunchError
from oxide.runtime.config import LaunchConfig
from oxide.runtime.device import current_device


def as_config(config: Any) -> tuple[LaunchConfig, Any]:
    """(LaunchConfig, stream) from what `kernel[...]` received."""
    if isinstance(config, LaunchConfig):
        return config, None
    if isinstance(config, tuple) and 2 <= len(config) <= 4:
        grid, block = config[0], config[1]
        stream = config[2] if len(config) > 2 else None
        shmem = config[3] if len(config) > 3 else 0
        return LaunchConfig(grid=grid, block=block, shared_mem_bytes=shmem), stream
    raise LaunchError("launch with kernel[LaunchConfig(...)], kernel[grid, block], or "
                      "kernel[grid, block, stream, shared_mem_bytes]")


def launch(kernel: Any, config: Any, *args: Any, stream: Any = None) -> None:
    """Launch `kernel` over `config` with `args` on the current device.

    >>> ox.launch(scale, ox.LaunchConfig.for_num_elems(n), x, 2.5, y)  # doctest: +SKIP
    """
    cfg, cfg_stream = as_config(config)
    dev = current_device()
    if dev.is_cpu:
        from oxide.runtime.cpu import launch_cpu

        launch_cpu(kernel, cfg, args)
    else:
        from oxide.runtime.gpu import launch_gpu

        launch_gpu(kernel, cfg, args, stream if stream is not None else cfg_stream, dev)


class BoundLaunch:
    """What `kernel[config]` returns: call it with the kernel's arguments."""

    __slots__ = ("kernel", "config")

    def __init__(self, kernel: Any, config: Any) -> None:
        self.kernel = kernel
        self.config = config

    def __call__(self, *args: Any, stream: Any = None) -> None:
        launch(self.kernel, self.config, *args, stream=stream)


def bind_launch(kernel: Any, config: Any) -> BoundLaunch:
    return BoundLaunch(kernel, config)
