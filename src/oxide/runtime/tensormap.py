"""`ox.TensorMap`: the host side of TMA (the Hopper tensor memory accelerator).

A tensor map describes a global array and the box (tile) one `ox.tma.load` / `store`
moves between it and shared memory, with a swizzle that lays the box out as wgmma reads
it. `ox.TensorMap(array, box, swizzle=128)` checks everything the driver would refuse
(rank, dtype, box sizes, the inner box against the swizzle span, 16-byte alignment of the
base and strides) and raises an ArgumentError naming the rule before anything runs.

On a GPU array it encodes the 128-byte `CUtensorMap` with
`cuda.bindings.driver.cuTensorMapEncodeTiled` (imported on first use, so `import oxide`
stays as fast as before); a launch passes those bytes by value, as the grid-constant
parameter of a kernel that declares `m: ox.TensorMap[bf16, 2]`. cuda.core 1.2's
`TensorMapDescriptor` could be passed to `cuda.core.launch`, but oxide launches through
`cuLaunchKernelEx` itself (runtime/gpu.py), so the raw bytes are what it needs.

On a host (NumPy) array it keeps the description in oxide's own 128-byte layout
(`CPU_LAYOUT`), which the CPU target's TMA copies read (codegen/hopper.py).

Shapes and boxes are given as the array has them, outermost first (`box=(64, 64)` is 64
rows of 64 elements); the driver's order (innermost first) is internal.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any

from oxide import types as T
from oxide.errors import ArgumentError
from oxide.runtime.config import as_int

# CUtensorMapDataType of each dtype TMA moves (signedness does not matter to a copy)
DATA_TYPES = {"u8": 0, "i8": 0, "u16": 1, "i16": 1, "u32": 2, "i32": 3, "u64": 4, "i64": 5,
              "f16": 6, "f32": 7, "f64": 8, "bf16": 9, "f8e4m3": 0, "f8e5m2": 0}
FLOAT32_FTZ = 10  # CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ
SWIZZLES = {None: 0, 32: 1, 64: 2, 128: 3}  # bytes -> CUtensorMapSwizzle
L2_PROMOTIONS = {None: 0, 64: 1, 128: 2, 256: 3}  # bytes -> CUtensorMapL2promotion
OOB_FILLS = {"zero": 0, "nan": 1}  # -> CUtensorMapFloatOOBfill (NAN_REQUEST_ZERO_FMA)
MAX_RANK = 5
MAX_BOX = 256
# The CPU description: base pointer, rank, element size, then per dimension innermost
# first: extents (u64 x 5), byte strides (u64 x 5), box (u32 x 5); then the swizzle in
# bytes (0 for none) and the out-of-bounds fill (0 zero, 1 NaN). 124 of the 128 bytes.
CPU_LAYOUT = struct.Struct("<QII5Q5Q5III")
CPU_OFFSETS = {"base": 0, "rank": 8, "itemsize": 12, "dims": 16, "strides": 56, "box": 96,
               "swizzle": 116, "oob": 120}


class TensorMap:
    """A TMA tensor map of `array` moving boxes of shape `box`; also the annotation
    `ox.TensorMap[dtype, rank]` of a kernel parameter that takes one.

    `swizzle` (None, 32, 64 or 128 bytes) is how the box lands in shared memory: with a
    swizzle of S bytes each row of the box (its innermost dimension) is S bytes, and the
    16 bytes at offset o land at o ^ ((o // 128) % (S // 16)) * 16 (for 128 bytes: row
    r's chunk c at chunk c ^ (r % 8), as wgmma's descriptors read it). `l2_promotion`
    (None, 64, 128, 256 bytes) widens the L2 fetches; `oob_fill` ("zero" or "nan", floats
    only) is what a load gives for elements past the array's edge; `interleave` is not
    supported (None).

    >>> tm = ox.TensorMap(a, box=(64, 64), swizzle=128)   # doctest: +SKIP
    """

    __slots__ = ("array", "dtype", "shape", "strides", "box", "swizzle", "l2_promotion",
                 "oob_fill", "device", "raw", "key", "_buffer", "address")

    def __class_getitem__(cls, item: Any) -> T.TensorMapType:
        return T.tensormap_type(item)

    def __init__(self, array: Any, box: Any, *, swizzle: int | None = None,
                 interleave: Any = None, l2_promotion: int | None = None,
                 oob_fill: str = "zero") -> None:
        from oxide.runtime.views import BadArray, view_of

        try:
            v = view_of(array)
        except BadArray as exc:
            raise ArgumentError(f"ox.TensorMap: {exc}") from None
        if v is None:
            raise ArgumentError(f"ox.TensorMap takes an array (oxide, NumPy, torch, CuPy or "
                                f"DLPack); got {type(array).__name__}")
        if interleave is not None:
            raise NotImplementedError("ox.TensorMap(interleave=...): interleaved layouts are "
                                      "not built; only interleave=None")
        if v.device is None:
            raise ArgumentError("ox.TensorMap: the array's device is unknown (a CUDA array "
                                "interface without a device): pass an oxide, torch or CuPy "
                                "array")
        self._build(v, box, swizzle, l2_promotion, oob_fill)
        self.array = v.owner  # kept alive: the map holds its address

    def _build(self, v: Any, box: Any, swizzle: int | None, l2_promotion: int | None,
               oob_fill: str) -> None:
        from oxide.runtime.views import HOST

        shape, dtype = tuple(v.shape), v.dtype
        strides = v.strides if v.strides is not None else T.c_strides(shape)
        box_t = _box(box, len(shape))
        check(dtype, shape, strides, box_t, swizzle, v.ptr, l2_promotion, oob_fill)
        self.dtype = dtype
        self.shape = shape
        self.strides = tuple(strides)
        self.box = box_t
        self.swizzle = swizzle
        self.l2_promotion = l2_promotion
        self.oob_fill = oob_fill
        self.device = v.device  # views.HOST for host memory
        if v.device == HOST:
            self.raw = cpu_description(v.ptr, dtype, shape, self.strides, box_t, swizzle,
                                       oob_fill)
        else:
            self.raw = encode(v.ptr, dtype, shape, self.strides, box_t, swizzle,
                              l2_promotion, oob_fill)
        # a 64-byte-aligned copy of the bytes, whose address a CPU launch passes
        self._buffer = ctypes.create_string_buffer(T.TENSORMAP_BYTES + 64)
        self.address = (ctypes.addressof(self._buffer) + 63) & ~63
        ctypes.memmove(self.address, self.raw, T.TENSORMAP_BYTES)
        self.key = (dtype.name, len(shape), self.device)  # what a launch plan depends on

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def box_bytes(self) -> int:
        """The bytes one load moves (what `ox.mbarrier.arrive_expect_tx` expects): the
        whole box, elements past the array's edge included."""
        n = self.dtype.itemsize
        for b in self.box:
            n *= b
        return n

    def __repr__(self) -> str:
        where = "cpu" if self.device == -1 else f"cuda:{self.device}"
        return (f"ox.TensorMap({self.dtype.name}{list(self.shape)}, box={self.box}, "
                f"swizzle={self.swizzle}, {where})")


def _box(box: Any, rank: int) -> tuple[int, ...]:
    items = tuple(as_int(b) for b in (box if isinstance(box, (tuple, list)) else (box,)))
    if len(items) != rank or None in items:
        raise ArgumentError(f"ox.TensorMap: box= is a tuple of {rank} ints (one per "
                            f"dimension of the array, outermost first); got {box!r}")
    return items  # type: ignore[return-value]


def check(dtype: T.DType, shape: tuple[int, ...], strides: tuple[int, ...],
          box: tuple[int, ...], swizzle: int | None, ptr: int, l2_promotion: int | None,
          oob_fill: str) -> None:
    """Every rule cuTensorMapEncodeTiled enforces (and a few of TMA's), as ArgumentErrors
    that name the rule: checked for host arrays too, so a CPU run refuses what a GPU would."""
    rank = len(shape)
    item = dtype.itemsize
    if not 1 <= rank <= MAX_RANK:
        raise ArgumentError(f"ox.TensorMap: a tensor map has rank 1 to {MAX_RANK}; the array "
                            f"has rank {rank}")
    if dtype.name not in DATA_TYPES:
        raise ArgumentError(f"ox.TensorMap: TMA moves {', '.join(DATA_TYPES)} elements, not "
                            f"{dtype.name}")
    if swizzle not in SWIZZLES:
        raise ArgumentError(f"ox.TensorMap: swizzle= is None, 32, 64 or 128 (bytes), not "
                            f"{swizzle!r}")
    if l2_promotion not in L2_PROMOTIONS:
        raise ArgumentError(f"ox.TensorMap: l2_promotion= is None, 64, 128 or 256 (bytes), "
                            f"not {l2_promotion!r}")
    if oob_fill not in OOB_FILLS:
        raise ArgumentError(f"ox.TensorMap: oob_fill= is 'zero' or 'nan', not {oob_fill!r}")
    if oob_fill == "nan" and not dtype.is_float:
        raise ArgumentError(f"ox.TensorMap: oob_fill='nan' needs a float array, not "
                            f"{dtype.name}")
    for k, (b, n) in enumerate(zip(box, shape, strict=True)):
        if not 1 <= b <= MAX_BOX:
            raise ArgumentError(f"ox.TensorMap: each box dimension is 1 to {MAX_BOX} elements; "
                                f"box[{k}] is {b}")
        if not 1 <= n <= 1 << 32:
            raise ArgumentError(f"ox.TensorMap: each array dimension is 1 to 2**32 elements; "
                                f"dimension {k} is {n}")
    if strides[-1] != 1:
        raise ArgumentError(f"ox.TensorMap: the innermost dimension must be contiguous "
                            f"(stride 1); the array's strides are {tuple(strides)} elements")
    inner = box[-1] * item
    if inner % 16:
        raise ArgumentError(f"ox.TensorMap: the box's innermost dimension must be a multiple "
                            f"of 16 bytes; {box[-1]} {dtype.name} are {inner} bytes")
    if swizzle is not None and inner > swizzle:
        raise ArgumentError(f"ox.TensorMap: with swizzle={swizzle}, a box row (the innermost "
                            f"dimension) is at most {swizzle} bytes ({swizzle // item} "
                            f"{dtype.name}); box[-1] = {box[-1]} is {inner} bytes")
    if swizzle is not None and inner != swizzle:
        # The driver takes narrower rows; oxide asks for whole swizzle rows, the layout
        # wgmma's descriptors read and the CPU's copies reproduce exactly.
        raise ArgumentError(f"ox.TensorMap: with swizzle={swizzle}, oxide takes box rows of "
                            f"exactly {swizzle} bytes ({swizzle // item} {dtype.name}); "
                            f"box[-1] = {box[-1]} is {inner} bytes: use the swizzle of the "
                            "row's width (32, 64 or 128), or none")
    if ptr % 16:
        raise ArgumentError(f"ox.TensorMap: the array's address must be 16-byte aligned; it "
                            f"is {ptr:#x}")
    for k, s in enumerate(strides[:-1]):
        if (s * item) % 16 or s * item >= 1 << 40 or s <= 0:
            raise ArgumentError(f"ox.TensorMap: every stride but the innermost must be a "
                                f"positive multiple of 16 bytes (below 2**40); dimension {k} "
                                f"has {s * item} bytes: pad the rows (e.g. a width that is a "
                                f"multiple of {max(1, 16 // item)} elements)")


def cpu_description(ptr: int, dtype: T.DType, shape: tuple[int, ...],
                    strides: tuple[int, ...], box: tuple[int, ...], swizzle: int | None,
                    oob_fill: str) -> bytes:
    """The CPU target's 128 bytes (`CPU_LAYOUT`), dimensions innermost first."""
    rank, item = len(shape), dtype.itemsize
    pad = (MAX_RANK - rank)
    dims = list(reversed(shape)) + [1] * pad
    byte_strides = [s * item for s in reversed(strides)] + [0] * pad
    boxes = list(reversed(box)) + [1] * pad
    data = CPU_LAYOUT.pack(ptr, rank, item, *dims, *byte_strides, *boxes, swizzle or 0,
                           OOB_FILLS[oob_fill])
    return data + bytes(T.TENSORMAP_BYTES - len(data))


def encode(ptr: int, dtype: T.DType, shape: tuple[int, ...], strides: tuple[int, ...],
           box: tuple[int, ...], swizzle: int | None, l2_promotion: int | None,
           oob_fill: str, ftz: bool = False) -> bytes:
    """The driver's 128-byte CUtensorMap (cuTensorMapEncodeTiled), dimensions innermost
    first, strides in bytes for dimensions 1 and up; `ftz`: an f32 map whose reductions
    flush subnormals (FLOAT32_FTZ)."""
    from cuda.bindings import driver as drv

    from oxide.runtime import cuda_driver as cd

    cd.init()
    item = dtype.itemsize
    rank = len(shape)
    u64, u32 = drv.cuuint64_t, drv.cuuint32_t  # the binding takes no plain ints in lists
    err, tmap = drv.cuTensorMapEncodeTiled(
        drv.CUtensorMapDataType(FLOAT32_FTZ if ftz else DATA_TYPES[dtype.name]), rank, ptr,
        [u64(int(n)) for n in reversed(shape)],
        [u64(int(s * item)) for s in reversed(strides[:-1])],
        [u32(int(b)) for b in reversed(box)], [u32(1)] * rank,
        drv.CUtensorMapInterleave(0), drv.CUtensorMapSwizzle(SWIZZLES[swizzle]),
        drv.CUtensorMapL2promotion(L2_PROMOTIONS[l2_promotion]),
        drv.CUtensorMapFloatOOBfill(OOB_FILLS[oob_fill]))
    if int(err) != 0:
        raise ArgumentError(f"ox.TensorMap: the driver refused the tensor map "
                            f"(cuTensorMapEncodeTiled: {err.name}) for a {dtype.name} array "
                            f"of shape {shape}, box {box}, swizzle {swizzle}")
    return struct.pack("<16Q", *[int(w) for w in tmap.opaque])


def spec_of(name: str, ann: T.TensorMapType, a: Any) -> T.TensorMapType:
    """The signature entry of parameter `name: ann` for `a` (a TensorMap, or the type
    itself for `compile`); an ArgumentError when the element type or rank differ."""
    if isinstance(a, T.TensorMapType):
        got = a
    elif isinstance(a, TensorMap):
        got = T.TensorMapType(a.dtype, a.rank)
    else:
        raise ArgumentError(f"`{name}` is {ann!r}; got {type(a).__name__}: build one with "
                            f"ox.TensorMap(array, box=..., swizzle=...)")
    if got != ann:
        raise ArgumentError(f"`{name}` is {ann!r}; got a tensor map of {got.dtype.name}, "
                            f"rank {got.rank}")
    return ann
