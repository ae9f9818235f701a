"""`ox.launch` and `kernel[config](...)`: pick the device, then the CPU or GPU runtime."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from oxide.errors import DeviceError, LaunchError, OxideError
from oxide.runtime import device as _device
from oxide.runtime import native_launch as _native
from oxide.runtime.config import LaunchConfig
from oxide.runtime.device import Device, _state, current_device, default_device, parse_device
from oxide.tracebacks import user_frames_only

# what launching a bundled kernel that has GPU code only says on the CPU (runtime/bundle.py)
CPU_ERROR = ("the bundle holds GPU code only: launching needs a CUDA GPU (launch inside "
             "`with ox.device(0):` on a GPU machine), or a bundle built with `--arch ...,cpu` "
             "on this kind of CPU")


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


def launch(kernel: Any, config: Any, /, *args: Any, stream: Any = None, device: Any = None,
           **kwargs: Any) -> None:
    """Launch `kernel` over `config` with `args`. Arguments may be given by parameter name
    too; `stream=` and `device=` are always the launch's own (pass kernel parameters of
    those names by position).

    `device` ("cpu", a CUDA ordinal, "cuda:N", or an `ox.device(...)` Device) runs this
    launch there; without it the launch runs on the current device (`ox.device`,
    `ox.set_device`, else GPU 0, else the CPU).

    >>> ox.launch(scale, ox.LaunchConfig.for_num_elems(n), x, 2.5, y)  # doctest: +SKIP
    >>> ox.launch(scale, cfg, x, 2.5, y, device="cpu")                 # doctest: +SKIP
    """
    try:
        # First the native binder of the kernel's last launch (runtime/native_binder.py):
        # it launches, or declines (False) anything unlike that launch.
        if _native.launch_native(kernel, config, args, stream, device, kwargs):
            return
        tuned = getattr(kernel, "autotuned_launch", None)
        if tuned is not None:  # ox.autotune: it picks the config for these arguments
            return tuned(config, args, kwargs, stream, device)
        if kwargs:
            args = _keywords(kernel, args, kwargs)
        if getattr(kernel, "is_tile", False):  # a tile kernel's launch gives its grid only
            config, cfg_stream = kernel.tile_config(config)
            if stream is None:
                stream = cfg_stream
        elif config.__class__ is not LaunchConfig:
            config, cfg_stream = as_config(config)
            if stream is None:
                stream = cfg_stream
        # First try: the binder of the kernel's last launch (runtime/fastpath.py), which
        # declines (False) anything unlike that launch, a CPU device included.
        dev = device_of_launch(args, device)
        try:
            state = kernel.__dict__
        except AttributeError:  # not a kernel: `_launch` says so
            state = {}
        launchers = state.get("_oxide_launchers")
        if launchers is None or not launchers.last(config, args, stream, dev):
            _launch(kernel, config, args, stream, dev)
    except OxideError as exc:  # the user's frames and the diagnostic (oxide/tracebacks.py)
        user_frames_only(exc)
        raise


def device_of_launch(args: tuple[Any, ...], device: Any) -> Device:
    """Where a launch of `args` runs: `device=`, else the current device (`ox.device`,
    `ox.set_device`, else GPU 0, else the CPU); with several GPUs and none made current,
    the one the arrays are on."""
    if device is not None:
        return parse_device(device)
    dev = _state.current or _device._default or default_device()
    if _device._several and _state.current is None:  # follow the arrays' GPU
        dev = _device.launch_device(args)
    return dev


def _keywords(kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """`args.keyword_args`, imported on first use (`import oxide` stays light)."""
    from oxide.runtime.args import keyword_args

    return keyword_args(kernel, args, kwargs)


def _launch(kernel: Any, config: LaunchConfig, args: tuple[Any, ...], stream: Any,
            dev: Device) -> None:
    """The launch after the last binder declined: the CPU runtime, or the GPU path
    through the kernel's other binders and the general path."""
    if not hasattr(kernel, "params"):  # not an @ox.kernel (nor a bundled one)
        name = getattr(kernel, "__name__", type(kernel).__name__)
        raise LaunchError(f"ox.launch takes an @ox.kernel; `{name}` is a "
                          f"{type(kernel).__name__} (decorate it with @ox.kernel)")
    if dev.kind == "cpu":
        _launch_cpu(kernel, config, args, stream)
        return
    (_fast_module or _fastpath()).launch(kernel, config, args, stream, dev)


