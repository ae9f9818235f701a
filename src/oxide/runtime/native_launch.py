"""A native launch trampoline: pack a kernel's arguments and call `cuLaunchKernelEx` in one
C call, JIT-compiled from LLVM IR by llvmlite once per process.

Why: through ctypes, a call of `cuLaunchKernelEx` costs ~0.6 us of Python on a
2-core dev VM (argument conversion, a libffi call frame, the GIL) before the
driver does any work, and the launcher's shared parameter buffer needs a lock
and a `struct.pack_into` around it. This function is a builtin (METH_FASTCALL):
it reads the machine values straight from the Python objects into a parameter
array on its own stack, so it needs no lock, and calls the driver with the GIL
released. It is what makes a relaunch cost about as much as cuda.core's Cython
launch.

Call: `launch(context_address, dims, stream, *values) -> CUresult`, where
- `context_address` is a `LaunchContext` (per Launcher): the driver entry
  point, the CUfunction, the error record's device address, a coarsened
  kernel's grid.x factor, and the kind of each value;
- `dims` is `LaunchConfig.dims`: grid x y z, block x y z and the dynamic shared
  memory as seven native u32;
- `stream` is the raw CUstream;
- each value is an int (pointers, sizes, ints, bools, f16 and bf16 bit
  patterns: stored as the low bytes of a 64-bit slot), or a float for an f32
  or f64 parameter.
It returns the CUresult, or -1 when the number of values is not the context's;
a value that does not convert raises (TypeError, OverflowError) before the
driver is called.

Building it imports llvmlite (~60-100 ms the first time in a process) and JITs
~100 lines of IR (4-10 ms on an H200 host); `Launcher` asks for it only once a process has
llvmlite loaded or a launcher is hot (runtime/gpu.py). Where llvmlite or the
host target is missing, `trampoline()` returns None and launches keep the
ctypes path.
"""

from __future__ import annotations

import ctypes
import inspect
import sys
import threading
from collections.abc import Callable
from typing import Any

from oxide.runtime import native_binder

MAX_VALUES = 60  # machine values per launch through the trampoline; more keep the ctypes path
KIND_INT, KIND_F32, KIND_F64 = 0, 1, 2
_KIND_OF_FORMAT = {"f": KIND_F32, "d": KIND_F64}  # every other struct format: an int's low bytes
_METH_FASTCALL = 0x0080
_C_API = ("PyLong_AsUnsignedLongLongMask", "PyFloat_AsDouble", "PyBytes_AsString",
          "PyErr_Occurred", "PyLong_FromLong", "PyEval_SaveThread", "PyEval_RestoreThread")


class LaunchContext(ctypes.Structure):
    """What the trampoline reads of one Launcher; the offsets are fixed in `_IR`."""

    _fields_ = [
        ("launch", ctypes.c_void_p),  # 0: cuLaunchKernelEx
        ("function", ctypes.c_void_p),  # 8: CUfunction
        ("record", ctypes.c_uint64),  # 16: the error record's device address
        ("grid_x_factor", ctypes.c_uint32),  # 24: logical blocks per hardware block
        ("count", ctypes.c_uint32),  # 28: number of values
        ("kinds", ctypes.c_uint8 * MAX_VALUES),  # 32: KIND_* of each value
        ("active", ctypes.c_uint8),  # whether the launcher is active (a native binder reads it)
    ]


def value_kinds(formats: list[str]) -> list[int]:
    """The trampoline's KIND_* for each of a plan's struct formats."""
    return [_KIND_OF_FORMAT.get(f, KIND_INT) for f in formats]


def make_context(launch_address: int, function: int, record: int, grid_x_factor: int,
                 formats: list[str]) -> LaunchContext:
    kinds = value_kinds(formats)
    if len(kinds) > MAX_VALUES:
        raise ValueError(f"{len(kinds)} machine values; the trampoline takes {MAX_VALUES}")
    ctx = LaunchContext(launch_address, function, record, grid_x_factor, len(kinds))
    ctx.kinds[:len(kinds)] = kinds
    return ctx


# Slots: one 8-byte slot per value, then the error record, then a coarsened kernel's
# logical grid.x; `ptrs` is the kernelParams array; `config` is a CUlaunchConfig
# (gridDim, blockDim, sharedMemBytes, pad, hStream, attrs, numAttrs + pad: 56 bytes).
SLOTS = MAX_VALUES + 2
_DIMS_COPIED = "\n".join(
    f"  %d{k}.p = getelementptr i32, ptr %dims, i64 {k}\n"
    f"  %d{k} = load i32, ptr %d{k}.p, align 1\n"
    f"  %c{k}.p = getelementptr i32, ptr %config, i64 {k}\n"
    f"  store i32 %d{k}, ptr %c{k}.p"
    for k in range(1, 7))
