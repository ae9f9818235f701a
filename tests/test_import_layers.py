"""oxide's import graph: no cycles, and the stages import one way (docs/architecture.md,
"Layers").

The graph counts EVERY import of an oxide module, the lazy ones inside functions
included (a lazy import still ties two modules together: it only hides the cycle
from the import system until the call). An edge `a -> b` is `a` importing `b`;
`from oxide.x import y` is an edge to `oxide.x.y` where that is a module, else to
`oxide.x`. The same logic as `.probe/cycles.py all`.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import oxide

SRC = Path(oxide.__file__).resolve().parent.parent

# Strongly connected components still known to be there, each as the frozenset of its
# modules. It may only shrink: a cycle not listed here fails the test, and so does a
# listed one that is gone (remove it from here then).
KNOWN_CYCLES: set[frozenset[str]] = set()

Edge = tuple[str, str, str, int]  # (importer, imported, file, line)


def module_files(root: Path) -> dict[str, Path]:
    """Every module under `root` (a directory holding packages) by dotted name."""
    mods: dict[str, Path] = {}
    for path in root.rglob("*.py"):
        name = ".".join(path.with_suffix("").relative_to(root).parts)
        if name.endswith(".__init__"):
            name = name[: -len(".__init__")]
        mods[name] = path
    return mods


def _absolute(module: str, node: ast.ImportFrom, is_package: bool) -> str | None:
    """The absolute module a (possibly relative) `from ... import` names."""
    if node.level == 0:
        return node.module
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    if node.level - 1 > len(base):
        return None
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_edges(mods: dict[str, Path]) -> list[Edge]:
    """Every import, anywhere in a module, of another module of `mods`."""
    edges: list[Edge] = []
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(name, node, is_package)
                if base is None:
                    continue
                subs = [f"{base}.{a.name}" for a in node.names]
                found = [s for s in subs if s in mods]
                targets = found if len(found) == len(subs) else [base, *found]
            for target in targets:
                if target in mods and target != name:
                    edges.append((name, target, str(path), node.lineno))
    return edges


def components(nodes: list[str], edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    graph: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b, _, _ in edges:
        graph[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack.add(v)
            succ = graph[v]
            if i < len(succ):
                work.append((v, i + 1))
                w = succ[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
            if work:  # back in the caller: fold the callee's low link in
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return out


def _describe(comp: list[str], edges: list[Edge]) -> str:
    inside = set(comp)
    return "\n".join(f"  {a} -> {b}  ({Path(f).relative_to(SRC)}:{line})"
                     for a, b, f, line in sorted(edges) if a in inside and b in inside)


@pytest.fixture(scope="module")
def graph() -> tuple[dict[str, Path], list[Edge]]:
    mods = module_files(SRC)
    return mods, import_edges(mods)


def test_no_new_import_cycles(graph: tuple[dict[str, Path], list[Edge]]) -> None:
    mods, edges = graph
    found = {frozenset(c) for c in components(sorted(mods), edges)}
    new = [sorted(c) for c in found - KNOWN_CYCLES]
    assert not new, "import cycles (docs/architecture.md, \"Layers\"):\n" + "\n\n".join(
        f"{len(c)} modules: {', '.join(c)}\n{_describe(c, edges)}" for c in new)
    gone = [sorted(c) for c in KNOWN_CYCLES - found]
    assert not gone, f"these cycles are gone: remove them from KNOWN_CYCLES: {gone}"


def _package(module: str) -> str:
    """`frontend` for `oxide.frontend.lower`, `` for a top-level module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 else ""


STAGES = ("frontend", "ir", "passes", "codegen", "runtime", "tile")
# The tile API module (`@ox.tile.kernel` is an oxide.Kernel) and the tile package's
# own namespace may import oxide.kernel; nothing else of the stages may.
TILE_API = {"oxide.tile.kernel", "oxide.tile"}
# imports of codegen from frontend/ or runtime/ that are allowed, each with its reason:
# the toolchain memo (where libdevice and nvJitLink were found) is a file of oxide's cache
# directory, written through the cache's own layout rules (marker, atomic writes), in a
# function; moving cache_layout.py out of runtime/ would cut it
CODEGEN_EXCEPTIONS: set[tuple[str, str]] = set()


def layer_violations(edges: list[Edge]) -> list[str]:
    """The imports that go against the layer order, as text."""
    bad = []
    for a, b, f, line in edges:
        pa, pb = _package(a), _package(b)
        where = f"{a} -> {b}  ({f}:{line})"
        if (pa in STAGES and a not in TILE_API
                and b in ("oxide.kernel", "oxide.compiler")):
            bad.append(f"{where}: the stages are below oxide.kernel and oxide.compiler")
        elif pa == "codegen" and pb in ("frontend", "runtime") and (a, b) not in CODEGEN_EXCEPTIONS:
            bad.append(f"{where}: codegen imports nothing from the frontend or the runtimes")
        elif pa in ("ir", "passes") and pb in ("codegen", "runtime"):
            bad.append(f"{where}: ir and passes import nothing from codegen or the runtimes")
    return bad


def test_stages_import_down_the_layers(graph: tuple[dict[str, Path], list[Edge]]) -> None:
    _, edges = graph
    bad = layer_violations(edges)
    assert not bad, "imports against the layers (docs/architecture.md):\n" + "\n".join(bad)


def _tree(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return module_files(root)


def test_the_graph_sees_lazy_relative_and_submodule_imports(tmp_path: Path) -> None:
    """The checker itself: a cycle closed only by an import inside a function, one through
    `from pkg import submodule` and one through a relative import are all found, and a
    one-way chain is not a cycle."""
    mods = _tree(tmp_path, {
        "p/__init__.py": "",
        "p/a.py": "from p import b\n",
        "p/b.py": "def f():\n    from p.a import x\n",
        "p/c.py": "from . import d\n",
        "p/d.py": "import p.c\n",
        "p/e.py": "from p.a import y\n",
    })
    edges = import_edges(mods)
    assert ("p.b", "p.a") in {(a, b) for a, b, _, _ in edges}
    assert components(sorted(mods), edges) == [["p.a", "p.b"], ["p.c", "p.d"]]


def test_the_layer_rules_catch_an_upward_import() -> None:
    edges = [("oxide.runtime.gpu", "oxide.kernel", "gpu.py", 3),
             ("oxide.codegen.emit", "oxide.frontend.builder", "emit.py", 4),
             ("oxide.passes.safety", "oxide.runtime.views", "safety.py", 5),
             ("oxide.tile.kernel", "oxide.kernel", "kernel.py", 6),
             ("oxide.kernel", "oxide.runtime.launch", "kernel.py", 7),
             ("oxide.runtime.gpu", "oxide.codegen.abi", "gpu.py", 8)]
    bad = layer_violations(edges)
    assert [b.split("  ")[0] for b in bad] == [
        "oxide.runtime.gpu -> oxide.kernel", "oxide.codegen.emit -> oxide.frontend.builder",
        "oxide.passes.safety -> oxide.runtime.views"]


def test_import_oxide_loads_no_compiler_backend() -> None:
    """The cuts keep `import oxide` light: no xdsl, llvmlite or CUDA bindings."""
    code = ("import sys, oxide; print(sorted(m for m in ('xdsl', 'llvmlite', 'cuda', "
            "'cuda.bindings') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
