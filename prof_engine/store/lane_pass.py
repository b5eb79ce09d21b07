"""The lane pass of finalisation (step 5 of `queries/store/finalize.sql`): the Overlap Analysis
lanes of a rank's activity, `_lane_activity` (rank, device, step, type, s, e), into `_lanes`
(the `lanes` table's columns).

DuckDB sorts the activity by key (rank, device, step) and start and streams it out; one pass over
that order (`prof_engine/_native/lanes.c`, or `_PythonLanes` where the native helpers are not
built: the same algorithm, the same rows) gives each key's lanes, holding only the key's running
reaches. The lanes go to a Parquet file beside the staged records, which the view `_lanes`
reads (as the host pass does with `_host`).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from prof_engine._native import load
from prof_engine._sql import literal
from prof_engine.store.host_pass import BATCH_ROWS, FILE_OPTIONS, _int64, _Lanes, _values

KEY = ("rank", "device", "step")
SORTED = (
    "SELECT rank, device, step, (type = 'Communication')::UTINYINT AS b, s, e FROM _lane_activity "
    "ORDER BY rank, device, step NULLS FIRST, s"
)
# the lanes' names by number
TYPES = ("Computing", "Communication", "Communication(Not Overlapped)", "Free")
SCHEMA = pa.schema(
    [
        ("rank", pa.int32()),
        ("device", pa.string()),
        ("step", pa.int64()),
        ("type", pa.string()),
        ("ts", pa.int64()),
        ("dur", pa.int64()),
    ]
)


def lane_pass(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Create `_lanes` on `con` from `_lane_activity`: the pass into the Parquet file `path` and a
    view over it."""
    lanes = _PythonLanes() if load() is None else _NativeLanes()
    keys = _Keys()
    writer = pq.ParquetWriter(path, SCHEMA, **FILE_OPTIONS)
    try:
        for batch in con.sql(SORTED).to_arrow_reader(BATCH_ROWS):
            if batch.num_rows:
                number = keys.of(batch)
                b = batch.column("b").cast(pa.uint8())
                s, e = _int64(batch.column("s")), _int64(batch.column("e"))
                _write(writer, keys, lanes.run(number, b, s, e))
        _write(writer, keys, lanes.finish())
    finally:
        writer.close()
    con.execute(f"CREATE OR REPLACE TEMP VIEW _lanes AS SELECT * FROM read_parquet({literal(path)})")


class _Keys:
    """Numbers the keys of a stream of batches sorted by key (from 1, as `_Lanes` numbers threads)
    and keeps each key's values, to give the lanes back their rank, device and step."""

    def __init__(self) -> None:
        self._numbers = _Lanes(KEY)
        self._chunks: list[pa.Table] = []
        self._all: pa.Table | None = None

    def of(self, batch: pa.RecordBatch) -> pa.Array:
        number = self._numbers.of(batch)
        starts = pc.indices_nonzero(self._numbers.changed)
        if len(starts):
            self._chunks.append(pa.Table.from_batches([batch.select(list(KEY)).take(starts)]))
            self._all = None
        return number

    def values(self, numbers: pa.Array) -> list[pa.Array]:
        """rank, device and step of the keys numbered `numbers`."""
        if self._all is None:
            self._all = pa.concat_tables(self._chunks).combine_chunks()
        at = pc.subtract(numbers, 1)
        return [self._all.column(k).chunk(0).take(at) for k in KEY]


# A pass's output: the key numbers, lane numbers (0 to 3, `TYPES`), starts and ends of its rows.
Rows = tuple[pa.Array, pa.Array, pa.Array, pa.Array]


class _NativeLanes:
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


OUT_OF_ORDER = "lanes: rows out of order (they must be sorted by key, then start)"  # as module.c says


class _PythonLanes:
    """`lanes.c` in Python, for installs without the native helpers: the same rows. The state of the
    open key: `ra`, `rb`, `rall`, the running maximum of the ends of its a, b and all intervals
    longer than 0 (None: none yet); `sa`, `sb`, the start of the current island of a, of b; `piece`,
    the piece of lane 2 being merged."""

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


def _write(writer: pq.ParquetWriter, keys: _Keys, rows: Rows) -> None:
    numbers, lane, ts, end = rows
    if not len(numbers):
        return
    rank, device, step = keys.values(numbers)
    writer.write_batch(
        pa.RecordBatch.from_arrays([rank, device, step, _types().take(lane), ts, pc.subtract(end, ts)], schema=SCHEMA)
    )


@cache
def _types() -> pa.Array:
    """`TYPES` as an array, built on first use (pyarrow would import pandas to build it at import)."""
    return pa.array(TYPES, pa.string())