_LAUNCH_IR = f"""
declare ptr @PyEval_SaveThread()
declare void @PyEval_RestoreThread(ptr)

; Launch with `n` values already in `slots`: add the hidden values (the error record, a
; coarsened kernel's logical grid.x), fill the kernelParams array `ptrs` and the
; CUlaunchConfig from `dims`, and call the driver with the GIL released.
define internal i32 @launch_values(ptr %ctx, ptr %dims, i64 %stream, ptr %slots, ptr %ptrs,
                                   i64 %n) {{
entry:
  %config = alloca [7 x i64], align 16
  %rec.p = getelementptr i8, ptr %ctx, i64 16
  %rec = load i64, ptr %rec.p
  %rslot = getelementptr i64, ptr %slots, i64 %n
  store i64 %rec, ptr %rslot
  %gx = load i32, ptr %dims, align 1
  %factor.p = getelementptr i8, ptr %ctx, i64 24
  %factor = load i32, ptr %factor.p
  %coarse = icmp ugt i32 %factor, 1
  %n1 = add i64 %n, 1
  br i1 %coarse, label %coarsen, label %pointers
coarsen:
  %gslot = getelementptr i64, ptr %slots, i64 %n1
  %gx64 = zext i32 %gx to i64
  store i64 %gx64, ptr %gslot
  %factor.w = zext i32 %factor to i64
  %sum = add i64 %gx64, %factor.w
  %sum1 = sub i64 %sum, 1
  %hw.w = udiv i64 %sum1, %factor.w
  %hw = trunc i64 %hw.w to i32
  %n2 = add i64 %n, 2
  br label %pointers
pointers:
  %grid.x = phi i32 [%gx, %entry], [%hw, %coarsen]
  %total = phi i64 [%n1, %entry], [%n2, %coarsen]
  br label %loop
loop:
  %i = phi i64 [0, %pointers], [%i.next, %body]
  %done = icmp eq i64 %i, %total
  br i1 %done, label %config.fill, label %body
body:
  %slot = getelementptr i64, ptr %slots, i64 %i
  %ptr.p = getelementptr ptr, ptr %ptrs, i64 %i
  store ptr %slot, ptr %ptr.p
  %i.next = add i64 %i, 1
  br label %loop
config.fill:
  store i32 %grid.x, ptr %config
{_DIMS_COPIED}
  %pad.p = getelementptr i32, ptr %config, i64 7
  store i32 0, ptr %pad.p
  %stream.p = getelementptr i64, ptr %config, i64 4
  store i64 %stream, ptr %stream.p
  %attrs.p = getelementptr i64, ptr %config, i64 5
  store i64 0, ptr %attrs.p
  %nattrs.p = getelementptr i64, ptr %config, i64 6
  store i64 0, ptr %nattrs.p
  %fn = load ptr, ptr %ctx
  %func.p = getelementptr i8, ptr %ctx, i64 8
  %func = load ptr, ptr %func.p
  %ts = call ptr @PyEval_SaveThread()
  %result = call i32 %fn(ptr %config, ptr %func, ptr %ptrs, ptr null)
  call void @PyEval_RestoreThread(ptr %ts)
  ret i32 %result
}}
"""
_IR = _LAUNCH_IR + f"""
declare i64 @PyLong_AsUnsignedLongLongMask(ptr)
declare double @PyFloat_AsDouble(ptr)
declare ptr @PyBytes_AsString(ptr)
declare ptr @PyErr_Occurred()
declare ptr @PyLong_FromLong(i64)

define ptr @oxide_launch(ptr %self, ptr %args, i64 %nargs) {{
entry:
  %slots = alloca [{SLOTS} x i64], align 16
  %ptrs = alloca [{SLOTS} x ptr], align 16
  %few = icmp slt i64 %nargs, 3
  br i1 %few, label %bad, label %head
head:
  %a0 = load ptr, ptr %args
  %ctx.i = call i64 @PyLong_AsUnsignedLongLongMask(ptr %a0)
  %ctx = inttoptr i64 %ctx.i to ptr
  %a1.p = getelementptr ptr, ptr %args, i64 1
  %a1 = load ptr, ptr %a1.p
  %dims = call ptr @PyBytes_AsString(ptr %a1)
  %a2.p = getelementptr ptr, ptr %args, i64 2
  %a2 = load ptr, ptr %a2.p
  %stream = call i64 @PyLong_AsUnsignedLongLongMask(ptr %a2)
  %err0 = call ptr @PyErr_Occurred()
  %failed0 = icmp ne ptr %err0, null
  br i1 %failed0, label %error, label %counted
counted:
  %count.p = getelementptr i8, ptr %ctx, i64 28
  %count32 = load i32, ptr %count.p
  %count = zext i32 %count32 to i64
  %n = sub i64 %nargs, 3
  %same = icmp eq i64 %n, %count
  br i1 %same, label %loop, label %bad
loop:
  %i = phi i64 [0, %counted], [%i.next, %stored]
  %done = icmp eq i64 %i, %n
  br i1 %done, label %tail, label %body
body:
  %j = add i64 %i, 3
  %obj.p = getelementptr ptr, ptr %args, i64 %j
  %obj = load ptr, ptr %obj.p
  %kind.off = add i64 %i, 32
  %kind.p = getelementptr i8, ptr %ctx, i64 %kind.off
  %kind = load i8, ptr %kind.p
  %slot = getelementptr i64, ptr %slots, i64 %i
  %is.int = icmp eq i8 %kind, {KIND_INT}
  br i1 %is.int, label %int, label %float
int:
  %v = call i64 @PyLong_AsUnsignedLongLongMask(ptr %obj)
  store i64 %v, ptr %slot
  br label %stored
float:
  %d = call double @PyFloat_AsDouble(ptr %obj)
  %is.f32 = icmp eq i8 %kind, {KIND_F32}
  br i1 %is.f32, label %f32, label %f64
f32:
  %f = fptrunc double %d to float
  store float %f, ptr %slot
  br label %stored
f64:
  store double %d, ptr %slot
  br label %stored
stored:
  %i.next = add i64 %i, 1
  br label %loop
tail:
  %err1 = call ptr @PyErr_Occurred()
  %failed1 = icmp ne ptr %err1, null
  br i1 %failed1, label %error, label %launch
launch:
  %result = call i32 @launch_values(ptr %ctx, ptr %dims, i64 %stream, ptr %slots, ptr %ptrs,
                                    i64 %n)
  %result.w = sext i32 %result to i64
  %out = call ptr @PyLong_FromLong(i64 %result.w)
  ret ptr %out
bad:
  %minus1 = call ptr @PyLong_FromLong(i64 -1)
  ret ptr %minus1
error:
  ret ptr null
}}
"""


