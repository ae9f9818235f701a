"""oxide's exceptions, and the Rust-style rendering of compile-time diagnostics.

Every error a user can cause is one of these classes. Compile errors carry a
`Span` and render as::

    oxide.SafetyError: `out` is a DisjointSlice: it can only be written at a ThreadIndex
      --> examples/scale.py:12:13
       |
    12 |         out[i + 1] = input[i] * factor
       |             ^^^^^ `i + 1` is a plain integer; arithmetic drops the uniqueness guarantee
       = help: write `out[i]`, or take responsibility with `with ox.unsafe():`
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Span", "OxideError", "CompileError", "KernelSyntaxError", "KernelTypeError",
    "SafetyError", "UnsupportedFeatureError", "TargetError", "LaunchError",
    "ArgumentError", "AliasingError", "KernelIndexError", "KernelAssertionError",
    "DeviceError", "InternalCompilerError", "PerformanceWarning",
]


@dataclass(frozen=True)
class Span:
    """A place in a user's source file: 1-based line, 0-based columns."""

    file: str
    line: int
    col: int
    end_col: int
    text: str  # the whole source line

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"


class PerformanceWarning(UserWarning):
    """A kernel that compiles and runs correctly but will be slow, and how to fix it (a
    tile too large for the registers). `warnings.simplefilter("error",
    ox.PerformanceWarning)` makes it an error; `"ignore"` silences it."""


class OxideError(Exception):
    """Base of every oxide exception."""


class CompileError(OxideError):
    """A kernel oxide cannot compile, with where and why."""

    def __init__(self, message: str, span: Span | None = None, label: str = "",
                 hint: str = "") -> None:
        self.message = message
        self.span = span
        self.label = label
        self.hint = hint
        super().__init__(self.render())

    @property
    def line(self) -> int | None:
        return self.span.line if self.span else None

    def render(self) -> str:
        lines = [self.message]
        if self.span is not None:
            s = self.span
            num = str(s.line)
            pad = " " * len(num)
            width = max(1, min(s.end_col, len(s.text)) - s.col) if s.end_col > s.col else 1
            lines.append(f"{pad}--> {s}")
            lines.append(f"{pad} |")
            lines.append(f"{num} | {s.text.rstrip()}")
            caret = " " * s.col + "^" * width
            lines.append(f"{pad} | {caret} {self.label}".rstrip())
        if self.hint:
            pad = " " * (len(str(self.span.line)) if self.span else 0)
            # a hint of several lines (a rewrite) keeps them under its first one
            first, *rest = self.hint.split("\n")
            lines.append(f"{pad} = help: {first}")
            lines.extend(f"{pad}         {line}" for line in rest)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()

    def __reduce__(self) -> tuple[object, ...]:
        # Keep the span and hint across pickling (process pools, pytest-xdist).
        return (type(self), (self.message, self.span, self.label, self.hint))


class KernelSyntaxError(CompileError):
    """Python the kernel language does not accept here (bad form, wrong arity)."""


class KernelTypeError(CompileError):
    """Types that do not fit: mismatched operands, rebinding a name to another type."""


class SafetyError(CompileError):
    """A write or access that breaks the parameter's discipline (races, unguarded writes)."""


class UnsupportedFeatureError(CompileError):
    """Python the kernel language does not support (classes, try, comprehensions...)."""


class TargetError(CompileError):
    """A feature the selected target (arch) lacks, or a toolchain piece that is missing."""


class InternalCompilerError(CompileError):
    """A bug in oxide. Please report it with the kernel that triggered it."""


class LaunchError(OxideError):
    """A launch that cannot run: bad configuration or arguments."""


class ArgumentError(LaunchError):
    """An argument that does not fit its parameter (dtype, rank, device, layout)."""


class AliasingError(LaunchError):
    """A writable array argument overlapping another array argument."""


class KernelIndexError(OxideError, IndexError):
    """A bounds check failed inside a kernel."""


class KernelAssertionError(OxideError, AssertionError):
    """An `assert` failed inside a kernel."""


class DeviceError(OxideError):
    """The device or driver reported a failure."""


# Tracebacks print `module.qualname: message`; name the classes as users import them
# (`oxide.SafetyError`, as in DESIGN.md §3), not by this private module. Pickling
# finds them there too: `oxide` re-exports every one.
for _cls in (OxideError, CompileError, KernelSyntaxError, KernelTypeError, SafetyError,
             UnsupportedFeatureError, TargetError, InternalCompilerError, LaunchError,
             ArgumentError, AliasingError, KernelIndexError, KernelAssertionError, DeviceError):
    _cls.__module__ = "oxide"
del _cls
