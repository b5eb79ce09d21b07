"""Nesting of host records on their threads (step 2 of `queries/store/finalize.sql`).

DuckDB sorts the records to nest (`_nest_input`: id, lane, ts, dur) by lane, start, longer
first, then id, and streams them out; one pass over that order gives each record its depth (the
records of its lane open when it starts) and its parent (the latest record before it one level
up), holding only the records open at the time. The result goes to a Parquet file beside the
staged records, which `_nesting` reads: memory stays bounded whatever the number of records, and
nothing is held while the sorted stream is open on the connection.

The pass runs in C (`prof_engine/_native/nest.c`), else in Python (`_nest_batch`): the same
algorithm, the same results. At 1.1 M records (329 MB of Kineto JSON), within the 80 MB DuckDB
has there, the window-function sweep this replaces took ~0.55 s, the sort and pass ~0.1 s.
"""

from __future__ import annotations

import ctypes
import heapq
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from prof_engine._native import load

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("depth", pa.int32(), nullable=False),
                    pa.field("parent_id", pa.int64())])
SORTED = "SELECT id, lane, ts, dur FROM _nest_input ORDER BY lane, ts, dur DESC, id"
BATCH_ROWS = 65_536


def nest(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Nest the records of `_nest_input` on `con` into the Parquet file `path`, and create the
    view `_nesting(id, depth, parent_id)` over it."""
    lib = load()
    state = _Python() if lib is None else _Native(lib)
    try:
        with pq.ParquetWriter(path, SCHEMA, compression="none") as out:
            for batch in con.sql(SORTED).to_arrow_reader(BATCH_ROWS):
                if batch.num_rows:
                    out.write_batch(state.nest(*(_int64(batch.column(i)) for i in range(4))))
    finally:
        state.close()
    con.execute(f"CREATE OR REPLACE TEMP VIEW _nesting AS SELECT * FROM read_parquet('{_sql_text(path)}')")


def _int64(column: pa.Array) -> pa.Array:
    return column.cast(pa.int64()) if column.type != pa.int64() else column


def _sql_text(path: Path) -> str:
    return str(path).replace("'", "''")


class _Native:
    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        self.state = lib.pe_nest_new()
        if not self.state:
            raise MemoryError("nesting: out of memory")

    def nest(self, ids: pa.Array, lanes: pa.Array, ts: pa.Array, durs: pa.Array) -> pa.RecordBatch:
        n = len(ids)
        depth, parent = pa.allocate_buffer(4 * n), pa.allocate_buffer(8 * n)
        valid = pa.allocate_buffer((n + 7) // 8)
        if self.lib.pe_nest(self.state, n, _address(lanes), _address(ts), _address(durs), _address(ids),
                            depth.address, parent.address, valid.address):
            raise MemoryError("nesting: out of memory")
        parents = pa.Array.from_buffers(pa.int64(), n, [valid, parent])
        return pa.RecordBatch.from_arrays([ids, pa.Array.from_buffers(pa.int32(), n, [None, depth]), parents],
                                          schema=SCHEMA)

    def close(self) -> None:
        self.lib.pe_nest_free(self.state)


def _address(column: pa.Array) -> int:
    """The address of a non-null int64 array's first value (the sorted columns have no NULLs)."""
    if column.null_count:
        raise ValueError("nesting: NULL in a sorted key")
    return column.buffers()[1].address + column.offset * 8


class _Python:
    """`nest.c` in Python, for machines without a C compiler."""

    def __init__(self) -> None:
        self.lane: int | None = None
        self.open: list[tuple[int, int]] = []  # (end, 1 if zero-length): a heap
        self.last: dict[int, int] = {}  # depth -> the latest record's id there

    def nest(self, ids: pa.Array, lanes: pa.Array, ts: pa.Array, durs: pa.Array) -> pa.RecordBatch:
        ids_l = ids.to_pylist()
        depths: list[int] = []
        parents: list[int | None] = []
        for i, lane, t, dur in zip(ids_l, lanes.to_pylist(), ts.to_pylist(), durs.to_pylist()):
            if lane != self.lane:
                self.lane, self.open = lane, []
            while self.open and (self.open[0][0] < t or (self.open[0][0] == t and not self.open[0][1])):
                heapq.heappop(self.open)
            d = len(self.open)
            depths.append(d)
            parents.append(self.last[d - 1] if d else None)
            self.last[d] = i
            heapq.heappush(self.open, (t + dur, 0) if dur > 0 else (t, 1))
        return pa.RecordBatch.from_arrays([ids, pa.array(depths, pa.int32()), pa.array(parents, pa.int64())],
                                          schema=SCHEMA)

    def close(self) -> None:
        pass