class _MethodDef(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("meth", ctypes.c_void_p), ("flags", ctypes.c_int),
                ("doc", ctypes.c_char_p)]


# Until the trampoline is built, launches through ctypes count down `warmup` (binders
# of flavor "warmup", runtime/fastpath.py). Building it costs the llvmlite import
# (~60-100 ms) where the process has not loaded llvmlite yet, and saves ~1-2 us per
# launch on an H200 host: like renting skis until the rent paid would have bought
# them, it is built after about as many launches as that import costs.
WARMUP_LAUNCHES = 1 << 15
warmup = [WARMUP_LAUNCHES]

_build_lock = threading.Lock()
_built: tuple[Callable[..., int] | None, str] | None = None  # (trampoline, why not)
_keep_alive: list[Any] = []  # the engine owning the code, the PyMethodDef: for the process


def attempted() -> bool:
    """Whether the trampoline has been built, or found impossible to build."""
    return _built is not None


def trampoline_if_due() -> Callable[..., int] | None:
    """The trampoline, built now if that is cheap (llvmlite already loaded, by a compile
    or a CPU launch) or the warm-up launches are spent; else None for now."""
    if _built is not None:
        return _built[0]
    if _llvmlite_loaded() or warmup[0] <= 0:
        return trampoline()
    return None


def _llvmlite_loaded() -> bool:
    return "llvmlite.binding" in sys.modules


def unavailable_reason() -> str:
    """Why launches go through ctypes for good ("" when the trampoline is built or not
    yet attempted)."""
    return _built[1] if _built is not None else ""


def trampoline() -> Callable[..., int] | None:
    """The process's launch trampoline, built on first call; None where it cannot be."""
    global _built
    if _built is None:
        with _build_lock:
            if _built is None:
                try:
                    _built = (_build(), "")
                except Exception as exc:  # no llvmlite, no host target: launches keep ctypes
                    _built = (None, f"{type(exc).__name__}: {exc}")
                else:
                    for hook in on_built:
                        hook()
    return _built[0]


# Called once the trampoline is built (oxide/__init__.py: `ox.launch` becomes its native
# entry, `native_entry`).
on_built: list[Callable[[], None]] = []


