"""The host and lane passes of finalisation (`store/host_pass.py`, `store/lane_pass.py`): in C
(`host_pass.c`, `lanes.c`, through the extension `_ext`) where it is built, else their Python
ports (`fallback.py`). `host_pass()` and `lanes()` are the one place that chooses; the two kinds
of each pass have the same methods and give the same results.
"""

from __future__ import annotations

from typing import Protocol

import pyarrow as pa

from prof_engine._native import load
from prof_engine._native.fallback import PythonHostPass, PythonLanes, Rows


class HostPass(Protocol):
    def run(
        self, lane: pa.Array, rank: pa.Array, ts: pa.Array, dur: pa.Array, ids: pa.Array, nests: pa.Array
    ) -> list[pa.Array]:
        """Step, depth and parent of a batch of the sorted host records (`host_pass.c`)."""

    def step_at(self, rank: pa.Array, ts: pa.Array) -> pa.Array:
        """The steps of records in any order."""


class Lanes(Protocol):
    def run(self, key: pa.Array, b: pa.Array, s: pa.Array, e: pa.Array) -> Rows:
        """The lanes of a batch of intervals sorted by key and start (`lanes.c`)."""

    def finish(self) -> Rows:
        """The last key's lanes."""


def host_pass(rank: pa.Array, start: pa.Array, end: pa.Array, step: pa.Array, known: pa.Array) -> HostPass:
    """A host pass over the steps (int64 rank, start, end, step sorted by rank and start; uint8
    `known`: 0 where the step number is NULL)."""
    return (
        PythonHostPass(rank, start, end, step, known)
        if load() is None
        else NativeHostPass(rank, start, end, step, known)
    )


def lanes() -> Lanes:
    """A lane pass."""
    return PythonLanes() if load() is None else NativeLanes()


def _values(column: pa.Array, width: int = 8) -> pa.Buffer | bytes:
    """The values of a non-null array of `width`-byte items, for the extension (the passes' inputs
    have no NULLs)."""
    if column.null_count:
        raise ValueError("host pass: NULL in a sorted key")
    data = column.buffers()[1]
    return b"" if data is None else data.slice(column.offset * width, len(column) * width)


class NativeHostPass:
    """The pass in C (`host_pass.c`); its state is freed with this object, once the connection's
    `step_at` is gone too."""

    def __init__(self, rank: pa.Array, start: pa.Array, end: pa.Array, step: pa.Array, known: pa.Array) -> None:
        from prof_engine._native import _ext

        self.state = _ext.host_new(
            len(rank), _values(rank), _values(start), _values(end), _values(step), _values(known, 1)
        )

    def step_at(self, rank: pa.Array, ts: pa.Array) -> pa.Array:
        from prof_engine._native import _ext

        n = len(rank)
        step, valid = pa.allocate_buffer(8 * n), pa.allocate_buffer((n + 7) // 8)
        _ext.step_at(self.state, n, _values(rank), _values(ts), step, valid)
        return pa.Array.from_buffers(pa.int64(), n, [valid, step])

    def run(
        self, lane: pa.Array, rank: pa.Array, ts: pa.Array, dur: pa.Array, ids: pa.Array, nests: pa.Array
    ) -> list[pa.Array]:
        from prof_engine._native import _ext

        n = len(ids)
        bits = (n + 7) // 8
        step, depth, parent = pa.allocate_buffer(8 * n), pa.allocate_buffer(4 * n), pa.allocate_buffer(8 * n)
        step_valid, depth_valid, parent_valid = (pa.allocate_buffer(bits) for _ in range(3))
        _ext.host_pass(
            self.state,
            n,
            _values(lane),
            _values(rank),
            _values(ts),
            _values(dur),
            _values(ids),
            _values(nests, 1),
            step,
            step_valid,
            depth,
            depth_valid,
            parent,
            parent_valid,
        )
        return [
            pa.Array.from_buffers(pa.int64(), n, [step_valid, step]),
            pa.Array.from_buffers(pa.int32(), n, [depth_valid, depth]),
            pa.Array.from_buffers(pa.int64(), n, [parent_valid, parent]),
        ]


class NativeLanes:
    """The pass in C (`lanes.c`)."""

    def __init__(self) -> None:
        from prof_engine._native import _ext

        self.state = _ext.lanes_new()

    def run(self, key: pa.Array, b: pa.Array, s: pa.Array, e: pa.Array) -> Rows:
        from prof_engine._native import _ext

        n = len(key)
        out = _outputs(6 * n + 6)  # a key's first row gives none, each later one at most 3, its end at most 6
        return _rows(_ext.lanes(self.state, n, _values(key), _values(b, 1), _values(s), _values(e), *out), *out)

    def finish(self) -> Rows:
        from prof_engine._native import _ext

        out = _outputs(6)
        return _rows(_ext.lanes_finish(self.state, *out), *out)


def _outputs(room: int) -> list[pa.Buffer]:
    return [
        pa.allocate_buffer(8 * room),
        pa.allocate_buffer(room),
        pa.allocate_buffer(8 * room),
        pa.allocate_buffer(8 * room),
    ]


def _rows(n: int, key: pa.Buffer, lane: pa.Buffer, s: pa.Buffer, e: pa.Buffer) -> Rows:
    return (
        pa.Array.from_buffers(pa.int64(), n, [None, key]),
        pa.Array.from_buffers(pa.int8(), n, [None, lane]),
        pa.Array.from_buffers(pa.int64(), n, [None, s]),
        pa.Array.from_buffers(pa.int64(), n, [None, e]),
    )
