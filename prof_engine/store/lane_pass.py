"""The lane pass of finalisation (step 5 of `queries/store/finalize.sql`): the Overlap Analysis
lanes of a rank's activity, `_lane_activity` (rank, device, step, type, s, e), into `_lanes`
(the `lanes` table's columns).

DuckDB sorts the activity by key (rank, device, step) and start and streams it out; one pass over
that order (`prof_engine/_native/lanes.c`, or its Python port in `_native/fallback.py` where the
native helpers are not built: the same algorithm, the same rows; `_native/passes.py` chooses)
gives each key's lanes, holding only the key's running reaches. The lanes go to a Parquet file
beside the staged records, which the view `_lanes` reads (as the host pass does with `_host`).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from prof_engine._native import passes
from prof_engine._sql import literal
from prof_engine.store.host_pass import BATCH_ROWS, FILE_OPTIONS, _int64, _Lanes

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
    lanes = passes.lanes()
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


def _write(writer: pq.ParquetWriter, keys: _Keys, rows: passes.Rows) -> None:
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
