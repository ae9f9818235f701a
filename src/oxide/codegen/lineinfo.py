"""Line information in the PTX (`.loc`/`.file`), so that Nsight Compute, compute-sanitizer and
cuda-gdb's source view show the kernel's Python lines: the equivalent of nvcc's `-lineinfo`.

On with `@ox.kernel(lineinfo=True)` or `OXIDE_LINEINFO=1` (GPU targets only). The frontend
records each op's statement (`IRBuilder.origins`: the call sites that inlined it, then the
statement itself); the Emitter attaches the innermost statement's line to every LLVM
instruction the op becomes, as a DILocation in the function's DISubprogram, and the module
gets a compile unit with `emissionKind: DebugDirectivesOnly`: line directives, no variable
or type information. The PTX instructions are the same as without it (only `.loc`/`.file`
and labels are added; compared on the sgemm and transpose examples).
"""

from __future__ import annotations

import os
from typing import Any

BASE = 10_000_000  # metadata ids from here: the emitter's own (branch weights, loops) are lower


def enabled(option: bool) -> bool:
    """Whether a compile emits line information: the kernel option, or OXIDE_LINEINFO=1."""
    return option or os.environ.get("OXIDE_LINEINFO") == "1"


class LineTable:
    """The debug metadata of one module: files, subprograms and the locations used.

    `body_scope` is the DISubprogram of the function holding the kernel's body (the
    kernel itself, or the inlined `.body` of a coarsened kernel); `entry_location()` is a
    location in the coarsened kernel's own entry, which calls that body.
    """

    def __init__(self, main_file: str, symbol: str, line: int) -> None:
        self.nodes: list[str] = []
        self.next_id = BASE
        self.files: dict[str, str] = {}
        self.scopes: dict[tuple[str, str], str] = {}
        self.locations: dict[tuple[int, int, str], str] = {}
        main = self.file(main_file)
        self.unit = self.node(f"distinct !DICompileUnit(language: DW_LANG_Python, file: {main}, "
                              'producer: "oxide", isOptimized: true, runtimeVersion: 0, '
                              "emissionKind: DebugDirectivesOnly)")
        self.no_types = self.node("!DISubroutineType(types: !{null})")
        self.symbol, self.body_file, self.line = symbol, main_file, line
        self.body_scope = self.subprogram(symbol, main_file, line)
        self.entry_scope = ""

    def entry_location(self) -> str:
        """A location in the coarsened kernel's entry (its `def` line), whose calls of the
        body need one: an inlinable call in a function with debug information must."""
        if not self.entry_scope:
            self.entry_scope = self.subprogram(self.symbol, self.body_file, self.line)
        return self.node(f"!DILocation(line: {self.line}, column: 1, scope: {self.entry_scope})")

    def node(self, text: str) -> str:
        name = f"!{self.next_id}"
        self.next_id += 1
        self.nodes.append(f"{name} = {text}")
        return name

    def file(self, path: str) -> str:
        if path not in self.files:
            directory, name = os.path.split(os.path.abspath(path))
            self.files[path] = self.node(f'!DIFile(filename: "{_escape(name)}", '
                                         f'directory: "{_escape(directory)}")')
        return self.files[path]

    def subprogram(self, name: str, path: str, line: int) -> str:
        """A function's DISubprogram; its `define` carries `!dbg` with it."""
        f = self.file(path)
        return self.node(f'distinct !DISubprogram(name: "{_escape(name)}", scope: {f}, '
                         f"file: {f}, line: {line}, type: {self.no_types}, scopeLine: {line}, "
                         f"spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: {self.unit})")

    def location(self, span: Any, subprogram: str, subprogram_file: str) -> str:
        """The DILocation of a source span inside `subprogram` (a line of another file, an
        inlined @ox.func's, goes through a DILexicalBlockFile of that file)."""
        scope = subprogram
        if span.file != subprogram_file:
            key = (subprogram, span.file)
            if key not in self.scopes:
                self.scopes[key] = self.node(f"!DILexicalBlockFile(scope: {subprogram}, "
                                             f"file: {self.file(span.file)}, discriminator: 0)")
            scope = self.scopes[key]
        key2 = (span.line, span.col + 1, scope)
        if key2 not in self.locations:
            self.locations[key2] = self.node(f"!DILocation(line: {span.line}, "
                                             f"column: {span.col + 1}, scope: {scope})")
        return self.locations[key2]

    def module_lines(self) -> list[str]:
        version = self.node('!{i32 2, !"Debug Info Version", i32 3}')
        dwarf = self.node('!{i32 2, !"Dwarf Version", i32 2}')
        return [*self.nodes, f"!llvm.dbg.cu = !{{{self.unit}}}",
                f"!llvm.module.flags = !{{{version}, {dwarf}}}"]


def _escape(text: str) -> str:
    return text.replace("\\", "\\5C").replace('"', "\\22")
