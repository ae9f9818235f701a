"""A tile lowering attempt's warnings are held per thread (tile/held_warnings.py): given on
where the attempt is kept, dropped where it raises, and never caught by an attempt that
another thread runs at the same time."""

from __future__ import annotations

import threading
import warnings

import pytest

from oxide.errors import PerformanceWarning
from oxide.tile.held_warnings import held, warn_at


def said(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record]


def test_kept_attempts_speak_and_dropped_ones_do_not() -> None:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError):
            with held():
                warn_at("dropped", PerformanceWarning, "k.py", 3)
                raise RuntimeError
        with held():
            warn_at("kept", PerformanceWarning, "k.py", 4)
            with held():  # an inner attempt kept: held on by the outer one
                warn_at("inner", PerformanceWarning, "k.py", 5)
            assert record == []
    assert said(record) == ["kept", "inner"]
    assert [(w.filename, w.lineno) for w in record] == [("k.py", 4), ("k.py", 5)]


def test_another_thread_is_not_held() -> None:
    """While one thread holds its attempt's warnings, another thread's warning reaches
    the user at once, and the first thread's comes when its attempt is kept."""
    inside, go_on = threading.Event(), threading.Event()

    def attempt() -> None:
        with held():
            warn_at("first thread", PerformanceWarning, "a.py", 1)
            inside.set()
            go_on.wait(10)

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        first = threading.Thread(target=attempt)
        first.start()
        assert inside.wait(10)
        second = threading.Thread(
            target=warn_at, args=("second thread", PerformanceWarning, "b.py", 2))
        second.start()
        second.join()
        assert said(record) == ["second thread"]
        go_on.set()
        first.join()
    assert said(record) == ["second thread", "first thread"]
