"""Writes a stream of record batches as a hive-partitioned Parquet dataset, in bounded memory.

A run holds each table as `<table>/rank=<r>/device=<d>/part-<uuid>.parquet`, the step a column
(`schema.PARTITION_KEYS`); rank and device are directory levels only, not columns of the
files, as in any hive dataset (a reader with hive partitioning, DuckDB's or pyarrow's, reads them
back). The path says the rank so that a reader of some ranks (`prof_engine.open(..., ranks=[...])`,
a task of a distributed executor) lists only their directories and reads no other file's footer.
(Schema 1.0 runs had a level per step too, `.../device=<d>/step=<n>/`; only `prof-engine upgrade`
reads them, and nothing writes them.) A file costs its reader more than a row group does (opening
it, reading its footer), and most of a step's records are a few hundred rows. So a partition's
records go to one file, open while records keep coming, in row groups of up to `budget_bytes` of
records, each a range of steps in staging order (mostly time order), which a step filter skips by
their statistics. The `PartitionWriter`:

* cuts each incoming batch into runs of one partition and keeps them, per partition, in memory;
* writes a partition's waiting records as a row group of its file when more than `budget_bytes`
  wait (the least recently added partitions first), and writes them and closes the file once no
  batch has added to the partition for a while;
* writes on a thread pool, beside the thread that streams the batches in, and waits for the
  writes while what waits and what is being written together pass `budget_bytes`: records stay
  in memory until their row group is written, so that sum is what the writer holds.

A partition whose records come back after its file was closed gets a second file: every file
holds whole records and `part-*.parquet` is the layout's glob, so readers see the same rows.

A table stored in an order (`schema.Table.sort_by`: rank, the partition keys, then columns) is
written by the `SortedWriter` instead, its batches arriving in that order: one file per rank and
partition, its rows in arrival order, so that a reader listing the files by rank and partition
reads the rows in order.
Partition values are escaped as DuckDB's hive writer escapes them (percent-encoding all but
`A-Za-z0-9_.-~`), so any reader of hive-partitioned Parquet reads them back.
"""

from __future__ import annotations

import os
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq

from prof_engine.errors import InputError
from prof_engine.schema import PARTITION_KEYS

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
ROW_GROUP_ROWS = 122_880  # DuckDB's default row group: large partitions get several
IDLE_BATCHES = 2  # a partition no batch added to for this many batches is written and its file closed
# Records a writer holds, waiting and being written together: also the most a row group holds. It
# is part of the import's peak RSS, which must stay under 300 MB for a 329 MB trace.
BUDGET_BYTES = 8 << 20
# Parquet settings (codecs: `column_compression`): dictionary encoding for the columns whose
# values repeat (kinds, names, categories, ranks, steps, threads): a view's `kind = 'api'` filter
# and its group-by on names then read a few hundred bytes per row group instead of every string.
# Not for the others (times, ids, args): their dictionaries would only grow to pyarrow's 1 MB limit
# and be dropped, at a cost in time and size; their integers are stored as deltas instead
# (`column_encoding`).
DICTIONARY_COLUMNS = [
    "rank",
    "step",
    "kind",
    "name",
    "category",
    "op_type",
    "task_type",
    "pid",
    "tid",
    "stream",
    "launch_name",
    "launch_api",
    "depth",
    "input_shapes",
    "input_types",
    "phase",
    "series",
    "scope",
    "op_name",
    "collective",
    "group_name",
    "group_desc",
    "group_ranks",
    "dtype",
    "transport",
    "type",
]
PARQUET_OPTIONS = {"use_dictionary": DICTIONARY_COLUMNS, "store_schema": False, "row_group_size": ROW_GROUP_ROWS}


def column_compression(schema: pa.Schema) -> dict[str, str]:
    """Parquet codecs by column: zstd for text without a dictionary (args: most of a run's bytes,
    JSON that zstd makes ~2x smaller than LZ4 does), LZ4 for the rest (deltas and dictionary
    indices, a few bits a value, which zstd makes little smaller, at a fixed cost per page)."""
    return {
        f.name: "zstd" if pa.types.is_string(f.type) and f.name not in DICTIONARY_COLUMNS else "lz4" for f in schema
    }


def column_encoding(schema: pa.Schema, dictionary: Iterable[str] = DICTIONARY_COLUMNS) -> dict[str, str]:
    """Parquet encodings by column: the integers without a dictionary (times, durations, ids; the
    columns named in `dictionary` have one) as deltas, which the record order keeps small: the
    codec then sees a few bits a value instead of eight bytes (see `column_compression`), and the
    files are smaller and faster to write and to sum."""
    return {f.name: "DELTA_BINARY_PACKED" for f in schema if pa.types.is_integer(f.type) and f.name not in dictionary}


