"""Native binders: a relaunch like an earlier one in one C call, from `ox.launch` straight
to the driver.

Why: a binder of runtime/fastpath.py already does the least Python a safe launch
needs, but on an H200 host its bytecode (a line per check) and the Python frames in
front of it cost more than cuda.core's whole Cython launch: `k[cfg](tensor)` was
1.26x a raw cuda.core launch. A native binder does the same checks in code
JIT-compiled with the trampoline (runtime/native_launch.py builds both from
`binder_ir`): it reads a `BinderSpec` that fastpath.make_native_binder fills from the
Python binder's plan, and calls the same C API the bytecode would (`tensor.dtype`,
`.shape`, `.data_ptr()` ...) without the interpreter between.

Entry points, once the trampoline is built:
- `ox.launch` becomes a builtin (oxide/__init__.py) and `kernel[cfg]` returns one
  (launch.bind_launch): each finds the kernel's native binder
  (`kernel.__dict__["_oxide_launchers"].native`) and launches through it, or calls the
  Python function with the same arguments;
- the Python `ox.launch` and `kernel[cfg]` functions try `native_launch.launch_native`
  first (for `from oxide import launch` taken before the trampoline existed);
- the binder itself, `binder(cfg, args, stream) -> bool`.

A native binder launches and returns True, or returns False having done nothing,
and the Python path takes the launch (its binders, then the general path, which
raise the proper errors):
- when the process may launch elsewhere than GPU 0 (`device.only_gpu0`: some
  thread chose another device), `stream=` or `device=` is given, or keyword arguments;
- when the config is neither the binder's own object nor an equal LaunchConfig (same
  grid, block and shared memory, no cluster): the Python binder checks a new one;
- when any kernel error record of the device is filled (the Python path raises it);
- when an argument differs from what the binder was made for: its Python type, a
  torch tensor's dtype, device, rank, contiguity, alignment, 16-byte rows; an int out
  of its parameter's range, a float out of f32's; a `Const` of another value; arrays
  sharing bytes with a written one;
- when the driver refuses the launch (the Python path retries in the context and
  raises the driver's error);
- when anything it calls raises (cleared: the Python path meets it again).
After launching it activates the launcher (its error record is checked from then
on), as `GPUDevice.activate` does.

What gets one (fastpath.make_native_binder): a Python binder of the "native"
flavor on a process with one GPU (GPU 0, where unchosen launches go), whose kernel has
no module constants to upload, whose
arguments are all contiguous torch tensors, Python ints for integer
parameters, Python floats for f32/f64 ones, and int/bool/str `Const`s; everything
else keeps the Python binder. The Python binder stays in the kernel's tables: the
native one is its twin, made once, for the config of the launch that made it. A tile
kernel's `kernel[grid]` keeps its config and takes it; `ox.launch(kernel, grid, ...)`
makes one per launch from the grid, which the twin declines (not a LaunchConfig).

The IR reads CPython objects at two fixed places, the same in every GIL build from
3.8 on: an object's type at offset 8, and a tuple's items after its refcount, type
and size (offset 24), only after PyTuple_Size said it is a tuple.
"""

from __future__ import annotations

import ctypes

MAX_ARGS = 32  # arguments a native binder checks; kernels with more keep the Python binder
MAX_PAIRS = 64  # array pairs it tests for shared bytes
KIND_TORCH, KIND_INT, KIND_F32, KIND_F64, KIND_CONST = 1, 2, 3, 4, 5
NAMES = ("dtype", "is_cuda", "shape", "is_contiguous", "data_ptr", "dims", "cluster")


class ArgSpec(ctypes.Structure):
    """What the native binder checks of one argument (`BINDER_IR` reads it by offset)."""

    _fields_ = [
        ("kind", ctypes.c_uint8),  # KIND_*
        ("rank", ctypes.c_uint8),  # a tensor's
        ("vectors", ctypes.c_int8),  # -1, or whether its rows take 16-byte vectors (0, 1)
        ("itemsize", ctypes.c_uint8),
        ("slot", ctypes.c_uint32),  # its first machine value
        ("type", ctypes.c_void_p),  # its Python type, by identity
        ("obj", ctypes.c_void_p),  # a tensor's dtype (by identity), a Const's value (==)
        ("lo", ctypes.c_int64),  # an int's range; an f32's, as a double's bits
        ("hi", ctypes.c_int64),
    ]


