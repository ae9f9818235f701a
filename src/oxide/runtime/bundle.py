"""Ahead-of-time bundles: kernels compiled by `oxide build`, launched without the compiler.

A bundle is a directory, or one file (`oxide build -o kernels.oxb`: a zip archive of the
same files): `bundle.json` (the manifest), one cubin per kernel specialization per GPU
architecture, the PTX beside each cubin (for GPUs newer than those built: the driver
compiles it at first launch), and, when built with `--arch cpu`, object code for the CPU
that built it. Loading a GPU bundle reads JSON and bytes only; it never imports llvmlite
or xdsl, so a deployment needs neither LLVM nor the frontend, and a launch costs no
compile. CPU object code is loaded with llvmlite's MCJIT (no frontend, no compile).

>>> b = ox.load_bundle("build/")              # doctest: +SKIP
>>> b.scale[grid, block](x, 2.5, y)          # doctest: +SKIP
>>> ox.launch(b.scale, cfg, x, 2.5, y)        # doctest: +SKIP

How the runtimes see a bundled kernel (duck-typed like `oxide.kernel.Kernel`):
`PrecompiledKernel` has the `__name__`, `params` and `options` argument binding
reads, and `compile(*signature, arch=...)` returns a `BundledCode` with what the
GPU runtime takes from a `CompiledKernel`: `name` (the symbol), `signature`,
`arch`, `target`, `abi`, `sites`, `uses_barriers`, `constants`, `cubin` (the PTX,
NUL-terminated, where no cubin runs on the GPU: cuModuleLoadData takes either) and
`kernel`. `compile(..., target="cpu")` returns a `BundledHostCode` with what the CPU
runtime takes (`host`, `host_object`, `sites`, `thread_index_ranks`, `constants`), or
raises `DeviceError` where the bundle has no CPU code (or code for another CPU);
`gpu_only` tells `ox.launch` so before it reaches the CPU runtime.

ConstantArrays: a kernel that reads an `ox.ConstantArray` names it in its specialization
(`constants`), and the manifest declares each one once (dtype, shape, and the values it
held at build time, if it was set). `load_bundle` makes a fresh `ConstantArray` per
declaration, set to those values; `bundle.constants["NAME"].set(...)` changes them, and
`load_bundle(path, constants={"NAME": my_array})` binds the caller's own array instead.

Manifest (`format: oxide-bundle`, `version: 3`)::

    {"sha256": <hex>, "archs": ["sm_80", "sm_90", "cpu"],
     "constants": {"COEFFS": {"dtype": "f32", "shape": [4], "values": <base64 or null>}},
     "kernels": {"scale": {
        "params": [{"name": "input", "annotation": {"kind": "array", ...}}, ...],
        "options": {"checks": true, "contract": true, "max_threads": null},
        "specializations": [{
            "symbol": "scale_009b064c28", "signature": [<spec>, ...],
            "abi": [{"name": "input", "spec": <spec>}, ...],
            "sites": [{"kind": "index", "file": ..., "line": 7, "col": 17,
                       "end_col": 25, "text": ..., "detail": "input"}, ...],
            "uses_barriers": false, "grid_x_factor": 1, "thread_index_ranks": [1],
            "constants": [{"symbol": "oxide_const_0", "name": "COEFFS"}],
            "cubins": {"sm_90": "scale.0.sm_90.cubin"},
            "cubin_sha256": {"sm_90": <hex>},
            "ptx": {"sm_90": "scale.0.sm_90.ptx"}, "ptx_sha256": {"sm_90": <hex>},
            "host": {"target": "cpu-znver3-<hex>", "file": "scale.0.cpu.o",
                     "sha256": <hex>, "entry": "scale_009b064c28_launch",
                     "sites": [...], "thread_index_ranks": [1],
                     "constants": [...]}}]}}}

A tile kernel whose K loops copy their operands by TMA takes hidden tensor maps on sm_90:
`"operand_maps": {"sm_90": [{"param": 0, "dtype": "bf16", "box": [128, 64],
"swizzle": 128}, ...]}` per architecture; they follow `abi` (the parameters' own).

`ptx`, `host`, `constants` and `operand_maps` are optional (version 2 bundles, which lack them, still
load); an `sm_XXa` build has no PTX (it runs on that GPU only).

Integrity: `sha256` is the SHA-256 of the rest of the manifest in canonical JSON
(`manifest_digest`), and each file's SHA-256 is recorded next to its name, so a manifest
or file damaged or edited after the build is a `BundleError` at load (the manifest) or at
first launch (a cubin, PTX or object file), never a launch with a wrong grid or wrong
code. File names are plain names inside the bundle; files are read only if they are
regular files of bounded size (runtime/safe_read.py), and zip members only up to their
recorded size.

A <spec> is `{"kind": "scalar", "dtype": "f32"}`, `{"kind": "array", "access":
"slice", "dtype": "f32", "rank": 1, "contiguous": true}`, `{"kind": "tensormap",
"dtype": "bf16", "rank": 2}` or `{"kind": "const", "value": 4}`; in an annotation, a dtype may be `{"typevar": "T"}` and a Const
is `{"kind": "const", "type": "int"}`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import re
import zipfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from oxide import types as T
from oxide.codegen.abi import OperandMap, ParamABI, logical_grid_abi
from oxide.codegen.persistent_grid import is_persistent
from oxide.errors import ArgumentError, DeviceError, LaunchError, OxideError, Span
from oxide.kernel_types import KernelOptions, Param
from oxide.runtime.cache_entry import GRID_X_FACTORS
from oxide.runtime.launch import CPU_ERROR, bind_launch
from oxide.runtime.safe_read import read_regular_file
from oxide.runtime.witness_rules import is_launch_rule
from oxide.specialize import ConstValue, signature_from

MANIFEST = "bundle.json"
FORMAT = "oxide-bundle"
# 2: the manifest and every cubin carry a SHA-256; 3: PTX, CPU object code, ConstantArrays
VERSION = 3
READABLE_VERSIONS = (2, 3)  # version 3 only adds optional fields
MAX_MANIFEST_BYTES = 64 << 20
MAX_CUBIN_BYTES = 512 << 20
MAX_ONE_FILE_BYTES = 2 << 30
ONE_FILE_SUFFIX = ".oxb"
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}\.(cubin|ptx|o)")

CONST_TYPES = {"int": int, "float": float, "bool": bool}


class BundleError(OxideError):
    """A bundle directory that is missing, damaged, or from an incompatible oxide."""


def manifest_digest(manifest: dict[str, Any]) -> str:
    """The SHA-256 of a manifest without its `sha256` field, in canonical JSON (sorted keys,
    no spaces), so the digest does not depend on how the file was indented."""
    rest = {k: v for k, v in manifest.items() if k != "sha256"}
    text = json.dumps(rest, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------------------
# Where the files are: a directory, or the members of a one-file bundle


class BundleFiles:
    """A bundle directory's files, read as regular files of bounded size."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def read(self, name: str, limit: int) -> bytes:
        """The file's bytes; OSError when it is missing, too large or not a regular file."""
        return read_regular_file(self.root / name, limit)

    def where(self, name: str) -> str:
        return str(self.root / name)


