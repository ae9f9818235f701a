"""oxide's own per-launch cost, measured without a GPU.

Runs anywhere: the CUDA driver is the fake of tests/fake_cuda.py with
`cuLaunchKernelEx` replaced by a native function that returns at once (JIT-
compiled here), and the arrays are a stand-in for torch CUDA tensors (same
attribute API: `data_ptr()`, `shape`, `stride()`, `dtype`, `is_cuda`,
`is_contiguous()`; `torch._C._cuda_getCurrentRawStream`). What is left is what
oxide adds on top of the driver's own work, the call into the driver included:
the figure the "<= 1.0x a raw cuda.core launch" goal (issue 29) is about. Each row
is measured three times: through native binders (runtime/native_binder.py, one C
call from `ox.launch` to the driver), through the Python binders of
runtime/fastpath.py launching through the native trampoline (runtime/
native_launch.py; what a launch a native binder declines costs), and through
ctypes (before the trampoline is built, or without llvmlite).

On an H200 host on 2026-12-02, a raw cuda.core launch cost 4.6-5.3 us; those
hosts run this Python 2-3x slower than a 2-core dev VM.

    python benchmarks/launch_path.py [--calls N] [--rounds R]

Prints microseconds per call, the best of R rounds of N calls, for each path.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import tempfile
import timeit
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # fake_cuda


# ---------------------------------------------------------------------------


class _Patch:
    """The part of pytest's monkeypatch that FakeDriver.install uses."""

    def setattr(self, target: object, name: str, value: object, raising: bool = True) -> None:
        setattr(target, name, value)


