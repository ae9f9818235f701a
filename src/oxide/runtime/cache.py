"""The on-disk compile cache: cubins keyed by everything that shapes them.

Where: `$OXIDE_CACHE_DIR`, else `~/.cache/oxide`; `OXIDE_CACHE=0` turns it off.
An entry is one file, `kernels/<key>.oxk`: a magic line, a SHA-256 of the rest, a
JSON header (symbol, run-time check sites, argument sizes, grid factor, witness
ranks) and the cubin (runtime/cache_entry.py). The directory is marked as oxide's
with a CACHEDIR.TAG (runtime/cache_layout.py), so `oxide cache clear` can tell it
from a directory of the user's own files.

The key is computed *before* compiling, without the frontend, so a warm first
launch reads one file and never imports xdsl or llvmlite: the kernel's source
(file, line, text) and options, and, found by walking the body's names, every
module-level constant and `@ox.func` it can reach (their sources too), the
signature, the GPU architecture, oxide's compiler sources, and the versions of
llvmlite, xdsl, libdevice and nvJitLink. After a compile the compiler reports
what it actually folded and inlined; an entry is written only if the key
covered all of it (and never for kernels using `ox.ConstantArray`).

Writes are atomic (a temporary file, then `os.replace`), so concurrent processes
at worst compile the same kernel twice. Reads never block or run unbounded (a FIFO,
a symlink or a huge file in an entry's place is refused); an entry that does not
parse, fails its checksum, has a field of the wrong type or range, or whose key or
argument sizes disagree, is ignored, recompiled and replaced.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
import re
import types as pytypes
from pathlib import Path
from typing import Any

import numpy as np

from oxide import types as T
from oxide.cache_location import cache_dir  # noqa: F401 - this module's public name too
from oxide.codegen.switches import codegen_switches
from oxide.errors import Span
from oxide.runtime import cache_entry, cache_layout
from oxide.runtime.safe_read import read_regular_file
from oxide.specialize import ConstValue

FORMAT = 2  # 2: the checksum covers the whole entry, header included
_EXCLUDED = ("runtime", "cli", "examples")  # packages that do not shape compiled code
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class CachedSite:
    """A run-time check site read back from the cache (the compiler's `Site`, minus xdsl)."""

    __slots__ = ("kind", "span", "detail")

    def __init__(self, kind: str, span: Span, detail: str) -> None:
        self.kind = kind
        self.span = span
        self.detail = detail


# ---------------------------------------------------------------------------
# Keys


@functools.cache
def toolchain_fingerprint() -> str:
    """oxide's compiler sources and the versions of the tools under it (once per process).

    The sources' content hash is memoized in the cache directory under their stamp
    (each file's path, size and mtime), the test Python itself uses for .pyc files:
    a warm first launch then stats ~100 files instead of reading and hashing them.
    """
    h = hashlib.sha256(f"oxide-cache-{FORMAT}".encode())
    h.update(_sources_digest().encode())
    for dist in ("llvmlite", "xdsl"):
        h.update(f"{dist}={_dist_version(dist)}".encode())
    from oxide.codegen.toolchain import find_libdevice, find_nvjitlink

    for find in (find_libdevice, find_nvjitlink):
        try:
            path = find()
            st = os.stat(path)
            h.update(f"{path}:{st.st_size}:{st.st_mtime_ns}".encode())
        except Exception:  # a missing tool fails the compile itself, with its own message
            h.update(b"missing")
    return h.hexdigest()


def _sources_digest() -> str:
    """The content hash of the compiler's sources (the packages that shape compiled code)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sources = []
    for folder, subfolders, files in os.walk(root):  # not Path.rglob: its regexes cost ms
        if folder == root:
            subfolders[:] = [d for d in subfolders if d not in _EXCLUDED]
        rel = os.path.relpath(folder, root)
        sources += [os.path.normpath(os.path.join(rel, f)) for f in files if f.endswith(".py")]
    sources.sort()
    stamp = hashlib.sha256(root.encode())
    for rel in sources:
        st = os.stat(os.path.join(root, rel))
        stamp.update(f"\0{rel}:{st.st_size}:{st.st_mtime_ns}".encode())
    memo = _memo_path(stamp.hexdigest())
    try:  # like an entry, a memo may have been replaced by anything: never block on it
        known = read_regular_file(memo, 64).decode("ascii") if memo is not None else ""
        if len(known) == 64 and all(c in "0123456789abcdef" for c in known):
            return known
    except (OSError, UnicodeDecodeError):
        pass
    h = hashlib.sha256()
    for rel in sources:
        h.update(rel.encode())
        with open(os.path.join(root, rel), "rb") as f:
            h.update(f.read())
    digest = h.hexdigest()
    cache_root = cache_dir()
    if cache_root is not None:
        cache_layout.write(cache_root, f"sources/{stamp.hexdigest()}", digest.encode())
    return digest


def _memo_path(stamp: str) -> Path | None:
    root = cache_dir()
    return None if root is None else root / "sources" / stamp


def _dist_version(name: str) -> str:
    """An installed distribution's version from its dist-info name, without importing it
    (importlib.metadata alone costs tens of milliseconds)."""
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        return "absent"
    site = Path(spec.origin).resolve().parent.parent
    for entry in os.scandir(site):
        if entry.name.startswith(name + "-") and entry.name.endswith(".dist-info"):
            return entry.name[len(name) + 1:-len(".dist-info")]
    st = os.stat(spec.origin)
    return f"{spec.origin}:{st.st_size}:{st.st_mtime_ns}"


class _Fingerprint:
    """What a kernel's code can depend on, found statically from its AST."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.constants: dict[str, Any] = {}  # name or dotted path -> value
        self.functions: set[Any] = set()


def kernel_fingerprint(kernel: Any) -> _Fingerprint | None:
    """Memoized per kernel object (like its in-memory specializations, it assumes the
    module-level constants it reads do not change after the first launch)."""
    cached = kernel.__dict__.get("_oxide_fingerprint")
    if cached is None:
        try:
            fp = _Fingerprint()
            fp.parts.append(f"kernel {kernel.__qualname__} {kernel.options!r}")
            _walk(kernel.source, kernel.scope, fp)
            cached = fp
        except Exception:  # no source, odd objects: compile, but do not cache
            cached = False
        kernel.__dict__["_oxide_fingerprint"] = cached
    return cached or None


def _walk(source: Any, scope: Any, fp: _Fingerprint) -> None:
    fp.parts.append(f"source {source.file}:{source.first_line}\n{source.text}")
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Attribute):
            path = _dotted(node)
            if path is None:
                continue
            found, obj = scope.lookup(path[0])
            for attr in path[1:]:
                if not found:
                    break
                try:
                    obj = getattr(obj, attr)
                except Exception:
                    found = False
            if found:
                _record(".".join(path), obj, fp)
        elif isinstance(node, ast.Name):
            found, obj = scope.lookup(node.id)
            if found:
                _record(node.id, obj, fp)