class OneFileBundle(BundleFiles):
    """The members of a one-file bundle (a zip archive), read up to their recorded size."""

    def __init__(self, root: Path, data: bytes) -> None:
        super().__init__(root)
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(data))
        except (zipfile.BadZipFile, ValueError, OSError) as exc:
            raise BundleError(f"{root} is not an oxide bundle: neither a directory nor a "
                              f"one-file bundle ({exc}); build one with `oxide build FILE.py "
                              f"-o DIR` or `-o NAME{ONE_FILE_SUFFIX}`") from None

    def read(self, name: str, limit: int) -> bytes:
        try:
            info = self.zip.getinfo(name)
        except KeyError:
            raise FileNotFoundError(f"{self.where(name)}: no such member") from None
        if info.file_size > limit:
            raise OSError(f"{self.where(name)} is larger than {limit} bytes")
        try:
            return self.zip.read(info)  # reads at most file_size bytes, and checks the CRC
        except (zipfile.BadZipFile, ValueError, RuntimeError, EOFError,
                NotImplementedError) as exc:
            raise OSError(f"{self.where(name)}: {exc}") from None

    def where(self, name: str) -> str:
        return f"{self.root}:{name}"


# ---------------------------------------------------------------------------
# Signature entries <-> JSON


def _dtype_json(dtype: Any) -> Any:
    return {"typevar": dtype.name} if isinstance(dtype, T.TypeVar) else dtype.name


