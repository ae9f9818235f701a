"""Ahead-of-time bundles: kernels compiled by `oxide build`, launched without the compiler.

A bundle is a directory: `bundle.json` (the manifest) and one cubin per kernel
specialization per architecture. Loading one reads JSON and bytes only; it
never imports llvmlite or xdsl, so a deployment needs neither LLVM nor the
frontend, and a launch costs no compile.

>>> b = ox.load_bundle("build/")              # doctest: +SKIP
>>> b.scale[grid, block](x, 2.5, y)          # doctest: +SKIP
>>> ox.launch(b.scale, cfg, x, 2.5, y)        # doctest: +SKIP

How the runtimes see a bundled kernel (duck-typed like `oxide.kernel.Kernel`):
`PrecompiledKernel` has the `__name__`, `params` and `options` argument binding
reads, and `compile(*signature, arch=...)` returns a `BundledCode` with what the
GPU runtime takes from a `CompiledKernel`: `name` (the symbol), `signature`,
`arch`, `target`, `abi`, `sites`, `uses_barriers`, `cubin` and `kernel`. Asking
for the CPU (`target="cpu"`) raises `DeviceError`: bundles hold GPU code only;
`ox.launch` checks `gpu_only` before it reaches the CPU runtime.

Manifest (`format: oxide-bundle`, `version: 2`)::

    {"sha256": <hex>, "kernels": {"scale": {
        "params": [{"name": "input", "annotation": {"kind": "array", ...}}, ...],
        "options": {"checks": true, "contract": true, "max_threads": null},
        "specializations": [{
            "symbol": "scale_009b064c28", "signature": [<spec>, ...],
            "abi": [{"name": "input", "spec": <spec>}, ...],
            "sites": [{"kind": "index", "file": ..., "line": 7, "col": 17,
                       "end_col": 25, "text": ..., "detail": "input"}, ...],
            "uses_barriers": false, "grid_x_factor": 1, "thread_index_ranks": [1],
            "cubins": {"sm_90": "scale.0.sm_90.cubin"},
            "cubin_sha256": {"sm_90": <hex>}}]}}}

Integrity (version 2): `sha256` is the SHA-256 of the rest of the manifest in canonical
JSON (`manifest_digest`), and each cubin's SHA-256 is recorded next to its file name, so
a manifest or cubin damaged or edited after the build is a `BundleError` at load (the
manifest) or at first launch (a cubin), never a launch with a wrong grid or wrong code.
Cubin names are plain file names inside the bundle; files are read only if they are
regular files of bounded size (runtime/safe_read.py).

A <spec> is `{"kind": "scalar", "dtype": "f32"}`, `{"kind": "array", "access":
"slice", "dtype": "f32", "rank": 1, "contiguous": true}` or `{"kind": "const",
"value": 4}`; in an annotation, a dtype may be `{"typevar": "T"}` and a Const
is `{"kind": "const", "type": "int"}`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from oxide import types as T
from oxide.codegen.abi import ParamABI
from oxide.errors import ArgumentError, DeviceError, LaunchError, OxideError, Span
from oxide.kernel import KernelOptions, Param
from oxide.runtime.cache_entry import GRID_X_FACTORS, THREAD_INDEX_RANKS
from oxide.runtime.launch import bind_launch
from oxide.runtime.safe_read import read_regular_file
from oxide.specialize import ConstValue, signature_from

MANIFEST = "bundle.json"
FORMAT = "oxide-bundle"
VERSION = 2  # 2: the manifest and every cubin carry a SHA-256
MAX_MANIFEST_BYTES = 64 << 20
MAX_CUBIN_BYTES = 512 << 20
_CUBIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}\.cubin")
CPU_ERROR = ("bundles hold GPU code; launching needs a CUDA GPU (run the kernel's source "
             "on the CPU instead, or launch inside `with ox.device(0):` on a GPU machine)")

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
        return {"kind": "array", "access": spec.access, "dtype": _dtype_json(spec.dtype),
                "rank": spec.rank, "contiguous": spec.contiguous}
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
        return T.ArrayType(data["access"], dtype, data["rank"], data["contiguous"])
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


class Specialization:
    """One bundled signature of a kernel, with a cubin per architecture."""

    def __init__(self, kernel: PrecompiledKernel, root: Path, data: dict[str, Any]) -> None:
        typevars: dict[str, T.TypeVar] = {}
        self.kernel = kernel
        self.symbol: str = data["symbol"]
        self.signature = tuple(spec_from_json(s, typevars) for s in data["signature"])
        self.abi = [ParamABI(a["name"], spec_from_json(a["spec"], typevars))
                    for a in data["abi"]]
        self.sites = [BundledSite(s["kind"], Span(s["file"], s["line"], s["col"], s["end_col"],
                                                  s["text"]), s["detail"])
                      for s in data["sites"]]
        self.uses_barriers: bool = data["uses_barriers"]
        self.grid_x_factor: int = data["grid_x_factor"]
        if type(self.grid_x_factor) is not int or self.grid_x_factor not in GRID_X_FACTORS:
            raise ValueError(f"grid_x_factor {self.grid_x_factor!r} is not one oxide emits")
        # the ThreadIndex ranks the kernel creates (runtime/witness_rules.py)
        ranks = data["thread_index_ranks"]
        if not isinstance(ranks, list) or not all(type(r) is int and r in THREAD_INDEX_RANKS
                                                  for r in ranks):
            raise ValueError(f"thread_index_ranks {ranks!r} are not ranks oxide emits")
        self.thread_index_ranks = tuple(ranks)
        if set(data["cubins"]) != set(data["cubin_sha256"]):
            raise ValueError("the cubins and their checksums name different archs")
        for rel in data["cubins"].values():
            if not isinstance(rel, str) or not _CUBIN_NAME.fullmatch(rel):
                raise ValueError(f"cubin name {rel!r} is not a file name inside the bundle")
        self.cubin_files = {arch: root / rel for arch, rel in data["cubins"].items()}
        self.cubin_sha256: dict[str, str] = dict(data["cubin_sha256"])

    def pick_arch(self, device_arch: str) -> str:
        """The bundled arch to load on a `device_arch` GPU: exact, else the newest compatible."""
        if device_arch in self.cubin_files:
            return device_arch
        fits = sorted((a for a in self.cubin_files if arch_runs_on(a, device_arch)),
                      key=lambda a: int(a[3:].rstrip("a")), reverse=True)
        if not fits:
            raise DeviceError(
                f"the bundle has `{self.kernel.__name__}` for {', '.join(self.cubin_files)}, "
                f"none of which runs on this {device_arch} GPU: rebuild the bundle with "
                f"--arch {device_arch}")
        return fits[0]


class BundledCode:
    """A specialization's code for one architecture: what a `CompiledKernel` gives a runtime."""

    target = "nvptx"

    def __init__(self, spec: Specialization, arch: str) -> None:
        self.kernel = spec.kernel
        self.name = spec.symbol
        self.signature = spec.signature
        self.arch = arch
        self.abi = spec.abi
        self.sites = spec.sites
        self.uses_barriers = spec.uses_barriers
        self.grid_x_factor = spec.grid_x_factor
        self.thread_index_ranks = spec.thread_index_ranks
        self._file = spec.cubin_files[arch]
        self._sha256 = spec.cubin_sha256[arch]

    @cached_property
    def cubin(self) -> bytes:
        """The cubin's bytes, checked against the SHA-256 the manifest records."""
        try:
            data = read_regular_file(self._file, MAX_CUBIN_BYTES)
        except OSError as exc:
            raise BundleError(f"the bundle's cubin {self._file} cannot be read: {exc}") from exc
        if hashlib.sha256(data).hexdigest() != self._sha256:
            raise BundleError(f"the bundle's cubin {self._file} was modified or damaged after "
                              "the build (its SHA-256 is not the manifest's): rebuild the "
                              "bundle with `oxide build`")
        return data

    def __repr__(self) -> str:
        return f"<BundledCode {self.name} for {self.arch}>"