class BinderSpec(ctypes.Structure):
    """One native binder's constants (`BINDER_IR` reads them by offset)."""

    _fields_ = [
        ("context", ctypes.c_void_p),  # the launcher's native_launch.LaunchContext
        ("cfg", ctypes.c_void_p),  # the config object it was made for
        ("dims", ctypes.c_void_p),  # that config's 28 bytes of dims
        ("only_gpu0", ctypes.c_void_p),  # u8*: device.only_gpu0
        ("records", ctypes.c_void_p),  # the device's RecordTable
        ("stream_fn", ctypes.c_void_p),  # the current stream's function of the index, or 0
        ("stream_arg", ctypes.c_void_p),  # the device index it takes
        ("activate", ctypes.c_void_p),  # a callable without arguments: activates the launcher
        ("none", ctypes.c_void_p),
        ("true", ctypes.c_void_p),
        ("config_type", ctypes.c_void_p),  # LaunchConfig
        ("names", ctypes.c_void_p * len(NAMES)),  # the attribute names of `NAMES`
        ("nargs", ctypes.c_uint32),
        ("npairs", ctypes.c_uint32),
        ("pairs", ctypes.c_uint8 * (2 * MAX_PAIRS)),  # (i, j): arrays that must not overlap
        ("args", ArgSpec * MAX_ARGS),
    ]


class RecordTable(ctypes.Structure):
    """The addresses of the error records of a device's active launchers (GPUDevice keeps
    it beside `active_records`)."""

    _fields_ = [("count", ctypes.c_uint64), ("addresses", ctypes.c_void_p)]


def _offset(struct: type[ctypes.Structure], name: str) -> int:
    return getattr(struct, name).offset  # type: ignore[no-any-return]


_S = {name: _offset(BinderSpec, name) for name, _ in BinderSpec._fields_}
_A = {name: _offset(ArgSpec, name) for name, _ in ArgSpec._fields_}
_ARG_SIZE = ctypes.sizeof(ArgSpec)
API = ("PyObject_GetAttr", "PyObject_VectorcallMethod", "PyObject_CallOneArg",
       "PyObject_CallNoArgs", "PyLong_AsLongLong", "PyLong_AsUnsignedLongLong", "PyTuple_Size",
       "PyTuple_GetItem", "PyObject_RichCompareBool", "Py_DecRef", "PyErr_Clear",
       "PyBool_FromLong", "PyDict_Size", "PyObject_GenericGetDict", "PyDict_GetItemWithError",
       "PyCFunction_GetSelf", "PyObject_Vectorcall", "Py_IncRef")


def _field(name: str, ty: str, base: str = "%spec", table: dict[str, int] = _S) -> str:
    """`%name = load ty` of a spec field."""
    return (f"  %{name}.p = getelementptr i8, ptr {base}, i64 {table[name]}\n"
            f"  %{name} = load {ty}, ptr %{name}.p\n")


_NAME_LOADS = "".join(
    f"  %name.{n}.p = getelementptr i8, ptr %spec, i64 {_S['names'] + 8 * k}\n"
    f"  %name.{n} = load ptr, ptr %name.{n}.p\n" for k, n in enumerate(NAMES))



def _borrowed(v: str, call: str, on_error: str = "fail") -> str:
    """IR lines: `%v = call` (a new reference) released at once, the object it came from
    keeping it (an attribute of a tensor, a config or a kernel's launchers); on null, to
    `on_error`, then on to block `v.got`."""
    return (f"  %{v} = {call}\n"
            f"  %{v}.null = icmp eq ptr %{v}, null\n"
            f"  br i1 %{v}.null, label %{on_error}, label %{v}.got\n"
            f"{v}.got:\n"
            f"  call void @Py_DecRef(ptr %{v})\n")



def _unsigned(v: str, call: str, then: str) -> str:
    """IR lines: `%v.u64`, the u64 value of the int `call` returns (a new reference,
    released); on null or a conversion error, to `fail`, else on to block `then`."""
    return (f"  %{v} = {call}\n"
            f"  %{v}.null = icmp eq ptr %{v}, null\n"
            f"  br i1 %{v}.null, label %fail, label %{v}.got\n"
            f"{v}.got:\n"
            f"  %{v}.u64 = call i64 @PyLong_AsUnsignedLongLong(ptr %{v})\n"
            f"  call void @Py_DecRef(ptr %{v})\n"
            f"  %{v}.err = call ptr @PyErr_Occurred()\n"
            f"  %{v}.failed = icmp ne ptr %{v}.err, null\n"
            f"  br i1 %{v}.failed, label %fail, label %{then}\n")

