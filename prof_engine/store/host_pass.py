"""The host pass of finalisation (steps 1 and 2 of `queries/store/finalize.sql` for host records):
each host record's step, and the depth and parent of the records that nest.

DuckDB sorts the host records (`_host_input`, from `queries/store/stage.sql`) by thread (rank,
pid, tid: a lane), start, longer first, then id, and streams them out. One pass over that order gives
each record the step of its rank whose span holds its start (the steps are few; they are read
first), and each nesting record its depth and parent in torch.profiler's tree (a stack of the
records that hold it: `host_pass.c` states the rule), holding only that stack. The records, with
these columns added, go to a Parquet file beside the staged records, which the view `_host` reads:
memory stays bounded whatever the number of records (nothing is held while the sorted stream is
open on the connection, and the table is outside DuckDB's memory budget), and no join pairs the
computed columns with their records.

The pass runs in C (`prof_engine/_native/host_pass.c`), else in its Python port
(`_native/fallback.py`; `_native/passes.py` chooses): the same algorithm, the same results. At
329 MB of Kineto JSON (1.1 M records), within the 80 MB DuckDB has there, the SQL it replaces (a
window over starts and ends, an ASOF join of the sweep with itself, an ASOF join of the records
with the steps and a join of the two) took ~1 s.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from duckdb.func import FunctionNullHandling, PythonUDFType

from prof_engine._native import passes
from prof_engine._sql import literal

SORTED = "SELECT * FROM _host_input ORDER BY rank, pid, tid, ts, dur DESC, id"
THREAD = ("rank", "pid", "tid")
# a step record may have no step number (NULL): records in its span then have none
STEPS = (
    "SELECT rank::BIGINT, start_ns, end_ns, coalesce(step, 0), (step IS NOT NULL)::UTINYINT FROM _steps "
    "ORDER BY rank, start_ns, step"
)
PASS_COLUMNS = ("rank", "ts", "dur", "id")  # what the pass reads after the lane, in this order
ADDED = pa.schema([("step", pa.int64()), ("depth", pa.int32()), ("parent_id", pa.int64())])
DROPPED = ("pid", "tid", "nests")  # what the pass reads that `_host` does not hold
BATCH_ROWS = 16384
# The pass's file (and the lane pass's): read ~7 times by the finalize SQL, and deleted with the
# staging files. Uncompressed: at 329 MB of JSON (550 k host records, ~40 MB), the finalize took
# ~0.1 s (0.17 CPU s) less than with LZ4, which each read undid. No dictionaries.
FILE_OPTIONS = {"compression": "none", "use_dictionary": False}


def host_pass(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Run the pass over `_host_input` on `con` into the Parquet file `path`, and create the view
    `_host` over it: `_host_input`'s columns but `pid`, `tid` and `nests`, with `step`, `depth`
    and `parent_id` (NULL where the record does not nest). Also create the function
    `step_at(rank, ts)` on `con`: the step of `_steps` that holds a start, for the records the
    pass does not see (device and point records), without an ASOF join's sort of them."""
    steps = con.sql(STEPS).to_arrow_table()
    steps = [_int64(steps.column(i).combine_chunks()) for i in range(4)] + [steps.column(4).combine_chunks()]
    state = passes.host_pass(*steps)
    _create_step_at(con, state)
    writer = None
    lanes = _Lanes()
    try:
        for batch in con.sql(SORTED).to_arrow_reader(BATCH_ROWS):
            if not batch.num_rows:
                continue
            rank, ts, dur, ids = (_int64(batch.column(c)) for c in PASS_COLUMNS)
            added = state.run(lanes.of(batch), rank, ts, dur, ids, batch.column("nests").cast(pa.uint8()))
            keep = [c for c in batch.schema.names if c not in DROPPED]
            out = pa.RecordBatch.from_arrays([batch.column(c) for c in keep] + added, names=keep + ADDED.names)
            if writer is None:
                writer = pq.ParquetWriter(path, out.schema, **FILE_OPTIONS)
            writer.write_batch(out)
        if writer is None:  # no host records: an empty file of the right columns
            empty = con.sql(SORTED + " LIMIT 0").to_arrow_table()
            keep = [c for c in empty.schema.names if c not in DROPPED]
            schema = pa.schema([empty.schema.field(c) for c in keep] + list(ADDED))
            writer = pq.ParquetWriter(path, schema)
    finally:
        if writer is not None:
            writer.close()
        # Arrow's allocator keeps the pages of the pass's batches until its decay time: the finalize
        # SQL that follows then came on top of them (10 GB of JSON: 1,305 MiB of RSS there; with
        # them given back, 1,226-1,270 in four runs).
        pa.default_memory_pool().release_unused()
    con.execute(f"CREATE OR REPLACE TEMP VIEW _host AS SELECT * FROM read_parquet({literal(path)})")


class _Lanes:
    """Numbers the threads of a stream of batches sorted by thread (or the groups of any `columns`
    it is sorted by): a record's lane is the number of thread changes before it, from 1 (sorting
    by the threads themselves is cheaper than numbering them in SQL first: 0.19 s against 0.29 s
    for 550 k records; their pid and tid come as ENUMs, `stage.sql`'s `_host_input`)."""

    def __init__(self, columns: tuple[str, ...] = THREAD) -> None:
        self.columns = columns
        self.lane = 0
        self.last: tuple | None = None
        self.changed: pa.Array | None = None  # of the last batch: where a new lane starts

    def of(self, batch: pa.RecordBatch) -> pa.Array:
        # (an ENUM column comes as a dictionary array, its dictionary the same in every batch)
        cols = [c.indices if isinstance(c, pa.DictionaryArray) else c for c in (batch.column(n) for n in self.columns)]
        n = batch.num_rows
        first = tuple(c[0].as_py() for c in cols)
        changed = pa.array([first != self.last], pa.bool_())
        if n > 1:
            head, tail = slice(0, n - 1), slice(1, n)
            differ = None
            for c in cols:
                d = pc.fill_null(pc.not_equal(c[tail], c[head]), pc.xor(pc.is_null(c[tail]), pc.is_null(c[head])))
                differ = d if differ is None else pc.or_(differ, d)
            changed = pa.concat_arrays([changed, differ])
        self.changed = changed
        lanes = pc.add(pc.cumulative_sum(changed.cast(pa.int64())), self.lane)
        self.lane = lanes[-1].as_py()
        self.last = tuple(c[n - 1].as_py() for c in cols)
        return lanes


def _create_step_at(con: duckdb.DuckDBPyConnection, state: passes.HostPass) -> None:
    def step_at(rank: pa.ChunkedArray, ts: pa.ChunkedArray) -> pa.Array:
        rank, ts = _int64(rank.combine_chunks()), _int64(ts.combine_chunks())
        known = pc.and_(pc.is_valid(rank), pc.is_valid(ts))
        if not pc.all(known).as_py():  # NULL in, NULL out
            steps = state.step_at(pc.fill_null(rank, 0), pc.fill_null(ts, 0))
            return pc.if_else(known, steps, pa.scalar(None, pa.int64()))
        return state.step_at(rank, ts)

    try:
        con.remove_function("step_at")
    except (duckdb.InvalidInputException, duckdb.CatalogException):
        pass  # none yet
    con.create_function(
        "step_at",
        step_at,
        ["BIGINT", "BIGINT"],
        "BIGINT",
        type=PythonUDFType.ARROW,
        null_handling=FunctionNullHandling.SPECIAL,
        side_effects=False,
    )


def _int64(column: pa.Array) -> pa.Array:
    return column.cast(pa.int64()) if column.type != pa.int64() else column