def _launch_cpu(kernel: Any, cfg: LaunchConfig, args: tuple[Any, ...], stream: Any) -> None:
    if getattr(kernel, "gpu_only", False):  # a bundled kernel: no source to compile
        raise DeviceError(CPU_ERROR)
    from oxide.runtime.cpu import launch_cpu

    launch_cpu(kernel, cfg, args, stream)


def _gpu() -> Any:
    """The GPU runtime module, imported on first use (it loads the CUDA bindings)."""
    global _gpu_module
    if _gpu_module is None:
        from oxide.runtime import gpu

        _gpu_module = gpu
    return _gpu_module


def _fastpath() -> Any:
    """The GPU launch path (runtime/fastpath.py), imported on first use."""
    global _fast_module
    from oxide.runtime import fastpath

    _fast_module = fastpath
    return fastpath


_gpu_module: Any = None
_fast_module: Any = None


def synchronize(device: Any = None) -> None:
    """Wait until the device (default: the current one) has finished all launched work, then
    raise any error a kernel reported (`ox.KernelIndexError`, `ox.KernelAssertionError`)
    or the device did (`ox.DeviceError`).

    >>> ox.synchronize()  # doctest: +SKIP
    """
    try:
        dev = current_device() if device is None else parse_device(device)
        if not dev.is_cpu:
            _gpu().synchronize_device(dev.index)
    except OxideError as exc:
        user_frames_only(exc)
        raise


def bind_launch(kernel: Any, config: Any) -> Callable[..., None]:
    """What `kernel[config]` returns: a function taking the kernel's arguments (and
    `stream=`), which launches it. A bad config raises LaunchError here.

    The kernel keeps the last one made, as `(config, function)` in `_oxide_bound`, so
    `kernel[cfg](...)` with the same `cfg` object (or the same constant tuple:
    `kernel[1, 256]`) makes nothing per launch. A function, not an object with
    `__call__`: calling one is cheaper; once native binders exist (the trampoline is
    built: runtime/native_binder.py), a builtin that tries the kernel's native binder
    and calls the Python function where it declines.
    """
    last = kernel.__dict__.get("_oxide_bound")
    if last is not None and last[0] is config:
        return last[1]  # type: ignore[no-any-return]
    try:
        cfg, cfg_stream = as_config(config)
    except OxideError as exc:
        user_frames_only(exc)
        raise

    lookup = kernel.__dict__.get  # the kernel's launchers, as they are now
    native_pending = [True]

    def launch_bound(*args: Any, stream: Any = None, **kwargs: Any) -> None:
        try:  # free unless something is raised (Python 3.11's zero-cost exceptions)
            if _native.launch_native(kernel, cfg, args, cfg_stream if stream is None else stream,
                                     None, kwargs):  # as in `launch`
                return
            if kwargs:
                args = _keywords(kernel, args, kwargs)
            if stream is None:
                stream = cfg_stream
            chosen = _state.current  # as in `launch`
            dev = chosen or _device._default or default_device()
            if chosen is None and _device._several:
                dev = _device.launch_device(args)
            launchers = lookup("_oxide_launchers")
            if launchers is None or not launchers.last(cfg, args, stream, dev):
                _launch(kernel, cfg, args, stream, dev)
            if native_pending[0]:
                _use_native_entry()
        except OxideError as exc:
            user_frames_only(exc)
            raise

    def _use_native_entry() -> None:
        """Make `kernel[config]` the native entry, once the trampoline is built."""
        entry = _native.native_entry(launch_bound, (kernel, cfg, cfg_stream))
        if entry is not None:
            native_pending[0] = False
            if lookup("_oxide_bound", (None, None))[1] is launch_bound:
                kernel.__dict__["_oxide_bound"] = (config, entry)

    kernel.__dict__["_oxide_bound"] = (config, launch_bound)
    if native_pending[0]:
        _use_native_entry()
    return kernel.__dict__["_oxide_bound"][1]  # type: ignore[no-any-return]