# A torch tensor `%a` against ArgSpec `%as`: its pointer, then its sizes, from `%slot` on;
# its byte range in %lo/%hi[i], for the aliasing test.
_TENSOR = f"""
torch:
{_borrowed("dt", "call ptr @PyObject_GetAttr(ptr %a, ptr %name.dtype)")}  %dtype.p = getelementptr i8, ptr %as, i64 16
  %dtype = load ptr, ptr %dtype.p
  %dt.same = icmp eq ptr %dt, %dtype
  br i1 %dt.same, label %cuda, label %decline
cuda:
{_borrowed("cu", "call ptr @PyObject_GetAttr(ptr %a, ptr %name.is_cuda)")}  %cu.true = icmp eq ptr %cu, %true
  br i1 %cu.true, label %rank.test, label %decline
rank.test:  ; the sizes from `tensor.shape` (a rank-1 tensor too: torch's `len(tensor)` is
  ; Python code, ~375 ns from C against ~85 for the torch.Size)
  %rank.p = getelementptr i8, ptr %as, i64 1
  %rank8 = load i8, ptr %rank.p
  %rank = zext i8 %rank8 to i64
  br label %shape
shape:
  %sh = call ptr @PyObject_GetAttr(ptr %a, ptr %name.shape)
  %sh.null = icmp eq ptr %sh, null
  br i1 %sh.null, label %fail, label %sh.got
sh.got:
  %len = call i64 @PyTuple_Size(ptr %sh)
  %rank.same = icmp eq i64 %len, %rank
  store i64 1, ptr %numel
  store i64 1, ptr %last  ; a 0-d tensor's "row" of one element: no 16-byte rows, as fits_vectors
  store i64 0, ptr %d
  br i1 %rank.same, label %dim.loop, label %sh.bad
dim.loop:
  %dk = load i64, ptr %d
  %dims.done = icmp eq i64 %dk, %rank
  br i1 %dims.done, label %dims.end, label %dim.body
dim.body:
  %item.ix = add i64 %dk, 3
  %item.pp = getelementptr ptr, ptr %sh, i64 %item.ix
  %item = load ptr, ptr %item.pp
  %size = call i64 @PyLong_AsLongLong(ptr %item)
  %dslot.i = add i64 %slot, 1
  %dslot.j = add i64 %dslot.i, %dk
  %dslot = getelementptr i64, ptr %slots, i64 %dslot.j
  store i64 %size, ptr %dslot
  %nm = load i64, ptr %numel
  %nm.next = mul i64 %nm, %size
  store i64 %nm.next, ptr %numel
  store i64 %size, ptr %last
  %dk.next = add i64 %dk, 1
  store i64 %dk.next, ptr %d
  br label %dim.loop
sh.bad:
  call void @Py_DecRef(ptr %sh)
  br label %fail
dims.end:
  call void @Py_DecRef(ptr %sh)
  %sh.err = call ptr @PyErr_Occurred()
  %sh.failed = icmp ne ptr %sh.err, null
  br i1 %sh.failed, label %fail, label %contig
contig:
  store ptr %a, ptr %vec
  %ct = call ptr @PyObject_VectorcallMethod(ptr %name.is_contiguous, ptr %vec, i64 1, ptr null)
  %ct.null = icmp eq ptr %ct, null
  br i1 %ct.null, label %fail, label %ct.got
ct.got:
  call void @Py_DecRef(ptr %ct)
  %ct.true = icmp eq ptr %ct, %true
  br i1 %ct.true, label %pointer, label %decline
pointer:
{_unsigned("pt", "call ptr @PyObject_VectorcallMethod(ptr %name.data_ptr, ptr %vec, i64 1, ptr null)", "pt.ok")}\
pt.ok:
  %ptr = add i64 %pt.u64, 0
  %pslot = getelementptr i64, ptr %slots, i64 %slot
  store i64 %ptr, ptr %pslot
  %item.p = getelementptr i8, ptr %as, i64 {_A["itemsize"]}
  %item8 = load i8, ptr %item.p
  %itemsize = zext i8 %item8 to i64
  %mask = sub i64 %itemsize, 1
  %misaligned = and i64 %ptr, %mask
  %aligned = icmp eq i64 %misaligned, 0
  br i1 %aligned, label %vectors, label %decline
vectors:
  %vec.p = getelementptr i8, ptr %as, i64 2
  %want = load i8, ptr %vec.p
  %any = icmp slt i8 %want, 0
  br i1 %any, label %range, label %rows
rows:
  %lastn = load i64, ptr %last
  %row = mul i64 %lastn, %itemsize
  %either = or i64 %ptr, %row
  %low = and i64 %either, 15
  %fits = icmp eq i64 %low, 0
  %fits8 = zext i1 %fits to i8
  %fits.same = icmp eq i8 %fits8, %want
  br i1 %fits.same, label %range, label %decline
range:
  %nm.all = load i64, ptr %numel
  %bytes = mul i64 %nm.all, %itemsize
  %end = add i64 %ptr, %bytes
  %lo.p = getelementptr i64, ptr %lo, i64 %i
  store i64 %ptr, ptr %lo.p
  %hi.p = getelementptr i64, ptr %hi, i64 %i
  store i64 %end, ptr %hi.p
  br label %next
"""

