"""The on-disk compile cache: cubins keyed by everything that shapes them.

Where: `$OXIDE_CACHE_DIR`, else `~/.cache/oxide`; `OXIDE_CACHE=0` turns it off.
An entry is one file, `kernels/<key>.oxk`: a magic line, a JSON header (symbol,
run-time check sites, argument sizes, the cubin's SHA-256) and the cubin.

The key is computed *before* compiling, without the frontend, so a warm first
launch reads one file and never imports xdsl or llvmlite: the kernel's source
(file, line, text) and options, and, found by walking the body's names, every
module-level constant and `@ox.func` it can reach (their sources too), the
signature, the GPU architecture, oxide's compiler sources, and the versions of
llvmlite, xdsl, libdevice and nvJitLink. After a compile the compiler reports
what it actually folded and inlined; an entry is written only if the key
covered all of it (and never for kernels using `ox.ConstantArray`).

Writes are atomic (a temporary file, then `os.replace`), so concurrent processes
at worst compile the same kernel twice; an entry that does not parse, or whose
checksum, key or argument sizes disagree, is ignored and rewritten.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import re
import struct
import types as pytypes
from pathlib import Path
from typing import Any

import numpy as np

from oxide import types as T
from oxide.errors import Span
from oxide.specialize import ConstValue

FORMAT = 1
MAGIC = b"OXIDE-KERNEL-CACHE\n"
_HEADER = struct.Struct("<I")
_EXCLUDED = ("runtime", "cli", "examples")  # packages that do not shape compiled code
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def cache_dir() -> Path | None:
    """The cache directory, or None when `OXIDE_CACHE=0` turns the cache off."""
    if os.environ.get("OXIDE_CACHE", "1") == "0":
        return None
    return Path(os.environ.get("OXIDE_CACHE_DIR") or Path.home() / ".cache" / "oxide")


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
    try:
        known = memo.read_text() if memo is not None else ""
        if len(known) == 64 and all(c in "0123456789abcdef" for c in known):
            return known
    except OSError:
        pass
    h = hashlib.sha256()
    for rel in sources:
        h.update(rel.encode())
        with open(os.path.join(root, rel), "rb") as f:
            h.update(f.read())
    digest = h.hexdigest()
    if memo is not None:
        _write_atomically(memo, digest.encode())
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
    from oxide.kernel import DeviceFunction

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
    if isinstance(obj, (T.DType, T.TypeVar, T.ArrayType, T.ConstType)):
        return repr(obj)
    kind = type(obj)
    if (kind.__module__ or "").startswith("oxide"):
        return _ADDRESS.sub("", repr(obj))
    if callable(obj):
        return f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', kind.__name__)}"
    return f"{kind.__module__}.{kind.__qualname__}"


def _signature_text(sig: tuple[Any, ...]) -> str | None:
    out = []
    for s in sig:
        if isinstance(s, T.ArrayType):
            out.append(f"array {s.access} {s.dtype.name} {s.rank} {s.contiguous}")
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
    """The cache key of one specialization, or None when it cannot be cached."""
    if cache_dir() is None:
        return None
    fp = kernel_fingerprint(kernel)
    sig = _signature_text(signature)
    if fp is None or sig is None:
        return None
    h = hashlib.sha256(toolchain_fingerprint().encode())
    for part in (*fp.parts, sig, arch):
        h.update(b"\0" + part.encode())
    return h.hexdigest()


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
    """The KernelImage stored under `key`, or None (missing, corrupt, foreign or stale)."""
    from oxide.runtime.gpu import KernelImage

    path = _path(key)
    if path is None:
        return None
    try:
        data = path.read_bytes()
        if not data.startswith(MAGIC):
            return None
        start = len(MAGIC) + _HEADER.size
        (n,) = _HEADER.unpack_from(data, len(MAGIC))
        header = json.loads(data[start:start + n])
        cubin = data[start + n:]
        if (header.get("key") != key or tuple(header["arg_sizes"]) != arg_sizes
                or hashlib.sha256(cubin).hexdigest() != header["cubin_sha256"]):
            return None
        sites = [CachedSite(s["kind"], Span(s["file"], s["line"], s["col"], s["end_col"],
                                            s["text"]), s["detail"]) for s in header["sites"]]
        # An entry without the witness ranks predates the launch check: recompile it.
        ranks = tuple(int(r) for r in header["thread_index_ranks"])
        return KernelImage(cubin, header["symbol"], sites, arg_sizes,
                           grid_x_factor=int(header.get("grid_x_factor", 1)),
                           thread_index_ranks=ranks)
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None


def store(key: str, image: Any, ck: Any) -> bool:
    """Write an entry (atomically) if the key covered what `ck`'s compile used."""
    path = _path(key)
    if path is None or not covered(ck.kernel, ck):
        return False
    header = {
        "key": key, "symbol": image.symbol, "arg_sizes": list(image.arg_sizes),
        "grid_x_factor": image.grid_x_factor,
        "thread_index_ranks": list(image.thread_index_ranks),
        "cubin_sha256": hashlib.sha256(image.cubin).hexdigest(),
        "sites": [{"kind": s.kind, "file": s.span.file, "line": s.span.line, "col": s.span.col,
                   "end_col": s.span.end_col, "text": s.span.text, "detail": s.detail}
                  for s in image.sites],
    }
    raw = json.dumps(header).encode()
    return _write_atomically(path, MAGIC + _HEADER.pack(len(raw)) + raw + image.cubin)


def _write_atomically(path: Path, data: bytes) -> bool:
    """Write through a temporary file and a rename, so readers never see half a file;
    False when the disk refuses (read-only, full): the cache is an optimization."""
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        return False
    return True
