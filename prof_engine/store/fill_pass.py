"""The fill pass of finalisation: the columns finalisation fills in for each staged slice, put in
staging order without sorting them, for `queries/store/pair.sql` to pair with the staged slices.

`queries/store/fill.sql`'s views `_fill_host`, `_fill_device` and `_fill_steps` yield those
columns, each row with its slice's staging position: `_part` (the staged file's place in the
list `staging_slices` reads) and `_row` (its row there). The files' row counts make that a
global position, so each row's place in staging order is known: the pass puts each value there
(a scatter), where a DuckDB sort by position would hold a sorted copy beside the table the rows
came from, and spill within the copy's memory limit. The columns go to a Parquet file in staging order, and the view `_fill` reads it: a plain scan, which
DuckDB reads beside the plain scan of the staged slices (a streaming positional scan).

Memory stays bounded: the positions are cut into windows of `WINDOW_ROWS`, and only one window's
columns are held. With one window (up to ~130 k slices, ~60 MB of Kineto JSON) the rows are put
in place as they stream; with more, the first read sends each row to its window's file (Arrow
IPC beside the staged records), and each window is then read back, put in order and written.
The pass checks that every slice of a listed file got its row once (an unlisted file's slices
get none: the final pass leaves them out).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from prof_engine._sql import literal
from prof_engine.errors import RunError

SOURCES = ("_fill_host", "_fill_device", "_fill_steps")
# The filled-in columns and their types; a column without one holds the code of an ENUM value (its
# values in `_fill_dictionaries`), and becomes a dictionary column.
COLUMNS = (
    ("step", pa.int64()),
    ("depth", pa.int32()),
    ("parent_id", pa.int64()),
    ("self_dur", pa.int64()),
    ("launch_id", pa.int64()),
    ("launch_name", None),
    ("launch_shapes", None),
    ("launch_types", None),
    ("wait", pa.int64()),
    ("launch_api", None),
    ("launch_api_ts", pa.int64()),
    ("launch_api_dur", pa.int64()),
    ("kind", None),
)
# Rows of a window: its columns take ~90 B a row (values and validity), ~12 MB at 2^17.
WINDOW_ROWS = 1 << 17
BATCH_ROWS = 16_384
# Read once, by the copy, and deleted with the staging files: uncompressed, as the host pass's, and
# dictionaries only where the values are one (on the others they cost time to write for nothing).
FILE_OPTIONS = {
    "compression": "none",
    "use_dictionary": [c for c, t in COLUMNS if t is None],
    "write_statistics": False,
}


def fill_pass(con: duckdb.DuckDBPyConnection, staged: list[str], path: Path) -> None:
    """Read `_fill_*` on `con` into the Parquet file `path`, in the order of the staged slices'
    files `staged` (as `staging_slices` lists them), and create the view `_fill` over it (with
    each row's `position`), and the macro `fill_position(part, row)`: a staged slice's position."""
    counts = [pq.read_metadata(p).num_rows for p in staged]
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    total = int(offsets[-1])
    dictionaries = dict(
        zip([c for c, t in COLUMNS if t is None], con.execute("SELECT * FROM _fill_dictionaries").fetchall()[0])
    )
    schema = pa.schema([(c, t or pa.dictionary(pa.int32(), pa.string())) for c, t in COLUMNS])
    windows = [_Window(start, min(start + WINDOW_ROWS, total), schema) for start in range(0, total, WINDOW_ROWS)]
    spill = Path(path).with_suffix("") if len(windows) > 1 else None
    filled = 0
    try:
        for source in SOURCES:
            for batch in con.sql(f"SELECT * FROM {source}").to_arrow_reader(BATCH_ROWS):
                if not batch.num_rows:
                    continue
                at = offsets[batch.column("_part").to_numpy()] + batch.column("_row").to_numpy()
                if at.min() < 0 or at.max() >= total:
                    raise RunError("finalize: a filled-in row's staging position is out of range")
                filled += len(at)
                columns = batch.drop_columns(["_part", "_row"])
                if spill is None:
                    windows[0].put(at, columns)
                else:
                    _send(windows, spill, source, at, columns)
        # a window is written on a thread while the next is put in order (both mostly outside the GIL)
        with pq.ParquetWriter(path, schema, **FILE_OPTIONS) as writer, ThreadPoolExecutor(1) as pool:
            written = None
            for window in windows:
                window.take_spilled()
                table = window.table(dictionaries)
                if written is not None:
                    written.result()
                written = pool.submit(writer.write_table, table)
            if written is not None:
                written.result()
            else:
                writer.write_table(schema.empty_table())
        listed = con.execute("SELECT count(*) FROM _s").fetchall()[0][0]
        if filled != listed:
            raise RunError(f"finalize: {filled} rows filled in for {listed} staged slices")
    finally:
        for window in windows:
            window.discard()
        if spill is not None and spill.exists():
            spill.rmdir()
    con.execute(
        f"CREATE OR REPLACE TEMP VIEW _fill AS SELECT file_row_number AS position, * FROM read_parquet({literal(path)})"
    )
    cases = " ".join(f"WHEN {part} THEN {int(offset)}" for part, offset in enumerate(offsets[:-1]))
    con.execute(
        f"CREATE OR REPLACE TEMP MACRO fill_position(part, row) AS "
        f"({f'CASE part {cases} END' if cases else 'NULL'})::BIGINT + row"
    )


def _send(windows: list[_Window], spill: Path, source: str, at: np.ndarray, columns: pa.RecordBatch) -> None:
    """Append the rows at positions `at` (each within the staged slices) to their windows' files."""
    window = at // WINDOW_ROWS
    order = np.argsort(window, kind="stable")
    bounds = np.searchsorted(window[order], np.arange(len(windows) + 1))
    rows = columns.append_column("_at", pa.array(at)).take(pa.array(order))
    for k in np.flatnonzero(np.diff(bounds)):
        windows[k].spill(spill, source, rows.slice(bounds[k], bounds[k + 1] - bounds[k]))


class _Window:
    """The filled-in columns of the staging positions [start, end)."""

    def __init__(self, start: int, end: int, schema: pa.Schema) -> None:
        self.start, self.end = start, end
        self.schema = schema
        self._values: dict[str, np.ndarray] = {}
        self._valid: dict[str, np.ndarray] = {}
        self._seen: np.ndarray | None = None
        self._files: dict[str, tuple[Path, pa.ipc.RecordBatchStreamWriter]] = {}

    def put(self, at: np.ndarray, columns: pa.RecordBatch) -> None:
        """Put the rows at (global) positions `at` in place."""
        n = self.end - self.start
        if self._seen is None:
            self._seen = np.zeros(n, np.bool_)
        at = at - self.start  # within the window: `fill_pass` checked the positions, `_send` sent them here
        if self._seen[at].any():
            raise RunError("finalize: a staged slice was filled in twice")
        self._seen[at] = True
        for name, column in zip(columns.schema.names, columns.columns):
            values = self._values.get(name)
            if values is None:
                wide = pa.types.is_int64(self.schema.field(name).type)
                values = self._values[name] = np.zeros(n, np.int64 if wide else np.int32)
                self._valid[name] = np.zeros(n, np.bool_)
            values[at] = column.fill_null(0).to_numpy()
            self._valid[name][at] = column.is_valid().to_numpy(zero_copy_only=False)

    def spill(self, directory: Path, source: str, rows: pa.RecordBatch) -> None:
        if source not in self._files:
            directory.mkdir(exist_ok=True)
            path = directory / f"{self.start}-{source}.arrow"
            self._files[source] = (path, pa.ipc.new_stream(pa.OSFile(str(path), "wb"), rows.schema))
        self._files[source][1].write_batch(rows)

    def take_spilled(self) -> None:
        """Put the rows `spill` sent to this window's files in place, and delete the files."""
        for source, (path, writer) in list(self._files.items()):
            writer.close()
            with pa.memory_map(str(path)) as source_file:
                for batch in pa.ipc.open_stream(source_file):
                    self.put(batch.column("_at").to_numpy(), batch.drop_columns(["_at"]))
            path.unlink()
            del self._files[source]

    def table(self, dictionaries: dict[str, list[str]]) -> pa.Table:
        """The window's columns (then let go of), a dictionary column's values from `dictionaries`."""
        n = self.end - self.start
        arrays = []
        for field in self.schema:
            values, valid = self._values.pop(field.name, None), self._valid.pop(field.name, None)
            if values is None:  # no source filled it in: NULL throughout
                arrays.append(pa.nulls(n, field.type))
                continue
            assert valid is not None  # made together with its values
            buffers = [pa.py_buffer(np.packbits(valid, bitorder="little")), pa.py_buffer(values)]
            if pa.types.is_dictionary(field.type):
                arrays.append(
                    pa.DictionaryArray.from_arrays(
                        pa.Array.from_buffers(pa.int32(), n, buffers), pa.array(dictionaries[field.name], pa.string())
                    )
                )
            else:
                arrays.append(pa.Array.from_buffers(field.type, n, buffers))
        self._seen = None
        return pa.table(arrays, schema=self.schema)

    def discard(self) -> None:
        """Close and delete what a failed pass left."""
        for path, writer in self._files.values():
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - already failing
                pass
            path.unlink(missing_ok=True)
        self._files.clear()
