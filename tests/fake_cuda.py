"""A stand-in for `oxide.runtime.cuda_driver` that runs on any machine.

Device memory is host memory (ctypes buffers), launches are recorded with their
decoded parameters instead of run, and a test can play the kernel's part by
writing the error record. It lets the GPU runtime's host side (argument packing,
configuration checks, streams, error records, copies) be tested without a GPU.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any

from oxide.errors import DeviceError


class FakeDriver:
    """Replaces the functions of `oxide.runtime.cuda_driver` (install with `install`)."""

    CALLBACK_FAILED = 999  # launch_ex raised, called from native code
    ATTRIBUTES = {
        "COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0,
        "MAX_THREADS_PER_BLOCK": 1024, "MAX_BLOCK_DIM_X": 1024, "MAX_BLOCK_DIM_Y": 1024,
        "MAX_BLOCK_DIM_Z": 64, "MAX_GRID_DIM_X": 2**31 - 1, "MAX_GRID_DIM_Y": 65535,
        "MAX_GRID_DIM_Z": 65535, "MAX_SHARED_MEMORY_PER_BLOCK": 48 * 1024,
        "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 227 * 1024,
        "MULTIPROCESSOR_COUNT": 132, "MAX_THREADS_PER_MULTIPROCESSOR": 2048,
    }

    def __init__(self, devices: int = 1) -> None:
        self.devices = devices  # how many GPUs the fake has (contexts 0x1000 + ordinal)
        self.peer_access: list[tuple[int, int]] = []  # (current context, peer context)
        self.buffers: dict[int, Any] = {}
        self.launches: list[dict[str, Any]] = []
        self.function_attributes = {"MAX_THREADS_PER_BLOCK": 1024, "NUM_REGS": 16,
                                    "SHARED_SIZE_BYTES": 0}
        self.set_attributes: list[tuple[str, int]] = []
        self.formats: str = ""  # struct formats of the next launches' parameters
        # ... and of the hidden ones: the error record, a coarsened kernel's logical grid.x
        self.hidden_formats = "Q"
        self.on_launch: Any = None  # called with the launch record: plays the kernel
        self.ctx = 0
        self.syncs = 0
        self.copies: list[str] = []
        self.functions: dict[int, str] = {}  # handle -> kernel symbol
        self._callback: Any = None  # launch_ex as a C function (launch_address)
        self.callback_error: BaseException | None = None

    def install(self, monkeypatch: Any) -> None:
        from oxide.runtime import cuda_driver, device, gpu_devices

        for name in ("init", "device_handle", "retain_primary_context", "current_context",
                     "set_current_context", "device_attribute", "device_name", "load_module",
                     "get_function", "function_attribute", "set_function_attribute",
                     "module_global", "host_alloc_mapped", "launch_function", "launch_address",
                     "synchronize_context",
                     "synchronize_stream", "mem_alloc", "mem_free", "memcpy_htod", "memcpy_dtoh",
                     "memset_zero", "error_text", "can_access_peer", "enable_peer_access"):
            monkeypatch.setattr(cuda_driver, name, getattr(self, name))
        monkeypatch.setattr(device, "cuda_device_count", lambda: self.devices)
        monkeypatch.setattr(gpu_devices, "cuda_device_count", lambda: self.devices)
        monkeypatch.setattr(gpu_devices, "_devices", {})
        monkeypatch.setattr(gpu_devices._tls, "ctx", None, raising=False)

    # -- device and context ------------------------------------------------------------

    def init(self) -> None:
        pass

    def device_handle(self, index: int) -> int:
        return index

    def retain_primary_context(self, dev: int) -> int:
        return 0x1000 + dev

    def current_context(self) -> int:
        return self.ctx

    def set_current_context(self, ctx: int) -> None:
        self.ctx = ctx

    def can_access_peer(self, dev: int, peer: int) -> bool:
        return dev != peer

    def enable_peer_access(self, peer_ctx: int) -> None:
        self.peer_access.append((self.ctx, peer_ctx))

    def device_attribute(self, dev: int, name: str) -> int:
        return self.ATTRIBUTES[name]

    def device_name(self, dev: int) -> str:
        return "Fake H200"

    def synchronize_context(self) -> None:
        self.syncs += 1

    def synchronize_stream(self, stream: int) -> None:
        self.syncs += 1

    def error_text(self, err: Any) -> str:
        if err == self.CALLBACK_FAILED and self.callback_error is not None:
            exc, self.callback_error = self.callback_error, None
            raise exc
        return f"CUDA_ERROR_{int(err)}: fake"

    # -- modules ---------------------------------------------------------------------

    def load_module(self, image: bytes) -> int:
        assert image[:4] == b"\x7fELF", "a cubin is an ELF file"
        return 0x2000

    def get_function(self, module: int, name: str) -> int:
        handle = 0x3000 + len(self.functions)
        self.functions[handle] = name
        return handle

    def function_attribute(self, fn: Any, name: str) -> int:
        return self.function_attributes[name]

    def set_function_attribute(self, fn: Any, name: str, value: int) -> None:
        self.set_attributes.append((name, value))

    def module_global(self, module: Any, name: str) -> tuple[int, int]:
        return self.mem_alloc(64), 64

    # -- memory ----------------------------------------------------------------------

    def _buffer(self, nbytes: int) -> int:
        buf = ctypes.create_string_buffer(max(nbytes, 1))
        address = ctypes.addressof(buf)
        self.buffers[address] = buf
        return address

    def host_alloc_mapped(self, nbytes: int) -> tuple[int, int]:
        address = self._buffer(nbytes)
        return address, address

    def mem_alloc(self, nbytes: int) -> int:
        return self._buffer(nbytes)

    def mem_free(self, ptr: int) -> None:
        self.buffers.pop(ptr, None)

    def memcpy_htod(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self.copies.append("htod")
        ctypes.memmove(dst, src, nbytes)

    def memcpy_dtoh(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self.copies.append("dtoh")
        ctypes.memmove(dst, src, nbytes)

    def memset_zero(self, dst: int, nbytes: int, stream: int) -> None:
        ctypes.memset(dst, 0, nbytes)

    # -- launches --------------------------------------------------------------------

    def launch_function(self) -> Any:
        return self.launch_ex

    def launch_address(self) -> int:
        """launch_ex as a C function, for the native trampoline to call. An exception in it
        (a test's assertion, a wrong format) fails the launch with CALLBACK_FAILED and is
        re-raised by `error_text`, so that it reaches the test."""
        if self._callback is None:
            proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.c_void_p, ctypes.c_void_p)

            def launch(config: int, fn: int, params: int, extra: Any) -> int:
                try:
                    return self.launch_ex(config, fn, params, extra)
                except BaseException as exc:  # noqa: BLE001 - carried to error_text
                    self.callback_error = exc
                    return self.CALLBACK_FAILED

            self._callback = proto(launch)
        return ctypes.cast(self._callback, ctypes.c_void_p).value  # type: ignore[return-value]

    def launch_ex(self, config: int, fn: int, params: int, extra: Any) -> int:
        """cuLaunchKernelEx: decode the config struct and the parameters, record them.
        Without a current context it fails, as the driver does."""
        from oxide.runtime.cuda_driver import INVALID_CONTEXT, LAUNCH_CONFIG

        if not self.ctx:
            return INVALID_CONTEXT

        gx, gy, gz, bx, by, bz, shmem, stream, attrs, num_attrs = LAUNCH_CONFIG.unpack(
            ctypes.string_at(config, LAUNCH_CONFIG.size))
        assert (attrs, num_attrs, extra) == (0, 0, None)
        formats = self.formats + self.hidden_formats
        pointers = (ctypes.c_void_p * len(formats)).from_address(params)
        values = []
        for fmt, ptr in zip(formats, pointers, strict=True):
            size = struct.calcsize(fmt)
            values.append(struct.unpack(fmt, ctypes.string_at(ptr, size))[0])
        record = {"function": self.functions[fn], "context": self.ctx,
                  "grid": (gx, gy, gz), "block": (bx, by, bz),
                  "shmem": shmem, "stream": stream, "args": values[:len(self.formats)],
                  "error_record": values[len(self.formats)],
                  "hidden": values[len(self.formats) + 1:]}
        self.launches.append(record)
        if self.on_launch is not None:
            self.on_launch(record)
        return 0


def write_record(address: int, kind: int, site: int, dim: int, index: int, length: int) -> None:
    """Play a failing kernel: fill the error record as `oxide.report` does."""
    struct.pack_into("<iiiiqq", (ctypes.c_char * 32).from_address(address), 0, 1, kind, site,
                     dim, index, length)


def raise_device_error(*_: Any) -> None:
    raise DeviceError("synchronizing the device failed: CUDA_ERROR_ILLEGAL_ADDRESS: fake")


# ---------------------------------------------------------------------------
# A torch stand-in: CUDA tensors as oxide reads them, without torch


class dtype:  # noqa: N801 - torch's name
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"torch.{self.name}"


float32, float64, int32 = dtype("float32"), dtype("float64"), dtype("int32")
_ITEMSIZE = {"float32": 4, "float64": 8, "int32": 4}


class Size(tuple):  # type: ignore[type-arg]
    pass


class Tensor:
    """What oxide reads of a torch tensor: `data_ptr()`, `shape`, `stride()` (in elements),
    `dtype`, `get_device()`, `is_cuda`, `is_contiguous()`, `ndim`, `len()`. Pointers are plain numbers (nothing runs)."""

    def __init__(self, ptr: int, shape: tuple[int, ...], strides: tuple[int, ...] | None = None,
                 dtype: dtype = float32, device: int = 0) -> None:
        self._ptr = ptr
        self.shape = Size(shape)
        if strides is None:
            strides, acc = (), 1
            for n in reversed(shape):
                strides = (acc, *strides)
                acc *= max(n, 1)
        self._strides = tuple(strides)
        self.dtype = dtype
        self._device = device
        acc, self._contiguous = 1, True  # as torch decides it: size-1 dimensions stride anyhow
        for n, s in zip(reversed(self.shape), reversed(self._strides), strict=True):
            if n != 1 and s != acc:
                self._contiguous = False
            acc *= n

    def data_ptr(self) -> int:
        return self._ptr

    def stride(self) -> tuple[int, ...]:
        return self._strides

    def get_device(self) -> int:
        return self._device

    def is_contiguous(self) -> bool:
        return self._contiguous

    @property
    def is_cuda(self) -> bool:
        return self._device >= 0

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, self._device) if self._device >= 0 else (1, 0)

    def element_size(self) -> int:
        return _ITEMSIZE[self.dtype.name]


for _cls in (dtype, Size, Tensor):
    _cls.__module__ = "torch"


def fake_torch(current_stream: int = 0) -> Any:
    """A module to put at sys.modules["torch"]: the stream oxide asks torch for."""
    import types

    torch = types.ModuleType("torch")
    torch._C = types.SimpleNamespace(  # type: ignore[attr-defined]
        _cuda_getCurrentRawStream=lambda index: current_stream)
    torch.Tensor, torch.dtype, torch.Size = Tensor, dtype, Size  # type: ignore[attr-defined]
    torch.float32, torch.float64, torch.int32 = float32, float64, int32  # type: ignore[attr-defined]
    return torch


def use_launch_flavor(monkeypatch: Any, flavor: str) -> None:
    """Make launches go through the native trampoline ("native") or ctypes ("ctypes"), as
    after runtime/native_launch.py's trampoline was built or found impossible."""
    from oxide.runtime import native_launch

    if flavor == "native":
        assert native_launch.trampoline() is not None, "the trampoline must build here"
    else:
        monkeypatch.setattr(native_launch, "_built", (None, "the test's choice"))
