"""Markers in the mstx / msproftx shape: `mark`, `range_start`/`range_end`, `push`/`pop`, `range`.

    from prof_engine import mstx
    mstx.mark("checkpoint saved")
    with mstx.range("forward"):             # push/pop on this thread; also a decorator:
        ...                                 #   @mstx.range("load_batch")
    rid = mstx.range_start("prefetch")      # may end on another thread
    mstx.range_end(rid)

While no Profiler runs, each call is one module-flag test and returns (tens of ns). While one
runs, a call appends one tuple to a list, nothing else: pairing, nesting and conversion happen in
the collector's writer process (`prof_engine.collect.convert`). `list.append` and `del lst[:n]`
are each atomic under the GIL, so threads record without locks and the Profiler takes each step's
events with `take()` without losing one appended meanwhile.

Events are tuples `(code, time_ns, native thread id, message, domain, range id)`.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

MARK, PUSH, POP, START, END = 0, 1, 2, 3, 4

_on = False  # set by the running Profiler; the only thing a marker call looks at when off
_events: list[tuple] = []
_append = _events.append
_now = time.time_ns  # the epoch clock Kineto's timestamps are on, so markers line up with torch ops
_tid = threading.get_native_id  # the OS thread id, as Kineto's `tid`
_ids = itertools.count(1)  # next() on itertools.count is atomic under the GIL

F = TypeVar("F", bound=Callable[..., Any])


def mark(message: str, domain: str | None = None) -> None:
    """An instant marker (a row of `marks`)."""
    if _on:
        _append((MARK, _now(), _tid(), message, domain, 0))


def push(message: str, domain: str | None = None) -> None:
    """Open a range on this thread; `pop()` closes the innermost one (a `user_range` slice)."""
    if _on:
        _append((PUSH, _now(), _tid(), message, domain, 0))


def pop() -> None:
    """Close the innermost range this thread opened with `push()`; without one, nothing happens."""
    if _on:
        _append((POP, _now(), _tid(), None, None, 0))


def range_start(message: str, domain: str | None = None) -> int:
    """Open a range that any thread may end with `range_end(id)`; returns its id (0 when off)."""
    if not _on:
        return 0
    rid = next(_ids)
    _append((START, _now(), _tid(), message, domain, rid))
    return rid


def range_end(range_id: int) -> None:
    """End the range `range_start` returned `range_id` for."""
    if _on and range_id:
        _append((END, _now(), _tid(), None, None, range_id))


class range:  # noqa: A001 - mstx's own name for it
    """`with mstx.range("forward"):` or `@mstx.range("load")`: push on entry, pop on exit."""

    __slots__ = ("message", "domain")

    def __init__(self, message: str, domain: str | None = None) -> None:
        self.message = message
        self.domain = domain

    def __enter__(self) -> range:
        if _on:
            _append((PUSH, _now(), _tid(), self.message, self.domain, 0))
        return self

    def __exit__(self, *exc: object) -> None:
        if _on:
            _append((POP, _now(), _tid(), None, None, 0))

    def __call__(self, func: F) -> F:
        message, domain = self.message, self.domain

        @functools.wraps(func)
        def ranged(*args: Any, **kwargs: Any) -> Any:
            if not _on:
                return func(*args, **kwargs)
            _append((PUSH, _now(), _tid(), message, domain, 0))
            try:
                return func(*args, **kwargs)
            finally:
                if _on:
                    _append((POP, _now(), _tid(), None, None, 0))

        return ranged  # type: ignore[return-value]


def enable(on: bool) -> None:
    """Turn recording on or off (the Profiler does this; users need not)."""
    global _on
    _on = on


def enabled() -> bool:
    return _on


def _forked() -> None:
    """A forked child (a DataLoader worker) records nothing: no Profiler there takes its events."""
    global _on
    _on = False
    del _events[:]


os.register_at_fork(after_in_child=_forked)


def take() -> list[tuple]:
    """Remove and return the events recorded so far, oldest first."""
    n = len(_events)
    taken = _events[:n]
    del _events[:n]
    return taken
