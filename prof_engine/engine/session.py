"""Open a run for querying (`open_run`, `Run`): its options (`engine.options`), its connection
(`engine.connection`), its views created as queries read them (`engine.catalog`), and the
answers (`Result`)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from prof_engine.engine.catalog import FINALIZE_ONLY, ON_DEMAND, attach, check_steps, create, reads_of, step_numbers
from prof_engine.engine.connection import connect, query_error
from prof_engine.engine.options import RunOptions
from prof_engine.engine.result import Result
from prof_engine.engine.safe_sql import explained_statements, refusal, sandbox
from prof_engine.engine.snapshots import release_snapshots
from prof_engine.engine.views import ViewDef, closure, defining, definitions, public_views, reads
from prof_engine.errors import QueryError, RunError
from prof_engine.store.location import run_path
from prof_engine.store.manifest import read_manifest, restrict, run_devices

__all__ = ["QUALITY_TITLE", "STEPS_TITLE", "Result", "Run", "open_run", "step_numbers"]


# Titles of `Run.summary`'s tables that other faces look for (the report charts the steps).
QUALITY_TITLE = "Data quality (data_quality: what the import had to guess)"


STEPS_TITLE = "Step breakdown (µs)"


# What DuckDB's binder lacks: a table or view, a scalar or table function (`Run._bind`)
_MISSING_NAME = re.compile(r'Catalog Error: [A-Za-z ]*with name "?([^"\s!]+)"? does not exist')


class Run:
    """A run opened for querying: `run.view("op_statistic")`, `run.sql("select ...")`, with one
    `RunOptions` (`options=`; `prof_engine.open` builds it from its keywords).

    `steps` restricts every table (and so every view) to those steps; partitions of other steps
    are never read. `ranks` restricts the run to those ranks: its tables, and the manifest's
    (`run_ranks`, `run_devices`, `run_findings`, `manifest`), hold only theirs, and only their
    directories of the run are listed and read (`<table>/rank=<r>/`); a view of scope `rank` then
    gives the whole run's rows of those ranks (see `engine.views`). `memory_limit` caps DuckDB's
    memory (a size such as "4GB"; default: see `connect`); what does not fit spills to a
    temporary directory. `peak_tflops` gives the
    devices' peaks per precision (`{"bf16": 989.4}`; default: `PROF_ENGINE_PEAK_TFLOPS`), in
    place of the datasheet figures op_flops and flops_summary measure against. The views of
    `queries/` are created in the session when a query first reads them (`_ready`): creating all
    fifty took ~0.25 s of every open, whichever view was then asked for. `read_only_sql` makes
    `sql` safe to serve to others: only SELECT statements (EXPLAIN [ANALYZE] of one, PRAGMAs that read
    the catalog: `refusal`), no file but the run's Parquet readable, nothing written, installed or
    attached, no setting changed (`sandbox`).
    """

    def __init__(self, path: Path | str, *, options: RunOptions | None = None) -> None:
        self.path = run_path(path)
        self.options = options if options is not None else RunOptions()
        self.steps = list(self.options.steps) if self.options.steps else None
        self.ranks = list(self.options.ranks) if self.options.ranks else None
        self.read_only_sql = self.options.read_only_sql
        self._open()

    def _open(self) -> None:
        whole = read_manifest(self.path)
        try:
            self.manifest = restrict(whole, self.ranks)
        except RunError as e:
            raise QueryError(f"{self.path}: {e}") from None
        if self.steps:
            check_steps(self.path, self.manifest, self.steps)
        self.con = connect(self.options.memory_limit)
        # the files of queries/ not created in this session yet
        self._uncreated = set(definitions()) - set(FINALIZE_ONLY)
        try:
            attach(self.con, self.path, whole, self.steps, self.options.peak_tflops, (), self.ranks)
            if self.read_only_sql:
                sandbox(self.con, reads_of(self.con), *self._derived_dirs())
        except BaseException:
            self.close()
            raise

    def _derived_dirs(self) -> list[Path]:
        """Directories of files derived from the run that its views read (`grouped.GroupedRun`)."""
        return []

    def _replaced(self) -> bool:
        """Whether another run now stands at this run's path (`import --force` swapped it in)."""
        try:
            return read_manifest(self.path)["id"] != self.manifest["id"]
        except Exception:  # noqa: BLE001 - no readable run there: not a replacement to reopen
            return False

    def __enter__(self) -> Run:
        return self

    def __repr__(self) -> str:
        m = self.manifest
        steps = len(step_numbers(m))
        return (
            f"<Run {self.path}: {m['source']['format']}, ranks {m['ranks']}, {steps} steps, "
            f"{m['tables'].get('slices', 0):,} records{f', steps {self.steps}' if self.steps else ''}"
            f"{f', restricted to ranks {self.ranks}' if self.ranks else ''}>"
        )

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.con.close()
        release_snapshots(self.con)

    def create_views(self, names: Iterable[str]) -> None:
        """Create the files of queries/ `names` (views, macros), and all they require, that this
        session has not created yet: their SQL, computed where a query reads them."""
        wanted = closure(names) & self._uncreated
        for view in definitions().values():  # each after what it requires: macros bind at creation
            if view.name in wanted:
                create(self.con, view)
        self._uncreated -= wanted

    def prepare(self, names: Iterable[str]) -> None:
        """Make the files of queries/ `names` ready to read: created (`create_views`); a
        `GroupedRun` computes their rank-scope views on its executor first. `sql` prepares what
        its query reads; other readers of `con` (export) call this first."""
        self.create_views(names)

    def _ready(self, query: str) -> None:
        """Prepare what `query` reads, as DuckDB's parser finds it (`views.reads`), in one call
        (a `GroupedRun`: one round of tasks). Views named in its strings (SQL run from a string:
        `query_table('op_summary')`) are created, not computed; a query of the catalog creates
        every view first, so that it lists the run's views. A statement the parser does not
        serialise (EXPLAIN, COPY, PRAGMA...) is bound instead (`_bind`)."""
        try:
            statements = [(s.type, s.query) for s in self.con.extract_statements(query)]
        except (duckdb.Error, ValueError):  # SQL that does not parse: its query says why, with hints
            return
        names: set[str] = set()
        unread: list[str] = []
        catalog = False
        for kind, text in statements:
            if kind == duckdb.StatementType.EXPLAIN:  # what it explains
                text = next((t for t, k in explained_statements(self.con, text) if k), text)
            found = reads(self.con, text)
            if found is None:
                catalog |= kind == duckdb.StatementType.PRAGMA  # PRAGMA show_tables, table_info
                unread += [text] * (kind != duckdb.StatementType.PRAGMA)
                continue
            catalog |= found.catalog
            names |= found.names
            self.create_views(defining(found.in_strings))
        if catalog:
            self.create_views([name for name in definitions() if name not in ON_DEMAND])
        self.prepare(defining(names))
        for text in unread:
            self._bind(text)

    def _bind(self, statement: str) -> None:
        """Prepare what `statement` reads by binding it (`EXPLAIN`: bound and planned, not run) as
        often as DuckDB's binder names a view, macro or table function of queries/ it lacks."""
        for _ in range(len(definitions())):  # each round prepares one file at least
            try:
                self.con.execute(f"EXPLAIN {statement}")
                return
            except duckdb.CatalogException as e:
                missing = _MISSING_NAME.search(str(e))
                files = [f for f in defining([missing[1]]) if f in self._uncreated] if missing else []
                if not files:
                    return  # not one of ours: running the statement says so
                self.prepare(files)
            except (duckdb.Error, ValueError):  # the statement's own error: running it says so
                return

    def sql(self, query: str, params: Iterable[Any] | None = None) -> Result:
        """Run SQL over the run's tables and views; return the result."""
        try:
            if self.read_only_sql and (refused := refusal(self.con, query)):
                raise QueryError(
                    f"--safe runs read-only SQL (SELECT, EXPLAIN [ANALYZE] of a SELECT, PRAGMAs that read "
                    f"the catalog), not {refused}"
                )
            self._ready(query)
            rel = self.con.sql(query, params=list(params) if params is not None else None)
            return Result(rel.to_arrow_table() if rel is not None else pa.table({}))
        except duckdb.IOException as e:
            # the run was replaced (import --force) since it was opened: its files are gone, so
            # the query is answered from the run now at the path, never from a half of each
            if not self._replaced():
                raise query_error(e, hints=True) from None
        except duckdb.Error as e:
            raise query_error(e, hints=True) from None
        self.close()
        self._open()
        return self.sql(query, params)

    def view(self, name: str) -> Result:
        """The rows of a view (see `views()`)."""
        names = [v.name for v in public_views()]
        if name not in names:
            raise QueryError(f"unknown view {name!r}; views: {', '.join(names)}")
        return self.sql(f'SELECT * FROM "{name}"')

    def summary(self, top: int = 10, more: bool = False) -> dict[str, Result]:
        """The tables `prof-engine show` prints: step breakdown, top ops, op types, API calls, and
        advice (its findings, or a row saying none fired and what was checked); with `more` (the
        report), framework ops, the streams' idle gaps by cause, the matrix multiplies' and
        convolutions' FLOPS, communication by op type, memory peaks and the ops that allocated most
        where the run has them, from the `summary_*` table macros (`sql` may call them too)."""
        self.prepare(["_summary"])
        n = max(int(top), 1)
        tables = {}
        # each table is computed once: data_quality's warnings filtered from its rows, here
        import pyarrow.compute as pc  # ~0.1 s: not for opening a run

        quality = self.quality().arrow()
        # a pattern, not a str operand: converting a Python value to Arrow imports pandas (0.3-0.5 s of `show`)
        warned = quality.filter(pc.match_substring_regex(quality["Level"], "^warning$"))
        if warned.num_rows:  # first: every number below rests on these guesses
            tables[QUALITY_TITLE] = Result(warned.select(["Rank", "Device", "Rule", "Count", "Share(%)", "Detail"]))
        tables |= {
            STEPS_TITLE: self._head("summary_steps", n * 10),
            f"Top {n} ops by total duration": self._head("summary_top_ops", n),
            f"Top {n} op types (op_statistic)": self._head("summary_op_types", n),
            f"Top {n} API calls (api_statistic)": self._head("summary_apis", n),
        }
        tables["Advice (advice: what to look at first)"] = self._head("summary_advice", n)  # or "no findings"
        if more:
            for title, macro in (
                (f"Top {n} framework ops by device time (key_averages)", "summary_framework_ops"),
                (f"Top {n} idle gaps per stream, by cause (idle_time)", "summary_idle"),
                (f"Top {n} matrix multiplies and convolutions by device time (op_flops)", "summary_flops"),
                (f"Top {n} communication op types (communication)", "summary_comm"),
                (f"Top {n} memory peaks (memory)", "summary_memory"),
                (f"Top {n} ops by memory allocated (op_memory)", "summary_op_memory"),
            ):
                result = self._head(macro, n)
                if len(result):
                    tables[title] = result
        return tables

    def _head(self, macro: str, limit: int) -> Result:
        """The first `limit` rows of the summary table macro `macro`, with `total` its row count in
        full: the macro's rows are computed once, all of them (summaries: aggregates, a row per
        name, rank or step), and cut here (a count by a second query computed the table again)."""
        rows = self.sql(f"SELECT * FROM {macro}(NULL)").arrow()
        return Result(rows.slice(0, limit), rows.num_rows)

    def quality(self) -> Result:
        """The `data_quality` view: what the import had to guess, per rank, device and rule."""
        return self.sql("SELECT * FROM data_quality")

    def quality_warnings(self) -> list[str]:
        """One line per data-quality warning rule that fired, over every rank and device: what
        `import` prints as warnings and `info` lists (empty when nothing was guessed)."""
        return warning_lines(self.quality())

    def info(self) -> Result:
        """The manifest in brief, as (item, value) rows."""
        m = self.manifest
        steps = step_numbers(m)
        names = {(r, d): name for r, d, name, *_ in run_devices(m) if name}
        devices = [
            f"r{r}:{d}" + (f" ({names[r, d]})" if (r, d) in names else "")
            for r, d in sorted({(d["rank"], d["device"]) for d in m.get("devices", [])})
        ]
        span = (m["end_ns"] - m["start_ns"]) / 1e6 if m.get("start_ns") is not None else None
        items = {
            "source format": m["source"]["format"]
            + (f" (versions {', '.join(m['source']['versions'])})" if m["source"]["versions"] else ""),
            "sources": ", ".join(s["path"] for s in m["sources"]),
            "schema version": m["schema_version"],
            "state": m.get("state", "complete"),  # collector runs: recording, complete or interrupted
            "created": m["created"],
            "ranks": ", ".join(map(str, m["ranks"])),
            "hosts": ", ".join(m.get("hosts", [])) or "-",
            "devices": ", ".join(devices),
            "steps": f"{len(steps)}: {steps[0]}..{steps[-1]}" if steps else "none",
            "time span (ms)": f"{span:.3f}" if span is not None else "-",
            **{f"rows: {t}": f"{n:,}" for t, n in m["tables"].items()},
        }
        warnings = self.quality_warnings()
        items |= {f"data quality: {w.split(':', 1)[0]}": w.split(":", 1)[1].strip() for w in warnings} or {
            "data quality": "no rule fired (prof-engine check)"
        }
        # built by DuckDB: pyarrow would import pandas (~0.3 s) to convert Python values
        return self.sql(
            "SELECT unnest(?::VARCHAR[]) AS item, unnest(?::VARCHAR[]) AS value",
            [list(items), [str(v) for v in items.values()]],
        )

    def export(self, views: Sequence[str] = (), out_dir: str | os.PathLike[str] = ".", fmt: str = "csv") -> list[Path]:
        """Write views (default: the summaries) as msprof-named files in `out_dir`; see engine.export."""
        from prof_engine.engine.export import export_views

        return export_views(self, out_dir, views, fmt)

    def report(self, target: Path | str = "report.html", top: int = 20) -> Path:
        """Write the run as one self-contained HTML page (the `show` tables, a step chart)."""
        from prof_engine.engine.report import write_report

        return write_report(self, target, top)

    def export_timeline(self, target: Path | str) -> Path:
        """Write the run as a Chrome trace JSON file with Overlap Analysis lanes."""
        from prof_engine.engine.export import export_timeline

        return export_timeline(self, target)

    @staticmethod
    def views() -> list[ViewDef]:
        """The public views with their documentation."""
        return public_views()


