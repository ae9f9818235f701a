"""One disk-cache entry as bytes: the layout, its checksum, and a strict reading of its header.

Layout (format 2)::

    MAGIC | SHA-256 of everything after it (32 bytes) | header length (u32 LE) | header | code

The code is a cubin for a GPU entry (or NUL-terminated PTX, for a kernel the driver
JIT-compiles: `CompiledKernel.module_image`) and an ELF object file for a CPU one (hosts
whose objects are not ELF simply never hit). The checksum covers the header as well as the code: a header is code too (its
`grid_x_factor` decides how many blocks a launch runs, so a flipped digit there made a
GPU write half its outputs with no error). The header is a JSON object whose every
field is checked for type and range here, so a damaged or foreign entry is reported as
one `CorruptEntry` and recompiled, never an AttributeError or a wrong launch.

Stdlib only: the warm path reads entries without importing xdsl or llvmlite.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from dataclasses import dataclass
from typing import Any

from oxide.codegen.persistent_grid import GRID_BYTES, is_persistent
from oxide.runtime.witness_rules import is_launch_rule

MAGIC = b"OXIDE-KERNEL-CACHE 2\n"
_DIGEST = 32
_LENGTH = struct.Struct("<I")
MAX_ENTRY_BYTES = 512 << 20  # far above any cubin; a bound on what a damaged entry makes us read
MAX_HEADER_BYTES = 16 << 20

# codegen/coarsen.py's FACTOR, or 1 (not imported from there: that module imports xdsl);
# tests/test_trust_cli_cache.py checks the two agree.
GRID_X_FACTORS = frozenset({1, 4})

_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]{0,1023}")
_FIELDS = frozenset({"key", "symbol", "arg_sizes", "grid_x_factor", "thread_index_ranks",
                     "sites", "operand_maps"})
_MAP_FIELDS = {"param": int, "dtype": str, "box": list, "swizzle": int}
_TENSORMAP_BYTES = 128  # a hidden tensor map's size among arg_sizes (codegen/abi.py)
_SITE_FIELDS = {"kind": str, "file": str, "line": int, "col": int, "end_col": int,
                "text": str, "detail": str}


class CorruptEntry(ValueError):
    """An entry that is not a well-formed format-2 entry for the key asked for."""


@dataclass(frozen=True)
class EntryData:
    """What a checked entry holds (the runtime builds its KernelImage from it)."""

    symbol: str
    arg_sizes: tuple[int, ...]
    grid_x_factor: int
    thread_index_ranks: tuple[int, ...]
    sites: tuple[dict[str, Any], ...]  # each with exactly _SITE_FIELDS, checked
    cubin: bytes
    # hidden tensor maps (codegen/abi.py `OperandMap.to_json`), each with _MAP_FIELDS
    operand_maps: tuple[dict[str, Any], ...] = ()


def encode(key: str, entry: EntryData) -> bytes:
    """The bytes of an entry for `key`."""
    header = {"key": key, "symbol": entry.symbol, "arg_sizes": list(entry.arg_sizes),
              "grid_x_factor": entry.grid_x_factor,
              "thread_index_ranks": list(entry.thread_index_ranks),
              "sites": [dict(s) for s in entry.sites],
              "operand_maps": [dict(m) for m in entry.operand_maps]}
    raw = json.dumps(header, separators=(",", ":")).encode()
    body = _LENGTH.pack(len(raw)) + raw + entry.cubin
    return MAGIC + hashlib.sha256(body).digest() + body


def decode(data: bytes, key: str, arg_sizes: tuple[int, ...]) -> EntryData:
    """The entry in `data`, if it is intact, is for `key` and packs `arg_sizes`; else raises
    CorruptEntry saying what is wrong."""
    if not data.startswith(MAGIC):
        raise CorruptEntry("not an oxide format-2 cache entry (magic)")
    start = len(MAGIC) + _DIGEST
    body = memoryview(data)[start:]
    if len(body) < _LENGTH.size or hashlib.sha256(body).digest() != data[len(MAGIC):start]:
        raise CorruptEntry("checksum mismatch (truncated or modified)")
    (n,) = _LENGTH.unpack_from(body)
    if n > min(MAX_HEADER_BYTES, len(body) - _LENGTH.size):
        raise CorruptEntry("header length out of range")
    try:
        header = json.loads(bytes(body[_LENGTH.size:_LENGTH.size + n]))
    except ValueError as exc:  # UnicodeDecodeError included
        raise CorruptEntry(f"header is not JSON: {exc}") from None
    except RecursionError:
        raise CorruptEntry("header nests too deeply") from None
    cubin = bytes(body[_LENGTH.size + n:])
    entry = _checked(header, cubin)
    if header["key"] != key:
        raise CorruptEntry("entry is for another key")
    # the launch packs its own values and the record; the entry's hidden arguments stand
    # between: a persistent kernel's logical grid, then the tensor maps
    grid = GRID_BYTES if is_persistent(entry.symbol, cubin) else ()
    packed = (arg_sizes[:-1] + grid + (_TENSORMAP_BYTES,) * len(entry.operand_maps)
              + arg_sizes[-1:])
    if entry.arg_sizes != packed:
        raise CorruptEntry(f"entry packs arguments {entry.arg_sizes}, the launch {packed}")
    return entry


def _checked(header: Any, cubin: bytes) -> EntryData:
    """Every header field, checked for type and range (bool is not an int here)."""
    if not isinstance(header, dict) or set(header) != _FIELDS:
        raise CorruptEntry("header is not an object with the format-2 fields")
    if not isinstance(header["key"], str):
        raise CorruptEntry("key is not a string")
    symbol = header["symbol"]
    if not isinstance(symbol, str) or not _SYMBOL.fullmatch(symbol):
        raise CorruptEntry("symbol is not a kernel symbol")
    sizes = _ints(header["arg_sizes"], "arg_sizes")
    if not all(0 < s <= 4096 for s in sizes):
        raise CorruptEntry("arg_sizes out of range")
    factor = header["grid_x_factor"]
    if type(factor) is not int or factor not in GRID_X_FACTORS:
        raise CorruptEntry(f"grid_x_factor {factor!r} is not one oxide emits")
    ranks = _ints(header["thread_index_ranks"], "thread_index_ranks")
    if not all(map(is_launch_rule, ranks)) or list(ranks) != sorted(set(ranks)):
        raise CorruptEntry("thread_index_ranks out of range")
    sites = header["sites"]
    if not isinstance(sites, list):
        raise CorruptEntry("sites is not a list")
    for site in sites:
        if not isinstance(site, dict) or set(site) != set(_SITE_FIELDS) or not all(
                type(site[f]) is t for f, t in _SITE_FIELDS.items()):
            raise CorruptEntry("a site is not a well-formed check site")
        if min(site["line"], site["col"], site["end_col"]) < 0:
            raise CorruptEntry("a site has a negative position")
    maps = header["operand_maps"]
    if not isinstance(maps, list) or not all(
            isinstance(m, dict) and set(m) == set(_MAP_FIELDS)
            and all(type(m[f]) is t for f, t in _MAP_FIELDS.items())
            and all(type(b) is int and 0 < b <= 256 for b in m["box"])
            and m["swizzle"] in (32, 64, 128) and m["param"] >= 0 for m in maps):
        raise CorruptEntry("operand_maps is not a list of well-formed tensor maps")
    if not _defines(cubin, symbol):
        raise CorruptEntry("the code is neither ELF code nor PTX defining the entry's symbol")
    return EntryData(symbol, sizes, factor, ranks, tuple(sites), cubin, tuple(maps))


def _defines(code: bytes, symbol: str) -> bool:
    """Whether `code` is ELF code naming `symbol`, or NUL-terminated PTX that declares
    it as a kernel entry."""
    if code.startswith(b"\x7fELF"):
        return symbol.encode() + b"\0" in code
    return (code.endswith(b"\0") and b"\0" not in code[:-1]
            and re.search(rb"\.entry\s+" + re.escape(symbol.encode()) + rb"\s*\(", code)
            is not None)


def _ints(value: Any, name: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(type(v) is int for v in value):
        raise CorruptEntry(f"{name} is not a list of integers")
    return tuple(value)