def _dotted(node: ast.Attribute) -> list[str] | None:
    parts: list[str] = []
    cur: ast.AST = node
    while isinstance(cur, ast.Attribute):
        parts.append(cur.attr)
        cur = cur.value
    if not isinstance(cur, ast.Name):
        return None
    parts.append(cur.id)
    return parts[::-1]


def _record(name: str, obj: Any, fp: _Fingerprint) -> None:
    from oxide.kernel_types import DeviceFunction

    if isinstance(obj, (bool, int, float, np.generic)):
        fp.constants[name] = obj
    if isinstance(obj, DeviceFunction) and obj not in fp.functions:
        fp.functions.add(obj)
        fp.parts.append(f"func {obj.__qualname__ if hasattr(obj, '__qualname__') else name}")
        _walk(obj.source, obj.scope, fp)
    fp.parts.append(f"{name} = {_describe(obj)}")


def _describe(obj: Any, depth: int = 0) -> str:
    if isinstance(obj, (bool, int, float, str, type(None))):
        return f"{type(obj).__name__}:{obj!r}"
    if isinstance(obj, np.generic):
        return f"numpy.{obj.dtype}:{obj!r}"
    if isinstance(obj, (tuple, list)) and depth < 3 and len(obj) <= 64:
        return "(" + ", ".join(_describe(o, depth + 1) for o in obj) + ")"
    if isinstance(obj, pytypes.ModuleType):
        return f"module {obj.__name__}"
    if isinstance(obj, (T.DType, T.TypeVar, T.ArrayType, T.ConstType, T.TensorMapType)):
        return repr(obj)
    kind = type(obj)
    if (kind.__module__ or "").startswith("oxide"):
        return _ADDRESS.sub("", repr(obj))
    if callable(obj):
        return f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', kind.__name__)}"
    return f"{kind.__module__}.{kind.__qualname__}"


