"""What the collector records itself → canonical record batches: markers, samples, steps.

Runs in the writer process. Marker events (see `mstx`) arrive step by step; push/pop pairs are
matched per thread with a stack that lives across steps, so a range keeps its true nesting even
when it spans steps: its depth and parent are stated here (the store keeps a stated nesting).
Ranges from `range_start`/`range_end` may cross threads, so they carry no stated nesting; the
store nests them among themselves on the thread that started them, within their batch.

A record belongs to the step whose [start, end) holds its start time, and is kept only if that
step was recorded (a range: the step it started in). These records are staged under one file
index, `MARKER_FILE`, with absolute times; their ids continue across batches.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from prof_engine import schema
from prof_engine.collect.mstx import END, MARK, POP, PUSH, START

MARKER_FILE = 1  # file index of the collector's own records in every batch (torch cycles use 2, 3, ...)

Sink = Callable[[str, pa.RecordBatch], None]


@dataclass(frozen=True)
class StepWindow:
    """One step as the Profiler saw it: number, [start, end) on the epoch clock, recorded or not."""

    step: int | None  # None without a schedule: the steps are not numbered
    start_ns: int
    end_ns: int
    recorded: bool


class Tables:
    """Column buffers for the tables the collector writes itself."""

    def __init__(self) -> None:
        self.cols: dict[str, dict[str, list[Any]]] = {
            name: {c: [] for c in schema.tables()[name].column_names} for name in ("slices", "marks", "counters")
        }

    def add(self, table: str, **values: object) -> None:
        for column, buf in self.cols[table].items():
            buf.append(values.get(column))

    def clear(self) -> None:
        for cols in self.cols.values():
            for buf in cols.values():
                buf.clear()

    def flush(self, sink: Sink) -> int:
        n = 0
        for name, cols in self.cols.items():
            if cols["rank"]:
                n += len(cols["rank"])
                sink(name, pa.RecordBatch.from_pydict(cols, schema=schema.tables()[name].arrow_schema))
        self.clear()
        return n


class Assembler:
    """Turns the Profiler's per-step hand-offs into slices, marks and counters rows."""

    def __init__(self, own_steps: bool) -> None:
        self.own_steps = own_steps  # write step records (when no torch cycle brings ProfilerStep#N)
        self.pid = str(os.getpid())
        self.seq = MARKER_FILE << 40
        self.windows: list[StepWindow] = []
        self.stacks: dict[int, list[tuple[int | None, str, str | None, int, int | None]]] = {}
        self.open: dict[int, tuple[str, str | None, int, int, int | None]] = {}
        self.tables = Tables()

    def _next_id(self) -> int:
        self.seq += 1
        return self.seq

    def _step_of(self, t: int) -> int | None:
        for w in reversed(self.windows):
            if w.start_ns <= t:
                return w.step if t < w.end_ns or w is self.windows[-1] else None
        return None

    def _recorded(self, step: int | None) -> bool:
        return any(w.step == step and w.recorded for w in self.windows)

    def step_done(self, window: StepWindow, events: list[tuple], samples: list[tuple[int, dict[str, float]]]) -> None:
        """Convert one step's markers and samples (and its step record when writing our own)."""
        self.windows = [*self.windows[-2:], window]
        if self.own_steps and window.recorded:
            self._slice(
                name=f"ProfilerStep#{window.step}",
                kind="step",
                category="prof_engine",
                ts=window.start_ns,
                dur=window.end_ns - window.start_ns,
                tid=None,
                step=window.step,
                id=self._next_id(),
            )
        for ev in events:
            self._event(ev)
        for t, values in samples:
            step = self._step_of(t)
            if self._recorded(step):
                for key, value in values.items():
                    name, series = key.split("/", 1)
                    self.tables.add(
                        "counters",
                        rank=MARKER_FILE,
                        device="host",
                        step=step,
                        name=name,
                        series=series,
                        ts=t,
                        value=value,
                        pid=self.pid,
                    )

    def _event(self, ev: tuple) -> None:
        code, t, tid, message, domain, rid = ev
        if code == PUSH:
            self._push(t, tid, message, domain)
        elif code == POP:
            self._pop(t, tid)
        elif code == MARK:
            step = self._step_of(t)
            if self._recorded(step):
                self.tables.add(
                    "marks",
                    rank=MARKER_FILE,
                    device="host",
                    step=step,
                    name=str(message),
                    category=domain or "mstx",
                    ts=t,
                    pid=self.pid,
                    tid=str(tid),
                    scope="t",
                )
        elif code == START:
            self.open[rid] = (str(message), domain, t, tid, self._step_of(t))
        elif code == END and rid in self.open:
            message, domain, start, start_tid, step = self.open.pop(rid)
            if self._recorded(step):
                args = json.dumps({"end_tid": tid}) if tid != start_tid else None
                self._slice(
                    name=message,
                    kind="user_range",
                    category=domain or "mstx",
                    ts=start,
                    dur=t - start,
                    tid=str(start_tid),
                    step=step,
                    id=self._next_id(),
                    args=args,
                )

    def _push(self, t: int, tid: int, message: str, domain: str | None) -> None:
        stack = self.stacks.setdefault(tid, [])
        step = self._step_of(t)
        rid = self._next_id() if self._recorded(step) else None  # only recorded ranges get ids and rows
        stack.append((rid, str(message), domain, t, step))

    def _pop(self, t: int, tid: int) -> None:
        stack = self.stacks.get(tid)
        if not stack:
            return  # a pop without its push (pushed before the Profiler started): nothing to close
        rid, message, domain, start, step = stack.pop()
        if rid is None:
            return
        ancestors = [entry[0] for entry in stack if entry[0] is not None]
        self._slice(
            name=message,
            kind="user_range",
            category=domain or "mstx",
            ts=start,
            dur=t - start,
            tid=str(tid),
            step=step,
            id=rid,
            depth=len(ancestors),
            parent_id=ancestors[-1] if ancestors else None,
        )

    def _slice(self, **values: object) -> None:
        self.tables.add("slices", rank=MARKER_FILE, device="host", pid=self.pid, **values)

    def open_ranges(self) -> int:
        """Ranges pushed or started but never closed (left out of the run)."""
        return sum(1 for s in self.stacks.values() for e in s if e[0] is not None) + len(self.open)