def warning_lines(quality: Result) -> list[str]:
    """`Run.quality_warnings` of the rows of data_quality `quality`."""
    by_rule: dict[str, list[tuple]] = {}
    for row in quality.rows():
        if row[8] == "warning":  # notes say how the data was read: `check` lists them
            by_rule.setdefault(row[2], []).append(row)
    lines = []
    for rule, rows in by_rule.items():
        count = sum(r[3] for r in rows)
        totals = [r[4] for r in rows]
        share = f" of {sum(totals):,} ({100 * count / sum(totals):.2f} %)" if None not in totals and sum(totals) else ""
        where = sorted({f"r{r[0]}" + (f":{r[1]}" if r[1] else "") for r in rows if r[0] is not None})
        at = f" on {', '.join(where[:6])}{', ...' if len(where) > 6 else ''}" if where else ""
        detail = next((r[6] for r in rows if r[6]), None)
        lines.append(f"{rule}: {count:,}{share}{at}: {rows[0][7]}" + (f" ({detail})" if detail else ""))
    return lines


def open_run(
    path: Path | str,
    steps: Sequence[int] | None = None,
    memory_limit: str | None = None,
    peak_tflops: Mapping[str, float] | None = None,
    read_only_sql: bool = False,
    ranks: Sequence[int] | None = None,
    executor: str | None = None,
    ranks_per_task: int | None = None,
    address: str | None = None,
) -> Run:
    """Open the run directory at `path` for querying (`memory_limit`, `peak_tflops`,
    `read_only_sql`, `ranks`: see `Run`). With `executor` ("local": a process pool; "ray": Ray
    tasks, on the cluster at `address`), the rank-scope views a query reads are computed per group
    of `ranks_per_task` ranks in parallel, the first time one is read (`engine.grouped.GroupedRun`).
    The keywords make one `RunOptions`, checked as it is built."""
    options = RunOptions(
        steps=tuple(steps) if steps else None,
        ranks=tuple(ranks) if ranks else None,
        memory_limit=memory_limit,
        peak_tflops=peak_tflops,
        read_only_sql=read_only_sql,
        executor=executor,
        ranks_per_task=ranks_per_task,
        address=address,
    )
    if options.executor is None:
        return Run(path, options=options)
    from prof_engine.engine.grouped import GroupedRun  # it builds on this module

    return GroupedRun(path, options=options)