def launch_native(kernel: Any, config: Any, args: tuple[Any, ...], stream: Any, device: Any,
                  kwargs: dict[str, Any]) -> bool:
    """`ox.launch`'s first step: launch through the kernel's native binder
    (runtime/native_binder.py), or return False. Until the trampoline is built there are
    none; building it replaces this function by the native one."""
    return False


def _build() -> Callable[..., int]:
    from oxide.codegen.llvm import _lock, binding, parse

    llvm = binding()
    for name in _C_API + native_binder.API:  # resolve against this interpreter, not a symbol search
        llvm.add_symbol(name, ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value)
    with _lock:
        target = llvm.Target.from_triple(llvm.get_process_triple())
        # -O0: ~2x faster to build (this is built at a first launch), and optimizing saves
        # ~10 ns a launch: the time goes in the C API calls, not in this code
        machine = target.create_target_machine(opt=0, codemodel="jitdefault")
        module = parse(_IR + native_binder.binder_ir(SLOTS, LaunchContext.active.offset))
        module.triple = llvm.get_process_triple()
        module.data_layout = str(machine.target_data)
        engine = llvm.create_mcjit_compiler(module, machine)
        engine.finalize_object()
        address = engine.get_function_address("oxide_launch")
        bind_address = engine.get_function_address("oxide_bind")
        try_address = engine.get_function_address("oxide_try")
        entries = (engine.get_function_address("oxide_launch_entry"),
                   engine.get_function_address("oxide_bound_entry"))
    method = _MethodDef(b"oxide_launch", address, _METH_FASTCALL,
                        b"oxide's native launch trampoline (runtime/native_launch.py)")
    bind = _MethodDef(b"oxide_bind", bind_address, _METH_FASTCALL,
                      b"a native binder (runtime/native_binder.py): launches, or returns False")
    first = _MethodDef(b"launch_native", try_address, _METH_FASTCALL,
                       b"ox.launch's first step (runtime/native_binder.py)")
    trampoline = _new_function(ctypes.addressof(method), None, None)
    names = (sys.intern("_oxide_launchers"), sys.intern("native"), type(trampoline), None)
    global launch_native, _binder_method, _entry_methods, _names
    _keep_alive.extend([engine, method, bind, first])
    _binder_method = ctypes.addressof(bind)
    _entry_methods = entries
    _names = names
    launch_native = _new_function(ctypes.addressof(first), names, None)
    return trampoline  # type: ignore[no-any-return]


_new_function = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.py_object,
                                  ctypes.py_object)(("PyCFunction_NewEx", ctypes.pythonapi))
_binder_method = 0  # the PyMethodDef of oxide_bind, once built
_entry_methods: tuple[int, int] = (0, 0)  # oxide_launch_entry's and oxide_bound_entry's code
_names: tuple[Any, ...] = ()  # what find_spec takes (runtime/native_binder.py)
_METH_KEYWORDS = 0x0002


def native_binder_function(spec_owner: tuple[Any, ...]) -> Callable[..., bool]:
    """A builtin `binder(cfg, args, stream) -> bool` over `spec_owner`, a tuple whose item 0
    is a BinderSpec's address (and whose other items keep what it points to alive).
    Only once the trampoline is built."""
    assert _binder_method, "the trampoline is built first"
    return _new_function(_binder_method, spec_owner, None)  # type: ignore[no-any-return]


def native_entry(fallback: Callable[..., Any], bound: tuple[Any, Any, Any] | None = None
                 ) -> Callable[..., Any] | None:
    """`fallback` (the Python `ox.launch`, or a `kernel[config]` launcher when `bound` is
    (kernel, config, stream)) as a builtin that launches through the kernel's native binder
    first, in one C call, and calls `fallback` with the same arguments when the binder
    declines or there is none; None until the trampoline is built. The builtin carries
    `fallback`'s name, docstring and signature."""
    if not _entry_methods[0]:
        return None
    name = fallback.__name__.encode()
    signature = inspect.signature(fallback)  # without annotations: __text_signature__ takes none
    signature = signature.replace(return_annotation=inspect.Signature.empty, parameters=[
        p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values()])
    doc = f"{fallback.__name__}{signature}\n--\n\n{inspect.getdoc(fallback) or ''}".encode()
    method = _MethodDef(name, _entry_methods[bound is not None], _METH_FASTCALL | _METH_KEYWORDS,
                        doc)
    owner = (*_names, fallback, *(bound or ()), method, name, doc)
    return _new_function(ctypes.addressof(method), owner, None)  # type: ignore[no-any-return]

