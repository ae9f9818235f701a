"""`ox.launch` and `kernel[config](...)`: pick the device, then the CPU or GPU runtime."""

from __future__ import annotations

from typing import Any

from oxide.errors import DeviceError, LaunchError
from oxide.runtime.config import LaunchConfig
from oxide.runtime.device import current_device, parse_device


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
        if getattr(kernel, "gpu_only", False):  # a bundled kernel: no source to compile
            from oxide.runtime.bundle import CPU_ERROR

            raise DeviceError(CPU_ERROR)
        from oxide.runtime.cpu import launch_cpu

        launch_cpu(kernel, cfg, args)
    else:
        _gpu().launch_gpu(kernel, cfg, args, stream if stream is not None else cfg_stream, dev)


def _gpu() -> Any:
    """The GPU runtime module, imported on first use (it loads the CUDA bindings)."""
    global _gpu_module
    if _gpu_module is None:
        from oxide.runtime import gpu

        _gpu_module = gpu
    return _gpu_module


_gpu_module: Any = None


def synchronize(device: Any = None) -> None:
    """Wait until the device (default: the current one) has finished all launched work, then
    raise any error a kernel reported (`ox.KernelIndexError`, `ox.KernelAssertionError`)
    or the device did (`ox.DeviceError`).

    >>> ox.synchronize()  # doctest: +SKIP
    """
    dev = current_device() if device is None else parse_device(device)
    if not dev.is_cpu:
        _gpu().synchronize_device(dev.index)


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