def _native_noop() -> tuple[int, object]:
    """(address, owner) of `int noop(void*, void*, void*, void*) { return 0; }`: a
    cuLaunchKernelEx that returns at once."""
    from oxide.codegen.llvm import binding

    llvm = binding()
    module = llvm.parse_assembly("define i32 @noop(ptr %a, ptr %b, ptr %c, ptr %d) {\n"
                                 "  ret i32 0\n}\n")
    target = llvm.Target.from_triple(llvm.get_process_triple())
    engine = llvm.create_mcjit_compiler(module, target.create_target_machine())
    engine.finalize_object()
    return engine.get_function_address("noop"), engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=101)
    opts = parser.parse_args()

    from fake_cuda import FakeDriver, Tensor, fake_torch

    sys.modules["torch"] = fake_torch()
    os.environ.setdefault("OXIDE_CACHE_DIR", tempfile.mkdtemp(prefix="oxide-bench-cache-"))

    import oxide as ox
    from oxide import DisjointSlice, Slice, f32, thread
    from oxide.runtime import cuda_driver, native_launch
    from oxide.runtime.gpu import no_binder
    driver = FakeDriver()
    driver.install(_Patch())

    @ox.kernel
    def empty(x: Slice[f32]):
        thread.index_1d()

    @ox.kernel
    def scale(x: Slice[f32], a: f32, out: DisjointSlice[f32]):
        i = thread.index_1d()
        if i in out:
            out[i] = x[i] * a

    ox.set_device(0)
    t = Tensor(0x10000, (1024,))
    u = Tensor(0x20000, (1024,))
    cfg = ox.LaunchConfig(grid=1, block=32)
    driver.formats = "Qq"
    ox.launch(empty, cfg, t)  # compile and load once, through the fake's checking launch
    driver.formats = "QqfQq"
    ox.launch(scale, cfg, t, 2.0, u)
    noop, _engine = _native_noop()
    ctypes_noop = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.c_void_p, ctypes.c_void_p)(noop)
    trampoline = native_launch.trampoline()
    cuda_driver.launch_address = lambda: noop

    def use(flavor: str) -> None:
        """Launch through `flavor` with the no-op driver: fresh binders, made on the next
        launch. "native": native binders (runtime/native_binder.py) before the Python
        ones; "python": the Python binders launching through the trampoline; "ctypes":
        the Python binders launching through ctypes."""
        native_launch._built = (trampoline, "") if flavor != "ctypes" else (None, "measured")
        for kernel in (empty, scale):
            launchers = kernel.__dict__["_oxide_launchers"]
            for launcher in launchers.values():
                launcher.launch_ex = ctypes_noop
                launcher.native = None
                if flavor != "ctypes":
                    launcher.attach_native()
            launchers.fast.clear()
            launchers.last = no_binder
            launchers.native = None
        ox.launch(empty, cfg, t)
        ox.launch(scale, cfg, t, 2.0, u)
        launchers = empty.__dict__["_oxide_launchers"]
        assert launchers.last.flavor == ("ctypes" if flavor == "ctypes" else "native")
        assert (launchers.native is not None) == (flavor != "ctypes")
        if flavor == "python":  # set aside: it stays so while the Python binder launches
            for kernel in (empty, scale):
                kernel.__dict__["_oxide_launchers"].native = None

    def per_call(fn) -> float:
        timer = timeit.Timer(fn)
        return min(timer.repeat(opts.rounds, opts.calls)) / opts.calls * 1e6

    nothing = per_call(lambda: None)
    rows = [
        ("ox.launch(empty, cfg, t)", lambda: ox.launch(empty, cfg, t)),
        ("empty[cfg](t)", lambda: empty[cfg](t)),
        ("empty[1, 32](t)", lambda: empty[1, 32](t)),
        ("ox.launch(empty, LaunchConfig(grid=1, block=32), t)",
         lambda: ox.launch(empty, ox.LaunchConfig(grid=1, block=32), t)),
        ("ox.launch(scale, cfg, t, 2.0, u)  (3 params, aliasing)",
         lambda: ox.launch(scale, cfg, t, 2.0, u)),
        ("scale[cfg](t, 2.0, u)", lambda: scale[cfg](t, 2.0, u)),
    ]
    print(f"oxide per-launch cost in us, fake driver with a no-op native cuLaunchKernelEx, "
          f"best of {opts.rounds} x {opts.calls} calls, Python {sys.version.split()[0]}")
    flavors = ("native", "python", "ctypes")
    print(f"  {'':<56} " + " ".join(f"{f:>7}" for f in flavors))
    figures: dict[str, list[float]] = {name: [] for name, _ in rows}
    for flavor in flavors:
        use(flavor)
        for name, fn in rows:
            figures[name].append(per_call(fn) - nothing)
    for name, us in figures.items():
        print(f"  {name:<56} " + " ".join(f"{x:7.2f}" for x in us))
    use("python")  # where `empty[cfg](t)` went before native binders: the parts alone
    from oxide.runtime.device import parse_device

    dev = parse_device(0)
    binder = empty.__dict__["_oxide_launchers"].last
    launcher = binder.launcher
    bound = empty[cfg]
    parts = [("  the bound launch alone: bound(t)", lambda: bound(t)),
             ("  its binder alone: binder(cfg, (t,), None, dev)",
              lambda: binder(cfg, (t,), None, dev)),
             ("  the trampoline alone (no-op driver)",
              lambda: launcher.native(launcher.native_address, cfg.dims, 0, 0x10000, 1024)),
             ("  empty[cfg] alone", lambda: empty[cfg])]
    for name, fn in parts:
        print(f"  {name:<56} {per_call(fn) - nothing:7.2f}")
    for name, fn in [("LaunchConfig(grid=1, block=32) alone",
                      lambda: ox.LaunchConfig(grid=1, block=32)),
                     ("LaunchConfig(grid=(4, 2), block=(16, 16)) alone",
                      lambda: ox.LaunchConfig(grid=(4, 2), block=(16, 16)))]:
        print(f"  {name:<56} {per_call(fn) - nothing:7.2f}")


if __name__ == "__main__":
    main()
