"""Device-side names the frontend recognizes.

Each is an `Intrinsic`: a marker object the frontend resolves by `name` when it
compiles a kernel. Called from ordinary Python they raise, because they only
mean something on a thread of a launch.
"""

from __future__ import annotations

from typing import Any, NoReturn


class Intrinsic:
    """A device-side function; `name` is the key the frontend dispatches on."""

    def __init__(self, name: str, doc: str = "") -> None:
        self.name = name
        self.__doc__ = doc
        self.__name__ = name.rsplit(".", 1)[-1]

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise RuntimeError(
            f"`{self.name}` only works inside an @ox.kernel or @ox.func; "
            "call the kernel through ox.launch or kernel[config](...)")

    def __repr__(self) -> str:
        return f"<oxide device function {self.name}>"


class Namespace:
    """A group of intrinsics reached by attribute (`ox.math.sqrt`, `ox.warp.shuffle`)."""

    def __init__(self, name: str, members: dict[str, str], doc: str = "") -> None:
        self.__name__ = name
        self.__doc__ = doc
        for attr, text in members.items():
            setattr(self, attr, Intrinsic(f"{name}.{attr}", text))

    def __repr__(self) -> str:
        return f"<oxide device namespace {self.__name__}>"


class RegisterGroup:
    """`ox.thread_idx`, `ox.block_idx`...: `.x`, `.y`, `.z` read a hardware register."""

    def __init__(self, reg: str, doc: str) -> None:
        self.reg = reg
        self.__doc__ = doc

    def __getattr__(self, axis: str) -> NoReturn:
        raise RuntimeError(f"`{self.reg}.{axis}` is a GPU register: read it inside a kernel")

    def __repr__(self) -> str:
        return f"<oxide register group {self.reg}>"