def _dtype_from(value: Any, typevars: dict[str, T.TypeVar]) -> Any:
    if isinstance(value, dict):
        return typevars.setdefault(value["typevar"], T.TypeVar(value["typevar"]))
    return T.SCALARS[value]


def spec_to_json(spec: Any) -> dict[str, Any]:
    """A signature entry or an annotation as JSON (see the module docstring)."""
    if isinstance(spec, ConstValue):
        return {"kind": "const", "value": spec.value}
    if isinstance(spec, T.ConstType):
        return {"kind": "const", "type": getattr(spec.pytype, "__name__", str(spec.pytype))}
    if isinstance(spec, T.ArrayType):
        out = {"kind": "array", "access": spec.access, "dtype": _dtype_json(spec.dtype),
               "rank": spec.rank, "contiguous": spec.contiguous}
        if spec.vectors is not None:  # a tile kernel's launch specialization
            out["vectors"] = spec.vectors
        return out
    if isinstance(spec, T.TensorMapType):
        return {"kind": "tensormap", "dtype": _dtype_json(spec.dtype), "rank": spec.rank}
    return {"kind": "scalar", "dtype": _dtype_json(spec)}


def spec_from_json(data: dict[str, Any], typevars: dict[str, T.TypeVar]) -> Any:
    """The inverse of `spec_to_json`; `typevars` makes one TypeVar per name across a kernel."""
    kind = data["kind"]
    if kind == "const":
        if "type" in data:
            return T.ConstType(CONST_TYPES.get(data["type"], object))
        return ConstValue(data["value"])
    dtype = _dtype_from(data["dtype"], typevars)
    if kind == "array":
        return T.ArrayType(data["access"], dtype, data["rank"], data["contiguous"],
                           vectors=data.get("vectors"))
    if kind == "tensormap":
        return T.TensorMapType(dtype, data["rank"])
    return dtype


# ---------------------------------------------------------------------------
# What the runtime launches


@dataclass(frozen=True)
class BundledSite:
    """A run-time check's place in the kernel's source (the compiler's `Site`, minus xdsl)."""

    kind: str
    span: Span
    detail: str


def arch_runs_on(arch: str, device_arch: str) -> bool:
    """Whether a cubin for `arch` loads on a GPU of `device_arch` (both like "sm_90").

    SASS is compatible within one major version upward (sm_80 runs on sm_86), never
    across majors; an arch-specific `a` cubin (sm_90a) runs only on its exact GPU.
    """
    want = device_arch.rstrip("a")
    major, minor = divmod(int(arch[3:].rstrip("a")), 10)
    dev_major, dev_minor = divmod(int(want[3:]), 10)
    if arch.endswith("a"):
        return (major, minor) == (dev_major, dev_minor)
    return major == dev_major and minor <= dev_minor


class BundledFile:
    """One file of the bundle, read once and checked against the SHA-256 the manifest records."""

    def __init__(self, files: BundleFiles, name: Any, sha256: Any, limit: int) -> None:
        if not isinstance(name, str) or not _FILE_NAME.fullmatch(name):
            raise ValueError(f"file name {name!r} is not a file name inside the bundle")
        if not isinstance(sha256, str):
            raise ValueError(f"the SHA-256 of {name} is not a string")
        self.files, self.name, self.sha256, self.limit = files, name, sha256, limit

    def read(self) -> bytes:
        where = self.files.where(self.name)
        try:
            data = self.files.read(self.name, self.limit)
        except OSError as exc:
            raise BundleError(f"the bundle's file {where} cannot be read: {exc}") from exc
        if hashlib.sha256(data).hexdigest() != self.sha256:
            raise BundleError(f"the bundle's file {where} was modified or damaged after "
                              "the build (its SHA-256 is not the manifest's): rebuild the "
                              "bundle with `oxide build`")
        return data


def _sites(data: list[dict[str, Any]]) -> list[BundledSite]:
    return [BundledSite(s["kind"], Span(s["file"], s["line"], s["col"], s["end_col"], s["text"]),
                        s["detail"]) for s in data]


def _ranks(ranks: Any) -> tuple[int, ...]:
    """The ThreadIndex ranks a kernel creates (runtime/witness_rules.py), checked."""
    if not isinstance(ranks, list) or not all(type(r) is int and is_launch_rule(r)
                                              for r in ranks):
        raise ValueError(f"thread_index_ranks {ranks!r} are not ranks oxide emits")
    return tuple(ranks)


