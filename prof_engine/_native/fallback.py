"""The Python ports of the native passes, for installs where the extension is not built (no C
compiler at install) or not wanted (`PROF_ENGINE_NATIVE=0`): `PythonHostPass` is `host_pass.c`,
`PythonLanes` is `lanes.c`, the same algorithms giving the same results, ~3x slower. `passes.py`
chooses between them and the C; the tests check each port equal to its C twin
(tests/test_host_pass.py, tests/test_lane_pass.py). The port of the scanner, `scan.c`, is the
chunk source `pychunks.py` (tests/test_native_scan.py).
"""

from __future__ import annotations

import bisect

import pyarrow as pa

# A pass's lanes: the key numbers, lane numbers (0 to 3, `store.lane_pass.TYPES`), starts and ends
# of its rows.
Rows = tuple[pa.Array, pa.Array, pa.Array, pa.Array]

_INT64_MAX = (1 << 63) - 1  # where a record that would end past the clock's end ends, as in C
_NO_STEPS: tuple[list[int], list[int], list[int | None]] = ([], [], [])
OUT_OF_ORDER = "lanes: rows out of order (they must be sorted by key, then start)"  # as module.c says


class PythonHostPass:
    """`host_pass.c` in Python: the same algorithm (its comment states it)."""

    def __init__(self, rank: pa.Array, start: pa.Array, end: pa.Array, step: pa.Array, known: pa.Array) -> None:
        # rank -> starts, ends, steps (None: a step record without a step number)
        self.steps: dict[int, tuple[list[int], list[int], list[int | None]]] = {}
        for r, s, e, st, k in zip(*(a.to_pylist() for a in (rank, start, end, step, known))):
            starts, ends, ids = self.steps.setdefault(r, ([], [], []))
            starts.append(s)
            ends.append(e)
            ids.append(st if k else None)
        self.lane: int | None = None
        self.stack: list[tuple[int, int]] = []  # (end, id): the lane's records that may hold the next one

    def run(
        self, lane: pa.Array, rank: pa.Array, ts: pa.Array, dur: pa.Array, ids: pa.Array, nests: pa.Array
    ) -> list[pa.Array]:
        steps: list[int | None] = []
        depths: list[int | None] = []
        parents: list[int | None] = []
        stack = self.stack
        for ln, r, t, d, i, nest in zip(
            lane.to_pylist(), rank.to_pylist(), ts.to_pylist(), dur.to_pylist(), ids.to_pylist(), nests.to_pylist()
        ):
            if ln != self.lane:
                self.lane = ln
                stack.clear()
            steps.append(self._step(r, t))
            if not nest:
                depths.append(None)
                parents.append(None)
                continue
            end = min(t + d, _INT64_MAX) if d > 0 else t
            while stack and (t >= stack[-1][0] or end > stack[-1][0]):
                stack.pop()
            depths.append(len(stack))
            parents.append(stack[-1][1] if stack else None)
            stack.append((end, i))
        return [pa.array(steps, pa.int64()), pa.array(depths, pa.int32()), pa.array(parents, pa.int64())]

    def step_at(self, rank: pa.Array, ts: pa.Array) -> pa.Array:
        return pa.array([self._step(r, t) for r, t in zip(rank.to_pylist(), ts.to_pylist())], pa.int64())

    def _step(self, rank: int, ts: int) -> int | None:
        starts, ends, step_ids = self.steps.get(rank, _NO_STEPS)
        k = bisect.bisect_right(starts, ts) - 1
        return step_ids[k] if k >= 0 and ts < ends[k] else None


