"""Ahead-of-time compilation: kernels to a bundle (`oxide build`).

The writing half of `oxide.runtime.bundle` (which documents the format): it
compiles each kernel specialization for each architecture through the usual
pipeline and records what a launch needs without the compiler: per GPU
architecture a cubin and its PTX (an `sm_XXa` build has no PTX: it runs on that
GPU only), for `cpu` this host's object code, and each `ox.ConstantArray` the
kernels read with the values it holds now. The output is a directory, or one
file when its name ends in `.oxb` (a zip archive of the same files).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import time
import types
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oxide import __version__
from oxide.codegen.abi import logical_grid_abi
from oxide.errors import InternalCompilerError
from oxide.runtime.bundle import (
    FORMAT,
    MANIFEST,
    ONE_FILE_SUFFIX,
    VERSION,
    manifest_digest,
    spec_to_json,
)

__all__ = ["Job", "build_bundle"]

CPU = "cpu"


@dataclass(frozen=True)
class Job:
    """One kernel, one concrete signature: compiled once per architecture."""

    name: str
    kernel: Any
    args: tuple[Any, ...]  # for kernel.compile: types, or ConstValues


def is_one_file(out: str | Path) -> bool:
    """Whether `oxide build -o out` writes one file (`NAME.oxb`) rather than a directory."""
    return str(out).endswith(ONE_FILE_SUFFIX)


def _site_json(site: Any) -> dict[str, Any]:
    s = site.span
    return {"kind": site.kind, "file": s.file, "line": s.line, "col": s.col,
            "end_col": s.end_col, "text": s.text, "detail": site.detail}


def _kernel_json(kernel: Any) -> dict[str, Any]:
    o = kernel.options
    return {"params": [{"name": p.name, "annotation": spec_to_json(p.annotation)}
                       for p in kernel.params],
            "options": {"checks": o.checks, "contract": o.contract,
                        "max_threads": o.max_threads,
                        # the launch checks the declared block; the GPU stack a recursive
                        # kernel needs is reserved at load
                        "block": list(o.block) if o.block else None,
                        "stack_size": o.stack_size},
            "specializations": []}


class _Constants:
    """The ConstantArrays the bundle's kernels read, one declaration per array object,
    named as the kernel's module names it (`COEFFS`, or `tables.COEFFS`)."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}  # id(array) -> name
        self.declared: dict[str, dict[str, Any]] = {}
        self.arrays: list[Any] = []  # kept alive while their ids are keys

    def refs(self, kernel: Any, constants: list[tuple[str, Any]]) -> list[dict[str, str]]:
        return [{"symbol": symbol, "name": self.name(kernel, symbol, arr)}
                for symbol, arr in constants]

    def name(self, kernel: Any, symbol: str, arr: Any) -> str:
        known = self.names.get(id(arr))
        if known is not None:
            return known
        name = _constant_name(kernel, arr) or f"{kernel.__name__}.{symbol}"
        if name in self.declared:  # another array of that name (from another module)
            name = f"{kernel.fn.__module__}.{name}"
        n = 2
        while name in self.declared:
            name, n = f"{name}#{n}", n + 1
        values = arr.values
        self.declared[name] = {
            "dtype": arr.dtype.name, "shape": list(arr.shape),
            "values": None if values is None else base64.b64encode(values.tobytes()).decode()}
        self.names[id(arr)] = name
        self.arrays.append(arr)
        return name


def _constant_name(kernel: Any, arr: Any) -> str | None:
    """The name `kernel` reads `arr` by: a global of its module, a closure variable, or an
    attribute of a module it imports (`tables.COEFFS`)."""
    fn = kernel.fn
    for name, value in fn.__globals__.items():
        if value is arr:
            return str(name)
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False):
        try:
            if cell.cell_contents is arr:
                return str(name)
        except ValueError:  # an empty cell
            continue
    for mod_name, module in fn.__globals__.items():
        if isinstance(module, types.ModuleType):
            for name, value in vars(module).items():
                if value is arr:
                    return f"{mod_name}.{name}"
    return None


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _host_json(job: Job, index: int, files: dict[str, bytes], consts: _Constants
               ) -> tuple[dict[str, Any], Any]:
    """This CPU's object code for `job`, as the manifest's `host` entry."""
    from oxide.codegen.host import host_target_id

    ck = job.kernel.compile(*job.args, target="cpu")
    obj = ck.host_object[0]
    rel = f"{job.name}.{index}.cpu.o"
    files[rel] = obj
    return {"target": host_target_id(), "file": rel, "sha256": _digest(obj),
            "entry": f"{ck.name}_launch", "sites": [_site_json(s) for s in ck.sites],
            "thread_index_ranks": list(ck.thread_index_ranks),
            "constants": consts.refs(job.kernel, list(ck.constants))}, ck


