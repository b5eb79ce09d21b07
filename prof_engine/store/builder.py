"""Build a run directory from streamed record batches, atomically.

A run is built one import unit (a trace file, a rank directory: one rank) at a time, each in a
directory of its own, `RunBuilder.unit_dir(index)`. The importer hands the unit's record batches
to a `StagingSink`, which appends them to staging Parquet files (nothing is held in memory);
`finalize_unit` then runs `queries/store/finalize.sql` in DuckDB over them (step assignment,
nesting, self time, launch links; the host records' steps and nesting in one native pass,
`host_pass`) within a memory limit and streams each table into a hive-partitioned dataset
(`partitions.PartitionWriter`). Steps, nesting and launch links never
cross ranks, so a unit is finalised alone, in the process that converted it: memory is bounded
per unit whatever the number of ranks, and `--jobs` workers finalise in parallel.
`RunBuilder.finalize` then moves the units' files into the run by renames, writes `manifest.json`
and renames the finished directory into place. Until that rename nothing is visible at the run's
path; on any error the temporary directory is removed.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import tempfile
import uuid
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from prof_engine import schema
from prof_engine._process import address_space_hint, address_space_limit
from prof_engine._resources import data_dir
from prof_engine._sql import list_literal, literal, no_progress_bar, size_bytes
from prof_engine.errors import InputError, RunError
from prof_engine.store.files import RunLock, exchange, merge_tree, remove_debris, restrict_tree, write_text
from prof_engine.store.fill_pass import fill_pass
from prof_engine.store.host_pass import host_pass
from prof_engine.store.lane_pass import lane_pass
from prof_engine.store.manifest import MANIFEST, check_replaceable, share_process_groups
from prof_engine.store.partitions import PartitionWriter, SortedWriter, column_encoding, hive_types

STREAM_ROWS = 16_384  # rows per batch streamed from DuckDB into the partition writer
# Bounds of DuckDB's memory limit in finalize: at least a base plus some per DuckDB thread (each
# holds buffers of its own), at most the cap.
FINALIZE_MEMORY_BASE, FINALIZE_MEMORY_PER_THREAD, FINALIZE_MEMORY_CAP = 48 << 20, 16 << 20, 896 << 20
FINALIZE_BYTES_PER_RECORD = 40
# The share of that limit DuckDB has while the finalised tables are copied out (`finalize_unit`):
# the copy streams, and DuckDB then holds only the slices' sort into staging order, which spills;
# Arrow's batches and the partition writers hold the rest. (The host pass's sort cannot spill so.)
COPY_MEMORY_SHARE = 0.6
# DuckDB's limit in the host pass (`host_pass_memory_limit`): a share of the finalize limit, as the
# Arrow batches it hands the pass come on top of DuckDB's buffers; but at least 28 B per staged
# record, below which its sort of the host records runs out of memory.
HOST_PASS_MEMORY_SHARE, HOST_PASS_BYTES_PER_RECORD = 0.75, 28
# DuckDB threads of one unit's finalize, at most: each holds buffers of its own within the memory
# limit, and more threads were no faster (16 threads ran a 200 MB trace's finalize out of memory).
FINALIZE_THREADS = 4
# Files of queries/ that finalize.sql uses: macros only.
FINALIZE_MACROS = ("_classify.sql", "_lanes.sql", "store/manifest.sql")


@dataclass
class SourceFile:
    """One imported source file and what the importer learnt about it."""

    path: str
    format: str
    rank: int
    index: int  # the file index its staged records carry in `rank` until finalisation
    offset_ns: int = 0
    version: str | None = None
    bytes: int = 0
    events: int = 0
    host: str | None = None
    devices: list[dict[str, Any]] = field(default_factory=list)
    lanes: list[dict[str, Any]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.host, str):  # a damaged side file's hostname (a list, a number) names no host
            self.host = None


def duckdb_connect(
    spill_dir: Path | None = None, memory_limit: str | None = None, threads: int | None = None
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection set up for bounded-memory work (spills to `spill_dir`), with `threads`
    from the start (DuckDB would otherwise start one per core, and their stacks, first), and as
    many of its asynchronous I/O threads (DuckDB 2.0 starts four per core: 64 on 16 cores)."""
    config: dict[str, Any] = {"preserve_insertion_order": False}
    if threads:
        config["threads"] = config["async_threads"] = max(1, int(threads))
    con = duckdb.connect(config=config)
    no_progress_bar(con)
    if spill_dir is not None:
        con.execute("SET temp_directory = ?", [str(spill_dir)])
    if memory_limit:
        con.execute("SET memory_limit = ?", [memory_limit])
    return con