def rank_dir(rank: int | None) -> str:
    """`rank=<r>`, the directory of a rank's files in a table (NULL rank: `__HIVE_DEFAULT_PARTITION__`)."""
    return f"rank={NULL_PARTITION if rank is None else int(rank)}"


def partition_dir(rank: int | None, device: str) -> str:
    """`rank=<r>/device=<d>` (`PARTITION_KEYS`), escaped like DuckDB's hive writer (a NULL value:
    `__HIVE_DEFAULT_PARTITION__`)."""
    path = f"device={quote(device, safe='')}"
    if len(path) > 200:  # a directory name the file system may refuse (255 bytes): no real device label
        raise InputError(f"device label {device[:40]!r}… ({len(device)} characters) is too long to be a device")
    return f"{rank_dir(rank)}/{path}"


def hive_types(files: Iterable[Path]) -> str:
    """DuckDB `hive_types` for a table's files: the rank where it is a directory level (runs of
    schema 2.0), typed as the schema's column; the step only in runs where it is one (slices; every
    table in runs written before the small tables were partitioned by device)."""
    levels = {p.split("=", 1)[0] for f in files for p in f.parent.parts[-3:] if "=" in p}
    types = {"rank": "INTEGER", "device": "VARCHAR", "step": "BIGINT"}
    return "{" + ", ".join(f"'{k}': {t}" for k, t in types.items() if k == "device" or k in levels) + "}"


def _runs(batch: pa.RecordBatch, keys: tuple[str, ...]) -> list[tuple[int, int]]:
    """(start, end) of the runs of equal partition keys in `batch`."""
    import pyarrow.compute as pc  # here, not at the top: a run's readers (`show`) need none of it

    n = batch.num_rows
    if n < 2:
        return [(0, n)] if n else []
    head, tail = slice(0, n - 1), slice(1, n)
    same = None
    for key in keys:
        col = batch.column(key)
        equal = pc.fill_null(pc.equal(col[tail], col[head]), pc.equal(pc.is_null(col[tail]), pc.is_null(col[head])))
        same = equal if same is None else pc.and_(same, equal)
    starts = [0, *(i + 1 for i in pc.indices_nonzero(pc.invert(same)).to_pylist())]
    return list(zip(starts, [*starts[1:], n]))