def signature_text(sig: tuple[Any, ...]) -> str | None:
    out = []
    for s in sig:
        if isinstance(s, T.ArrayType):
            vectors = "" if s.vectors is None else f" vectors={s.vectors}"
            out.append(f"array {s.access} {s.dtype.name} {s.rank} {s.contiguous}{vectors}")
        elif isinstance(s, T.TensorMapType):  # 128 bytes by value: its own parameter kind
            out.append(f"tensormap {s.dtype.name} {s.rank}")
        elif isinstance(s, T.DType):
            out.append(f"scalar {s.name}")
        elif isinstance(s, ConstValue):
            v = s.value
            if not isinstance(v, (bool, int, float, str, np.generic, T.DType)):
                return None  # no stable text for the value: compile, do not cache
            out.append(f"const {_describe(v)}")
        else:
            return None
    return "; ".join(out)


def entry_key(kernel: Any, signature: tuple[Any, ...], arch: str) -> str | None:
    """The cache key of one specialization, or None when it cannot be cached (or when
    `OXIDE_DUMP` asks to see the compile's stages, which a cache hit would skip)."""
    if cache_dir() is None or os.environ.get("OXIDE_DUMP"):
        return None
    fp = kernel_fingerprint(kernel)
    sig = signature_text(signature)
    if fp is None or sig is None:
        return None
    h = hashlib.sha256(toolchain_fingerprint().encode())
    if os.environ.get("OXIDE_LINEINFO") == "1":  # line tables change the cubin
        arch += "+lineinfo"
    if os.environ.get("OXIDE_DRIVER_JIT") == "1":  # the image is the PTX (module_image)
        arch += "+driver-jit"
    (wgmma, tma, producer, _, persistent, pingpong, overlap, uniform_role,
     row_staging, register_order, reorder_everywhere, exp2_ftz,
     pingpong_issue, two_blocks, column_groups) = codegen_switches()
    arch += "".join(name for name, on in (
        ("+no-wgmma", not wgmma),  # tile products stay on mma.sync
        ("+no-tma", not tma),  # tile K loops copy by cp.async only
        ("+no-producer", not producer),  # thread 0 issues the TMA copies
        ("+no-persistent", not persistent),  # one block per logical block
        ("+pingpong", pingpong),  # warp groups take turns at the tensor cores
        ("+pingpong-issue", pingpong_issue),  # a turn lasts one product's issue
        ("+overlap", overlap),  # product loops rotated (tile/overlap.py)
        ("+uniform-role", uniform_role),  # roles by a shuffled warp group index
        ("+no-row-staging", not row_staging),  # wide rows spill as ptxas chooses
        ("+no-register-order", not register_order),  # blocks in the lowering's order
        ("+register-order-everywhere", reorder_everywhere),  # every block reordered
        ("+exp2-ftz", exp2_ftz),  # f32 exp2 flushes subnormal results (GPU)
        ("+two-blocks", two_blocks),  # 4-warp product loops take two blocks an SM
        ("+no-column-groups", not column_groups),  # 64-row tiles on 8 warps on mma.sync
    ) if on)
    for part in (*fp.parts, sig, arch):
        h.update(b"\0" + part.encode())
    return h.hexdigest()


def choice_path(folder: str, salt: str, kernel: Any, *parts: str) -> Path | None:
    """`<cache dir>/<folder>/<sha256>.json`: the file of a choice made for `kernel` (an
    autotune's config, the warps of `num_warps="auto"`), keyed by oxide's sources and
    tools, the kernel's fingerprint and `parts`; None when nothing goes to disk
    (`OXIDE_CACHE=0`, or a kernel whose source the compile cache cannot key)."""
    root = cache_dir()
    fp = kernel_fingerprint(kernel) if root is not None else None
    if root is None or fp is None:
        return None
    h = hashlib.sha256(salt.encode())
    for part in (toolchain_fingerprint(), *fp.parts, *parts):
        h.update(b"\0" + part.encode())
    return root / folder / f"{h.hexdigest()}.json"