def build_bundle(jobs: Iterable[Job], archs: list[str], out: str | Path, source: str = "",
                 progress: Callable[[str], None] = lambda step: None) -> Path:
    """Compile every job for every arch (`sm_XX`, or `cpu` for this host) into `out`;
    returns the manifest's path (for a one-file bundle, the file's).

    `progress` is told each finished step ("scale sm_90"), for a progress display.
    The manifest is written last (a one-file bundle is renamed into place whole), so a
    failed build never leaves a loadable bundle.
    """
    files: dict[str, bytes] = {}
    consts = _Constants()
    kernels: dict[str, Any] = {}
    for job in jobs:
        entry = kernels.setdefault(job.name, _kernel_json(job.kernel))
        index = len(entry["specializations"])
        spec: dict[str, Any] = {"cubins": {}, "cubin_sha256": {}, "ptx": {}, "ptx_sha256": {},
                                "operand_maps": {}}
        gpu_ck = host_ck = None
        for arch in archs:
            if arch == CPU:
                spec["host"], host_ck = _host_json(job, index, files, consts)
            else:
                gpu_ck = job.kernel.compile(*job.args, arch=arch)
                # a kernel using sm_90a-only instructions compiles for sm_90a when asked
                # for sm_90: label its cubin so, and ship no PTX (it runs on no later GPU)
                actual = gpu_ck.arch or arch
                cubin = gpu_ck.cubin
                rel = f"{job.name}.{index}.{actual}"
                files[rel + ".cubin"] = cubin
                spec["cubins"][actual] = rel + ".cubin"
                spec["cubin_sha256"][actual] = _digest(cubin)
                if gpu_ck.operand_maps:  # this arch's hidden tensor maps (sm_90's TMA)
                    spec["operand_maps"][actual] = [m.to_json() for m in gpu_ck.operand_maps]
                if not actual.endswith("a"):
                    ptx = gpu_ck.ptx.encode()
                    files[rel + ".ptx"] = ptx
                    spec["ptx"][actual] = rel + ".ptx"
                    spec["ptx_sha256"][actual] = _digest(ptx)
            progress(f"{job.name} {arch}")
        ck = gpu_ck or host_ck
        if ck is None:
            raise InternalCompilerError("build_bundle needs at least one architecture")
        spec.update({
            "symbol": ck.name,
            "signature": [spec_to_json(s) for s in ck.signature],
            # the parameters' own; an arch's hidden ones follow: the logical grid where its
            # code walks it (its marker global), then its tensor maps (`operand_maps`)
            "abi": [{"name": a.name, "spec": spec_to_json(a.spec)}
                    for a in ck.abi[:len(ck.abi) - _hidden_params(ck)]],
            "sites": [_site_json(s) for s in ck.sites],
            "uses_barriers": ck.uses_barriers,
            "grid_x_factor": ck.grid_x_factor,
            "thread_index_ranks": list(ck.thread_index_ranks),
            "constants": consts.refs(job.kernel, list(ck.constants)),
        })
        entry["specializations"].append(spec)
    manifest = {"format": FORMAT, "version": VERSION, "oxide_version": __version__,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "source": source,
                "archs": archs, "constants": consts.declared, "kernels": kernels}
    manifest["sha256"] = manifest_digest(manifest)
    text = (json.dumps(manifest, indent=2) + "\n").encode()
    if is_one_file(out):
        return _write_one_file(Path(out), files, text)
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    (root / MANIFEST).unlink(missing_ok=True)
    for rel, data in files.items():
        (root / rel).write_bytes(data)
    path = root / MANIFEST
    path.write_bytes(text)
    return path


def _write_one_file(path: Path, files: dict[str, bytes], manifest: bytes) -> Path:
    """The bundle as one zip archive, written beside `path` and renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # as `open` would, umask
    try:
        with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as z:
            for rel, data in files.items():
                z.writestr(rel, data)
            z.writestr(MANIFEST, manifest)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def __dir__() -> list[str]:
    """`dir()` lists the API (`__all__`), not the modules and typing names it is built from."""
    return sorted({*__all__, *(n for n in globals() if n.startswith("__"))})


def _hidden_params(ck: Any) -> int:
    """How many of `ck`'s machine parameters the compiler added after the kernel's own."""
    grid = len(logical_grid_abi()) if getattr(ck, "persistent_grid", False) else 0
    return grid + len(getattr(ck, "operand_maps", ()))