def finalize_memory_limit(staging: Path, threads: int = 2) -> str:
    """DuckDB's memory limit for finalising the records staged under `staging` on `threads`.

    DuckDB spills what does not fit, but some of its operators (the nesting sweep's window, hash
    and ASOF joins) need working memory that grows with the rows, and fail below ~24 B per staged
    record. So: 40 B per record, at most 896 MB (~10 GB of JSON), and at least 48 MB plus 16 MB per
    thread, what small traces need beside DuckDB's fixed costs. Not more: DuckDB sizes some working
    memory by the limit, so it is much of the import's peak RSS."""
    return _finalize_limit(staged_records(staging), threads)


def _finalize_limit(records: int, threads: int) -> str:
    floor = FINALIZE_MEMORY_BASE + FINALIZE_MEMORY_PER_THREAD * max(1, threads)
    cap = FINALIZE_MEMORY_CAP
    if (space := address_space_limit()) is not None:  # under `ulimit -v` DuckDB spills, not aborts
        cap = min(cap, max(space // 4, 16 << 20))
    return f"{min(max(records * FINALIZE_BYTES_PER_RECORD, floor), cap) >> 20}MB"


def staged_records(staging: Path) -> int:
    """Records staged under `staging` (from the Parquet footers)."""
    return sum(pq.read_metadata(p).num_rows for p in Path(staging).glob("*/*.parquet"))


def memory_share(limit: str, share: float) -> str:
    """`share` of a DuckDB memory limit (`80MB`, `2GB`, `76.2 MiB`), in bytes, at least 1 MiB."""
    size = size_bytes(limit)
    return limit if size is None else f"{max(int(size * share), 1 << 20)}B"


def host_pass_memory_limit(limit: str, records: int) -> str:
    """DuckDB's limit while the host pass runs, for `records` staged records finalised within
    `limit`: HOST_PASS_MEMORY_SHARE of it, but at least HOST_PASS_BYTES_PER_RECORD per record, and
    at most all of it."""
    size = size_bytes(limit)
    if size is None:
        return limit
    return f"{int(min(size, max(size * HOST_PASS_MEMORY_SHARE, records * HOST_PASS_BYTES_PER_RECORD)))}B"


def stage_views(
    con: duckdb.DuckDBPyConnection,
    staging: Path,
    files: list[tuple[int, int, int]],
    whole: bool = True,
    host_pass_limits: tuple[str, str] | None = None,
) -> set[str]:
    """Set up `queries/store/finalize.sql` on `con` and run it (`stage.sql`, the host pass,
    `finalize.sql`, the lane pass, `fill.sql`, the fill pass, then `pair.sql`): `files` lists (file index, rank, offset ns)
    of the staged units; `staging/<table>/*.parquet` hold their records. Afterwards the views `final_<table>` hold the
    canonical records (and `staged_summary` sums them up).
    Returns the tables that have staged files (`copy_tables`' `only`). `whole`: the staged
    records are every record of their ranks (an import unit; not a batch of a live run), so what
    is derived across a rank's records (`schema.derived_tables`, which have `final_<table>` views
    too, and slices' stream waits) is right; otherwise the waits are left NULL. `host_pass_limits`:
    DuckDB's memory limit during the host pass, and after it."""
    con.register(
        "_files_arrow",
        pa.table(
            {
                "file": pa.array([f[0] for f in files], pa.int32()),
                "rank": pa.array([f[1] for f in files], pa.int32()),
                "offset_ns": pa.array([f[2] for f in files], pa.int64()),
            }
        ),
    )
    con.execute("CREATE OR REPLACE TEMP TABLE files AS SELECT * FROM _files_arrow")
    # The same as scalar macros (NULL for a file not listed), for the final pass over the staged
    # slices: there a join with `files` made DuckDB hash the records instead of `files`.
    for macro, column, sql_type in (("file_rank", 1, "INTEGER"), ("file_offset", 2, "BIGINT")):
        cases = " ".join(f"WHEN {int(f[0])} THEN {int(f[column])}" for f in files)
        value = f"CASE file {cases} END" if files else "NULL"
        con.execute(f"CREATE OR REPLACE MACRO {macro}(file) AS ({value})::{sql_type}")
    with_files = set()
    staged_slices: list[str] = []
    for name, table in schema.stored_tables().items():
        if table.derived:  # computed by finalize.sql, never staged
            continue
        staged = sorted(str(p) for p in (Path(staging) / name).glob("*.parquet"))
        if name == "slices":
            staged_slices = staged
        if staged:
            with_files.add(name)
            con.execute(
                f"CREATE OR REPLACE TEMP VIEW staging_{name} AS SELECT *, file_index AS _part, "
                f"file_row_number AS _row FROM read_parquet({list_literal(staged)})"
            )
        else:
            con.register(f"_empty_{name}", table.arrow_schema.empty_table())
            con.execute(
                f"CREATE OR REPLACE TEMP VIEW staging_{name} AS SELECT *, 0::UBIGINT AS _part, "
                f"0::BIGINT AS _row FROM _empty_{name}"
            )
    for name in FINALIZE_MACROS:
        con.execute((data_dir("queries") / name).read_text())
    con.execute(f"CREATE OR REPLACE MACRO finalize_whole() AS {str(bool(whole)).lower()}")
    con.execute((data_dir("queries") / "store" / "stage.sql").read_text())
    if host_pass_limits:
        con.execute("SET memory_limit = ?", [host_pass_limits[0]])
    host_pass(con, Path(staging) / "_host.parquet")
    if host_pass_limits:
        con.execute("SET memory_limit = ?", [host_pass_limits[1]])
    con.execute((data_dir("queries") / "store" / "finalize.sql").read_text())
    lane_pass(con, Path(staging) / "_lanes.parquet")
    con.execute((data_dir("queries") / "store" / "fill.sql").read_text())
    fill_pass(con, staged_slices, Path(staging) / "_fill.parquet")
    con.execute((data_dir("queries") / "store" / "pair.sql").read_text())
    return with_files


def copy_tables(
    con: duckdb.DuckDBPyConnection,
    target: Path,
    only: set[str] | None = None,
    by_rank: dict[int | None, dict[str, int]] | None = None,
) -> dict[str, int]:
    """Write each `final_<table>` view as a hive-partitioned dataset `target/<table>/`; rows per table.
    `only`: the tables to write (the others have nothing staged). `by_rank`: filled with each
    rank's rows per table. Files are written on as many threads as DuckDB may use on `con`."""
    rows = {}
    threads = int(con.execute("SELECT current_setting('threads')").fetchall()[0][0])
    with ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="prof-engine-write") as pool:
        for name, table in schema.stored_tables().items():
            if only is not None and name not in only:
                rows[name] = 0
                continue
            (Path(target) / name).mkdir(parents=True)
            query = f"SELECT * FROM final_{name}"
            if table.sort_by:  # one file per rank and partition, in order (`SortedWriter`)
                query += " ORDER BY " + ", ".join(f'"{c}" NULLS LAST' for c in table.sort_by)
                writer: SortedWriter | PartitionWriter = SortedWriter(Path(target) / name)
            else:
                writer = PartitionWriter(Path(target) / name, pool)
            try:
                for batch in con.sql(query).to_arrow_reader(STREAM_ROWS):
                    writer.write(_canonical(batch, table))
            finally:
                rows[name] = writer.close()
            if by_rank is not None:
                for rank, n in writer.rank_rows.items():
                    by_rank.setdefault(rank, {})[name] = n
    return rows


def _canonical(batch: pa.RecordBatch, table: schema.Table) -> pa.RecordBatch:
    """`batch` with the table's column types (DuckDB may hand out other string or int types)."""
    if batch.schema.names != table.column_names:
        raise RunError(f"finalize: final_{table.name} has columns {batch.schema.names}, not {table.column_names}")
    if all(f.type == c.arrow_type for f, c in zip(batch.schema, table.columns)):
        return batch
    return batch.cast(pa.schema([pa.field(c.name, c.arrow_type) for c in table.columns]))


def staged_summary(
    con: duckdb.DuckDBPyConnection, spans: dict[int, list[int | None]] | None = None, whole: bool = False
) -> dict[str, Any]:
    """Devices, steps and time span of the slices `stage_views` finalised on `con`, for the manifest.
    `spans`: filled with each rank's time span (its `start_ns`, `end_ns`). `whole`: the records are
    all of their ranks' (an import unit), so a rank without step records has the steps its records
    state (a live batch's records may belong to a step recorded in another batch)."""
    return _summary(con, "_s", "_step_records", spans, "final_slices" if whole else None)


def _summary(
    con: duckdb.DuckDBPyConnection,
    slices: str,
    steps: str | None = None,
    spans: dict[int, list[int | None]] | None = None,
    stated: str | None = None,
) -> dict[str, Any]:
    """The manifest's devices, steps and time span of the view `slices`, whose step records the view
    `steps` holds (default: `slices`) (queries/store/manifest.sql); `spans` as `staged_summary`'s.
    `stated`: the canonical slices, whose stated steps a rank without step records has."""
    devices = con.execute(f"SELECT * FROM manifest_devices('{slices}')").fetchall()
    if spans is not None:  # a rank's span as the run's: over its devices' spans
        for r, _, _, _, a, b in devices:
            span = spans.setdefault(r, [None, None])
            if a is not None:
                span[0] = a if span[0] is None else min(span[0], a)
            if b is not None:
                span[1] = b if span[1] is None else max(span[1], b)
    step_rows = con.execute(f"SELECT * FROM manifest_steps('{steps or slices}')").fetchall()
    unmarked = sorted({d[0] for d in devices if d[0] is not None} - {r for r, *_ in step_rows})
    if stated and unmarked:
        listed = ", ".join(str(int(r)) for r in unmarked)
        step_rows += con.execute(f"SELECT * FROM manifest_stated_steps('{stated}', [{listed}]::INTEGER[])").fetchall()
    starts, ends = [d[4] for d in devices if d[4] is not None], [d[5] for d in devices if d[5] is not None]
    return {
        "devices": [{"rank": r, "device": d, "records": n, "tasks": t} for r, d, n, t, _, _ in devices],
        "steps": [{"rank": r, "step": s, "start_ns": a, "end_ns": b} for r, s, a, b in step_rows],
        "start_ns": min(starts, default=None),
        "end_ns": max(ends, default=None),
    }


def summarise(con: duckdb.DuckDBPyConnection, root: Path) -> dict[str, Any]:
    """Devices, steps and time span of the slices written under `root`, for the manifest (as
    `staged_summary` sums them up for the records finalize.sql finalised)."""
    files = list(Path(root).glob("slices/**/*.parquet"))
    if not files:
        return {"devices": [], "steps": [], "start_ns": None, "end_ns": None}
    for name in ("_classify.sql", "store/manifest.sql"):
        con.execute((data_dir("queries") / name).read_text())
    con.execute(
        f"CREATE OR REPLACE TEMP VIEW _written_slices AS SELECT * FROM read_parquet({literal(f'{root}/slices/**/*.parquet')}, "
        f"hive_partitioning=true, hive_types = {hive_types(files)})"
    )
    return _summary(con, "_written_slices", stated="_written_slices")


@dataclass
class Finalized:
    """What `finalize_unit` wrote: rows per table, and the devices, steps and time span of its
    slices (the manifest's summary, in `staged_summary`'s shape)."""

    rows: dict[str, int]
    summary: dict[str, Any]
    # per rank: rows per table, and (start_ns, end_ns) as the summary's: a batch of sources'
    # share of it (`importers._split`)
    rank_rows: dict[int | None, dict[str, int]] | None = None
    rank_spans: dict[int, list[int | None]] | None = None


def finalize_unit(
    unit: Path,
    files: list[tuple[int, int, int]],
    *,
    memory_limit: str | None = None,
    threads: int | None = None,
    label: str | None = None,
) -> Finalized:
    """Finalise the records staged under `unit/staging/` into the tables under `unit/out/`.

    `files` lists (file index, rank, offset ns) of the units staged there (see `stage_views`).
    `memory_limit` caps DuckDB (default: `finalize_memory_limit` of the staged records); `threads`
    caps its threads (default: one per core). `label` names the unit in errors. The staging files
    are removed once the tables are written."""
    unit = Path(unit)
    staging = unit / "staging"
    # Arrow's allocator keeps some of what the conversion freed, which DuckDB would otherwise come on top of
    pa.default_memory_pool().release_unused()
    if memory_limit:  # a limit the caller gave holds throughout
        limit, host_limits = memory_limit, None
    else:
        records = staged_records(staging)
        limit = _finalize_limit(records, threads or os.cpu_count() or 1)
        host_limits = (host_pass_memory_limit(limit, records), limit)
    con = duckdb_connect(unit / "_spill", limit, threads)
    try:
        staged = stage_views(con, staging, files, host_pass_limits=host_limits)
        if "slices" in staged:  # a unit holds every record of its rank: its derived tables are whole
            staged |= set(schema.derived_tables())
        con.execute("SET memory_limit = ?", [memory_share(limit, COPY_MEMORY_SHARE)])  # the copy streams
        rank_rows: dict[int | None, dict[str, int]] = {}
        rank_spans: dict[int, list[int | None]] = {}
        rows = copy_tables(con, unit / "out", staged, rank_rows)
        summary = staged_summary(con, rank_spans, whole=True)
    except (duckdb.OutOfMemoryException, duckdb.OutOfRangeException, OSError) as e:
        # streamed through Arrow (copy_tables), DuckDB's errors arrive as an OSError
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        if isinstance(e, duckdb.OutOfRangeException) or message.startswith("Out of Range Error"):
            raise InputError(
                f"{label or unit}: a time or duration past what int64 ns hold (the year 2262; corrupt or "
                f"not a profiler's output?): {message}"
            ) from None
        if not isinstance(e, duckdb.OutOfMemoryException) and not message.startswith("Out of Memory Error"):
            raise
        how = address_space_hint() or "pass a larger memory_limit to import_trace (e.g. '2GB')"
        raise RunError(
            f"{label or unit}: finalising the import ran out of memory within DuckDB's limit of "
            f"{limit}; {how} ({str(e).splitlines()[0]})"
        ) from None
    finally:
        con.close()
    shutil.rmtree(staging, ignore_errors=True)
    shutil.rmtree(unit / "_spill", ignore_errors=True)
    return Finalized(rows, summary, rank_rows, rank_spans)


class Totals:
    """Rows per table, devices, steps and time span of several finalised parts of a run (import
    units, or the collector's batches), summed for the manifest. A device's records add up, a
    step's span is the union of its parts' spans."""

    def __init__(self) -> None:
        self.rows = dict.fromkeys(schema.stored_tables(), 0)
        self._devices: dict[tuple[int, str], list[int]] = {}  # records, tasks
        self._steps: dict[tuple[int, int], list[int]] = {}
        self._span: list[int | None] = [None, None]

    def add(self, rows: dict[str, int], summary: dict[str, Any]) -> None:
        """Add what `copy_tables` and `staged_summary` said of one part."""
        for name, n in rows.items():
            self.rows[name] += n
        for d in summary["devices"]:
            counts = self._devices.setdefault((d["rank"], d["device"]), [0, 0])
            counts[0] += d["records"]
            counts[1] += d["tasks"]
        for st in summary["steps"]:
            span = self._steps.setdefault((st["rank"], st["step"]), [st["start_ns"], st["end_ns"]])
            span[0], span[1] = min(span[0], st["start_ns"]), max(span[1], st["end_ns"])
        for i, (value, pick) in enumerate(((summary["start_ns"], min), (summary["end_ns"], max))):
            if value is not None:
                self._span[i] = value if self._span[i] is None else pick(self._span[i], value)

    def manifest_fields(self) -> dict[str, Any]:
        """The manifest's `tables`, `devices`, `steps`, `start_ns` and `end_ns`."""
        return {
            "tables": dict(self.rows),
            "devices": [
                {"rank": r, "device": d, "records": n, "tasks": t} for (r, d), (n, t) in sorted(self._devices.items())
            ],
            "steps": [
                {"rank": r, "step": s, "start_ns": a, "end_ns": b} for (r, s), (a, b) in sorted(self._steps.items())
            ],
            "start_ns": self._span[0],
            "end_ns": self._span[1],
        }


_PENDING = 4  # staged batches waiting to be written, at most
# Staging Parquet is written to be read once, soon: LZ4, faster than zstd where size matters little;
# dictionaries only for the columns of few values (pyarrow would build one for args, times and ids
# until it outgrew its limit); no statistics, which nothing reads; integers as deltas, as in the run
# store (`column_encoding`), which makes the files ~30 % smaller and no slower to write.
STAGING_OPTIONS: dict[str, Any] = {
    "compression": "lz4",
    "use_dictionary": ["device", "kind", "name", "category", "pid", "tid", "phase"],
    "write_statistics": False,
}


class StagingSink:
    """Appends record batches to staging Parquet files under `root/<table>/`, one file per table.

    Each import unit (one trace file, one rank directory) gets its own sink, possibly in a worker
    process; `discard()` removes what a failed unit wrote, so the other units are not affected.
    """

    def __init__(self, root: Path, *, threaded: bool = True) -> None:
        self.root = Path(root)
        self.tag = uuid.uuid4().hex
        self.tables: set[str] = set()  # the tables this sink wrote a file of
        self._rolled = 0  # files begun on another schema (`append`)
        self._writers: dict[str, pq.ParquetWriter] = {}
        # Batches are encoded and written on a thread of their own (Parquet encoding releases the
        # GIL), beside the converter; at most _PENDING of them wait, which bounds the memory. A
        # small file's few batches are written in line (`threaded=False`): the thread's start and
        # handoffs cost a tiny trace more than the overlap saves.
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="prof-engine-stage") if threaded else None
        self._pending: deque[Future] = deque()

    def __call__(self, table: str, batch: pa.RecordBatch) -> None:
        schema.validate(table, batch)
        if self._pool is None:
            self._write(table, batch)
            return
        while len(self._pending) >= _PENDING or (self._pending and self._pending[0].done()):
            self._pending.popleft().result()  # raises a failed write's error here
        self._pending.append(self._pool.submit(self._write, table, batch))

    def _write(self, table: str, batch: pa.RecordBatch) -> None:
        w = self._writers.get(table)
        if w is not None and not w.schema.equals(batch.schema):  # a source of the batch types a column apart
            w.close()
            self._rolled += 1
            w = None
        if w is None:
            path = self.root / table / f"{self.tag}{'' if not self._rolled else f'.{self._rolled}'}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            encoding = column_encoding(batch.schema, STAGING_OPTIONS["use_dictionary"])
            w = self._writers[table] = pq.ParquetWriter(path, batch.schema, column_encoding=encoding, **STAGING_OPTIONS)
            self.tables.add(table)
        w.write_batch(batch)

    def append(self, batches: list[tuple[str, pa.RecordBatch]]) -> None:
        """Write batches a `MemorySink` held (validated there)."""
        for table, batch in batches:
            self._write(table, batch)

    def close(self) -> None:
        try:
            while self._pending:
                self._pending.popleft().result()
        finally:
            for w in self._writers.values():
                w.close()
            self._writers.clear()
            if self._pool is not None:
                self._pool.shutdown(wait=True)

    def discard(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - what is being thrown away may have failed to write
            pass
        for path in self.root.glob(f"*/{self.tag}*.parquet"):
            path.unlink()


class MemorySink:
    """Holds a small source's record batches (validated as `StagingSink` does) until it is known
    to be whole: the sources of a batch then share one `StagingSink`, one file per table (a file
    per source and table made finalising 100 tiny traces read 500 files, each pass)."""

    def __init__(self) -> None:
        self.batches: list[tuple[str, pa.RecordBatch]] = []

    def __call__(self, table: str, batch: pa.RecordBatch) -> None:
        schema.validate(table, batch)
        self.batches.append((table, batch))

    @property
    def tables(self) -> set[str]:
        return {t for t, _ in self.batches}

    def ts_range(self, table: str = "slices") -> tuple[int, int] | None:
        """The least and greatest `ts` of `table`'s rows (None: no row has one)."""
        import pyarrow.compute as pc

        los, his = [], []
        for t, batch in self.batches:
            if t == table:
                mm = pc.min_max(batch.column("ts"))
                if mm["min"].is_valid:
                    los.append(mm["min"].as_py())
                    his.append(mm["max"].as_py())
        return (min(los), max(his)) if los else None


class RunBuilder:
    """Context manager that builds the run at `out`; see the module docstring."""

    def __init__(self, out: Path, *, force: bool = False) -> None:
        self.out = Path(out).absolute()
        self.force = force
        self.lock = RunLock(self.out)  # one writer per run; what killed writers left is ours to remove
        try:
            remove_debris(self.out)
            check_replaceable(self.out, force)
            self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.", suffix=".importing", dir=self.out.parent))
        except BaseException:
            self.lock.release()
            raise

    def __enter__(self) -> RunBuilder:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()
        self.lock.release()

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.lock.release()

    def unit_dir(self, index: int) -> Path:
        """The directory import unit `index` stages into (`staging/`) and is finalised into (`out/`)."""
        return self.tmp / "_units" / f"{index:06d}"

    def finalize(
        self,
        units: list[tuple[SourceFile, Finalized]],
        source_format: str,
        metadata: dict[str, Any] | None = None,
        skipped: list[dict[str, str]] | None = None,
        findings: list[dict[str, Any]] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Path:
        """Move the finalised units' files into the run, write the manifest, publish the run.

        `units`: each unit's source and what `finalize_unit` made of it in `unit_dir(index)`.
        `findings`: what the import guessed about the run as a whole (`store.quality`). `extra`:
        more manifest fields (an upgraded collector run's `state`)."""
        totals = Totals()
        for source, done in units:
            merge_tree(self.unit_dir(source.index) / "out", self.tmp)
            totals.add(done.rows, done.summary)
        shutil.rmtree(self.tmp / "_units", ignore_errors=True)
        sources = [s for s, _ in units]
        # each source's rows per table: what a run restricted to some ranks counts (`restrict`);
        # a shallow copy (`asdict` deep-copies every source's info: minutes at thousands of ranks)
        entries, groups = share_process_groups(
            [dict({f.name: getattr(s, f.name) for f in fields(s)}, rows=done.rows) for s, done in units]
        )
        manifest = {
            "id": uuid.uuid4().hex,
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "schema_version": schema.schema_version(),
            "source": {"format": source_format, "versions": sorted({s.version for s in sources if s.version})},
            "sources": entries,
            **({"process_groups": groups} if groups else {}),
            "ranks": sorted({s.rank for s in sources}),
            "hosts": sorted({s.host for s in sources if s.host}),
            "metadata": metadata or {},
            "skipped": skipped or [],
            "findings": findings or [],
            "derived": schema.derived(),
            **totals.manifest_fields(),
            **(extra or {}),
        }
        write_text(self.tmp / MANIFEST, json.dumps(manifest, indent=1, default=str))
        restrict_tree(self.tmp)
        self._publish()
        return self.out

    def _publish(self) -> None:
        """The finished run takes `out`'s place; an old run there is swapped out in one step where
        the system can, so a reader opening `out` meanwhile finds the old run or the new one."""
        if self.out.is_dir() and exchange(self.tmp, self.out):
            shutil.rmtree(self.tmp, ignore_errors=True)  # the old run, now at the staging path
            return
        old = None
        if self.out.exists():
            old = self.out.with_name(f".{self.out.name}.{uuid.uuid4().hex[:8]}.replaced")
            self.out.rename(old)
        self.tmp.rename(self.out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