class PrecompiledKernel:
    """A kernel from a bundle: launch it like the `@ox.kernel` it was built from."""

    gpu_only = True  # `ox.launch` on the CPU raises DeviceError(CPU_ERROR) instead of compiling

    def __init__(self, name: str, root: Path, data: dict[str, Any]) -> None:
        typevars: dict[str, T.TypeVar] = {}
        self.__name__ = self.__qualname__ = name
        self.params = tuple(Param(p["name"], spec_from_json(p["annotation"], typevars))
                            for p in data["params"])
        self.options = KernelOptions(**data["options"])
        self.specializations = [Specialization(self, root, s) for s in data["specializations"]]

    def compile(self, *args: Any, arch: str | None = None, target: str | None = None
                ) -> BundledCode:
        """The bundled code for `args` (types or example values) on a GPU of `arch`.

        Nothing compiles: a signature the bundle lacks is an ArgumentError naming
        the ones it has, and the CPU is a DeviceError.
        """
        if target == "cpu" or arch == "cpu":
            raise DeviceError(CPU_ERROR)
        wanted = signature_from(self, args)
        for spec in self.specializations:
            if spec.signature == wanted:
                return BundledCode(spec, spec.pick_arch(arch) if arch else
                                   next(iter(spec.cubin_files)))
        have = "; ".join(describe_signature(s.signature) for s in self.specializations)
        raise ArgumentError(f"the bundle has `{self.__name__}` for ({have}), not for "
                            f"({describe_signature(wanted)}): rebuild it with "
                            f"--sig \"{self.__name__}: {describe_signature(wanted)}\"")

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


class Bundle:
    """A loaded bundle: each kernel is an attribute (`bundle.scale`), also `bundle["scale"]`."""

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        self.path = path
        self.manifest = manifest
        self.kernels = {name: PrecompiledKernel(name, path, data)
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


def load_bundle(path: str | Path) -> Bundle:
    """Load a bundle directory written by `oxide build` (no compiler is imported).

    >>> b = ox.load_bundle("build/")   # doctest: +SKIP
    >>> b.scale[grid, block](x, 2.5, y) # doctest: +SKIP
    """
    root = Path(path)
    try:
        manifest = json.loads(read_regular_file(root / MANIFEST, MAX_MANIFEST_BYTES))
    except FileNotFoundError:
        raise BundleError(f"{root} is not an oxide bundle (no {MANIFEST}); "
                          "build one with `oxide build FILE.py -o DIR`") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise BundleError(f"{root / MANIFEST} cannot be read: {exc}") from exc
    if not isinstance(manifest, dict):
        raise BundleError(f"{root / MANIFEST} is not an oxide bundle manifest (not a JSON "
                          "object): rebuild it with `oxide build`")
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise BundleError(f"{root} holds a {manifest.get('format')} v{manifest.get('version')} "
                          f"manifest; this oxide reads {FORMAT} v{VERSION}: rebuild it")
    if manifest.get("sha256") != manifest_digest(manifest):
        raise BundleError(f"{root / MANIFEST} was modified or damaged after the build (its "
                          "SHA-256 does not match its contents): rebuild the bundle with "
                          "`oxide build`")
    try:
        return Bundle(root, manifest)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise BundleError(f"{root / MANIFEST} is malformed ({type(exc).__name__}: {exc}): "
                          "rebuild the bundle with `oxide build`") from None
