"""Ahead-of-time compilation: kernels to a bundle directory (`oxide build`).

The writing half of `oxide.runtime.bundle` (which documents the format): it
compiles each kernel specialization for each architecture through the usual
pipeline and records what a launch needs without the compiler.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oxide import __version__
from oxide.errors import UnsupportedFeatureError
from oxide.runtime.bundle import FORMAT, MANIFEST, VERSION, manifest_digest, spec_to_json


@dataclass(frozen=True)
class Job:
    """One kernel, one concrete signature: compiled once per architecture."""

    name: str
    kernel: Any
    args: tuple[Any, ...]  # for kernel.compile: types, or ConstValues


def _site_json(site: Any) -> dict[str, Any]:
    s = site.span
    return {"kind": site.kind, "file": s.file, "line": s.line, "col": s.col,
            "end_col": s.end_col, "text": s.text, "detail": site.detail}


def _kernel_json(kernel: Any) -> dict[str, Any]:
    o = kernel.options
    return {"params": [{"name": p.name, "annotation": spec_to_json(p.annotation)}
                       for p in kernel.params],
            "options": {"checks": o.checks, "contract": o.contract,
                        "max_threads": o.max_threads},
            "specializations": []}


def build_bundle(jobs: Iterable[Job], archs: list[str], out: str | Path, source: str = "",
                 progress: Callable[[str], None] = lambda step: None) -> Path:
    """Compile every job for every arch into `out`; returns the manifest's path.

    `progress` is told each finished step ("scale sm_90"), for a progress display.
    The manifest is written last, so a failed build never leaves a loadable bundle.
    """
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    (root / MANIFEST).unlink(missing_ok=True)
    kernels: dict[str, Any] = {}
    for job in jobs:
        entry = kernels.setdefault(job.name, _kernel_json(job.kernel))
        index = len(entry["specializations"])
        cubins, digests = {}, {}
        for arch in archs:
            ck = job.kernel.compile(*job.args, arch=arch)
            if ck.constants:
                raise UnsupportedFeatureError(
                    f"`{job.name}` reads ox.ConstantArray values, which a bundle cannot carry "
                    "yet: pass them as a Slice parameter instead")
            rel = f"{job.name}.{index}.{arch}.cubin"
            (root / rel).write_bytes(ck.cubin)
            cubins[arch] = rel
            digests[arch] = hashlib.sha256(ck.cubin).hexdigest()
            progress(f"{job.name} {arch}")
        entry["specializations"].append({
            "symbol": ck.name,
            "signature": [spec_to_json(s) for s in ck.signature],
            "abi": [{"name": a.name, "spec": spec_to_json(a.spec)} for a in ck.abi],
            "sites": [_site_json(s) for s in ck.sites],
            "uses_barriers": ck.uses_barriers,
            "grid_x_factor": ck.grid_x_factor,
            "thread_index_ranks": list(ck.thread_index_ranks),
            "cubins": cubins,
            "cubin_sha256": digests,
        })
    manifest = {"format": FORMAT, "version": VERSION, "oxide_version": __version__,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "source": source,
                "archs": archs, "kernels": kernels}
    manifest["sha256"] = manifest_digest(manifest)
    path = root / MANIFEST
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    return path