def covered(kernel: Any, ck: Any) -> bool:
    """Whether the key covered what the compile used: every folded constant (same value,
    same type) and every inlined @ox.func; and no constant memory."""
    fp = kernel_fingerprint(kernel)
    if fp is None or getattr(ck, "constants", None):
        return False
    folded = getattr(ck, "folded", None)
    functions = getattr(ck, "functions", None)
    if folded is None or functions is None:
        return False
    missing = object()
    for name, value in folded.items():
        seen = fp.constants.get(name, missing)
        if seen is missing or type(seen) is not type(value) or seen != value:
            return False
    return all(f in fp.functions for f in functions)


# ---------------------------------------------------------------------------
# Entries


def _path(key: str) -> Path | None:
    root = cache_dir()
    return None if root is None else root / "kernels" / f"{key}.oxk"


def load(key: str, arg_sizes: tuple[int, ...]) -> Any:
    """The KernelImage stored under `key`, or None (missing, corrupt, foreign or stale).

    Never blocks and never reads without bound: the entry must be a regular file (not a
    FIFO, not a symlink to a device) of bounded size, intact under its checksum, with
    every header field well-typed (runtime/cache_entry.py); anything else is a miss, and
    the launch recompiles and atomically replaces it.
    """
    from oxide.runtime.kernel_image import KernelImage

    entry = load_entry(key, arg_sizes)
    if entry is None:
        return None
    from oxide.codegen.abi import OperandMap

    maps = tuple(OperandMap.from_json(m) for m in entry.operand_maps)
    return KernelImage(entry.cubin, entry.symbol, cached_sites(entry), entry.arg_sizes,
                       grid_x_factor=entry.grid_x_factor,
                       thread_index_ranks=entry.thread_index_ranks, operand_maps=maps)


def load_entry(key: str, arg_sizes: tuple[int, ...]) -> cache_entry.EntryData | None:
    """The checked entry stored under `key` (a cubin, or host object code), or None."""
    path = _path(key)
    if path is None:
        return None
    try:
        return cache_entry.decode(read_regular_file(path, cache_entry.MAX_ENTRY_BYTES), key,
                                  arg_sizes)
    except (OSError, cache_entry.CorruptEntry):
        return None


def cached_sites(entry: cache_entry.EntryData) -> list[CachedSite]:
    """The run-time check sites of an entry, for the error messages of its launches."""
    return [CachedSite(s["kind"], Span(s["file"], s["line"], s["col"], s["end_col"],
                                       s["text"]), s["detail"]) for s in entry.sites]


def store(key: str, image: Any, ck: Any) -> bool:
    """Write an entry (atomically) if the key covered what `ck`'s compile used."""
    return store_entry(key, ck, image.symbol, image.arg_sizes, image.grid_x_factor,
                       image.thread_index_ranks, image.sites, image.code,
                       image.operand_maps)


def store_entry(key: str, ck: Any, symbol: str, arg_sizes: tuple[int, ...],
                grid_x_factor: int, thread_index_ranks: tuple[int, ...], sites: Any,
                code: bytes, operand_maps: tuple[Any, ...] = ()) -> bool:
    """Write an entry (a cubin, or host object code) atomically, if the key covered what
    `ck`'s compile used."""
    root = cache_dir()
    if root is None or not covered(ck.kernel, ck):
        return False
    site_dicts = tuple({"kind": s.kind, "file": s.span.file, "line": s.span.line,
                        "col": s.span.col, "end_col": s.span.end_col, "text": s.span.text,
                        "detail": s.detail} for s in sites)
    entry = cache_entry.EntryData(symbol, tuple(arg_sizes), grid_x_factor,
                                  tuple(thread_index_ranks), site_dicts, code,
                                  tuple(m.to_json() for m in operand_maps))
    return cache_layout.write(root, f"kernels/{key}.oxk", cache_entry.encode(key, entry))
