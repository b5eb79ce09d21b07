"""Begin/end pairing of Chrome trace events into duration records, for one file.

Owns what the trace event format leaves open between a begin and its end:

* `B`/`E` on a thread: an `E` closes the innermost open `B` of its (pid, tid).
* Nestable async `b`/`e` (and their instants `n`): the events of one (category, id) form one
  tree on a track of their own (tid `async:<cat>:<id>`), so they never enter the thread's call
  tree; an `e` closes the innermost open `b` of its name, and the `b`s opened inside that one and
  still open are closed with it (as Catapult and Trace Compass show them: children end with their
  parent). An `e` with no name closes the innermost one.
* Legacy async `S`/`F` (steps `T`/`p` become marks): one operation per (category, name, id) on a
  track `async:<cat>:<name>:<id>`.
* An end with no open begin is dropped and counted (`unmatched_ends`). A begin never ended is kept,
  closed at the latest end among the events of its thread (or async track) read after it, as
  Perfetto's trace processor shows such a slice ('Did not end'), and counted (`unclosed_slices`).

The ids `id` or `id2` (`{"local": ...}`: per process, `{"global": ...}`: across processes) name
an async operation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import msgspec

from prof_engine.importers.jsonstream import Event
from prof_engine.importers.keys import _text
from prof_engine.importers.units import us_text_to_ns

# Phases whose duration records are made when their end arrives (so records of a chunk holding
# them are made in event order, one event at a time: ids do not depend on where chunks are cut).
PAIRED_PHASES = frozenset("BEbeSF")
_ASYNC_BEGIN, _ASYNC_END = frozenset("bS"), frozenset("eF")

Key = tuple[str, str]
Emit = Callable[[Event, int], None]  # (begin event, its tid set to its track; duration ns)


def _async_id(ev: Event) -> tuple[bool, str]:
    """(process-scoped, id) of an async event: `id`, else `id2.local` / `id2.global`."""
    if ev.id is not None:
        return True, str(ev.id)
    id2 = getattr(ev, "id2", None)
    if isinstance(id2, dict):
        if "global" in id2:
            return False, str(id2["global"])
        if "local" in id2:
            return True, str(id2["local"])
    return True, ""


def async_track(ev: Event) -> Key:
    """The (pid key, tid) of the async track an async event belongs to (pid key "" for global ids)."""
    local, ident = _async_id(ev)
    cat = _text(ev.cat) or ""
    tid = f"async:{cat}:{_text(ev.name) or ''}:{ident}" if ev.ph in "SFTp" else f"async:{cat}:{ident}"
    return (_text(ev.pid) or "" if local else ""), tid


class Pairing:
    """The open begins of one file's threads and async tracks."""

    def __init__(self, emit: Emit) -> None:
        self.emit = emit
        self.threads: dict[Key, list[Event]] = {}
        self.thread_end: dict[Key, int] = {}  # threads with open B: latest end read since
        self.tracks: dict[Key, list[Event]] = {}
        self.track_end: dict[Key, int] = {}
        self.unclosed: Counter[str] = Counter()  # begins closed by no end, by name
        self.unmatched: Counter[str] = Counter()  # ends that closed nothing, by name (or phase)

    # -- threads ----------------------------------------------------------------------------
    def begin(self, ev: Event) -> None:
        key, ts = (_text(ev.pid) or "", _text(ev.tid) or ""), us_text_to_ns(ev.ts)
        self.threads.setdefault(key, []).append(ev)  # (one with no time still takes its E)
        self.thread_end[key] = max(self.thread_end.get(key, 0), ts or 0)

    def end(self, ev: Event) -> None:
        key = (_text(ev.pid) or "", _text(ev.tid) or "")
        stack = self.threads.get(key)
        if not stack:
            self.unmatched[_text(ev.name) or "E"] += 1
            return
        begin = stack.pop()
        if not stack:
            del self.threads[key]
            self.thread_end.pop(key, None)
        start, stop = us_text_to_ns(begin.ts), us_text_to_ns(ev.ts)
        if start is not None and stop is not None:
            self.emit(begin, stop - start)

    def see(self, pid: str, tid: str, end: int) -> None:
        """An event of thread (pid, tid) read after its open B's, ending at `end`."""
        key = (pid, tid)
        if key in self.thread_end and end > self.thread_end[key]:
            self.thread_end[key] = end

    def see_event(self, ev: Event) -> None:
        if not self.thread_end:
            return
        key = (_text(ev.pid) or "", _text(ev.tid) or "")
        if key in self.thread_end:
            ts = us_text_to_ns(ev.ts)
            if ts is not None:
                self.see(*key, ts + max(us_text_to_ns(ev.dur) or 0, 0) if ev.ph == "X" else ts)

    # -- async tracks -------------------------------------------------------------------------
    def _track(self, ev: Event) -> tuple[Key, int | None]:
        key, ts = async_track(ev), us_text_to_ns(ev.ts)
        if ts is not None:
            self.track_end[key] = max(self.track_end.get(key, ts), ts)
        return key, ts

    def async_event(self, ev: Event) -> None:
        """A `b`, `e`, `S` or `F` event."""
        key, ts = self._track(ev)
        if ts is None:
            return
        if ev.ph in _ASYNC_BEGIN:
            self.tracks.setdefault(key, []).append(msgspec.structs.replace(ev, tid=key[1]))
            return
        stack = self.tracks.get(key, [])
        name = _text(ev.name)
        at = next((i for i in range(len(stack) - 1, -1, -1) if not name or _text(stack[i].name) == name), None)
        if at is None:
            self.unmatched[name or ev.ph] += 1
            return
        for begin in reversed(stack[at + 1 :]):  # opened inside the one this ends and still open
            self.unclosed[_text(begin.name) or ""] += 1
            self._close(begin, ts)
        self._close(stack[at], ts)
        del stack[at:]
        if not stack:
            del self.tracks[key]

    def track_point(self, ev: Event) -> str:
        """The tid of an async instant (`n`, `T`, `p`): its track's."""
        return self._track(ev)[0][1]

    def _close(self, begin: Event, ts: int) -> None:
        start = us_text_to_ns(begin.ts)
        if start is not None:
            self.emit(begin, ts - start)

    # -- end of file --------------------------------------------------------------------------
    def finish(self) -> None:
        """Close what no end closed, at the latest end read on its thread or track."""
        for stacks, ends in ((self.threads, self.thread_end), (self.tracks, self.track_end)):
            for key, stack in stacks.items():
                for begin in reversed(stack):
                    self.unclosed[_text(begin.name) or ""] += 1
                    self._close(begin, ends[key])
            stacks.clear()
            ends.clear()

    def findings(self) -> list[tuple[str, int, str]]:
        """(rule, count, detail) of what pairing had to guess or drop."""
        out = []
        for rule, counts, what in (
            ("unclosed_slices", self.unclosed, "begins never ended"),
            ("unmatched_ends", self.unmatched, "ends with no open begin"),
        ):
            if counts:
                names = ", ".join(f"{n!r} ({c})" for n, c in counts.most_common(3))
                out.append((rule, sum(counts.values()), f"{what}: {names}{' ...' if len(counts) > 3 else ''}"))
        return out