class PartitionWriter:
    """Writes batches of one table (with `rank`, `device` and `step` columns) under `root`; see the
    module docstring. `close()` waits for every write, closes the files and returns the number of
    records written."""

    def __init__(
        self,
        root: Path,
        pool: ThreadPoolExecutor,
        budget_bytes: int = BUDGET_BYTES,
    ) -> None:
        self.root = Path(root)
        self._split = ("rank", *PARTITION_KEYS)  # a partition's directory levels
        self.pool = pool
        self.budget = budget_bytes
        self.rows = 0
        self.rank_rows: dict[int | None, int] = {}  # the records written of each rank
        self._batches = 0
        self._waiting: OrderedDict[tuple, list[pa.RecordBatch]] = OrderedDict()
        self._touched: dict[tuple, int] = {}
        self._waiting_bytes = 0
        self._waiting_sizes: dict[tuple, int] = {}  # bytes of each partition's waiting records
        self._files: dict[tuple, _File] = {}
        self._writing: list[tuple[Future, int]] = []

    def write(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        runs = _runs(batch, self._split)
        if len(runs) > 64 and len(runs) * 16 > batch.num_rows:  # scattered: group it (stable sort)
            import pyarrow.compute as pc

            batch = batch.take(pc.sort_indices(batch, [(k, "ascending") for k in self._split]))
            runs = _runs(batch, self._split)
        self._batches += 1
        columns = [batch.column(k) for k in self._split]
        data = batch.drop_columns(list(self._split))
        # a piece's bytes, by its share of the batch's rows: a slice's own `nbytes` walks its
        # columns' offsets, too slow to call per piece
        row_bytes = data.nbytes / data.num_rows
        for start, end in runs:
            key = tuple(c[start].as_py() for c in columns)
            self.rank_rows[key[0]] = self.rank_rows.get(key[0], 0) + end - start
            piece = data.slice(start, end - start)
            self._waiting.setdefault(key, []).append(piece)
            self._waiting.move_to_end(key)
            self._touched[key] = self._batches
            size = int(row_bytes * (end - start))
            self._waiting_sizes[key] = self._waiting_sizes.get(key, 0) + size
            self._waiting_bytes += size
        self.rows += batch.num_rows
        self._write_some()

    def _write_some(self) -> None:
        """Write and close the partitions no recent batch added to, then write the least recently
        added ones while more than the budget waits; then wait for the writes while they and what
        waits hold more than the budget."""
        for key in [k for k, n in self._touched.items() if self._batches - n >= IDLE_BATCHES]:
            self._flush(key, last=True)
        while self._waiting and self._waiting_bytes > self.budget:
            self._flush(next(iter(self._waiting)))
        while self._writing and self._writing_bytes() + self._waiting_bytes > self.budget:
            self._writing[0][0].result()

    def _writing_bytes(self) -> int:
        """Bytes of the records being written (and a finished write's error, raised here)."""
        for future, _ in self._writing:
            if future.done():
                future.result()
        self._writing = [(f, n) for f, n in self._writing if not f.done()]
        return sum(n for _, n in self._writing)

    def _flush(self, key: tuple, last: bool = False) -> None:
        """Write the partition's waiting records as a row group of its file; `last`: then close it."""
        pieces = self._waiting.pop(key, [])
        size = self._waiting_sizes.pop(key, 0)
        self._waiting_bytes -= size
        file = self._files.get(key)
        if file is None:
            file = self._files[key] = _File(self.root / partition_dir(*key))
        if last:
            del self._touched[key], self._files[key]
        file.after = self.pool.submit(file.write, pieces, last, file.after)
        self._writing.append((file.after, size))

    def close(self) -> int:
        try:
            for key in list(self._touched):
                self._flush(key, last=True)
            for future, _ in self._writing:
                future.result()
        finally:
            self._writing.clear()
            for file in self._files.values():  # left open only by a failed write
                try:
                    file.close()
                except Exception:  # noqa: BLE001 - already failing: the first error is the one raised
                    pass
            self._files.clear()
        return self.rows


class _File:
    """One Parquet file of a partition, written a row group at a time on the writer's pool. Each
    write waits for the file's previous one (`after`): they run in order, and a write that starts
    a thread waiting was handed out after the one it waits for, so it never waits on a write that
    no thread has taken."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.after: Future | None = None
        self._writer: pq.ParquetWriter | None = None
        self._sink: pa.NativeFile | None = None

    def write(self, pieces: list[pa.RecordBatch], last: bool, after: Future | None) -> None:
        if after is not None:
            after.result()
        if pieces:
            table = pa.Table.from_batches(pieces)
            pieces.clear()  # (the pool's work item holds the list too)
            if self._writer is None:
                os.makedirs(self.directory, exist_ok=True)
                # buffered: pyarrow writing to a path makes ~70 small writes and seeks per row group
                self._sink = pa.output_stream(self.directory / f"part-{uuid.uuid4()}.parquet", buffer_size=1 << 20)
                options = {k: v for k, v in PARQUET_OPTIONS.items() if k != "row_group_size"}
                self._writer = pq.ParquetWriter(
                    self._sink,
                    table.schema,
                    column_encoding=column_encoding(table.schema),
                    **options,
                    compression=column_compression(table.schema),
                )
            self._writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
        if last:
            self.close()

    def close(self) -> None:
        """Close the file (also what a failed write left open: the unit's directory goes anyway)."""
        writer, sink, self._writer, self._sink = self._writer, self._sink, None, None
        try:
            if writer is not None:
                writer.close()
        finally:
            if sink is not None:
                sink.close()


class SortedWriter:
    """Writes batches of one table that arrive ordered by rank and the partition keys under `root`:
    a file per run of equal (rank, `PARTITION_KEYS`), written row group by row group (one file
    open at a time). `close()` returns the number of records written."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.rows = 0
        self.rank_rows: dict[int | None, int] = {}  # the records written of each rank
        self._key: tuple | None = None
        self._file: _File | None = None
        self._pieces: list[pa.RecordBatch] = []

    def write(self, batch: pa.RecordBatch) -> None:
        columns = [batch.column(k) for k in ("rank", *PARTITION_KEYS)]
        data = batch.drop_columns(["rank", *PARTITION_KEYS])
        for start, end in _runs(batch, ("rank", *PARTITION_KEYS)):
            key = tuple(c[start].as_py() for c in columns)
            if key != self._key:
                self._close_file()
                self._key = key
            self.rank_rows[key[0]] = self.rank_rows.get(key[0], 0) + end - start
            self._pieces.append(data.slice(start, end - start))
            if sum(p.num_rows for p in self._pieces) >= ROW_GROUP_ROWS:
                rows = pa.Table.from_batches(self._pieces)
                self._pieces = [b for b in rows.slice(ROW_GROUP_ROWS).to_batches() if b.num_rows]
                self._write_row_group(rows.slice(0, ROW_GROUP_ROWS))
        self.rows += batch.num_rows

    def _write_row_group(self, table: pa.Table) -> None:
        if self._file is None:
            assert self._key is not None  # write() sets the key before its first row group
            self._file = _File(self.root / partition_dir(*self._key))
        self._file.write(table.to_batches(), last=False, after=None)

    def _close_file(self) -> None:
        if self._pieces:
            self._write_row_group(pa.Table.from_batches(self._pieces))
            self._pieces = []
        if self._file is not None:
            self._file.close()
            self._file = None

    def close(self) -> int:
        self._close_file()
        return self.rows