def _constants(data: Any, declared: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """(global symbol, the bundle's ox.ConstantArray) for each array a specialization reads."""
    out = []
    for item in data:
        symbol, name = item["symbol"], item["name"]
        if not isinstance(symbol, str) or name not in declared:
            raise ValueError(f"constant {item!r} names no ConstantArray the manifest declares")
        out.append((symbol, declared[name]))
    return tuple(out)


class HostCode:
    """A specialization's object code for the CPU that built the bundle."""

    def __init__(self, files: BundleFiles, data: dict[str, Any], declared: dict[str, Any]
                 ) -> None:
        self.target: str = data["target"]
        self.entry: str = data["entry"]
        if not isinstance(self.target, str) or not isinstance(self.entry, str):
            raise ValueError("the host code's target and entry are not strings")
        self.file = BundledFile(files, data["file"], data["sha256"], MAX_CUBIN_BYTES)
        self.sites = _sites(data["sites"])
        self.thread_index_ranks = _ranks(data["thread_index_ranks"])
        self.constants = _constants(data.get("constants", []), declared)


def _operand_maps(data: Any) -> dict[str, tuple[OperandMap, ...]]:
    """Per architecture, the hidden tensor maps its code takes (codegen/abi.py)."""
    if not isinstance(data, dict):
        raise ValueError("operand_maps is not an object")
    out = {}
    for arch, maps in data.items():
        if not isinstance(maps, list) or not all(
                isinstance(m, dict) and type(m.get("param")) is int
                and m.get("dtype") in T.SCALARS and m.get("swizzle") in (32, 64, 128)
                and type(m.get("ftz", False)) is bool
                and isinstance(m.get("box"), list)
                and all(type(b) is int and 0 < b <= 256 for b in m["box"]) for m in maps):
            raise ValueError(f"operand_maps of {arch} are not well-formed tensor maps")
        out[arch] = tuple(OperandMap.from_json(m)
                          for m in maps)
    return out


class Specialization:
    """One bundled signature of a kernel, with a cubin (and PTX) per architecture."""

    def __init__(self, kernel: PrecompiledKernel, files: BundleFiles, data: dict[str, Any],
                 declared: dict[str, Any]) -> None:
        typevars: dict[str, T.TypeVar] = {}
        self.kernel = kernel
        self.symbol: str = data["symbol"]
        self.signature = tuple(spec_from_json(s, typevars) for s in data["signature"])
        self.abi = [ParamABI(a["name"], spec_from_json(a["spec"], typevars))
                    for a in data["abi"]]
        self.sites = _sites(data["sites"])
        self.uses_barriers: bool = data["uses_barriers"]
        self.grid_x_factor: int = data["grid_x_factor"]
        if type(self.grid_x_factor) is not int or self.grid_x_factor not in GRID_X_FACTORS:
            raise ValueError(f"grid_x_factor {self.grid_x_factor!r} is not one oxide emits")
        self.thread_index_ranks = _ranks(data["thread_index_ranks"])
        self.constants = _constants(data.get("constants", []), declared)
        self.cubins = self._files(files, data["cubins"], data["cubin_sha256"], "cubins")
        self.operand_maps = _operand_maps(data.get("operand_maps", {}))
        self.ptx = self._files(files, data.get("ptx", {}), data.get("ptx_sha256", {}), "PTX")
        host = data.get("host")
        self.host = HostCode(files, host, declared) if host is not None else None

    @staticmethod
    def _files(files: BundleFiles, names: dict[str, Any], sums: dict[str, Any], what: str
               ) -> dict[str, BundledFile]:
        if set(names) != set(sums):
            raise ValueError(f"the {what} and their checksums name different archs")
        for arch in names:
            if not isinstance(arch, str) or not _ARCH.fullmatch(arch):
                raise ValueError(f"{arch!r} is not a GPU architecture")
        return {arch: BundledFile(files, name, sums[arch], MAX_CUBIN_BYTES)
                for arch, name in names.items()}

    @property
    def cubin_files(self) -> dict[str, BundledFile]:
        return self.cubins

    def pick_arch(self, device_arch: str) -> str:
        """The bundled cubin to load on a `device_arch` GPU: exact, else the newest compatible.

        DeviceError when none runs there (`pick` then looks for PTX).
        """
        if device_arch in self.cubins:
            return device_arch
        fits = sorted((a for a in self.cubins if arch_runs_on(a, device_arch)),
                      key=_arch_number, reverse=True)
        if not fits:
            raise DeviceError(
                f"the bundle has `{self.kernel.__name__}` for "
                f"{', '.join(self.cubins) or 'no GPU'}, none of which runs on this "
                f"{device_arch} GPU: rebuild the bundle with --arch {device_arch}")
        return fits[0]

    def pick(self, device_arch: str) -> tuple[str, BundledFile, bool]:
        """(arch, file, is PTX): a cubin that runs on `device_arch`, else the PTX of the newest
        arch at or below it (PTX is compiled by the driver for any later GPU; an `a` arch's
        would not be, and is not bundled)."""
        try:
            arch = self.pick_arch(device_arch)
            return arch, self.cubins[arch], False
        except DeviceError:
            want = _arch_number(device_arch)
            fits = sorted((a for a in self.ptx if _arch_number(a) <= want),
                          key=_arch_number, reverse=True)
            if not fits:
                raise
            return fits[0], self.ptx[fits[0]], True


_ARCH = re.compile(r"sm_\d+a?")


def _arch_number(arch: str) -> int:
    return int(arch[3:].rstrip("a"))


class BundledCode:
    """A specialization's code for one GPU: what a `CompiledKernel` gives a runtime."""

    target = "nvptx"

    def __init__(self, spec: Specialization, device_arch: str | None) -> None:
        self.kernel = spec.kernel
        self.name = spec.symbol
        self.signature = spec.signature
        if device_arch is None:
            if not spec.cubins:
                raise DeviceError(f"the bundle has no GPU code for `{spec.kernel.__name__}`: "
                                  "rebuild it with --arch sm_80,sm_90 (for example)")
            device_arch = next(iter(spec.cubins))
        self.arch, self._file, self.is_ptx = spec.pick(device_arch)
        self.operand_maps = spec.operand_maps.get(self.arch, ())
        # this arch's hidden parameters: the logical grid where its code walks it
        # (codegen/persistent_grid.py: only a kernel with TMA rings does, so the code of
        # one without maps is not read before its first use), then its tensor maps
        grid = (logical_grid_abi() if self.operand_maps
                and is_persistent(self.name, self.module_image) else [])
        self.abi = spec.abi + grid + [m.abi for m in self.operand_maps]
        self.sites = spec.sites
        self.uses_barriers = spec.uses_barriers
        self.grid_x_factor = spec.grid_x_factor
        self.thread_index_ranks = spec.thread_index_ranks
        self.constants = spec.constants

    @cached_property
    def module_image(self) -> bytes:
        """What the driver loads: the cubin's bytes, or the PTX's, NUL-terminated (the
        driver compiles it for the GPU at hand), checked against the manifest's SHA-256."""
        data = self._file.read()
        return data + b"\0" if self.is_ptx else data

    @property
    def cubin(self) -> bytes:
        """`CompiledKernel.cubin`'s name for the same bytes (PTX where the bundle ran from
        its PTX)."""
        return self.module_image

    @property
    def ptx(self) -> str:
        """The bundled PTX this code came from (only where no cubin ran on the GPU)."""
        if not self.is_ptx:
            raise DeviceError(f"`{self.kernel.__name__}` runs from its {self.arch} cubin here")
        return self.module_image[:-1].decode()

    def __repr__(self) -> str:
        what = "PTX" if self.is_ptx else "cubin"
        return f"<BundledCode {self.name}: {self.arch} {what}>"


class BundledHostCode:
    """A specialization's CPU object code: what a `CompiledKernel` gives the CPU runtime."""

    target = "cpu"
    arch = "cpu"
    grid_x_factor = 1

    def __init__(self, spec: Specialization, host: HostCode) -> None:
        self.kernel = spec.kernel
        self.name = spec.symbol
        self.signature = spec.signature
        self.sites = host.sites
        self.thread_index_ranks = host.thread_index_ranks
        self.constants = host.constants
        self._host = host

    @cached_property
    def host_object(self) -> tuple[bytes, str]:
        """(object code, optimized LLVM IR): the IR does not travel in a bundle."""
        return self._host.file.read(), ""

    @cached_property
    def host(self) -> Any:
        """The object code loaded by MCJIT (the first use imports llvmlite, not the compiler)."""
        from oxide.codegen.host import load_object

        return load_object(self.host_object[0], self._host.entry)

    def __repr__(self) -> str:
        return f"<BundledHostCode {self.name} for {self._host.target}>"


class PrecompiledKernel:
    """A kernel from a bundle: launch it like the `@ox.kernel` it was built from."""

    def __init__(self, name: str, files: BundleFiles, data: dict[str, Any],
                 declared: dict[str, Any] | None = None) -> None:
        typevars: dict[str, T.TypeVar] = {}
        self.__name__ = self.__qualname__ = name
        self.params = tuple(Param(p["name"], spec_from_json(p["annotation"], typevars))
                            for p in data["params"])
        options = dict(data["options"])
        if options.get("block") is not None:  # JSON has lists; a shape is a tuple
            options["block"] = tuple(options["block"])
        self.options = KernelOptions(**options)
        self.specializations = [Specialization(self, files, s, declared or {})
                                for s in data["specializations"]]
        # `ox.launch` on the CPU raises DeviceError(CPU_ERROR) for a kernel without CPU code
        self.gpu_only = not any(s.host for s in self.specializations)

    def compile(self, *args: Any, arch: str | None = None, target: str | None = None
                ) -> BundledCode | BundledHostCode:
        """The bundled code for `args` (types or example values) on a GPU of `arch`, or on
        this CPU (`target="cpu"`).

        Nothing compiles: a signature the bundle lacks is an ArgumentError naming
        the ones it has; a device it has no code for is a DeviceError.
        """
        wanted = signature_from(self, args)
        for spec in self.specializations:
            if spec.signature == wanted:
                if target == "cpu" or arch == "cpu":
                    return self._host_code(spec)
                return BundledCode(spec, arch)
        have = "; ".join(describe_signature(s.signature) for s in self.specializations)
        raise ArgumentError(f"the bundle has `{self.__name__}` for ({have}), not for "
                            f"({describe_signature(wanted)}): rebuild it with "
                            f"--sig \"{self.__name__}: {describe_signature(wanted)}\"")

    def _host_code(self, spec: Specialization) -> BundledHostCode:
        if spec.host is None:
            raise DeviceError(CPU_ERROR if self.gpu_only else
                              f"the bundle has no CPU code for `{self.__name__}"
                              f"({describe_signature(spec.signature)})`: rebuild it with "
                              "--arch ...,cpu")
        from oxide.codegen.host import host_target_id

        here = host_target_id()
        if spec.host.target != here:
            raise DeviceError(f"the bundle's CPU code for `{self.__name__}` was built for "
                              f"{spec.host.target}, and this CPU is {here}: rebuild the "
                              "bundle here with --arch cpu (object code is built for the "
                              "CPU that builds it)")
        return BundledHostCode(spec, spec.host)

    def __getitem__(self, config: Any) -> Any:
        return bind_launch(self, config)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise LaunchError(f"`{self.__name__}` is a kernel: launch it with "
                        f"`{self.__name__}[config](...)` or `ox.launch({self.__name__}, config, "
                        "...)`")

    def __repr__(self) -> str:
        return f"<oxide.bundled_kernel {self.__name__}>"


def describe_signature(sig: tuple[Any, ...]) -> str:
    """`f32, Slice[f32], 4`: a signature as `--sig` spells it."""
    return ", ".join(str(s.value) if isinstance(s, ConstValue) else
                     s.name if isinstance(s, T.DType) else repr(s) for s in sig)


def declared_constants(manifest: dict[str, Any], given: dict[str, Any] | None
                       ) -> dict[str, Any]:
    """One ox.ConstantArray per name the manifest declares: the caller's (`given`), checked
    against the declaration, else a fresh one set to the values recorded at build time."""
    import numpy as np

    from oxide.runtime.constant import ConstantArray

    declared = manifest.get("constants", {})
    given = dict(given or {})
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise ArgumentError(f"load_bundle(constants=...) names {', '.join(unknown)}, which the "
                            f"bundle's kernels do not read (they read: "
                            f"{', '.join(declared) or 'no ConstantArray'})")
    out = {}
    for name, data in declared.items():
        dtype, shape = T.SCALARS[data["dtype"]], tuple(data["shape"])
        if name in given:
            mine = given[name]
            if not isinstance(mine, ConstantArray) or mine.dtype != dtype \
                    or mine.shape != shape:
                raise ArgumentError(f"load_bundle(constants=...): `{name}` must be an "
                                    f"ox.ConstantArray({dtype.name}, {shape}) as built; got "
                                    f"{mine!r}")
            out[name] = mine
            continue
        try:
            arr = ConstantArray(dtype, shape)
            if data["values"] is not None:
                raw = base64.b64decode(data["values"], validate=True)
                arr.set(np.frombuffer(raw, dtype=dtype.numpy).reshape(shape))
        except ArgumentError as exc:  # a declaration no build writes
            raise ValueError(f"constant `{name}`: {exc}") from None
        out[name] = arr
    return out


class Bundle:
    """A loaded bundle: each kernel is an attribute (`bundle.scale`), also `bundle["scale"]`;
    `bundle.constants` holds the ox.ConstantArrays its kernels read, by name."""

    def __init__(self, path: Path, manifest: dict[str, Any], files: BundleFiles | None = None,
                 constants: dict[str, Any] | None = None) -> None:
        self.path = path
        self.manifest = manifest
        files = files or BundleFiles(path)
        self.constants = declared_constants(manifest, constants)
        self.kernels = {name: PrecompiledKernel(name, files, data, self.constants)
                        for name, data in manifest["kernels"].items()}

    def __getattr__(self, name: str) -> PrecompiledKernel:
        kernels = self.__dict__.get("kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(f"the bundle at {self.__dict__.get('path')} has no kernel "
                             f"`{name}` (its kernels: {', '.join(kernels) or 'none'})")

    def __getitem__(self, name: str) -> PrecompiledKernel:
        return getattr(self, name)

    def __dir__(self) -> list[str]:
        return [*super().__dir__(), *self.kernels]

    def __repr__(self) -> str:
        return f"<oxide.Bundle {self.path}: {', '.join(self.kernels)}>"


def open_files(root: Path) -> BundleFiles:
    """The bundle's files: the directory `root`, or the one-file bundle `root` read whole."""
    if root.is_dir() or not root.exists():
        return BundleFiles(root)
    try:
        data = read_regular_file(root, MAX_ONE_FILE_BYTES)
    except OSError as exc:
        raise BundleError(f"{root} cannot be read: {exc}") from exc
    return OneFileBundle(root, data)


def load_bundle(path: str | Path, constants: dict[str, Any] | None = None) -> Bundle:
    """Load a bundle written by `oxide build` (no compiler is imported): a directory, or a
    one-file bundle (`-o NAME.oxb`).

    `constants` binds your own `ox.ConstantArray`s to the names the bundle's kernels read
    (`bundle.constants` lists them); the others start with the values they had at build time.

    >>> b = ox.load_bundle("build/")   # doctest: +SKIP
    >>> b.scale[grid, block](x, 2.5, y) # doctest: +SKIP
    """
    root = Path(path)
    files = open_files(root)
    where = files.where(MANIFEST)
    try:
        manifest = json.loads(files.read(MANIFEST, MAX_MANIFEST_BYTES))
    except FileNotFoundError:
        raise BundleError(f"{root} is not an oxide bundle (no {MANIFEST}); "
                          "build one with `oxide build FILE.py -o DIR`") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise BundleError(f"{where} cannot be read: {exc}") from exc
    if not isinstance(manifest, dict):
        raise BundleError(f"{where} is not an oxide bundle manifest (not a JSON "
                          "object): rebuild it with `oxide build`")
    if manifest.get("format") != FORMAT or manifest.get("version") not in READABLE_VERSIONS:
        raise BundleError(f"{root} holds a {manifest.get('format')} v{manifest.get('version')} "
                          f"manifest; this oxide reads {FORMAT} v{VERSION}: rebuild it")
    if manifest.get("sha256") != manifest_digest(manifest):
        raise BundleError(f"{where} was modified or damaged after the build (its "
                          "SHA-256 does not match its contents): rebuild the bundle with "
                          "`oxide build`")
    try:
        return Bundle(root, manifest, files, constants)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError,
            binascii.Error) as exc:
        raise BundleError(f"{where} is malformed ({type(exc).__name__}: {exc}): "
                          "rebuild the bundle with `oxide build`") from None
