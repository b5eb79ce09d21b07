"""Export views as CSV / JSON / Parquet files (msprof file names) and the run as a Chrome trace.

Every file is written to a temporary name beside its target and renamed when complete. CSV cells
that a spreadsheet would run as a formula are neutralised (`prof_engine.engine.tables`).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from pathlib import Path

import duckdb

from prof_engine._sql import literal
from prof_engine.engine.connection import query_error
from prof_engine.engine.session import Run
from prof_engine.engine.tables import write_csv
from prof_engine.engine.views import public_views
from prof_engine.errors import QueryError
from prof_engine.store.files import atomic_path, output_file

FORMATS = ("csv", "json", "parquet")
# Views exported when none are named: the summaries (overlap is per interval, not a summary).
SUMMARY_VIEWS = ("op_summary", "op_statistic", "task_time", "api_statistic", "step_trace")


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def export_views(
    run: Run,
    out_dir: str | os.PathLike[str],
    views: Sequence[str] = (),
    fmt: str = "csv",
    stamp: str | None = None,
) -> list[Path]:
    """Write each view to `out_dir/<view>_<YYYYMMDDhhmmss>.<fmt>`; return the files written."""
    if fmt not in FORMATS:
        raise QueryError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    known = [v.name for v in public_views()]
    for v in views:
        if v not in known:
            raise QueryError(f"unknown view {v!r}; views: {', '.join(known)}")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise QueryError(f"{out}: exists and is not a directory")
    stamp = stamp or dt.datetime.now().strftime("%Y%m%d%H%M%S")
    written = []
    run.prepare(views or SUMMARY_VIEWS)  # read through `con`, not `sql`
    for view in views or SUMMARY_VIEWS:
        target = out / f"{view}_{stamp}.{fmt}"
        query = f"SELECT * FROM {_quote_ident(view)}"
        try:
            with atomic_path(target) as tmp:
                if fmt == "csv":
                    reader = run.con.sql(query).to_arrow_reader(100_000)
                    write_csv(reader, reader.schema, str(tmp))
                else:
                    options = "FORMAT json, ARRAY true" if fmt == "json" else "FORMAT parquet, COMPRESSION zstd"
                    run.con.execute(f"COPY ({query}) TO {literal(tmp)} ({options})")
        except (duckdb.Error, OSError) as e:  # a query's error arrives as an OSError through Arrow
            if isinstance(e, duckdb.Error) or str(e).startswith("Out of Memory Error"):
                raise query_error(e) from None
            raise
        written.append(target)
    return written


def export_timeline(run: Run, target: Path | str) -> Path:
    """Write the run as a Chrome trace JSON file (Perfetto / chrome://tracing), streaming. A
    directory as `target` gets `timeline_<YYYYMMDDhhmmss>.json`, as views get their files."""
    target = output_file(target, f"timeline_{dt.datetime.now().strftime('%Y%m%d%H%M%S')}.json")
    run.prepare(["_timeline"])
    reader = run.con.sql("SELECT event FROM _timeline").to_arrow_reader(50_000)
    with atomic_path(target) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write('{"displayTimeUnit": "ms", "otherData": {"producer": "prof-engine"}, "traceEvents": [\n')
        first = True
        for batch in reader:
            events = batch.column(0).to_pylist()
            if events:
                f.write(("" if first else ",\n") + ",\n".join(events))
                first = False
        f.write("\n]}\n")
    return target