class PythonLanes:
    """`lanes.c` in Python: the same rows. The state of the open key: `ra`, `rb`, `rall`, the
    running maximum of the ends of its a, b and all intervals longer than 0 (None: none yet); `sa`,
    `sb`, the start of the current island of a, of b; `piece`, the piece of lane 2 being merged."""

    def __init__(self) -> None:
        self.out: list[tuple[int, int, int, int]] = []
        self.started = False  # a key is open
        self._open(0, 0, 0)

    def _open(self, key: int, s: int, e: int) -> None:
        self.key, self.span_s, self.span_e, self.prev_s = key, s, e, s
        self.ra: int | None = None
        self.rb: int | None = None
        self.rall: int | None = None
        self.sa: int | None = None
        self.sb: int | None = None
        self.first_s: int | None = None
        self.piece: list[int] | None = None

    def run(self, key: pa.Array, b: pa.Array, s: pa.Array, e: pa.Array) -> Rows:
        for k, is_b, si, ei in zip(key.to_pylist(), b.to_pylist(), s.to_pylist(), e.to_pylist()):
            if self.started and k != self.key:
                if k < self.key:
                    raise ValueError(OUT_OF_ORDER)
                self._finish_key()
            if not self.started:
                self._open(k, si, ei)
                self.started = True
            elif si < self.prev_s:
                raise ValueError(OUT_OF_ORDER)
            self._row(bool(is_b), si, ei)
        return self._take()

    def finish(self) -> Rows:
        if self.started:
            self._finish_key()
        return self._take()

    def _row(self, is_b: bool, s: int, e: int) -> None:
        pos = e > s
        a_start = not is_b and pos and (self.ra is None or s > self.ra)
        b_start = is_b and pos and (self.rb is None or s > self.rb)
        if a_start and self.sa is not None and self.ra is not None:
            self._emit(0, self.sa, self.ra)
        if b_start and self.sb is not None and self.rb is not None:
            self._emit(1, self.sb, self.rb)
        if pos and self.rall is not None and s > self.rall:
            self._emit(3, self.rall, s)
        self._b_less_a(s)  # between the previous start and this one
        if pos:
            if not is_b and (self.ra is None or e > self.ra):
                self.ra = e
            if is_b and (self.rb is None or e > self.rb):
                self.rb = e
            if self.rall is None or e > self.rall:
                self.rall = e
            if self.first_s is None:
                self.first_s = s
        if a_start:
            self.sa = s
        if b_start:
            self.sb = s
        self.span_e = max(self.span_e, e)
        self.prev_s = s

    def _b_less_a(self, until: int) -> None:
        """Lane 2 from the previous start up to `until`: what b's reach covers there beyond a's."""
        if self.rb is None:
            return
        since = self.ra if self.ra is not None and self.ra > self.prev_s else self.prev_s
        if min(self.rb, until) > since:
            self._piece(since, min(self.rb, until))

    def _piece(self, s: int, e: int) -> None:
        """A piece of lane 2, merged with the one before where they touch."""
        if self.piece is not None and s <= self.piece[1]:
            self.piece[1] = max(self.piece[1], e)
            return
        if self.piece is not None:
            self._emit(2, *self.piece)
        self.piece = [s, e]

    def _finish_key(self) -> None:
        """The open key's last islands, its piece of b after its last start, its gaps before its
        first and after its last interval."""
        if self.sa is not None and self.ra is not None:
            self._emit(0, self.sa, self.ra)
        if self.sb is not None and self.rb is not None:
            self._emit(1, self.sb, self.rb)
        if self.rb is not None:
            self._b_less_a(self.rb)
        if self.piece is not None:
            self._emit(2, *self.piece)
        first = self.first_s if self.first_s is not None else self.span_e
        if first > self.span_s:
            self._emit(3, self.span_s, first)
        if self.rall is not None and self.span_e > self.rall:
            self._emit(3, self.rall, self.span_e)
        self.started = False

    def _emit(self, lane: int, s: int, e: int) -> None:
        self.out.append((self.key, lane, s, e))

    def _take(self) -> Rows:
        out, self.out = self.out, []
        key, lane, s, e = zip(*out) if out else ((), (), (), ())
        return (pa.array(key, pa.int64()), pa.array(lane, pa.int8()), pa.array(s, pa.int64()), pa.array(e, pa.int64()))
