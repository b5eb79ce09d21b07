"""Writes a stream of record batches as a hive-partitioned Parquet dataset, in bounded memory.

A run holds each table as `<table>/device=<d>/step=<n>/part-<uuid>.parquet`. A run has a few
partitions per step, so most files are small (hundreds of rows), and the cost of a file (create
it, encode each column chunk, write the footer) is most of the cost of writing a run. The
`PartitionWriter` therefore:

* cuts each incoming batch into runs of one partition and keeps them, per partition, in memory;
* writes a partition's records as one file once no batch has added to it for a while (records
  arrive in staging order, which is mostly time order, so a step's records come together), or,
  when more than `budget_bytes` wait, writes the least recently added partitions first;
* writes the files on a thread pool, beside the thread that streams the batches in.

A partition whose records come back after its file was written gets a second file: every file
holds whole records and `part-*.parquet` is the layout's glob, so readers see the same rows.
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
import pyarrow.compute as pc
import pyarrow.parquet as pq

from prof_engine.schema import PARTITION_KEYS

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
ROW_GROUP_ROWS = 122_880  # DuckDB's default row group: large partitions get several
IDLE_BATCHES = 2  # a partition no batch added to for this many batches is written
# Parquet settings for small files: zstd, no dictionary (a dictionary page per column chunk costs
# more than it saves at a few hundred rows). Encoding a 760-row slices file takes ~1.0 ms here,
# ~1.5 ms with pyarrow's defaults; most of it is a fixed cost per column chunk.
PARQUET_OPTIONS = {"compression": "zstd", "use_dictionary": False, "store_schema": False,
                   "row_group_size": ROW_GROUP_ROWS}


def partition_dir(device: str, step: int | None) -> str:
    """`device=<d>/step=<n>`, escaped like DuckDB's hive writer (NULL: `__HIVE_DEFAULT_PARTITION__`)."""
    return f"device={quote(device, safe='')}/step={NULL_PARTITION if step is None else int(step)}"


def _runs(batch: pa.RecordBatch) -> list[tuple[int, int]]:
    """(start, end) of the runs of equal (device, step) in `batch`."""
    n = batch.num_rows
    if n < 2:
        return [(0, n)] if n else []
    device, step = batch.column("device"), batch.column("step")
    head, tail = slice(0, n - 1), slice(1, n)
    same_step = pc.fill_null(pc.equal(step[tail], step[head]),
                             pc.equal(pc.is_null(step[tail]), pc.is_null(step[head])))
    changed = pc.invert(pc.and_(pc.equal(device[tail], device[head]), same_step))
    starts = [0, *(i + 1 for i in pc.indices_nonzero(changed).to_pylist())]
    return list(zip(starts, [*starts[1:], n]))


class PartitionWriter:
    """Writes batches of one table (with `device` and `step` columns) under `root`; see the module
    docstring. `close()` waits for every file and returns the number of records written."""

    def __init__(self, root: Path, pool: ThreadPoolExecutor, budget_bytes: int = 16 << 20) -> None:
        self.root = Path(root)
        self.pool = pool
        self.budget = budget_bytes
        self.rows = 0
        self._batches = 0
        self._waiting: OrderedDict[tuple[str, int | None], list[pa.RecordBatch]] = OrderedDict()
        self._touched: dict[tuple[str, int | None], int] = {}
        self._waiting_bytes = 0
        self._writing: list[tuple[Future, int]] = []

    def write(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        runs = _runs(batch)
        if len(runs) > 64 and len(runs) * 16 > batch.num_rows:  # scattered: group it (stable sort)
            batch = batch.take(pc.sort_indices(batch, [(k, "ascending") for k in PARTITION_KEYS]))
            runs = _runs(batch)
        self._batches += 1
        device, step = batch.column("device"), batch.column("step")
        data = batch.drop_columns(list(PARTITION_KEYS))
        for start, end in runs:
            key = (device[start].as_py(), step[start].as_py())
            piece = data.slice(start, end - start)
            self._waiting.setdefault(key, []).append(piece)
            self._waiting.move_to_end(key)
            self._touched[key] = self._batches
            self._waiting_bytes += piece.nbytes
        self.rows += batch.num_rows
        self._write_some()

    def _write_some(self) -> None:
        """Write the partitions no recent batch added to, then the least recently added ones while
        more than the budget waits; wait while more than the budget is being written."""
        for key in [k for k in self._waiting if self._batches - self._touched[k] >= IDLE_BATCHES]:
            self._flush(key)
        while self._waiting and self._waiting_bytes > self.budget:
            self._flush(next(iter(self._waiting)))
        while self._writing and self._writing_bytes() > self.budget:
            self._writing[0][0].result()

    def _writing_bytes(self) -> int:
        """Bytes of the files being written (and a finished write's error, raised here)."""
        for future, _ in self._writing:
            if future.done():
                future.result()
        self._writing = [(f, n) for f, n in self._writing if not f.done()]
        return sum(n for _, n in self._writing)

    def _flush(self, key: tuple[str, int | None]) -> None:
        pieces = self._waiting.pop(key)
        del self._touched[key]
        size = sum(p.nbytes for p in pieces)
        self._waiting_bytes -= size
        self._writing.append((self.pool.submit(_write_file, self.root / partition_dir(*key), pieces), size))

    def close(self) -> int:
        for key in list(self._waiting):
            self._flush(key)
        for future, _ in self._writing:
            future.result()
        self._writing.clear()
        return self.rows


def _write_file(directory: Path, pieces: Iterable[pa.RecordBatch]) -> None:
    """One Parquet file of `pieces` in `directory`, encoded in memory and written with one call
    (pyarrow writing to a path makes ~70 small writes and seeks per file)."""
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_batches(list(pieces)), sink, **PARQUET_OPTIONS)
    os.makedirs(directory, exist_ok=True)
    with open(directory / f"part-{uuid.uuid4()}.parquet", "xb") as f:
        f.write(sink.getvalue())