_DECLARATIONS = """
declare ptr @PyObject_GetAttr(ptr, ptr)
declare ptr @PyObject_VectorcallMethod(ptr, ptr, i64, ptr)
declare ptr @PyObject_CallOneArg(ptr, ptr)
declare ptr @PyObject_CallNoArgs(ptr)
declare i64 @PyLong_AsLongLong(ptr)
declare i64 @PyLong_AsUnsignedLongLong(ptr)
declare i64 @PyTuple_Size(ptr)
declare ptr @PyTuple_GetItem(ptr, i64)
declare i32 @PyObject_RichCompareBool(ptr, ptr, i32)
declare void @Py_DecRef(ptr)
declare void @PyErr_Clear()
declare ptr @PyBool_FromLong(i64)
declare i64 @PyDict_Size(ptr)
declare ptr @PyObject_GenericGetDict(ptr, ptr)
declare ptr @PyDict_GetItemWithError(ptr, ptr)
declare ptr @PyCFunction_GetSelf(ptr)
declare ptr @PyObject_Vectorcall(ptr, ptr, i64, ptr)
declare void @Py_IncRef(ptr)
"""

# The function: `binder(cfg, args, stream) -> bool`, METH_FASTCALL, its `self` a tuple
# whose item 0 is the BinderSpec's address. Blocks, in order: the process and the call
# (only_gpu0, no stream), the config (the same object, or an equal LaunchConfig), the
# device's error records, each argument by kind, the array pairs, the stream, the launch,
# the activation. "fail" clears a raised exception and declines.
def binder_ir(slots: int, active_offset: int) -> str:
    """The IR of `oxide_bind`, for a trampoline of `slots` value slots whose LaunchContext
    keeps its `active` flag at `active_offset` (runtime/native_launch.py builds both)."""
    return _DECLARATIONS + f"""
define internal i32 @bind_core(ptr %spec, ptr %config, ptr %items, i64 %count.args,
                                ptr %stream) {{
entry:
  %slots = alloca [{slots} x i64], align 16
  %ptrs = alloca [{slots} x ptr], align 16
  %lo = alloca [{MAX_ARGS} x i64], align 16
  %hi = alloca [{MAX_ARGS} x i64], align 16
  %vec = alloca [1 x ptr], align 8
  %numel = alloca i64
  %last = alloca i64
  %d = alloca i64
  %ii = alloca i64
{_field("only_gpu0", "ptr")}{_field("none", "ptr")}{_field("true", "ptr")}{_field("cfg", "ptr")}\
{_field("dims", "ptr")}{_field("context", "ptr")}{_NAME_LOADS}\
  %gpu0 = load volatile i8, ptr %only_gpu0
  %gpu0.ok = icmp ne i8 %gpu0, 0
  %no.stream = icmp eq ptr %stream, %none
  %plain = and i1 %gpu0.ok, %no.stream
  br i1 %plain, label %config.test, label %decline
config.test:
  %same.cfg = icmp eq ptr %config, %cfg
  br i1 %same.cfg, label %errors, label %other.cfg
other.cfg:
{_field("config_type", "ptr")}\
  %cfg.type.p = getelementptr i8, ptr %config, i64 8
  %cfg.type = load ptr, ptr %cfg.type.p
  %is.config = icmp eq ptr %cfg.type, %config_type
  br i1 %is.config, label %other.dims, label %decline
other.dims:
  %cd = call ptr @PyObject_GetAttr(ptr %config, ptr %name.dims)
  %cd.null = icmp eq ptr %cd, null
  br i1 %cd.null, label %fail, label %cd.got
cd.got:
  %cd.s = call ptr @PyBytes_AsString(ptr %cd)
  call void @Py_DecRef(ptr %cd)
  %cd.s.null = icmp eq ptr %cd.s, null
  br i1 %cd.s.null, label %fail, label %cd.compare
cd.compare:
  %x0 = load i64, ptr %cd.s, align 1
  %y0 = load i64, ptr %dims, align 1
  %x1.p = getelementptr i8, ptr %cd.s, i64 8
  %x1 = load i64, ptr %x1.p, align 1
  %y1.p = getelementptr i8, ptr %dims, i64 8
  %y1 = load i64, ptr %y1.p, align 1
  %x2.p = getelementptr i8, ptr %cd.s, i64 16
  %x2 = load i64, ptr %x2.p, align 1
  %y2.p = getelementptr i8, ptr %dims, i64 16
  %y2 = load i64, ptr %y2.p, align 1
  %x3.p = getelementptr i8, ptr %cd.s, i64 24
  %x3 = load i32, ptr %x3.p, align 1
  %y3.p = getelementptr i8, ptr %dims, i64 24
  %y3 = load i32, ptr %y3.p, align 1
  %e0 = icmp eq i64 %x0, %y0
  %e1 = icmp eq i64 %x1, %y1
  %e2 = icmp eq i64 %x2, %y2
  %e3 = icmp eq i32 %x3, %y3
  %e01 = and i1 %e0, %e1
  %e23 = and i1 %e2, %e3
  %equal = and i1 %e01, %e23
  br i1 %equal, label %cluster, label %decline
cluster:
{_borrowed("cl", "call ptr @PyObject_GetAttr(ptr %config, ptr %name.cluster)")}  %cl.none = icmp eq ptr %cl, %none
  br i1 %cl.none, label %errors, label %decline
errors:
{_field("records", "ptr")}\
  %rcount = load volatile i64, ptr %records
  %raddrs.p = getelementptr i8, ptr %records, i64 8
  %raddrs = load ptr, ptr %raddrs.p
  store i64 0, ptr %ii
  br label %rec.loop
rec.loop:
  %r = load i64, ptr %ii
  %rec.done = icmp eq i64 %r, %rcount
  br i1 %rec.done, label %arguments, label %rec.body
rec.body:
  %raddr.p = getelementptr i64, ptr %raddrs, i64 %r
  %raddr = load i64, ptr %raddr.p
  %rkind.i = add i64 %raddr, 4
  %rkind.p = inttoptr i64 %rkind.i to ptr
  %rkind = load volatile i32, ptr %rkind.p
  %rfilled = icmp ne i32 %rkind, 0
  %r.next = add i64 %r, 1
  store i64 %r.next, ptr %ii
  br i1 %rfilled, label %decline, label %rec.loop
arguments:
  %n.p = getelementptr i8, ptr %spec, i64 {_S["nargs"]}
  %n32 = load i32, ptr %n.p
  %n = zext i32 %n32 to i64
  %n.same = icmp eq i64 %count.args, %n
  store i64 0, ptr %ii
  br i1 %n.same, label %arg.loop, label %fail
arg.loop:
  %i = load i64, ptr %ii
  %args.done = icmp eq i64 %i, %n
  br i1 %args.done, label %aliasing, label %arg
arg:
  %a.p = getelementptr ptr, ptr %items, i64 %i
  %a = load ptr, ptr %a.p
  %as.off = mul i64 %i, {_ARG_SIZE}
  %as.off2 = add i64 %as.off, {_S["args"]}
  %as = getelementptr i8, ptr %spec, i64 %as.off2
{_field("type", "ptr", "%as", _A)}\
  %a.type.p = getelementptr i8, ptr %a, i64 8
  %a.type = load ptr, ptr %a.type.p
  %type.same = icmp eq ptr %a.type, %type
  br i1 %type.same, label %by.kind, label %decline
by.kind:
{_field("kind", "i8", "%as", _A)}\
  %slot.p = getelementptr i8, ptr %as, i64 {_A["slot"]}
  %slot32 = load i32, ptr %slot.p
  %slot = zext i32 %slot32 to i64
  %lim.lo.p = getelementptr i8, ptr %as, i64 {_A["lo"]}
  %lim.hi.p = getelementptr i8, ptr %as, i64 {_A["hi"]}
  %vslot = getelementptr i64, ptr %slots, i64 %slot
  switch i8 %kind, label %decline [
    i8 {KIND_TORCH}, label %torch
    i8 {KIND_INT}, label %int
    i8 {KIND_F32}, label %f32
    i8 {KIND_F64}, label %f64
    i8 {KIND_CONST}, label %const
  ]
int:
  %iv = call i64 @PyLong_AsLongLong(ptr %a)
  %iv.err = call ptr @PyErr_Occurred()
  %iv.failed = icmp ne ptr %iv.err, null
  br i1 %iv.failed, label %fail, label %int.range
int.range:
  %ilo = load i64, ptr %lim.lo.p
  %ihi = load i64, ptr %lim.hi.p
  %above = icmp sge i64 %iv, %ilo
  %below = icmp sle i64 %iv, %ihi
  %inside = and i1 %above, %below
  store i64 %iv, ptr %vslot
  br i1 %inside, label %next, label %decline
f32:
  %fv = call double @PyFloat_AsDouble(ptr %a)
  %flo = load double, ptr %lim.lo.p
  %fhi = load double, ptr %lim.hi.p
  %fabove = fcmp oge double %fv, %flo
  %fbelow = fcmp ole double %fv, %fhi
  %finside = and i1 %fabove, %fbelow
  %fv32 = fptrunc double %fv to float
  store float %fv32, ptr %vslot
  br i1 %finside, label %next, label %decline
f64:
  %dv = call double @PyFloat_AsDouble(ptr %a)
  store double %dv, ptr %vslot
  br label %next
const:
{_field("obj", "ptr", "%as", _A)}\
  %eq = call i32 @PyObject_RichCompareBool(ptr %a, ptr %obj, i32 2)
  %is.eq = icmp eq i32 %eq, 1
  br i1 %is.eq, label %next, label %fail
{_TENSOR}
next:
  %i.next = add i64 %i, 1
  store i64 %i.next, ptr %ii
  br label %arg.loop
aliasing:
{_field("npairs", "i32")}\
  %np = zext i32 %npairs to i64
  %pairs = getelementptr i8, ptr %spec, i64 {_S["pairs"]}
  store i64 0, ptr %ii
  br label %pair.loop
pair.loop:
  %q = load i64, ptr %ii
  %pairs.done = icmp eq i64 %q, %np
  br i1 %pairs.done, label %stream.get, label %pair
pair:
  %q2 = mul i64 %q, 2
  %pi.p = getelementptr i8, ptr %pairs, i64 %q2
  %pi8 = load i8, ptr %pi.p
  %pi = zext i8 %pi8 to i64
  %pj.p = getelementptr i8, ptr %pi.p, i64 1
  %pj8 = load i8, ptr %pj.p
  %pj = zext i8 %pj8 to i64
  %loi.p = getelementptr i64, ptr %lo, i64 %pi
  %loi = load i64, ptr %loi.p
  %hii.p = getelementptr i64, ptr %hi, i64 %pi
  %hii = load i64, ptr %hii.p
  %loj.p = getelementptr i64, ptr %lo, i64 %pj
  %loj = load i64, ptr %loj.p
  %hij.p = getelementptr i64, ptr %hi, i64 %pj
  %hij = load i64, ptr %hij.p
  %o1 = icmp ult i64 %loi, %hij
  %o2 = icmp ult i64 %loj, %hii
  %o3 = icmp ult i64 %loi, %hii
  %o4 = icmp ult i64 %loj, %hij
  %o12 = and i1 %o1, %o2
  %o34 = and i1 %o3, %o4
  %overlap = and i1 %o12, %o34
  %q.next = add i64 %q, 1
  store i64 %q.next, ptr %ii
  br i1 %overlap, label %decline, label %pair.loop
stream.get:
{_field("stream_fn", "ptr")}\
  %default = icmp eq ptr %stream_fn, null
  br i1 %default, label %launch, label %stream.call
stream.call:
{_field("stream_arg", "ptr")}\
{_unsigned("sv", "call ptr @PyObject_CallOneArg(ptr %stream_fn, ptr %stream_arg)", "launch")}\
launch:
  %handle = phi i64 [0, %stream.get], [%sv.u64, %sv.got]
  %count.p = getelementptr i8, ptr %context, i64 28
  %count32 = load i32, ptr %count.p
  %count = zext i32 %count32 to i64
  %result = call i32 @launch_values(ptr %context, ptr %dims, i64 %handle, ptr %slots,
                                    ptr %ptrs, i64 %count)
  %launched = icmp eq i32 %result, 0
  br i1 %launched, label %active.test, label %decline
active.test:
  %active.p = getelementptr i8, ptr %context, i64 {active_offset}
  %active = load i8, ptr %active.p
  %is.active = icmp ne i8 %active, 0
  br i1 %is.active, label %done, label %do.activate
do.activate:
{_field("activate", "ptr")}\
  %act = call ptr @PyObject_CallNoArgs(ptr %activate)
  %act.null = icmp eq ptr %act, null
  br i1 %act.null, label %raised, label %act.got
act.got:
  call void @Py_DecRef(ptr %act)
  br label %done
done:
  ret i32 1
raised:
  ret i32 -1
fail:
  call void @PyErr_Clear()
  br label %decline
decline:
  ret i32 0
}}

; `bind_core` over a tuple of arguments, answered as Python wants it: True or False, or
; null where it raised. Its items follow its refcount, type and size (PyTuple_Size said
; it is a tuple). A null `spec` (no native binder) is False.
define internal ptr @bind_tuple(ptr %spec, ptr %config, ptr %argt, ptr %stream) {{
entry:
  %no.spec = icmp eq ptr %spec, null
  br i1 %no.spec, label %no, label %size
size:
  %n = call i64 @PyTuple_Size(ptr %argt)
  %bad = icmp slt i64 %n, 0
  br i1 %bad, label %clear, label %core
core:
  %items = getelementptr ptr, ptr %argt, i64 3
  %r = call i32 @bind_core(ptr %spec, ptr %config, ptr %items, i64 %n, ptr %stream)
  %raised = icmp slt i32 %r, 0
  br i1 %raised, label %error, label %answer
answer:
  %r.w = zext i32 %r to i64
  %out = call ptr @PyBool_FromLong(i64 %r.w)
  ret ptr %out
clear:
  call void @PyErr_Clear()
  br label %no
no:
  %false = call ptr @PyBool_FromLong(i64 0)
  ret ptr %false
error:
  ret ptr null
}}

; `binder(cfg, args, stream) -> bool`: a native binder, its `self` a tuple whose item 0
; is its BinderSpec's address.
define ptr @oxide_bind(ptr %self, ptr %args, i64 %nargs) {{
entry:
  %three = icmp eq i64 %nargs, 3
  br i1 %three, label %call, label %no
call:
  %s0 = call ptr @PyTuple_GetItem(ptr %self, i64 0)
  %spec.i = call i64 @PyLong_AsUnsignedLongLong(ptr %s0)
  %spec = inttoptr i64 %spec.i to ptr
  %config = load ptr, ptr %args
  %argt.p = getelementptr ptr, ptr %args, i64 1
  %argt = load ptr, ptr %argt.p
  %stream.p = getelementptr ptr, ptr %args, i64 2
  %stream = load ptr, ptr %stream.p
  %out = call ptr @bind_tuple(ptr %spec, ptr %config, ptr %argt, ptr %stream)
  ret ptr %out
no:
  %false = call ptr @PyBool_FromLong(i64 0)
  ret ptr %false
}}

; The BinderSpec of `kernel.__dict__["_oxide_launchers"].native`, or null (nothing
; raised): `names` is a tuple of "_oxide_launchers", "native", and a native binder's type.
define internal ptr @find_spec(ptr %kernel, ptr %names) {{
entry:
  %n.launchers = call ptr @PyTuple_GetItem(ptr %names, i64 0)
  %n.native = call ptr @PyTuple_GetItem(ptr %names, i64 1)
  %binder.type = call ptr @PyTuple_GetItem(ptr %names, i64 2)
  %dict.obj = call ptr @PyObject_GenericGetDict(ptr %kernel, ptr null)
  %dict.null = icmp eq ptr %dict.obj, null
  br i1 %dict.null, label %clear, label %lookup
lookup:
  %launchers = call ptr @PyDict_GetItemWithError(ptr %dict.obj, ptr %n.launchers)
  call void @Py_DecRef(ptr %dict.obj)
  %launchers.null = icmp eq ptr %launchers, null
  br i1 %launchers.null, label %clear, label %native
native:
  %binder = call ptr @PyObject_GetAttr(ptr %launchers, ptr %n.native)
  %binder.null = icmp eq ptr %binder, null
  br i1 %binder.null, label %clear, label %native.got
native.got:
  call void @Py_DecRef(ptr %binder)
  %binder.tp.p = getelementptr i8, ptr %binder, i64 8
  %binder.tp = load ptr, ptr %binder.tp.p
  %is.binder = icmp eq ptr %binder.tp, %binder.type
  br i1 %is.binder, label %spec, label %none
spec:
  %bself = call ptr @PyCFunction_GetSelf(ptr %binder)
  %s0 = call ptr @PyTuple_GetItem(ptr %bself, i64 0)
  %spec.i = call i64 @PyLong_AsUnsignedLongLong(ptr %s0)
  %found = inttoptr i64 %spec.i to ptr
  ret ptr %found
clear:
  call void @PyErr_Clear()
  br label %none
none:
  ret ptr null
}}

; `try(kernel, config, args, stream, device, kwargs) -> bool`: the Python `ox.launch`'s
; first step: the kernel's native binder, where the launch names no device and no
; keyword arguments. `self`: the names of find_spec, then None.
define ptr @oxide_try(ptr %self, ptr %args, i64 %nargs) {{
entry:
  %six = icmp eq i64 %nargs, 6
  br i1 %six, label %plain, label %no
plain:
  %none = call ptr @PyTuple_GetItem(ptr %self, i64 3)
  %device.p = getelementptr ptr, ptr %args, i64 4
  %device = load ptr, ptr %device.p
  %kwargs.p = getelementptr ptr, ptr %args, i64 5
  %kwargs = load ptr, ptr %kwargs.p
  %no.device = icmp eq ptr %device, %none
  br i1 %no.device, label %keywords, label %no
keywords:
  %nkw = call i64 @PyDict_Size(ptr %kwargs)
  %no.kw = icmp eq i64 %nkw, 0
  br i1 %no.kw, label %find, label %clear
find:
  %kernel = load ptr, ptr %args
  %spec = call ptr @find_spec(ptr %kernel, ptr %self)
  %config.p = getelementptr ptr, ptr %args, i64 1
  %config = load ptr, ptr %config.p
  %argt.p = getelementptr ptr, ptr %args, i64 2
  %argt = load ptr, ptr %argt.p
  %stream.p = getelementptr ptr, ptr %args, i64 3
  %stream = load ptr, ptr %stream.p
  %out = call ptr @bind_tuple(ptr %spec, ptr %config, ptr %argt, ptr %stream)
  ret ptr %out
clear:
  call void @PyErr_Clear()
  br label %no
no:
  %false = call ptr @PyBool_FromLong(i64 0)
  ret ptr %false
}}

; `ox.launch(kernel, config, *args, ...)` and `kernel[config](*args, ...)` as builtins
; (METH_FASTCALL | METH_KEYWORDS): the kernel's native binder for a launch with no
; keyword arguments, else the Python function `fallback` with the same arguments.
; `self`: the names of find_spec, then None, then `fallback`; for `kernel[config]`
; (`bound` = 1) then the kernel, the config and its stream.
define internal ptr @entry(ptr %self, ptr %args, i64 %nargsf, ptr %kwnames, i1 %bound) {{
entry:
  %nargs = and i64 %nargsf, 9223372036854775807
  %fallback = call ptr @PyTuple_GetItem(ptr %self, i64 4)
  %with.kw = icmp ne ptr %kwnames, null
  br i1 %with.kw, label %python, label %which
which:
  br i1 %bound, label %bound.args, label %launch.args
bound.args:
  %kernel.b = call ptr @PyTuple_GetItem(ptr %self, i64 5)
  %config.b = call ptr @PyTuple_GetItem(ptr %self, i64 6)
  %stream.b = call ptr @PyTuple_GetItem(ptr %self, i64 7)
  br label %find
launch.args:
  %two = icmp sge i64 %nargs, 2
  br i1 %two, label %launch.args2, label %python
launch.args2:
  %kernel.l = load ptr, ptr %args
  %config.l.p = getelementptr ptr, ptr %args, i64 1
  %config.l = load ptr, ptr %config.l.p
  %items.l = getelementptr ptr, ptr %args, i64 2
  %n.l = sub i64 %nargs, 2
  %stream.l = call ptr @PyTuple_GetItem(ptr %self, i64 3)
  br label %find
find:
  %kernel = phi ptr [%kernel.b, %bound.args], [%kernel.l, %launch.args2]
  %config = phi ptr [%config.b, %bound.args], [%config.l, %launch.args2]
  %items = phi ptr [%args, %bound.args], [%items.l, %launch.args2]
  %n = phi i64 [%nargs, %bound.args], [%n.l, %launch.args2]
  %stream = phi ptr [%stream.b, %bound.args], [%stream.l, %launch.args2]
  %spec = call ptr @find_spec(ptr %kernel, ptr %self)
  %no.spec = icmp eq ptr %spec, null
  br i1 %no.spec, label %python, label %core
core:
  %r = call i32 @bind_core(ptr %spec, ptr %config, ptr %items, i64 %n, ptr %stream)
  %launched = icmp eq i32 %r, 1
  br i1 %launched, label %done, label %raised.test
raised.test:
  %raised = icmp slt i32 %r, 0
  br i1 %raised, label %error, label %python
done:
  %none = call ptr @PyTuple_GetItem(ptr %self, i64 3)
  call void @Py_IncRef(ptr %none)
  ret ptr %none
python:
  %out = call ptr @PyObject_Vectorcall(ptr %fallback, ptr %args, i64 %nargsf, ptr %kwnames)
  ret ptr %out
error:
  ret ptr null
}}

define ptr @oxide_launch_entry(ptr %self, ptr %args, i64 %nargsf, ptr %kwnames) {{
  %out = call ptr @entry(ptr %self, ptr %args, i64 %nargsf, ptr %kwnames, i1 0)
  ret ptr %out
}}

define ptr @oxide_bound_entry(ptr %self, ptr %args, i64 %nargsf, ptr %kwnames) {{
  %out = call ptr @entry(ptr %self, ptr %args, i64 %nargsf, ptr %kwnames, i1 1)
  ret ptr %out
}}
"""

